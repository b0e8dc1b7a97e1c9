#!/usr/bin/env bash
# Sparse mixture of experts: the same MoE step exported with its experts as
# grouped products (one BLAS gemm per expert on its own rows) and dense
# (every expert on every row, the routing as a mask), each lowered for
# compute=fast and timed by fsdp-run on the CPU; the contraction FLOPs of
# both counted on the exported IR. Results: docs/BENCHMARKS.md, "Sparse
# mixture of experts".
#
#   bench/moe/run.sh                 # 8 experts, top 2, 1,024 tokens, dim 256, ffn 512
#   bench/moe/run.sh --tokens 4096   # longer sequences
#   bench/moe/run.sh --smoke         # seconds: a tiny model, 1 step
#   bench/moe/run.sh --help          # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and torch + torch-mlir in the Python venv (FSDP_PYTHON).
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" moe torch -- "$@"

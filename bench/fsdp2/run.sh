#!/usr/bin/env bash
# 8-rank training step against PyTorch FSDP2 (fully_shard per unit, gloo,
# 8 processes) on the same model, weights and data: fsdp-run's threads and
# mpi backends. Results: docs/BENCHMARKS.md, "Against PyTorch FSDP2".
#
#   bench/fsdp2/run.sh               # MLP 512 and GPT D=128, 8 ranks (~1-2 min)
#   bench/fsdp2/run.sh --no-mpi      # threads backend only
#   bench/fsdp2/run.sh --blas openblas,mkl   # each backend with each BLAS
#   bench/fsdp2/run.sh --smoke       # seconds: a small MLP on 2 ranks
#   bench/fsdp2/run.sh --help        # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the venv with torch (python/requirements-torch.txt;
# FSDP_PYTHON=python to use another interpreter).
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" fsdp2 torch bin -- "$@"

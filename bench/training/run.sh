#!/usr/bin/env bash
# Training-loop benchmarks: resident memory over many steps (with and
# without buffer deallocation), the AdamW acceptance run against numpy
# (200 steps) and a PyTorch GPT trained against torch.optim (200 steps;
# needs torch). Results: docs/BENCHMARKS.md, "Training-loop memory" and
# "Training: AdamW against numpy".
#
#   bench/training/run.sh                 # 1,000 steps (resident memory)
#   bench/training/run.sh --steps 5000    # longer
#   bench/training/run.sh --smoke         # seconds: 20 steps
#   bench/training/run.sh --help          # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the Python tools' venv (.venv, see
# docs/PYTHON.md; FSDP_PYTHON=python to use another interpreter with numpy).
# Extra arguments go to bench.py.
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" training -- "$@"

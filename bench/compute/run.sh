#!/usr/bin/env bash
# Compute benchmark: single-rank step time against torch eager on the same
# model, weights and batch (compute=fast and compute=loops), and compile to
# executable time against the number of parameters. Results:
# docs/BENCHMARKS.md, "Compute".
#
#   bench/compute/run.sh                 # both tables (~10 min on 2 cores)
#   bench/compute/run.sh --no-loops      # skip the scalar reference runs
#   bench/compute/run.sh --smoke         # seconds: MLP only, two steps
#   bench/compute/run.sh --help          # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the venv with torch (python/requirements-torch.txt;
# FSDP_PYTHON=python to use another interpreter).
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" compute torch -- "$@"

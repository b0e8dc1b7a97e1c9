#!/usr/bin/env bash
# Memory benchmark: static peak bytes by kind (fsdp-memory-report) of the
# generator's transformer with and without activation recompute, for world
# sizes 1, 2, 4, 8, next to the allocation high-water mark fsdp-run
# measures where it reports one; every recompute run is checked against
# the run without (bit for bit, or within a reduction's summation order).
# Results: docs/BENCHMARKS.md, "Memory".
#
#   bench/memory/run.sh                 # 4 blocks, dim 32, W = 1, 2, 4, 8
#   bench/memory/run.sh --smoke         # seconds: tiny model, W = 1, 2
#   bench/memory/run.sh --help          # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the Python tools' venv (.venv, see
# docs/PYTHON.md; FSDP_PYTHON=python to use another interpreter with numpy).
# Extra arguments go to bench.py.
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" memory -- "$@"

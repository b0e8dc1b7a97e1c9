#!/usr/bin/env bash
# Bucketing and scheduling benchmark: collectives per step bucketed vs
# unbucketed, step time on fsdp-run's threads backend, and fsdp-opt compile
# time against the number of parameters. Results: docs/BENCHMARKS.md,
# "Buckets and scheduling".
#
#   bench/buckets/run.sh                      # 8/32/128 blocks; runs 8 and 32
#   bench/buckets/run.sh --run-blocks 8,32,128 --run-rounds 1   # also run 128 (~10 min JIT)
#   bench/buckets/run.sh --smoke              # seconds: one block, one round, + mpi
#   bench/buckets/run.sh --help               # every option of bench.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the Python tools' venv (.venv, see
# docs/PYTHON.md; FSDP_PYTHON=python to use another interpreter with numpy).
# Extra arguments go to bench.py.
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" buckets -- "$@"

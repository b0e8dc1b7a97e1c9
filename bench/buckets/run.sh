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
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FSDP_BUILD:-$root/build}
python=${FSDP_PYTHON:-$root/.venv/bin/python}
if [ ! -x "$python" ] && ! command -v "$python" >/dev/null; then
  echo "bench/buckets/run.sh: no Python interpreter $python (make setup creates .venv; or set FSDP_PYTHON)" >&2
  exit 1
fi
for arg in "$@"; do
  case "$arg" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exec "$python" "$root/bench/buckets/bench.py" --help
    ;;
  esac
done
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/buckets/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
exec "$python" "$root/bench/buckets/bench.py" --fsdp-opt "$build/bin/fsdp-opt" \
  --fsdp-run "$build/bin/fsdp-run" --python "$python" "$@"

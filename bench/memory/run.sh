#!/usr/bin/env bash
# Memory benchmark: static peak bytes by kind (fsdp-memory-report) of the
# generator's transformer with and without activation recompute, for world
# sizes 1, 2, 4, 8, next to the allocation high-water mark fsdp-run
# measures where it reports one; every recompute run is checked
# bit-identical to the run without. Results: docs/BENCHMARKS.md, "Memory".
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
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FSDP_BUILD:-$root/build}
python=${FSDP_PYTHON:-$root/.venv/bin/python}
if [ ! -x "$python" ] && ! command -v "$python" >/dev/null; then
  echo "bench/memory/run.sh: no Python interpreter $python (make setup creates .venv; or set FSDP_PYTHON)" >&2
  exit 1
fi
for arg in "$@"; do
  case "$arg" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exec "$python" "$root/bench/memory/bench.py" --help
    ;;
  esac
done
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/memory/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
exec "$python" "$root/bench/memory/bench.py" --fsdp-opt "$build/bin/fsdp-opt" \
  --fsdp-run "$build/bin/fsdp-run" --python "$python" "$@"

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
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FSDP_BUILD:-$root/build}
python=${FSDP_PYTHON:-$root/.venv/bin/python}
if [ ! -x "$python" ] && ! command -v "$python" >/dev/null; then
  echo "bench/training/run.sh: no Python interpreter $python (make setup creates .venv; or set FSDP_PYTHON)" >&2
  exit 1
fi
for arg in "$@"; do
  case "$arg" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exec "$python" "$root/bench/training/bench.py" --help
    ;;
  esac
done
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/training/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
exec "$python" "$root/bench/training/bench.py" --fsdp-opt "$build/bin/fsdp-opt" \
  --fsdp-run "$build/bin/fsdp-run" --python "$python" "$@"

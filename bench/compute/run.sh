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
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FSDP_BUILD:-$root/build}
python=${FSDP_PYTHON:-$root/.venv/bin/python}
for arg in "$@"; do
  case "$arg" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exec "$python" "$root/bench/compute/bench.py" --help
    ;;
  esac
done
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "bench/compute/run.sh: $python cannot import torch (pip install -r python/requirements-torch.txt)" >&2
  exit 1
fi
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/compute/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
exec "$python" "$root/bench/compute/bench.py" --fsdp-opt "$build/bin/fsdp-opt" \
  --fsdp-run "$build/bin/fsdp-run" --python "$python" "$@"

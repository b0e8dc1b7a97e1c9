#!/usr/bin/env bash
# 8-rank training step against PyTorch FSDP2 (fully_shard per unit, gloo,
# 8 processes) on the same model, weights and data: fsdp-run's threads and
# mpi backends. Results: docs/BENCHMARKS.md, "Against PyTorch FSDP2".
#
#   bench/fsdp2/run.sh               # MLP 512 and GPT D=128, 8 ranks (~1-2 min)
#   bench/fsdp2/run.sh --no-mpi      # threads backend only
#   bench/fsdp2/run.sh --smoke       # seconds: a small MLP on 2 ranks
#   bench/fsdp2/run.sh --help        # every option of bench.py
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
    exec "$python" "$root/bench/fsdp2/bench.py" --help
    ;;
  esac
done
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "bench/fsdp2/run.sh: $python cannot import torch (pip install -r python/requirements-torch.txt)" >&2
  exit 1
fi
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/fsdp2/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
exec "$python" "$root/bench/fsdp2/bench.py" --bin "$build/bin" --python "$python" "$@"

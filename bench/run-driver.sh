#!/usr/bin/env bash
# Runs a benchmark's driver, bench/NAME/bench.py, for bench/NAME/run.sh:
#
#   bench/run-driver.sh RUN_SH NAME [torch] [bin] [driver=FILE.py] -- ARGS...
#
# `--help` in ARGS prints RUN_SH's header comment and the driver's options.
# Otherwise it checks the Python interpreter (FSDP_PYTHON, default .venv),
# torch with `torch`, and build/bin/fsdp-opt and fsdp-run (FSDP_BUILD), then
# runs the driver with --fsdp-opt/--fsdp-run (or --bin DIR with `bin`),
# --python and ARGS. `driver=FILE.py` runs bench/NAME/FILE.py instead.
set -euo pipefail
run_sh=$1 name=$2
shift 2
torch=0 bin=0 driver_file=bench.py
while [ "$1" != -- ]; do
  case "$1" in
  torch) torch=1 ;;
  bin) bin=1 ;;
  driver=*) driver_file=${1#driver=} ;;
  esac
  shift
done
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FSDP_BUILD:-$root/build}
python=${FSDP_PYTHON:-$root/.venv/bin/python}
driver=$root/bench/$name/$driver_file
if [ ! -x "$python" ] && ! command -v "$python" >/dev/null; then
  echo "bench/$name/run.sh: no Python interpreter $python (make setup creates .venv; or set FSDP_PYTHON)" >&2
  exit 1
fi
for arg in "$@"; do
  case "$arg" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$run_sh" | sed '$d; s/^# \{0,1\}//'
    exec "$python" "$driver" --help
    ;;
  esac
done
if [ "$torch" = 1 ] && ! "$python" -c "import torch" 2>/dev/null; then
  echo "bench/$name/run.sh: $python cannot import torch (pip install -r python/requirements-torch.txt)" >&2
  exit 1
fi
for tool in "$build/bin/fsdp-opt" "$build/bin/fsdp-run"; do
  if [ ! -x "$tool" ]; then
    echo "bench/$name/run.sh: missing $tool: build it first (ninja -C $build fsdp-opt fsdp-run)" >&2
    exit 1
  fi
done
if [ "$bin" = 1 ]; then
  exec "$python" "$driver" --bin "$build/bin" --python "$python" "$@"
fi
exec "$python" "$driver" --fsdp-opt "$build/bin/fsdp-opt" \
  --fsdp-run "$build/bin/fsdp-run" --python "$python" "$@"

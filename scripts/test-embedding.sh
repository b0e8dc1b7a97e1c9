#!/usr/bin/env bash
# Installs the project into a scratch prefix, builds examples/embed against the
# installed CMake package and runs it, then runs the installed fsdp-opt and
# fsdp-run on a small step, and examples/run-c (the C API) on the same step
# (no LD_LIBRARY_PATH: the install RPATH must do).
#   scripts/test-embedding.sh BUILD_DIR [PYTHON]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?build dir}" && pwd)
python=${2:-python3}
prefix="$build/embed-test/install"
work="$build/embed-test/work"
rm -rf "$build/embed-test"
unset LD_LIBRARY_PATH
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/examples/embed" -B "$build/embed-test/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir >/dev/null
cmake --build "$build/embed-test/build" >/dev/null
"$build/embed-test/build/fsdp-embed-example" "$src/examples/hsdp_mlp_step.mlir" \
  fsdp-layout-report > "$build/embed-test/out.txt"
grep -q "rank 7 (1, 3): local 1x16 offsets \[9, 0\] slot 3x16 padding 128 bytes" "$build/embed-test/out.txt"
grep -q "func.func @step" "$build/embed-test/out.txt"
echo "embedding example: OK"

# The installed tools.
mkdir -p "$work"
"$prefix/bin/fsdp-opt" "$src/test/Tools/Inputs/step.mlir" --fsdp-pipeline=lower=true \
  -o "$work/l.mlir"
if [ -x "$prefix/bin/fsdp-run" ]; then
  "$python" "$src/test/Tools/Inputs/make_step_inputs.py" "$work/in"
  "$prefix/bin/fsdp-run" "$work/l.mlir" --inputs "$work/in" --outputs "$work/out"
  "$python" - "$work" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
w, x, y = (np.load(f"{d}/{p}") for p in ("in/w.npy", "in/x.npy", "out/y.npy"))
assert np.allclose(y, x[:2] @ w.T, rtol=1e-6), "installed fsdp-run: wrong y"
PY
  echo "installed fsdp-opt and fsdp-run: OK"
  # A C program linking the installed libfsdprun runs the same step.
  cmake -S "$src/examples/run-c" -B "$build/embed-test/run-c" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir >/dev/null
  cmake --build "$build/embed-test/run-c" >/dev/null
  "$build/embed-test/run-c/fsdp-run-c-example" "$work/l.mlir"
else
  echo "installed fsdp-opt: OK (fsdp-run not built)"
fi

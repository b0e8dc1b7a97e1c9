#!/usr/bin/env bash
# Installs the project into a scratch prefix, builds examples/embed against the
# installed CMake package and runs it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?build dir}
prefix="$build/embed-test/install"
rm -rf "$build/embed-test"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/examples/embed" -B "$build/embed-test/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir >/dev/null
cmake --build "$build/embed-test/build" >/dev/null
"$build/embed-test/build/fsdp-embed-example" "$src/examples/hsdp_mlp_step.mlir" \
  fsdp-layout-report > "$build/embed-test/out.txt"
grep -q "rank 7 (1, 3): local 1x16 offsets \[9, 0\] slot 3x16 padding 128 bytes" "$build/embed-test/out.txt"
grep -q "func.func @step" "$build/embed-test/out.txt"
echo "embedding example: OK"

#!/bin/sh
# Configures and builds runtime/ alone (fsdprt, libfsdprun, fsdp-run) in the
# folder $2 from the sources $1, with no LLVM on the search paths, and fails
# when anything of it would use LLVM or MLIR: a compile command naming an
# LLVM folder, or a library LLVM's or MLIR's among the runner's dependencies.
# Further arguments go to cmake's configure step.
set -eu
src=$1
build=$2
shift 2
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
generator=""
if command -v ninja >/dev/null 2>&1; then
  generator="-G Ninja"
fi
# No LLVM folder on the paths the tools search.
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -i 'llvm' | paste -sd: -)
export PATH
unset LD_LIBRARY_PATH CPATH CPLUS_INCLUDE_PATH LIBRARY_PATH CMAKE_PREFIX_PATH \
      MLIR_DIR LLVM_DIR || true
# shellcheck disable=SC2086
cmake -S "$src/runtime" -B "$build" $generator $launcher \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "$@" \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target fsdp-run fsdprun >"$build.build.log" 2>&1 ||
  { tail -50 "$build.build.log"; exit 1; }
if grep -i -E 'llvm|mlir' "$build/compile_commands.json" | grep -v -E '"file"|"output"' |
   grep -i -E -- '-I[^ ]*(llvm|mlir)|isystem [^ ]*(llvm|mlir)' >/dev/null; then
  echo "a compile command of the runner names an LLVM or MLIR folder"
  exit 1
fi
for f in "$build/bin/fsdp-run" "$build/libfsdprun.so"; do
  if ldd "$f" | grep -i -E 'libLLVM|libMLIR'; then
    echo "$f needs LLVM or MLIR"
    exit 1
  fi
done
echo "runner built without LLVM: $build/bin/fsdp-run"

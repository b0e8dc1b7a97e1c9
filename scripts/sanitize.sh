#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer builds.
#
#   scripts/sanitize.sh            the full run: build-sanitize/ holds the
#                                  whole project; runs the runtime's unit tests
#                                  (threads, C API, mpi, quantization), the .npy
#                                  reader's, the compiler's lit suites
#                                  (test/Dialect, test/Transforms,
#                                  test/Conversion, test/Memory,
#                                  test/Compute, test/GPU) under the instrumented
#                                  fsdp-opt and the fsdp-run lit tests
#                                  (test/Tools and the MLP end-to-end suite),
#                                  with leak checking (scripts/lsan.supp
#                                  names what LLVM, MLIR and MPI keep until
#                                  exit).
#                                  The first build compiles the compiler too
#                                  (about 15-20 minutes on 2 cores; ccache helps
#                                  afterwards).
#   scripts/sanitize.sh --quick    the MLIR-free part only (cmake/sanitize: the
#                                  runtime, the .npy reader, the layout
#                                  arithmetic) and its unit tests, and the
#                                  GPU runtime on the CUDA emulation
#                                  (build/sanitize-quick/gpu-emulation), with
#                                  leak checking; part of `make test` (about 3
#                                  minutes on 2 cores from scratch, seconds
#                                  with ccache). Folder: build/sanitize-quick.
#   FSDP_SANITIZE_DIR=DIR          another build folder
#   FSDP_JOBS=N                    build and test jobs (default 2)
# Exits non-zero on any sanitizer report or failing test.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${FSDP_JOBS:-2}
# vptr needs RTTI, which LLVM and MLIR are built without.
san="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all -fno-omit-frame-pointer"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
export UBSAN_OPTIONS=print_stacktrace=1

if [ "${1:-}" = "--quick" ]; then
  dir=${FSDP_SANITIZE_DIR:-build/sanitize-quick}
  cmake -S cmake/sanitize -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    "${launcher[@]}" >/dev/null
  targets=(fsdprt_tests fsdprt_c_api_test fsdprt_quant_unittests NpyTest LayoutMathTest
           ArenaPackingTest)
  if grep -q '^fsdprt_mpi_tests:' <<<"$(ninja -C "$dir" -t targets all)"; then
    targets+=(fsdprt_mpi_tests fsdprt_mpi_startup_test)
  fi
  # A failed build prints its errors (ninja writes them to stdout).
  quiet_build() { out=$(ninja "$@" 2>&1) || { echo "$out"; return 1; }; }
  quiet_build -C "$dir" -j"$jobs" "${targets[@]}"
  status=0
  echo "== runtime, .npy reader and layout unit tests (ASan + UBSan + LSan) =="
  # Open MPI's own allocations are still live at exit: no leak check there.
  for run in "1 -E mpi|quant.python|gpu|nccl|kernel_emulation|cuda_host" "0 -R mpi"; do
    read -r leaks flag regex <<<"$run"
    if out=$(ASAN_OPTIONS=detect_leaks=$leaks:abort_on_error=0 \
      ctest --test-dir "$dir" "$flag" "$regex" -j "$jobs" --no-tests=ignore \
      --output-on-failure 2>&1); then
      grep -E "tests passed|tests failed" <<<"$out" || true
    else
      echo "$out"
      status=1
    fi
  done
  # The GPU runtime and the nccl backend against the host emulation of CUDA,
  # cuBLAS and NCCL (no toolkit needed): the runtime alone, configured with
  # its GPU option, in a folder of its own (cmake/sanitize leaves the GPU
  # runtime out). Skipped where the emulation cannot be built (no Python).
  emu="$dir/gpu-emulation"
  cmake -S runtime -B "$emu" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DFSDPRT_ENABLE_GPU=ON -DFSDPRT_ENABLE_NCCL=OFF -DFSDPRT_ENABLE_MPI=OFF \
    -DFSDPRT_BUILD_BENCH=OFF -DFSDPRT_QUANT_BUILD_BENCH=OFF \
    "${launcher[@]}" >/dev/null
  if grep -q '^fsdprt_gpu_emulation_tests:' <<<"$(ninja -C "$emu" -t targets all)"; then
    quiet_build -C "$emu" -j"$jobs" fsdprt_gpu_emulation_tests
    echo "== GPU runtime and nccl backend on the CUDA emulation (ASan + UBSan + LSan) =="
    if out=$(ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
      ctest --test-dir "$emu" -R '^gpu_emulation\.' -j "$jobs" \
      --output-on-failure 2>&1); then
      grep -E "tests passed|tests failed" <<<"$out" || true
    else
      echo "$out"
      status=1
    fi
  fi
  exit $status
fi

dir=${FSDP_SANITIZE_DIR:-build-sanitize}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMLIR_DIR="${MLIR_DIR:-/usr/lib/llvm-22/lib/cmake/mlir}" \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DFSDP_BUILD_BENCH=OFF -DFSDPRT_QUANT_BUILD_BENCH=OFF \
  -DFSDP_ASAN_UNINSTRUMENTED_LLVM=ON "${launcher[@]}" >/dev/null
targets=(fsdp-opt fsdp-run fsdprt_tests fsdprt_c_api_test fsdprt_quant_unittests FSDPNpyTests)
all_targets=$(ninja -C "$dir" -t targets all)
if grep -q '^fsdprt_mpi_tests:' <<<"$all_targets"; then
  targets+=(fsdprt_mpi_tests fsdprt_mpi_startup_test)
fi
ninja -C "$dir" -j"$jobs" "${targets[@]}"

# LLVM, MLIR and the JIT-compiled code are not instrumented: containers they
# share with the project cannot be annotated. Leaks are checked for the
# project's own code; what LLVM, MLIR (their registries, the JIT) and MPI
# allocate once and keep until exit is suppressed by module.
export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=1:abort_on_error=0
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export FSDP_SANITIZE=1 # lit: tests that cannot run under ASan are unsupported
status=0
echo "== runtime and .npy unit tests (ASan + UBSan) =="
ctest --test-dir "$dir" -L "runtime|quant" -E "mpi|quant.python|gpu|nccl|kernel_emulation|cuda_host" \
  -j "$jobs" --output-on-failure || status=1
# Open MPI's own allocations are still live at exit, and so is an abort
# notice whose send a peer never took: no leak check there.
ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
  ctest --test-dir "$dir" -R mpi -j "$jobs" --output-on-failure || status=1
ctest --test-dir "$dir" -R "^Npy" -j "$jobs" --output-on-failure || status=1
lit=.venv/bin/lit
[ -x "$lit" ] || lit=lit
echo "== compiler lit tests under the instrumented fsdp-opt (ASan + UBSan + LSan) =="
"$lit" -sv -j "$jobs" "$dir/test/Dialect" "$dir/test/Transforms" \
  "$dir/test/Conversion" "$dir/test/Memory" "$dir/test/Compute" \
  "$dir/test/GPU" || status=1
echo "== fsdp-run lit tests (ASan + UBSan + LSan) =="
"$lit" -sv -j "$jobs" "$dir/test/Tools" "$dir/test/Integration/mlp" \
  "$dir/test/Integration/arena.test" || status=1
exit $status

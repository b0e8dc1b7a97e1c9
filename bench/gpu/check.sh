#!/usr/bin/env bash
# The GPU check of the runtime, the quantization kernels and the NCCL
# backend, one command.
#
#   bench/gpu/check.sh [--dry-run] [--build] [--quick] [--smoke]
#                      [--arch sm_XY] [--out DIR] [--aot PACK] [--help]
#
# On a machine with a GPU, the CUDA toolkit, a C++ compiler, CMake and
# Python (no LLVM, no package registry) it
#   1. configures runtime/ alone with the GPU tests (-DFSDPRT_GPU_TESTS=ON:
#      the runtime with its GPU runtime and NCCL backend, libfsdprt_quant
#      with its kernels, GoogleTest from source: third_party/googletest,
#      which scripts/setup.sh copies from Debian's googletest package, or
#      /usr/src/googletest) and builds the target fsdprt_gpu_tests;
#   2. runs `ctest -L gpu`, one summary row per test: the quantization
#      kernels (quant.gpu, and quant.gpu_check: the device fp8 / E2M1 / bf16
#      conversions against the CPU rules for all 2^32 fp32 patterns, every
#      kernel bit for bit against the CPU reference on 4096 x 4096 and uneven
#      shapes), the GPU runtime (runtime_gpu_device: kernels through the mgpu*
#      entry points ordered across the compute and communication streams,
#      cuBLAS GEMMs against a CPU reference, NCCL on device buffers with its
#      overlap with a kernel measured, the out-of-memory error), the fused
#      attention kernels against float64 (runtime_gpu_attention: bf16 at
#      head dims 64 and 128 on the tensor cores, f32 and the other head dims
#      on the CUDA cores, with the forward + backward time of one GPT-2 small
#      layer's attention), the device scatter-add against the host loop bit
#      for bit (runtime_gpu_scatter), the grouped gemm of a sparse mixture of
#      experts against float64 (runtime_gpu_grouped), the split-K bf16 gemms
#      against the unsplit gemm and float64 (runtime_gpu_split_k) and the
#      NCCL backend (runtime_nccl: world size 1 on one GPU, more with more
#      GPUs, several ranks on one GPU with NCCL 2.30+); the tests' "row:"
#      lines become rows of the summary;
#   3. times every quantization kernel on a 256 MiB input next to a device
#      copy (fsdprt_quant_gpu_check --bench-only);
#   4. end to end, steps compiled ahead of time (bench/gpu/e2e_aot.sh): builds
#      the runtime from source with CMake, runs the pack's step libraries with
#      the LLVM-free runner (GPU steps on the device path: a GPU context and
#      an NCCL communicator per rank) and compares them with the CPU path's
#      results, times torch eager and torch.compile on the same models and
#      batches (bench/gpu/torch_baseline.py) and prints the end-to-end table
#      (step time, torch's, ratios, exposed communication; docs/AOT.md). CPU
#      steps run without a GPU too; GPU steps and torch's rows are skipped
#      without one, with the reason;
#   5. prints one summary table (and the bandwidth and end-to-end tables
#      after it). Exit status 0 when nothing failed.
# About 2.5 minutes on an H200 before the end-to-end stage, which adds at most
# 3 (torch's rows: FSDP_TORCH_BUDGET).
#
# --dry-run (automatic when no GPU is visible): configures the build (finds
#   the toolchain, NCCL, GoogleTest) and reports every GPU step as skipped
#   with the reason; exits 0.
# --build: with a dry run, build too and run ctest -L gpu, whose tests then
#   report skipped with the reason (nvcc compiles and links everything
#   without a GPU; a few minutes on 2 cores).
# --quick: smaller shapes and short timings on the GPU.
# --smoke: what the bench smoke tests run: --quick on a GPU, the dry run
#   without one.
# --arch: CUDA architecture (default: the GPU's, else sm_90).
# --out: build directory (default build-gpu-check in the repository).
# --aot: the pack of the end-to-end stage (default: this directory when it is
#   a pack, else build-gpu-pack; bench/gpu/pack_aot.py builds one where the
#   compiler is; the stage is skipped without one).
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (directory with
# include/nccl.h and lib/libnccl.so; default: the newer of the CUDA toolkit's
# and PyTorch's nvidia-nccl), FSDP_GTEST_SOURCE (GoogleTest's sources),
# FSDP_JOBS (parallel build jobs; default: the cores), FSDP_TORCH_PYTHON (the
# Python with torch; default python3), FSDP_TORCH_BUDGET (seconds for torch's
# rows, 100; 30 with --quick), FSDP_STEP_TIMEOUT (seconds per step run, 180).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
DRY=0 BUILD=0 QUICK=0 ARCH="" OUT="$ROOT/build-gpu-check" AOT_PACK=""
JOBS=${FSDP_JOBS:-$(nproc 2>/dev/null || echo 4)}

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
  --dry-run) DRY=1 ;;
  --build) BUILD=1 ;;
  --quick) QUICK=1 ;;
  --smoke) QUICK=1 ;;
  --arch) ARCH=$2; shift ;;
  --out) OUT=$2; shift ;;
  --aot) AOT_PACK=$2; shift ;;
  -h | --help) usage; exit 0 ;;
  *) echo "check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

SUMMARY=()
FAILED=0
note() { # step result detail
  SUMMARY+=("$(printf '%-34s %-8s %s' "$1" "$2" "$3")")
  printf '== %-31s %-8s %s\n' "$1" "$2" "$3"
  [ "$2" = FAIL ] && FAILED=$((FAILED + 1))
  return 0
}

run_logged() { # name log command...
  local name=$1 log=$2
  shift 2
  if "$@" >"$log" 2>&1; then return 0; fi
  echo "---- $name failed; last lines of $log:"; tail -20 "$log"
  return 1
}

# ---- toolchain and device ---------------------------------------------------
NVCC=""
if [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC="$CUDA_HOME/bin/nvcc"
elif command -v nvcc >/dev/null 2>&1; then NVCC=$(command -v nvcc); fi
if [ -n "$NVCC" ]; then
  note "CUDA toolkit" ok "$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($NVCC)"
else
  note "CUDA toolkit" FAIL "nvcc not found (set CUDA_HOME)"
fi
if command -v cmake >/dev/null 2>&1; then
  note "CMake" ok "$(cmake --version | head -1 | sed 's/cmake version //')"
else
  note "CMake" FAIL "cmake not found"
fi
# GoogleTest's sources travel with the check's files (no registry there).
GTEST_SRC=${FSDP_GTEST_SOURCE:-}
if [ -z "$GTEST_SRC" ]; then
  for d in "$ROOT/third_party/googletest" /usr/src/googletest; do
    [ -f "$d/googletest/CMakeLists.txt" ] && { GTEST_SRC=$d; break; }
  done
fi
if [ -n "$GTEST_SRC" ]; then
  note "GoogleTest" ok "sources in $GTEST_SRC"
else
  note "GoogleTest" ok "no sources (scripts/setup.sh copies them to third_party/googletest): the installed package, if any"
fi

NCCL_HOME_SET=${NCCL_HOME:-}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
NCCL_INC="" NCCL_LIB=""
for d in "$NCCL_HOME/include" "$CUDA_HOME/include" /usr/include; do
  [ -f "$d/nccl.h" ] && { NCCL_INC=$d; break; }
done
for d in "$NCCL_HOME/lib" "$NCCL_HOME/lib64" "$CUDA_HOME/lib64" /usr/lib/x86_64-linux-gnu; do
  ls "$d"/libnccl.so* >/dev/null 2>&1 && { NCCL_LIB=$d; break; }
done
nccl_code() { # nccl.h -> major*10000 + minor*100 + patch
  sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$1" |
    awk 'NR==1{v=$1*10000} NR==2{v+=$1*100} NR==3{v+=$1} END{print v+0}'
}
# PyTorch's wheels bring NCCL too (the nvidia-nccl package); the newer of the
# two is taken unless NCCL_HOME is set: several ranks on one GPU need 2.30.
if [ -z "${NCCL_HOME_SET:-}" ] && command -v "${FSDP_TORCH_PYTHON:-python3}" >/dev/null 2>&1; then
  d=$("${FSDP_TORCH_PYTHON:-python3}" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  if [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && ls "$d"/lib/libnccl.so* >/dev/null 2>&1; then
    if [ -z "$NCCL_INC" ] || [ -z "$NCCL_LIB" ] ||
       [ "$(nccl_code "$d/include/nccl.h")" -gt "$(nccl_code "$NCCL_INC/nccl.h")" ]; then
      NCCL_INC=$d/include NCCL_LIB=$d/lib
    fi
  fi
fi
# The wheel has libnccl.so.2 only (no libnccl.so to link with -lnccl).
NCCL_LINK="-L$NCCL_LIB -lnccl"
if [ -n "$NCCL_LIB" ] && [ ! -e "$NCCL_LIB/libnccl.so" ]; then
  NCCL_LINK="-L$NCCL_LIB -l:$(basename "$(ls "$NCCL_LIB"/libnccl.so* | head -1)")"
fi
if [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ]; then
  NCCL_VER=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$NCCL_INC/nccl.h" | paste -sd. -)
  note "NCCL" ok "$NCCL_VER ($NCCL_INC/nccl.h, $NCCL_LIB)"
else
  note "NCCL" skipped "nccl.h / libnccl.so not found (set NCCL_HOME): NCCL steps skipped"
fi

GPU=""
if [ "$DRY" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
  GPU=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -1)
fi
if [ -z "$GPU" ]; then
  [ "$DRY" = 1 ] && why="--dry-run" || why="no GPU visible (nvidia-smi)"
  DRY=1
  note "GPU" skipped "$why: dry run"
else
  note "GPU" ok "$GPU"
  if [ -z "$ARCH" ]; then
    cc=$(echo "$GPU" | sed -n 's/.*, *\([0-9]*\)\.\([0-9]*\)$/\1\2/p')
    ARCH=sm_${cc:-90}
  fi
fi
ARCH=${ARCH:-sm_90}

# ---- configure, build, ctest -L gpu -------------------------------------------
BUILD_DIR=$OUT/runtime
mkdir -p "$OUT"
CMAKE_ARGS=(-S "$ROOT/runtime" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
  -DFSDPRT_GPU_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES="${ARCH#sm_}"
  -DFSDPRT_ENABLE_MPI=OFF -DFSDPRT_BUILD_BENCH=OFF -DFSDPRT_QUANT_BUILD_BENCH=OFF
  -DCMAKE_CUDA_COMPILER="$NVCC")
command -v ninja >/dev/null 2>&1 && CMAKE_ARGS+=(-G Ninja)
[ -n "$GTEST_SRC" ] && CMAKE_ARGS+=(-DFSDPRT_GTEST_SOURCE_DIR="$GTEST_SRC")
if [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ]; then
  CMAKE_ARGS+=(-DFSDPRT_NCCL_INCLUDE_DIR="$NCCL_INC"
    -DFSDPRT_NCCL_LIBRARY="$(ls "$NCCL_LIB"/libnccl.so* | head -1)")
fi
if command -v ccache >/dev/null 2>&1; then
  CMAKE_ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

configured=0 built=0
if [ -n "$NVCC" ] && command -v cmake >/dev/null 2>&1; then
  t0=$(date +%s)
  if run_logged configure "$OUT/configure.log" cmake "${CMAKE_ARGS[@]}"; then
    configured=1
    note "configure: runtime/ (gpu tests)" ok "$(( $(date +%s) - t0 )) s, $ARCH, $(grep -o 'nccl=[A-Z]* gpu=[A-Z]*' "$OUT/configure.log" | head -1)"
  else
    note "configure: runtime/ (gpu tests)" FAIL "see $OUT/configure.log"
  fi
fi
if [ $configured = 1 ] && { [ "$DRY" = 0 ] || [ "$BUILD" = 1 ]; }; then
  t0=$(date +%s)
  if run_logged build "$OUT/build.log" cmake --build "$BUILD_DIR" --target fsdprt_gpu_tests -j "$JOBS"; then
    built=1
    note "build: fsdprt_gpu_tests" ok "$(( $(date +%s) - t0 )) s"
  else
    note "build: fsdprt_gpu_tests" FAIL "see $OUT/build.log"
  fi
elif [ $configured = 1 ]; then
  note "build: fsdprt_gpu_tests" skipped "dry run without --build"
fi

test_output() { # name: what the test printed (ctest's LastTest.log)
  awk -v t="Testing: $1" '$0 ~ t"$" {on=1; next} /^<end of output>/ {on=0} on' \
    "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null
}
if [ $built = 1 ]; then
  # One row per test (ctest's result line), then the tests' own "row:" lines.
  ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure >"$OUT/ctest.txt" 2>&1
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: //p' "$OUT/ctest.txt" |
    while read -r name rest; do echo "$name|$rest"; done >"$OUT/ctest-rows.txt"
  while IFS='|' read -r name rest; do
    secs=$(echo "$rest" | sed -n 's/.* \([0-9.]* sec\)$/\1/p')
    case "$rest" in
    *Passed*) note "ctest: $name" ok "$secs" ;;
    *Skipped*) note "ctest: $name" skipped "$(test_output "$name" | grep -i 'skipped' | tail -1)" ;;
    *) note "ctest: $name" FAIL "$(echo "$rest" | sed 's/^[ .*]*//') (see $OUT/ctest.txt)" ;;
    esac
  done <"$OUT/ctest-rows.txt"
  grep -q 'No tests were found' "$OUT/ctest.txt" && note "ctest -L gpu" FAIL "no tests (see $OUT/ctest.txt)"
  # "row: name | status | detail" lines, one summary row each.
  while IFS='|' read -r name status detail; do
    note "gpu: $(echo "$name" | sed 's/^row: *//; s/ *$//')" \
      "$(echo "$status" | tr -d ' ')" "$(echo "$detail" | sed 's/^ *//')"
  done < <(grep -h '^row: ' "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null)
else
  note "ctest -L gpu" skipped "$([ "$DRY" = 1 ] && echo "dry run" || echo "no build")"
fi

# ---- timings: the quantization kernels' bandwidth --------------------------------
CHECK_BIN=$BUILD_DIR/quant/fsdprt_quant_gpu_check
if [ "$DRY" = 0 ] && [ $built = 1 ] && [ -x "$CHECK_BIN" ]; then
  q=""; [ "$QUICK" = 1 ] && q="--quick"
  "$CHECK_BIN" --bench-only $q >"$OUT/gpu_check.txt" 2>&1
  rc=$?
  [ "$rc" = 0 ] && note "bandwidth (256 MiB bf16/fp32)" ok "$OUT/gpu_check.txt" \
                || { tail -20 "$OUT/gpu_check.txt"; note "bandwidth (256 MiB bf16/fp32)" FAIL "exit $rc"; }
else
  note "bandwidth (256 MiB bf16/fp32)" skipped "needs a GPU"
fi

# ---- end to end: steps compiled ahead of time ------------------------------------
# shellcheck source=e2e_aot.sh
. "$ROOT/bench/gpu/e2e_aot.sh"
aot_stage

echo
echo "summary"
printf '%s\n' "${SUMMARY[@]}"
if [ -f "$OUT/gpu_check.txt" ] && [ "$DRY" = 0 ]; then
  echo
  echo "bandwidth table ($OUT/gpu_check.txt):"
  sed -n '/^section /,$p' "$OUT/gpu_check.txt"
fi
if [ -f "$OUT/e2e_table.txt" ]; then
  echo
  echo "end-to-end table ($OUT/e2e_table.txt; docs/AOT.md):"
  cat "$OUT/e2e_table.txt"
fi
[ "$FAILED" = 0 ] && echo "check.sh: passed" || echo "check.sh: $FAILED step(s) failed"
[ "$FAILED" = 0 ]

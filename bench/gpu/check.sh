#!/usr/bin/env bash
# The GPU check of the quantization kernels and the NCCL backend, one command.
#
#   bench/gpu/check.sh [--dry-run] [--build] [--emulate] [--quick] [--smoke]
#                      [--arch sm_XY] [--out DIR] [--aot PACK] [--help]
#
# On a machine with a GPU and the CUDA toolkit (nothing else: no CMake, no
# GoogleTest; the test files build against bench/gpu/mini_gtest) it
#   1. builds libfsdprt_quant (kernels + CPU reference), the runtime with its
#      NCCL backend, bench/gpu/gpu_check and the GPU test programs;
#   2. runs gpu_check: the device fp8 / E2M1 / bf16 conversions against the
#      CPU rules for all 2^32 fp32 patterns, every kernel bit for bit against
#      the CPU reference (4096 x 4096 and uneven shapes, bf16 and fp32), and
#      every kernel's bandwidth on a 256 MiB input next to a device copy;
#   3. runs runtime/test/quant/quant_gpu_test.cpp, the NCCL backend's tests
#      (runtime/test/test_nccl.cpp: world size 1 on one GPU, more with more
#      GPUs) and several NCCL ranks on one GPU (bench/gpu/nccl_one_gpu_test,
#      skipped before NCCL 2.30);
#   4. runs the GPU runtime's own tests (runtime/test/test_gpu_device.cpp:
#      kernels through the mgpu* entry points ordered across the compute and
#      communication streams, cuBLAS GEMMs against a CPU reference, NCCL on
#      device buffers with its overlap with a kernel measured, the
#      out-of-memory error), one summary row each, and the fused attention
#      kernels against float64 (runtime/test/test_gpu_attention.cpp, with
#      the forward + backward time of one GPT-2 small layer's attention);
#   5. end to end, steps compiled ahead of time (bench/gpu/e2e_aot.sh): builds
#      the runtime from source with CMake, runs the pack's step libraries with
#      the LLVM-free runner (GPU steps on the device path: a GPU context and
#      an NCCL communicator per rank) and compares them with the CPU path's
#      results, times torch eager and torch.compile on the same models and
#      batches (bench/gpu/torch_baseline.py) and prints the end-to-end table
#      (step time, torch's, ratios, exposed communication; docs/AOT.md). CPU
#      steps run without a GPU too; GPU steps and torch's rows are skipped
#      without one, with the reason;
#   6. prints one summary table (and the end-to-end table after it). Exit
#      status 0 when nothing failed.
# About 2.5 minutes on an H200 before the end-to-end stage, which adds at most
# 3 (torch's rows: FSDP_TORCH_BUDGET).
#
# --dry-run (automatic when no GPU is visible): runs what needs no device
#   (finds the toolchain, NCCL and the sources, shows the build commands) and
#   reports every GPU step as skipped with the reason; exits 0. Quick.
# --build: with a dry run, run the builds too (nvcc compiles and links
#   everything without a GPU; a few minutes on 2 cores).
# --emulate: also builds gpu_check and the kernels for the host emulation of
#   CUDA (runtime/test/quant/cuda_emulation, host compiler and python3 only) and runs
#   gpu_check --quick on it, which exercises the check program itself without
#   a GPU (1-3 minutes on 2 cores).
# --quick: smaller shapes and strided conversions on the GPU.
# --smoke: what the bench smoke tests run: --quick on a GPU (small
#   shapes, short timings), the dry run without one (seconds).
# --arch: CUDA architecture (default: the GPU's, else sm_90).
# --out: build directory (default build-gpu-check in the repository).
# --aot: the pack of the end-to-end stage (default: this directory when it is
#   a pack, else build-gpu-pack; bench/gpu/pack_aot.py builds one where the
#   compiler is; the stage is skipped without one).
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (directory with
# include/nccl.h and lib/libnccl.so; default: the newer of the CUDA toolkit's
# and PyTorch's nvidia-nccl), CXX, FSDP_TORCH_PYTHON (the Python with torch;
# default python3), FSDP_TORCH_BUDGET (seconds for torch's rows, 100; 30 with --quick),
# FSDP_STEP_TIMEOUT (seconds per step run, 180).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CXX=${CXX:-g++}
DRY=0 BUILD=0 EMULATE=0 QUICK=0 ARCH="" OUT="$ROOT/build-gpu-check" AOT_PACK=""

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
  --dry-run) DRY=1 ;;
  --build) BUILD=1 ;;
  --emulate) EMULATE=1 ;;
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

# ---- toolchain and device ---------------------------------------------------
NVCC=""
if [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC="$CUDA_HOME/bin/nvcc"
elif command -v nvcc >/dev/null 2>&1; then NVCC=$(command -v nvcc); fi
if [ -n "$NVCC" ]; then
  note "CUDA toolkit" ok "$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($NVCC)"
else
  note "CUDA toolkit" FAIL "nvcc not found (set CUDA_HOME)"
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

# ---- build commands -----------------------------------------------------------
mkdir -p "$OUT"
EXACT="--fmad=false -ftz=false -prec-div=true -prec-sqrt=true"
INC="-I$ROOT/runtime/include -I$ROOT/runtime/quant"
NVFLAGS="-O3 -std=c++17 -arch=$ARCH $EXACT --expt-relaxed-constexpr -Xcompiler -ffp-contract=off $INC"
GT="-I$ROOT/bench/gpu/mini_gtest"
RPATH="-Xlinker -rpath=$OUT"
RT_SRC="api arena common kernels memref stubs threads_backend jit_quant"
GPU_SRC="gpu_context mgpu gpu_blas gpu_quant gpu_attention"

BUILD_QUANT="$NVCC $NVFLAGS -shared -Xcompiler -fPIC,-fvisibility=hidden -o $OUT/libfsdprt_quant.so $ROOT/runtime/cuda/quant_kernels.cu $ROOT/runtime/quant/quant_reference.cpp"
BUILD_CHECK="$NVCC $NVFLAGS -o $OUT/gpu_check $ROOT/bench/gpu/gpu_check.cu -L$OUT -lfsdprt_quant $RPATH"
BUILD_QTEST="$NVCC $NVFLAGS $GT -o $OUT/quant_gpu_test $ROOT/runtime/test/quant/quant_gpu_test.cpp -L$OUT -lfsdprt_quant $RPATH"
rt_files=""
for f in $RT_SRC; do rt_files="$rt_files $ROOT/runtime/src/$f.cpp"; done
for f in $GPU_SRC; do rt_files="$rt_files $ROOT/runtime/cuda/$f.cpp"; done
# The GPU runtime links the CUDA runtime and cuBLAS, never libcuda (the
# driver is reached through cudaGetDriverEntryPointByVersion); the shared
# CUDA runtime keeps one runtime per process between it and its tests.
BUILD_RT="$NVCC -O2 -std=c++17 -arch=$ARCH -cudart shared -Xcompiler -fPIC,-fvisibility=hidden -shared -DFSDPRT_WITH_NCCL=1 -DFSDPRT_WITH_GPU=1 -DFSDPRT_WITH_GPU_QUANT=1 -DFSDPRT_WITH_GPU_ATTENTION=1 $INC -I$NCCL_INC -o $OUT/libfsdprt.so $rt_files $ROOT/runtime/cuda/attention_kernels.cu $ROOT/runtime/src/nccl_backend.cpp -L$OUT -lfsdprt_quant -lcublas $NCCL_LINK $RPATH -Xlinker -rpath=$NCCL_LIB"
BUILD_NCCL_TEST="$NVCC -O2 -std=c++17 -cudart shared $INC $GT -I$NCCL_INC -o $OUT/nccl_tests $ROOT/runtime/test/test_nccl.cpp $ROOT/bench/gpu/nccl_one_gpu_test.cpp $ROOT/bench/gpu/mini_gtest/gtest_main.cpp -L$OUT -lfsdprt $RPATH -Xlinker -rpath=$NCCL_LIB"
BUILD_GPU_RT_TEST="$NVCC -O2 -std=c++17 -cudart shared $INC $GT -o $OUT/gpu_runtime_test $ROOT/runtime/test/test_gpu_device.cpp $ROOT/bench/gpu/mini_gtest/gtest_main.cpp -L$OUT -lfsdprt $RPATH -Xlinker -rpath=$NCCL_LIB"
BUILD_ATTN_TEST="$NVCC -O2 -std=c++17 -cudart shared $INC $GT -o $OUT/gpu_attention_test $ROOT/runtime/test/test_gpu_attention.cpp $ROOT/bench/gpu/mini_gtest/gtest_main.cpp -L$OUT -lfsdprt $RPATH -Xlinker -rpath=$NCCL_LIB"
GPU_RT_ROWS=("stream/event ordering" "cuBLAS gemm vs CPU" "NCCL overlap" "device errors" "fused attention vs float64")

run_logged() { # name log command...
  local name=$1 log=$2
  shift 2
  if "$@" >"$log" 2>&1; then return 0; fi
  echo "---- $name failed; last lines of $log:"; tail -20 "$log"
  return 1
}

rt_ok=0
if [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ]; then rt_ok=1; fi
do_builds() {
  # One compile at a time (a build machine may be shared); about 1-2 minutes.
  local t0
  t0=$(date +%s)
  if ! run_logged libfsdprt_quant "$OUT/build-quant.log" $BUILD_QUANT; then
    note "build: libfsdprt_quant ($ARCH)" FAIL "see $OUT/build-quant.log"
    return
  fi
  note "build: libfsdprt_quant ($ARCH)" ok "$(( $(date +%s) - t0 )) s"
  run_logged gpu_check "$OUT/build-check.log" $BUILD_CHECK &&
    note "build: gpu_check" ok "" || note "build: gpu_check" FAIL "see $OUT/build-check.log"
  run_logged quant_gpu_test "$OUT/build-qtest.log" $BUILD_QTEST &&
    note "build: quant_gpu_test" ok "" || note "build: quant_gpu_test" FAIL "see $OUT/build-qtest.log"
  if [ $rt_ok = 1 ]; then
    if run_logged runtime "$OUT/build-rt.log" $BUILD_RT &&
       run_logged nccl_tests "$OUT/build-nccl.log" $BUILD_NCCL_TEST &&
       run_logged gpu_runtime_test "$OUT/build-gpu-rt.log" $BUILD_GPU_RT_TEST &&
       run_logged gpu_attention_test "$OUT/build-attn.log" $BUILD_ATTN_TEST; then
      note "build: runtime + NCCL + GPU tests" ok "NCCL $NCCL_VER, $(( $(date +%s) - t0 )) s in all"
    else
      note "build: runtime + NCCL + GPU tests" FAIL "see $OUT/build-rt.log, build-nccl.log, build-gpu-rt.log, build-attn.log"; rt_ok=0
    fi
  else
    note "build: runtime + NCCL tests" skipped "no NCCL"
  fi
}

if [ "$DRY" = 1 ]; then
  if [ "$BUILD" = 1 ] && [ -n "$NVCC" ]; then
    do_builds
  else
    note "builds" skipped "dry run without --build (commands below)"
    printf '   %s\n' "$BUILD_QUANT" "$BUILD_CHECK" "$BUILD_QTEST" "$BUILD_RT" "$BUILD_NCCL_TEST" "$BUILD_GPU_RT_TEST" "$BUILD_ATTN_TEST"
  fi
  for s in "conversions (2^32 patterns)" "kernels vs CPU reference" \
           "bandwidth (256 MiB bf16/fp32)" "quant_gpu_test" "NCCL tests"; do
    note "$s" skipped "needs a GPU"
  done
  for s in "${GPU_RT_ROWS[@]}"; do
    note "gpu runtime: $s" skipped "needs a GPU"
  done
else
  do_builds

  if [ -x "$OUT/gpu_check" ]; then
    q=""; [ "$QUICK" = 1 ] && q="--quick"
    "$OUT/gpu_check" $q | tee "$OUT/gpu_check.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] && note "gpu_check" ok "$(tail -1 "$OUT/gpu_check.txt")" \
                  || note "gpu_check" FAIL "exit $rc: $(tail -1 "$OUT/gpu_check.txt")"
  fi
  if [ -x "$OUT/quant_gpu_test" ]; then
    "$OUT/quant_gpu_test" >"$OUT/quant_gpu_test.txt" 2>&1
    rc=$?
    [ "$rc" = 0 ] && note "quant_gpu_test" ok "$(tail -1 "$OUT/quant_gpu_test.txt")" \
                  || { tail -30 "$OUT/quant_gpu_test.txt"; note "quant_gpu_test" FAIL "exit $rc"; }
  fi
  if [ $rt_ok = 1 ] && [ -x "$OUT/nccl_tests" ]; then
    timeout 240 "$OUT/nccl_tests" >"$OUT/nccl_tests.txt" 2>&1
    rc=$?
    grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|skipped:' "$OUT/nccl_tests.txt" | sed 's/^/   /'
    [ "$rc" = 0 ] && note "NCCL tests" ok "$(tail -1 "$OUT/nccl_tests.txt")" \
                  || { tail -30 "$OUT/nccl_tests.txt"; note "NCCL tests" FAIL "exit $rc"; }
  elif [ $rt_ok = 0 ]; then
    note "NCCL tests" skipped "no NCCL build"
  fi
  if [ $rt_ok = 1 ] && [ -x "$OUT/gpu_runtime_test" ]; then
    for t in gpu_runtime_test gpu_attention_test; do
      timeout 240 "$OUT/$t" >"$OUT/$t.txt" 2>&1
      rc=$?
      # "row: name | status | detail" lines, one summary row each.
      while IFS='|' read -r name status detail; do
        note "gpu runtime: $(echo "$name" | sed 's/^row: *//; s/ *$//')" \
          "$(echo "$status" | tr -d ' ')" "$(echo "$detail" | sed 's/^ *//')"
      done < <(grep '^row: ' "$OUT/$t.txt")
      [ "$rc" = 0 ] && note "$t" ok "$(tail -1 "$OUT/$t.txt")" \
                    || { tail -30 "$OUT/$t.txt"; note "$t" FAIL "exit $rc"; }
    done
  elif [ $rt_ok = 0 ]; then
    for s in "${GPU_RT_ROWS[@]}"; do note "gpu runtime: $s" skipped "no runtime build"; done
  fi
fi

# ---- end to end: steps compiled ahead of time ------------------------------------
# shellcheck source=e2e_aot.sh
. "$ROOT/bench/gpu/e2e_aot.sh"
aot_stage

# ---- host emulation of the check program -------------------------------------------
if [ "$EMULATE" = 1 ]; then
  EMU="$ROOT/runtime/test/quant/cuda_emulation"
  if ! command -v python3 >/dev/null 2>&1; then
    note "emulated gpu_check" skipped "python3 not found"
  else
    python3 "$EMU/rewrite_launches.py" "$ROOT/runtime/cuda/quant_kernels.cu" "$OUT/kernels_emu.cpp" &&
    python3 "$EMU/rewrite_launches.py" "$ROOT/bench/gpu/gpu_check.cu" "$OUT/gpu_check_emu.cpp" &&
    run_logged "emulated build" "$OUT/build-emu.log" \
      $CXX -O1 -std=c++17 -ffp-contract=off -pthread -I"$EMU" $INC \
      -o "$OUT/gpu_check_emu" "$OUT/kernels_emu.cpp" "$OUT/gpu_check_emu.cpp" \
      "$ROOT/runtime/quant/quant_reference.cpp"
    if [ -x "$OUT/gpu_check_emu" ] && "$OUT/gpu_check_emu" --quick >"$OUT/gpu_check_emu.txt" 2>&1; then
      note "emulated gpu_check --quick" ok "$(tail -1 "$OUT/gpu_check_emu.txt") (host emulation; timings meaningless)"
    else
      tail -30 "$OUT/gpu_check_emu.txt" 2>/dev/null
      note "emulated gpu_check --quick" FAIL "see $OUT/gpu_check_emu.txt"
    fi
  fi
fi

echo
echo "summary"
printf '%s\n' "${SUMMARY[@]}"
if [ -f "$OUT/gpu_check.txt" ] && [ "$DRY" = 0 ]; then
  echo
  echo "gpu_check table ($OUT/gpu_check.txt):"
  sed -n '/^section /,$p' "$OUT/gpu_check.txt"
fi
if [ -f "$OUT/e2e_table.txt" ]; then
  echo
  echo "end-to-end table ($OUT/e2e_table.txt; docs/AOT.md):"
  cat "$OUT/e2e_table.txt"
fi
[ "$FAILED" = 0 ] && echo "check.sh: passed" || echo "check.sh: $FAILED step(s) failed"
[ "$FAILED" = 0 ]

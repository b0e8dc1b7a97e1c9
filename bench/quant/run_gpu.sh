#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the GPU test of fsdprt_quant's CUDA
# kernels (every kernel against the CPU reference, bit for bit) and the
# bandwidth benchmark (256 MiB of bf16 input; GB/s and % of 4.8 TB/s).
#
#   bench/quant/run_gpu.sh [--smoke] [--rows R --cols C --iters 20 --peak-gbps 4800]
#   bench/quant/run_gpu.sh --help
#
#   --smoke   a [128 x 256] tensor, one timed launch: checks that the script,
#             the build, the test and the benchmark work. What needs a
#             device (or the CUDA toolkit) is skipped with the reason, and
#             the smoke run still succeeds; any other failure fails it.
#
# Binaries: those of the main build (build/bin; FSDP_BUILD=dir for another)
# when it was built with CUDA and neither BUILD_DIR nor CUDA_ARCH is set;
# otherwise runtime/quant is configured with CUDA into BUILD_DIR (default
# build-quant-gpu) for CUDA_ARCH (default 90) and built there (JOBS
# parallel jobs).
# Exit status: 0, 1 on a failure, 77 when no GPU is visible (not --smoke).
set -euo pipefail
trap 'echo "bench/quant/run_gpu.sh: failed (exit $?) at line $LINENO: ${BASH_COMMAND%%$'\n'*}" >&2' ERR
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
fail() {
  echo "bench/quant/run_gpu.sh: $*" >&2
  exit 1
}
root=$(cd "$(dirname "$0")/../.." && pwd)
smoke=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
  -h | --help)
    usage
    exit 0
    ;;
  --smoke) smoke=1 ;;
  --rows | --cols | --iters | --peak-gbps)
    [ $# -ge 2 ] || fail "$1 needs a value"
    args+=("$1" "$2")
    shift
    ;;
  *) fail "unknown argument $1 (see --help)" ;;
  esac
  shift
done
[ "$smoke" -eq 0 ] || args+=(--rows 128 --cols 256 --iters 1)

# No GPU (exit 77 of the test or the benchmark): skipped under --smoke, which
# goes on with the next step.
no_gpu() {
  if [ "$smoke" -eq 1 ]; then
    echo "skipped: $1 (no GPU visible)"
    return 0
  fi
  echo "no GPU visible: nothing to measure" >&2
  exit 77
}

bin=${FSDP_BUILD:-$root/build}/bin
if [ -n "${BUILD_DIR:-}" ] || [ -n "${CUDA_ARCH:-}" ] || [ ! -x "$bin/fsdprt_quant_gpu_test" ] ||
  [ ! -x "$bin/fsdprt_quant_gpu_bench" ]; then
  build=${BUILD_DIR:-$root/build-quant-gpu}
  nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
  if [ ! -x "$nvcc" ] && ! command -v "$nvcc" >/dev/null; then
    [ "$smoke" -eq 0 ] || {
      echo "skipped: no CUDA compiler ($nvcc; set CUDACXX), so no GPU build"
      exit 0
    }
    fail "no CUDA compiler $nvcc (set CUDACXX)"
  fi
  echo "building the CUDA kernels, GPU test and benchmark in $build" >&2
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$root/runtime/quant" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -DFSDPRT_QUANT_ENABLE_CUDA=ON >/dev/null
  cmake --build "$build" -j"${JOBS:-$(nproc)}" \
    --target fsdprt_quant_gpu_test fsdprt_quant_gpu_bench
  bin=$build
  [ -x "$bin/fsdprt_quant_gpu_test" ] || fail "CUDA was not found: no GPU targets were configured in $build"
fi
echo "binaries: $bin/fsdprt_quant_gpu_test, $bin/fsdprt_quant_gpu_bench" >&2

echo "== GPU kernels vs CPU reference"
rc=0
"$bin/fsdprt_quant_gpu_test" || rc=$?
[ "$rc" -ne 77 ] || no_gpu "GPU kernels vs CPU reference"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "the GPU test failed (exit $rc)"
echo "== GPU bandwidth"
rc=0
"$bin/fsdprt_quant_gpu_bench" "${args[@]}" || rc=$?
[ "$rc" -ne 77 ] || no_gpu "GPU bandwidth"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "the GPU benchmark failed (exit $rc)"

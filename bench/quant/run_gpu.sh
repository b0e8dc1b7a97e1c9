#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds fsdprt_quant with its CUDA kernels,
# runs the GPU test (every kernel against the CPU reference, bit for bit) and
# the bandwidth benchmark (256 MiB of bf16 input; GB/s and % of 4.8 TB/s).
#   bench/quant/run_gpu.sh [--iters 20 --peak-gbps 4800]
# Environment: BUILD_DIR (default build-quant-gpu), CUDA_ARCH (default 90),
# JOBS (parallel build jobs).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-quant-gpu}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
cmake -S "$root/runtime/quant" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DFSDPRT_QUANT_ENABLE_CUDA=ON
cmake --build "$build" -j"${JOBS:-$(nproc)}" \
  --target fsdprt_quant_gpu_test fsdprt_quant_gpu_bench
if [ ! -x "$build/fsdprt_quant_gpu_test" ]; then
  echo "CUDA was not found: no GPU targets were configured" >&2
  exit 1
fi
echo "== GPU kernels vs CPU reference"
set +e
"$build/fsdprt_quant_gpu_test"
rc=$?
set -e
if [ "$rc" -eq 77 ]; then
  echo "no GPU visible: nothing to measure" >&2
  exit 77
fi
[ "$rc" -eq 0 ] || exit "$rc"
echo "== GPU bandwidth"
"$build/fsdprt_quant_gpu_bench" "$@"

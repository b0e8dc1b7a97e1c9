// The reduction of a split-K gemm (fsdprt_gpu_gemm_bf16 / _bf16_f32 split by
// fsdprt_gpu_split_k_plan, gpu_blas.cpp): the sum of its f32 partials in
// slice order, alpha, beta and the output's dtype. Compiled by nvcc for a
// GPU and by the host compiler for the emulation of CUDA
// (runtime/test/quant/cuda_emulation).
#ifndef FSDPRT_CUDA_SPLIT_K_KERNELS_H
#define FSDPRT_CUDA_SPLIT_K_KERNELS_H

#include <cuda_runtime.h>

#include <cstdint>

namespace fsdprt {
namespace gpu {
namespace split_k {

// c[b][i, j] = alpha * (sum over p of partials[p][b][i, j]) + beta *
// c[b][i, j] for b < batch, i < m, j < n: the partials are contiguous
// [parts][batch][m][n] f32, added in increasing p from 0 (f32); c's element
// (b, i, j) is at c[b * stride_c + i * ldc + j], bf16 (rounded once, to
// nearest even) or f32. With beta == 0 c is not read.
struct Args {
  const float *partials = nullptr;
  int64_t parts = 0, batch = 0, m = 0, n = 0;
  float alpha = 1, beta = 0;
  void *c = nullptr;
  bool bf16 = false; // else f32
  int64_t ldc = 0, stride_c = 0;
};

// Enqueue on `stream`; the launch error, cudaSuccess otherwise.
cudaError_t reduce(const Args &a, cudaStream_t stream);

} // namespace split_k
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_SPLIT_K_KERNELS_H

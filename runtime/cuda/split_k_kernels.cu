// The reduction kernel of a split-K gemm (split_k_kernels.h, docs/GPU.md
// "Split-K gemms"): one thread per output element, in a grid-stride loop
// over the contiguous [batch][m][n] elements (coalesced reads of each
// partial), adds the element's partials in slice order, then applies alpha,
// beta and the output's dtype. No atomics: the sum is the same from run to
// run.
#include "split_k_kernels.h"

#include "../quant/quant_math.h" // bf16 conversions shared with the CPU

#include <cstdint>

namespace fsdprt {
namespace gpu {
namespace split_k {

namespace {

constexpr int kThreads = 256;
// Blocks of one launch: enough to fill an H200 (132 SMs x 8 blocks of 256
// threads) several times; the grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 4096;

template <bool BF16, bool CONTIGUOUS>
__global__ void __launch_bounds__(kThreads)
    splitKReduceKernel(const float *partials, int64_t parts, int64_t batch,
                       int64_t m, int64_t n, float alpha, float beta, void *c,
                       int64_t ldc, int64_t stride_c) {
  const int64_t mn = m * n, total = batch * mn;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = 0; p < parts; ++p)
      sum += partials[p * total + e];
    // A contiguous c (ldc n, stride m n) needs no 64-bit divisions.
    int64_t at = e;
    if (!CONTIGUOUS) {
      const int64_t b = e / mn, r = e - b * mn, i = r / n;
      at = b * stride_c + i * ldc + (r - i * n);
    }
    float v = alpha * sum;
    if (BF16) {
      uint16_t *out = static_cast<uint16_t *>(c);
      if (beta != 0.0f)
        v += beta * quant::bf16ToFloat(out[at]);
      out[at] = quant::floatToBf16(v);
    } else {
      float *out = static_cast<float *>(c);
      if (beta != 0.0f)
        v += beta * out[at];
      out[at] = v;
    }
  }
}

} // namespace

cudaError_t reduce(const Args &a, cudaStream_t st) {
  const int64_t total = a.batch * a.m * a.n;
  if (total == 0)
    return cudaSuccess;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks)
    blocks = kMaxBlocks;
  const unsigned grid = unsigned(blocks);
  const bool contiguous =
      a.ldc == a.n && (a.batch == 1 || a.stride_c == a.m * a.n);
  auto kernel = a.bf16 ? (contiguous ? splitKReduceKernel<true, true>
                                     : splitKReduceKernel<true, false>)
                       : (contiguous ? splitKReduceKernel<false, true>
                                     : splitKReduceKernel<false, false>);
  kernel<<<grid, kThreads, 0, st>>>(a.partials, a.parts, a.batch, a.m, a.n,
                                    a.alpha, a.beta, a.c, a.ldc, a.stride_c);
  return cudaGetLastError();
}

} // namespace split_k
} // namespace gpu
} // namespace fsdprt

// Device helpers shared by the fused attention kernels on the CUDA cores
// (attention_kernels.cu) and on the tensor cores (attention_mma_kernels.cu):
// the shape every kernel receives, element conversions, the masked base-2
// score and the causal key range. Compiled by nvcc for a GPU and by the host
// compiler for the emulation of CUDA (runtime/test/quant/cuda_emulation).
#ifndef FSDPRT_CUDA_ATTENTION_DEVICE_H
#define FSDPRT_CUDA_ATTENTION_DEVICE_H

#include "attention_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <math.h>

namespace fsdprt {
namespace gpu {
namespace attention {
namespace detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// What every kernel needs besides its tensors.
struct Shape {
  int64_t bh, heads, tq, tk;
  float scale;  // natural units (gradients)
  float scale2; // scale * log2(e) (scores)
  int causal;   // key j hidden from query i when j > i
  int vec;      // every tensor 16-byte aligned: 16-byte loads
  const void *mask;
  int64_t msb, msh, msq, msk;
};

// ---- element conversions ----------------------------------------------------

__device__ __forceinline__ float toF(float v) { return v; }
__device__ __forceinline__ float toF(uint16_t v) {
  const uint32_t u = uint32_t(v) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
// Round to nearest even (NaN stays NaN).
__device__ __forceinline__ uint16_t toBf16(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
__device__ __forceinline__ void store(uint16_t *p, float v) { *p = toBf16(v); }

// The launch's dynamic shared memory.
template <typename T> __device__ __forceinline__ T *sharedTiles() {
#ifdef FSDPRT_CUDA_EMULATION
  return cuda_emulation::dynamicShared<T>();
#else
  extern __shared__ float4 dynamicSmem[];
  return reinterpret_cast<T *>(dynamicSmem);
#endif
}

// ---- scores -----------------------------------------------------------------

// The base-2 score of query row r and key c from the product q.k: -inf when
// the key is out of range or causally hidden.
template <typename T>
__device__ __forceinline__ float score2(float dot, int64_t r, int64_t c,
                                        int64_t b, int64_t h, const Shape &s) {
  if (c >= s.tk || (s.causal && c > r))
    return -INFINITY;
  float x = dot * s.scale2;
  if (s.mask && r < s.tq)
    x += toF(static_cast<const T *>(
             s.mask)[b * s.msb + h * s.msh + r * s.msq + c * s.msk]) *
         kLog2e;
  return x;
}

// Keys [0, end) can be visible from query rows [q0, q0 + rows).
__device__ __forceinline__ int64_t keyEnd(const Shape &s, int64_t q0,
                                          int rows) {
  return s.causal && q0 + rows < s.tk ? q0 + rows : s.tk;
}

// The probability of a recomputed base-2 score given the row's LSE in base
// 2 (-inf: a fully masked row, whose probabilities are 0).
__device__ __forceinline__ float prob(float x2, float lse2) {
  return lse2 == -INFINITY ? 0.0f : exp2f(x2 - lse2);
}

// ---- launches ---------------------------------------------------------------

inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

inline Shape shapeOf(const Args &a, bool vec) {
  Shape s;
  s.bh = a.batch * a.heads;
  s.heads = a.heads;
  s.tq = a.tq;
  s.tk = a.tk;
  s.scale = a.scale;
  s.scale2 = a.scale * kLog2e;
  s.causal = a.causal ? 1 : 0;
  s.vec = vec ? 1 : 0;
  s.mask = a.mask;
  s.msb = a.mask_stride[0];
  s.msh = a.mask_stride[1];
  s.msq = a.mask_stride[2];
  s.msk = a.mask_stride[3];
  return s;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace detail
} // namespace attention
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_ATTENTION_DEVICE_H

// Warp-level tensor-core products for kernels that run on a GPU and in the
// host emulation of CUDA alike: mma.sync.aligned.m16n8k16 on bf16 operands
// with f32 accumulators, as inline PTX on the device (sm_80 and newer) and
// as cuda_emulation::mmaM16N8K16 (runtime/test/quant/cuda_emulation) under
// the emulation, which exchanges the warp's fragments between its fibers.
// Compiled for a chip older than sm_80 the helpers trap (the runtime is
// built for sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise).
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type"); g = lane / 4, t = lane % 4, two 16-bit elements per register, the
// lower column (A) or row (B) in the low half:
//   A, 16 x 16, row-major:  a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
//                           a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]
//   B, 16 x 8, col-major:   b[0] = B[2t..2t+1][g]    b[1] = B[2t+8..2t+9][g]
//   C, 16 x 8, f32:         c[0..1] = C[g][2t..2t+1] c[2..3] = C[g+8][2t..2t+1]
// So an accumulator of C = A1 B1 is, after packing to bf16 pairs, the A
// fragment of the next product C2 = C B2 (how attention multiplies P by V).
#ifndef FSDPRT_CUDA_MMA_SYNC_H
#define FSDPRT_CUDA_MMA_SYNC_H

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace fsdprt {
namespace gpu {
namespace mma {

// acc += A B: one m16n8k16 product of the warp (every lane calls it).
__device__ __forceinline__ void bf16m16n8k16(float acc[4], const uint32_t a[4],
                                             const uint32_t b[2]) {
#ifdef FSDPRT_CUDA_EMULATION
  cuda_emulation::mmaM16N8K16(acc, a, b, acc, true);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap(); // bf16 mma.sync needs sm_80; built for older chips only
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

// Two f32 values rounded to nearest even as a bf16 pair, `lo` in the low
// half.
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
#ifdef FSDPRT_CUDA_EMULATION
  auto round = [](float v) -> uint32_t {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return (u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
  };
  return round(lo) | (round(hi) << 16);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap(); // cvt.rn.bf16x2.f32 needs sm_80
  return 0;
#else
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}

// The 32-bit word (two 16-bit elements) at p, 4-byte aligned.
__device__ __forceinline__ uint32_t load32(const uint16_t *p) {
#ifdef FSDPRT_CUDA_EMULATION
  uint32_t r;
  std::memcpy(&r, p, 4);
  return r;
#else
  return *reinterpret_cast<const uint32_t *>(p);
#endif
}

// The A fragment of rows [r0, r0 + 16) and columns [k0, k0 + 16) of a
// row-major bf16 tile with row pitch P (elements).
template <int P>
__device__ __forceinline__ void loadA(uint32_t a[4], const uint16_t *tile,
                                      int r0, int k0, int lane) {
  const uint16_t *p = tile + (r0 + lane / 4) * P + k0 + 2 * (lane % 4);
  a[0] = load32(p);
  a[1] = load32(p + 8 * P);
  a[2] = load32(p + 8);
  a[3] = load32(p + 8 * P + 8);
}

// The B fragment of B = T^T for rows [n0, n0 + 8) and columns [k0, k0 + 16)
// of a row-major bf16 tile T with row pitch P: B[k][n] = T[n0 + n][k0 + k].
template <int P>
__device__ __forceinline__ void loadB(uint32_t b[2], const uint16_t *tile,
                                      int n0, int k0, int lane) {
  const uint16_t *p = tile + (n0 + lane / 4) * P + k0 + 2 * (lane % 4);
  b[0] = load32(p);
  b[1] = load32(p + 8);
}

// The A fragment of k columns [16 kc, 16 kc + 16) of a 16-row f32
// accumulator held as n tiles of 8 columns (acc[n][0..3]), rounded to bf16.
__device__ __forceinline__ void accToA(uint32_t a[4], const float (*acc)[4],
                                       int kc) {
  a[0] = packBf16(acc[2 * kc][0], acc[2 * kc][1]);
  a[1] = packBf16(acc[2 * kc][2], acc[2 * kc][3]);
  a[2] = packBf16(acc[2 * kc + 1][0], acc[2 * kc + 1][1]);
  a[3] = packBf16(acc[2 * kc + 1][2], acc[2 * kc + 1][3]);
}

} // namespace mma
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_MMA_SYNC_H

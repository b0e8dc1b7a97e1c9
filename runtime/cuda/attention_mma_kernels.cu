//===- attention_mma_kernels.cu - fused attention on tensor cores ---------===//
//
// The bf16 attention of attention_kernels.cu (same semantics: online
// softmax in base 2, causal key tiles skipped, additive mask, fully masked
// rows give O = 0, LSE = -inf and zero gradients, any sequence length) with
// every product on the tensor cores: mma.sync m16n8k16 on bf16 operands,
// f32 accumulators (mma_sync.h), head dimensions 64 and 128.
//
// A block is 4 warps; each warp owns 16 rows of the block's 64 (queries in
// the forward and dQ kernels, keys in the dK/dV kernel) and keeps its
// accumulators in registers, in the mma's C layout (mma_sync.h): a thread
// holds rows g and g + 8 of its warp's 16 and two columns of every 8-column
// tile, so row maxima and sums reduce over the 4 lanes of a quad. The
// probabilities P (and dS) go from the C layout to the next product's A
// fragment in registers, rounded to bf16 as FlashAttention-2 does; their row
// sums are taken in f32 before the rounding.
//
// Tiles are staged in shared memory as bf16, rows padded by 8 elements (16
// bytes) so that a fragment load (8 rows x 4 words) hits 32 banks; operands
// that a product needs with the other dimension contiguous (V in O += P V,
// Q and dO in dK += dS^T Q and dV += P^T dO, K in dQ += dS K) are also
// stored transposed. Fragments are read with 32-bit shared loads.
//
// The backward is the same three launches as attention_kernels.cu (delta,
// then dK/dV per key tile, then dQ per query tile): every output element is
// summed by one thread in a fixed order, no atomics, bit-identical results
// from run to run. It recomputes S and dP in both the dK/dV and the dQ
// kernel: 7 tile products per (query tile, key tile) where FlashAttention-2's
// atomic dQ needs 5.
//
//===----------------------------------------------------------------------===//

#include "attention_device.h"
#include "attention_kernels.h"
#include "mma_sync.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <math.h>

namespace {

using fsdprt::gpu::attention::Args;
using namespace fsdprt::gpu::attention::detail;
namespace mma = fsdprt::gpu::mma;

constexpr int kWarps = 4, kThreads = 32 * kWarps;

// Rows [0, valid) of a [ROWS x D] bf16 tile from contiguous global rows:
// row-major into `rows` (pitch D + 8) and transposed into `cols` ([D] rows
// of pitch ROWS + 8), either may be null; rows from `valid` on read as zero.
template <int ROWS, int D>
__device__ __forceinline__ void stage(uint16_t *rows, uint16_t *cols,
                                      const uint16_t *__restrict__ src,
                                      int valid, bool vec) {
  constexpr int kChunks = D / 8, PD = D + 8, PR = ROWS + 8;
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 u = make_uint4(0, 0, 0, 0);
    if (r < valid) {
      if (vec) {
        u = *reinterpret_cast<const uint4 *>(src + r * D + col);
      } else {
        uint16_t e[8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
          e[i] = src[r * D + col + i];
        memcpy(&u, e, 16);
      }
    }
    if (rows) {
#ifdef FSDPRT_CUDA_EMULATION
      memcpy(rows + r * PD + col, &u, 16);
#else
      *reinterpret_cast<uint4 *>(rows + r * PD + col) = u;
#endif
    }
    if (cols) {
      uint16_t e[8];
      memcpy(e, &u, 16);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        cols[(col + i) * PR + r] = e[i];
    }
  }
}

// Maximum / sum over the 4 lanes of a quad (one row of an accumulator).
__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Two adjacent bf16 outputs of one row.
__device__ __forceinline__ void storePair(uint16_t *p, float lo, float hi,
                                          bool vec) {
  if (vec) {
    const uint32_t w = mma::packBf16(lo, hi);
#ifdef FSDPRT_CUDA_EMULATION
    memcpy(p, &w, 4);
#else
    *reinterpret_cast<uint32_t *>(p) = w;
#endif
  } else {
    p[0] = toBf16(lo);
    p[1] = toBf16(hi);
  }
}

// ---- forward ----------------------------------------------------------------

template <int D> struct Fwd {
  static constexpr int BM = 64, BN = 64, PD = D + 8, PN = BN + 8;
  static constexpr int kBytes = 2 * ((BM + BN) * PD + D * PN);
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    attnMmaFwdKernel(const uint16_t *__restrict__ q,
                     const uint16_t *__restrict__ k,
                     const uint16_t *__restrict__ v, uint16_t *__restrict__ o,
                     float *__restrict__ lse, Shape s) {
  using F = Fwd<D>;
  constexpr int BM = F::BM, BN = F::BN, PD = F::PD, PN = F::PN;
  constexpr int KD = D / 16, NT = BN / 8, DT = D / 8;
  uint16_t *sQ = sharedTiles<uint16_t>();
  uint16_t *sK = sQ + BM * PD;
  uint16_t *sVt = sK + BN * PD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // The last query blocks (the most key tiles under a causal mask) first.
  const int64_t nQb = (s.tq + BM - 1) / BM;
  const int64_t bh = blockIdx.x % s.bh;
  const int64_t q0 = (nQb - 1 - int64_t(blockIdx.x) / s.bh) * BM;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const uint16_t *kBase = k + bh * s.tk * D;
  const uint16_t *vBase = v + bh * s.tk * D;

  stage<BM, D>(sQ, nullptr, q + (bh * s.tq + q0) * D,
               int(s.tq - q0 < BM ? s.tq - q0 : BM), s.vec);
  __syncthreads();
  uint32_t qa[KD][4];
#pragma unroll
  for (int kc = 0; kc < KD; ++kc)
    mma::loadA<PD>(qa[kc], sQ, 16 * warp, 16 * kc, lane);

  // Rows r0 (index 0) and r0 + 8 (index 1) of the thread.
  const int64_t r0 = q0 + 16 * warp + g;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[j][e] = 0.0f;

  const int64_t kEnd = keyEnd(s, q0, BM);
  for (int64_t k0 = 0; k0 < kEnd; k0 += BN) {
    __syncthreads(); // the previous tile's fragments are read
    const int valid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
    stage<BN, D>(sK, nullptr, kBase + k0 * D, valid, s.vec);
    stage<BN, D>(nullptr, sVt, vBase + k0 * D, valid, s.vec);
    __syncthreads();

    float sc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sc[j][e] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < KD; ++kc)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        uint32_t bk[2];
        mma::loadB<PD>(bk, sK, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(sc[j], qa[kc], bk);
      }

    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t c = k0 + 8 * j + 2 * t + (e & 1);
        sc[j][e] = score2<uint16_t>(sc[j][e], r0 + 8 * (e / 2), c, b, h, s);
        mx[e / 2] = fmaxf(mx[e / 2], sc[j][e]);
      }
    float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float mNew = fmaxf(m[i], quadMax(mx[i]));
      // All scores so far -inf: subtract 0, so that exp2 gives 0, not NaN.
      base[i] = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = exp2f(m[i] - base[i]);
      m[i] = mNew;
      l[i] *= alpha;
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        acc[j][2 * i] *= alpha;
        acc[j][2 * i + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[j][e] = exp2f(sc[j][e] - base[e / 2]);
        sum[e / 2] += sc[j][e];
      }
    l[0] += quadSum(sum[0]);
    l[1] += quadSum(sum[1]);

#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      uint32_t pa[4];
      mma::accToA(pa, sc, kc);
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        uint32_t bv[2];
        mma::loadB<PN>(bv, sVt, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(acc[j], pa, bv);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + 8 * i;
    if (r >= s.tq)
      continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    uint16_t *row = o + (bh * s.tq + r) * D;
#pragma unroll
    for (int j = 0; j < DT; ++j)
      storePair(row + 8 * j + 2 * t, acc[j][2 * i] * inv,
                acc[j][2 * i + 1] * inv, s.vec);
    if (t == 0)
      lse[bh * s.tq + r] =
          l[i] > 0.0f ? (m[i] + log2f(l[i])) * kLn2 : -INFINITY;
  }
}

// ---- backward: dK and dV ----------------------------------------------------

// One block per 64 keys (16 per warp); walks the query tiles of BM rows.
template <int D> struct BwdKV {
  static constexpr int BN = 64, BM = D <= 64 ? 64 : 32;
  static constexpr int PD = D + 8, PM = BM + 8;
  static constexpr int kBytes =
      2 * ((2 * BN + 2 * BM) * PD + 2 * D * PM) + 4 * 2 * BM;
};

template <int D>
__global__ void __launch_bounds__(kThreads) attnMmaBwdKVKernel(
    const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
    const uint16_t *__restrict__ v, const uint16_t *__restrict__ dout,
    const float *__restrict__ lse, const float *__restrict__ delta,
    uint16_t *__restrict__ dk, uint16_t *__restrict__ dv, Shape s) {
  using F = BwdKV<D>;
  constexpr int BN = F::BN, BM = F::BM, PD = F::PD, PM = F::PM;
  constexpr int KD = D / 16, QT = BM / 8, DT = D / 8;
  uint16_t *sK = sharedTiles<uint16_t>();
  uint16_t *sV = sK + BN * PD;
  uint16_t *sQ = sV + BN * PD;
  uint16_t *sdO = sQ + BM * PD;
  uint16_t *sQt = sdO + BM * PD;
  uint16_t *sdOt = sQt + D * PM;
  float *sL = reinterpret_cast<float *>(sdOt + D * PM);
  float *sDelta = sL + BM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t bh = blockIdx.x % s.bh;
  // The first key blocks (the most query tiles under a causal mask) first.
  const int64_t k0 = int64_t(blockIdx.x) / s.bh * BN;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const int kValid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
  stage<BN, D>(sK, nullptr, k + (bh * s.tk + k0) * D, kValid, s.vec);
  stage<BN, D>(sV, nullptr, v + (bh * s.tk + k0) * D, kValid, s.vec);

  // Keys c0 (index 0) and c0 + 8 (index 1) of the thread.
  const int64_t c0 = k0 + 16 * warp + g;
  float dkAcc[DT][4], dvAcc[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dkAcc[j][e] = 0.0f;
      dvAcc[j][e] = 0.0f;
    }

  // Under a causal mask no query before k0 sees these keys.
  const int64_t qBegin = s.causal ? k0 / BM * BM : 0;
  for (int64_t q0 = qBegin; q0 < s.tq; q0 += BM) {
    __syncthreads();
    const int qValid = int(s.tq - q0 < BM ? s.tq - q0 : BM);
    stage<BM, D>(sQ, sQt, q + (bh * s.tq + q0) * D, qValid, s.vec);
    stage<BM, D>(sdO, sdOt, dout + (bh * s.tq + q0) * D, qValid, s.vec);
    for (int j = threadIdx.x; j < BM; j += kThreads) {
      const bool in = j < qValid;
      sL[j] = in ? lse[bh * s.tq + q0 + j] * kLog2e : -INFINITY;
      sDelta[j] = in ? delta[bh * s.tq + q0 + j] : 0.0f;
    }
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys.
    float st[QT][4], dpt[QT][4];
#pragma unroll
    for (int j = 0; j < QT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        st[j][e] = 0.0f;
        dpt[j][e] = 0.0f;
      }
#pragma unroll
    for (int kc = 0; kc < KD; ++kc) {
      uint32_t ak[4], av[4];
      mma::loadA<PD>(ak, sK, 16 * warp, 16 * kc, lane);
      mma::loadA<PD>(av, sV, 16 * warp, 16 * kc, lane);
#pragma unroll
      for (int j = 0; j < QT; ++j) {
        uint32_t bq[2], bo[2];
        mma::loadB<PD>(bq, sQ, 8 * j, 16 * kc, lane);
        mma::loadB<PD>(bo, sdO, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(st[j], ak, bq);
        mma::bf16m16n8k16(dpt[j], av, bo);
      }
    }
    // P^T and dS^T = P^T * (dP^T - delta).
#pragma unroll
    for (int j = 0; j < QT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qj = 8 * j + 2 * t + (e & 1);
        const float p =
            prob(score2<uint16_t>(st[j][e], q0 + qj, c0 + 8 * (e / 2), b, h, s),
                 sL[qj]);
        st[j][e] = p;
        dpt[j][e] = p * (dpt[j][e] - sDelta[qj]);
      }
      // dV += P^T dO, dK += dS^T Q.
#pragma unroll
    for (int kc = 0; kc < BM / 16; ++kc) {
      uint32_t pa[4], dsa[4];
      mma::accToA(pa, st, kc);
      mma::accToA(dsa, dpt, kc);
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        uint32_t bo[2], bq[2];
        mma::loadB<PM>(bo, sdOt, 8 * j, 16 * kc, lane);
        mma::loadB<PM>(bq, sQt, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(dvAcc[j], pa, bo);
        mma::bf16m16n8k16(dkAcc[j], dsa, bq);
      }
    }
  }

  const bool vec = s.vec;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t c = c0 + 8 * i;
    if (c >= s.tk)
      continue;
    uint16_t *dkRow = dk + (bh * s.tk + c) * D;
    uint16_t *dvRow = dv + (bh * s.tk + c) * D;
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      storePair(dkRow + 8 * j + 2 * t, dkAcc[j][2 * i] * s.scale,
                dkAcc[j][2 * i + 1] * s.scale, vec);
      storePair(dvRow + 8 * j + 2 * t, dvAcc[j][2 * i], dvAcc[j][2 * i + 1],
                vec);
    }
  }
}

// ---- backward: dQ -----------------------------------------------------------

// One block per 64 queries (16 per warp); walks the key tiles of BN keys.
template <int D> struct BwdQ {
  static constexpr int BM = 64, BN = D <= 64 ? 64 : 32;
  static constexpr int PD = D + 8, PN = BN + 8;
  static constexpr int kBytes = 2 * ((2 * BM + 2 * BN) * PD + D * PN);
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    attnMmaBwdQKernel(const uint16_t *__restrict__ q,
                      const uint16_t *__restrict__ k,
                      const uint16_t *__restrict__ v,
                      const uint16_t *__restrict__ dout,
                      const float *__restrict__ lse,
                      const float *__restrict__ delta,
                      uint16_t *__restrict__ dq, Shape s) {
  using F = BwdQ<D>;
  constexpr int BM = F::BM, BN = F::BN, PD = F::PD, PN = F::PN;
  constexpr int KD = D / 16, NT = BN / 8, DT = D / 8;
  uint16_t *sQ = sharedTiles<uint16_t>();
  uint16_t *sdO = sQ + BM * PD;
  uint16_t *sK = sdO + BM * PD;
  uint16_t *sV = sK + BN * PD;
  uint16_t *sKt = sV + BN * PD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t nQb = (s.tq + BM - 1) / BM;
  const int64_t bh = blockIdx.x % s.bh;
  const int64_t q0 = (nQb - 1 - int64_t(blockIdx.x) / s.bh) * BM;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const int qValid = int(s.tq - q0 < BM ? s.tq - q0 : BM);
  stage<BM, D>(sQ, nullptr, q + (bh * s.tq + q0) * D, qValid, s.vec);
  stage<BM, D>(sdO, nullptr, dout + (bh * s.tq + q0) * D, qValid, s.vec);
  const uint16_t *kBase = k + bh * s.tk * D;
  const uint16_t *vBase = v + bh * s.tk * D;

  // Rows r0 (index 0) and r0 + 8 (index 1) of the thread.
  const int64_t r0 = q0 + 16 * warp + g;
  float lse2[2], dl[2], acc[DT][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + 8 * i;
    lse2[i] = r < s.tq ? lse[bh * s.tq + r] * kLog2e : -INFINITY;
    dl[i] = r < s.tq ? delta[bh * s.tq + r] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < DT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[j][e] = 0.0f;

  const int64_t kEnd = keyEnd(s, q0, BM);
  for (int64_t k0 = 0; k0 < kEnd; k0 += BN) {
    __syncthreads();
    const int valid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
    stage<BN, D>(sK, sKt, kBase + k0 * D, valid, s.vec);
    stage<BN, D>(sV, nullptr, vBase + k0 * D, valid, s.vec);
    __syncthreads();

    // S = Q K^T and dP = dO V^T for the warp's 16 queries.
    float sc[NT][4], dp[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[j][e] = 0.0f;
        dp[j][e] = 0.0f;
      }
#pragma unroll
    for (int kc = 0; kc < KD; ++kc) {
      uint32_t aq[4], ao[4];
      mma::loadA<PD>(aq, sQ, 16 * warp, 16 * kc, lane);
      mma::loadA<PD>(ao, sdO, 16 * warp, 16 * kc, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        uint32_t bk[2], bv[2];
        mma::loadB<PD>(bk, sK, 8 * j, 16 * kc, lane);
        mma::loadB<PD>(bv, sV, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(sc[j], aq, bk);
        mma::bf16m16n8k16(dp[j], ao, bv);
      }
    }
    // dS = P * (dP - delta).
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2;
        const int64_t c = k0 + 8 * j + 2 * t + (e & 1);
        const float p =
            prob(score2<uint16_t>(sc[j][e], r0 + 8 * i, c, b, h, s), lse2[i]);
        dp[j][e] = p * (dp[j][e] - dl[i]);
      }
      // dQ += dS K.
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      uint32_t dsa[4];
      mma::accToA(dsa, dp, kc);
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        uint32_t bk[2];
        mma::loadB<PN>(bk, sKt, 8 * j, 16 * kc, lane);
        mma::bf16m16n8k16(acc[j], dsa, bk);
      }
    }
  }

  const bool vec = s.vec;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + 8 * i;
    if (r >= s.tq)
      continue;
    uint16_t *row = dq + (bh * s.tq + r) * D;
#pragma unroll
    for (int j = 0; j < DT; ++j)
      storePair(row + 8 * j + 2 * t, acc[j][2 * i] * s.scale,
                acc[j][2 * i + 1] * s.scale, vec);
  }
}

// ---- launches ---------------------------------------------------------------

template <typename Kernel> cudaError_t allowShared(Kernel kernel, int bytes) {
  return cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <int D> cudaError_t forwardD(const Args &a, cudaStream_t st) {
  const bool vec =
      aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.out);
  const Shape s = shapeOf(a, vec);
  cudaError_t rc = allowShared(attnMmaFwdKernel<D>, Fwd<D>::kBytes);
  if (rc != cudaSuccess)
    return rc;
  const unsigned grid = unsigned(s.bh * ceilDiv(a.tq, Fwd<D>::BM));
  attnMmaFwdKernel<D><<<grid, kThreads, Fwd<D>::kBytes, st>>>(
      static_cast<const uint16_t *>(a.q), static_cast<const uint16_t *>(a.k),
      static_cast<const uint16_t *>(a.v), static_cast<uint16_t *>(a.out), a.lse,
      s);
  return cudaGetLastError();
}

template <int D> cudaError_t backwardD(const Args &a, cudaStream_t st) {
  const bool vec = aligned16(a.q) && aligned16(a.k) && aligned16(a.v) &&
                   aligned16(a.dout) && aligned16(a.dq) && aligned16(a.dk) &&
                   aligned16(a.dv);
  const Shape s = shapeOf(a, vec);
  cudaError_t rc;
  if (a.tk > 0) {
    rc = allowShared(attnMmaBwdKVKernel<D>, BwdKV<D>::kBytes);
    if (rc != cudaSuccess)
      return rc;
    attnMmaBwdKVKernel<D><<<unsigned(s.bh * ceilDiv(a.tk, BwdKV<D>::BN)),
                            kThreads, BwdKV<D>::kBytes, st>>>(
        static_cast<const uint16_t *>(a.q), static_cast<const uint16_t *>(a.k),
        static_cast<const uint16_t *>(a.v),
        static_cast<const uint16_t *>(a.dout), a.lse, a.delta,
        static_cast<uint16_t *>(a.dk), static_cast<uint16_t *>(a.dv), s);
    rc = cudaGetLastError();
    if (rc != cudaSuccess)
      return rc;
  }
  rc = allowShared(attnMmaBwdQKernel<D>, BwdQ<D>::kBytes);
  if (rc != cudaSuccess)
    return rc;
  attnMmaBwdQKernel<D><<<unsigned(s.bh * ceilDiv(a.tq, BwdQ<D>::BM)), kThreads,
                         BwdQ<D>::kBytes, st>>>(
      static_cast<const uint16_t *>(a.q), static_cast<const uint16_t *>(a.k),
      static_cast<const uint16_t *>(a.v), static_cast<const uint16_t *>(a.dout),
      a.lse, a.delta, static_cast<uint16_t *>(a.dq), s);
  return cudaGetLastError();
}

} // namespace

namespace fsdprt {
namespace gpu {
namespace attention {

bool mma_supported(const Args &a) {
  return a.bf16 && (a.d == 64 || a.d == 128);
}

cudaError_t mma_forward(const Args &a, cudaStream_t stream) {
  return a.d == 64 ? forwardD<64>(a, stream) : forwardD<128>(a, stream);
}

cudaError_t mma_backward(const Args &a, cudaStream_t stream) {
  return a.d == 64 ? backwardD<64>(a, stream) : backwardD<128>(a, stream);
}

} // namespace attention
} // namespace gpu
} // namespace fsdprt

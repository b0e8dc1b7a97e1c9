//===- attention_kernels.cu - fused attention forward and backward --------===//
//
// softmax(Q K^T * scale + mask) V without a [T, T] buffer, as FlashAttention-2
// computes it: a block takes 64 query rows, walks the key/value tiles with an
// online softmax (running row maximum and sum, f32), skips the key tiles that
// a causal mask hides entirely, and writes O and the row log-sum-exp (LSE).
// The backward recomputes the probabilities from Q, K and the LSE:
//   1. delta = rowsum(dO * O)                          (attnDeltaKernel)
//   2. per key tile, over the query tiles: dV += P^T dO, dK += dS^T Q * scale
//      with dS = P * (dO V^T - delta)                  (attnBwdKVKernel)
//   3. per query tile, over the key tiles: dQ += dS K * scale
//                                                      (attnBwdQKernel)
// Every output element is written by one thread that sums in a fixed order:
// no atomics, the results are bit-identical from run to run.
//
// Tiles live in shared memory as f32 (bf16 inputs are widened on load), rows
// padded to d + 1 floats so that the 16 lanes reading 16 different rows hit
// 16 banks. 256 threads per block, as a 16 x 16 grid: thread (ty, tx) owns
// rows ty + 16 i of the tile and columns tx + 16 j; the 16 lanes of one row
// group are half a warp and reduce row maxima and sums with shuffles.
// Products run on the CUDA cores in f32 (fmaf). bf16 inputs of head
// dimension 64 or 128 take the tensor-core kernels of
// attention_mma_kernels.cu instead (after this file's delta kernel in the
// backward).
//
// Softmax works in base 2 (exp2f): scores are (q.k * scale + mask) * log2(e).
// A row whose scores are all -inf (a fully masked row) has output 0 and
// LSE -inf, and its gradients are 0, as torch's scaled_dot_product_attention
// (its _safe_softmax) and FlashAttention give; a plain softmax gives NaN.
//
//===----------------------------------------------------------------------===//

#include "attention_device.h"
#include "attention_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <math.h>

namespace {

using fsdprt::gpu::attention::Args;
using namespace fsdprt::gpu::attention::detail;

constexpr int kThreads = 256;

// Sum / maximum over the 16 lanes of a row group (lanes that differ in the
// low 4 bits).
__device__ __forceinline__ float groupMax(float x) {
#pragma unroll
  for (int off = 8; off > 0; off /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ float groupSum(float x) {
#pragma unroll
  for (int off = 8; off > 0; off /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Rows [0, valid) of a [rows x D] tile from contiguous global rows into
// shared memory with row stride D + 1; rows [valid, rows) read as zero.
template <typename T, int D>
__device__ __forceinline__ void loadTile(float *dst, const T *__restrict__ src,
                                         int rows, int valid, bool vec) {
  constexpr int LD = D + 1;
  if (vec) {
    constexpr int kPer = 16 / int(sizeof(T));
    constexpr int kChunks = D / kPer;
    for (int c = threadIdx.x; c < rows * kChunks; c += kThreads) {
      const int r = c / kChunks, col = (c % kChunks) * kPer;
      float *d = dst + r * LD + col;
      if (r < valid) {
        const uint4 u =
            *reinterpret_cast<const uint4 *>(src + int64_t(r) * D + col);
        T tmp[kPer];
        memcpy(tmp, &u, 16);
#pragma unroll
        for (int e = 0; e < kPer; ++e)
          d[e] = toF(tmp[e]);
      } else {
#pragma unroll
        for (int e = 0; e < kPer; ++e)
          d[e] = 0.0f;
      }
    }
  } else {
    for (int e = threadIdx.x; e < rows * D; e += kThreads) {
      const int r = e / D, col = e % D;
      dst[r * LD + col] = r < valid ? toF(src[int64_t(r) * D + col]) : 0.0f;
    }
  }
}

// ---- forward
// ------------------------------------------------------------------

template <int D, int BM, int BN> struct FwdTiles {
  static constexpr int LD = D + 1, LP = BN + 1;
  static constexpr int kFloats = (BM + 2 * BN) * LD + BM * LP;
};

// Two resident blocks (the shared memory allows two or three): without the
// hint ptxas gave the f32 d = 16 instance 64 registers and a spill.
template <typename T, int D, int BM, int BN>
__global__ void __launch_bounds__(kThreads, 2)
    attnFwdKernel(const T *__restrict__ q, const T *__restrict__ k,
                  const T *__restrict__ v, T *__restrict__ o,
                  float *__restrict__ lse, Shape s) {
  using Tiles = FwdTiles<D, BM, BN>;
  constexpr int LD = Tiles::LD, LP = Tiles::LP;
  constexpr int RM = BM / 16, CN = BN / 16, DN = D / 16;
  float *sQ = sharedTiles<float>();
  float *sK = sQ + BM * LD;
  float *sV = sK + BN * LD;
  float *sP = sV + BN * LD;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // The last query blocks (the most key tiles under a causal mask) first.
  const int64_t nQb = (s.tq + BM - 1) / BM;
  const int64_t bh = blockIdx.x % s.bh;
  const int64_t q0 = (nQb - 1 - int64_t(blockIdx.x) / s.bh) * BM;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const T *kBase = k + bh * s.tk * D;
  const T *vBase = v + bh * s.tk * D;

  loadTile<T, D>(sQ, q + (bh * s.tq + q0) * D, BM,
                 int(s.tq - q0 < BM ? s.tq - q0 : BM), s.vec);
  float m[RM], l[RM], acc[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < DN; ++j)
      acc[i][j] = 0.0f;
  }

  const int64_t kEnd = keyEnd(s, q0, BM);
  for (int64_t k0 = 0; k0 < kEnd; k0 += BN) {
    __syncthreads(); // the previous tile's products are done
    const int valid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
    loadTile<T, D>(sK, kBase + k0 * D, BN, valid, s.vec);
    loadTile<T, D>(sV, vBase + k0 * D, BN, valid, s.vec);
    __syncthreads();

    float sc[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j)
        sc[i][j] = 0.0f;
    for (int kk = 0; kk < D; ++kk) {
      float a[RM], bk[CN];
#pragma unroll
      for (int i = 0; i < RM; ++i)
        a[i] = sQ[(ty + 16 * i) * LD + kk];
#pragma unroll
      for (int j = 0; j < CN; ++j)
        bk[j] = sK[(tx + 16 * j) * LD + kk];
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j)
          sc[i][j] = fmaf(a[i], bk[j], sc[i][j]);
    }

#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int64_t r = q0 + ty + 16 * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        sc[i][j] = score2<T>(sc[i][j], r, k0 + tx + 16 * j, b, h, s);
        mx = fmaxf(mx, sc[i][j]);
      }
      mx = groupMax(mx);
      const float mNew = fmaxf(m[i], mx);
      // All scores so far -inf: subtract 0, so that exp2 gives 0, not NaN.
      const float base = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = exp2f(m[i] - base);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const float p = exp2f(sc[i][j] - base);
        sP[(ty + 16 * i) * LP + tx + 16 * j] = p;
        sum += p;
      }
      l[i] = l[i] * alpha + groupSum(sum);
      m[i] = mNew;
#pragma unroll
      for (int j = 0; j < DN; ++j)
        acc[i][j] *= alpha;
    }
    __syncthreads();

    for (int n = 0; n < BN; ++n) {
      float vv[DN];
#pragma unroll
      for (int j = 0; j < DN; ++j)
        vv[j] = sV[n * LD + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float p = sP[(ty + 16 * i) * LP + n];
#pragma unroll
        for (int j = 0; j < DN; ++j)
          acc[i][j] = fmaf(p, vv[j], acc[i][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t r = q0 + ty + 16 * i;
    if (r >= s.tq)
      continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    T *row = o + (bh * s.tq + r) * D;
#pragma unroll
    for (int j = 0; j < DN; ++j)
      store(row + tx + 16 * j, acc[i][j] * inv);
    if (tx == 0)
      lse[bh * s.tq + r] =
          l[i] > 0.0f ? (m[i] + log2f(l[i])) * kLn2 : -INFINITY;
  }
}

// ---- backward
// -----------------------------------------------------------------

// delta[row] = sum_c dO[row][c] * O[row][c]: one warp per row.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    attnDeltaKernel(const T *__restrict__ o, const T *__restrict__ dout,
                    float *__restrict__ delta, int64_t rows) {
  const int64_t row =
      int64_t(blockIdx.x) * (kThreads / 32) + int64_t(threadIdx.x / 32);
  const int lane = threadIdx.x % 32;
  float sum = 0.0f;
  if (row < rows)
    for (int c = lane; c < D; c += 32)
      sum = fmaf(toF(o[row * D + c]), toF(dout[row * D + c]), sum);
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (row < rows && lane == 0)
    delta[row] = sum;
}

template <int D, int BN, int BM> struct KVTiles {
  static constexpr int LD = D + 1, LP = BM + 1;
  static constexpr int kFloats = 2 * (BN + BM) * LD + 2 * BN * LP + 2 * BM;
};

// One block per BN keys; walks the query tiles of BM rows.
template <typename T, int D, int BN, int BM>
__global__ void __launch_bounds__(kThreads)
    attnBwdKVKernel(const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, const T *__restrict__ dout,
                    const float *__restrict__ lse,
                    const float *__restrict__ delta, T *__restrict__ dk,
                    T *__restrict__ dv, Shape s) {
  using Tiles = KVTiles<D, BN, BM>;
  constexpr int LD = Tiles::LD, LP = Tiles::LP;
  constexpr int RM = BN / 16, CQ = BM / 16, DN = D / 16;
  float *sK = sharedTiles<float>();
  float *sV = sK + BN * LD;
  float *sQ = sV + BN * LD;
  float *sdO = sQ + BM * LD;
  float *sP = sdO + BM * LD;
  float *sdS = sP + BN * LP;
  float *sL = sdS + BN * LP;
  float *sDelta = sL + BM;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t bh = blockIdx.x % s.bh;
  // The first key blocks (the most query tiles under a causal mask) first.
  const int64_t k0 = int64_t(blockIdx.x) / s.bh * BN;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const int kValid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
  loadTile<T, D>(sK, k + (bh * s.tk + k0) * D, BN, kValid, s.vec);
  loadTile<T, D>(sV, v + (bh * s.tk + k0) * D, BN, kValid, s.vec);

  float dkAcc[RM][DN], dvAcc[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < DN; ++j) {
      dkAcc[i][j] = 0.0f;
      dvAcc[i][j] = 0.0f;
    }

  // Under a causal mask no query before k0 sees these keys.
  const int64_t qBegin = s.causal ? k0 / BM * BM : 0;
  for (int64_t q0 = qBegin; q0 < s.tq; q0 += BM) {
    __syncthreads();
    const int qValid = int(s.tq - q0 < BM ? s.tq - q0 : BM);
    loadTile<T, D>(sQ, q + (bh * s.tq + q0) * D, BM, qValid, s.vec);
    loadTile<T, D>(sdO, dout + (bh * s.tq + q0) * D, BM, qValid, s.vec);
    for (int j = threadIdx.x; j < BM; j += kThreads) {
      const bool in = j < qValid;
      sL[j] = in ? lse[bh * s.tq + q0 + j] * kLog2e : -INFINITY;
      sDelta[j] = in ? delta[bh * s.tq + q0 + j] : 0.0f;
    }
    __syncthreads();

    float st[RM][CQ], dpt[RM][CQ];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CQ; ++j) {
        st[i][j] = 0.0f;
        dpt[i][j] = 0.0f;
      }
    for (int kk = 0; kk < D; ++kk) {
      float ak[RM], av[RM], bq[CQ], bo[CQ];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        ak[i] = sK[(ty + 16 * i) * LD + kk];
        av[i] = sV[(ty + 16 * i) * LD + kk];
      }
#pragma unroll
      for (int j = 0; j < CQ; ++j) {
        bq[j] = sQ[(tx + 16 * j) * LD + kk];
        bo[j] = sdO[(tx + 16 * j) * LD + kk];
      }
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CQ; ++j) {
          st[i][j] = fmaf(ak[i], bq[j], st[i][j]);
          dpt[i][j] = fmaf(av[i], bo[j], dpt[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CQ; ++j) {
        const int qj = tx + 16 * j;
        const float p = prob(
            score2<T>(st[i][j], q0 + qj, k0 + ty + 16 * i, b, h, s), sL[qj]);
        sP[(ty + 16 * i) * LP + qj] = p;
        sdS[(ty + 16 * i) * LP + qj] = p * (dpt[i][j] - sDelta[qj]);
      }
    __syncthreads();

    for (int n = 0; n < BM; ++n) {
      float go[DN], gq[DN];
#pragma unroll
      for (int j = 0; j < DN; ++j) {
        go[j] = sdO[n * LD + tx + 16 * j];
        gq[j] = sQ[n * LD + tx + 16 * j];
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float p = sP[(ty + 16 * i) * LP + n];
        const float ds = sdS[(ty + 16 * i) * LP + n];
#pragma unroll
        for (int j = 0; j < DN; ++j) {
          dvAcc[i][j] = fmaf(p, go[j], dvAcc[i][j]);
          dkAcc[i][j] = fmaf(ds, gq[j], dkAcc[i][j]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t c = k0 + ty + 16 * i;
    if (c >= s.tk)
      continue;
    T *dkRow = dk + (bh * s.tk + c) * D;
    T *dvRow = dv + (bh * s.tk + c) * D;
#pragma unroll
    for (int j = 0; j < DN; ++j) {
      store(dkRow + tx + 16 * j, dkAcc[i][j] * s.scale);
      store(dvRow + tx + 16 * j, dvAcc[i][j]);
    }
  }
}

template <int D, int BM, int BN> struct QTiles {
  static constexpr int LD = D + 1, LP = BN + 1;
  static constexpr int kFloats = 2 * (BM + BN) * LD + BM * LP;
};

// One block per BM queries; walks the key tiles of BN keys.
template <typename T, int D, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    attnBwdQKernel(const T *__restrict__ q, const T *__restrict__ k,
                   const T *__restrict__ v, const T *__restrict__ dout,
                   const float *__restrict__ lse,
                   const float *__restrict__ delta, T *__restrict__ dq,
                   Shape s) {
  using Tiles = QTiles<D, BM, BN>;
  constexpr int LD = Tiles::LD, LP = Tiles::LP;
  constexpr int RM = BM / 16, CN = BN / 16, DN = D / 16;
  float *sQ = sharedTiles<float>();
  float *sdO = sQ + BM * LD;
  float *sK = sdO + BM * LD;
  float *sV = sK + BN * LD;
  float *sdS = sV + BN * LD;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t nQb = (s.tq + BM - 1) / BM;
  const int64_t bh = blockIdx.x % s.bh;
  const int64_t q0 = (nQb - 1 - int64_t(blockIdx.x) / s.bh) * BM;
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const int qValid = int(s.tq - q0 < BM ? s.tq - q0 : BM);
  loadTile<T, D>(sQ, q + (bh * s.tq + q0) * D, BM, qValid, s.vec);
  loadTile<T, D>(sdO, dout + (bh * s.tq + q0) * D, BM, qValid, s.vec);
  const T *kBase = k + bh * s.tk * D;
  const T *vBase = v + bh * s.tk * D;

  float lse2[RM], dl[RM], acc[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int qi = ty + 16 * i;
    lse2[i] = qi < qValid ? lse[bh * s.tq + q0 + qi] * kLog2e : -INFINITY;
    dl[i] = qi < qValid ? delta[bh * s.tq + q0 + qi] : 0.0f;
#pragma unroll
    for (int j = 0; j < DN; ++j)
      acc[i][j] = 0.0f;
  }

  const int64_t kEnd = keyEnd(s, q0, BM);
  for (int64_t k0 = 0; k0 < kEnd; k0 += BN) {
    __syncthreads();
    const int valid = int(s.tk - k0 < BN ? s.tk - k0 : BN);
    loadTile<T, D>(sK, kBase + k0 * D, BN, valid, s.vec);
    loadTile<T, D>(sV, vBase + k0 * D, BN, valid, s.vec);
    __syncthreads();

    float sc[RM][CN], dp[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        sc[i][j] = 0.0f;
        dp[i][j] = 0.0f;
      }
    for (int kk = 0; kk < D; ++kk) {
      float aq[RM], ao[RM], bk[CN], bv[CN];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        aq[i] = sQ[(ty + 16 * i) * LD + kk];
        ao[i] = sdO[(ty + 16 * i) * LD + kk];
      }
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        bk[j] = sK[(tx + 16 * j) * LD + kk];
        bv[j] = sV[(tx + 16 * j) * LD + kk];
      }
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) {
          sc[i][j] = fmaf(aq[i], bk[j], sc[i][j]);
          dp[i][j] = fmaf(ao[i], bv[j], dp[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const float p = prob(
            score2<T>(sc[i][j], q0 + ty + 16 * i, k0 + tx + 16 * j, b, h, s),
            lse2[i]);
        sdS[(ty + 16 * i) * LP + tx + 16 * j] = p * (dp[i][j] - dl[i]);
      }
    __syncthreads();

    for (int n = 0; n < BN; ++n) {
      float kv[DN];
#pragma unroll
      for (int j = 0; j < DN; ++j)
        kv[j] = sK[n * LD + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float ds = sdS[(ty + 16 * i) * LP + n];
#pragma unroll
        for (int j = 0; j < DN; ++j)
          acc[i][j] = fmaf(ds, kv[j], acc[i][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t r = q0 + ty + 16 * i;
    if (r >= s.tq)
      continue;
    T *row = dq + (bh * s.tq + r) * D;
#pragma unroll
    for (int j = 0; j < DN; ++j)
      store(row + tx + 16 * j, acc[i][j] * s.scale);
  }
}

// ---- launches
// -----------------------------------------------------------------

// Tile sizes by head dimension: 64 x 64 tiles up to d = 64; 64-query by
// 32-key tiles (forward, dQ) and 64-key by 32-query tiles (dK/dV) above, to
// stay within the shared memory that lets two blocks share a multiprocessor.
template <typename T, int D>
cudaError_t forwardD(const Args &a, cudaStream_t st) {
  constexpr int BM = 64, BN = D <= 64 ? 64 : 32;
  const bool vec = aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
  const Shape s = shapeOf(a, vec);
  const int bytes = int(FwdTiles<D, BM, BN>::kFloats * sizeof(float));
  cudaError_t rc =
      cudaFuncSetAttribute(attnFwdKernel<T, D, BM, BN>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (rc != cudaSuccess)
    return rc;
  const unsigned grid = unsigned(s.bh * ceilDiv(a.tq, BM));
  attnFwdKernel<T, D, BM, BN><<<grid, kThreads, bytes, st>>>(
      static_cast<const T *>(a.q), static_cast<const T *>(a.k),
      static_cast<const T *>(a.v), static_cast<T *>(a.out), a.lse, s);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t backwardD(const Args &a, cudaStream_t st) {
  const bool vec =
      aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.dout);
  const Shape s = shapeOf(a, vec);
  const int64_t rows = s.bh * a.tq;
  attnDeltaKernel<T, D>
      <<<unsigned(ceilDiv(rows, kThreads / 32)), kThreads, 0, st>>>(
          static_cast<const T *>(a.o), static_cast<const T *>(a.dout), a.delta,
          rows);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess || mma_supported(a))
    return rc != cudaSuccess ? rc : mma_backward(a, st);

  if (a.tk > 0) {
    constexpr int BN = 64, BM = D <= 64 ? 64 : 32;
    const int bytes = int(KVTiles<D, BN, BM>::kFloats * sizeof(float));
    rc = cudaFuncSetAttribute(attnBwdKVKernel<T, D, BN, BM>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              bytes);
    if (rc != cudaSuccess)
      return rc;
    attnBwdKVKernel<T, D, BN, BM>
        <<<unsigned(s.bh * ceilDiv(a.tk, BN)), kThreads, bytes, st>>>(
            static_cast<const T *>(a.q), static_cast<const T *>(a.k),
            static_cast<const T *>(a.v), static_cast<const T *>(a.dout), a.lse,
            a.delta, static_cast<T *>(a.dk), static_cast<T *>(a.dv), s);
    rc = cudaGetLastError();
    if (rc != cudaSuccess)
      return rc;
  }

  constexpr int BM = 64, BN = D <= 64 ? 64 : 32;
  const int bytes = int(QTiles<D, BM, BN>::kFloats * sizeof(float));
  rc = cudaFuncSetAttribute(attnBwdQKernel<T, D, BM, BN>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (rc != cudaSuccess)
    return rc;
  attnBwdQKernel<T, D, BM, BN>
      <<<unsigned(s.bh * ceilDiv(a.tq, BM)), kThreads, bytes, st>>>(
          static_cast<const T *>(a.q), static_cast<const T *>(a.k),
          static_cast<const T *>(a.v), static_cast<const T *>(a.dout), a.lse,
          a.delta, static_cast<T *>(a.dq), s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const Args &a, cudaStream_t st, bool fwd) {
  switch (a.d) {
  case 16:
    return fwd ? forwardD<T, 16>(a, st) : backwardD<T, 16>(a, st);
  case 32:
    return fwd ? forwardD<T, 32>(a, st) : backwardD<T, 32>(a, st);
  case 64:
    return fwd ? forwardD<T, 64>(a, st) : backwardD<T, 64>(a, st);
  case 96:
    return fwd ? forwardD<T, 96>(a, st) : backwardD<T, 96>(a, st);
  case 128:
    return fwd ? forwardD<T, 128>(a, st) : backwardD<T, 128>(a, st);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

namespace fsdprt {
namespace gpu {
namespace attention {

bool head_dim_supported(int64_t d) {
  return d == 16 || d == 32 || d == 64 || d == 96 || d == 128;
}

const char *bad_size(const Args &a) {
  // Grids count blocks of 32 rows at the least, in 31 bits.
  const int64_t bh = a.batch * a.heads;
  if (a.batch > 0 && bh / a.batch != a.heads)
    return "batch * heads overflows";
  const int64_t limit = (int64_t(1) << 31) - 1;
  if (bh > limit || ceilDiv(a.tq, 32) > limit / (bh ? bh : 1) ||
      ceilDiv(a.tk, 32) > limit / (bh ? bh : 1))
    return "more blocks than a CUDA grid holds";
  // Element offsets of every tensor in 63 bits.
  const int64_t t = a.tq > a.tk ? a.tq : a.tk;
  if (t > 0 && bh > 0 && (INT64_MAX / a.d) / t < bh)
    return "a tensor of more than 2^63 elements";
  return "";
}

cudaError_t forward(const Args &a, cudaStream_t stream) {
  if (a.batch * a.heads == 0 || a.tq == 0)
    return cudaSuccess;
  if (mma_supported(a))
    return mma_forward(a, stream);
  return a.bf16 ? dispatch<uint16_t>(a, stream, true)
                : dispatch<float>(a, stream, true);
}

cudaError_t backward(const Args &a, cudaStream_t stream) {
  if (a.batch * a.heads == 0 || (a.tq == 0 && a.tk == 0))
    return cudaSuccess;
  if (a.tq == 0) { // dK and dV of keys that no query reads are 0
    const size_t bytes =
        size_t(a.batch * a.heads * a.tk * a.d) * (a.bf16 ? 2 : 4);
    cudaError_t rc = cudaMemsetAsync(a.dk, 0, bytes, stream);
    return rc != cudaSuccess ? rc : cudaMemsetAsync(a.dv, 0, bytes, stream);
  }
  return a.bf16 ? dispatch<uint16_t>(a, stream, false)
                : dispatch<float>(a, stream, false);
}

} // namespace attention
} // namespace gpu
} // namespace fsdprt

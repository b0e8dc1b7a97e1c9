// The grouped matrix products of a sparse mixture of experts (docs/GPU.md,
// "Grouped products"): one tiled product per group of rows, the groups'
// bounds read from the offsets on the device (reading them on the host
// would wait for the step's device work).
//
// Each block computes one kTileM x kTileN tile of the output with 256
// threads (4 x 4 elements each), stepping through the reduction in slices
// of kTileK staged in shared memory, with f32 accumulators (bf16 operands
// are widened when staged; the result is rounded once).
//
// Rows form: the blocks are (row tile, column tile) pairs; the row tiles
// are numbered group after group (group g has ceil(size_g / kTileM) of
// them, then the rows after the last group one "zero group"), so a block
// scans the offsets to find its group and its rows. Blocks past the last
// tile exit. No tile crosses a group boundary, so a group whose size is not
// a multiple of the tile has a partial last tile, and an empty group none.
//
// Transposed form: the blocks are (group, k tile, column tile) triples; the
// reduction runs over the group's rows (an empty group writes zeros).
//
// No float atomics: every output element is written by one thread, and its
// sum is in the same order from run to run.
#include "grouped_kernels.h"

#include <cstdint>
#include <cstring>

namespace fsdprt {
namespace gpu {
namespace grouped {

namespace {

constexpr int kThreads = 256;
constexpr int kSide = 16; // threads per tile side; 4 elements each
constexpr int kPer = kTileM / kSide;
static_assert(kSide * kSide == kThreads, "one thread per 4 x 4 elements");
static_assert(kTileM == kTileN, "square tiles");
constexpr int kSharedFloats = 2 * kTileK * kTileM;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ float *sharedTiles() {
#ifdef FSDPRT_CUDA_EMULATION
  return cuda_emulation::dynamicShared<float>();
#else
  extern __shared__ float groupedTilesSmem[];
  return groupedTilesSmem;
#endif
}

template <bool BF16>
__device__ __forceinline__ float load(const void *p, int64_t at) {
  if (!BF16)
    return static_cast<const float *>(p)[at];
  const uint32_t bits = uint32_t(static_cast<const uint16_t *>(p)[at]) << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN kept quiet (as arith.truncf to bf16).
__device__ __forceinline__ uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

template <bool BF16>
__device__ __forceinline__ void store(void *p, int64_t at, float v) {
  if (BF16)
    static_cast<uint16_t *>(p)[at] = toBf16(v);
  else
    static_cast<float *>(p)[at] = v;
}

__device__ __forceinline__ int64_t offsetAt(const void *offsets, int bits,
                                            int64_t stride, int64_t g) {
  return bits == 32 ? int64_t(static_cast<const int32_t *>(offsets)[g * stride])
                    : static_cast<const int64_t *>(offsets)[g * stride];
}

// The end of group g: its offset, at least the previous group's end, at
// most `rows` (the running maximum of the offsets, clamped).
__device__ __forceinline__ int64_t clampedEnd(int64_t offset, int64_t start,
                                              int64_t rows) {
  const int64_t end = offset > start ? offset : start;
  return end < rows ? end : rows;
}

// The per-thread accumulators of a tile.
struct Acc {
  float v[kPer][kPer];
};

__device__ __forceinline__ void clear(Acc &acc) {
  for (int i = 0; i < kPer; ++i)
    for (int j = 0; j < kPer; ++j)
      acc.v[i][j] = 0.0f;
}

// acc += As^T Bs over the staged slice: As[kk][m], Bs[kk][n].
__device__ __forceinline__ void multiplySlice(Acc &acc, const float *as,
                                              const float *bs, int ty, int tx) {
  for (int kk = 0; kk < kTileK; ++kk) {
    float a[kPer], b[kPer];
    for (int i = 0; i < kPer; ++i)
      a[i] = as[kk * kTileM + ty + kSide * i];
    for (int j = 0; j < kPer; ++j)
      b[j] = bs[kk * kTileN + tx + kSide * j];
    for (int i = 0; i < kPer; ++i)
      for (int j = 0; j < kPer; ++j)
        acc.v[i][j] += a[i] * b[j];
  }
}

// Writes the tile at (row0, col0) of a [rowsEnd, n] view of out (rows at
// or after rowsEnd are not written).
template <bool BF16>
__device__ __forceinline__ void
writeTile(const Acc &acc, void *out, int64_t base, int64_t rowStride,
          int64_t colStride, int64_t row0, int64_t rowsEnd, int64_t col0,
          int64_t n, int ty, int tx) {
  for (int i = 0; i < kPer; ++i) {
    const int64_t r = row0 + ty + kSide * i;
    if (r >= rowsEnd)
      continue;
    for (int j = 0; j < kPer; ++j) {
      const int64_t c = col0 + tx + kSide * j;
      if (c < n)
        store<BF16>(out, base + r * rowStride + c * colStride, acc.v[i][j]);
    }
  }
}

// Block b: row tile b / colTiles (numbered group after group), column tile
// b % colTiles.
template <bool BF16>
__global__ void __launch_bounds__(kThreads)
    groupedRowsKernel(Args a, int64_t colTiles) {
  const int64_t slot = int64_t(blockIdx.x) / colTiles;
  const int64_t col0 = (int64_t(blockIdx.x) % colTiles) * kTileN;
  // Find the group: g == groups is the zero group after the last.
  int64_t start = 0, end = 0, tile = slot, g = 0;
  for (; g <= a.groups; ++g) {
    end =
        g < a.groups
            ? clampedEnd(offsetAt(a.offsets, a.offset_bits, a.offset_stride, g),
                         start, a.rows)
            : a.rows;
    const int64_t tiles = (end - start + kTileM - 1) / kTileM;
    if (tile < tiles)
      break;
    tile -= tiles;
    start = end;
  }
  if (g > a.groups)
    return; // past the last tile (the whole block)
  const int tid = int(threadIdx.x), ty = tid / kSide, tx = tid % kSide;
  const int64_t row0 = start + tile * kTileM;
  Acc acc;
  clear(acc);
  if (g < a.groups) {
    float *as = sharedTiles(), *bs = as + kTileK * kTileM;
    const int64_t rhsBase = g * a.rhs_group;
    for (int64_t k0 = 0; k0 < a.k; k0 += kTileK) {
      // lhs rows of the tile, k along the fastest threads.
      for (int idx = tid; idx < kTileK * kTileM; idx += kThreads) {
        const int kk = idx % kTileK, m = idx / kTileK;
        const int64_t r = row0 + m, kx = k0 + kk;
        as[kk * kTileM + m] =
            r < end && kx < a.k
                ? load<BF16>(a.lhs, r * a.lhs_row + kx * a.lhs_col)
                : 0.0f;
      }
      for (int idx = tid; idx < kTileK * kTileN; idx += kThreads) {
        const int nn = idx % kTileN, kk = idx / kTileN;
        const int64_t c = col0 + nn, kx = k0 + kk;
        bs[kk * kTileN + nn] =
            c < a.n && kx < a.k
                ? load<BF16>(a.rhs, rhsBase + kx * a.rhs_row + c * a.rhs_col)
                : 0.0f;
      }
      __syncthreads();
      multiplySlice(acc, as, bs, ty, tx);
      __syncthreads();
    }
  }
  writeTile<BF16>(acc, a.out, 0, a.out_row, a.out_col, row0, end, col0, a.n, ty,
                  tx);
}

// Block b: group b / (kTiles * colTiles), then its k tile and column tile.
template <bool BF16>
__global__ void __launch_bounds__(kThreads)
    groupedTransposeKernel(Args a, int64_t kTiles, int64_t colTiles) {
  const int64_t perGroup = kTiles * colTiles;
  const int64_t g = int64_t(blockIdx.x) / perGroup;
  const int64_t within = int64_t(blockIdx.x) % perGroup;
  const int64_t m0 = (within / colTiles) * kTileM;
  const int64_t col0 = (within % colTiles) * kTileN;
  int64_t start = 0, end = 0;
  for (int64_t h = 0; h <= g; ++h) {
    start = end;
    end = clampedEnd(offsetAt(a.offsets, a.offset_bits, a.offset_stride, h),
                     start, a.rows);
  }
  const int tid = int(threadIdx.x), ty = tid / kSide, tx = tid % kSide;
  Acc acc;
  clear(acc);
  float *as = sharedTiles(), *bs = as + kTileK * kTileM;
  for (int64_t r0 = start; r0 < end; r0 += kTileK) {
    // lhs[r, m0 + m] as As[r - r0][m]: m along the fastest threads.
    for (int idx = tid; idx < kTileK * kTileM; idx += kThreads) {
      const int m = idx % kTileM, kk = idx / kTileM;
      const int64_t r = r0 + kk, col = m0 + m;
      as[kk * kTileM + m] =
          r < end && col < a.k
              ? load<BF16>(a.lhs, r * a.lhs_row + col * a.lhs_col)
              : 0.0f;
    }
    for (int idx = tid; idx < kTileK * kTileN; idx += kThreads) {
      const int nn = idx % kTileN, kk = idx / kTileN;
      const int64_t r = r0 + kk, c = col0 + nn;
      bs[kk * kTileN + nn] =
          r < end && c < a.n ? load<BF16>(a.rhs, r * a.rhs_row + c * a.rhs_col)
                             : 0.0f;
    }
    __syncthreads();
    multiplySlice(acc, as, bs, ty, tx);
    __syncthreads();
  }
  writeTile<BF16>(acc, a.out, g * a.out_group, a.out_row, a.out_col, m0, a.k,
                  col0, a.n, ty, tx);
}

} // namespace

int64_t grid_blocks(const Args &a) {
  const int64_t colTiles = ceilDiv(a.n, kTileN);
  if (a.transpose_lhs)
    return a.groups * ceilDiv(a.k, kTileM) * colTiles;
  return (ceilDiv(a.rows, kTileM) + a.groups + 1) * colTiles;
}

cudaError_t grouped_matmul(const Args &a, cudaStream_t st) {
  const int64_t blocks = grid_blocks(a);
  if (blocks == 0)
    return cudaSuccess;
  const int64_t colTiles = ceilDiv(a.n, kTileN);
  const size_t bytes = size_t(kSharedFloats) * sizeof(float);
  const unsigned grid = unsigned(blocks);
  if (a.transpose_lhs) {
    const int64_t kTiles = ceilDiv(a.k, kTileM);
    if (a.bf16)
      groupedTransposeKernel<true>
          <<<grid, kThreads, bytes, st>>>(a, kTiles, colTiles);
    else
      groupedTransposeKernel<false>
          <<<grid, kThreads, bytes, st>>>(a, kTiles, colTiles);
  } else if (a.bf16) {
    groupedRowsKernel<true><<<grid, kThreads, bytes, st>>>(a, colTiles);
  } else {
    groupedRowsKernel<false><<<grid, kThreads, bytes, st>>>(a, colTiles);
  }
  return cudaGetLastError();
}

} // namespace grouped
} // namespace gpu
} // namespace fsdprt

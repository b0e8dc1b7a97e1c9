// The deterministic scatter-add of rows (docs/GPU.md, "The embedding
// backward"): output[indices[t], :] += source[t, :] in token order per
// output element, without float atomics.
//
// 1. Keys: token t gets the 64-bit key (slot << 32) | t, where slot is its
//    index, or 0xffffffff when the index is outside [0, slots); the key
//    array is padded to a power of two with all-ones keys.
// 2. A bitonic sort of the keys: tiles of 1024 keys sorted in shared memory,
//    then, for each merge size beyond a tile, the compare-exchanges across
//    tiles in global memory and the ones within a tile in shared memory.
//    The keys are distinct, so the sorted order is unique: the tokens of
//    each slot in increasing position, whatever the schedule.
// 3. Segments: a token whose slot differs from its sorted predecessor's
//    leads its slot's segment; one thread per (segment, column) adds the
//    segment's rows to the output element in token order, from the
//    output's value. That is the host loop's sum (fsdp-one-hot-scatter),
//    bit for bit, and the same from run to run. bf16 sums are rounded to
//    bf16 after each addition, as the loop's bf16 additions are.
#include "scatter_kernels.h"

#include <cstdint>
#include <cstring>

namespace fsdprt {
namespace gpu {
namespace scatter {

namespace {

constexpr int kThreads = 256; // keys, global steps and segments
constexpr int kTile = 1024;   // keys sorted per block in shared memory
constexpr int kTileThreads = kTile / 2; // one compare-exchange each per step
constexpr uint64_t kNoSlot = 0xffffffffull;
constexpr int64_t kMaxBlocks = 65535; // per launch, positions of step 3

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ unsigned long long *sharedKeys() {
#ifdef FSDPRT_CUDA_EMULATION
  return cuda_emulation::dynamicShared<unsigned long long>();
#else
  extern __shared__ unsigned long long scatterKeysSmem[];
  return scatterKeysSmem;
#endif
}

__global__ void __launch_bounds__(kThreads)
    scatterKeysKernel(const void *indices, int bits, int64_t stride,
                      int64_t tokens, int64_t slots, unsigned long long *keys,
                      int64_t capacity) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < capacity;
       i += int64_t(gridDim.x) * blockDim.x) {
    unsigned long long key = ~0ull;
    if (i < tokens) {
      const int64_t id =
          bits == 32
              ? int64_t(static_cast<const int32_t *>(indices)[i * stride])
              : static_cast<const int64_t *>(indices)[i * stride];
      const uint64_t slot = id >= 0 && id < slots ? uint64_t(id) : kNoSlot;
      key = (slot << 32) | uint64_t(i);
    }
    keys[i] = key;
  }
}

// One compare-exchange of a bitonic step: elements lo and lo + j, in the
// direction of the k-sized sequence that `at` (lo's global position) is in.
__device__ __forceinline__ void compareExchange(unsigned long long *s,
                                                int64_t lo, int64_t j,
                                                int64_t at, int64_t k) {
  const unsigned long long a = s[lo], b = s[lo + j];
  const bool ascending = (at & k) == 0;
  if ((a > b) == ascending) {
    s[lo] = b;
    s[lo + j] = a;
  }
}

// The steps of merge sizes kFirst, 2 kFirst, ..., kLast whose pairs lie
// within one tile (j < tile), on the tile in shared memory.
__global__ void __launch_bounds__(kTileThreads)
    bitonicTileKernel(unsigned long long *keys, int tile, int64_t kFirst,
                      int64_t kLast) {
  unsigned long long *s = sharedKeys();
  const int64_t base = int64_t(blockIdx.x) * tile;
  for (int i = threadIdx.x; i < tile; i += blockDim.x)
    s[i] = keys[base + i];
  __syncthreads();
  for (int64_t k = kFirst; k <= kLast; k *= 2) {
    for (int j = int(k / 2 < tile / 2 ? k / 2 : tile / 2); j > 0; j /= 2) {
      for (int p = threadIdx.x; p < tile / 2; p += blockDim.x) {
        const int lo = 2 * j * (p / j) + p % j;
        compareExchange(s, lo, j, base + lo, k);
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < tile; i += blockDim.x)
    keys[base + i] = s[i];
}

// One step (k, j) with j >= the tile, in global memory.
__global__ void __launch_bounds__(kThreads)
    bitonicStepKernel(unsigned long long *keys, int64_t capacity, int64_t k,
                      int64_t j) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       p < capacity / 2; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t lo = 2 * j * (p / j) + p % j;
    compareExchange(keys, lo, j, lo, k);
  }
}

__device__ __forceinline__ float loadElement(const void *p, int64_t at,
                                             bool bf16) {
  if (!bf16)
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

__device__ __forceinline__ float addElement(float acc, float x, bool bf16) {
  const float sum = acc + x;
  if (!bf16)
    return sum;
  const uint32_t bits = uint32_t(toBf16(sum)) << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// Block b: columns (b % colBlocks) * kThreads + threadIdx.x of the sorted
// positions b / colBlocks, + posBlocks, ...; a position that leads its
// slot's segment adds the segment's rows in token order.
template <bool BF16>
__global__ void __launch_bounds__(kThreads)
    scatterSegmentsKernel(const unsigned long long *keys, int64_t capacity,
                          const void *source, int64_t sourceToken,
                          int64_t sourceCol, void *output, int64_t outputSlot,
                          int64_t outputCol, int64_t width, int64_t colBlocks) {
  const int64_t n =
      int64_t(blockIdx.x % colBlocks) * kThreads + int64_t(threadIdx.x);
  if (n >= width)
    return;
  const int64_t posBlocks = gridDim.x / colBlocks;
  for (int64_t p = blockIdx.x / colBlocks; p < capacity; p += posBlocks) {
    const uint64_t slot = keys[p] >> 32;
    if (slot == kNoSlot)
      break; // sorted: only out-of-range tokens and padding follow
    if (p > 0 && (keys[p - 1] >> 32) == slot)
      continue;
    const int64_t out = int64_t(slot) * outputSlot + n * outputCol;
    float acc = loadElement(output, out, BF16);
    for (int64_t q = p; q < capacity && (keys[q] >> 32) == slot; ++q) {
      const int64_t t = int64_t(keys[q] & 0xffffffffull);
      acc = addElement(
          acc, loadElement(source, t * sourceToken + n * sourceCol, BF16),
          BF16);
    }
    if (BF16)
      static_cast<uint16_t *>(output)[out] = toBf16(acc);
    else
      static_cast<float *>(output)[out] = acc;
  }
}

} // namespace

int64_t keys_capacity(int64_t tokens) {
  int64_t capacity = 1;
  while (capacity < tokens)
    capacity *= 2;
  return capacity;
}

cudaError_t scatter_add_rows(const Args &a, cudaStream_t st) {
  if (a.tokens == 0 || a.width == 0 || a.slots == 0)
    return cudaSuccess;
  const int64_t capacity = keys_capacity(a.tokens);
  unsigned long long *keys = reinterpret_cast<unsigned long long *>(a.keys);
  const unsigned keyBlocks = unsigned(ceilDiv(capacity, kThreads) < kMaxBlocks
                                          ? ceilDiv(capacity, kThreads)
                                          : kMaxBlocks);
  scatterKeysKernel<<<keyBlocks, kThreads, 0, st>>>(a.indices, a.index_bits,
                                                    a.index_stride, a.tokens,
                                                    a.slots, keys, capacity);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    return rc;
  if (capacity > 1) {
    const int tile = int(capacity < kTile ? capacity : kTile);
    const unsigned tiles = unsigned(capacity / tile);
    const unsigned threads = unsigned(tile / 2);
    const size_t bytes = size_t(tile) * sizeof(unsigned long long);
    bitonicTileKernel<<<tiles, threads, bytes, st>>>(keys, tile, 2, tile);
    rc = cudaGetLastError();
    const int64_t pairs = capacity / 2;
    const unsigned stepBlocks = unsigned(ceilDiv(pairs, kThreads) < kMaxBlocks
                                             ? ceilDiv(pairs, kThreads)
                                             : kMaxBlocks);
    for (int64_t k = 2 * int64_t(tile); k <= capacity && rc == cudaSuccess;
         k *= 2) {
      for (int64_t j = k / 2; j >= tile && rc == cudaSuccess; j /= 2) {
        bitonicStepKernel<<<stepBlocks, kThreads, 0, st>>>(keys, capacity, k,
                                                           j);
        rc = cudaGetLastError();
      }
      if (rc != cudaSuccess)
        break;
      bitonicTileKernel<<<tiles, threads, bytes, st>>>(keys, tile, k, k);
      rc = cudaGetLastError();
    }
    if (rc != cudaSuccess)
      return rc;
  }
  const int64_t colBlocks = ceilDiv(a.width, kThreads);
  const int64_t posBlocks = capacity < kMaxBlocks ? capacity : kMaxBlocks;
  const unsigned grid = unsigned(colBlocks * posBlocks);
  if (a.bf16)
    scatterSegmentsKernel<true><<<grid, kThreads, 0, st>>>(
        keys, capacity, a.source, a.source_token_stride, a.source_col_stride,
        a.output, a.output_slot_stride, a.output_col_stride, a.width,
        colBlocks);
  else
    scatterSegmentsKernel<false><<<grid, kThreads, 0, st>>>(
        keys, capacity, a.source, a.source_token_stride, a.source_col_stride,
        a.output, a.output_slot_stride, a.output_col_stride, a.width,
        colBlocks);
  return cudaGetLastError();
}

} // namespace scatter
} // namespace gpu
} // namespace fsdprt

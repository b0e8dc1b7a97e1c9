//===- quant_kernels.cu - CUDA kernels of the quantization formats --------===//
//
// Quantize / dequantize / swap_first_dims for every format of
// fsdprt_quant.h, bit-for-bit equal to the CPU reference (quant_reference.cpp):
// both use the scalar rules of quant_math.h. The format is a template
// parameter of every kernel (no runtime switch inside a kernel). Rowwise
// kernels are warp-cooperative: each lane takes 16 consecutive elements, the
// lanes of one block exchange their maxima with shuffles, and the data is
// read once; column-wise kernels keep a whole block in registers (one pass
// as well). fp8 conversions use the sm_89+ cvt instructions (same rounding
// as the reference, checked for all 2^32 inputs by bench/gpu/check.sh); E2M1
// has no conversion instruction before sm_100, so it uses floatToE2m1Fast.
// Vectors of 16 bytes when the pointers are aligned and the row length
// allows it, a scalar path otherwise.
//
// Work is split into items (a block, a 16-element chunk, a tile) counted in
// 32 bits; tensors with 2^32 or more items (over 64 Gi elements) are refused.
//
//===----------------------------------------------------------------------===//

#include "fsdprt_quant.h"
#include "quant_internal.h"
#include "quant_math.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

using namespace fsdprt::quant;

namespace {

constexpr int kThreads = 256;
constexpr int kTileThreads = 256; // 128x128 tiles: 8 chunks x 32 rows

// ---- element loads and stores ---------------------------------------------

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(uint16_t v) { return bf16ToFloat(v); }

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ uint16_t fromFloat<uint16_t>(float v) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  // cvt.rn.bf16.f32: round to nearest even like floatToBf16 (NaN payloads
  // aside: the instruction returns the canonical NaN).
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
  return floatToBf16(v);
#endif
}

// 16 consecutive elements; Vec: p is 16-byte aligned.
template <typename T, bool Vec>
__device__ __forceinline__ void load16(const T *__restrict__ p,
                                       float (&f)[16]) {
  if constexpr (Vec) {
    constexpr int kPer = 16 / sizeof(T);
#pragma unroll
    for (int v = 0; v < 16 / kPer; ++v) {
      const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p) + v);
      T tmp[kPer];
      memcpy(tmp, &u, sizeof(u));
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        f[v * kPer + k] = toFloat(tmp[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k)
      f[k] = toFloat(p[k]);
  }
}

// The first `count` (< 16 allowed) elements; the rest read as 0, which
// changes no amax.
template <typename T>
__device__ __forceinline__ void loadN(const T *__restrict__ p, int count,
                                      float (&f)[16]) {
#pragma unroll
  for (int k = 0; k < 16; ++k)
    f[k] = k < count ? toFloat(p[k]) : 0.0f;
}

template <typename T, bool Vec>
__device__ __forceinline__ void loadChunk(const T *__restrict__ p, int count,
                                          float (&f)[16]) {
  if (count == 16)
    load16<T, Vec>(p, f);
  else
    loadN(p, count, f);
}

template <typename T, bool Vec>
__device__ __forceinline__ void storeChunk(T *__restrict__ p, int count,
                                           const float (&f)[16]) {
  if (Vec && count == 16) {
    constexpr int kPer = 16 / sizeof(T);
#pragma unroll
    for (int v = 0; v < 16 / kPer; ++v) {
      T tmp[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        tmp[k] = fromFloat<T>(f[v * kPer + k]);
      uint4 u;
      memcpy(&u, tmp, sizeof(u));
      reinterpret_cast<uint4 *>(p)[v] = u;
    }
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) // static indices keep f in registers
      if (k < count)
        p[k] = fromFloat<T>(f[k]);
  }
}

__device__ __forceinline__ float chunkAmax(const float (&f)[16]) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < 16; ++k)
    m = fmaxf(m, fabsf(f[k])); // fmaxf ignores NaN, as the reference does
  return m;
}

// ---- fp8 encoding ---------------------------------------------------------

// Two values to fp8 with satfinite RNE; lo lands in the low byte. The
// hardware conversion (sm_89+) implements the same rule as floatToFp8.
template <int Kind>
__device__ __forceinline__ uint32_t fp8Pair(float lo, float hi) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) &&                        \
    !defined(FSDPRT_QUANT_SOFTWARE_FP8_CVT)
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(
      make_float2(lo, hi), __NV_SATFINITE, Kind == 0 ? __NV_E4M3 : __NV_E5M2));
#else
  return static_cast<uint32_t>(floatToFp8(lo, Kind)) |
         (static_cast<uint32_t>(floatToFp8(hi, Kind)) << 8);
#endif
}

template <int Kind> __device__ __forceinline__ uint8_t fp8One(float v) {
  return static_cast<uint8_t>(fp8Pair<Kind>(v, 0.0f) & 0xFFu);
}

// q[k] = fp8(f[k] * s[k]) for 16 elements, written to p (count of them).
template <int Kind, bool Vec>
__device__ __forceinline__ void fp8StoreScaled(uint8_t *__restrict__ p,
                                               int count, const float (&f)[16],
                                               const float (&s)[16]) {
  if (Vec && count == 16) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[j] = fp8Pair<Kind>(f[4 * j] * s[4 * j], f[4 * j + 1] * s[4 * j + 1]) |
             (fp8Pair<Kind>(f[4 * j + 2] * s[4 * j + 2],
                            f[4 * j + 3] * s[4 * j + 3])
              << 16);
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k)
      if (k < count)
        p[k] = fp8One<Kind>(f[k] * s[k]);
  }
}

template <int Kind, bool Vec>
__device__ __forceinline__ void fp8StoreUniform(uint8_t *__restrict__ p,
                                                int count, const float (&f)[16],
                                                float scale) {
  float s[16];
#pragma unroll
  for (int k = 0; k < 16; ++k)
    s[k] = scale;
  fp8StoreScaled<Kind, Vec>(p, count, f, s);
}

template <bool Vec>
__device__ __forceinline__ void loadBytes16(const uint8_t *__restrict__ p,
                                            int count, uint8_t (&b)[16]) {
  if (Vec && count == 16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
    memcpy(b, &u, sizeof(u));
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k)
      b[k] = k < count ? p[k] : 0;
  }
}

// ---- launch helpers -------------------------------------------------------

fsdprt_status_t launchError(const char *fn) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return fail(FSDPRT_ERR_BACKEND, "%s: kernel launch failed: %s", fn,
                cudaGetErrorString(err));
  return FSDPRT_OK;
}

// Grid for `items` work items of one thread each (grid-stride loops).
unsigned gridFor(uint64_t items, int threads) {
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const uint64_t maxBlocks = static_cast<uint64_t>(sms > 0 ? sms : 1) * 16;
  uint64_t blocks = (items + threads - 1) / threads;
  if (blocks > maxBlocks)
    blocks = maxBlocks;
  return blocks == 0 ? 1u : static_cast<unsigned>(blocks);
}

fsdprt_status_t checkItems(const char *fn, uint64_t items) {
  if (items >= (uint64_t{1} << 32))
    return fail(FSDPRT_ERR_UNSUPPORTED,
                "%s: %llu work items exceed the 2^32 limit of the kernels", fn,
                static_cast<unsigned long long>(items));
  return FSDPRT_OK;
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

cudaStream_t asStream(void *s) { return static_cast<cudaStream_t>(s); }

// Calls fn(T{}) with T = float or uint16_t (bf16) for a dtype value.
template <typename Fn> void withDtype(int dtype, Fn &&fn) {
  if (dtype == FSDPRT_QUANT_F32)
    fn(float{});
  else
    fn(uint16_t{});
}

// ===========================================================================
// amax
// ===========================================================================

__device__ __forceinline__ float warpMax(float m) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  return m;
}

// Block-wide max; every thread of the block must call it.
__device__ __forceinline__ float blockMax(float m) {
  __shared__ float warpMaxes[32];
  m = warpMax(m);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    warpMaxes[warp] = m;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  m = threadIdx.x < warps ? warpMaxes[threadIdx.x] : 0.0f;
  if (warp == 0)
    m = warpMax(m);
  __syncthreads(); // warpMaxes may be reused by a later call
  return m;
}

template <typename T, bool Vec>
__global__ void amaxKernel(const T *__restrict__ x, uint64_t n,
                           float *__restrict__ out) {
  float m = 0.0f;
  const uint64_t chunks = n / 16;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t c = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < chunks;
       c += stride) {
    float f[16];
    load16<T, Vec>(x + c * 16, f);
    m = fmaxf(m, chunkAmax(f));
  }
  const uint64_t tail = chunks * 16;
  if (blockIdx.x == 0 && tail + threadIdx.x < n)
    m = fmaxf(m, fabsf(toFloat(x[tail + threadIdx.x])));
  m = blockMax(m);
  // Non-negative floats order like their bit patterns.
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned int *>(out), __float_as_uint(m));
}

// ===========================================================================
// warp-level helpers
// ===========================================================================

// Runs body(item, active) for items [0, items) with every lane of a warp
// inside the same iteration (grid-stride over whole warps), so the body may
// use warp shuffles; lanes past the end run with active == false.
template <typename Body>
__device__ __forceinline__ void forEachWarpItem(uint64_t items, Body &&body) {
  const uint64_t lane = threadIdx.x % 32;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t base = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x - lane;
       base < items; base += stride) {
    const uint64_t item = base + lane;
    body(item, item < items);
  }
}

// Max over aligned groups of `Width` lanes (a power of two up to 32).
template <int Width> __device__ __forceinline__ float groupMax(float m) {
#pragma unroll
  for (int off = Width / 2; off > 0; off >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  return m;
}

// Largest finite value of the input type (TE's value for an infinite
// blockwise scale).
template <typename T> constexpr float inputMaxOf() {
  return sizeof(T) == 2 ? kBf16Max : kFltMax;
}

// ===========================================================================
// FP8 per-tensor
// ===========================================================================

template <typename T, int Kind, bool Vec>
__global__ void fp8TensorQuantKernel(const T *__restrict__ x, uint64_t n,
                                     const float *__restrict__ amax,
                                     uint8_t *__restrict__ q,
                                     float *__restrict__ scaleInv) {
  const float scale = scaleFromAmax(*amax, fp8MaxValue(Kind));
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *scaleInv = 1.0f / scale;
  const uint64_t chunks = (n + 15) / 16;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t c = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < chunks;
       c += stride) {
    const uint64_t base = c * 16;
    const int count = static_cast<int>(n - base < 16 ? n - base : 16);
    float f[16];
    loadChunk<T, Vec>(x + base, count, f);
    fp8StoreUniform<Kind, Vec>(q + base, count, f, scale);
  }
}

// ===========================================================================
// MXFP8
// ===========================================================================

// Rowwise, warp-cooperative: each lane takes 16 consecutive elements (a warp
// covers 512 contiguous elements), two neighbouring lanes form a 32-block and
// exchange their maxima with one shuffle; one pass over the input.
template <typename T, bool Vec>
__global__ void mxfp8RowQuantKernel(const T *__restrict__ x, uint64_t chunks,
                                    uint8_t *__restrict__ q,
                                    uint8_t *__restrict__ scales) {
  forEachWarpItem(chunks, [&](uint64_t c, bool active) {
    float f[16];
    if (active)
      load16<T, Vec>(x + c * 16, f);
    else
#pragma unroll
      for (int k = 0; k < 16; ++k)
        f[k] = 0.0f;
    const float amax = groupMax<2>(chunkAmax(f));
    if (!active)
      return;
    const uint8_t e = floatToE8m0(amax / kE4M3Max);
    if ((c & 1) == 0)
      scales[c / 2] = e;
    fp8StoreUniform<0, Vec>(q + c * 16, 16, f, e8m0QuantScale(e));
  });
}

// Columnwise, single pass: a thread owns Cols (8 bytes of input) adjacent
// columns of a 32-row block and keeps the whole 32 x Cols block in registers
// (amax, then quantize without re-reading). A warp reads 256 contiguous bytes
// of each row and writes 32 * Cols contiguous bytes.
template <typename T, bool Vec>
__global__ void mxfp8ColQuantKernel(const T *__restrict__ x, uint64_t cols,
                                    uint32_t items, FastDiv groupsPerRow,
                                    uint8_t *__restrict__ q,
                                    uint8_t *__restrict__ scales) {
  constexpr int Cols = 8 / sizeof(T);
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < items;
       t += stride) {
    const uint32_t rb = groupsPerRow.div(static_cast<uint32_t>(t));
    const uint64_t c0 =
        uint64_t{static_cast<uint32_t>(t) - rb * groupsPerRow.d} * Cols;
    const int count = static_cast<int>(cols - c0 < Cols ? cols - c0 : Cols);
    const uint64_t r0 = uint64_t{rb} * kMxBlock;
    T v[kMxBlock][Cols];
#pragma unroll
    for (int r = 0; r < kMxBlock; ++r) {
      const T *p = x + (r0 + r) * cols + c0;
      if (Vec) {
        const uint2 u = __ldg(reinterpret_cast<const uint2 *>(p));
        memcpy(v[r], &u, sizeof(u));
      } else {
#pragma unroll
        for (int k = 0; k < Cols; ++k)
          v[r][k] = k < count ? p[k] : T(0);
      }
    }
    float s[Cols];
    uint8_t e[Cols];
#pragma unroll
    for (int k = 0; k < Cols; ++k) {
      float m = 0.0f;
#pragma unroll
      for (int r = 0; r < kMxBlock; ++r)
        m = fmaxf(m, fabsf(toFloat(v[r][k])));
      e[k] = floatToE8m0(m / kE4M3Max);
      s[k] = e8m0QuantScale(e[k]);
    }
    uint8_t *scaleRow = scales + uint64_t{rb} * cols + c0;
#pragma unroll
    for (int k = 0; k < Cols; ++k)
      if (Vec || k < count)
        scaleRow[k] = e[k];
#pragma unroll
    for (int r = 0; r < kMxBlock; ++r) {
      uint8_t *out = q + (r0 + r) * cols + c0;
      uint8_t b[Cols];
#pragma unroll
      for (int k = 0; k < Cols; k += 2) {
        const uint32_t pair = fp8Pair<0>(toFloat(v[r][k]) * s[k],
                                         toFloat(v[r][k + 1]) * s[k + 1]);
        b[k] = static_cast<uint8_t>(pair);
        b[k + 1] = static_cast<uint8_t>(pair >> 8);
      }
      if (Vec) {
        if constexpr (Cols == 4) {
          uint32_t w;
          memcpy(&w, b, 4);
          *reinterpret_cast<uint32_t *>(out) = w;
        } else {
          uint16_t w;
          memcpy(&w, b, 2);
          *reinterpret_cast<uint16_t *>(out) = w;
        }
      } else {
#pragma unroll
        for (int k = 0; k < Cols; ++k)
          if (k < count)
            out[k] = b[k];
      }
    }
  }
}

// ===========================================================================
// NVFP4
// ===========================================================================

// 16 values -> 16 E2M1 codes, element 2i in the low nibble of byte i.
__device__ __forceinline__ uint2 e2m1Pack16(const float (&f)[16], float mult) {
  uint32_t w[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    uint32_t word = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
      word |= static_cast<uint32_t>(floatToE2m1Fast(f[8 * j + k] * mult))
              << (4 * k);
    w[j] = word;
  }
  return make_uint2(w[0], w[1]);
}

__device__ __forceinline__ void storeCodes(uint8_t *p, uint2 codes, bool vec) {
  if (vec)
    *reinterpret_cast<uint2 *>(p) = codes;
  else
    memcpy(p, &codes, sizeof(codes));
}

// 1x16 blocks: one lane per block (flat order; blocks never straddle rows).
// A warp reads 512 contiguous elements and writes 256 contiguous code bytes
// and 32 scale bytes.
template <typename T, bool Vec>
__global__ void nvfp4QuantKernel(const T *__restrict__ x, uint64_t blocks,
                                 const float *__restrict__ globalAmax,
                                 uint8_t *__restrict__ q,
                                 uint8_t *__restrict__ scales) {
  const float sEnc = nvfp4GlobalScale(*globalAmax);
  const float sDec = nvfp4GlobalDecodeScale(sEnc);
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t b = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    float f[16];
    load16<T, Vec>(x + b * 16, f);
    const uint8_t sb = nvfp4BlockScale(chunkAmax(f), sEnc);
    scales[b] = sb;
    storeCodes(q + b * 8, e2m1Pack16(f, nvfp4EncodeMultiplier(sb, sDec)), Vec);
  }
}

// 16x16 blocks (nvfp4_2d): a warp owns 16 rows x 32 columns; lane = 2 * row
// + half, so the 16 lanes of one 16x16 tile reduce its amax with four
// shuffles. Every lane writes its row's copy of the tile scale.
template <typename T, bool Vec>
__global__ void
nvfp4Quant2dKernel(const T *__restrict__ x, uint64_t rows, uint64_t cols,
                   uint64_t items, uint64_t pairsPerRow,
                   const float *__restrict__ globalAmax,
                   uint8_t *__restrict__ q, uint8_t *__restrict__ scales) {
  const float sEnc = nvfp4GlobalScale(*globalAmax);
  const float sDec = nvfp4GlobalDecodeScale(sEnc);
  const uint64_t lane = threadIdx.x % 32;
  const uint64_t warps = (uint64_t{gridDim.x} * blockDim.x) / 32;
  for (uint64_t w = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
       w < items; w += warps) {
    const uint64_t tileRow = w / pairsPerRow, pair = w % pairsPerRow;
    const uint64_t r = tileRow * 16 + lane / 2;
    const uint64_t blockCol = pair * 2 + lane % 2;
    const bool active = r < rows && blockCol * 16 < cols;
    float f[16];
    if (active)
      load16<T, Vec>(x + r * cols + blockCol * 16, f);
    else
#pragma unroll
      for (int k = 0; k < 16; ++k)
        f[k] = 0.0f;
    // Lanes of one tile differ in bits 1..4 of the lane index.
    float m = chunkAmax(f);
#pragma unroll
    for (int off = 2; off < 32; off <<= 1)
      m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    if (!active)
      continue;
    const uint8_t sb = nvfp4BlockScale(m, sEnc);
    const uint64_t blk = r * (cols / 16) + blockCol;
    scales[blk] = sb;
    storeCodes(q + blk * 8, e2m1Pack16(f, nvfp4EncodeMultiplier(sb, sDec)),
               Vec);
  }
}

// ===========================================================================
// FP8 blockwise
// ===========================================================================

// 1x128, warp-cooperative and single pass: a block is 8 neighbouring lanes of
// 16 elements each (its amax is three shuffles); items are numbered
// (row, block, lane-in-block) with blocks padded to 8 lanes, so the lanes of
// a partial trailing block past the row end are inactive. Scale of block j
// of row r at r * blocksPerRow + j, or (Transposed, TE's layout)
// j * rows + r.
template <typename T, bool Vec, bool Transposed>
__global__ void
block1x128QuantKernel(const T *__restrict__ x, uint64_t rows, uint64_t cols,
                      uint64_t items, uint64_t blocksPerRow, bool pow2,
                      uint8_t *__restrict__ q, float *__restrict__ scaleInv) {
  forEachWarpItem(items, [&](uint64_t item, bool active) {
    const uint64_t blockId = item / 8; // row * blocksPerRow + j
    const uint64_t r = blockId / blocksPerRow, j = blockId % blocksPerRow;
    const uint64_t c0 = j * kFp8Block + (item % 8) * 16;
    const int count = (!active || c0 >= cols)
                          ? 0
                          : static_cast<int>(cols - c0 < 16 ? cols - c0 : 16);
    float f[16];
    loadChunk<T, Vec>(x + r * cols + c0, count, f);
    const float amax = groupMax<8>(chunkAmax(f));
    const float scale = blockScaleFromAmax(amax, pow2, inputMaxOf<T>());
    if (active && item % 8 == 0)
      scaleInv[Transposed ? j * rows + r : blockId] = 1.0f / scale;
    if (count > 0)
      fp8StoreUniform<0, Vec>(q + r * cols + c0, count, f, scale);
  });
}

// 128x128: one thread block per tile, single pass: thread t holds column
// chunk t % 8 of rows t / 8 + 32 i (i < 4) in registers across the block
// reduction of the tile's amax.
template <typename T, bool Vec>
__global__ void __launch_bounds__(kTileThreads)
    block128QuantKernel(const T *__restrict__ x, uint64_t rows, uint64_t cols,
                        uint32_t tiles, FastDiv tilesPerRow, bool pow2,
                        uint8_t *__restrict__ q, float *__restrict__ scaleInv) {
  constexpr int kRowsPerThread = kFp8Block / (kTileThreads / 8);
  __shared__ float tileScale;
  const int chunk = threadIdx.x % 8;
  const int rowInTile = threadIdx.x / 8;
  for (uint32_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint32_t ti = tilesPerRow.div(tile);
    const uint32_t tj = tile - ti * tilesPerRow.d;
    const uint64_t r0 = uint64_t{ti} * kFp8Block;
    const uint64_t c0 = uint64_t{tj} * kFp8Block + chunk * 16;
    const int count =
        c0 >= cols ? 0 : static_cast<int>(cols - c0 < 16 ? cols - c0 : 16);
    float f[kRowsPerThread][16];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const uint64_t r = r0 + rowInTile + 32 * i;
      loadChunk<T, Vec>(x + r * cols + c0, r < rows ? count : 0, f[i]);
      amax = fmaxf(amax, chunkAmax(f[i]));
    }
    amax = blockMax(amax); // complete in thread 0
    if (threadIdx.x == 0) {
      const float scale = blockScaleFromAmax(amax, pow2, inputMaxOf<T>());
      tileScale = scale;
      scaleInv[tile] = 1.0f / scale;
    }
    __syncthreads();
    const float scale = tileScale;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const uint64_t r = r0 + rowInTile + 32 * i;
      if (r < rows && count > 0)
        fp8StoreUniform<0, Vec>(q + r * cols + c0, count, f[i], scale);
    }
    __syncthreads(); // tileScale is rewritten by the next tile
  }
}

// ===========================================================================
// dequantization: one thread per 16-element chunk of a row
// ===========================================================================

// 16 fp8 bytes -> floats, two at a time (the sm_89+ cvt to f16x2 is exact).
template <int Kind>
__device__ __forceinline__ void fp8Decode16(const uint8_t (&b)[16],
                                            float (&f)[16]) {
#pragma unroll
  for (int k = 0; k < 16; k += 2) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) &&                        \
    !defined(FSDPRT_QUANT_SOFTWARE_FP8_CVT)
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(b[k] | (b[k + 1] << 8)),
        Kind == 0 ? __NV_E4M3 : __NV_E5M2);
    const float2 v = __half22float2(__half2(h));
    f[k] = v.x;
    f[k + 1] = v.y;
#else
    f[k] = fp8ToFloat(b[k], Kind);
    f[k + 1] = fp8ToFloat(b[k + 1], Kind);
#endif
  }
}

// Each decoder fills f[0..count) for the chunk starting at (row r, col c0).
template <int Kind> struct Fp8TensorDecoder {
  const uint8_t *q;
  const float *scaleInv;
  uint64_t cols;
  template <bool Vec>
  __device__ void decode(uint64_t r, uint64_t c0, int count,
                         float (&f)[16]) const {
    uint8_t b[16];
    loadBytes16<Vec>(q + r * cols + c0, count, b);
    fp8Decode16<Kind>(b, f);
    const float s = *scaleInv;
#pragma unroll
    for (int k = 0; k < 16; ++k)
      f[k] = f[k] * s;
  }
};

template <bool Columnwise> struct Mxfp8Decoder {
  const uint8_t *q;
  const uint8_t *scales;
  uint64_t cols;
  template <bool Vec>
  __device__ void decode(uint64_t r, uint64_t c0, int count,
                         float (&f)[16]) const {
    uint8_t b[16];
    loadBytes16<Vec>(q + r * cols + c0, count, b);
    fp8Decode16<0>(b, f);
    if constexpr (Columnwise) {
      uint8_t e[16];
      loadBytes16<Vec>(scales + (r / kMxBlock) * cols + c0, count, e);
#pragma unroll
      for (int k = 0; k < 16; ++k)
        f[k] = f[k] * e8m0DequantScale(e[k]);
    } else {
      // A 16-chunk lies inside one 32-block (cols % 32 == 0).
      const float s = e8m0DequantScale(scales[(r * cols + c0) / kMxBlock]);
#pragma unroll
      for (int k = 0; k < 16; ++k)
        f[k] = f[k] * s;
    }
  }
};

// TE's order: one factor per block, (float(s_b) * amax) * fl(1/2688), then
// a multiply per element (no division).
struct Nvfp4Decoder {
  const uint8_t *q;
  const uint8_t *scales;
  const float *globalAmax;
  uint64_t cols;
  template <bool Vec>
  __device__ void decode(uint64_t r, uint64_t c0, int /*count: always 16*/,
                         float (&f)[16]) const {
    const uint64_t i = r * cols + c0; // multiple of 16
    uint2 codes;
    if (Vec)
      codes = __ldg(reinterpret_cast<const uint2 *>(q + i / 2));
    else
      memcpy(&codes, q + i / 2, sizeof(codes));
    const float factor =
        nvfp4DecodeFactor(scales[i / kNvfp4Block], *globalAmax);
    const uint32_t w[2] = {codes.x, codes.y};
#pragma unroll
    for (int k = 0; k < 16; ++k)
      f[k] = nvfp4Decode((w[k / 8] >> (4 * (k % 8))) & 0xFu, factor);
  }
};

// Scale of the block holding (r, c): scaleInv[(r / blockRows) * rowStride +
// (c / 128) * colStride] covers row-major and transposed scale arrays.
struct BlockDecoder {
  const uint8_t *q;
  const float *scaleInv;
  uint64_t cols;
  uint64_t rowStride, colStride;
  int blockRows;
  template <bool Vec>
  __device__ void decode(uint64_t r, uint64_t c0, int count,
                         float (&f)[16]) const {
    uint8_t b[16];
    loadBytes16<Vec>(q + r * cols + c0, count, b);
    fp8Decode16<0>(b, f);
    // A 16-chunk lies inside one 128-column block.
    const float s =
        scaleInv[(r / blockRows) * rowStride + (c0 / kFp8Block) * colStride];
#pragma unroll
    for (int k = 0; k < 16; ++k)
      f[k] = f[k] * s;
  }
};

template <typename OutT, typename Decoder, bool Vec>
__global__ void dequantKernel(Decoder dec, uint64_t cols, uint32_t items,
                              FastDiv chunksPerRow, OutT *__restrict__ y) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < items;
       t += stride) {
    const uint32_t r = chunksPerRow.div(static_cast<uint32_t>(t));
    const uint64_t c0 =
        uint64_t{static_cast<uint32_t>(t) - r * chunksPerRow.d} * 16;
    const int count = static_cast<int>(cols - c0 < 16 ? cols - c0 : 16);
    float f[16];
    dec.template decode<Vec>(r, c0, count, f);
    storeChunk<OutT, Vec>(y + uint64_t{r} * cols + c0, count, f);
  }
}

// Launches dequantKernel for rows x cols; vec: the quantized inputs are
// 16-byte aligned.
template <typename Decoder>
fsdprt_status_t launchDequant(const char *fn, const Decoder &dec, uint64_t rows,
                              uint64_t cols, bool vec, void *y, int outDtype,
                              cudaStream_t stream) {
  const uint64_t chunksPerRow = (cols + 15) / 16;
  const uint64_t items = rows * chunksPerRow;
  if (items == 0)
    return FSDPRT_OK;
  FSDPRT_CHECK(checkItems(fn, items));
  FSDPRT_CHECK(checkItems(fn, chunksPerRow));
  const FastDiv div(static_cast<uint32_t>(chunksPerRow));
  const unsigned grid = gridFor(items, kThreads);
  // Row starts stay 16-byte aligned only if cols % 16 == 0 (or one row).
  vec = vec && aligned16(y) && (rows == 1 || cols % 16 == 0);
  withDtype(outDtype, [&](auto t) {
    using OutT = decltype(t);
    auto *out = static_cast<OutT *>(y);
    if (vec)
      dequantKernel<OutT, Decoder, true><<<grid, kThreads, 0, stream>>>(
          dec, cols, static_cast<uint32_t>(items), div, out);
    else
      dequantKernel<OutT, Decoder, false><<<grid, kThreads, 0, stream>>>(
          dec, cols, static_cast<uint32_t>(items), div, out);
  });
  return launchError(fn);
}

// ===========================================================================
// swap_first_dims
// ===========================================================================

// out[a][b][k] = in[b][a][k] over units U; item = output unit index.
template <typename U>
__global__ void swapKernel(const U *__restrict__ in, U *__restrict__ out,
                           uint32_t items, FastDiv d0, uint32_t d1,
                           FastDiv innerUnits) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < items;
       t += stride) {
    const uint32_t u = static_cast<uint32_t>(t);
    const uint32_t row = innerUnits.div(u);
    const uint32_t k = u - row * innerUnits.d;
    const uint32_t a = d0.div(row);
    const uint32_t b = row - a * d0.d;
    out[u] = in[(uint64_t{b} * d1 + a) * innerUnits.d + k];
  }
}

// Same with 64-bit index math, for more than 2^32 units.
template <typename U>
__global__ void swapKernelWide(const U *__restrict__ in, U *__restrict__ out,
                               uint64_t items, uint64_t d0, uint64_t d1,
                               uint64_t innerUnits) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t u = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; u < items;
       u += stride) {
    const uint64_t row = u / innerUnits, k = u % innerUnits;
    const uint64_t a = row / d0, b = row % d0;
    out[u] = in[(b * d1 + a) * innerUnits + k];
  }
}

template <typename U>
fsdprt_status_t launchSwap(const char *fn, const void *in, void *out,
                           uint64_t d0, uint64_t d1, uint64_t innerBytes,
                           cudaStream_t stream) {
  const uint64_t innerUnits = innerBytes / sizeof(U);
  const uint64_t items = d0 * d1 * innerUnits;
  const unsigned grid = gridFor(items, kThreads);
  const auto *src = static_cast<const U *>(in);
  auto *dst = static_cast<U *>(out);
  if (items < (uint64_t{1} << 32) && innerUnits < (uint64_t{1} << 32) &&
      d0 < (uint64_t{1} << 32) && d1 < (uint64_t{1} << 32))
    swapKernel<U><<<grid, kThreads, 0, stream>>>(
        src, dst, static_cast<uint32_t>(items),
        FastDiv(static_cast<uint32_t>(d0)), static_cast<uint32_t>(d1),
        FastDiv(static_cast<uint32_t>(innerUnits)));
  else
    swapKernelWide<U>
        <<<grid, kThreads, 0, stream>>>(src, dst, items, d0, d1, innerUnits);
  return launchError(fn);
}

} // namespace

// ===========================================================================
// C API
// ===========================================================================

extern "C" {

int fsdprt_quant_cuda_available(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky "no device" error
    return 0;
  }
  return count > 0 ? 1 : 0;
}

fsdprt_status_t fsdprt_quant_cuda_amax(const void *x, int dtype, size_t n,
                                       float *amax_dev, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_amax";
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "amax_dev", amax_dev, 1));
  const cudaStream_t s = asStream(stream);
  const cudaError_t err = cudaMemsetAsync(amax_dev, 0, sizeof(float), s);
  if (err != cudaSuccess)
    return fail(FSDPRT_ERR_BACKEND, "%s: %s", fn, cudaGetErrorString(err));
  if (n == 0)
    return FSDPRT_OK;
  const bool vec = aligned16(x);
  const unsigned grid = gridFor(n / 16 + 1, kThreads);
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    if (vec)
      amaxKernel<T, true><<<grid, kThreads, 0, s>>>(in, n, amax_dev);
    else
      amaxKernel<T, false><<<grid, kThreads, 0, s>>>(in, n, amax_dev);
  });
  return launchError(fn);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_tensor_quantize(
    const void *x, int dtype, size_t n, const float *amax_dev, int kind,
    uint8_t *q, float *scale_inv_dev, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_fp8_tensor_quantize";
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkKind(fn, kind));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "amax_dev", amax_dev, 1));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv_dev", scale_inv_dev, 1));
  const bool vec = aligned16(x) && aligned16(q);
  const unsigned grid = gridFor((n + 15) / 16, kThreads);
  const cudaStream_t s = asStream(stream);
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    // One launch even for n == 0: it still writes scale_inv.
    if (kind == FSDPRT_QUANT_E4M3) {
      if (vec)
        fp8TensorQuantKernel<T, 0, true>
            <<<grid, kThreads, 0, s>>>(in, n, amax_dev, q, scale_inv_dev);
      else
        fp8TensorQuantKernel<T, 0, false>
            <<<grid, kThreads, 0, s>>>(in, n, amax_dev, q, scale_inv_dev);
    } else {
      if (vec)
        fp8TensorQuantKernel<T, 1, true>
            <<<grid, kThreads, 0, s>>>(in, n, amax_dev, q, scale_inv_dev);
      else
        fp8TensorQuantKernel<T, 1, false>
            <<<grid, kThreads, 0, s>>>(in, n, amax_dev, q, scale_inv_dev);
    }
  });
  return launchError(fn);
}

fsdprt_status_t
fsdprt_quant_cuda_fp8_tensor_dequantize(const uint8_t *q, size_t n, int kind,
                                        const float *scale_inv_dev, void *y,
                                        int out_dtype, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_fp8_tensor_dequantize";
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkKind(fn, kind));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv_dev", scale_inv_dev, 1));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  // A flat tensor is one row of n elements.
  if (kind == FSDPRT_QUANT_E5M2)
    return launchDequant(fn, Fp8TensorDecoder<1>{q, scale_inv_dev, n}, 1, n,
                         aligned16(q), y, out_dtype, asStream(stream));
  return launchDequant(fn, Fp8TensorDecoder<0>{q, scale_inv_dev, n}, 1, n,
                       aligned16(q), y, out_dtype, asStream(stream));
}

fsdprt_status_t fsdprt_quant_cuda_mxfp8_quantize(const void *x, int dtype,
                                                 size_t rows, size_t cols,
                                                 int columnwise, uint8_t *q,
                                                 uint8_t *scales,
                                                 void *stream) {
  static const char *fn = "fsdprt_quant_cuda_mxfp8_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkMxfp8Shape(fn, rows, cols, columnwise));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kMxBlock));
  if (n == 0)
    return FSDPRT_OK;
  const cudaStream_t s = asStream(stream);
  if (!columnwise) {
    const uint64_t chunks = n / 16;
    const bool vec = aligned16(x) && aligned16(q);
    const unsigned grid = gridFor(chunks, kThreads);
    withDtype(dtype, [&](auto t) {
      using T = decltype(t);
      const auto *in = static_cast<const T *>(x);
      if (vec)
        mxfp8RowQuantKernel<T, true>
            <<<grid, kThreads, 0, s>>>(in, chunks, q, scales);
      else
        mxfp8RowQuantKernel<T, false>
            <<<grid, kThreads, 0, s>>>(in, chunks, q, scales);
    });
    return launchError(fn);
  }
  const uint64_t colsPerThread = 8 / dtypeSize(dtype);
  const uint64_t groupsPerRow = (cols + colsPerThread - 1) / colsPerThread;
  const uint64_t items = (rows / kMxBlock) * groupsPerRow;
  FSDPRT_CHECK(checkItems(fn, items));
  const bool vec =
      (reinterpret_cast<uintptr_t>(x) & 7u) == 0 &&
      (reinterpret_cast<uintptr_t>(q) & (colsPerThread - 1)) == 0 &&
      cols % colsPerThread == 0;
  const unsigned grid = gridFor(items, kThreads);
  const FastDiv div(static_cast<uint32_t>(groupsPerRow));
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    if (vec)
      mxfp8ColQuantKernel<T, true><<<grid, kThreads, 0, s>>>(
          in, cols, static_cast<uint32_t>(items), div, q, scales);
    else
      mxfp8ColQuantKernel<T, false><<<grid, kThreads, 0, s>>>(
          in, cols, static_cast<uint32_t>(items), div, q, scales);
  });
  return launchError(fn);
}

fsdprt_status_t
fsdprt_quant_cuda_mxfp8_dequantize(const uint8_t *q, const uint8_t *scales,
                                   size_t rows, size_t cols, int columnwise,
                                   void *y, int out_dtype, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_mxfp8_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkMxfp8Shape(fn, rows, cols, columnwise));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kMxBlock));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  const bool vec = aligned16(q) && (!columnwise || aligned16(scales));
  if (columnwise)
    return launchDequant(fn, Mxfp8Decoder<true>{q, scales, cols}, rows, cols,
                         vec, y, out_dtype, asStream(stream));
  return launchDequant(fn, Mxfp8Decoder<false>{q, scales, cols}, rows, cols,
                       vec, y, out_dtype, asStream(stream));
}

fsdprt_status_t fsdprt_quant_cuda_nvfp4_quantize(const void *x, int dtype,
                                                 size_t rows, size_t cols,
                                                 const float *global_amax_dev,
                                                 uint8_t *q, uint8_t *scales,
                                                 void *stream) {
  static const char *fn = "fsdprt_quant_cuda_nvfp4_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n / 2));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kNvfp4Block));
  FSDPRT_CHECK(checkPtr(fn, "global_amax_dev", global_amax_dev, 1));
  if (n == 0)
    return FSDPRT_OK;
  const uint64_t blocks = n / kNvfp4Block;
  const bool vec = aligned16(x) && aligned16(q);
  const unsigned grid = gridFor(blocks, kThreads);
  const cudaStream_t s = asStream(stream);
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    if (vec)
      nvfp4QuantKernel<T, true>
          <<<grid, kThreads, 0, s>>>(in, blocks, global_amax_dev, q, scales);
    else
      nvfp4QuantKernel<T, false>
          <<<grid, kThreads, 0, s>>>(in, blocks, global_amax_dev, q, scales);
  });
  return launchError(fn);
}

fsdprt_status_t
fsdprt_quant_cuda_nvfp4_2d_quantize(const void *x, int dtype, size_t rows,
                                    size_t cols, const float *global_amax_dev,
                                    uint8_t *q, uint8_t *scales, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_nvfp4_2d_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n / 2));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kNvfp4Block));
  FSDPRT_CHECK(checkPtr(fn, "global_amax_dev", global_amax_dev, 1));
  if (n == 0)
    return FSDPRT_OK;
  // One warp per 16 rows x 32 columns.
  const uint64_t pairsPerRow = (cols / kNvfp4Block + 1) / 2;
  const uint64_t items = ceilDiv(rows, kNvfp4Block) * pairsPerRow;
  const bool vec = aligned16(x) && aligned16(q);
  const unsigned grid = gridFor(items * 32, kThreads);
  const cudaStream_t s = asStream(stream);
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    if (vec)
      nvfp4Quant2dKernel<T, true><<<grid, kThreads, 0, s>>>(
          in, rows, cols, items, pairsPerRow, global_amax_dev, q, scales);
    else
      nvfp4Quant2dKernel<T, false><<<grid, kThreads, 0, s>>>(
          in, rows, cols, items, pairsPerRow, global_amax_dev, q, scales);
  });
  return launchError(fn);
}

fsdprt_status_t fsdprt_quant_cuda_nvfp4_dequantize(
    const uint8_t *q, const uint8_t *scales, size_t rows, size_t cols,
    const float *global_amax_dev, void *y, int out_dtype, void *stream) {
  static const char *fn = "fsdprt_quant_cuda_nvfp4_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n / 2));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kNvfp4Block));
  FSDPRT_CHECK(checkPtr(fn, "global_amax_dev", global_amax_dev, 1));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  const Nvfp4Decoder dec{q, scales, global_amax_dev, cols};
  // The decoder's 8-byte code loads need q 8-byte aligned; 16 covers it.
  return launchDequant(fn, dec, rows, cols, aligned16(q), y, out_dtype,
                       asStream(stream));
}

namespace {

// 1x128 (row-major or transposed scales) and 128x128 quantization.
fsdprt_status_t blockQuantize(const char *fn, const void *x, int dtype,
                              size_t rows, size_t cols, int blockRows,
                              bool transposed, int pow2, uint8_t *q,
                              float *scale_inv, void *stream) {
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkBlockShape(fn, rows, cols, blockRows));
  const uint64_t scaleRows = ceilDiv(rows, static_cast<size_t>(blockRows));
  const uint64_t scaleCols = ceilDiv(cols, kFp8Block);
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv", scale_inv, scaleRows * scaleCols));
  if (n == 0)
    return FSDPRT_OK;
  const uint64_t tiles = scaleRows * scaleCols;
  FSDPRT_CHECK(checkItems(fn, tiles * 8));
  const bool vec = aligned16(x) && aligned16(q) && cols % 16 == 0;
  const cudaStream_t s = asStream(stream);
  withDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const T *>(x);
    if (blockRows == 1) {
      // Eight lanes per block.
      const uint64_t items = tiles * 8;
      const unsigned grid = gridFor(items, kThreads);
      auto launch = [&](auto vecTag, auto transposedTag) {
        block1x128QuantKernel<T, decltype(vecTag)::value,
                              decltype(transposedTag)::value>
            <<<grid, kThreads, 0, s>>>(in, rows, cols, items, scaleCols,
                                       pow2 != 0, q, scale_inv);
      };
      using True = std::true_type;
      using False = std::false_type;
      if (vec)
        transposed ? launch(True{}, True{}) : launch(True{}, False{});
      else
        transposed ? launch(False{}, True{}) : launch(False{}, False{});
    } else {
      const unsigned grid = gridFor(tiles * kTileThreads, kTileThreads);
      const FastDiv div(static_cast<uint32_t>(scaleCols));
      if (vec)
        block128QuantKernel<T, true><<<grid, kTileThreads, 0, s>>>(
            in, rows, cols, static_cast<uint32_t>(tiles), div, pow2 != 0, q,
            scale_inv);
      else
        block128QuantKernel<T, false><<<grid, kTileThreads, 0, s>>>(
            in, rows, cols, static_cast<uint32_t>(tiles), div, pow2 != 0, q,
            scale_inv);
    }
  });
  return launchError(fn);
}

fsdprt_status_t blockDequantize(const char *fn, const uint8_t *q,
                                const float *scale_inv, size_t rows,
                                size_t cols, int blockRows, bool transposed,
                                void *y, int out_dtype, void *stream) {
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkBlockShape(fn, rows, cols, blockRows));
  const uint64_t scaleRows = ceilDiv(rows, static_cast<size_t>(blockRows));
  const uint64_t scaleCols = ceilDiv(cols, kFp8Block);
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv", scale_inv, scaleRows * scaleCols));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  const BlockDecoder dec{q,
                         scale_inv,
                         cols,
                         transposed ? 1 : scaleCols,
                         transposed ? scaleRows : 1,
                         blockRows};
  return launchDequant(fn, dec, rows, cols, aligned16(q), y, out_dtype,
                       asStream(stream));
}

} // namespace

fsdprt_status_t fsdprt_quant_cuda_fp8_block_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int block_rows,
    int pow2, uint8_t *q, float *scale_inv, void *stream) {
  return blockQuantize("fsdprt_quant_cuda_fp8_block_quantize", x, dtype, rows,
                       cols, block_rows, false, pow2, q, scale_inv, stream);
}

fsdprt_status_t
fsdprt_quant_cuda_fp8_block_dequantize(const uint8_t *q, const float *scale_inv,
                                       size_t rows, size_t cols, int block_rows,
                                       void *y, int out_dtype, void *stream) {
  return blockDequantize("fsdprt_quant_cuda_fp8_block_dequantize", q, scale_inv,
                         rows, cols, block_rows, false, y, out_dtype, stream);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int pow2, uint8_t *q,
    float *scale_inv_t, void *stream) {
  return blockQuantize("fsdprt_quant_cuda_fp8_block_1x128_t_quantize", x, dtype,
                       rows, cols, 1, true, pow2, q, scale_inv_t, stream);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(
    const uint8_t *q, const float *scale_inv_t, size_t rows, size_t cols,
    void *y, int out_dtype, void *stream) {
  return blockDequantize("fsdprt_quant_cuda_fp8_block_1x128_t_dequantize", q,
                         scale_inv_t, rows, cols, 1, true, y, out_dtype,
                         stream);
}

// ---- host-buffer entry points (any format) --------------------------------

namespace {

// One device allocation carved into 256-byte aligned pieces; freed on exit.
struct DeviceArena {
  char *base = nullptr;
  ~DeviceArena() {
    if (base)
      cudaFree(base);
  }
  static size_t round(size_t b) { return (b + 255) / 256 * 256; }
};

fsdprt_status_t cudaFail(const char *fn, const char *what, cudaError_t err) {
  return fail(FSDPRT_ERR_BACKEND, "%s: %s: %s", fn, what,
              cudaGetErrorString(err));
}

fsdprt_status_t quantizeOnDevice(int format, const void *x, int dtype,
                                 size_t rows, size_t cols, const float *amax,
                                 uint8_t *q, void *scales, float *tensor,
                                 void *stream) {
  auto *s8 = static_cast<uint8_t *>(scales);
  auto *sf = static_cast<float *>(scales);
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_cuda_fp8_tensor_quantize(
        x, dtype, rows * cols, amax,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        q, tensor, stream);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_cuda_mxfp8_quantize(
        x, dtype, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, q, s8,
        stream);
  case FSDPRT_QUANT_NVFP4:
    return fsdprt_quant_cuda_nvfp4_quantize(x, dtype, rows, cols, amax, q, s8,
                                            stream);
  case FSDPRT_QUANT_NVFP4_2D:
    return fsdprt_quant_cuda_nvfp4_2d_quantize(x, dtype, rows, cols, amax, q,
                                               s8, stream);
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return fsdprt_quant_cuda_fp8_block_1x128_t_quantize(x, dtype, rows, cols, 1,
                                                        q, sf, stream);
  default:
    return fsdprt_quant_cuda_fp8_block_quantize(
        x, dtype, rows, cols,
        format == FSDPRT_QUANT_FP8_BLOCK_128X128 ? 128 : 1, 1, q, sf, stream);
  }
}

fsdprt_status_t dequantizeOnDevice(int format, const uint8_t *q,
                                   const void *scales, const float *tensor,
                                   size_t rows, size_t cols, void *y,
                                   int outDtype, void *stream) {
  const auto *s8 = static_cast<const uint8_t *>(scales);
  const auto *sf = static_cast<const float *>(scales);
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_cuda_fp8_tensor_dequantize(
        q, rows * cols,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        tensor, y, outDtype, stream);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_cuda_mxfp8_dequantize(
        q, s8, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, y, outDtype,
        stream);
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    return fsdprt_quant_cuda_nvfp4_dequantize(q, s8, rows, cols, tensor, y,
                                              outDtype, stream);
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(q, sf, rows, cols, y,
                                                          outDtype, stream);
  default:
    return fsdprt_quant_cuda_fp8_block_dequantize(
        q, sf, rows, cols, format == FSDPRT_QUANT_FP8_BLOCK_128X128 ? 128 : 1,
        y, outDtype, stream);
  }
}

} // namespace

fsdprt_status_t fsdprt_quant_cuda_quantize_host(int format, const void *x,
                                                int dtype, size_t rows,
                                                size_t cols, float amax,
                                                uint8_t *data, void *scales,
                                                float *tensor_value) {
  static const char *fn = "fsdprt_quant_cuda_quantize_host";
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkQuantize(fn, format, x, dtype, rows, cols, &amax, data,
                             scales, tensor_value, &l));
  const size_t inBytes = rows * cols * dtypeSize(dtype);
  if (!fsdprt_quant_cuda_available())
    return fail(FSDPRT_ERR_UNSUPPORTED, "%s: no GPU visible", fn);
  const size_t oq = DeviceArena::round(inBytes);
  const size_t os = oq + DeviceArena::round(l.data_bytes);
  const size_t ov = os + DeviceArena::round(l.scale_bytes);
  DeviceArena a;
  cudaError_t err = cudaMalloc(&a.base, ov + 2 * sizeof(float));
  if (err != cudaSuccess)
    return cudaFail(fn, "cudaMalloc", err);
  auto *dAmax = reinterpret_cast<float *>(a.base + ov);
  if ((err = cudaMemcpy(a.base, x, inBytes, cudaMemcpyHostToDevice)) !=
          cudaSuccess ||
      (err = cudaMemcpy(dAmax, &amax, sizeof(float), cudaMemcpyHostToDevice)) !=
          cudaSuccess)
    return cudaFail(fn, "copy to the device", err);
  FSDPRT_CHECK(quantizeOnDevice(format, a.base, dtype, rows, cols, dAmax,
                                reinterpret_cast<uint8_t *>(a.base + oq),
                                a.base + os, dAmax + 1, nullptr));
  if ((err = cudaMemcpy(data, a.base + oq, l.data_bytes,
                        cudaMemcpyDeviceToHost)) != cudaSuccess ||
      (err = cudaMemcpy(scales, a.base + os, l.scale_bytes,
                        cudaMemcpyDeviceToHost)) != cudaSuccess)
    return cudaFail(fn, "copy to the host", err);
  if (format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
      format == FSDPRT_QUANT_FP8_E5M2_TENSOR) {
    if ((err = cudaMemcpy(tensor_value, dAmax + 1, sizeof(float),
                          cudaMemcpyDeviceToHost)) != cudaSuccess)
      return cudaFail(fn, "copy to the host", err);
  } else if (l.tensor_bytes) {
    *tensor_value = amax; // NVFP4 carries the global amax
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_cuda_dequantize_host(
    int format, const uint8_t *data, const void *scales, float tensor_value,
    size_t rows, size_t cols, void *y, int out_dtype) {
  static const char *fn = "fsdprt_quant_cuda_dequantize_host";
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkDequantize(fn, format, data, scales, &tensor_value, rows,
                               cols, y, out_dtype, &l));
  const size_t outBytes = rows * cols * dtypeSize(out_dtype);
  if (!fsdprt_quant_cuda_available())
    return fail(FSDPRT_ERR_UNSUPPORTED, "%s: no GPU visible", fn);
  const size_t os = DeviceArena::round(outBytes);
  const size_t oq = os + DeviceArena::round(l.scale_bytes);
  const size_t ov = oq + DeviceArena::round(l.data_bytes);
  DeviceArena a;
  cudaError_t err = cudaMalloc(&a.base, ov + sizeof(float));
  if (err != cudaSuccess)
    return cudaFail(fn, "cudaMalloc", err);
  auto *dTensor = reinterpret_cast<float *>(a.base + ov);
  if ((err = cudaMemcpy(a.base + oq, data, l.data_bytes,
                        cudaMemcpyHostToDevice)) != cudaSuccess ||
      (err = cudaMemcpy(a.base + os, scales, l.scale_bytes,
                        cudaMemcpyHostToDevice)) != cudaSuccess ||
      (err = cudaMemcpy(dTensor, &tensor_value, sizeof(float),
                        cudaMemcpyHostToDevice)) != cudaSuccess)
    return cudaFail(fn, "copy to the device", err);
  FSDPRT_CHECK(dequantizeOnDevice(
      format, reinterpret_cast<uint8_t *>(a.base + oq), a.base + os, dTensor,
      rows, cols, a.base, out_dtype, nullptr));
  if ((err = cudaMemcpy(y, a.base, outBytes, cudaMemcpyDeviceToHost)) !=
      cudaSuccess)
    return cudaFail(fn, "copy to the host", err);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_cuda_swap_first_dims(const void *in, void *out,
                                                  size_t d0, size_t d1,
                                                  size_t inner_bytes,
                                                  void *stream) {
  static const char *fn = "fsdprt_quant_cuda_swap_first_dims";
  size_t rowsTotal = 0, n = 0;
  FSDPRT_CHECK(checkCount(fn, d0, d1, &rowsTotal));
  FSDPRT_CHECK(checkCount(fn, rowsTotal, inner_bytes, &n));
  FSDPRT_CHECK(checkPtr(fn, "in", in, n));
  FSDPRT_CHECK(checkPtr(fn, "out", out, n));
  if (n == 0)
    return FSDPRT_OK;
  const auto *src = static_cast<const unsigned char *>(in);
  auto *dst = static_cast<unsigned char *>(out);
  if (src < dst + n && dst < src + n)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: in and out overlap (the swap is not in place)", fn);
  // Widest unit that divides the row and both pointers' alignment.
  const uintptr_t bits = reinterpret_cast<uintptr_t>(in) |
                         reinterpret_cast<uintptr_t>(out) | inner_bytes;
  const cudaStream_t s = asStream(stream);
  if ((bits & 15u) == 0)
    return launchSwap<uint4>(fn, in, out, d0, d1, inner_bytes, s);
  if ((bits & 7u) == 0)
    return launchSwap<uint2>(fn, in, out, d0, d1, inner_bytes, s);
  if ((bits & 3u) == 0)
    return launchSwap<uint32_t>(fn, in, out, d0, d1, inner_bytes, s);
  if ((bits & 1u) == 0)
    return launchSwap<uint16_t>(fn, in, out, d0, d1, inner_bytes, s);
  return launchSwap<uint8_t>(fn, in, out, d0, d1, inner_bytes, s);
}

fsdprt_status_t fsdprt_quant_cuda_quantize(int format, const void *x, int dtype,
                                           size_t rows, size_t cols,
                                           const float *amax_dev, uint8_t *q,
                                           void *scales, float *tensor_dev,
                                           void *stream) {
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkQuantize("fsdprt_quant_cuda_quantize", format, x, dtype,
                             rows, cols, amax_dev, q, scales, tensor_dev, &l));
  FSDPRT_CHECK(quantizeOnDevice(format, x, dtype, rows, cols, amax_dev, q,
                                scales, tensor_dev, stream));
  // NVFP4 carries the global amax as its per-tensor value.
  if ((format == FSDPRT_QUANT_NVFP4 || format == FSDPRT_QUANT_NVFP4_2D) &&
      tensor_dev) {
    const cudaError_t err =
        cudaMemcpyAsync(tensor_dev, amax_dev, sizeof(float),
                        cudaMemcpyDeviceToDevice, asStream(stream));
    if (err != cudaSuccess)
      return cudaFail("fsdprt_quant_cuda_quantize", "cudaMemcpyAsync", err);
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_cuda_dequantize(int format, const uint8_t *q,
                                             const void *scales,
                                             const float *tensor_dev,
                                             size_t rows, size_t cols, void *y,
                                             int out_dtype, void *stream) {
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkDequantize("fsdprt_quant_cuda_dequantize", format, q,
                               scales, tensor_dev, rows, cols, y, out_dtype,
                               &l));
  return dequantizeOnDevice(format, q, scales, tensor_dev, rows, cols, y,
                            out_dtype, stream);
}

} // extern "C"

// The deterministic scatter-add of rows of scatter_kernels.cu (the embedding
// backward of a compute=gpu step), as fsdprt_gpu_scatter_add_rows_*
// (gpu_scatter.cpp) enqueues it. Compiled by nvcc for a GPU and by the host
// compiler for the emulation of CUDA (runtime/test/quant/cuda_emulation).
#ifndef FSDPRT_CUDA_SCATTER_KERNELS_H
#define FSDPRT_CUDA_SCATTER_KERNELS_H

#include <cuda_runtime.h>

#include <cstdint>

namespace fsdprt {
namespace gpu {
namespace scatter {

// output[indices[t], :] += source[t, :] for t = 0 .. tokens - 1, in token
// order per output element. Element (t, n) of source is at
// source[t * source_token_stride + n * source_col_stride], element (s, n) of
// output at output[s * output_slot_stride + n * output_col_stride]; index t
// at indices[t * index_stride] (int32 or int64). An index outside
// [0, slots) adds nothing.
struct Args {
  bool bf16 = false; // else f32
  const void *indices = nullptr;
  int index_bits = 64;
  int64_t index_stride = 1, tokens = 0;
  const void *source = nullptr;
  int64_t source_token_stride = 0, source_col_stride = 1;
  void *output = nullptr;
  int64_t output_slot_stride = 0, output_col_stride = 1;
  int64_t slots = 0, width = 0;
  // Scratch of keys_capacity(tokens) 64-bit keys.
  uint64_t *keys = nullptr;
};

// The most tokens and slots a call takes (a key packs both in 64 bits).
constexpr int64_t kMaxTokens = int64_t(1) << 31;
constexpr int64_t kMaxSlots = (int64_t(1) << 32) - 1;
// Keys the scratch holds: tokens rounded up to a power of two.
int64_t keys_capacity(int64_t tokens);
// Enqueue on `stream`; the first launch error, cudaSuccess otherwise.
cudaError_t scatter_add_rows(const Args &a, cudaStream_t stream);

} // namespace scatter
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_SCATTER_KERNELS_H

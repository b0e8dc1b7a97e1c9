// The scatter-add of rows on the rank's compute stream
// (fsdprt_gpu_scatter_add_rows_*): argument checks, the sort keys in the
// context's scratch buffer, and the kernels of scatter_kernels.cu. Without a
// CUDA compiler at build time the entry points record
// FSDPRT_ERR_UNSUPPORTED.
#include "gpu_internal.h"

#ifdef FSDPRT_WITH_GPU_SCATTER
#include "scatter_kernels.h"
#endif

#include <cstdint>
#include <string>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

struct Call {
  bool bf16;
  const void *indices;
  int32_t index_bits;
  int64_t index_stride, tokens;
  const void *source;
  int64_t source_token_stride, source_col_stride;
  void *output;
  int64_t output_slot_stride, output_col_stride, slots, width;
};

// "" when the call is valid.
std::string bad_call(const Call &c) {
  if (c.tokens < 0 || c.slots < 0 || c.width < 0)
    return "negative size";
  if (c.index_bits != 32 && c.index_bits != 64)
    return "index_bits must be 32 or 64";
  if (c.tokens >= (int64_t(1) << 31))
    return "more than 2^31 - 1 tokens";
  if (c.slots >= (int64_t(1) << 32) - 1)
    return "2^32 - 1 slots or more";
  if (c.width > (int64_t(1) << 23))
    return "rows wider than 2^23 elements";
  if (c.tokens > 0 && !c.indices)
    return "null indices";
  if (c.tokens > 0 && c.width > 0 && c.slots > 0 && (!c.source || !c.output))
    return "null source or output";
  return "";
}

#ifdef FSDPRT_WITH_GPU_SCATTER
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

void run(const char *fn, const Call &c) {
  fsdprt_gpu_context *ctx = kernel_entry(
      fn,
      format("tokens=%lld, slots=%lld, width=%lld", (long long)c.tokens,
             (long long)c.slots, (long long)c.width),
      bad_call(c), kBuilt, "scatter-add");
  if (!ctx)
    return;
#ifdef FSDPRT_WITH_GPU_SCATTER
  if (c.tokens == 0 || c.slots == 0 || c.width == 0)
    return;
  scatter::Args a;
  a.bf16 = c.bf16;
  a.indices = c.indices;
  a.index_bits = c.index_bits;
  a.index_stride = c.index_stride;
  a.tokens = c.tokens;
  a.source = c.source;
  a.source_token_stride = c.source_token_stride;
  a.source_col_stride = c.source_col_stride;
  a.output = c.output;
  a.output_slot_stride = c.output_slot_stride;
  a.output_col_stride = c.output_col_stride;
  a.slots = c.slots;
  a.width = c.width;
  // The sort keys live in the context's scratch buffer (kept from step to
  // step: no allocation per call, nothing allocated in a captured step).
  void *keys = scratch_named(
      scatter::keys_capacity(c.tokens) * int64_t(sizeof(uint64_t)), fn);
  if (!keys)
    return;
  a.keys = static_cast<uint64_t *>(keys);
  const cudaError_t rc = scatter::scatter_add_rows(a, ctx->compute);
  failed(ctx, rc, fn, "launching the scatter-add kernels");
#endif
}

} // namespace

extern "C" {

void fsdprt_gpu_scatter_add_rows_f32(
    const void *indices, int32_t index_bits, int64_t index_stride,
    int64_t tokens, const float *source, int64_t source_token_stride,
    int64_t source_col_stride, float *output, int64_t output_slot_stride,
    int64_t output_col_stride, int64_t slots, int64_t width) {
  run("fsdprt_gpu_scatter_add_rows_f32",
      Call{false, indices, index_bits, index_stride, tokens, source,
           source_token_stride, source_col_stride, output, output_slot_stride,
           output_col_stride, slots, width});
}

void fsdprt_gpu_scatter_add_rows_bf16(
    const void *indices, int32_t index_bits, int64_t index_stride,
    int64_t tokens, const uint16_t *source, int64_t source_token_stride,
    int64_t source_col_stride, uint16_t *output, int64_t output_slot_stride,
    int64_t output_col_stride, int64_t slots, int64_t width) {
  run("fsdprt_gpu_scatter_add_rows_bf16",
      Call{true, indices, index_bits, index_stride, tokens, source,
           source_token_stride, source_col_stride, output, output_slot_stride,
           output_col_stride, slots, width});
}

} // extern "C"

// The grouped matrix products of a sparse mixture of experts on the rank's
// compute stream (fsdprt_gpu_grouped_matmul_*): argument checks and the
// kernels of grouped_kernels.cu. The groups' offsets stay on the device: the
// call never waits for the stream. Without a CUDA compiler at build time the
// entry points record FSDPRT_ERR_UNSUPPORTED.
#include "gpu_internal.h"

#ifdef FSDPRT_WITH_GPU_GROUPED
#include "grouped_kernels.h"
#endif

#include <cstdint>
#include <string>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

struct Call {
  bool bf16;
  int32_t transpose_lhs;
  const void *offsets;
  int32_t offset_bits;
  int64_t offset_stride, groups;
  const void *lhs;
  int64_t lhs_row, lhs_col;
  const void *rhs;
  int64_t rhs_group, rhs_row, rhs_col;
  void *out;
  int64_t out_group, out_row, out_col, rows, k, n;
};

// The blocks of the launch (grouped_kernels.h's grid_blocks), computed
// without overflow: -1 when above a launch's 2^31 - 1.
int64_t blocks_of(const Call &c) {
  constexpr int64_t kTile = 64, kMax = (int64_t(1) << 31) - 1;
  const int64_t colTiles = (c.n + kTile - 1) / kTile;
  const int64_t outer =
      c.transpose_lhs ? c.groups : (c.rows + kTile - 1) / kTile + c.groups + 1;
  const int64_t inner =
      c.transpose_lhs ? ((c.k + kTile - 1) / kTile) * colTiles : colTiles;
  if (inner != 0 && outer > kMax / inner)
    return -1;
  return outer * inner;
}

// "" when the call is valid.
std::string bad_call(const Call &c) {
  if (c.rows < 0 || c.k < 0 || c.n < 0 || c.groups < 0)
    return "negative size";
  if (c.transpose_lhs != 0 && c.transpose_lhs != 1)
    return "transpose_lhs must be 0 or 1";
  if (c.offset_bits != 32 && c.offset_bits != 64)
    return "offset_bits must be 32 or 64";
  if (c.k > (int64_t(1) << 40) || c.n > (int64_t(1) << 40) ||
      c.rows > (int64_t(1) << 40))
    return "a size above 2^40";
  if (blocks_of(c) < 0)
    return "more than 2^31 - 1 tiles";
  if (c.groups > 0 && !c.offsets)
    return "null offsets";
  if (blocks_of(c) > 0 && !c.out)
    return "null output";
  if (blocks_of(c) > 0 && c.k > 0 && c.rows > 0 && (!c.lhs || !c.rhs))
    return "null lhs or rhs";
  return "";
}

#ifdef FSDPRT_WITH_GPU_GROUPED
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

void run(const char *fn, const Call &c) {
  fsdprt_gpu_context *ctx = kernel_entry(
      fn,
      format("groups=%lld, rows=%lld, k=%lld, n=%lld", (long long)c.groups,
             (long long)c.rows, (long long)c.k, (long long)c.n),
      bad_call(c), kBuilt, "grouped gemm");
  if (!ctx)
    return;
#ifdef FSDPRT_WITH_GPU_GROUPED
  grouped::Args a;
  a.bf16 = c.bf16;
  a.transpose_lhs = c.transpose_lhs != 0;
  a.offsets = c.offsets;
  a.offset_bits = c.offset_bits;
  a.offset_stride = c.offset_stride;
  a.groups = c.groups;
  a.lhs = c.lhs;
  a.lhs_row = c.lhs_row;
  a.lhs_col = c.lhs_col;
  a.rhs = c.rhs;
  a.rhs_group = c.rhs_group;
  a.rhs_row = c.rhs_row;
  a.rhs_col = c.rhs_col;
  a.out = c.out;
  a.out_group = c.out_group;
  a.out_row = c.out_row;
  a.out_col = c.out_col;
  a.rows = c.rows;
  a.k = c.k;
  a.n = c.n;
  const cudaError_t rc = grouped::grouped_matmul(a, ctx->compute);
  failed(ctx, rc, fn, "launching the grouped gemm kernel");
#endif
}

} // namespace

extern "C" {

void fsdprt_gpu_grouped_matmul_f32(
    int32_t transpose_lhs, const void *offsets, int32_t offset_bits,
    int64_t offset_stride, int64_t groups, const float *lhs, int64_t lhs_row,
    int64_t lhs_col, const float *rhs, int64_t rhs_group, int64_t rhs_row,
    int64_t rhs_col, float *out, int64_t out_group, int64_t out_row,
    int64_t out_col, int64_t rows, int64_t k, int64_t n) {
  run("fsdprt_gpu_grouped_matmul_f32",
      Call{false,     transpose_lhs, offsets, offset_bits, offset_stride,
           groups,    lhs,           lhs_row, lhs_col,     rhs,
           rhs_group, rhs_row,       rhs_col, out,         out_group,
           out_row,   out_col,       rows,    k,           n});
}

void fsdprt_gpu_grouped_matmul_bf16(
    int32_t transpose_lhs, const void *offsets, int32_t offset_bits,
    int64_t offset_stride, int64_t groups, const uint16_t *lhs, int64_t lhs_row,
    int64_t lhs_col, const uint16_t *rhs, int64_t rhs_group, int64_t rhs_row,
    int64_t rhs_col, uint16_t *out, int64_t out_group, int64_t out_row,
    int64_t out_col, int64_t rows, int64_t k, int64_t n) {
  run("fsdprt_gpu_grouped_matmul_bf16",
      Call{true,      transpose_lhs, offsets, offset_bits, offset_stride,
           groups,    lhs,           lhs_row, lhs_col,     rhs,
           rhs_group, rhs_row,       rhs_col, out,         out_group,
           out_row,   out_col,       rows,    k,           n});
}

} // extern "C"

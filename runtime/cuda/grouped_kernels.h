// The grouped matrix products of a sparse mixture of experts
// (fsdp.grouped_matmul and fsdp.grouped_matmul_transpose_lhs under
// compute=gpu), as fsdprt_gpu_grouped_matmul_* (gpu_grouped.cpp) enqueues
// them. Compiled by nvcc for a GPU and by the host compiler for the
// emulation of CUDA (runtime/test/quant/cuda_emulation).
#ifndef FSDPRT_CUDA_GROUPED_KERNELS_H
#define FSDPRT_CUDA_GROUPED_KERNELS_H

#include <cuda_runtime.h>

#include <cstdint>

namespace fsdprt {
namespace gpu {
namespace grouped {

// The rows 0 .. rows - 1 of lhs [rows, k] are in groups: group g ends
// (exclusively) at clamp(max(offsets[0..g]), 0, rows) and starts where
// group g - 1 ends (group 0 at row 0), the offsets read on the device.
//
// rows form (transpose_lhs false), rhs [groups, k, n], out [rows, n]:
//   out[r, :] = lhs[r, :] @ rhs[g]  for r in group g, zero after the last.
// transpose_lhs form, rhs [rows, n], out [groups, k, n]:
//   out[g] = sum over r in group g of lhs[r, :]^T rhs[r, :], zero if empty.
//
// Element (i, j) of lhs is at lhs[i * lhs_row + j * lhs_col]; element
// (g, i, j) of rhs at rhs[g * rhs_group + i * rhs_row + j * rhs_col] (the
// group stride is unused in the transposed form), of out likewise (its
// group stride unused in the rows form). Strides in elements. f32, or bf16
// operands and result with f32 accumulation (rounded once, to nearest
// even). Every element of out is written.
struct Args {
  bool bf16 = false;
  bool transpose_lhs = false;
  const void *offsets = nullptr;
  int offset_bits = 32; // 32: int32_t, 64: int64_t
  int64_t offset_stride = 1, groups = 0;
  const void *lhs = nullptr;
  int64_t lhs_row = 0, lhs_col = 1;
  const void *rhs = nullptr;
  int64_t rhs_group = 0, rhs_row = 0, rhs_col = 1;
  void *out = nullptr;
  int64_t out_group = 0, out_row = 0, out_col = 1;
  int64_t rows = 0, k = 0, n = 0;
};

// The output tile of one block (kTileM x kTileN) and the reduction step.
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
// Blocks of the launch: the rows form takes one block per (row tile of a
// group, column tile), at most ceil(rows / kTileM) + groups + 1 row tiles;
// the transposed form one per (group, k tile, column tile).
int64_t grid_blocks(const Args &a);
// Enqueue on `stream`; the launch error, cudaSuccess otherwise.
cudaError_t grouped_matmul(const Args &a, cudaStream_t stream);

} // namespace grouped
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_GROUPED_KERNELS_H

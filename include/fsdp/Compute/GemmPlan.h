//===- GemmPlan.h - a contraction on buffers as one gemm --------*- C++ -*-===//
//
// The analysis that fsdp-linalg-to-blas (cblas on the host) and
// fsdp-linalg-to-cublas (cuBLAS on the device) share: whether a linalg op on
// buffers is a multiply-accumulate with one M, N and K dimension (several
// contiguous ones collapsed) plus batch dimensions, and how its operands
// are passed in place (row-major, transposed or not, leading dimensions,
// per-batch element strides).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_COMPUTE_GEMMPLAN_H
#define FSDP_COMPUTE_GEMMPLAN_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {

/// How one matrix operand is passed: transposed or not, leading dimension.
struct MatrixLayout {
  bool trans = false;
  int64_t ld = 0;
};

/// Everything one gemm call per batch index needs.
struct GemmPlan {
  Value a, b, c;
  int64_t m = 0, n = 0, k = 0;
  MatrixLayout la, lb;
  int64_t ldc = 0;
  /// Per batch loop, outermost first: trip count and the element stride of
  /// A, B and C (0: the operand does not move with it).
  SmallVector<int64_t> batchSizes;
  SmallVector<std::array<int64_t, 3>> batchStrides;
  /// The element type of C (the accumulation) and of A and B (the same,
  /// or 16 bits widened exactly: bf16 x bf16 -> f32).
  Type elementType, inputType;
  /// C is all zeros before the op: beta = 0.
  bool zeroC = false;
};

/// Which element types a gemm library takes, and how a remark names them.
struct GemmElementTypes {
  llvm::function_ref<bool(Type)> accepts;
  /// Completes "element type T has no ...", e.g. "BLAS gemm (only f32 and
  /// f64)".
  StringRef missing;
  /// Which (A and B, C) type pairs of different types it takes (none when
  /// null).
  llvm::function_ref<bool(Type, Type)> acceptsMixed = nullptr;
};

/// Plans the gemm of `op`, or fails and says why in `why`.
FailureOr<GemmPlan> planGemm(linalg::LinalgOp op, const GemmElementTypes &types,
                             std::string &why);

/// The `linalg.fill` of zeros right before `op` that writes exactly its
/// output (which the gemm then overwrites with beta = 0), or null.
linalg::FillOp zeroFillBefore(linalg::LinalgOp op);

/// Whether `op` computes a contraction (named or inferred): the ops worth a
/// remark when they do not become a gemm.
bool isContraction(linalg::LinalgOp op);

/// Whether the body of `op` (two inputs, one output, on tensors or buffers)
/// is exactly `out + in0 * in1` in the output's element type, the inputs of
/// that type or widened to it by `arith.extf`: the bodies a gemm computes.
bool isMultiplyAccumulate(linalg::LinalgOp op);

/// The element offsets of A, B and C in one batch entry.
struct GemmOffsets {
  Value a, b, c;
};

/// Host loops over the plan's first `numLoops` batch dimensions (outermost
/// first), each advancing the three offsets by its strides; leaves `b`
/// inside the innermost loop and returns the offsets there (constant zeros
/// when `numLoops` is 0).
GemmOffsets emitBatchLoops(OpBuilder &b, Location loc, const GemmPlan &p,
                           unsigned numLoops);

/// A contiguous f32 copy of the 16-bit buffer `v` (an allocation of its
/// shape, dynamic sizes read with memref.dim, filled by a linalg.generic of
/// arith.extf), which the caller frees.
Value widenedF32Copy(OpBuilder &b, Location loc, Value v);

/// The address of element `offset` (plus the view's own offset) of
/// `memref`, as an `!llvm.ptr`, for a call that takes a raw pointer.
Value elementPointer(OpBuilder &b, Location loc, Value memref, Value offset,
                     int64_t bytes);

} // namespace mlir::fsdp

#endif

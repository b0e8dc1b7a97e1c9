//===- GroupedMatmul.cpp - grouped products to one contraction per group --===//
//
// A sparse mixture of experts multiplies each (token, expert) row by its
// expert's matrix. The PyTorch frontend sorts the rows by expert and writes
// `fsdp.grouped_matmul` (and, for the experts' weight gradients,
// `fsdp.grouped_matmul_transpose_lhs`) with the groups' end offsets, which
// the step computes from the routing. This pass lowers both on tensors to an
// `scf.for` over the groups that reads the group's start and end from the
// offsets and runs one contraction on the group's rows only (slices of
// dynamic size, in place in the result):
//
//   C[start:end, :] = A[start:end, :] @ B[g]              (grouped_matmul)
//   C[g] = A[start:end, :]^T @ B[start:end, :] (grouped_matmul_transpose_lhs)
//
// so a step costs the products of its rows, not those of every expert on
// every row. Each contraction is a `linalg.generic` marked
// `fsdp.grouped_segment`; `fsdp-grouped-matmul-to-blas` makes it one BLAS
// gemm per group under compute=fast, and the loop lowering takes it
// otherwise. Under compute=gpu (`device`) the op is kept: host loops cannot
// read the device's offsets, so fsdp-gpu-grouped-matmul makes it the
// runtime's device grouped gemm after bufferization.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/ExpertPasses.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGROUPEDMATMUL
#include "fsdp/Compute/ExpertPasses.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The mark a group's contraction carries for fsdp-grouped-matmul-to-blas:
/// "rows" (C = A @ B) or "transpose_lhs" (C = A^T @ B).
constexpr StringLiteral kSegmentAttr = "fsdp.grouped_segment";

/// `C (+)= A @ B` (or `A^T @ B`) as a linalg.generic over (m, n, k); A and
/// B may be narrower than C (16-bit operands, an f32 accumulator).
Value contraction(OpBuilder &b, Location loc, Value a, Value bMat, Value c,
                  bool transposeLhs) {
  MLIRContext *ctx = b.getContext();
  AffineExpr m, n, k;
  bindDims(ctx, m, n, k);
  auto map = [&](ArrayRef<AffineExpr> e) {
    return AffineMap::get(3, 0, e, ctx);
  };
  SmallVector<AffineMap> maps = {transposeLhs ? map({k, m}) : map({m, k}),
                                 map({k, n}), map({m, n})};
  SmallVector<utils::IteratorType> iterators = {utils::IteratorType::parallel,
                                                utils::IteratorType::parallel,
                                                utils::IteratorType::reduction};
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{c.getType()}, ValueRange{a, bMat}, ValueRange{c}, maps,
      iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        // 16-bit operands are widened to the (f32) accumulator exactly.
        Type acc = args[2].getType();
        auto widen = [&](Value v) -> Value {
          if (v.getType() == acc)
            return v;
          return arith::ExtFOp::create(nb, nloc, acc, v);
        };
        Value p =
            arith::MulFOp::create(nb, nloc, widen(args[0]), widen(args[1]));
        Value s = arith::AddFOp::create(nb, nloc, args[2], p);
        linalg::YieldOp::create(nb, nloc, s);
      });
  op->setAttr(kSegmentAttr,
              b.getStringAttr(transposeLhs ? "transpose_lhs" : "rows"));
  return op.getResult(0);
}

/// A zero tensor of `type`.
Value zeros(OpBuilder &b, Location loc, RankedTensorType type) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value zero = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type.getElementType(), 0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// `v` (f32) rounded to `type`'s element type, element by element.
Value narrowed(OpBuilder &b, Location loc, Value v, RankedTensorType type) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{v}, ValueRange{empty},
      ArrayRef<AffineMap>{id, id}, parallel,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value x =
            arith::TruncFOp::create(nb, nloc, type.getElementType(), args[0]);
        linalg::YieldOp::create(nb, nloc, x);
      });
  return op.getResult(0);
}

/// Lowers one grouped product. `lhs` [S, K]; for the rows form `rhs` is
/// [E, K, N] and the result [S, N], for the transposed form `rhs` is [S, N]
/// and the result [E, K, N].
LogicalResult lower(Operation *op, Value lhs, Value rhs, Value offsets,
                    bool transposeLhs) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  auto offType = cast<RankedTensorType>(offsets.getType());
  auto resType = cast<RankedTensorType>(op->getResult(0).getType());
  if (!lhsType.hasStaticShape() || !rhsType.hasStaticShape() ||
      !offType.hasStaticShape() || !resType.hasStaticShape())
    return op->emitOpError() << "needs static shapes to be lowered, got "
                             << lhsType << ", " << rhsType << ", " << offType;
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type elem = lhsType.getElementType();
  // 16-bit products accumulate in f32 and are rounded once at the end, as
  // the dense bf16 contractions (fsdp-autocast) and torch do.
  Type acc = elem.isF32() || elem.isF64() ? elem : b.getF32Type();
  auto accType = RankedTensorType::get(resType.getShape(), acc);
  int64_t rows = lhsType.getDimSize(0), k = lhsType.getDimSize(1);
  int64_t groups = offType.getDimSize(0);
  int64_t n = transposeLhs ? rhsType.getDimSize(1) : rhsType.getDimSize(2);
  auto idx = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  Value zeroIdx = idx(0), oneIdx = idx(1), rowsIdx = idx(rows);
  Value init = zeros(b, loc, accType);
  auto loop = scf::ForOp::create(
      b, loc, zeroIdx, idx(groups), oneIdx, ValueRange{init, zeroIdx},
      [&](OpBuilder &lb, Location l, Value g, ValueRange iter) {
        Value out = iter[0], start = iter[1];
        // end = clamp(offsets[g], start, rows): never out of bounds.
        Value raw = tensor::ExtractOp::create(lb, l, offsets, ValueRange{g});
        if (!raw.getType().isIndex())
          raw = arith::IndexCastOp::create(lb, l, lb.getIndexType(), raw);
        Value end = arith::MinSIOp::create(
            lb, l, arith::MaxSIOp::create(lb, l, raw, start), rowsIdx);
        Value len = arith::SubIOp::create(lb, l, end, start);
        SmallVector<OpFoldResult> unit2 = {lb.getIndexAttr(1),
                                           lb.getIndexAttr(1)};
        SmallVector<OpFoldResult> unit3 = {
            lb.getIndexAttr(1), lb.getIndexAttr(1), lb.getIndexAttr(1)};
        auto rowsType = [&](int64_t width) {
          return RankedTensorType::get({ShapedType::kDynamic, width}, elem);
        };
        Value a = tensor::ExtractSliceOp::create(
            lb, l, rowsType(k), lhs, {start, lb.getIndexAttr(0)},
            {len, lb.getIndexAttr(k)}, unit2);
        auto matrix = RankedTensorType::get({k, n}, elem);
        auto accMatrix = RankedTensorType::get({k, n}, acc);
        auto accRows = RankedTensorType::get({ShapedType::kDynamic, n}, acc);
        Value next;
        if (!transposeLhs) {
          // C[start:end] = A[start:end] @ B[g]
          Value w = tensor::ExtractSliceOp::create(
              lb, l, matrix, rhs, {g, lb.getIndexAttr(0), lb.getIndexAttr(0)},
              {lb.getIndexAttr(1), lb.getIndexAttr(k), lb.getIndexAttr(n)},
              unit3);
          SmallVector<OpFoldResult> at = {start, lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> size = {len, lb.getIndexAttr(n)};
          Value c = tensor::ExtractSliceOp::create(lb, l, accRows, out, at,
                                                   size, unit2);
          Value prod = contraction(lb, l, a, w, c, /*transposeLhs=*/false);
          next =
              tensor::InsertSliceOp::create(lb, l, prod, out, at, size, unit2);
        } else {
          // C[g] = A[start:end]^T @ B[start:end]
          Value bRows = tensor::ExtractSliceOp::create(
              lb, l, rowsType(n), rhs, {start, lb.getIndexAttr(0)},
              {len, lb.getIndexAttr(n)}, unit2);
          SmallVector<OpFoldResult> at = {g, lb.getIndexAttr(0),
                                          lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> size = {
              lb.getIndexAttr(1), lb.getIndexAttr(k), lb.getIndexAttr(n)};
          Value c = tensor::ExtractSliceOp::create(lb, l, accMatrix, out, at,
                                                   size, unit3);
          Value prod = contraction(lb, l, a, bRows, c, /*transposeLhs=*/true);
          next =
              tensor::InsertSliceOp::create(lb, l, prod, out, at, size, unit3);
        }
        scf::YieldOp::create(lb, l, ValueRange{next, end});
      });
  Value result = loop.getResult(0);
  if (acc != elem)
    result = narrowed(b, loc, result, resType);
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
  return success();
}

/// Under compute=gpu the op stays for fsdp-gpu-grouped-matmul (the device
/// grouped gemm, which reads the offsets on the device): only what it
/// cannot run is an error here, at the op.
LogicalResult checkDevice(Operation *op) {
  auto lhs = cast<ShapedType>(op->getOperand(0).getType());
  auto offsets = cast<ShapedType>(op->getOperand(2).getType());
  Type elem = lhs.getElementType();
  if (!elem.isF32() && !elem.isBF16())
    return op->emitOpError()
           << "has no compute=gpu lowering for element type " << elem
           << ": the device grouped gemm takes f32 and bf16";
  Type off = offsets.getElementType();
  if (!off.isIndex() && !off.isInteger(32) && !off.isInteger(64))
    return op->emitOpError()
           << "has no compute=gpu lowering for offsets of type " << off
           << ": the device grouped gemm reads i32, i64 and index offsets";
  return success();
}

struct FSDPGroupedMatmulPass
    : public mlir::fsdp::impl::FSDPGroupedMatmulBase<FSDPGroupedMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<GroupedMatmulOp, GroupedMatmulTransposeLhsOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (device) {
        if (failed(checkDevice(op)))
          return signalPassFailure();
        continue;
      }
      LogicalResult done =
          TypeSwitch<Operation *, LogicalResult>(op)
              .Case([](GroupedMatmulOp g) {
                return lower(g, g.getLhs(), g.getRhs(), g.getOffsets(), false);
              })
              .Case([](GroupedMatmulTransposeLhsOp g) {
                return lower(g, g.getLhs(), g.getRhs(), g.getOffsets(), true);
              });
      if (failed(done))
        return signalPassFailure();
      ++numLowered;
    }
  }
};

} // namespace

//===- TensorParallelReshapes.cpp - reshapes, slices over the TP axis -----===//
//
// fsdp-tensor-parallel on tensor.expand_shape / collapse_shape (heads split
// from and merged into features), extract_slice / insert_slice and concat.
// A sequence-split value that one of them cannot carry is gathered first.
// docs/TENSOR_PARALLEL.md.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;

/// `[.., n, ..] -> [.., a, b, ..]`: a sharded `n` is sharded along its
/// outer non-unit part `a`, which the axis must divide.
LogicalResult tensor_parallel::visitExpand(TPFunction &tp,
                                           tensor::ExpandShapeOp op) {
  Sharding s = shardingOf(tp, op.getSrc());
  if (!s.isSharded())
    return success();
  RankedTensorType result = op.getResultType();
  if (!result.hasStaticShape())
    return op->emitError() << "tensor-parallel sharding needs a static shape";
  ReassociationIndices group = op.getReassociationIndices()[s.dim];
  // The split part starts after `s.outer` rows: at the first non-unit dim
  // whose dims in front of it in the group hold exactly that many.
  int64_t outer = -1, rows = 1;
  for (int64_t d : group) {
    if (rows == s.outer && result.getDimSize(d) != 1) {
      outer = d;
      break;
    }
    rows *= result.getDimSize(d);
  }
  if (outer < 0)
    return op->emitError()
           << "this reshape cannot carry the tensor-parallel sharding of "
              "dim "
           << s.dim << ": its split part starts after " << s.outer
           << " rows, where no dim of [" << group << "] starts";
  if (result.getDimSize(outer) % tp.size != 0 && s.sequence) {
    gatherSequenceOperands(tp, op);
    return success();
  }
  if (result.getDimSize(outer) % tp.size != 0)
    return op->emitError()
           << "this reshape cannot carry the tensor-parallel sharding of "
              "dim "
           << s.dim << ": it splits into dims [" << group
           << "], whose outer size " << result.getDimSize(outer)
           << " is not divisible by the tensor-parallel axis size " << tp.size;
  Sharding to{outer, s.sequence, 1};
  OpBuilder b(op);
  auto expand = tensor::ExpandShapeOp::create(
      b, op.getLoc(), localType(result, to, tp.size), op.getSrc(),
      op.getReassociationIndices());
  tp.shardings[expand.getResult()] = to;
  ++tp.shardedOps;
  op.getResult().replaceAllUsesWith(expand.getResult());
  op->erase();
  return success();
}

/// `[.., a, b, ..] -> [.., a*b, ..]`: the collapsed dim is sharded when
/// the sharded dim is the outer non-unit dim of its group.
LogicalResult tensor_parallel::visitCollapse(TPFunction &tp,
                                             tensor::CollapseShapeOp op) {
  Sharding s = shardingOf(tp, op.getSrc());
  if (!s.isSharded())
    return success();
  auto src = cast<RankedTensorType>(op.getSrc().getType());
  for (auto [r, group] : llvm::enumerate(op.getReassociationIndices())) {
    if (!llvm::is_contained(group, s.dim))
      continue;
    // Dims merged in front of the split one become rows of strided blocks
    // (a feature split only: a sequence split is gathered instead).
    int64_t rows = s.outer;
    for (int64_t d : group) {
      if (d == s.dim)
        break;
      rows *= src.getDimSize(d);
    }
    if (rows != s.outer && s.sequence) {
      gatherSequenceOperands(tp, op);
      return success();
    }
    Sharding to{int64_t(r), s.sequence, rows};
    OpBuilder b(op);
    auto collapse = tensor::CollapseShapeOp::create(
        b, op.getLoc(), op.getSrc(), op.getReassociationIndices());
    tp.shardings[collapse.getResult()] = to;
    ++tp.shardedOps;
    op.getResult().replaceAllUsesWith(collapse.getResult());
    op->erase();
    return success();
  }
  return op->emitError() << "collapse_shape without a group for dim " << s.dim;
}

/// A slice, insertion or concatenation keeps a sharded dim that it
/// takes whole: offset 0, the full size, stride 1 along it.
static bool takesWhole(ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes,
                       ArrayRef<int64_t> strides, int64_t dim, int64_t size) {
  return offsets[dim] == 0 && sizes[dim] == size && strides[dim] == 1;
}

LogicalResult tensor_parallel::visitExtractSlice(TPFunction &tp,
                                                 tensor::ExtractSliceOp op) {
  Sharding s = shardingOf(tp, op.getSource());
  if (!s.isSharded())
    return success();
  int64_t global = op.getSourceType().getDimSize(s.dim) * tp.size;
  llvm::SmallBitVector dropped = op.getDroppedDims();
  bool whole = takesWhole(op.getStaticOffsets(), op.getStaticSizes(),
                          op.getStaticStrides(), s.dim, global) &&
               !dropped.test(s.dim);
  if (!whole && s.sequence) {
    gatherSequenceOperands(tp, op);
    return success();
  }
  if (!whole)
    return op->emitError()
           << "this slice cuts dim " << s.dim
           << ", which is sharded over the tensor-parallel axis; only "
              "slices that keep it whole are partitioned";
  // Dims dropped before the sharded one shift it left.
  Sharding to{s.dim, s.sequence, s.outer};
  for (int64_t d = 0; d < s.dim; ++d)
    if (dropped.test(d))
      --to.dim;
  SmallVector<int64_t> resultShape(op.getResultType().getShape());
  resultShape[to.dim] /= tp.size;
  OpBuilder b(op);
  SmallVector<OpFoldResult> sizes = op.getMixedSizes();
  sizes[s.dim] = b.getIndexAttr(global / tp.size);
  auto slice = tensor::ExtractSliceOp::create(
      b, op.getLoc(), op.getResultType().clone(resultShape), op.getSource(),
      op.getMixedOffsets(), sizes, op.getMixedStrides());
  tp.shardings[slice.getResult()] = to;
  ++tp.shardedOps;
  op.getResult().replaceAllUsesWith(slice.getResult());
  op->erase();
  return success();
}

LogicalResult tensor_parallel::visitInsertSlice(TPFunction &tp,
                                                tensor::InsertSliceOp op) {
  // Sequence-split operands are gathered: the insertion runs whole.
  gatherSequenceOperands(tp, op);
  Sharding src = shardingOf(tp, op.getSource());
  Sharding dst = shardingOf(tp, op.getDest());
  if (!src.isSharded() && !dst.isSharded())
    return success();
  if (src.outer != 1 || dst.outer != 1)
    return op->emitError() << "an insert_slice of a value split in strided "
                              "blocks over the tensor-parallel axis is not "
                              "partitioned";
  if (op.getSourceType().getRank() != op.getResultType().getRank())
    return op->emitError() << "a rank-changing insert_slice of a value "
                              "sharded over the tensor-parallel axis is not "
                              "partitioned";
  int64_t dim = src.isSharded() ? src.dim : dst.dim;
  if ((src.isSharded() && dst.isSharded() && src.dim != dst.dim))
    return op->emitError() << "ambiguous tensor-parallel sharding: the "
                              "source is sharded along dim "
                           << src.dim << " and the destination along dim "
                           << dst.dim;
  int64_t global =
      op.getResultType().getDimSize(dim) * (dst.isSharded() ? tp.size : 1);
  if (!takesWhole(op.getStaticOffsets(), op.getStaticSizes(),
                  op.getStaticStrides(), dim, global))
    return op->emitError()
           << "this insert_slice cuts dim " << dim
           << ", which is sharded over the tensor-parallel axis; only "
              "insertions that keep it whole are partitioned";
  Value source = op.getSource(), dest = op.getDest();
  if (!src.isSharded())
    source = localCopy(tp, source, dim);
  if (!dst.isSharded())
    dest = localCopy(tp, dest, dim);
  if (!source || !dest)
    return op->emitError()
           << "the " << (source ? "destination" : "source")
           << " is replicated but the other operand is sharded along dim "
           << dim << " over the tensor-parallel axis";
  OpBuilder b(op);
  SmallVector<OpFoldResult> sizes = op.getMixedSizes();
  sizes[dim] = b.getIndexAttr(global / tp.size);
  auto insert = tensor::InsertSliceOp::create(b, op.getLoc(), source, dest,
                                              op.getMixedOffsets(), sizes,
                                              op.getMixedStrides());
  tp.shardings[insert.getResult()] = Sharding{dim};
  ++tp.shardedOps;
  op.getResult().replaceAllUsesWith(insert.getResult());
  op->erase();
  return success();
}

LogicalResult tensor_parallel::visitConcat(TPFunction &tp,
                                           tensor::ConcatOp op) {
  gatherSequenceOperands(tp, op);
  std::optional<int64_t> dim;
  for (Value v : op.getInputs()) {
    Sharding s = shardingOf(tp, v);
    if (!s.isSharded())
      continue;
    if (s.outer != 1)
      return op->emitError() << "a concatenation of a value split in strided "
                                "blocks over the tensor-parallel axis is not "
                                "partitioned";
    if (dim && *dim != s.dim)
      return op->emitError() << "ambiguous tensor-parallel sharding: "
                                "inputs sharded along dims "
                             << *dim << " and " << s.dim;
    dim = s.dim;
  }
  if (!dim)
    return success();
  if (int64_t(op.getDim()) == *dim)
    return op->emitError()
           << "this concatenation is along dim " << *dim
           << ", which is sharded over the tensor-parallel axis";
  SmallVector<Value> inputs;
  for (Value v : op.getInputs()) {
    Value local = shardingOf(tp, v).isSharded() ? v : localCopy(tp, v, *dim);
    if (!local)
      return op->emitError()
             << "an input is replicated but another is sharded along dim "
             << *dim << " over the tensor-parallel axis";
    inputs.push_back(local);
  }
  OpBuilder b(op);
  auto concat =
      tensor::ConcatOp::create(b, op.getLoc(), int64_t(op.getDim()), inputs);
  tp.shardings[concat.getResult()] = Sharding{*dim};
  ++tp.shardedOps;
  op.getResult().replaceAllUsesWith(concat.getResult());
  op->erase();
  return success();
}

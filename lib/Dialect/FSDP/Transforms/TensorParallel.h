//===- TensorParallel.h - fsdp-tensor-parallel's shared state ---*- C++ -*-===//
//
// The state of partitioning one step over its tensor-parallel axis, shared
// by the files of fsdp-tensor-parallel: the pass and its per-function walk
// (TensorParallel.cpp), structured ops (TensorParallelLinalg.cpp), reshapes,
// slices and concatenations (TensorParallelReshapes.cpp), and the values
// and collectives it inserts (TensorParallelValues.cpp).
// docs/TENSOR_PARALLEL.md.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_TENSORPARALLEL_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_TENSORPARALLEL_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <string>

namespace mlir::fsdp::tensor_parallel {

/// Unit attribute on a step whose activations fsdp-tensor-parallel splits
/// over the tokens between tensor-parallel products (sequence parallelism).
inline constexpr llvm::StringLiteral kSequenceParallelAttrName =
    "fsdp.sequence_parallel";

/// How a value lies over the tensor-parallel axis: whole on every rank
/// (dim < 0), or split evenly along `dim`. A split is either a *feature*
/// split that follows from a `tp_shard` parameter (heads, hidden features:
/// it is never gathered) or, with sequence parallelism, a *sequence* split
/// of an activation over its tokens, made by a reduce-scatter; a sequence
/// split can always be undone by an all-gather. Partial values exist only
/// between a reduction and the collective right after it.
///
/// `outer` > 1: the dim merges `outer` independent rows (samples) in front
/// of the split part (attention's `[B, H, S, D] -> [B*H, S, D]` with the
/// heads split): each row's part is this rank's, so the rank holds
/// `outer` strided blocks, which ops that treat the rows alike (parallel
/// loops, batch dims) keep and an expand back to `[B, H, ...]` restores.
struct Sharding {
  int64_t dim = -1;
  bool sequence = false;
  int64_t outer = 1;
  bool isSharded() const { return dim >= 0; }
  /// Same dim and rows (the kind is not compared: a needed position has
  /// none).
  bool operator==(const Sharding &o) const {
    return dim == o.dim && (dim < 0 || outer == o.outer);
  }
};

/// A partial sum whose collective waits until a use needs the sum: the
/// partial sums of one value (the input gradient of q, k and v) are added
/// first and resolved by one collective.
struct PendingPartial {
  /// Reduce-scatter along the tokens allowed (sequence parallelism).
  bool mayScatter = false;
};

/// A cross-entropy over vocabulary-split logits in the form PyTorch
/// exports it (row max, shifted logits, their exponentials' sum, its log,
/// the log probabilities, the target's pick), partitioned with one
/// all-gather of per-row statistics (TensorParallelCrossEntropy.cpp).
struct CrossEntropy {
  linalg::GenericOp max, shifted, exp, sum, log, logp, pick;
  /// The row max's expand to [N, 1], if any.
  Operation *expand = nullptr;
  /// The pick's read of logp.
  tensor::ExtractOp extract;
  /// The ops from the max to logp, in order.
  SmallVector<Operation *> absorbed();
};

/// What partitioning one function needs.
struct TPFunction {
  func::FuncOp func;
  FlatSymbolRefAttr meshRef;
  StringAttr axis;
  int64_t size = 1;
  /// Reduce-scatter activations' partial sums along their tokens and keep
  /// them split (sequence parallelism).
  bool sequenceParallel = false;
  /// Element type of the sum collectives (null: the value's own).
  Type reduceType;
  /// Format of the sequence-parallel all-gathers of f32 / bf16 activations
  /// (none: not quantized).
  std::optional<QuantFormat> gatherFormat;
  llvm::DenseMap<Value, Sharding> shardings;
  /// Rank-local copies of shape-only values, per (value, dim).
  llvm::DenseMap<std::pair<Value, int64_t>, Value> localCopies;
  /// Whole copies of sequence-split values (one all-gather each).
  llvm::DenseMap<Value, Value> gathered;
  /// This rank's parts of replicated values, per (value, dim).
  llvm::DenseMap<std::pair<Value, int64_t>, Value> rankParts;
  /// Partial sums not resolved yet, and resolved ones (per partial value).
  llvm::DenseMap<Value, PendingPartial> partials;
  llvm::DenseMap<Value, Value> resolved;
  /// This rank's index on the axis (an index value at the function's
  /// start), once something needs it.
  Value rankIndex;
  /// Values a gradient needs split along a dim (the value's feature split
  /// is forced where nothing else splits it), and replicated ops whose
  /// rank's part was recomputed (erased once unused).
  llvm::DenseMap<Value, int64_t> demanded;
  llvm::SmallPtrSet<Operation *, 8> recomputed;
  /// The waits of the asynchronous (quantized) sequence-parallel gathers,
  /// each right after its start until overlapGathers moves it.
  SmallVector<Operation *> gatherWaits;
  /// The cross-entropies found before the walk, by their pick, and the ops
  /// partitioned together with their pick (skipped by the walk).
  llvm::DenseMap<Operation *, CrossEntropy> crossEntropies;
  llvm::SmallPtrSet<Operation *, 16> absorbed;
  /// What was inserted, for the pass statistics.
  int64_t shardedOps = 0, allReduces = 0, allGathers = 0, reduceScatters = 0,
          quantizedGathers = 0;
};

std::string describe(Sharding s);

inline Sharding shardingOf(const TPFunction &tp, Value v) {
  auto it = tp.shardings.find(v);
  return it == tp.shardings.end() ? Sharding{} : it->second;
}

/// `type` with its sharded dim divided by the axis size.
RankedTensorType localType(RankedTensorType type, Sharding s, int64_t size);

/// The rank's part along `dim` of a value that only has a shape (its
/// elements do not depend on the rank): an empty tensor, a fill of one,
/// a splat constant. Null otherwise.
Value localCopy(TPFunction &tp, Value v, int64_t dim);

/// The whole value of a sequence-split `v`: an all-gather along its dim
/// over the axis, right after `v` is made (one per value).
Value gatherSequence(TPFunction &tp, Value v);

/// Replaces the operands of `op` that are sequence-split by their whole
/// values.
void gatherSequenceOperands(TPFunction &tp, Operation *op);

/// This rank's part along `dim` of a replicated value whose elements depend
/// on the data (a residual, labels): every rank of the axis holds the same
/// tensor, so the part is a slice at the rank's offset (rankOffset; no
/// data moves). Null where `dim` does not divide.
Value rankPart(TPFunction &tp, Value v, int64_t dim);

/// Whether `rankPart(v, dim)` can be taken.
bool canTakeRankPart(const TPFunction &tp, Value v, int64_t dim);

/// Resolves the partial values `partial` (a reduction with `kind` along the
/// sharded loop) over the axis: with sequence parallelism, a feature
/// split's partial sum of an activation is reduce-scattered along its
/// tokens (`*result` says along which dim); otherwise all-reduced.
Value resolvePartial(TPFunction &tp, OpBuilder &b, Location loc, Value partial,
                     ReduceKind kind, bool mayScatter, Sharding *result);

/// Before `op` is partitioned: an elementwise sum of pending partial sums
/// stays pending (true: nothing else to do); any other use of a pending
/// partial sum resolves it (one collective right after it is made).
bool mergeOrResolvePartials(TPFunction &tp, Operation *op);

/// This rank's index on the axis: an fsdp.axis_index at the function's
/// start, once per function (known locally, no collective).
Value rankIndex(TPFunction &tp);

/// rankIndex * localSize, built at `b`.
Value rankOffset(TPFunction &tp, OpBuilder &b, Location loc, int64_t localSize);

/// In `op`'s body, the uses of `linalg.index loop` that `keepLocal` does not
/// keep read the global index (this rank's block starts at rank *
/// localSize).
void offsetLoopIndices(TPFunction &tp, Operation *op, unsigned loop,
                       int64_t localSize,
                       function_ref<bool(OpOperand &)> keepLocal);

/// A linalg op whose body reads a table split along its rows at positions
/// computed from data (an embedding lookup, a cross-entropy's target
/// logit): each rank reads its rows and yields 0 elsewhere; the result is
/// a pending partial sum. False when the op has no such read.
FailureOr<bool> partitionIndexedRead(TPFunction &tp, linalg::LinalgOp op);

/// This rank's part along `dim` of a replicated value: a local copy of a
/// shape-only value, or the value's producers recomputed on the rank's
/// part along a parallel loop (an iota and the one-hot compared with it).
/// Null where that cannot be done.
Value localPart(TPFunction &tp, Value v, int64_t dim);

/// Before the walk: the gradients of split parameters, and backwards the
/// single-use operands they are computed from along a parallel loop.
void collectDemands(TPFunction &tp);

/// After the walk: replicated ops whose rank's part was recomputed and that
/// nothing reads any more.
void eraseRecomputed(TPFunction &tp);

/// Moves the wait of each asynchronous gather, with the dequantize and
/// reshapes that only rearrange its result, to just before the first other
/// op that reads them: everything between the start and there overlaps
/// with the communication.
void overlapGathers(TPFunction &tp);

/// Before the walk: the cross-entropies over the vocabulary in the form
/// PyTorch exports them.
void collectCrossEntropies(TPFunction &tp);

/// At the cross-entropy's pick: its row statistics all-gathered once and
/// combined on every rank; the log probabilities on the rank's slice and
/// the pick whole. False (nothing changed) where the logits are not split
/// along the vocabulary in one block: the ops are then partitioned one by
/// one.
FailureOr<bool> partitionCrossEntropy(TPFunction &tp, CrossEntropy ce);

LogicalResult visitLinalg(TPFunction &tp, linalg::LinalgOp op);
LogicalResult visitExpand(TPFunction &tp, tensor::ExpandShapeOp op);
LogicalResult visitCollapse(TPFunction &tp, tensor::CollapseShapeOp op);
LogicalResult visitExtractSlice(TPFunction &tp, tensor::ExtractSliceOp op);
LogicalResult visitInsertSlice(TPFunction &tp, tensor::InsertSliceOp op);
LogicalResult visitConcat(TPFunction &tp, tensor::ConcatOp op);
/// An op the pass does not partition: sequence-split operands are gathered,
/// feature-split ones refused.
LogicalResult visitOther(TPFunction &tp, Operation *op);

} // namespace mlir::fsdp::tensor_parallel

#endif

//===- TransformUtils.h - helpers shared by the fsdp passes -----*- C++ -*-===//
//
// Internal to lib/Dialect/FSDP/Transforms: op ordering that survives moves,
// hoisting pure computations, and the ops that only rearrange a gathered
// parameter.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_TRANSFORMUTILS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_TRANSFORMUTILS_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Block.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::fsdp::detail {

/// Positions of the ops of one block that stay valid across moves. MLIR
/// invalidates a block's whole op order on every move, so a loop that moves
/// an op and then compares positions renumbers the block each time
/// (quadratic in the block size). Here a moved or new op takes a position
/// between its neighbours; the block is renumbered only when there is no
/// room left. Every move and erase of the block's ops must go through this.
class BlockOrder {
public:
  explicit BlockOrder(Block &block) : block(block) { renumber(); }

  bool isBefore(Operation *a, Operation *b) {
    return position(a) < position(b);
  }
  /// `a` is `b` or comes before it.
  bool isAtOrBefore(Operation *a, Operation *b) {
    return a == b || isBefore(a, b);
  }
  void moveBefore(Operation *op, Operation *next) {
    if (op == next || op->getNextNode() == next)
      return;
    positions.erase(op);
    op->moveBefore(next);
  }
  void moveAfter(Operation *op, Operation *prev) {
    if (op == prev || prev->getNextNode() == op)
      return;
    positions.erase(op);
    op->moveAfter(prev);
  }
  void erase(Operation *op) {
    positions.erase(op);
    op->erase();
  }
  void sort(MutableArrayRef<Operation *> ops) {
    llvm::sort(ops, [&](Operation *a, Operation *b) { return isBefore(a, b); });
  }

  int64_t position(Operation *op) {
    assert(op->getBlock() == &block && "op of another block");
    auto it = positions.find(op);
    if (it != positions.end())
      return it->second;
    placeRun(op);
    return positions.lookup(op);
  }

private:
  static constexpr int64_t kStride = int64_t(1) << 32;

  void renumber() {
    positions.clear();
    int64_t next = kStride;
    for (Operation &op : block) {
      positions[&op] = next;
      next += kStride;
    }
  }

  /// Gives positions to the run of unplaced ops around `op`, evenly spaced
  /// between the placed ops around the run.
  void placeRun(Operation *op) {
    Operation *first = op, *last = op;
    while (first->getPrevNode() && !positions.count(first->getPrevNode()))
      first = first->getPrevNode();
    while (last->getNextNode() && !positions.count(last->getNextNode()))
      last = last->getNextNode();
    int64_t count = 1;
    for (Operation *o = first; o != last; o = o->getNextNode())
      ++count;
    int64_t low = first->getPrevNode() ? positions[first->getPrevNode()] : 0;
    int64_t high = last->getNextNode() ? positions[last->getNextNode()]
                                       : low + (count + 1) * kStride;
    int64_t step = (high - low) / (count + 1);
    if (step < 1)
      return renumber();
    int64_t at = low;
    for (Operation *o = first;; o = o->getNextNode()) {
      at += step;
      positions[o] = at;
      if (o == last)
        break;
    }
  }

  Block &block;
  DenseMap<Operation *, int64_t> positions;
};

/// Whether `op` can move freely: no regions, no memory effects.
inline bool isHoistable(Operation *op) {
  if (op->getNumRegions() == 0 && isMemoryEffectFree(op))
    return true;
  // A blocking collective the passes marked movable (a quantized gather's
  // amax all-reduce): every rank runs the same program and moves it alike.
  return isa<AllReduceOp>(op) && op->hasAttr(kMovableAttrName);
}

/// Moves the pure ops computing `v` before `point` when they come after it.
/// Fails (moving nothing that matters) when `v` needs `point` itself or an
/// op that cannot move.
inline bool hoistBefore(Value v, Operation *point, BlockOrder &order) {
  Operation *def = v.getDefiningOp();
  // Block arguments and values from enclosing blocks dominate the body.
  if (!def || def->getBlock() != point->getBlock() ||
      order.isBefore(def, point))
    return true;
  if (def == point || !isHoistable(def))
    return false;
  for (Value operand : def->getOperands())
    if (!hoistBefore(operand, point, order))
      return false;
  order.moveBefore(def, point);
  return true;
}

/// Ops that hand over, rearrange, slice or cast a gathered parameter: the
/// values they produce still hold (part of) it. Scheduling and the
/// communication report measure a gathered buffer's life with this set.
inline bool derivesGathered(Operation *op) {
  return isa<WaitOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ReshapeOp, tensor::CastOp, tensor::ExtractSliceOp,
             tensor::ConcatOp, tensor::InsertSliceOp, linalg::TransposeOp,
             arith::ExtFOp, arith::TruncFOp>(op);
}

/// Casts a float tensor to another element type (no-op when equal or when
/// `elem` is null). Tensors of other element types are left alone: as in
/// FSDP's mixed precision, only floating-point values change type.
inline Value castFloatElements(OpBuilder &b, Location loc, Value v, Type elem) {
  auto type = cast<RankedTensorType>(v.getType());
  if (!elem || type.getElementType() == elem ||
      !isa<FloatType>(type.getElementType()))
    return v;
  auto target = type.clone(elem);
  unsigned from = cast<FloatType>(type.getElementType()).getWidth();
  unsigned to = cast<FloatType>(elem).getWidth();
  if (to < from)
    return arith::TruncFOp::create(b, loc, target, v);
  if (to > from)
    return arith::ExtFOp::create(b, loc, target, v);
  // Same width, different format (f16 <-> bf16): widen exactly to f32, then
  // round once.
  Value wide = arith::ExtFOp::create(b, loc, type.clone(b.getF32Type()), v);
  return arith::TruncFOp::create(b, loc, target, wide);
}

} // namespace mlir::fsdp::detail

#endif

//===- LinalgLoops.h - a linalg op on buffers as explicit loops -*- C++ -*-===//
//
// What the lowerings that write a linalg op's loops themselves share
// (fsdp-reduction-loops on the host, fsdp-gpu-kernels on the device): the
// operand indices at given loop indices, one iteration of the body, the
// `acc <op> x` combiner of a reduction's output with its identity, and the
// blocked (cascaded) loop that sums a long reduction loop accurately.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_COMPUTE_LINALGLOOPS_H
#define FSDP_COMPUTE_LINALGLOOPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace mlir::fsdp {

/// Indices of `operand` at the loop indices `ivs` (the leading ones; the
/// missing trailing ones count as 0).
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, linalg::LinalgOp op,
                             OpOperand &operand, ValueRange ivs);

/// One iteration of the body of `op` at the loop indices `ivs`: inputs are
/// loaded, outputs take their values `accs`, `linalg.index` is the index.
/// Returns the yielded values or, with `combiners` (one per output, from
/// matchCombiner), what each combiner would combine into its output (no
/// combiner is cloned and `accs` is unused). `inputs` (one per input, when
/// given): the inputs' values, which are then not loaded.
SmallVector<Value> bodyAt(OpBuilder &b, Location loc, linalg::LinalgOp op,
                          ValueRange ivs, ValueRange accs,
                          ArrayRef<Operation *> combiners = {},
                          ValueRange inputs = {});

/// The combiner of output `init` when the op's body computes that output as
/// `acc <op> x` (or `x <op> acc`), `acc` the output's block argument used
/// nowhere else and <op> an associative, commutative op that has an
/// identity (addf, mulf, maximumf, minimumf; addi, muli, maxsi, minsi,
/// maxui, minui, andi, ori, xori): then the elements may be combined into
/// partial results and those combined in turn. Null otherwise. (Float sums
/// and products combined in another order round differently; integer ones
/// are exact.)
Operation *matchCombiner(linalg::LinalgOp op, OpOperand &init);

/// The identity of `combiner` (x <op> identity == x, bit for bit, for every
/// x: -0.0 for a sum, so that a sum of -0.0 stays -0.0).
Value identityOf(OpBuilder &b, Location loc, Operation *combiner, Type t);

/// `a <op> c` with the op and attributes of `combiner`, on the type of `a`.
Value combine(OpBuilder &b, Location loc, Operation *combiner, Value a,
              Value c);

/// The operand of `combiner` that is not the accumulator `acc`: the element
/// the body combines into the output.
Value combinedElement(Operation *combiner, Value acc);

/// Every accumulator of a blocked loop (buildBlockedLoop) takes at most this
/// many values before it is combined into the accumulator of the level
/// above.
constexpr int64_t kBlockedLoopBlock = 16;

/// The number of levels of a blocked loop of `trips` iterations whose level
/// 0 takes `firstBlock` iterations: the smallest L >= 1 with
/// firstBlock * 16^(L-1) >= trips, or 4 when `trips` is dynamic
/// (ShapedType::kDynamic).
unsigned blockedLoopLevels(int64_t trips, int64_t firstBlock);

/// What a blocked loop does with its accumulators, which are either values
/// (the loops' iteration arguments) or memory that the callbacks read and
/// write themselves (no values). `depth` numbers the accumulators from the
/// outermost level (the `depth` given to buildBlockedLoop) inwards: the
/// level below an accumulator of depth d has depth d + 1.
struct BlockedLoopCallbacks {
  /// A fresh accumulator of depth `depth` (the combiner's identity).
  std::function<SmallVector<Value>(OpBuilder &, Location, unsigned depth)>
      fresh;
  /// Iteration `iv` of the original loop combined into `acc` (of depth
  /// `depth`); returns the new accumulator.
  std::function<SmallVector<Value>(OpBuilder &, Location, Value iv,
                                   ValueRange acc, unsigned depth)>
      step;
  /// The accumulator `child` (depth `depth` + 1) combined into `parent`
  /// (depth `depth`); returns the new parent.
  std::function<SmallVector<Value>(OpBuilder &, Location, ValueRange parent,
                                   ValueRange child, unsigned depth)>
      merge;
};

/// The loop `for (iv = lb; iv < ub; iv += step)` as a cascade of blocks:
/// level 0 combines at most `firstBlock` consecutive iterations into a
/// fresh accumulator, level l combines at most 16 consecutive level l-1
/// blocks into a fresh accumulator, and the top level
/// (blockedLoopLevels(trips, firstBlock) - 1) combines its blocks into a
/// fresh accumulator of depth `depth`, which is returned. Each value passes
/// through about 16 combinations per level instead of up to `trips`: the
/// rounding error of a float sum grows with log16(trips), as a pairwise
/// sum's, not with trips. The order is fixed by the loop bounds alone.
/// `trips` is the static trip count, or ShapedType::kDynamic.
SmallVector<Value> buildBlockedLoop(OpBuilder &b, Location loc, Value lb,
                                    Value ub, int64_t step, int64_t trips,
                                    int64_t firstBlock, unsigned depth,
                                    const BlockedLoopCallbacks &callbacks);

} // namespace mlir::fsdp

#endif

//===- LinalgLoops.h - a linalg op on buffers as explicit loops -*- C++ -*-===//
//
// What the lowerings that write a linalg op's loops themselves share
// (fsdp-reduction-loops on the host, fsdp-gpu-kernels on the device): the
// operand indices at given loop indices, one iteration of the body, and
// the `acc <op> x` combiner of a reduction's output with its identity.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_CONVERSION_LINALGLOOPS_H
#define FSDP_CONVERSION_LINALGLOOPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {

/// Indices of `operand` at the loop indices `ivs` (the leading ones; the
/// missing trailing ones count as 0).
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, linalg::LinalgOp op,
                             OpOperand &operand, ValueRange ivs);

/// One iteration of the body of `op` at the loop indices `ivs`: inputs are
/// loaded, outputs take their values `accs`, `linalg.index` is the index.
/// Returns the yielded values or, with `combiners` (one per output, from
/// matchCombiner), what each combiner would combine into its output (no
/// combiner is cloned and `accs` is unused).
SmallVector<Value> bodyAt(OpBuilder &b, Location loc, linalg::LinalgOp op,
                          ValueRange ivs, ValueRange accs,
                          ArrayRef<Operation *> combiners = {});

/// The combiner of output `init` when the op's body computes that output as
/// `acc <op> x` (or `x <op> acc`), `acc` the output's block argument used
/// nowhere else and <op> an associative, commutative float op that has an
/// identity (addf, mulf, maximumf, minimumf): then the elements may be
/// combined into partial results and those combined in turn. Null
/// otherwise.
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

} // namespace mlir::fsdp

#endif

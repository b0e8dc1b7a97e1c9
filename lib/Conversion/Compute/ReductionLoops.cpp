//===- ReductionLoops.cpp - reductions on buffers to register loops -------===//
//
// `convert-linalg-to-loops` lowers a reduction to a loop nest that loads and
// stores the output element on every iteration of the reduction loop. LLVM
// cannot keep that element in a register (the output buffer may alias an
// input as far as it knows) and does not reassociate floating-point sums,
// so layer norms, softmax and cross-entropy ran one scalar element per
// iteration. This pass lowers a linalg op on buffers whose innermost loops
// are its reduction loops itself: the parallel loops outside, then the
// reduction loops carrying the output elements as `scf.for` iteration
// arguments (one load before, one store after), with `reassoc` and
// `contract` on the body's f32/f64 arithmetic so that LLVM vectorizes the
// innermost loop as a reduction. Summation order changes (within the
// 1e-5 relative the fast path allows); other element types keep theirs.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREDUCTIONLOOPS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Why `op` cannot take the register-accumulator lowering, or "" if it can.
std::string whyNot(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return "operands are not buffers";
  if (!op.getBlock())
    return "the op has no body";
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned numLoops = iterators.size();
  if (iterators.back() != utils::IteratorType::reduction)
    return "the innermost loop is not a reduction (it vectorizes as it is)";
  auto firstReduction = llvm::find(iterators, utils::IteratorType::reduction);
  if (!std::all_of(firstReduction, iterators.end(), [](auto it) {
        return it == utils::IteratorType::reduction;
      }))
    return "a parallel loop lies inside a reduction loop";
  unsigned numParallel = firstReduction - iterators.begin();
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    for (unsigned d = numParallel; d < numLoops; ++d)
      if (map.isFunctionOfDim(d))
        return "an output is indexed by a reduction dimension";
  }
  for (OpOperand &operand : op->getOpOperands())
    if (auto shaped = dyn_cast<ShapedType>(operand.get().getType());
        shaped && !isa<MemRefType>(shaped))
      return "an operand is not a memref";
  return "";
}

/// Indices of `operand` at the loop induction variables `ivs` (the leading
/// ones: an output is not indexed by the reduction loops, which are last).
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, linalg::LinalgOp op,
                             OpOperand &operand, ValueRange ivs) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  SmallVector<OpFoldResult> dims(ivs.begin(), ivs.end());
  dims.resize(map.getNumDims(), b.getIndexAttr(0));
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    AffineMap one = AffineMap::get(map.getNumDims(), 0, e);
    OpFoldResult r = affine::makeComposedFoldedAffineApply(b, loc, one, dims);
    indices.push_back(getValueOrCreateConstantIndexOp(b, loc, r));
  }
  return indices;
}

/// Lets LLVM reassociate and contract f32/f64 arithmetic (so it vectorizes
/// reductions); leaves other element types and existing flags alone.
void allowReassociation(Operation *op) {
  auto fmf = dyn_cast<arith::ArithFastMathInterface>(op);
  if (!fmf || op->getNumResults() != 1)
    return;
  Type t = getElementTypeOrSelf(op->getResult(0).getType());
  if (!t.isF32() && !t.isF64())
    return;
  arith::FastMathFlags flags =
      arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  if (arith::FastMathFlagsAttr old = fmf.getFastMathFlagsAttr())
    flags = flags | old.getValue();
  op->setAttr(fmf.getFastMathAttrName(),
              arith::FastMathFlagsAttr::get(op->getContext(), flags));
}

void lower(linalg::LinalgOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Range> ranges = op.createLoopRanges(b, loc);
  SmallVector<Value> lbs, ubs, steps;
  for (Range r : ranges) {
    lbs.push_back(getValueOrCreateConstantIndexOp(b, loc, r.offset));
    ubs.push_back(getValueOrCreateConstantIndexOp(b, loc, r.size));
    steps.push_back(getValueOrCreateConstantIndexOp(b, loc, r.stride));
  }
  unsigned numParallel = op.getNumParallelLoops();
  Block *body = op.getBlock();
  auto inits = op.getDpsInitsMutable();

  auto parallelBody = [&](OpBuilder &pb, Location l, ValueRange pivs) {
    // The output elements, loaded once.
    SmallVector<Value> accs;
    for (OpOperand &init : inits)
      accs.push_back(memref::LoadOp::create(pb, l, init.get(),
                                            indicesAt(pb, l, op, init, pivs)));
    auto reductionBody = [&](OpBuilder &rb, Location rl, ValueRange rivs,
                             ValueRange iterArgs) -> scf::ValueVector {
      SmallVector<Value> ivs(pivs);
      ivs.append(rivs.begin(), rivs.end());
      IRMapping map;
      for (OpOperand *input : op.getDpsInputOperands()) {
        Value v = input->get();
        if (isa<MemRefType>(v.getType()))
          v = memref::LoadOp::create(rb, rl, v,
                                     indicesAt(rb, rl, op, *input, ivs));
        map.map(op.getMatchingBlockArgument(input), v);
      }
      for (auto [init, acc] : llvm::zip(inits, iterArgs))
        map.map(op.getMatchingBlockArgument(&init), acc);
      for (Operation &inner : body->without_terminator()) {
        if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
          map.map(index.getResult(), ivs[index.getDim()]);
          continue;
        }
        Operation *clone = rb.clone(inner, map);
        clone->walk(allowReassociation);
      }
      return llvm::map_to_vector(
          body->getTerminator()->getOperands(),
          [&](Value v) { return map.lookupOrDefault(v); });
    };
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, ArrayRef(lbs).drop_front(numParallel),
        ArrayRef(ubs).drop_front(numParallel),
        ArrayRef(steps).drop_front(numParallel), accs, reductionBody);
    for (auto [init, result] : llvm::zip(inits, nest.results))
      memref::StoreOp::create(pb, l, result, init.get(),
                              indicesAt(pb, l, op, init, pivs));
  };
  scf::buildLoopNest(b, loc, ArrayRef(lbs).take_front(numParallel),
                     ArrayRef(ubs).take_front(numParallel),
                     ArrayRef(steps).take_front(numParallel), parallelBody);
  op->erase();
}

struct FSDPReductionLoopsPass
    : public mlir::fsdp::impl::FSDPReductionLoopsBase<FSDPReductionLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() > 0)
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      std::string why = whyNot(op);
      if (!why.empty()) {
        if (report)
          op->emitRemark() << "reduction stays a loop nest: " << why;
        continue;
      }
      if (report)
        op->emitRemark() << "reduction accumulates in registers";
      lower(op);
    }
  }
};

} // namespace

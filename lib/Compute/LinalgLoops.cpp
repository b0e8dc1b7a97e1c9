//===- LinalgLoops.cpp - a linalg op on buffers as explicit loops
//----------===//
//
// See LinalgLoops.h.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/LinalgLoops.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

SmallVector<Value> mlir::fsdp::indicesAt(OpBuilder &b, Location loc,
                                         linalg::LinalgOp op,
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

SmallVector<Value> mlir::fsdp::bodyAt(OpBuilder &b, Location loc,
                                      linalg::LinalgOp op, ValueRange ivs,
                                      ValueRange accs,
                                      ArrayRef<Operation *> combiners,
                                      ValueRange inputs) {
  IRMapping map;
  for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands())) {
    Value v = inputs.empty() ? input->get() : inputs[i];
    if (inputs.empty() && isa<MemRefType>(v.getType()))
      v = memref::LoadOp::create(b, loc, v, indicesAt(b, loc, op, *input, ivs));
    map.map(op.getMatchingBlockArgument(input), v);
  }
  if (combiners.empty())
    for (auto [init, acc] : llvm::zip(op.getDpsInitsMutable(), accs))
      map.map(op.getMatchingBlockArgument(&init), acc);
  Block *body = op.getBlock();
  for (Operation &inner : body->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    if (llvm::is_contained(combiners, &inner))
      continue;
    b.clone(inner, map);
  }
  SmallVector<Value> results;
  MutableOperandRange inits = op.getDpsInitsMutable();
  for (auto [o, v] : llvm::enumerate(body->getTerminator()->getOperands())) {
    if (!combiners.empty())
      v = combinedElement(combiners[o], op.getMatchingBlockArgument(&inits[o]));
    results.push_back(map.lookupOrDefault(v));
  }
  return results;
}

Operation *mlir::fsdp::matchCombiner(linalg::LinalgOp op, OpOperand &init) {
  BlockArgument acc = op.getMatchingBlockArgument(&init);
  Operation *yield = op.getBlock()->getTerminator();
  unsigned pos = init.getOperandNumber() - op.getNumDpsInputs();
  Operation *combiner = yield->getOperand(pos).getDefiningOp();
  if (!combiner || !acc.hasOneUse() || combiner->getBlock() != op.getBlock() ||
      combiner->getNumOperands() != 2 || combiner->getNumResults() != 1 ||
      !combiner->hasOneUse() ||
      !isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MinimumFOp,
           arith::AddIOp, arith::MulIOp, arith::MaxSIOp, arith::MinSIOp,
           arith::MaxUIOp, arith::MinUIOp, arith::AndIOp, arith::OrIOp,
           arith::XOrIOp>(combiner) ||
      (combiner->getOperand(0) != acc && combiner->getOperand(1) != acc))
    return nullptr;
  return combiner;
}

/// The identity of an integer combiner on `bits`-bit integers.
static llvm::APInt integerIdentity(Operation *combiner, unsigned bits) {
  return llvm::TypeSwitch<Operation *, llvm::APInt>(combiner)
      .Case([&](arith::MulIOp) { return llvm::APInt(bits, 1); })
      .Case(
          [&](arith::MaxSIOp) { return llvm::APInt::getSignedMinValue(bits); })
      .Case(
          [&](arith::MinSIOp) { return llvm::APInt::getSignedMaxValue(bits); })
      .Case<arith::MinUIOp, arith::AndIOp>(
          [&](Operation *) { return llvm::APInt::getAllOnes(bits); })
      // addi, ori, xori, maxui.
      .Default([&](Operation *) { return llvm::APInt::getZero(bits); });
}

Value mlir::fsdp::identityOf(OpBuilder &b, Location loc, Operation *combiner,
                             Type t) {
  if (auto it = dyn_cast<IntegerType>(t))
    return arith::ConstantOp::create(
        b, loc, it,
        b.getIntegerAttr(it, integerIdentity(combiner, it.getWidth())));
  auto ft = cast<FloatType>(t);
  const llvm::fltSemantics &sem = ft.getFloatSemantics();
  llvm::APFloat v =
      llvm::TypeSwitch<Operation *, llvm::APFloat>(combiner)
          .Case([&](arith::AddFOp) {
            return llvm::APFloat::getZero(sem, /*Negative=*/true);
          })
          .Case([&](arith::MulFOp) { return llvm::APFloat::getOne(sem); })
          .Case([&](arith::MaximumFOp) {
            return llvm::APFloat::getInf(sem, /*Negative=*/true);
          })
          .Default([&](Operation *) {
            return llvm::APFloat::getInf(sem, /*Negative=*/false);
          });
  return arith::ConstantOp::create(b, loc, ft, b.getFloatAttr(ft, v));
}

Value mlir::fsdp::combine(OpBuilder &b, Location loc, Operation *combiner,
                          Value a, Value c) {
  OperationState state(loc, combiner->getName().getIdentifier(), {a, c},
                       {a.getType()}, combiner->getAttrs());
  return b.create(state)->getResult(0);
}

Value mlir::fsdp::combinedElement(Operation *combiner, Value acc) {
  return combiner->getOperand(combiner->getOperand(0) == acc ? 1 : 0);
}

unsigned mlir::fsdp::blockedLoopLevels(int64_t trips, int64_t firstBlock) {
  if (ShapedType::isDynamic(trips))
    return 4;
  unsigned levels = 1;
  for (int64_t span = firstBlock; span < trips; span *= kBlockedLoopBlock)
    ++levels;
  return levels;
}

/// Level `level` of a blocked loop over [lb, ub): a fresh accumulator of
/// depth `depth` into which the iterations (level 0) or the blocks of
/// firstBlock * 16^(level-1) iterations, each summed one level down, are
/// combined in order.
static SmallVector<Value> blockedLevel(OpBuilder &b, Location loc, Value lb,
                                       Value ub, int64_t step,
                                       int64_t firstBlock, unsigned level,
                                       unsigned depth,
                                       const BlockedLoopCallbacks &cb) {
  SmallVector<Value> acc = cb.fresh(b, loc, depth);
  int64_t span = step;
  if (level > 0) {
    span *= firstBlock;
    for (unsigned l = 1; l < level; ++l)
      span *= kBlockedLoopBlock;
  }
  Value spanValue = arith::ConstantIndexOp::create(b, loc, span);
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, spanValue, acc,
      [&](OpBuilder &fb, Location fl, Value iv, ValueRange iterAcc) {
        SmallVector<Value> next;
        if (level == 0) {
          next = cb.step(fb, fl, iv, iterAcc, depth);
        } else {
          Value end = arith::MinSIOp::create(
              fb, fl, arith::AddIOp::create(fb, fl, iv, spanValue), ub);
          SmallVector<Value> child = blockedLevel(
              fb, fl, iv, end, step, firstBlock, level - 1, depth + 1, cb);
          next = cb.merge(fb, fl, iterAcc, child, depth);
        }
        scf::YieldOp::create(fb, fl, next);
      });
  return loop.getResults();
}

SmallVector<Value> mlir::fsdp::buildBlockedLoop(
    OpBuilder &b, Location loc, Value lb, Value ub, int64_t step, int64_t trips,
    int64_t firstBlock, unsigned depth, const BlockedLoopCallbacks &callbacks) {
  return blockedLevel(b, loc, lb, ub, step, firstBlock,
                      blockedLoopLevels(trips, firstBlock) - 1, depth,
                      callbacks);
}

//===- TensorParallelCrossEntropy.cpp - one-gather vocabulary-parallel CE -===//
//
// A cross-entropy over logits split along the vocabulary, in the form
// PyTorch exports `log_softmax` and the target's pick:
//
//   M = max_v x;  shifted = x - M;  S = sum_v exp(shifted);
//   logp = shifted - log S;  picked[n] = logp[n, target[n]]
//
// Each rank computes its row statistics on its vocabulary slice (its row
// max m_r, its sum of exponentials s_r = sum exp(x - m_r), and the target
// logit t_r, zero where the target is another rank's), the [N, 3] rows are
// all-gathered once over the axis, and every rank combines them:
// M = max_r m_r, S = sum_r s_r exp(m_r - M), T = sum_r t_r. The log
// probabilities (which the backward's softmax reads) are x - M - log S on
// the rank's slice, the target's T - M - log S: one small collective where
// resolving each reduction would take three all-reduces
// (docs/TENSOR_PARALLEL.md, "Vocabulary parallelism").
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"
#include "TransformUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;
using mlir::fsdp::detail::castFloatElements;

namespace {

/// The one op of a generic's body (besides the yield) when the body yields
/// its only result; null otherwise.
Operation *singleBodyOp(linalg::GenericOp g) {
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2 || g.getNumResults() != 1)
    return nullptr;
  Operation *op = &body.front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (op->getNumResults() != 1 || yield.getValues().size() != 1 ||
      yield.getValues()[0] != op->getResult(0))
    return nullptr;
  return op;
}

/// A rank-2 generic over parallel loops writing its result in order, whose
/// body is one `Op` of block arguments `args`.
template <typename Op>
linalg::GenericOp elementwise(Operation *user, ArrayRef<unsigned> args) {
  auto g = dyn_cast_or_null<linalg::GenericOp>(user);
  if (!g || g.getNumLoops() != 2 ||
      g.getNumParallelLoops() != g.getNumLoops() || g.getNumDpsInits() != 1 ||
      !g.getMatchingIndexingMap(g.getDpsInitOperand(0)).isIdentity() ||
      g.getNumDpsInputs() != args.size() ||
      !g.getMatchingIndexingMap(g.getDpsInputOperand(0)).isIdentity())
    return {};
  Operation *op = singleBodyOp(g);
  if (!op || !isa<Op>(op) || op->getNumOperands() != args.size())
    return {};
  Block &body = g.getRegion().front();
  for (auto [i, a] : llvm::enumerate(args))
    if (op->getOperand(i) != body.getArgument(a))
      return {};
  return g;
}

/// A map of (n, v) reading one value per row n: (n) or (n, 0).
bool isRowMap(AffineMap map) {
  if (map.getNumDims() != 2 || map.getNumResults() < 1 ||
      map.getResult(0) != getAffineDimExpr(0, map.getContext()))
    return false;
  for (AffineExpr e : map.getResults().drop_front()) {
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0)
      return false;
  }
  return true;
}

/// A reduction over the vocabulary of rank-2 `x` into one value per row.
bool isRowReduction(linalg::GenericOp g, Value x) {
  return g.getNumLoops() == 2 && g.getNumDpsInputs() == 1 &&
         g.getDpsInputs()[0] == x &&
         g.getIteratorTypesArray()[0] == utils::IteratorType::parallel &&
         g.getIteratorTypesArray()[1] == utils::IteratorType::reduction &&
         g.getMatchingIndexingMap(g.getDpsInputOperand(0)).isIdentity() &&
         llvm::all_of(g.getDpsInitsMutable(), [&](OpOperand &init) {
           return isRowMap(g.getMatchingIndexingMap(&init));
         });
}

/// Whether `v` is a fill of the float constant `want` (0 or -inf).
bool isFillOf(Value v, bool negInf) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  FloatAttr attr;
  if (!fill || !matchPattern(fill.getInputs()[0], m_Constant(&attr)))
    return false;
  const APFloat &f = attr.getValue();
  return negInf ? f.isInfinity() && f.isNegative() : f.isZero();
}

/// The single user of `v`, or null.
Operation *singleUser(Value v) {
  return v.hasOneUse() ? *v.user_begin() : nullptr;
}

/// Whether `op`, in `body`, reads both of its block arguments: the element
/// and the accumulator of a reduction.
bool readsElementAndAccumulator(Operation *op, Block &body) {
  return op->getBlock() == &body &&
         llvm::is_contained(op->getOperands(), body.getArgument(0)) &&
         llvm::is_contained(op->getOperands(), body.getArgument(1));
}

/// The target's pick: one op whose body reads logp once, at (row, label)
/// with the row its first loop, and yields the element; every other use
/// of logp (the backward's softmax) comes after it. Sets ce.pick and
/// ce.extract; `n` is the number of rows.
bool matchPick(CrossEntropy &ce, int64_t n) {
  Value logp = ce.logp->getResult(0);
  Block *block = ce.max->getBlock();
  for (OpOperand &use : logp.getUses()) {
    Operation *owner = block->findAncestorOpInBlock(*use.getOwner());
    auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
    if (!extract || owner == use.getOwner())
      continue;
    auto pick = dyn_cast<linalg::GenericOp>(owner);
    if (!pick || ce.pick)
      return false;
    ce.pick = pick;
    ce.extract = extract;
  }
  if (!ce.pick || ce.pick.getNumDpsInits() != 1 ||
      ce.pick.getNumParallelLoops() != ce.pick.getNumLoops() ||
      !ce.pick.getMatchingIndexingMap(ce.pick.getDpsInitOperand(0))
           .isIdentity() ||
      !ce.extract->hasOneUse() ||
      !isa<linalg::YieldOp>(*ce.extract->user_begin()) ||
      ce.extract->getParentOp() != ce.pick.getOperation())
    return false;
  auto row = ce.extract.getIndices()[0].getDefiningOp<linalg::IndexOp>();
  auto pickType = cast<RankedTensorType>(ce.pick->getResult(0).getType());
  if (!row || row.getDim() != 0 || !pickType.hasStaticShape() ||
      pickType.getRank() < 1 || pickType.getRank() > 2 ||
      pickType.getDimSize(0) != n ||
      (pickType.getRank() == 2 && pickType.getDimSize(1) != 1))
    return false;
  for (OpOperand &use : logp.getUses()) {
    Operation *owner = block->findAncestorOpInBlock(*use.getOwner());
    if (owner == ce.pick.getOperation() ? use.getOwner() != ce.extract
                                        : !ce.pick->isBeforeInBlock(owner))
      return false;
  }
  return true;
}

/// The cross-entropy whose row max is `max`, if it has the exported form.
std::optional<CrossEntropy> match(linalg::GenericOp max) {
  if (max.getNumDpsInputs() != 1)
    return std::nullopt;
  Value x = max.getDpsInputs()[0];
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  if (!xType || xType.getRank() != 2 || !xType.hasStaticShape() ||
      !isa<FloatType>(xType.getElementType()) || !isRowReduction(max, x) ||
      !isFillOf(max.getDpsInits()[0], /*negInf=*/true))
    return std::nullopt;
  Block &mbody = max.getRegion().front();
  auto yield = cast<linalg::YieldOp>(mbody.getTerminator());
  auto mx = yield.getValues()[0].getDefiningOp<arith::MaximumFOp>();
  if (!mx || !readsElementAndAccumulator(mx, mbody))
    return std::nullopt;
  for (Value r : max->getResults().drop_front())
    if (!r.use_empty())
      return std::nullopt;
  CrossEntropy ce;
  ce.max = max;
  Value rowMax = max->getResult(0);
  Operation *user = singleUser(rowMax);
  if (auto expand = dyn_cast_or_null<tensor::ExpandShapeOp>(user)) {
    ce.expand = expand;
    rowMax = expand.getResult();
    user = singleUser(rowMax);
  }
  ce.shifted = elementwise<arith::SubFOp>(user, {0, 1});
  if (!ce.shifted || ce.shifted.getDpsInputs()[0] != x ||
      ce.shifted.getDpsInputs()[1] != rowMax ||
      !isRowMap(ce.shifted.getIndexingMapsArray()[1]))
    return std::nullopt;
  Value shifted = ce.shifted->getResult(0);
  SmallVector<Operation *> users(shifted.getUsers());
  if (users.size() != 2)
    return std::nullopt;
  for (Operation *u : users) {
    if (auto e = elementwise<math::ExpOp>(u, {0}))
      ce.exp = e;
    else if (auto l = elementwise<arith::SubFOp>(u, {0, 1}))
      ce.logp = l;
  }
  if (!ce.exp || !ce.logp || ce.logp.getDpsInputs()[0] != shifted ||
      !isRowMap(ce.logp.getIndexingMapsArray()[1]))
    return std::nullopt;
  auto sum =
      dyn_cast_or_null<linalg::GenericOp>(singleUser(ce.exp->getResult(0)));
  Operation *add = sum ? singleBodyOp(sum) : nullptr;
  if (!add || !isa<arith::AddFOp>(add) ||
      !isRowReduction(sum, ce.exp->getResult(0)) ||
      !isFillOf(sum.getDpsInits()[0], /*negInf=*/false) ||
      !readsElementAndAccumulator(add, sum.getRegion().front()))
    return std::nullopt;
  ce.sum = sum;
  auto log = dyn_cast_or_null<linalg::GenericOp>(singleUser(sum->getResult(0)));
  Operation *logOp = log ? singleBodyOp(log) : nullptr;
  if (!logOp || !isa<math::LogOp>(logOp) || log.getNumDpsInputs() != 1 ||
      log.getNumParallelLoops() != log.getNumLoops() ||
      logOp->getOperand(0) != log.getRegion().front().getArgument(0) ||
      !llvm::all_of(log.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }) ||
      singleUser(log->getResult(0)) != ce.logp.getOperation() ||
      ce.logp.getDpsInputs()[1] != log->getResult(0))
    return std::nullopt;
  ce.log = log;
  if (!matchPick(ce, xType.getDimSize(0)))
    return std::nullopt;
  return ce;
}

Value emptyLike(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                Type elem) {
  return tensor::EmptyOp::create(b, loc, shape, elem);
}

Value filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elem,
             bool negInf) {
  auto ft = cast<FloatType>(elem);
  Attribute value =
      negInf ? FloatAttr::get(ft, APFloat::getInf(ft.getFloatSemantics(),
                                                  /*Negative=*/true))
             : b.getZeroAttr(elem);
  Value c = arith::ConstantOp::create(b, loc, cast<TypedAttr>(value));
  return linalg::FillOp::create(b, loc, c, emptyLike(b, loc, shape, elem))
      .getResult(0);
}

/// The maximum over d1 of a 2-d value read through `inputMap` (rows d0, a
/// reduction over d1): the rank's row max, or the max over ranks.
Value rowMax(OpBuilder &b, Location loc, Value input, AffineMap inputMap,
             int64_t n, Type elem) {
  MLIRContext *ctx = b.getContext();
  auto rowOf = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  SmallVector<utils::IteratorType> rowRed{utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get({n}, elem)},
             ValueRange{input},
             ValueRange{filled(b, loc, {n}, elem, /*negInf=*/true)},
             ArrayRef<AffineMap>{inputMap, rowOf}, rowRed,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl,
                   Value(arith::MaximumFOp::create(nb, nl, args[0], args[1])));
             })
      .getResult(0);
}

} // namespace

void tensor_parallel::collectCrossEntropies(TPFunction &tp) {
  for (Operation &op : tp.func.getBody().front()) {
    auto g = dyn_cast<linalg::GenericOp>(&op);
    if (!g)
      continue;
    std::optional<CrossEntropy> ce = match(g);
    if (!ce)
      continue;
    for (Operation *o : ce->absorbed())
      tp.absorbed.insert(o);
    tp.crossEntropies[ce->pick.getOperation()] = *ce;
  }
}

SmallVector<Operation *> CrossEntropy::absorbed() {
  SmallVector<Operation *> ops{max.getOperation()};
  if (expand)
    ops.push_back(expand);
  ops.append({shifted.getOperation(), exp.getOperation(), sum.getOperation(),
              log.getOperation(), logp.getOperation()});
  return ops;
}

namespace {

/// Whether the cross-entropy's logits (already this rank's) are split along
/// the vocabulary in one block, and its pick reads nothing else split.
bool splitAlongVocabulary(TPFunction &tp, CrossEntropy &ce) {
  Value x = ce.max.getDpsInputs()[0];
  Sharding s = shardingOf(tp, x);
  auto xType = cast<RankedTensorType>(x.getType());
  auto globalType = cast<RankedTensorType>(ce.logp->getResult(0).getType());
  if (s.dim != 1 || s.sequence || s.outer != 1 ||
      xType.getDimSize(1) * tp.size != globalType.getDimSize(1) ||
      xType.getDimSize(0) != globalType.getDimSize(0))
    return false;
  for (Value v : ce.pick->getOperands())
    if (shardingOf(tp, v).isSharded())
      return false;
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(ce.pick->getRegions(), captured);
  for (Value v : captured)
    if (v != ce.logp->getResult(0) && shardingOf(tp, v).isSharded())
      return false;
  return true;
}

/// [N, 3]: the three per-row statistics (max, sum of exponentials, target
/// logit) side by side, the one value the ranks exchange.
Value packRowStats(OpBuilder &b, Location loc, ValueRange stats, int64_t n,
                   Type elem) {
  MLIRContext *ctx = b.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  auto rowOf = AffineMap::get(2, 0, {d0}, ctx);
  auto full = AffineMap::get(2, 0, {d0, d1}, ctx);
  SmallVector<utils::IteratorType> par2(2, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get({n, 3}, elem)}, stats,
             ValueRange{emptyLike(b, loc, {n, 3}, elem)},
             ArrayRef<AffineMap>{rowOf, rowOf, rowOf, full}, par2,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value j = linalg::IndexOp::create(nb, nl, 1);
               Value c0 = arith::ConstantIndexOp::create(nb, nl, 0);
               Value c1 = arith::ConstantIndexOp::create(nb, nl, 1);
               Value is0 = arith::CmpIOp::create(
                   nb, nl, arith::CmpIPredicate::eq, j, c0);
               Value is1 = arith::CmpIOp::create(
                   nb, nl, arith::CmpIPredicate::eq, j, c1);
               Value st =
                   arith::SelectOp::create(nb, nl, is1, args[1], args[2]);
               linalg::YieldOp::create(
                   nb, nl,
                   Value(arith::SelectOp::create(nb, nl, is0, args[0], st)));
             })
      .getResult(0);
}

} // namespace

FailureOr<bool> tensor_parallel::partitionCrossEntropy(TPFunction &tp,
                                                       CrossEntropy ce) {
  if (!splitAlongVocabulary(tp, ce))
    return false;
  Value x = ce.max.getDpsInputs()[0];
  auto xType = cast<RankedTensorType>(x.getType());

  Location loc = ce.max.getLoc();
  OpBuilder b(ce.pick);
  MLIRContext *ctx = b.getContext();
  Type elem = xType.getElementType();
  int64_t n = xType.getDimSize(0), vl = xType.getDimSize(1);
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  auto full = AffineMap::get(2, 0, {d0, d1}, ctx);
  auto rowOf = AffineMap::get(2, 0, {d0}, ctx);
  auto byRank = AffineMap::get(2, 0, {d1, d0}, ctx);
  auto id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
  SmallVector<utils::IteratorType> rowRed{utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  SmallVector<utils::IteratorType> par2(2, utils::IteratorType::parallel);
  auto rowType = RankedTensorType::get({n}, elem);

  // The target logit t_r: the pick reading the rank's logits (its
  // vocabulary-parallel read: zero where the target is another rank's).
  Operation *tPick = b.clone(*ce.pick);
  ce.logp->getResult(0).replaceUsesWithIf(x, [&](OpOperand &use) {
    return tPick->isProperAncestor(use.getOwner());
  });
  FailureOr<bool> read =
      partitionIndexedRead(tp, cast<linalg::LinalgOp>(tPick));
  if (failed(read))
    return failure();
  if (!*read)
    return tPick->emitError() << "the target of a vocabulary-parallel "
                                 "cross-entropy is not read from its logits";
  Value target = tPick->getResult(0);
  tp.partials.erase(target);
  if (cast<RankedTensorType>(target.getType()).getRank() == 2)
    target = tensor::CollapseShapeOp::create(
        b, loc, rowType, target, ArrayRef<ReassociationIndices>{{0, 1}});

  // The rank's row max, rounded to the type the statistics travel in so
  // that its sum of exponentials is relative to the value the others see.
  Value localMax = rowMax(b, loc, x, full, n, elem);
  localMax = castFloatElements(
      b, loc, castFloatElements(b, loc, localMax, tp.reduceType), elem);
  Value localSum =
      linalg::GenericOp::create(
          b, loc, TypeRange{rowType}, ValueRange{x, localMax},
          ValueRange{filled(b, loc, {n}, elem, /*negInf=*/false)},
          ArrayRef<AffineMap>{full, rowOf, rowOf}, rowRed,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value d = arith::SubFOp::create(nb, nl, args[0], args[1]);
            Value e = math::ExpOp::create(nb, nl, d);
            linalg::YieldOp::create(
                nb, nl, Value(arith::AddFOp::create(nb, nl, args[2], e)));
          })
          .getResult(0);

  // [N, 3]: (m_r, s_r, t_r) per row, all-gathered once (in the reduce
  // type of the sums, when one is set).
  Value packed = packRowStats(b, loc, {localMax, localSum, target}, n, elem);
  packed = castFloatElements(b, loc, packed, tp.reduceType);
  auto wireType = cast<RankedTensorType>(packed.getType());
  Type wire = wireType.getElementType();
  int64_t k = tp.size;
  Value gathered =
      AllGatherOp::create(b, loc, RankedTensorType::get({k * n, 3}, wire),
                          packed, tp.meshRef, b.getStrArrayAttr({tp.axis}),
                          /*members=*/DenseI64ArrayAttr())
          .getResult();
  ++tp.allGathers;
  Value perRank = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({k, n, 3}, wire), gathered,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  auto statType = RankedTensorType::get({k, n}, wire);
  auto stat = [&](int64_t c) -> Value {
    SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0),
                                      b.getIndexAttr(c)};
    SmallVector<OpFoldResult> sizes{b.getIndexAttr(k), b.getIndexAttr(n),
                                    b.getIndexAttr(1)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, loc, statType, perRank, offsets,
                                          sizes, strides);
  };
  Value ms = stat(0), ss = stat(1), ts = stat(2);
  auto wireRow = RankedTensorType::get({n}, wire);
  Value gmax = rowMax(b, loc, ms, byRank, n, wire);
  auto combine = linalg::GenericOp::create(
      b, loc, TypeRange{wireRow, wireRow}, ValueRange{ms, ss, ts, gmax},
      ValueRange{filled(b, loc, {n}, wire, /*negInf=*/false),
                 filled(b, loc, {n}, wire, /*negInf=*/false)},
      ArrayRef<AffineMap>{byRank, byRank, byRank, rowOf, rowOf, rowOf}, rowRed,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value d = arith::SubFOp::create(nb, nl, args[0], args[3]);
        Value scaled = arith::MulFOp::create(nb, nl, args[1],
                                             math::ExpOp::create(nb, nl, d));
        Value sum = arith::AddFOp::create(nb, nl, args[4], scaled);
        Value t = arith::AddFOp::create(nb, nl, args[5], args[2]);
        linalg::YieldOp::create(nb, nl, ValueRange{sum, t});
      });
  Value gM = castFloatElements(b, loc, gmax, elem);
  Value gS = castFloatElements(b, loc, combine.getResult(0), elem);
  Value gT = castFloatElements(b, loc, combine.getResult(1), elem);

  // logp on the rank's slice, (x - M) - log S as the exported graph
  // rounds it, and the target's (T - M) - log S.
  auto logProb = [&](OpBuilder &nb, Location nl, ValueRange args) {
    Value d = arith::SubFOp::create(nb, nl, args[0], args[1]);
    Value l = math::LogOp::create(nb, nl, args[2]);
    linalg::YieldOp::create(nb, nl, Value(arith::SubFOp::create(nb, nl, d, l)));
  };
  Value logp = linalg::GenericOp::create(
                   b, loc, TypeRange{xType}, ValueRange{x, gM, gS},
                   ValueRange{emptyLike(b, loc, {n, vl}, elem)},
                   ArrayRef<AffineMap>{full, rowOf, rowOf, full}, par2, logProb)
                   .getResult(0);
  tp.shardings[logp] = shardingOf(tp, x);
  Value targetLogp =
      linalg::GenericOp::create(
          b, loc, TypeRange{rowType}, ValueRange{gT, gM, gS},
          ValueRange{emptyLike(b, loc, {n}, elem)},
          ArrayRef<AffineMap>{id1, id1, id1, id1},
          SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
          logProb)
          .getResult(0);

  // The pick, whole on every rank: it reads the target's log probability
  // of its row.
  Operation *pick = b.clone(*ce.pick);
  pick->walk([&](tensor::ExtractOp e) {
    if (e.getTensor() != ce.logp->getResult(0))
      return;
    OpBuilder eb(e);
    Value v = tensor::ExtractOp::create(eb, e.getLoc(), targetLogp,
                                        ValueRange{e.getIndices()[0]});
    e.getResult().replaceAllUsesWith(v);
    e.erase();
  });
  ce.pick->getResult(0).replaceAllUsesWith(pick->getResult(0));
  ce.logp->getResult(0).replaceAllUsesWith(logp);
  ce.pick->erase();
  SmallVector<Operation *> absorbed = ce.absorbed();
  for (Operation *op : llvm::reverse(absorbed))
    op->erase();
  tp.shardedOps += 3;
  return true;
}

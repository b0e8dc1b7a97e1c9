//===- GpuFuseCrossEntropy.cpp - cross-entropy over logits in row passes --===//
//
// Recognizes the cross-entropy chain torch exports for
// `F.cross_entropy(logits, targets)` (log_softmax written out, the NLL as a
// gather, and autograd's backward of both) on tensors, before the segments
// are outlined, and rewrites it so that nothing of the logits' size is
// materialized except the gradient:
//
//   m[n]  = max_v x[n, v]                         (row reduction)
//   ls[n] = log(sum_v exp(x[n, v] - m[n]))        (row reduction, fused exp)
//   logp[n, t[n]] = (x[n, t[n]] - m[n]) - ls[n]   (the gather reads x)
//   dx[n, v] = -onehot(t[n], v) c[n] - exp((x - m) - ls) r[n]
//
// with c[n] the NLL backward's per-row scale and r[n] = sum_v -onehot c[n]
// (-c[n] when t[n] is a class, else 0), written in the gradient's element
// type in one elementwise pass. The exported chain materializes x - m,
// exp(x - m), log_softmax, exp(log_softmax), the one-hot, its scaled
// negation and two products, each [N, V] in f32. The forward values are
// bit-identical to the chain's; the gradient skips fsdp-autocast's rounding
// of exp(log_softmax) r to bf16 before the subtraction.
//
// A chain is rewritten only when it matches exactly (every intermediate used
// by the chain alone); anything else stays, with a `report` remark saying
// why for a chain that got as far as the log_softmax.
//
//===----------------------------------------------------------------------===//

#include "ChainMatching.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUFUSECROSSENTROPY
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::chain;

namespace {

/// The matched chain.
struct CrossEntropy {
  /// The logits [N, V] (f32, or bf16 widened in the bodies).
  Value logits;
  /// log_softmax [N, V] (f32) and the gather that reads it.
  linalg::GenericOp logSoftmax;
  tensor::ExtractOp gather;
  /// The backward: the gradient [N, V] it replaces (null: a forward alone),
  /// the class of each row [N, 1] and the per-row scale c [N, 1].
  Value grad, targets, scale;
};

struct Miss {
  Operation *at = nullptr;
  std::string why;
};

LogicalResult missed(Miss &m, Operation *at, const Twine &why) {
  m.at = at;
  m.why = why.str();
  return failure();
}

/// The generic computing `v` with `form`, or null.
linalg::GenericOp genericOf(Value v) {
  return v ? v.getDefiningOp<linalg::GenericOp>() : linalg::GenericOp();
}

/// The only user of `v`, or null.
Operation *onlyUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// A unary elementwise generic on `rows x cols` whose body is OpTy of its
/// input.
template <typename OpTy> bool isUnary(linalg::GenericOp g) {
  if (!hasForm(g, 1, {{0, 1}, {0, 1}}, "pp"))
    return false;
  Operation *y = yielded(g).getDefiningOp();
  return isa_and_nonnull<OpTy>(y) && isArg(y->getOperand(0), g, 0);
}

/// The one-hot test onehot[n, v] = (t[n] == v) as a generic of the targets
/// [N, 1] and an arange [V]: the targets, else null.
Value oneHotTargets(linalg::GenericOp eq) {
  if (!hasForm(eq, 2, {{0, kUnit}, {1}, {0, 1}}, "pp") ||
      !isArange(eq.getDpsInputs()[1]))
    return {};
  auto cmp = yielded(eq).getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq ||
      !((isArg(cmp.getLhs(), eq, 0) && isArg(cmp.getRhs(), eq, 1)) ||
        (isArg(cmp.getLhs(), eq, 1) && isArg(cmp.getRhs(), eq, 0))))
    return {};
  return eq.getDpsInputs()[0];
}

/// hasForm's maps: the [N, V] elements, the rows' [N, 1].
const SmallVector<unsigned, 4> kId = {0, 1}, kRow = {0, kUnit};

/// The ops of log_softmax = (x - m) - log(sum(exp(x - m))).
struct LogSoftmax {
  linalg::GenericOp g, lg, sum, exp, shifted, max;
  tensor::ExpandShapeOp expand;
};

/// (x - m) - log(sum(exp(x - m))) from its final subtraction `ls.g`.
LogicalResult matchLogSumExp(LogSoftmax &ls) {
  linalg::GenericOp g = ls.g;
  if (!hasForm(g, 2, {kId, kRow, kId}, "pp") ||
      !ordered<arith::SubFOp>(yielded(g), argOf(g, 0), argOf(g, 1)))
    return failure();
  linalg::GenericOp lg = ls.lg = genericOf(g.getDpsInputs()[1]);
  linalg::GenericOp shifted = ls.shifted = genericOf(g.getDpsInputs()[0]);
  if (!lg || !isUnary<math::LogOp>(lg) || !shifted)
    return failure();
  linalg::GenericOp sum = ls.sum = genericOf(lg.getDpsInputs()[0]);
  if (!sum || !hasForm(sum, 1, {kId, kRow}, "pr") ||
      fillValue(sum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(sum), argOf(sum, 0), argOf(sum, 1)))
    return failure();
  linalg::GenericOp exp = ls.exp = genericOf(sum.getDpsInputs()[0]);
  if (!exp || !isUnary<math::ExpOp>(exp) ||
      exp.getDpsInputs()[0] != shifted->getResult(0))
    return failure();
  // x - m, m the row maximum (torch's max also computes an argmax, unused).
  if (!hasForm(shifted, 2, {kId, kRow, kId}, "pp") ||
      !ordered<arith::SubFOp>(yielded(shifted), argOf(shifted, 0),
                              argOf(shifted, 1)))
    return failure();
  return success();
}

/// m = max_v x, the logits' type, and the intermediates used by the chain
/// alone.
LogicalResult matchRowMax(LogSoftmax &ls, CrossEntropy &ce, Miss &m) {
  linalg::GenericOp g = ls.g, shifted = ls.shifted;
  ce.logits = shifted.getDpsInputs()[0];
  ls.expand = shifted.getDpsInputs()[1].getDefiningOp<tensor::ExpandShapeOp>();
  linalg::GenericOp max = ls.max =
      ls.expand ? genericOf(ls.expand.getSrc()) : nullptr;
  if (!max || max.getNumDpsInputs() != 1 || max.getNumDpsInits() < 1 ||
      max.getDpsInputs()[0] != ce.logits || max.getNumLoops() != 2 ||
      max.getNumReductionLoops() != 1 ||
      fillValue(max.getDpsInits()[0]) != -INFINITY ||
      !isMaximum(max.getBody()->getTerminator()->getOperand(0), argOf(max, 0),
                 [&](Value v) { return v == max.getBody()->getArgument(1); }) ||
      llvm::any_of(max->getResults().drop_front(),
                   [](Value r) { return !r.use_empty(); }))
    return missed(m, shifted, "the row maximum is not max_v x");
  auto lt = dyn_cast<RankedTensorType>(ce.logits.getType());
  if (!lt || !lt.hasStaticShape() ||
      !(lt.getElementType().isF32() || lt.getElementType().isBF16()))
    return missed(m, g, "the logits are not statically shaped f32 or bf16");
  if (!max->getResult(0).hasOneUse() || !ls.expand->hasOneUse() ||
      !ls.exp->hasOneUse() || !ls.sum->hasOneUse() || !ls.lg->hasOneUse() ||
      !shifted->getResult(0).hasNUses(2))
    return missed(m, g, "the log_softmax's intermediates have other users");
  ce.logSoftmax = g;
  return success();
}

/// The users of log_softmax: the NLL's gather (an extract in a generic's
/// body) and, in a training step, exp(log_softmax) of the backward
/// (`softmax`, null in a forward alone).
LogicalResult matchLogSoftmaxUsers(CrossEntropy &ce, Miss &m,
                                   linalg::GenericOp &softmax) {
  linalg::GenericOp g = ce.logSoftmax;
  for (Operation *user : g->getResult(0).getUsers()) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(user);
        extract && isa<linalg::GenericOp>(extract->getParentOp()) && !ce.gather)
      ce.gather = extract;
    else if (auto e = dyn_cast<linalg::GenericOp>(user);
             e && isUnary<math::ExpOp>(e) && !softmax)
      softmax = e;
    else
      return missed(m, user, "the log_softmax has users outside the chain");
  }
  if (!ce.gather)
    return missed(m, g, "no gather of the log_softmax (the NLL)");
  return success();
}

/// dx = q - exp(logp) rowsum(q): q and dx.
LogicalResult matchGradient(linalg::GenericOp softmax, Miss &m,
                            linalg::GenericOp &q, linalg::GenericOp &dx) {
  linalg::GenericOp prod =
      dyn_cast_or_null<linalg::GenericOp>(onlyUser(softmax->getResult(0)));
  if (!prod || !hasForm(prod, 2, {kId, kRow, kId}, "pp") ||
      prod.getDpsInputs()[0] != softmax->getResult(0) ||
      !commutes<arith::MulFOp>(yielded(prod), argOf(prod, 0), argOf(prod, 1)))
    return missed(m, softmax, "the backward is not exp(logp) rowsum(q)");
  linalg::GenericOp rowsum = genericOf(prod.getDpsInputs()[1]);
  if (!rowsum || !hasForm(rowsum, 1, {kId, kRow}, "pr") ||
      fillValue(rowsum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(rowsum), argOf(rowsum, 0),
                               argOf(rowsum, 1)) ||
      !rowsum->hasOneUse())
    return missed(m, prod, "the backward is not exp(logp) rowsum(q)");
  q = genericOf(rowsum.getDpsInputs()[0]);
  dx = dyn_cast_or_null<linalg::GenericOp>(onlyUser(prod->getResult(0)));
  if (!q || !dx || !hasForm(dx, 2, {kId, kId, kId}, "pp") ||
      dx.getDpsInputs()[0] != q->getResult(0) ||
      dx.getDpsInputs()[1] != prod->getResult(0) ||
      !ordered<arith::SubFOp>(yielded(dx), argOf(dx, 0), argOf(dx, 1)) ||
      !q->getResult(0).hasNUses(2))
    return missed(m, prod, "the gradient is not q - exp(logp) rowsum(q)");
  return success();
}

/// q = -onehot * c: negf(uitofp(t == arange)) times a row scale; the
/// targets, the scale and the gradient `dx`.
LogicalResult matchNegatedOneHot(linalg::GenericOp q, linalg::GenericOp dx,
                                 CrossEntropy &ce, Miss &m) {
  if (!hasForm(q, 2, {kId, kRow, kId}, "pp") ||
      !commutes<arith::MulFOp>(yielded(q), argOf(q, 0), argOf(q, 1)))
    return missed(m, q, "the NLL backward is not -onehot * c");
  linalg::GenericOp neg = genericOf(q.getDpsInputs()[0]);
  linalg::GenericOp toFloat = neg ? genericOf(neg.getDpsInputs()[0]) : nullptr;
  linalg::GenericOp eq =
      toFloat ? genericOf(toFloat.getDpsInputs()[0]) : nullptr;
  if (!neg || !isUnary<arith::NegFOp>(neg) || !toFloat ||
      !isUnary<arith::UIToFPOp>(toFloat) || !eq || !neg->hasOneUse() ||
      !toFloat->hasOneUse() || !eq->hasOneUse())
    return missed(m, q, "the NLL backward is not -onehot * c");
  ce.targets = oneHotTargets(eq);
  auto targetType = ce.targets
                        ? dyn_cast<RankedTensorType>(ce.targets.getType())
                        : RankedTensorType();
  if (!targetType || !targetType.getElementType().isInteger(64))
    return missed(m, eq, "the one-hot is not (t[n] == v) of i64 targets");
  ce.scale = q.getDpsInputs()[1];
  if (!cast<ShapedType>(ce.scale.getType()).getElementType().isF32())
    return missed(m, q, "the NLL backward's scale is not f32");
  auto gradType = cast<RankedTensorType>(dx->getResult(0).getType());
  if (!(gradType.getElementType().isF32() ||
        gradType.getElementType().isBF16()))
    return missed(m, dx, "the gradient is not f32 or bf16");
  Block *block = ce.logSoftmax->getBlock();
  if (dx->getBlock() != block || q->getBlock() != block)
    return missed(m, dx, "the chain spans blocks");
  ce.grad = dx->getResult(0);
  return success();
}

/// From log_softmax `g` = (x - m) - log(sum(exp(x - m))).
FailureOr<CrossEntropy> match(linalg::GenericOp g, Miss &m) {
  LogSoftmax ls;
  ls.g = g;
  if (failed(matchLogSumExp(ls)))
    return failure();
  CrossEntropy ce;
  linalg::GenericOp softmax;
  if (failed(matchRowMax(ls, ce, m)) ||
      failed(matchLogSoftmaxUsers(ce, m, softmax)))
    return failure();
  if (!softmax)
    return ce;
  // dx = q - exp(logp) rowsum(q), q = -onehot * c.
  linalg::GenericOp q, dx;
  if (failed(matchGradient(softmax, m, q, dx)) ||
      failed(matchNegatedOneHot(q, dx, ce, m)))
    return failure();
  return ce;
}

/// Builders for the rewritten chain.
struct Rewriter {
  OpBuilder &b;
  Location loc;
  Type f32;

  Value widen(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
  }

  /// A row reduction of the logits [N, V] into a filled [N, 1] f32, reading
  /// the [N, 1] tensors `rows` too; `combine(acc, x, rowValues)`.
  Value rowReduction(
      Value logits, ValueRange rows, double init,
      function_ref<Value(OpBuilder &, Location, Value, Value, ValueRange)>
          combine) {
    MLIRContext *ctx = b.getContext();
    auto lt = cast<RankedTensorType>(logits.getType());
    auto rowType = RankedTensorType::get({lt.getDimSize(0), 1}, f32);
    Value empty = tensor::EmptyOp::create(b, loc, rowType.getShape(), f32);
    Value cst = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(init));
    Value filled = linalg::FillOp::create(b, loc, cst, empty).getResult(0);
    AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
               zero = getAffineConstantExpr(0, ctx);
    AffineMap full = AffineMap::get(2, 0, {d0, d1}, ctx);
    AffineMap perRow = AffineMap::get(2, 0, {d0, zero}, ctx);
    SmallVector<Value> inputs = {logits};
    inputs.append(rows.begin(), rows.end());
    SmallVector<AffineMap> maps = {full};
    maps.append(rows.size() + 1, perRow);
    auto op = linalg::GenericOp::create(
        b, loc, rowType, inputs, filled, maps,
        {utils::IteratorType::parallel, utils::IteratorType::reduction},
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value x = args[0];
          if (x.getType() != f32)
            x = arith::ExtFOp::create(nb, nl, f32, x);
          Value r = combine(nb, nl, args.back(), x, args.slice(1, rows.size()));
          linalg::YieldOp::create(nb, nl, r);
        });
    return op->getResult(0);
  }
};

struct FSDPGpuFuseCrossEntropyPass
    : public mlir::fsdp::impl::FSDPGpuFuseCrossEntropyBase<
          FSDPGpuFuseCrossEntropyPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp g) {
      auto fn = g->getParentOfType<func::FuncOp>();
      if (fn && !fn->hasAttr(kSegmentAttrName) &&
          isa<func::FuncOp>(g->getParentOp()))
        candidates.push_back(g);
    });
    for (linalg::GenericOp g : candidates) {
      // A rewrite erases the chain's ops, later candidates among them.
      if (erased.contains(g.getOperation()))
        continue;
      Miss m;
      FailureOr<CrossEntropy> ce = match(g, m);
      if (failed(ce)) {
        if (report && m.at)
          m.at->emitRemark() << "cross-entropy stays unfused: " << m.why;
        continue;
      }
      rewrite(*ce);
    }
  }

  void rewrite(CrossEntropy &ce) {
    linalg::GenericOp g = ce.logSoftmax;
    auto lt = cast<RankedTensorType>(ce.logits.getType());
    if (report)
      g->emitRemark() << "cross-entropy fused: " << lt.getDimSize(0)
                      << " rows of " << lt.getDimSize(1) << " classes, "
                      << (lt.getElementType().isBF16() ? "bf16" : "f32")
                      << " logits, "
                      << (ce.grad ? "forward and backward" : "forward only");
    OpBuilder b(g);
    Location loc = g.getLoc();
    Rewriter r{b, loc, b.getF32Type()};
    // m, then ls = log(sum exp(x - m)), in the chain's order of operations.
    Value m = r.rowReduction(
        ce.logits, {}, -INFINITY,
        [](OpBuilder &nb, Location nl, Value acc, Value x, ValueRange) {
          return arith::MaximumFOp::create(nb, nl, x, acc);
        });
    Value s = r.rowReduction(
        ce.logits, {m}, 0.0,
        [](OpBuilder &nb, Location nl, Value acc, Value x, ValueRange rows) {
          Value d = arith::SubFOp::create(nb, nl, x, rows[0]);
          Value e = math::ExpOp::create(nb, nl, d);
          return arith::AddFOp::create(nb, nl, e, acc);
        });
    auto rowType = cast<RankedTensorType>(s.getType());
    Value lsEmpty = tensor::EmptyOp::create(b, loc, rowType.getShape(),
                                            rowType.getElementType());
    MLIRContext *ctx = b.getContext();
    AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
    Value ls =
        linalg::GenericOp::create(
            b, loc, rowType, s, lsEmpty, ArrayRef<AffineMap>{id2, id2},
            {utils::IteratorType::parallel, utils::IteratorType::parallel},
            [&](OpBuilder &nb, Location nl, ValueRange args) {
              linalg::YieldOp::create(
                  nb, nl, Value(math::LogOp::create(nb, nl, args[0])));
            })
            ->getResult(0);
    // The gather reads x, m and ls at its row and class.
    {
      tensor::ExtractOp extract = ce.gather;
      OpBuilder gb(extract);
      Location gl = extract.getLoc();
      Value zero = arith::ConstantIndexOp::create(gb, gl, 0);
      Value row = extract.getIndices()[0], cls = extract.getIndices()[1];
      Value x = tensor::ExtractOp::create(gb, gl, ce.logits, {row, cls});
      if (x.getType() != r.f32)
        x = arith::ExtFOp::create(gb, gl, r.f32, x);
      Value mr = tensor::ExtractOp::create(gb, gl, m, {row, zero});
      Value lr = tensor::ExtractOp::create(gb, gl, ls, {row, zero});
      Value d = arith::SubFOp::create(gb, gl, x, mr);
      Value logp = arith::SubFOp::create(gb, gl, d, lr);
      extract.getResult().replaceAllUsesWith(logp);
      extract->erase();
    }
    if (ce.grad)
      rewriteBackward(ce, m, ls);
    ++numFused;
    if (!erased.contains(g.getOperation()))
      eraseDead(g);
  }

  /// dx[n, v] = -onehot c[n] - exp((x - m) - ls) r[n], r[n] = -c[n] for a
  /// class in [0, V), else 0.
  void rewriteBackward(CrossEntropy &ce, Value m, Value ls) {
    Operation *dx = ce.grad.getDefiningOp();
    OpBuilder b(dx);
    Location loc = dx->getLoc();
    MLIRContext *ctx = b.getContext();
    auto gradType = cast<RankedTensorType>(ce.grad.getType());
    int64_t classes = gradType.getDimSize(1);
    Type f32 = b.getF32Type();
    AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
               zero = getAffineConstantExpr(0, ctx);
    AffineMap full = AffineMap::get(2, 0, {d0, d1}, ctx);
    AffineMap perRow = AffineMap::get(2, 0, {d0, zero}, ctx);
    Value empty = tensor::EmptyOp::create(b, loc, gradType.getShape(),
                                          gradType.getElementType());
    auto op = linalg::GenericOp::create(
        b, loc, gradType, ValueRange{ce.logits, m, ls, ce.targets, ce.scale},
        empty, ArrayRef<AffineMap>{full, perRow, perRow, perRow, perRow, full},
        {utils::IteratorType::parallel, utils::IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value x = args[0];
          if (x.getType() != f32)
            x = arith::ExtFOp::create(nb, nl, f32, x);
          Value t = args[3], c = args[4];
          Value v = arith::IndexCastOp::create(
              nb, nl, nb.getI64Type(), linalg::IndexOp::create(nb, nl, 1));
          Value hit =
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, t, v);
          Value one = arith::UIToFPOp::create(nb, nl, f32, hit);
          Value q = arith::MulFOp::create(
              nb, nl, arith::NegFOp::create(nb, nl, one), c);
          // A class outside [0, V) (as unsigned) has an all-zero one-hot.
          Value inRange = arith::CmpIOp::create(
              nb, nl, arith::CmpIPredicate::ult, t,
              arith::ConstantIntOp::create(nb, nl, classes, 64));
          Value rowSum = arith::SelectOp::create(
              nb, nl, inRange, arith::NegFOp::create(nb, nl, c),
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0)));
          Value d = arith::SubFOp::create(nb, nl, x, args[1]);
          Value logp = arith::SubFOp::create(nb, nl, d, args[2]);
          Value p = arith::MulFOp::create(
              nb, nl, math::ExpOp::create(nb, nl, logp), rowSum);
          Value grad = arith::SubFOp::create(nb, nl, q, p);
          if (gradType.getElementType() != f32)
            grad = arith::TruncFOp::create(nb, nl, gradType.getElementType(),
                                           grad);
          linalg::YieldOp::create(nb, nl, grad);
        });
    ce.grad.replaceAllUsesWith(op->getResult(0));
    eraseDead(dx);
  }

  /// The ops the rewrites erased.
  DenseSet<Operation *> erased;

  /// Erases `op` if unused, then the producers only it used (side-effect
  /// free ones).
  void eraseDead(Operation *op) {
    SmallVector<Operation *> work = {op};
    while (!work.empty()) {
      Operation *cur = work.pop_back_val();
      if (!cur->use_empty() || !isMemoryEffectFree(cur) ||
          cur->hasTrait<OpTrait::ConstantLike>())
        continue;
      SmallVector<Operation *> producers;
      for (Value v : cur->getOperands())
        if (Operation *def = v.getDefiningOp())
          producers.push_back(def);
      erased.insert(cur);
      cur->erase();
      for (Operation *def : producers)
        if (!llvm::is_contained(work, def))
          work.push_back(def);
    }
  }
};

} // namespace

//===- AttentionMatchGenerator.cpp - the generator's attention chain ------===//
//
// Attention as fsdp_mlir.dev.gen writes it (`transformer --attention`), on
// [batch, seq, dim] tensors: the scores S = Q K^T, a softmax written out
// (row maximum, exp((S - max) scale), row sum, quotient; causal through
// selects on the loop indices), the output P V, and the backward of the
// same (dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)) scale,
// dQ = dS K, dK = dS^T Q). Matched stage by stage from the scores.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::attention;
using namespace mlir::fsdp::chain;

namespace {

/// `cond` tests key j > query i (the causal mask), with the query and key
/// loops `i` and `j`.
bool isCausalTest(Value cond, unsigned i, unsigned j) {
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  auto index = [](Value v, unsigned d) {
    auto op = v.getDefiningOp<linalg::IndexOp>();
    return op && op.getDim() == d;
  };
  Value l = cmp.getLhs(), r = cmp.getRhs();
  switch (cmp.getPredicate()) {
  case arith::CmpIPredicate::ugt:
  case arith::CmpIPredicate::sgt:
    return index(l, j) && index(r, i);
  case arith::CmpIPredicate::ult:
  case arith::CmpIPredicate::slt:
    return index(l, i) && index(r, j);
  default:
    return false;
  }
}

/// The ops of the chain found so far, stage by stage.
struct GeneratorChain {
  linalg::GenericOp s, max, exp, sum, div;
  /// The users of the probabilities: P V, and the backward's dV, row dot
  /// and dS.
  linalg::GenericOp pv, dv, rowdot, ds;
  linalg::GenericOp dp, dq, dk;
  llvm::SetVector<Operation *> casts, probUsers;
};

/// The row maximum of the scores (with the causal select when `causal`).
LogicalResult matchRowMax(GeneratorChain &c, bool &causal) {
  llvm::SetVector<Operation *> sUsers;
  usersOf(c.s->getResult(0), sUsers, c.casts);
  // The row maximum and the exponential.
  for (Operation *user : sUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && g.getNumDpsInputs() == 1 && !c.max)
      c.max = g;
    else if (g && g.getNumDpsInputs() == 2 && !c.exp)
      c.exp = g;
    else
      return failure();
  }
  linalg::GenericOp max = c.max;
  if (!max || !c.exp || !hasForm(max, 1, {{0, 1, 2}, {0, 1}}, "ppr") ||
      fillValue(max.getDpsInits()[0]) != -INFINITY)
    return failure();
  Value y = yielded(max);
  auto isMax = [&](Value v) {
    return isMaximum(v, argOf(max, 0), argOf(max, 1));
  };
  if (isMax(y)) {
    causal = false;
  } else if (auto sel = y.getDefiningOp<arith::SelectOp>();
             sel && isCausalTest(sel.getCondition(), 1, 2) &&
             isArg(sel.getTrueValue(), max, 1) && isMax(sel.getFalseValue())) {
    causal = true;
  } else {
    return failure();
  }
  return success();
}

/// exp((s - max) * scale), 0 where masked: the mask and the scale.
LogicalResult matchExponential(GeneratorChain &c, Attention &a, Miss &m,
                               bool maxCausal) {
  linalg::GenericOp exp = c.exp;
  if (!hasForm(exp, 2, {{0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") ||
      source(exp.getDpsInputs()[0]) != c.s->getResult(0) ||
      source(exp.getDpsInputs()[1]) != c.max->getResult(0))
    return failure();
  Value y = yielded(exp);
  bool expCausal = false;
  if (auto sel = y.getDefiningOp<arith::SelectOp>()) {
    if (!isCausalTest(sel.getCondition(), 1, 2) ||
        constantFloat(sel.getTrueValue()) != 0.0)
      return missed(m, exp, "the exponential masks other than causally");
    expCausal = true;
    y = sel.getFalseValue();
  }
  std::optional<double> scale;
  auto expOp = y.getDefiningOp<math::ExpOp>();
  if (!expOp ||
      !commutes<arith::MulFOp>(
          expOp.getOperand(),
          [&](Value d) {
            return ordered<arith::SubFOp>(d, argOf(exp, 0), argOf(exp, 1));
          },
          [&](Value k) { return (scale = constantFloat(k)).has_value(); }))
    return failure();
  if (maxCausal != expCausal)
    return missed(m, exp,
                  "the row maximum and the exponential mask differently");
  a.causal = expCausal;
  a.scale = *scale;
  return success();
}

/// The row sum and the quotient exp / rowsum(exp).
LogicalResult matchQuotient(GeneratorChain &c, Miss &m) {
  linalg::GenericOp exp = c.exp;
  llvm::SetVector<Operation *> maxUsers, expUsers;
  usersOf(c.max->getResult(0), maxUsers, c.casts);
  usersOf(exp->getResult(0), expUsers, c.casts);
  if (maxUsers.size() != 1 || expUsers.size() != 2)
    return missed(m, exp, "the softmax's intermediates have other users");
  for (Operation *user : expUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && g.getNumDpsInputs() == 1)
      c.sum = g;
    else if (g && g.getNumDpsInputs() == 2)
      c.div = g;
  }
  linalg::GenericOp sum = c.sum, div = c.div;
  if (!sum || !div || !hasForm(sum, 1, {{0, 1, 2}, {0, 1}}, "ppr") ||
      fillValue(sum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(sum), argOf(sum, 0), argOf(sum, 1)) ||
      !hasForm(div, 2, {{0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") ||
      source(div.getDpsInputs()[0]) != exp->getResult(0) ||
      source(div.getDpsInputs()[1]) != sum->getResult(0) ||
      !ordered<arith::DivFOp>(yielded(div), argOf(div, 0), argOf(div, 1)))
    return missed(m, exp, "the softmax is not exp / rowsum(exp)");
  llvm::SetVector<Operation *> sumUsers;
  usersOf(sum->getResult(0), sumUsers, c.casts);
  usersOf(div->getResult(0), c.probUsers, c.casts);
  if (sumUsers.size() != 1)
    return missed(m, sum, "the softmax's row sum has other users");
  return success();
}

/// P V, and the backward's uses of P (dV, the row dot, dS).
LogicalResult matchProbabilityUsers(GeneratorChain &c, Attention &a, Miss &m) {
  Value p = c.div->getResult(0);
  for (Operation *user : c.probUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (!g)
      return missed(m, user, "the probabilities have users outside the chain");
    if (isContraction(g, {0, 1, 3}, {0, 3, 2}) &&
        source(g.getDpsInputs()[0]) == p && !c.pv)
      c.pv = g;
    else if (isContraction(g, {0, 3, 1}, {0, 3, 2}) &&
             source(g.getDpsInputs()[0]) == p && !c.dv)
      c.dv = g;
    else if (hasForm(g, 2, {{0, 1, 2}, {0, 1, 2}, {0, 1}}, "ppr") &&
             isMultiplyAccumulate(g) && !c.rowdot)
      c.rowdot = g;
    else if (hasForm(g, 3, {{0, 1, 2}, {0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") &&
             !c.ds)
      c.ds = g;
    else
      return missed(m, g, "the probabilities have users outside the chain");
  }
  if (!c.pv)
    return missed(m, c.div, "no P V product of the probabilities");
  a.v = c.pv.getDpsInputs()[1];
  a.out = c.pv->getResult(0);
  a.forwardAt = c.pv;
  for (Operation *op :
       {c.s.getOperation(), c.max.getOperation(), c.exp.getOperation(),
        c.sum.getOperation(), c.div.getOperation(), c.pv.getOperation()})
    a.chain.insert(op);
  return success();
}

/// rowdot = sum(dP * P) with dP = dO V^T, dS = P (dP - rowdot) scale.
LogicalResult matchScoreGradient(GeneratorChain &c, Attention &a, Miss &m) {
  if (c.probUsers.size() != 4 || !c.dv || !c.rowdot || !c.ds)
    return missed(m, c.div, "the probabilities' users are not the backward's");
  a.dout = c.dv.getDpsInputs()[1];
  Value p = c.div->getResult(0);
  linalg::GenericOp rowdot = c.rowdot, ds = c.ds;
  unsigned rowP = source(rowdot.getDpsInputs()[0]) == p ? 0 : 1;
  Value dpValue = source(rowdot.getDpsInputs()[1 - rowP]);
  c.dp = dpValue.getDefiningOp<linalg::GenericOp>();
  if (source(rowdot.getDpsInputs()[rowP]) != p || !c.dp ||
      !isContraction(c.dp, {0, 1, 3}, {0, 2, 3}) ||
      c.dp.getDpsInputs()[0] != a.dout || c.dp.getDpsInputs()[1] != a.v)
    return missed(m, rowdot, "the backward's dP is not dO V^T");
  int pIdx = -1, dpIdx = -1, rdIdx = -1;
  for (unsigned i = 0; i < 3; ++i) {
    Value in = source(ds.getDpsInputs()[i]);
    if (in == p)
      pIdx = i;
    else if (in == c.dp->getResult(0))
      dpIdx = i;
    else if (in == rowdot->getResult(0))
      rdIdx = i;
  }
  std::optional<double> backScale;
  if (pIdx < 0 || dpIdx < 0 || rdIdx < 0 || dpIdx == 2 || pIdx == 2 ||
      rdIdx != 2 ||
      !commutes<arith::MulFOp>(
          yielded(ds),
          [&](Value x) {
            return commutes<arith::MulFOp>(x, argOf(ds, pIdx), [&](Value d) {
              return ordered<arith::SubFOp>(d, argOf(ds, dpIdx),
                                            argOf(ds, rdIdx));
            });
          },
          [&](Value k) { return (backScale = constantFloat(k)).has_value(); }))
    return missed(m, ds,
                  "the backward's dS is not P (dP - rowsum(dP P)) scale");
  if (!sameScale(*backScale, a.scale))
    return missed(m, ds, "the backward's scale differs from the forward's");
  return success();
}

/// dQ = dS K and dK = dS^T Q, the intermediates used by the chain alone.
LogicalResult matchInputGradients(GeneratorChain &c, Attention &a, Miss &m) {
  linalg::GenericOp ds = c.ds;
  llvm::SetVector<Operation *> dpUsers, rowdotUsers, dsUsers;
  usersOf(c.dp->getResult(0), dpUsers, c.casts);
  usersOf(c.rowdot->getResult(0), rowdotUsers, c.casts);
  usersOf(ds->getResult(0), dsUsers, c.casts);
  if (dpUsers.size() != 2 || !dpUsers.contains(c.rowdot) ||
      !dpUsers.contains(ds) || rowdotUsers.size() != 1 || dsUsers.size() != 2)
    return missed(m, ds, "the backward's intermediates have other users");
  for (Operation *user : dsUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && isContraction(g, {0, 1, 3}, {0, 3, 2}) &&
        source(g.getDpsInputs()[0]) == ds->getResult(0) &&
        g.getDpsInputs()[1] == a.k)
      c.dq = g;
    else if (g && isContraction(g, {0, 3, 1}, {0, 3, 2}) &&
             source(g.getDpsInputs()[0]) == ds->getResult(0) &&
             g.getDpsInputs()[1] == a.q)
      c.dk = g;
  }
  if (!c.dq || !c.dk)
    return missed(m, ds, "the backward's dQ, dK are not dS K, dS^T Q");
  return success();
}

/// The backward's values and insertion point, once every stage matched.
LogicalResult finishBackward(GeneratorChain &c, Attention &a, Miss &m) {
  if (failed(checkOperands(a, m, c.pv)))
    return failure();
  a.dq = c.dq->getResult(0);
  a.dk = c.dk->getResult(0);
  a.dv = c.dv->getResult(0);
  a.backwardAt =
      c.dp->isBeforeInBlock(c.dv) ? c.dp.getOperation() : c.dv.getOperation();
  if (!c.pv->isBeforeInBlock(a.backwardAt))
    return missed(m, c.pv, "the backward starts before the forward's P V");
  for (Operation *op :
       {c.dp.getOperation(), c.dv.getOperation(), c.rowdot.getOperation(),
        c.ds.getOperation(), c.dq.getOperation(), c.dk.getOperation()})
    a.chain.insert(op);
  a.chain.insert(c.casts.begin(), c.casts.end());
  return success();
}

} // namespace

FailureOr<Attention> attention::matchGenerator(linalg::GenericOp s, Miss &m) {
  if (!isContraction(s, {0, 1, 3}, {0, 2, 3}))
    return failure();
  Attention a;
  a.q = s.getDpsInputs()[0];
  a.k = s.getDpsInputs()[1];
  GeneratorChain c;
  c.s = s;
  bool maxCausal;
  if (failed(matchRowMax(c, maxCausal)) ||
      failed(matchExponential(c, a, m, maxCausal)) ||
      failed(matchQuotient(c, m)) || failed(matchProbabilityUsers(c, a, m)))
    return failure();
  if (c.probUsers.size() == 1) {
    // A forward alone (no backward reads P).
    if (failed(checkOperands(a, m, c.pv)))
      return failure();
    a.chain.insert(c.casts.begin(), c.casts.end());
    return a;
  }
  if (failed(matchScoreGradient(c, a, m)) ||
      failed(matchInputGradients(c, a, m)) || failed(finishBackward(c, a, m)))
    return failure();
  return a;
}

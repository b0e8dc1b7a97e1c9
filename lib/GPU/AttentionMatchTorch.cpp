//===- AttentionMatchTorch.cpp - PyTorch's attention chain ----------------===//
//
// scaled_dot_product_attention as the PyTorch frontend exports it (math
// backend): Q and K^T each scaled by sqrt(scale), collapsed to [batch *
// heads] for a batch matmul, an optional additive mask, torch's softmax
// (with its unused argmax and the _safe_softmax guard), the product with V,
// and the backward of the same on collapses (dV = P^T dO, dP = dO V^T,
// dS = P dP - P rowsum(P dP), dQ = dS K c, dK^T = Q^T dS c). Matched stage
// by stage from the scores product; the masks are in
// AttentionTorchMasks.cpp.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::attention;
using namespace mlir::fsdp::chain;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Whether `v` has exactly the users `users` (through tensor roundings,
/// collected in `casts`).
bool usedOnlyBy(Value v, ArrayRef<Operation *> users,
                llvm::SetVector<Operation *> &casts) {
  llvm::SetVector<Operation *> actual;
  usersOf(v, actual, casts);
  if (actual.size() != users.size())
    return false;
  return llvm::all_of(users, [&](Operation *u) { return actual.contains(u); });
}

bool isBatchCollapse(ArrayRef<ReassociationIndices> r) {
  return r.size() == 3 && r[0] == ReassociationIndices{0, 1} &&
         r[1] == ReassociationIndices{2} && r[2] == ReassociationIndices{3};
}

/// `v` = collapse_shape(x) of (batch, heads): x, else null.
tensor::CollapseShapeOp batchCollapse(Value v) {
  auto c = v.getDefiningOp<tensor::CollapseShapeOp>();
  if (!c || !isBatchCollapse(c.getReassociationIndices()))
    return {};
  return c;
}

/// The only user of `v` through tensor roundings (collected in `casts`),
/// else null.
Operation *soleUser(Value v, llvm::SetVector<Operation *> &casts) {
  llvm::SetVector<Operation *> users, seen;
  usersOf(v, users, seen);
  if (users.size() != 1)
    return nullptr;
  casts.insert(seen.begin(), seen.end());
  return users.front();
}

/// The user of `v` that expands (batch * heads) back, if it is the only
/// user (through tensor roundings, collected in `casts`).
tensor::ExpandShapeOp batchExpand(Value v,
                                  llvm::SetVector<Operation *> &casts) {
  auto e = dyn_cast_or_null<tensor::ExpandShapeOp>(soleUser(v, casts));
  if (!e || !isBatchCollapse(e.getReassociationIndices()))
    return {};
  return e;
}

/// A batch matmul without transposed operands, from a zero fill:
/// linalg.batch_matmul, or the generic fsdp-autocast writes for it (16-bit
/// operands widened in the body, an f32 result).
bool isPlainBatchMatmul(Operation *op) {
  if (auto g = dyn_cast_or_null<linalg::GenericOp>(op))
    return isContraction(g, {0, 1, 3}, {0, 3, 2});
  auto bmm = dyn_cast_or_null<linalg::BatchMatmulOp>(op);
  return bmm && bmm.hasPureTensorSemantics() &&
         bmm.getIndexingMapsArray() ==
             linalg::BatchMatmulOp::getDefaultIndexingMaps(bmm.getContext()) &&
         fillValue(bmm.getDpsInits()[0]) == 0.0;
}

/// `v` = x * c elementwise (rank 4, c a constant): x and c.
std::optional<std::pair<Value, double>> scaledBy(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || !hasForm(g, 1, {{0, 1, 2, 3}, {0, 1, 2, 3}}, "pppp"))
    return std::nullopt;
  std::optional<double> c;
  if (!commutes<arith::MulFOp>(
          yielded(g), [&](Value x) { return isArg(x, g, 0); },
          [&](Value x) { return (c = constantFloat(x)).has_value(); }))
    return std::nullopt;
  return std::make_pair(g.getDpsInputs()[0], *c);
}

/// A transpose of the last two dimensions of a rank-3 tensor.
bool isSwapLast(Operation *op) {
  auto t = dyn_cast_or_null<linalg::TransposeOp>(op);
  return t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1};
}

/// The user of `v` that transposes its last two dimensions, and `v`'s
/// other users (through tensor roundings, collected in `casts`).
linalg::TransposeOp swapUser(Value v, SmallVectorImpl<Operation *> &others,
                             llvm::SetVector<Operation *> &casts) {
  linalg::TransposeOp found;
  llvm::SetVector<Operation *> users;
  usersOf(v, users, casts);
  for (Operation *u : users) {
    if (isSwapLast(u) && !found)
      found = cast<linalg::TransposeOp>(u);
    else
      others.push_back(u);
  }
  return found;
}

/// The batch matmul that is the only user of `v` (through tensor roundings,
/// collected in `casts`), else null.
linalg::LinalgOp bmmUser(Value v, llvm::SetVector<Operation *> &casts) {
  Operation *user = v ? soleUser(v, casts) : nullptr;
  return isPlainBatchMatmul(user) ? cast<linalg::LinalgOp>(user)
                                  : linalg::LinalgOp();
}

//===----------------------------------------------------------------------===//
// The chain, stage by stage
//===----------------------------------------------------------------------===//

/// The loop dimensions hasForm reads: every loop, the rows, the rows with a
/// unit last dimension.
const SmallVector<unsigned, 4> kId = {0, 1, 2, 3}, kRowUnit = {0, 1, 2, kUnit};

/// The ops of the chain found so far.
struct TorchChain {
  // The scores: s = (qc * c) (kc * c) expanded to s4, plus the mask.
  linalg::LinalgOp s;
  tensor::CollapseShapeOp qc, kc;
  std::optional<std::pair<Value, double>> qs, ks;
  tensor::ExpandShapeOp s4;
  Value scores;
  // The softmax, P its result.
  linalg::GenericOp max, sub, isNegInf, exp, sum, div;
  tensor::ExpandShapeOp maxExpand;
  Value p;
  // P V on collapses; P's other users (the backward).
  tensor::CollapseShapeOp pc, vc;
  linalg::TransposeOp pcT;
  linalg::LinalgOp pv;
  SmallVector<Operation *> pBackward;
  // The backward.
  linalg::LinalgOp dv, dp;
  linalg::TransposeOp vcT;
  tensor::ExpandShapeOp dp4;
  linalg::GenericOp pdp, prs, rs, ds;
  tensor::CollapseShapeOp dsc;
  linalg::TransposeOp qcT, kcT;
  linalg::LinalgOp dkT, dq;
  tensor::ExpandShapeOp dq4, dkT4;
  linalg::GenericOp dqScale, dkScale;
  llvm::SetVector<Operation *> casts;
};

/// s = batch_matmul(q * c, k^T * c) on [batch * heads] collapses, expanded
/// back.
LogicalResult matchScores(TorchChain &c) {
  if (!isPlainBatchMatmul(c.s))
    return failure();
  c.qc = batchCollapse(source(c.s.getDpsInputs()[0]));
  c.kc = batchCollapse(source(c.s.getDpsInputs()[1]));
  if (!c.qc || !c.kc)
    return failure();
  c.qs = scaledBy(c.qc.getSrc());
  c.ks = scaledBy(c.kc.getSrc());
  c.s4 = batchExpand(c.s->getResult(0), c.casts);
  if (!c.qs || !c.ks || !c.s4)
    return failure();
  c.scores = c.s4.getResult();
  return success();
}

/// An additive mask on the scores, if there is one: the causal flag for a
/// causal mask, else the mask and its strides.
LogicalResult matchAdditiveMask(TorchChain &c, Attention &a, Miss &m) {
  linalg::GenericOp add;
  if (c.scores.hasOneUse())
    add = dyn_cast<linalg::GenericOp>(*c.scores.getUsers().begin());
  if (!add || add.getNumDpsInputs() != 2 || add.getNumDpsInits() != 1 ||
      add.getDpsInputs()[0] != c.scores ||
      !llvm::all_of(add.getIteratorTypesArray(),
                    [](utils::IteratorType t) {
                      return t == utils::IteratorType::parallel;
                    }) ||
      !add.getIndexingMapsArray()[0].isIdentity() ||
      !add.getIndexingMapsArray()[2].isIdentity() ||
      !commutes<arith::AddFOp>(yielded(add), argOf(add, 0), argOf(add, 1)))
    return success(); // no mask
  Value mask = add.getDpsInputs()[1];
  auto maskType = dyn_cast<RankedTensorType>(mask.getType());
  FailureOr<std::array<int64_t, 4>> strides = failure();
  if (maskType)
    strides = maskStrides(add.getIndexingMapsArray()[1], maskType);
  if (failed(strides))
    return missed(m, add, "the additive mask is not read in loop order");
  if ((maskType.getRank() == 2 && isCausalMask(mask) &&
       maskType.getDimSize(0) == maskType.getDimSize(1)) ||
      isBroadcastCausalMask(mask)) {
    a.causal = true;
  } else {
    a.mask = mask;
    a.maskStrides = *strides;
  }
  a.chain.insert(add);
  c.scores = add->getResult(0);
  return success();
}

/// The row maximum (with torch's unused argmax) and s - max.
LogicalResult matchRowMax(TorchChain &c) {
  for (Operation *u : c.scores.getUsers()) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && g.getNumDpsInputs() == 1 && g.getNumDpsInits() >= 1 &&
        g.getIteratorTypesArray().back() == utils::IteratorType::reduction &&
        !c.max)
      c.max = g;
    else if (g && g.getNumDpsInputs() == 2 && !c.sub)
      c.sub = g;
    else if (g && g.getNumDpsInputs() == 1 && !c.isNegInf)
      c.isNegInf = g;
    else
      return failure();
  }
  linalg::GenericOp max = c.max, sub = c.sub;
  if (!max || !sub)
    return failure();
  if (max.getNumDpsInits() > 2 ||
      fillValue(max.getDpsInits()[0]) != -INFINITY ||
      max.getIndexingMapsArray()[0] !=
          AffineMap::getMultiDimIdentityMap(4, max.getContext()) ||
      !isMaximum(max.getBody()->getTerminator()->getOperand(0), argOf(max, 0),
                 argOf(max, 1)) ||
      (max.getNumDpsInits() == 2 && !max->getResult(1).use_empty()))
    return failure();
  if (max->getResult(0).hasOneUse())
    c.maxExpand =
        dyn_cast<tensor::ExpandShapeOp>(*max->getResult(0).getUsers().begin());
  if (!c.maxExpand || !hasForm(sub, 2, {kId, kRowUnit, kId}, "pppp") ||
      sub.getDpsInputs()[0] != c.scores ||
      sub.getDpsInputs()[1] != c.maxExpand.getResult() ||
      !ordered<arith::SubFOp>(yielded(sub), argOf(sub, 0), argOf(sub, 1)))
    return failure();
  return success();
}

/// exp(s - max), its row sum and the quotient.
LogicalResult matchSoftmax(TorchChain &c, Attention &a, Miss &m) {
  if (failed(matchRowMax(c)))
    return failure();
  if (c.sub->getResult(0).hasOneUse())
    c.exp =
        dyn_cast<linalg::GenericOp>(*c.sub->getResult(0).getUsers().begin());
  linalg::GenericOp exp = c.exp;
  if (!exp || !hasForm(exp, 1, {kId, kId}, "pppp"))
    return failure();
  auto expOp = yielded(exp).getDefiningOp<math::ExpOp>();
  if (!expOp || !isArg(expOp.getOperand(), exp, 0))
    return failure();
  for (Operation *u : exp->getResult(0).getUsers()) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && g.getNumDpsInputs() == 1 && !c.sum)
      c.sum = g;
    else if (g && g.getNumDpsInputs() == 2 && !c.div)
      c.div = g;
    else
      return missed(m, exp, "the softmax's intermediates have other users");
  }
  linalg::GenericOp sum = c.sum, div = c.div;
  if (!sum || !div || !hasForm(sum, 1, {kId, kRowUnit}, "pppr") ||
      fillValue(sum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(sum), argOf(sum, 0), argOf(sum, 1)) ||
      !hasForm(div, 2, {kId, kRowUnit, kId}, "pppp") ||
      div.getDpsInputs()[0] != exp->getResult(0) ||
      div.getDpsInputs()[1] != sum->getResult(0) ||
      !ordered<arith::DivFOp>(yielded(div), argOf(div, 0), argOf(div, 1)) ||
      !sum->getResult(0).hasOneUse())
    return missed(m, exp, "the softmax is not exp / rowsum(exp)");
  for (Operation *op :
       {c.s.getOperation(), c.s4.getOperation(), c.max.getOperation(),
        c.maxExpand.getOperation(), c.sub.getOperation(), exp.getOperation(),
        sum.getOperation(), div.getOperation(), c.qc.getOperation(),
        c.kc.getOperation()})
    a.chain.insert(op);
  a.chain.insert(c.qc.getSrc().getDefiningOp());
  a.chain.insert(c.kc.getSrc().getDefiningOp());
  c.p = div->getResult(0);
  return success();
}

/// _safe_softmax: rows whose scores are all -inf give 0.
LogicalResult matchSafeSoftmaxGuard(TorchChain &c, Attention &a, Miss &m) {
  linalg::GenericOp isNegInf = c.isNegInf;
  if (!isNegInf)
    return success();
  linalg::GenericOp all, guard;
  if (isNegInf->getResult(0).hasOneUse())
    all =
        dyn_cast<linalg::GenericOp>(*isNegInf->getResult(0).getUsers().begin());
  if (c.p.hasOneUse())
    guard = dyn_cast<linalg::GenericOp>(*c.p.getUsers().begin());
  auto cmp = yielded(isNegInf).getDefiningOp<arith::CmpFOp>();
  if (!all || !guard || !cmp || !hasForm(isNegInf, 1, {kId, kId}, "pppp") ||
      cmp.getPredicate() != arith::CmpFPredicate::OEQ ||
      !isArg(cmp.getLhs(), isNegInf, 0) ||
      constantFloat(cmp.getRhs()) != -INFINITY ||
      !hasForm(all, 1, {kId, kRowUnit}, "pppr") ||
      !commutes<arith::AndIOp>(yielded(all), argOf(all, 0), argOf(all, 1)) ||
      !hasForm(guard, 3, {kRowUnit, kId, kId, kId}, "pppp") ||
      guard.getDpsInputs()[0] != all->getResult(0) ||
      !isConstantSplat(guard.getDpsInputs()[1], 0.0) ||
      guard.getDpsInputs()[2] != c.p)
    return missed(m, c.div, "the softmax's guard is not torch's _safe_softmax");
  auto sel = yielded(guard).getDefiningOp<arith::SelectOp>();
  if (!sel || !isArg(sel.getCondition(), guard, 0) ||
      !isArg(sel.getTrueValue(), guard, 1) ||
      !isArg(sel.getFalseValue(), guard, 2))
    return missed(m, guard, "the softmax's guard is not torch's _safe_softmax");
  for (Operation *op :
       {isNegInf.getOperation(), all.getOperation(), guard.getOperation()})
    a.chain.insert(op);
  c.p = guard->getResult(0);
  return success();
}

/// P V on collapses, expanded back; P's other users.
LogicalResult matchOutputProduct(TorchChain &c, Attention &a, Miss &m) {
  for (Operation *u : c.p.getUsers()) {
    auto k = dyn_cast<tensor::CollapseShapeOp>(u);
    if (k && isBatchCollapse(k.getReassociationIndices()) && !c.pc)
      c.pc = k;
    else
      c.pBackward.push_back(u);
  }
  if (!c.pc)
    return missed(m, c.div, "no P V product of the probabilities");
  SmallVector<Operation *> pcOthers;
  c.pcT = swapUser(c.pc.getResult(), pcOthers, c.casts);
  if (pcOthers.size() != 1 || !isPlainBatchMatmul(pcOthers[0]) ||
      source(pcOthers[0]->getOperand(0)) != c.pc.getResult())
    return missed(m, c.pc, "no P V product of the probabilities");
  c.pv = cast<linalg::LinalgOp>(pcOthers[0]);
  c.vc = batchCollapse(source(c.pv.getDpsInputs()[1]));
  if (!c.vc)
    return missed(m, c.pv, "V is not a collapse of [batch, heads, T, d]");
  a.v = c.vc.getSrc();
  a.out = c.pv->getResult(0);
  a.outForm = Attention::Form::Collapsed;
  a.forwardAt = c.pv;
  a.chain.insert(c.pc);
  a.chain.insert(c.pv);
  a.chain.insert(c.vc);
  return success();
}

/// dV = P^T dO and dP = dO V^T, dP expanded back.
LogicalResult matchBackwardProducts(TorchChain &c, Attention &a, Miss &m) {
  c.dv = c.pcT ? bmmUser(c.pcT->getResult(0), c.casts) : nullptr;
  if (!c.dv || source(c.dv.getDpsInputs()[0]) != c.pcT->getResult(0))
    return missed(m, c.pc, "the backward's dV is not P^T dO");
  Value doc4 = source(c.dv.getDpsInputs()[1]);
  tensor::CollapseShapeOp doc = batchCollapse(doc4);
  SmallVector<Operation *> vcOthers;
  c.vcT = swapUser(c.vc.getResult(), vcOthers, c.casts);
  c.dp = c.vcT ? bmmUser(c.vcT->getResult(0), c.casts) : nullptr;
  if (!doc || !c.dp || vcOthers.size() != 1 ||
      source(c.dp.getDpsInputs()[0]) != doc4 ||
      source(c.dp.getDpsInputs()[1]) != c.vcT->getResult(0))
    return missed(m, c.pv, "the backward's dP is not dO V^T");
  a.dout = doc.getSrc();
  c.dp4 = batchExpand(c.dp->getResult(0), c.casts);
  if (!c.dp4 || c.pBackward.size() != 2)
    return missed(m, c.dp, "the backward's dS is not P dP - P rowsum(P dP)");
  return success();
}

/// pdp = dP * P, rs = rowsum(pdp), prs = P * rs, ds = pdp - prs, collapsed.
LogicalResult matchScoreGradient(TorchChain &c, Miss &m) {
  for (Operation *u : c.pBackward) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && hasForm(g, 2, {kId, kId, kId}, "pppp") && !c.pdp)
      c.pdp = g;
    else if (g && hasForm(g, 2, {kId, kRowUnit, kId}, "pppp") && !c.prs)
      c.prs = g;
  }
  linalg::GenericOp pdp = c.pdp, prs = c.prs;
  const char *notDs = "the backward's dS is not P dP - P rowsum(P dP)";
  if (!pdp || !prs ||
      !commutes<arith::MulFOp>(yielded(pdp), argOf(pdp, 0), argOf(pdp, 1)) ||
      !llvm::any_of(
          pdp.getDpsInputs(),
          [&](Value in) { return source(in) == c.dp4.getResult(); }) ||
      prs.getDpsInputs()[0] != c.p ||
      !commutes<arith::MulFOp>(yielded(prs), argOf(prs, 0), argOf(prs, 1)))
    return missed(m, c.dp, notDs);
  linalg::GenericOp rs = c.rs =
      prs.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
  for (Operation *u : pdp->getResult(0).getUsers())
    if (u != rs.getOperation())
      c.ds = dyn_cast<linalg::GenericOp>(u);
  linalg::GenericOp ds = c.ds;
  if (!rs || !hasForm(rs, 1, {kId, kRowUnit}, "pppr") ||
      rs.getDpsInputs()[0] != pdp->getResult(0) ||
      fillValue(rs.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(rs), argOf(rs, 0), argOf(rs, 1)) ||
      !rs->getResult(0).hasOneUse() || !ds ||
      !usedOnlyBy(pdp->getResult(0), {rs, ds}, c.casts) ||
      !hasForm(ds, 2, {kId, kId, kId}, "pppp") ||
      ds.getDpsInputs()[0] != pdp->getResult(0) ||
      ds.getDpsInputs()[1] != prs->getResult(0) ||
      !ordered<arith::SubFOp>(yielded(ds), argOf(ds, 0), argOf(ds, 1)) ||
      !prs->getResult(0).hasOneUse())
    return missed(m, c.dp, notDs);
  for (Operation *u : ds->getResult(0).getUsers())
    if (auto k = dyn_cast<tensor::CollapseShapeOp>(u);
        k && isBatchCollapse(k.getReassociationIndices()))
      c.dsc = k;
  if (!c.dsc || !ds->getResult(0).hasOneUse())
    return missed(m, ds, "the backward's dS has other users");
  return success();
}

/// dK^T = (Qc)^T dS, dQ = dS (Kc)^T, each then times c.
LogicalResult matchInputGradients(TorchChain &c, Miss &m) {
  SmallVector<Operation *> qcOthers, kcOthers;
  c.qcT = swapUser(c.qc.getResult(), qcOthers, c.casts);
  c.kcT = swapUser(c.kc.getResult(), kcOthers, c.casts);
  c.dkT = c.qcT ? bmmUser(c.qcT->getResult(0), c.casts) : nullptr;
  c.dq = c.kcT ? bmmUser(c.kcT->getResult(0), c.casts) : nullptr;
  Value dsc = c.dsc.getResult();
  if (!c.dkT || !c.dq || qcOthers.size() != 1 || kcOthers.size() != 1 ||
      source(c.dkT.getDpsInputs()[0]) != c.qcT->getResult(0) ||
      source(c.dkT.getDpsInputs()[1]) != dsc ||
      source(c.dq.getDpsInputs()[0]) != dsc ||
      source(c.dq.getDpsInputs()[1]) != c.kcT->getResult(0) ||
      !usedOnlyBy(dsc, {c.dkT, c.dq}, c.casts))
    return missed(m, c.ds, "the backward's dQ, dK are not dS K, Q^T dS");
  c.dq4 = batchExpand(c.dq->getResult(0), c.casts);
  c.dkT4 = batchExpand(c.dkT->getResult(0), c.casts);
  std::optional<std::pair<Value, double>> dqs, dks;
  if (c.dq4) {
    c.dqScale = dyn_cast_or_null<linalg::GenericOp>(soleUser(c.dq4, c.casts));
    dqs = c.dqScale ? scaledBy(c.dqScale->getResult(0)) : std::nullopt;
  }
  if (c.dkT4) {
    c.dkScale = dyn_cast_or_null<linalg::GenericOp>(soleUser(c.dkT4, c.casts));
    dks = c.dkScale ? scaledBy(c.dkScale->getResult(0)) : std::nullopt;
  }
  if (!dqs || !dks || !sameScale(dqs->second, c.qs->second) ||
      !sameScale(dks->second, c.ks->second))
    return missed(m, c.ds, "the backward's dQ, dK are not scaled as Q and K");
  return success();
}

/// The backward's values and insertion point, once every stage matched.
LogicalResult finishBackward(TorchChain &c, Attention &a, Miss &m) {
  if (failed(checkOperands(a, m, c.pv)))
    return failure();
  a.dq = c.dqScale->getResult(0);
  a.dk = c.dkScale->getResult(0);
  a.dkForm = Attention::Form::Transposed;
  a.dv = c.dv->getResult(0);
  a.dvForm = Attention::Form::Collapsed;
  a.backwardAt =
      c.dv->isBeforeInBlock(c.dp) ? c.dv.getOperation() : c.dp.getOperation();
  if (c.pcT->isBeforeInBlock(a.backwardAt))
    a.backwardAt = c.pcT;
  if (c.vcT->isBeforeInBlock(a.backwardAt))
    a.backwardAt = c.vcT;
  Operation *doutDef = a.dout.getDefiningOp();
  if (!c.pv->isBeforeInBlock(a.backwardAt) ||
      (doutDef && (doutDef->getBlock() != c.pv->getBlock() ||
                   !doutDef->isBeforeInBlock(a.backwardAt))))
    return missed(m, c.pv, "the backward starts before the forward's P V");
  for (Operation *op :
       {c.pcT.getOperation(), c.dv.getOperation(), c.vcT.getOperation(),
        c.dp.getOperation(), c.dp4.getOperation(), c.pdp.getOperation(),
        c.rs.getOperation(), c.prs.getOperation(), c.ds.getOperation(),
        c.dsc.getOperation(), c.qcT.getOperation(), c.kcT.getOperation(),
        c.dkT.getOperation(), c.dq.getOperation(), c.dq4.getOperation(),
        c.dkT4.getOperation(), c.dqScale.getOperation(),
        c.dkScale.getOperation()})
    a.chain.insert(op);
  a.chain.insert(c.casts.begin(), c.casts.end());
  return success();
}

} // namespace

FailureOr<Attention> attention::matchTorch(linalg::LinalgOp s, Miss &m) {
  TorchChain c;
  c.s = s;
  if (failed(matchScores(c)))
    return failure();
  Attention a;
  a.q = c.qs->first;
  a.kT = c.ks->first;
  a.scale = c.qs->second * c.ks->second;
  if (failed(matchAdditiveMask(c, a, m)) || failed(matchSoftmax(c, a, m)) ||
      failed(matchSafeSoftmaxGuard(c, a, m)) ||
      failed(matchOutputProduct(c, a, m)))
    return failure();
  if (c.pBackward.empty() && !c.pcT) {
    if (failed(checkOperands(a, m, c.pv)))
      return failure();
    a.chain.insert(c.casts.begin(), c.casts.end());
    return a;
  }
  // The backward: dV = P^T dO, dP = dO V^T, dS = P dP - P rowsum(P dP),
  // dQ = dS K * c, dK^T = Q^T dS * c.
  if (failed(matchBackwardProducts(c, a, m)) ||
      failed(matchScoreGradient(c, m)) || failed(matchInputGradients(c, m)) ||
      failed(finishBackward(c, a, m)))
    return failure();
  return a;
}

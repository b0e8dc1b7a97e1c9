//===- GpuFuseAttention.cpp - attention chains to the fused kernels -------===//
//
// Recognizes attention as the frontends export it (scores, a softmax written
// out, the product with V, and the backward of the same) on tensors, before
// the segments are outlined, and replaces forward and backward by the
// runtime's FlashAttention kernels (runtime/cuda/attention_kernels.cu). The
// forward's row log-sum-exp replaces the probabilities between forward and
// backward: nothing of size T x T is left. Each kernel call sits in a
// private function on tensors (`__fsdp_attention_{fwd,bwd}_<n>`, marked
// `fsdp.segment` so that fsdp-outline-segments leaves it alone) whose body
// takes its operands' buffers read-only and returns freshly allocated
// results: one-shot bufferization and the deallocation passes then treat the
// call like any other producer, and the operands stay alive across it.
//
// A chain is replaced only when it matches exactly (every intermediate used
// by the chain alone, constants checked); anything else stays as it is.
//
//===----------------------------------------------------------------------===//

#include "ChainMatching.h"
#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUFUSEATTENTION
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::chain;

namespace {

//===----------------------------------------------------------------------===//
// Matching helpers
//===----------------------------------------------------------------------===//

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

bool sameScale(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::fabs(a);
}

//===----------------------------------------------------------------------===//
// A recognized chain
//===----------------------------------------------------------------------===//

struct Attention {
  /// Contiguous [batch, heads, T, d] tensors, or [batch, T, d] with one
  /// head; the additive mask (null: none) with its element strides.
  Value q, k, v, mask;
  std::array<int64_t, 4> maskStrides = {0, 0, 0, 0};
  int64_t batch = 0, heads = 1, tq = 0, tk = 0, dim = 0;
  bool causal = false;
  double scale = 0;
  Type element;
  /// The value O replaces, and the forward call's insertion point.
  Value out;
  Operation *forwardAt = nullptr;
  /// The backward (null dout: a forward alone): dO, the values dQ, dK and
  /// dV replace, and the backward call's insertion point.
  Value dout, dq, dk, dv;
  Operation *backwardAt = nullptr;
  /// Every op the calls replace.
  llvm::SetVector<Operation *> chain;
  /// K given as [batch, heads, d, T] (torch's `k.transpose(-2, -1)`): the
  /// call takes its transpose.
  Value kT;
  /// How the replaced values hold the kernels' [batch, heads, T, d]
  /// results: as they are, with (batch, heads) collapsed, or transposed
  /// to [batch, heads, d, T].
  enum class Form { Same, Collapsed, Transposed };
  Form outForm = Form::Same, dkForm = Form::Same, dvForm = Form::Same;
};

/// Why a chain that looked like attention stays unfused; empty: it is not
/// attention at all.
struct Miss {
  Operation *at = nullptr;
  std::string why;
};

FailureOr<Attention> miss(Miss &m, Operation *at, const Twine &why) {
  m.at = at;
  m.why = why.str();
  return failure();
}

LogicalResult missed(Miss &m, Operation *at, const Twine &why) {
  m.at = at;
  m.why = why.str();
  return failure();
}

/// Checks common to every chain: the operand types and the head dim.
LogicalResult checkOperands(Attention &a, Miss &m, Operation *at) {
  auto qt = dyn_cast<RankedTensorType>(a.q.getType());
  RankedTensorType kt;
  if (a.kT) {
    auto t = dyn_cast<RankedTensorType>(a.kT.getType());
    if (t && t.getRank() == 4)
      kt = RankedTensorType::get(
          {t.getDimSize(0), t.getDimSize(1), t.getDimSize(3), t.getDimSize(2)},
          t.getElementType());
  } else {
    kt = dyn_cast<RankedTensorType>(a.k.getType());
  }
  auto vt = dyn_cast<RankedTensorType>(a.v.getType());
  if (!qt || !kt || !vt || !qt.hasStaticShape() || !kt.hasStaticShape() ||
      !vt.hasStaticShape())
    return missed(m, at, "operands without a static shape");
  Type e = qt.getElementType();
  if (!(e.isF32() || e.isBF16()) || kt.getElementType() != e ||
      vt.getElementType() != e ||
      (a.dout && cast<ShapedType>(a.dout.getType()).getElementType() != e))
    return missed(m, at, "Q, K, V (and dO) are not all f32 or all bf16");
  a.element = e;
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape();
  unsigned rank = qs.size();
  if ((rank != 3 && rank != 4) || ks.size() != rank || vt.getShape() != ks ||
      qs.drop_back(2) != ks.drop_back(2) || qs.back() != ks.back() ||
      (a.dout && cast<ShapedType>(a.dout.getType()).getShape() != qs))
    return missed(m, at, "Q, K, V shapes do not match");
  a.batch = qs[0];
  a.heads = rank == 4 ? qs[1] : 1;
  a.tq = qs[rank - 2];
  a.tk = ks[rank - 2];
  a.dim = qs.back();
  if (!llvm::is_contained({16, 32, 64, 96, 128}, a.dim))
    return missed(m, at,
                  "head dim " + Twine(a.dim) +
                      " has no fused kernel (16, 32, 64, 96, 128)");
  if (!(a.scale > 0) || !std::isfinite(a.scale))
    return missed(m, at,
                  "the softmax scale is not a positive constant (" +
                      llvm::formatv("{0}", a.scale) + ")");
  return success();
}

//===----------------------------------------------------------------------===//
// The generator's attention (fsdp_mlir.dev.gen transformer --attention)
//===----------------------------------------------------------------------===//

/// From the scores contraction `s` = Q K^T ([batch, seq, dim] operands).
FailureOr<Attention> matchGenerator(linalg::GenericOp s, Miss &m) {
  if (!isContraction(s, {0, 1, 3}, {0, 2, 3}))
    return failure();
  Attention a;
  a.q = s.getDpsInputs()[0];
  a.k = s.getDpsInputs()[1];
  llvm::SetVector<Operation *> casts;
  llvm::SetVector<Operation *> sUsers;
  usersOf(s->getResult(0), sUsers, casts);
  // The row maximum and the exponential.
  linalg::GenericOp max, exp;
  for (Operation *user : sUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && g.getNumDpsInputs() == 1 && !max)
      max = g;
    else if (g && g.getNumDpsInputs() == 2 && !exp)
      exp = g;
    else
      return failure();
  }
  if (!max || !exp || !hasForm(max, 1, {{0, 1, 2}, {0, 1}}, "ppr") ||
      fillValue(max.getDpsInits()[0]) != -INFINITY)
    return failure();
  bool maxCausal;
  Value y = yielded(max);
  auto arg = [](linalg::GenericOp g, unsigned i) {
    return [g, i](Value v) { return isArg(v, g, i); };
  };
  auto isMax = [&](Value v) { return isMaximum(v, arg(max, 0), arg(max, 1)); };
  if (isMax(y)) {
    maxCausal = false;
  } else if (auto sel = y.getDefiningOp<arith::SelectOp>();
             sel && isCausalTest(sel.getCondition(), 1, 2) &&
             isArg(sel.getTrueValue(), max, 1) && isMax(sel.getFalseValue())) {
    maxCausal = true;
  } else {
    return failure();
  }
  // exp((s - max) * scale), 0 where masked.
  if (!hasForm(exp, 2, {{0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") ||
      source(exp.getDpsInputs()[0]) != s->getResult(0) ||
      source(exp.getDpsInputs()[1]) != max->getResult(0))
    return failure();
  y = yielded(exp);
  bool expCausal = false;
  if (auto sel = y.getDefiningOp<arith::SelectOp>()) {
    if (!isCausalTest(sel.getCondition(), 1, 2) ||
        constantFloat(sel.getTrueValue()) != 0.0)
      return miss(m, exp, "the exponential masks other than causally");
    expCausal = true;
    y = sel.getFalseValue();
  }
  std::optional<double> scale;
  auto expOp = y.getDefiningOp<math::ExpOp>();
  if (!expOp ||
      !commutes<arith::MulFOp>(
          expOp.getOperand(),
          [&](Value d) {
            return ordered<arith::SubFOp>(d, arg(exp, 0), arg(exp, 1));
          },
          [&](Value c) { return (scale = constantFloat(c)).has_value(); }))
    return failure();
  if (maxCausal != expCausal)
    return miss(m, exp, "the row maximum and the exponential mask differently");
  a.causal = expCausal;
  a.scale = *scale;
  // The row sum and the quotient.
  llvm::SetVector<Operation *> maxUsers, expUsers;
  usersOf(max->getResult(0), maxUsers, casts);
  usersOf(exp->getResult(0), expUsers, casts);
  if (maxUsers.size() != 1 || expUsers.size() != 2)
    return miss(m, exp, "the softmax's intermediates have other users");
  linalg::GenericOp sum, div;
  for (Operation *user : expUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && g.getNumDpsInputs() == 1)
      sum = g;
    else if (g && g.getNumDpsInputs() == 2)
      div = g;
  }
  if (!sum || !div || !hasForm(sum, 1, {{0, 1, 2}, {0, 1}}, "ppr") ||
      fillValue(sum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(sum), arg(sum, 0), arg(sum, 1)) ||
      !hasForm(div, 2, {{0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") ||
      source(div.getDpsInputs()[0]) != exp->getResult(0) ||
      source(div.getDpsInputs()[1]) != sum->getResult(0) ||
      !ordered<arith::DivFOp>(yielded(div), arg(div, 0), arg(div, 1)))
    return miss(m, exp, "the softmax is not exp / rowsum(exp)");
  llvm::SetVector<Operation *> sumUsers, probUsers;
  usersOf(sum->getResult(0), sumUsers, casts);
  usersOf(div->getResult(0), probUsers, casts);
  if (sumUsers.size() != 1)
    return miss(m, sum, "the softmax's row sum has other users");
  // P V, and the backward's uses of P.
  linalg::GenericOp pv, dv, rowdot, ds;
  Value p = div->getResult(0);
  for (Operation *user : probUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (!g)
      return miss(m, user, "the probabilities have users outside the chain");
    if (isContraction(g, {0, 1, 3}, {0, 3, 2}) &&
        source(g.getDpsInputs()[0]) == p && !pv)
      pv = g;
    else if (isContraction(g, {0, 3, 1}, {0, 3, 2}) &&
             source(g.getDpsInputs()[0]) == p && !dv)
      dv = g;
    else if (hasForm(g, 2, {{0, 1, 2}, {0, 1, 2}, {0, 1}}, "ppr") &&
             isMultiplyAccumulate(g) && !rowdot)
      rowdot = g;
    else if (hasForm(g, 3, {{0, 1, 2}, {0, 1, 2}, {0, 1}, {0, 1, 2}}, "ppp") &&
             !ds)
      ds = g;
    else
      return miss(m, g, "the probabilities have users outside the chain");
  }
  if (!pv)
    return miss(m, div, "no P V product of the probabilities");
  a.v = pv.getDpsInputs()[1];
  a.out = pv->getResult(0);
  a.forwardAt = pv;
  for (Operation *op :
       {s.getOperation(), max.getOperation(), exp.getOperation(),
        sum.getOperation(), div.getOperation(), pv.getOperation()})
    a.chain.insert(op);
  if (probUsers.size() == 1) {
    // A forward alone (no backward reads P).
    if (failed(checkOperands(a, m, pv)))
      return failure();
    a.chain.insert(casts.begin(), casts.end());
    return a;
  }
  if (probUsers.size() != 4 || !dv || !rowdot || !ds)
    return miss(m, div, "the probabilities' users are not the backward's");
  a.dout = dv.getDpsInputs()[1];
  // rowdot = sum(dP * P), dS = P (dP - rowdot) scale.
  unsigned rowP = source(rowdot.getDpsInputs()[0]) == p ? 0 : 1;
  Value dpValue = source(rowdot.getDpsInputs()[1 - rowP]);
  linalg::GenericOp dp = dpValue.getDefiningOp<linalg::GenericOp>();
  if (source(rowdot.getDpsInputs()[rowP]) != p || !dp ||
      !isContraction(dp, {0, 1, 3}, {0, 2, 3}) ||
      dp.getDpsInputs()[0] != a.dout || dp.getDpsInputs()[1] != a.v)
    return miss(m, rowdot, "the backward's dP is not dO V^T");
  int pIdx = -1, dpIdx = -1, rdIdx = -1;
  for (unsigned i = 0; i < 3; ++i) {
    Value in = source(ds.getDpsInputs()[i]);
    if (in == p)
      pIdx = i;
    else if (in == dp->getResult(0))
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
            return commutes<arith::MulFOp>(x, arg(ds, pIdx), [&](Value d) {
              return ordered<arith::SubFOp>(d, arg(ds, dpIdx), arg(ds, rdIdx));
            });
          },
          [&](Value c) { return (backScale = constantFloat(c)).has_value(); }))
    return miss(m, ds, "the backward's dS is not P (dP - rowsum(dP P)) scale");
  if (!sameScale(*backScale, a.scale))
    return miss(m, ds, "the backward's scale differs from the forward's");
  llvm::SetVector<Operation *> dpUsers, rowdotUsers, dsUsers;
  usersOf(dp->getResult(0), dpUsers, casts);
  usersOf(rowdot->getResult(0), rowdotUsers, casts);
  usersOf(ds->getResult(0), dsUsers, casts);
  if (dpUsers.size() != 2 || !dpUsers.contains(rowdot) ||
      !dpUsers.contains(ds) || rowdotUsers.size() != 1 || dsUsers.size() != 2)
    return miss(m, ds, "the backward's intermediates have other users");
  linalg::GenericOp dq, dk;
  for (Operation *user : dsUsers) {
    auto g = dyn_cast<linalg::GenericOp>(user);
    if (g && isContraction(g, {0, 1, 3}, {0, 3, 2}) &&
        source(g.getDpsInputs()[0]) == ds->getResult(0) &&
        g.getDpsInputs()[1] == a.k)
      dq = g;
    else if (g && isContraction(g, {0, 3, 1}, {0, 3, 2}) &&
             source(g.getDpsInputs()[0]) == ds->getResult(0) &&
             g.getDpsInputs()[1] == a.q)
      dk = g;
  }
  if (!dq || !dk)
    return miss(m, ds, "the backward's dQ, dK are not dS K, dS^T Q");
  if (failed(checkOperands(a, m, pv)))
    return failure();
  a.dq = dq->getResult(0);
  a.dk = dk->getResult(0);
  a.dv = dv->getResult(0);
  a.backwardAt =
      dp->isBeforeInBlock(dv) ? dp.getOperation() : dv.getOperation();
  if (!pv->isBeforeInBlock(a.backwardAt))
    return miss(m, pv, "the backward starts before the forward's P V");
  for (Operation *op :
       {dp.getOperation(), dv.getOperation(), rowdot.getOperation(),
        ds.getOperation(), dq.getOperation(), dk.getOperation()})
    a.chain.insert(op);
  a.chain.insert(casts.begin(), casts.end());
  return a;
}

//===----------------------------------------------------------------------===//
// The PyTorch frontend's scaled_dot_product_attention (math backend)
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

/// `sel`'s body is select(condition, 0, -inf) on its three inputs, the two
/// values constant splats: the additive form of a boolean mask.
bool isZeroOrMinusInfinitySelect(linalg::GenericOp sel) {
  auto y = yielded(sel).getDefiningOp<arith::SelectOp>();
  return y && isArg(y.getCondition(), sel, 0) &&
         isArg(y.getTrueValue(), sel, 1) && isArg(y.getFalseValue(), sel, 2) &&
         isConstantSplat(sel.getDpsInputs()[1], 0.0) &&
         isConstantSplat(sel.getDpsInputs()[2], -INFINITY);
}

/// torch's causal mask, `[T, T]`: select(arange[j] - arange[i] <= 0, 0,
/// -inf) (with an `and` of an all-true constant, as torch.export writes
/// `tril(ones)`).
bool isCausalMask(Value mask) {
  auto sel = mask.getDefiningOp<linalg::GenericOp>();
  if (!sel || !hasForm(sel, 3, {{0, 1}, {}, {}, {0, 1}}, "pp"))
    return false;
  if (!isZeroOrMinusInfinitySelect(sel))
    return false;
  Value cond = sel.getDpsInputs()[0];
  if (auto andOp = cond.getDefiningOp<linalg::GenericOp>();
      andOp && hasForm(andOp, 2, {{0, 1}, {0, 1}, {0, 1}}, "pp") &&
      commutes<arith::AndIOp>(
          yielded(andOp), [&](Value x) { return isArg(x, andOp, 0); },
          [&](Value x) { return isArg(x, andOp, 1); })) {
    DenseElementsAttr ones;
    if (matchPattern(andOp.getDpsInputs()[1], m_Constant(&ones)) &&
        ones.isSplat() && ones.getSplatValue<bool>())
      cond = andOp.getDpsInputs()[0];
    else
      return false;
  }
  auto cmp = cond.getDefiningOp<linalg::GenericOp>();
  if (!cmp || !hasForm(cmp, 1, {{0, 1}, {0, 1}}, "pp"))
    return false;
  auto pred = yielded(cmp).getDefiningOp<arith::CmpIOp>();
  IntegerAttr zero;
  if (!pred || pred.getPredicate() != arith::CmpIPredicate::sle ||
      !isArg(pred.getLhs(), cmp, 0) ||
      !matchPattern(pred.getRhs(), m_Constant(&zero)) ||
      !zero.getValue().isZero())
    return false;
  auto diff = cmp.getDpsInputs()[0].getDefiningOp<linalg::GenericOp>();
  if (!diff || !hasForm(diff, 2, {{kUnit, 1}, {0, kUnit}, {0, 1}}, "pp") ||
      !ordered<arith::SubIOp>(
          yielded(diff), [&](Value x) { return isArg(x, diff, 0); },
          [&](Value x) { return isArg(x, diff, 1); }))
    return false;
  // Both operands expand one arange.
  auto arange = [](Value v) -> Value {
    auto e = v.getDefiningOp<tensor::ExpandShapeOp>();
    if (!e || e.getSrcType().getRank() != 1)
      return {};
    auto g = e.getSrc().getDefiningOp<linalg::GenericOp>();
    if (!g || g.getNumDpsInputs() != 0 || g.getNumDpsInits() != 1)
      return {};
    Value y = yielded(g);
    if (auto cast = y.getDefiningOp<arith::IndexCastOp>())
      y = cast.getIn();
    auto index = y.getDefiningOp<linalg::IndexOp>();
    return index && index.getDim() == 0 ? e.getSrc() : Value();
  };
  Value a = arange(diff.getDpsInputs()[0]), b = arange(diff.getDpsInputs()[1]);
  return a && a == b;
}

/// Hugging Face's causal mask, `[batch, 1, T, T]` (or without the batch
/// broadcast): select(key <= query, 0, -inf), the comparison of two
/// reshaped aranges read along the key and the query loops, broadcast over
/// the batch by a copy.
bool isBroadcastCausalMask(Value mask) {
  auto sel = mask.getDefiningOp<linalg::GenericOp>();
  auto type = dyn_cast<RankedTensorType>(mask.getType());
  if (!sel || !type || type.getRank() != 4 ||
      type.getDimSize(2) != type.getDimSize(3) ||
      !hasForm(sel, 3, {{0, 1, 2, 3}, {}, {}, {0, 1, 2, 3}}, "pppp"))
    return false;
  if (!isZeroOrMinusInfinitySelect(sel))
    return false;
  // The batch broadcast: a copy whose input keeps the last two loops.
  Value cond = sel.getDpsInputs()[0];
  if (auto copy = cond.getDefiningOp<linalg::GenericOp>();
      copy && copy.getNumDpsInputs() == 1 && copy.getNumLoops() == 4 &&
      isArg(yielded(copy), copy, 0)) {
    AffineMap in = copy.getIndexingMapsArray()[0];
    MLIRContext *ctx = copy.getContext();
    if (!copy.getIndexingMapsArray()[1].isIdentity() ||
        in.getNumResults() < 2 ||
        in.getResult(in.getNumResults() - 2) != getAffineDimExpr(2, ctx) ||
        in.getResult(in.getNumResults() - 1) != getAffineDimExpr(3, ctx))
      return false;
    cond = copy.getDpsInputs()[0];
  }
  auto cmp = throughUnitReshapes(cond).getDefiningOp<linalg::GenericOp>();
  if (!cmp || cmp.getNumDpsInputs() != 2 || cmp.getNumLoops() != 4)
    return false;
  auto pred = yielded(cmp).getDefiningOp<arith::CmpIOp>();
  if (!pred)
    return false;
  // Which loop each comparison operand reads (an arange along one loop).
  MLIRContext *ctx = cmp.getContext();
  auto loopOf = [&](Value v) -> int {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != cmp.getBody() || arg.getArgNumber() > 1 ||
        !isArange(cmp.getDpsInputs()[arg.getArgNumber()]))
      return -1;
    AffineMap map = cmp.getIndexingMapsArray()[arg.getArgNumber()];
    auto shape =
        cast<ShapedType>(cmp.getDpsInputs()[arg.getArgNumber()].getType());
    int loop = -1;
    for (auto [i, e] : llvm::enumerate(map.getResults())) {
      if (shape.getDimSize(i) == 1)
        continue; // a unit dimension reads the same element on every loop
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        if (loop >= 0)
          return -1;
        loop = d.getPosition();
      } else if (e != getAffineConstantExpr(0, ctx)) {
        return -1;
      }
    }
    return loop;
  };
  int l = loopOf(pred.getLhs()), r = loopOf(pred.getRhs());
  switch (pred.getPredicate()) {
  case arith::CmpIPredicate::sle:
  case arith::CmpIPredicate::ule:
    return l == 3 && r == 2;
  case arith::CmpIPredicate::sge:
  case arith::CmpIPredicate::uge:
    return l == 2 && r == 3;
  default:
    return false;
  }
}

/// The element strides of an additive mask read through `map` by the 4
/// loops (batch, heads, query, key); failure for a map that is not a
/// projection in loop order.
FailureOr<std::array<int64_t, 4>> maskStrides(AffineMap map,
                                              RankedTensorType type) {
  std::array<int64_t, 4> strides = {0, 0, 0, 0};
  if (map.getNumDims() != 4 || !type.hasStaticShape())
    return failure();
  int64_t stride = 1;
  int last = 4;
  for (int r = map.getNumResults() - 1; r >= 0; --r) {
    AffineExpr e = map.getResult(r);
    int64_t size = type.getDimSize(r);
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (int(d.getPosition()) >= last)
        return failure();
      last = d.getPosition();
      strides[last] = size == 1 ? 0 : stride;
    } else if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      if (c.getValue() != 0 || size != 1)
        return failure();
    } else {
      return failure();
    }
    stride *= size;
  }
  return strides;
}

/// From the scores product `s` = batch_matmul(q * c, k^T * c) on
/// [batch * heads] collapses.
FailureOr<Attention> matchTorch(linalg::LinalgOp s, Miss &m) {
  if (!isPlainBatchMatmul(s))
    return failure();
  tensor::CollapseShapeOp qc = batchCollapse(source(s.getDpsInputs()[0]));
  tensor::CollapseShapeOp kc = batchCollapse(source(s.getDpsInputs()[1]));
  if (!qc || !kc)
    return failure();
  std::optional<std::pair<Value, double>> qs = scaledBy(qc.getSrc());
  std::optional<std::pair<Value, double>> ks = scaledBy(kc.getSrc());
  llvm::SetVector<Operation *> casts;
  tensor::ExpandShapeOp s4 = batchExpand(s->getResult(0), casts);
  if (!qs || !ks || !s4)
    return failure();
  Attention a;
  a.q = qs->first;
  a.kT = ks->first;
  a.scale = qs->second * ks->second;
  auto arg = [](linalg::GenericOp g, unsigned i) {
    return [g, i](Value v) { return isArg(v, g, i); };
  };
  SmallVector<unsigned, 4> id = {0, 1, 2, 3}, row = {0, 1, 2},
                           rowUnit = {0, 1, 2, kUnit};
  // An additive mask.
  Value scores = s4.getResult();
  linalg::GenericOp add;
  if (scores.hasOneUse())
    add = dyn_cast<linalg::GenericOp>(*scores.getUsers().begin());
  if (add && add.getNumDpsInputs() == 2 && add.getNumDpsInits() == 1 &&
      add.getDpsInputs()[0] == scores &&
      llvm::all_of(add.getIteratorTypesArray(),
                   [](utils::IteratorType t) {
                     return t == utils::IteratorType::parallel;
                   }) &&
      add.getIndexingMapsArray()[0].isIdentity() &&
      add.getIndexingMapsArray()[2].isIdentity() &&
      commutes<arith::AddFOp>(yielded(add), arg(add, 0), arg(add, 1))) {
    Value mask = add.getDpsInputs()[1];
    auto maskType = dyn_cast<RankedTensorType>(mask.getType());
    FailureOr<std::array<int64_t, 4>> strides = failure();
    if (maskType)
      strides = maskStrides(add.getIndexingMapsArray()[1], maskType);
    if (failed(strides))
      return miss(m, add, "the additive mask is not read in loop order");
    if ((maskType.getRank() == 2 && isCausalMask(mask) &&
         maskType.getDimSize(0) == maskType.getDimSize(1)) ||
        isBroadcastCausalMask(mask)) {
      a.causal = true;
    } else {
      a.mask = mask;
      a.maskStrides = *strides;
    }
    a.chain.insert(add);
    scores = add->getResult(0);
  }
  // The row maximum (with torch's unused argmax), sub, exp, sum, div.
  linalg::GenericOp max, sub, isNegInf;
  for (Operation *u : scores.getUsers()) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && g.getNumDpsInputs() == 1 && g.getNumDpsInits() >= 1 &&
        g.getIteratorTypesArray().back() == utils::IteratorType::reduction &&
        !max)
      max = g;
    else if (g && g.getNumDpsInputs() == 2 && !sub)
      sub = g;
    else if (g && g.getNumDpsInputs() == 1 && !isNegInf)
      isNegInf = g;
    else
      return failure();
  }
  if (!max || !sub)
    return failure();
  if (max.getNumDpsInits() > 2 ||
      fillValue(max.getDpsInits()[0]) != -INFINITY ||
      max.getIndexingMapsArray()[0] !=
          AffineMap::getMultiDimIdentityMap(4, max.getContext()) ||
      !isMaximum(max.getBody()->getTerminator()->getOperand(0), arg(max, 0),
                 arg(max, 1)) ||
      (max.getNumDpsInits() == 2 && !max->getResult(1).use_empty()))
    return failure();
  tensor::ExpandShapeOp maxExpand;
  if (max->getResult(0).hasOneUse())
    maxExpand =
        dyn_cast<tensor::ExpandShapeOp>(*max->getResult(0).getUsers().begin());
  if (!maxExpand || !hasForm(sub, 2, {id, rowUnit, id}, "pppp") ||
      sub.getDpsInputs()[0] != scores ||
      sub.getDpsInputs()[1] != maxExpand.getResult() ||
      !ordered<arith::SubFOp>(yielded(sub), arg(sub, 0), arg(sub, 1)))
    return failure();
  linalg::GenericOp exp;
  if (sub->getResult(0).hasOneUse())
    exp = dyn_cast<linalg::GenericOp>(*sub->getResult(0).getUsers().begin());
  if (!exp || !hasForm(exp, 1, {id, id}, "pppp"))
    return failure();
  auto expOp = yielded(exp).getDefiningOp<math::ExpOp>();
  if (!expOp || !isArg(expOp.getOperand(), exp, 0))
    return failure();
  linalg::GenericOp sum, div;
  for (Operation *u : exp->getResult(0).getUsers()) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && g.getNumDpsInputs() == 1 && !sum)
      sum = g;
    else if (g && g.getNumDpsInputs() == 2 && !div)
      div = g;
    else
      return miss(m, exp, "the softmax's intermediates have other users");
  }
  if (!sum || !div || !hasForm(sum, 1, {id, rowUnit}, "pppr") ||
      fillValue(sum.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(sum), arg(sum, 0), arg(sum, 1)) ||
      !hasForm(div, 2, {id, rowUnit, id}, "pppp") ||
      div.getDpsInputs()[0] != exp->getResult(0) ||
      div.getDpsInputs()[1] != sum->getResult(0) ||
      !ordered<arith::DivFOp>(yielded(div), arg(div, 0), arg(div, 1)) ||
      !sum->getResult(0).hasOneUse())
    return miss(m, exp, "the softmax is not exp / rowsum(exp)");
  for (Operation *op :
       {s.getOperation(), s4.getOperation(), max.getOperation(),
        maxExpand.getOperation(), sub.getOperation(), exp.getOperation(),
        sum.getOperation(), div.getOperation(), qc.getOperation(),
        kc.getOperation()})
    a.chain.insert(op);
  a.chain.insert(qc.getSrc().getDefiningOp());
  a.chain.insert(kc.getSrc().getDefiningOp());
  // _safe_softmax: rows whose scores are all -inf give 0.
  Value p = div->getResult(0);
  if (isNegInf) {
    linalg::GenericOp all, guard;
    if (isNegInf->getResult(0).hasOneUse())
      all = dyn_cast<linalg::GenericOp>(
          *isNegInf->getResult(0).getUsers().begin());
    if (p.hasOneUse())
      guard = dyn_cast<linalg::GenericOp>(*p.getUsers().begin());
    auto cmp = isNegInf ? yielded(isNegInf).getDefiningOp<arith::CmpFOp>()
                        : arith::CmpFOp();
    if (!all || !guard || !cmp || !hasForm(isNegInf, 1, {id, id}, "pppp") ||
        cmp.getPredicate() != arith::CmpFPredicate::OEQ ||
        !isArg(cmp.getLhs(), isNegInf, 0) ||
        constantFloat(cmp.getRhs()) != -INFINITY ||
        !hasForm(all, 1, {id, rowUnit}, "pppr") ||
        !commutes<arith::AndIOp>(yielded(all), arg(all, 0), arg(all, 1)) ||
        !hasForm(guard, 3, {rowUnit, id, id, id}, "pppp") ||
        guard.getDpsInputs()[0] != all->getResult(0) ||
        !isConstantSplat(guard.getDpsInputs()[1], 0.0) ||
        guard.getDpsInputs()[2] != p)
      return miss(m, div, "the softmax's guard is not torch's _safe_softmax");
    auto sel = yielded(guard).getDefiningOp<arith::SelectOp>();
    if (!sel || !isArg(sel.getCondition(), guard, 0) ||
        !isArg(sel.getTrueValue(), guard, 1) ||
        !isArg(sel.getFalseValue(), guard, 2))
      return miss(m, guard, "the softmax's guard is not torch's _safe_softmax");
    for (Operation *op :
         {isNegInf.getOperation(), all.getOperation(), guard.getOperation()})
      a.chain.insert(op);
    p = guard->getResult(0);
  }
  // P V on collapses, expanded back.
  tensor::CollapseShapeOp pc;
  SmallVector<Operation *> pBackward;
  for (Operation *u : p.getUsers()) {
    auto c = dyn_cast<tensor::CollapseShapeOp>(u);
    if (c && isBatchCollapse(c.getReassociationIndices()) && !pc)
      pc = c;
    else
      pBackward.push_back(u);
  }
  if (!pc)
    return miss(m, div, "no P V product of the probabilities");
  SmallVector<Operation *> pcOthers;
  linalg::TransposeOp pcT = swapUser(pc.getResult(), pcOthers, casts);
  if (pcOthers.size() != 1 || !isPlainBatchMatmul(pcOthers[0]) ||
      source(pcOthers[0]->getOperand(0)) != pc.getResult())
    return miss(m, pc, "no P V product of the probabilities");
  auto pv = cast<linalg::LinalgOp>(pcOthers[0]);
  tensor::CollapseShapeOp vc = batchCollapse(source(pv.getDpsInputs()[1]));
  if (!vc)
    return miss(m, pv, "V is not a collapse of [batch, heads, T, d]");
  a.v = vc.getSrc();
  a.out = pv->getResult(0);
  a.outForm = Attention::Form::Collapsed;
  a.forwardAt = pv;
  a.chain.insert(pc);
  a.chain.insert(pv);
  a.chain.insert(vc);
  if (pBackward.empty() && !pcT) {
    if (failed(checkOperands(a, m, pv)))
      return failure();
    a.chain.insert(casts.begin(), casts.end());
    return a;
  }
  // The backward: dV = P^T dO, dP = dO V^T, dS = P dP - P rowsum(P dP),
  // dQ = dS K * c, dK^T = Q^T dS * c.
  auto bmmUser = [&](Value v) -> linalg::LinalgOp {
    Operation *user = v ? soleUser(v, casts) : nullptr;
    return isPlainBatchMatmul(user) ? cast<linalg::LinalgOp>(user)
                                    : linalg::LinalgOp();
  };
  linalg::LinalgOp dv = pcT ? bmmUser(pcT->getResult(0)) : nullptr;
  if (!dv || source(dv.getDpsInputs()[0]) != pcT->getResult(0))
    return miss(m, pc, "the backward's dV is not P^T dO");
  Value doc4 = source(dv.getDpsInputs()[1]);
  tensor::CollapseShapeOp doc = batchCollapse(doc4);
  SmallVector<Operation *> vcOthers;
  linalg::TransposeOp vcT = swapUser(vc.getResult(), vcOthers, casts);
  linalg::LinalgOp dp = vcT ? bmmUser(vcT->getResult(0)) : nullptr;
  if (!doc || !dp || vcOthers.size() != 1 ||
      source(dp.getDpsInputs()[0]) != doc4 ||
      source(dp.getDpsInputs()[1]) != vcT->getResult(0))
    return miss(m, pv, "the backward's dP is not dO V^T");
  a.dout = doc.getSrc();
  tensor::ExpandShapeOp dp4 = batchExpand(dp->getResult(0), casts);
  if (!dp4 || pBackward.size() != 2)
    return miss(m, dp, "the backward's dS is not P dP - P rowsum(P dP)");
  // pdp = dP * P, rs = rowsum(pdp), prs = P * rs, ds = pdp - prs.
  linalg::GenericOp pdp, prs;
  for (Operation *u : pBackward) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    if (g && hasForm(g, 2, {id, id, id}, "pppp") && !pdp)
      pdp = g;
    else if (g && hasForm(g, 2, {id, rowUnit, id}, "pppp") && !prs)
      prs = g;
  }
  if (!pdp || !prs ||
      !commutes<arith::MulFOp>(yielded(pdp), arg(pdp, 0), arg(pdp, 1)) ||
      !llvm::any_of(pdp.getDpsInputs(),
                    [&](Value in) { return source(in) == dp4.getResult(); }) ||
      prs.getDpsInputs()[0] != p ||
      !commutes<arith::MulFOp>(yielded(prs), arg(prs, 0), arg(prs, 1)))
    return miss(m, dp, "the backward's dS is not P dP - P rowsum(P dP)");
  auto rs = prs.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
  linalg::GenericOp ds;
  for (Operation *u : pdp->getResult(0).getUsers())
    if (u != rs.getOperation())
      ds = dyn_cast<linalg::GenericOp>(u);
  if (!rs || !hasForm(rs, 1, {id, rowUnit}, "pppr") ||
      rs.getDpsInputs()[0] != pdp->getResult(0) ||
      fillValue(rs.getDpsInits()[0]) != 0.0 ||
      !commutes<arith::AddFOp>(yielded(rs), arg(rs, 0), arg(rs, 1)) ||
      !rs->getResult(0).hasOneUse() || !ds ||
      !usedOnlyBy(pdp->getResult(0), {rs, ds}, casts) ||
      !hasForm(ds, 2, {id, id, id}, "pppp") ||
      ds.getDpsInputs()[0] != pdp->getResult(0) ||
      ds.getDpsInputs()[1] != prs->getResult(0) ||
      !ordered<arith::SubFOp>(yielded(ds), arg(ds, 0), arg(ds, 1)) ||
      !prs->getResult(0).hasOneUse())
    return miss(m, dp, "the backward's dS is not P dP - P rowsum(P dP)");
  tensor::CollapseShapeOp dsc;
  for (Operation *u : ds->getResult(0).getUsers())
    if (auto c = dyn_cast<tensor::CollapseShapeOp>(u);
        c && isBatchCollapse(c.getReassociationIndices()))
      dsc = c;
  if (!dsc || !ds->getResult(0).hasOneUse())
    return miss(m, ds, "the backward's dS has other users");
  // dK^T = (Qc)^T dS, dQ = dS (Kc)^T, each then times c.
  SmallVector<Operation *> qcOthers, kcOthers;
  linalg::TransposeOp qcT = swapUser(qc.getResult(), qcOthers, casts);
  linalg::TransposeOp kcT = swapUser(kc.getResult(), kcOthers, casts);
  linalg::LinalgOp dkT = qcT ? bmmUser(qcT->getResult(0)) : nullptr;
  linalg::LinalgOp dq = kcT ? bmmUser(kcT->getResult(0)) : nullptr;
  if (!dkT || !dq || qcOthers.size() != 1 || kcOthers.size() != 1 ||
      source(dkT.getDpsInputs()[0]) != qcT->getResult(0) ||
      source(dkT.getDpsInputs()[1]) != dsc.getResult() ||
      source(dq.getDpsInputs()[0]) != dsc.getResult() ||
      source(dq.getDpsInputs()[1]) != kcT->getResult(0) ||
      !usedOnlyBy(dsc.getResult(), {dkT, dq}, casts))
    return miss(m, ds, "the backward's dQ, dK are not dS K, Q^T dS");
  tensor::ExpandShapeOp dq4 = batchExpand(dq->getResult(0), casts);
  tensor::ExpandShapeOp dkT4 = batchExpand(dkT->getResult(0), casts);
  std::optional<std::pair<Value, double>> dqs, dks;
  linalg::GenericOp dqScale, dkScale;
  if (dq4) {
    dqScale = dyn_cast_or_null<linalg::GenericOp>(soleUser(dq4, casts));
    dqs = dqScale ? scaledBy(dqScale->getResult(0)) : std::nullopt;
  }
  if (dkT4) {
    dkScale = dyn_cast_or_null<linalg::GenericOp>(soleUser(dkT4, casts));
    dks = dkScale ? scaledBy(dkScale->getResult(0)) : std::nullopt;
  }
  if (!dqs || !dks || !sameScale(dqs->second, qs->second) ||
      !sameScale(dks->second, ks->second))
    return miss(m, ds, "the backward's dQ, dK are not scaled as Q and K");
  if (failed(checkOperands(a, m, pv)))
    return failure();
  a.dq = dqScale->getResult(0);
  a.dk = dkScale->getResult(0);
  a.dkForm = Attention::Form::Transposed;
  a.dv = dv->getResult(0);
  a.dvForm = Attention::Form::Collapsed;
  a.backwardAt =
      dv->isBeforeInBlock(dp) ? dv.getOperation() : dp.getOperation();
  if (pcT->isBeforeInBlock(a.backwardAt))
    a.backwardAt = pcT;
  if (vcT->isBeforeInBlock(a.backwardAt))
    a.backwardAt = vcT;
  Operation *doutDef = a.dout.getDefiningOp();
  if (!pv->isBeforeInBlock(a.backwardAt) ||
      (doutDef && (doutDef->getBlock() != pv->getBlock() ||
                   !doutDef->isBeforeInBlock(a.backwardAt))))
    return miss(m, pv, "the backward starts before the forward's P V");
  for (Operation *op :
       {pcT.getOperation(), dv.getOperation(), vcT.getOperation(),
        dp.getOperation(), dp4.getOperation(), pdp.getOperation(),
        rs.getOperation(), prs.getOperation(), ds.getOperation(),
        dsc.getOperation(), qcT.getOperation(), kcT.getOperation(),
        dkT.getOperation(), dq.getOperation(), dq4.getOperation(),
        dkT4.getOperation(), dqScale.getOperation(), dkScale.getOperation()})
    a.chain.insert(op);
  a.chain.insert(casts.begin(), casts.end());
  return a;
}

//===----------------------------------------------------------------------===//
// The calls
//===----------------------------------------------------------------------===//

struct Emitter {
  ModuleOp module;
  llvm::StringMap<func::FuncOp> helpers;
  unsigned counter = 0;

  static RuntimeFunction runtime(bool backward, bool bf16) {
    if (backward)
      return bf16 ? RuntimeFunction::gpu_attention_bwd_bf16
                  : RuntimeFunction::gpu_attention_bwd_f32;
    return bf16 ? RuntimeFunction::gpu_attention_fwd_bf16
                : RuntimeFunction::gpu_attention_fwd_f32;
  }

  static std::string key(const Attention &a, bool backward) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << (backward ? "bwd" : "fwd") << a.q.getType() << a.k.getType()
       << a.v.getType() << (a.mask ? a.mask.getType() : Type()) << ' '
       << a.maskStrides[0] << ',' << a.maskStrides[1] << ',' << a.maskStrides[2]
       << ',' << a.maskStrides[3] << ' ' << a.causal << ' '
       << llvm::formatv("{0:e}", a.scale);
    return s;
  }

  /// The private function on tensors around one kernel call: forward
  /// (q, k, v[, mask]) -> (o, lse), backward (q, k, v[, mask], o, dout, lse)
  /// -> (dq, dk, dv).
  func::FuncOp helper(const Attention &a, bool backward) {
    func::FuncOp &f = helpers[key(a, backward)];
    if (f)
      return f;
    MLIRContext *ctx = module.getContext();
    Location loc = a.forwardAt->getLoc();
    auto qt = cast<RankedTensorType>(a.q.getType());
    auto kt = cast<RankedTensorType>(a.k.getType());
    auto vt = cast<RankedTensorType>(a.v.getType());
    auto lse =
        RankedTensorType::get({a.batch, a.heads, a.tq}, Float32Type::get(ctx));
    SmallVector<Type> args = {qt, kt, vt};
    if (a.mask)
      args.push_back(a.mask.getType());
    SmallVector<Type> results;
    if (backward) {
      args.append({qt, qt, lse});
      results = {qt, kt, vt};
    } else {
      results = {qt, lse};
    }
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    std::string name = llvm::formatv("__fsdp_attention_{0}_{1}",
                                     backward ? "bwd" : "fwd", counter++);
    f = func::FuncOp::create(b, loc, name, b.getFunctionType(args, results));
    f.setPrivate();
    f->setAttr(kSegmentAttrName, UnitAttr::get(ctx));
    Block *entry = f.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    auto bytes = [](Type t) {
      return int64_t(cast<ShapedType>(t).getElementTypeBitWidth() / 8);
    };
    auto memrefOf = [](Type t) {
      auto tt = cast<RankedTensorType>(t);
      return MemRefType::get(tt.getShape(), tt.getElementType());
    };
    auto input = [&](Value tensor) -> Value {
      Value buffer = bufferization::ToBufferOp::create(
          b, loc, memrefOf(tensor.getType()), tensor, b.getUnitAttr());
      return elementPointer(b, loc, buffer, zero, bytes(tensor.getType()));
    };
    SmallVector<Value> buffers;
    auto output = [&](Type t) -> Value {
      Value buffer = memref::AllocOp::create(b, loc, memrefOf(t));
      buffers.push_back(buffer);
      return elementPointer(b, loc, buffer, zero, bytes(t));
    };
    auto i64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, v, 64);
    };
    unsigned n = 0;
    SmallVector<Value> call = {input(entry->getArgument(n++)),
                               input(entry->getArgument(n++)),
                               input(entry->getArgument(n++))};
    call.push_back(
        a.mask ? input(entry->getArgument(n++))
               : LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(ctx))
                     .getResult());
    for (int64_t stride : a.maskStrides)
      call.push_back(i64(stride));
    if (backward) {
      for (unsigned i = 0; i < 3; ++i)
        call.push_back(input(entry->getArgument(n++)));
    }
    for (Type t : results)
      call.push_back(output(t));
    for (int64_t v : {a.batch, a.heads, a.tq, a.tk, a.dim})
      call.push_back(i64(v));
    call.push_back(
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(a.scale)));
    call.push_back(arith::ConstantIntOp::create(b, loc, a.causal, 32));
    func::FuncOp callee =
        declareRuntimeFunction(module, runtime(backward, a.element.isBF16()));
    func::CallOp::create(b, loc, callee, call);
    SmallVector<Value> returned;
    for (auto [buffer, t] : llvm::zip(buffers, results))
      returned.push_back(bufferization::ToTensorOp::create(
          b, loc, t, buffer, /*restrict=*/true, /*writable=*/true));
    func::ReturnOp::create(b, loc, returned);
    return f;
  }
};

/// `fresh` ([batch, heads, T, d]) in the shape `form` says.
Value reshaped(OpBuilder &b, Value fresh, Attention::Form form) {
  Location loc = fresh.getLoc();
  auto type = cast<RankedTensorType>(fresh.getType());
  if (form == Attention::Form::Collapsed)
    return tensor::CollapseShapeOp::create(
        b, loc, fresh, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  if (form == Attention::Form::Transposed) {
    ArrayRef<int64_t> s = type.getShape();
    Value init = tensor::EmptyOp::create(b, loc, {s[0], s[1], s[3], s[2]},
                                         type.getElementType());
    return linalg::TransposeOp::create(b, loc, fresh, init,
                                       ArrayRef<int64_t>{0, 1, 3, 2})
        ->getResult(0);
  }
  return fresh;
}

/// Replaces `old` by `fresh` in `form`, in `old`'s element type (a
/// widening where the chain computed in f32 what the kernel writes in
/// bf16; a rounding of it back to bf16 is then `fresh` itself).
void replace(Value old, Value fresh, Attention::Form form) {
  OpBuilder b(fresh.getContext());
  b.setInsertionPointAfterValue(fresh);
  fresh = reshaped(b, fresh, form);
  if (old.getType() == fresh.getType()) {
    old.replaceAllUsesWith(fresh);
    return;
  }
  for (Operation *user : llvm::make_early_inc_range(old.getUsers()))
    if (isa<arith::TruncFOp>(user) &&
        user->getResult(0).getType() == fresh.getType())
      user->getResult(0).replaceAllUsesWith(fresh);
  if (old.use_empty())
    return;
  Value wide = arith::ExtFOp::create(b, fresh.getLoc(), old.getType(), fresh);
  old.replaceAllUsesWith(wide);
}

struct FSDPGpuFuseAttentionPass
    : public mlir::fsdp::impl::FSDPGpuFuseAttentionBase<
          FSDPGpuFuseAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Emitter emit{module, {}, 0};
    SmallVector<Operation *> candidates;
    module.walk([&](Operation *op) {
      auto fn = op->getParentOfType<func::FuncOp>();
      if (isa<linalg::GenericOp, linalg::BatchMatmulOp>(op) && fn &&
          !fn->hasAttr(kSegmentAttrName))
        candidates.push_back(op);
    });
    DenseSet<Operation *> erased;
    for (Operation *g : candidates) {
      if (erased.contains(g))
        continue;
      Miss m;
      FailureOr<Attention> a = failure();
      if (auto generic = dyn_cast<linalg::GenericOp>(g))
        a = matchGenerator(generic, m);
      // fsdp-autocast writes torch's batch matmuls as generics.
      if (failed(a) && !m.at)
        a = matchTorch(cast<linalg::LinalgOp>(g), m);
      if (failed(a)) {
        if (report && m.at)
          m.at->emitRemark() << "attention stays unfused: " << m.why;
        continue;
      }
      if (llvm::any_of(a->chain, [&](Operation *op) {
            return op->getBlock() != g->getBlock();
          })) {
        if (report)
          g->emitRemark() << "attention stays unfused: the chain spans blocks";
        continue;
      }
      fuse(emit, *a, erased);
    }
  }

  /// Replaces the chain by the calls; every op erased goes into `erased`.
  void fuse(Emitter &emit, Attention &a, DenseSet<Operation *> &erased) {
    Location loc = a.forwardAt->getLoc();
    if (report) {
      InFlightDiagnostic d = a.forwardAt->emitRemark();
      d << "attention fused: batch " << a.batch << ", heads " << a.heads
        << ", tq " << a.tq << ", tk " << a.tk << ", head dim " << a.dim
        << ", scale " << a.scale << (a.causal ? ", causal" : "")
        << (a.mask ? ", additive mask" : "")
        << (a.element.isBF16() ? ", bf16" : ", f32")
        << (a.dout ? ", forward and backward" : ", forward only");
    }
    OpBuilder b(a.forwardAt);
    if (a.kT)
      a.k = reshaped(b, a.kT, Attention::Form::Transposed);
    SmallVector<Value> operands = {a.q, a.k, a.v};
    if (a.mask)
      operands.push_back(a.mask);
    auto forward =
        func::CallOp::create(b, loc, emit.helper(a, false), operands);
    Value o = forward.getResult(0), lse = forward.getResult(1);
    ++numForward;
    if (a.dout) {
      b.setInsertionPoint(a.backwardAt);
      operands.append({o, a.dout, lse});
      auto backward = func::CallOp::create(b, a.backwardAt->getLoc(),
                                           emit.helper(a, true), operands);
      replace(a.dq, backward.getResult(0), Attention::Form::Same);
      replace(a.dk, backward.getResult(1), a.dkForm);
      replace(a.dv, backward.getResult(2), a.dvForm);
      ++numBackward;
    }
    replace(a.out, o, a.outForm);
    // Users before definitions: the chain erased from its end.
    SmallVector<Operation *> ops(a.chain.begin(), a.chain.end());
    llvm::sort(
        ops, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
    // Then what only the chain used (its fills, empty tensors, scalings).
    SmallVector<Operation *> dead;
    for (Operation *op : ops) {
      if (!op->use_empty())
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && !a.chain.contains(def))
          dead.push_back(def);
      erased.insert(op);
      op->erase();
    }
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      if (!op->use_empty() || !isMemoryEffectFree(op) ||
          op->hasTrait<OpTrait::ConstantLike>() || llvm::is_contained(dead, op))
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          dead.push_back(def);
      erased.insert(op);
      op->erase();
    }
  }
};

} // namespace

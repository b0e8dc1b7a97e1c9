//===- AttentionTorchMasks.cpp - the masks of PyTorch's attention ---------===//
//
// The additive masks fsdp-gpu-fuse-attention recognizes in PyTorch's
// scaled_dot_product_attention: the causal masks torch and Hugging Face
// build from aranges (replaced by the kernels' causal flag), and the
// element strides of any other mask the kernels read as it is.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::attention;
using namespace mlir::fsdp::chain;

namespace {

/// `sel`'s body is select(condition, 0, -inf) on its three inputs, the two
/// values constant splats: the additive form of a boolean mask.
bool isZeroOrMinusInfinitySelect(linalg::GenericOp sel) {
  auto y = yielded(sel).getDefiningOp<arith::SelectOp>();
  return y && isArg(y.getCondition(), sel, 0) &&
         isArg(y.getTrueValue(), sel, 1) && isArg(y.getFalseValue(), sel, 2) &&
         isConstantSplat(sel.getDpsInputs()[1], 0.0) &&
         isConstantSplat(sel.getDpsInputs()[2], -INFINITY);
}

/// `cond` without the `and` of an all-true constant torch.export writes for
/// `tril(ones)`; null for an `and` of anything else.
Value withoutAllTrue(Value cond) {
  auto andOp = cond.getDefiningOp<linalg::GenericOp>();
  if (!andOp || !hasForm(andOp, 2, {{0, 1}, {0, 1}, {0, 1}}, "pp") ||
      !commutes<arith::AndIOp>(yielded(andOp), argOf(andOp, 0),
                               argOf(andOp, 1)))
    return cond;
  DenseElementsAttr ones;
  if (matchPattern(andOp.getDpsInputs()[1], m_Constant(&ones)) &&
      ones.isSplat() && ones.getSplatValue<bool>())
    return andOp.getDpsInputs()[0];
  return {};
}

/// The 1-D arange `v` expands to [T, 1] or [1, T]; null otherwise.
Value expandedArange(Value v) {
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
}

/// `cond` through the batch broadcast of a mask: a copy whose input keeps
/// the last two loops; null for a copy that does not.
Value throughBatchBroadcast(Value cond) {
  auto copy = cond.getDefiningOp<linalg::GenericOp>();
  if (!copy || copy.getNumDpsInputs() != 1 || copy.getNumLoops() != 4 ||
      !isArg(yielded(copy), copy, 0))
    return cond;
  AffineMap in = copy.getIndexingMapsArray()[0];
  MLIRContext *ctx = copy.getContext();
  if (!copy.getIndexingMapsArray()[1].isIdentity() || in.getNumResults() < 2 ||
      in.getResult(in.getNumResults() - 2) != getAffineDimExpr(2, ctx) ||
      in.getResult(in.getNumResults() - 1) != getAffineDimExpr(3, ctx))
    return {};
  return copy.getDpsInputs()[0];
}

/// The loop along which the comparison `cmp`'s body value `v` (one of its
/// inputs, an arange) is read; -1 if it is not.
int loopReadBy(linalg::GenericOp cmp, Value v) {
  MLIRContext *ctx = cmp.getContext();
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
}

} // namespace

/// torch's causal mask, `[T, T]`: select(arange[j] - arange[i] <= 0, 0,
/// -inf) (with an `and` of an all-true constant, as torch.export writes
/// `tril(ones)`).
bool attention::isCausalMask(Value mask) {
  auto sel = mask.getDefiningOp<linalg::GenericOp>();
  if (!sel || !hasForm(sel, 3, {{0, 1}, {}, {}, {0, 1}}, "pp"))
    return false;
  if (!isZeroOrMinusInfinitySelect(sel))
    return false;
  Value cond = withoutAllTrue(sel.getDpsInputs()[0]);
  if (!cond)
    return false;
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
      !ordered<arith::SubIOp>(yielded(diff), argOf(diff, 0), argOf(diff, 1)))
    return false;
  // Both operands expand one arange.
  Value a = expandedArange(diff.getDpsInputs()[0]),
        b = expandedArange(diff.getDpsInputs()[1]);
  return a && a == b;
}

/// Hugging Face's causal mask, `[batch, 1, T, T]` (or without the batch
/// broadcast): select(key <= query, 0, -inf), the comparison of two
/// reshaped aranges read along the key and the query loops, broadcast over
/// the batch by a copy.
bool attention::isBroadcastCausalMask(Value mask) {
  auto sel = mask.getDefiningOp<linalg::GenericOp>();
  auto type = dyn_cast<RankedTensorType>(mask.getType());
  if (!sel || !type || type.getRank() != 4 ||
      type.getDimSize(2) != type.getDimSize(3) ||
      !hasForm(sel, 3, {{0, 1, 2, 3}, {}, {}, {0, 1, 2, 3}}, "pppp"))
    return false;
  if (!isZeroOrMinusInfinitySelect(sel))
    return false;
  Value cond = throughBatchBroadcast(sel.getDpsInputs()[0]);
  if (!cond)
    return false;
  auto cmp = throughUnitReshapes(cond).getDefiningOp<linalg::GenericOp>();
  if (!cmp || cmp.getNumDpsInputs() != 2 || cmp.getNumLoops() != 4)
    return false;
  auto pred = yielded(cmp).getDefiningOp<arith::CmpIOp>();
  if (!pred)
    return false;
  // Which loop each comparison operand reads (an arange along one loop).
  int l = loopReadBy(cmp, pred.getLhs()), r = loopReadBy(cmp, pred.getRhs());
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
FailureOr<std::array<int64_t, 4>>
attention::maskStrides(AffineMap map, RankedTensorType type) {
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

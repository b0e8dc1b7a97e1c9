//===- ChainMatching.h - matching op chains on tensors ----------*- C++ -*-===//
//
// Small predicates over linalg generics on tensors shared by the passes that
// recognize a chain of ops the frontends export and replace it by a fused
// kernel (fsdp-gpu-fuse-attention, fsdp-gpu-fuse-cross-entropy). They look
// through fsdp-autocast's widenings in bodies (`extf`) and its roundings of
// tensors between ops (`truncf` / `extf` on tensors).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_CONVERSION_GPU_CHAINMATCHING_H
#define FSDP_CONVERSION_GPU_CHAINMATCHING_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace mlir::fsdp::chain {

using ValueTest = llvm::function_ref<bool(Value)>;

/// `v` through the widenings fsdp-autocast puts in a body (bf16 to f32).
inline Value widened(Value v) {
  while (auto ext = v.getDefiningOp<arith::ExtFOp>())
    v = ext.getIn();
  return v;
}

/// Whether the body value `v` is (a widening of) block argument `i` of `g`.
inline bool isArg(Value v, linalg::GenericOp g, unsigned i) {
  auto arg = dyn_cast<BlockArgument>(widened(v));
  return arg && arg.getOwner() == g.getBody() && arg.getArgNumber() == i;
}

inline std::optional<double> constantFloat(Value v) {
  if (!v)
    return std::nullopt;
  v = widened(v);
  // A constant rounded to f32 in the body (torch's f64 scale factors).
  if (auto t = v.getDefiningOp<arith::TruncFOp>()) {
    std::optional<double> wide = constantFloat(t.getIn());
    if (!wide || !t.getType().isF32())
      return std::nullopt;
    return double(float(*wide));
  }
  FloatAttr attr;
  if (matchPattern(v, m_Constant(&attr)))
    return attr.getValueAsDouble();
  return std::nullopt;
}

/// The value `g` yields, before a narrowing to its output type.
inline Value yielded(linalg::GenericOp g) {
  Value v = g.getBody()->getTerminator()->getOperand(0);
  if (auto t = v.getDefiningOp<arith::TruncFOp>())
    return t.getIn();
  return v;
}

/// The test "is (a widening of) block argument `i` of `g`".
inline auto argOf(linalg::GenericOp g, unsigned i) {
  return [g, i](Value v) { return isArg(v, g, i); };
}

/// A binary op of type OpTy whose operands `a` and `b` match, in either
/// order.
template <typename OpTy>
inline bool commutes(Value v, ValueTest a, ValueTest b) {
  auto op = v.getDefiningOp<OpTy>();
  if (!op)
    return false;
  Value x = op->getOperand(0), y = op->getOperand(1);
  return (a(x) && b(y)) || (a(y) && b(x));
}

/// A binary op of type OpTy with operands `a` then `b`.
template <typename OpTy>
inline bool ordered(Value v, ValueTest a, ValueTest b) {
  auto op = v.getDefiningOp<OpTy>();
  return op && a(op->getOperand(0)) && b(op->getOperand(1));
}

/// In hasForm's maps: the constant 0 (a broadcast unit dimension).
inline constexpr unsigned kUnit = ~0u;

/// A generic on tensors with `numInputs` inputs, one output, the indexing
/// maps given as the dimensions each operand reads (kUnit: the constant 0),
/// and iterator types ('p' parallel, 'r' reduction).
inline bool hasForm(linalg::GenericOp g, unsigned numInputs,
                    ArrayRef<SmallVector<unsigned, 4>> maps,
                    StringRef iterators) {
  if (!g || !g.hasPureTensorSemantics() || g.getNumDpsInputs() != numInputs ||
      g.getNumDpsInits() != 1 || g->getNumResults() != 1)
    return false;
  SmallVector<utils::IteratorType> types = g.getIteratorTypesArray();
  unsigned n = iterators.size();
  if (types.size() != n)
    return false;
  for (unsigned i = 0; i < n; ++i)
    if ((iterators[i] == 'r') != (types[i] == utils::IteratorType::reduction))
      return false;
  SmallVector<AffineMap> actual = g.getIndexingMapsArray();
  if (actual.size() != maps.size())
    return false;
  MLIRContext *ctx = g.getContext();
  for (auto [map, dims] : llvm::zip(actual, maps)) {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(d == kUnit ? getAffineConstantExpr(0, ctx)
                                 : getAffineDimExpr(d, ctx));
    if (map != AffineMap::get(n, 0, exprs, ctx))
      return false;
  }
  return true;
}

/// The constant a `linalg.fill` writes into `init`.
inline std::optional<double> fillValue(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return std::nullopt;
  return constantFloat(fill.getInputs()[0]);
}

/// out += in0 * in1 (operands widened or not).
inline bool isMultiplyAccumulate(linalg::GenericOp g) {
  return commutes<arith::AddFOp>(
      yielded(g),
      [&](Value m) {
        return commutes<arith::MulFOp>(
            m, [&](Value x) { return isArg(x, g, 0); },
            [&](Value y) { return isArg(y, g, 1); });
      },
      [&](Value acc) { return isArg(acc, g, 2); });
}

/// A contraction C[d0, d1, d2] = sum_d3 A[a] B[b] of `numDims` = 4 loops
/// from a zero fill.
inline bool isContraction(linalg::GenericOp g, SmallVector<unsigned, 4> a,
                          SmallVector<unsigned, 4> b) {
  return hasForm(g, 2, {a, b, {0, 1, 2}}, "pppr") && isMultiplyAccumulate(g) &&
         fillValue(g.getDpsInits()[0]) == 0.0;
}

inline bool isTensorCast(Operation *op) {
  return isa<arith::TruncFOp, arith::ExtFOp>(op) &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

/// `v` before the tensor roundings autocast puts between ops.
inline Value source(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isTensorCast(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// The generic that produced `v` (through tensor roundings).
inline linalg::GenericOp producer(Value v) {
  return source(v).getDefiningOp<linalg::GenericOp>();
}

/// The ops using `v`, through tensor roundings (collected in `casts`).
inline void usersOf(Value v, llvm::SetVector<Operation *> &users,
                    llvm::SetVector<Operation *> &casts) {
  for (Operation *user : v.getUsers()) {
    if (isTensorCast(user)) {
      casts.insert(user);
      usersOf(user->getResult(0), users, casts);
    } else {
      users.insert(user);
    }
  }
}

/// Whether `v` is a constant splat of the float `value`.
inline bool isConstantSplat(Value v, double value) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  return attr.getSplatValue<APFloat>().convertToDouble() == value;
}

/// `v` through reshapes that only add or drop unit dimensions.
inline Value throughUnitReshapes(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
      break;
    auto from = cast<ShapedType>(def->getOperand(0).getType());
    auto to = cast<ShapedType>(v.getType());
    auto nonUnit = [](ShapedType t) {
      SmallVector<int64_t> dims;
      for (int64_t d : t.getShape())
        if (d != 1)
          dims.push_back(d);
      return dims;
    };
    if (nonUnit(from) != nonUnit(to))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// Whether `v` is arange(n) (a generic yielding its index), through unit
/// reshapes.
inline bool isArange(Value v) {
  auto g = throughUnitReshapes(v).getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 0 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != 1)
    return false;
  Value y = yielded(g);
  if (auto cast = y.getDefiningOp<arith::IndexCastOp>())
    y = cast.getIn();
  auto index = y.getDefiningOp<linalg::IndexOp>();
  return index && index.getDim() == 0;
}

/// A maximum of `a` and `b` (either order; NaN-propagating or not).
inline bool isMaximum(Value v, ValueTest a, ValueTest b) {
  return commutes<arith::MaximumFOp>(v, a, b) ||
         commutes<arith::MaxNumFOp>(v, a, b);
}

} // namespace mlir::fsdp::chain

#endif // FSDP_CONVERSION_GPU_CHAINMATCHING_H

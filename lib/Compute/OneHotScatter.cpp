//===- OneHotScatter.cpp - one-hot matrix products to scatter-add loops ---===//
//
// The PyTorch frontend writes the backward of `nn.Embedding` (and of
// `index_add`, `index_put(accumulate=True)`) as `one_hot(idx)^T @ grad`:
// upstream linalg has no scatter, and the one-hot product is what torch-mlir
// can lower. At a vocabulary of 50,257 that product is O(tokens x vocabulary
// x width) multiply-adds of zeros (10 GFLOP per 128 tokens of GPT-2 small).
// This pass recognizes a `linalg.matmul` on tensors one of whose operands is
// such a one-hot matrix -- built by elementwise `linalg.generic`s (and
// transposes) as `(idx[t] == r) ? 1 : 0` from an integer tensor `idx` and a
// row index (`linalg.index` or an arange tensor) -- and replaces it by an
// `scf.for` over the tokens that adds each token's row of the other operand
// to the output row its index names, in token order, in place:
//
//   C[idx[t], :] += B[t, :]    for t = 0, 1, ..., T - 1
//
// That is O(tokens x width), and each output element is summed in the order
// of aten's CPU `embedding_dense_backward` (per token, in index order), so
// the result is bitwise torch's. Indices outside the output's rows add
// nothing (as their all-zero one-hot column did). The product's `0 * x`
// terms are dropped: they differ only where x is inf or NaN, which the
// matrix product spread over every row and the scatter (like aten) keeps in
// its own row.
//
// With `device` (compute=gpu) the product becomes one
// `fsdp.scatter_add_rows` instead: host loops cannot read device buffers,
// and fsdp-gpu-scatter-add turns the op into the runtime's device
// scatter-add, which sums each output element in the same token order.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPONEHOTSCATTER
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A 2-D one-hot matrix M[i0, i1] = (idx(token) == class) ? 1 : 0: which of
/// its dims is the class (the output row or column the token goes to) and
/// which the token, and where the token's index is read: `indices` at
/// `tokenPos` of its dims (its other dims have size 1).
struct OneHot {
  unsigned classDim = 0;
  unsigned tokenDim = 1;
  Value indices;
  unsigned tokenPos = 0;
};

/// The same facts in terms of the loop dims of a linalg.generic's body.
struct LoopOneHot {
  unsigned classLoop;
  unsigned tokenLoop;
  Value indices;
  unsigned tokenPos;
};

/// The generic whose body holds `v`, if `v` is one of its block arguments
/// for an input, with that input's operand.
OpOperand *inputOf(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return nullptr;
  auto generic = dyn_cast<linalg::GenericOp>(arg.getOwner()->getParentOp());
  if (!generic || arg.getArgNumber() >= generic.getNumDpsInputs())
    return nullptr;
  return generic.getDpsInputOperand(arg.getArgNumber());
}

/// The single dim of `tensor` that is not of size 1 (a rank-1 tensor's dim
/// 0), if there is one.
std::optional<unsigned> onlyNonUnitDim(Value tensor) {
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  std::optional<unsigned> found;
  for (auto [i, n] : llvm::enumerate(type.getShape())) {
    if (n == 1)
      continue;
    if (found)
      return std::nullopt;
    found = i;
  }
  if (!found && type.getRank() == 1)
    found = 0;
  return found;
}

/// The loop dim an input map reads `tensor`'s dim `pos` with, if that
/// result is a plain loop dim.
std::optional<unsigned> loopOfResult(AffineMap map, unsigned pos) {
  if (pos >= map.getNumResults())
    return std::nullopt;
  auto dim = dyn_cast<AffineDimExpr>(map.getResult(pos));
  if (!dim)
    return std::nullopt;
  return dim.getPosition();
}

/// Whether the body value `v` is the loop index along some loop dim:
/// `linalg.index d`, an `index_cast` of it, or an element of an arange
/// tensor (a generic without inputs yielding its own index, possibly
/// expanded by unit dims) read along that loop dim.
std::optional<unsigned> rowIndexLoop(Value v) {
  if (auto cast = v.getDefiningOp<arith::IndexCastOp>())
    v = cast.getIn();
  if (auto index = v.getDefiningOp<linalg::IndexOp>())
    return index.getDim();
  OpOperand *in = inputOf(v);
  if (!in)
    return std::nullopt;
  auto consumer = cast<linalg::GenericOp>(in->getOwner());
  Value tensor = in->get();
  std::optional<unsigned> pos = onlyNonUnitDim(tensor);
  if (!pos)
    return std::nullopt;
  // Through an expansion by unit dims: the arange is its rank-1 source.
  Value source = tensor;
  unsigned sourcePos = *pos;
  if (auto expand = tensor.getDefiningOp<tensor::ExpandShapeOp>()) {
    source = expand.getSrc();
    if (cast<RankedTensorType>(source.getType()).getRank() != 1)
      return std::nullopt;
    sourcePos = 0;
  }
  auto arange = source.getDefiningOp<linalg::GenericOp>();
  if (!arange || arange.getNumDpsInputs() != 0 ||
      arange.getNumDpsInits() != 1 ||
      !arange.getMatchingIndexingMap(arange.getDpsInitOperand(0)).isIdentity())
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(arange.getBody()->getTerminator());
  Value y = yield.getOperand(0);
  if (auto cast = y.getDefiningOp<arith::IndexCastOp>())
    y = cast.getIn();
  auto index = y.getDefiningOp<linalg::IndexOp>();
  if (!index || index.getDim() != sourcePos)
    return std::nullopt;
  return loopOfResult(consumer.getMatchingIndexingMap(in), *pos);
}

/// Whether the body value `v` is an element of an integer tensor read along
/// one loop dim (its other dims of size 1): (loop dim, tensor, tensor dim).
std::optional<std::tuple<unsigned, Value, unsigned>> tokenRead(Value v) {
  OpOperand *in = inputOf(v);
  if (!in || !isa<IntegerType, IndexType>(v.getType()))
    return std::nullopt;
  auto consumer = cast<linalg::GenericOp>(in->getOwner());
  std::optional<unsigned> pos = onlyNonUnitDim(in->get());
  if (!pos)
    return std::nullopt;
  std::optional<unsigned> loop =
      loopOfResult(consumer.getMatchingIndexingMap(in), *pos);
  if (!loop)
    return std::nullopt;
  // Read the indices before an expansion by unit dims (the frontend's
  // unsqueeze) from the rank-1 source.
  if (auto expand = in->get().getDefiningOp<tensor::ExpandShapeOp>())
    if (cast<RankedTensorType>(expand.getSrc().getType()).getRank() == 1)
      return std::make_tuple(*loop, expand.getSrc(), 0u);
  return std::make_tuple(*loop, in->get(), *pos);
}

std::optional<OneHot> matchOneHot(Value tensor);

/// The input's one-hot structure in terms of the consumer's loop dims, if
/// the consumer reads the input with a permutation.
std::optional<LoopOneHot> throughInput(OpOperand *in) {
  auto consumer = cast<linalg::GenericOp>(in->getOwner());
  AffineMap map = consumer.getMatchingIndexingMap(in);
  if (!map.isPermutation() || map.getNumResults() != 2)
    return std::nullopt;
  std::optional<OneHot> inner = matchOneHot(in->get());
  if (!inner)
    return std::nullopt;
  return LoopOneHot{map.getDimPosition(inner->classDim),
                    map.getDimPosition(inner->tokenDim), inner->indices,
                    inner->tokenPos};
}

/// An i1 body value that is `idx[token] == class`.
std::optional<LoopOneHot> matchTest(Value c) {
  if (OpOperand *in = inputOf(c))
    return throughInput(in);
  auto cmp = c.getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return std::nullopt;
  for (auto [a, b] : {std::pair(cmp.getLhs(), cmp.getRhs()),
                      std::pair(cmp.getRhs(), cmp.getLhs())}) {
    std::optional<unsigned> row = rowIndexLoop(a);
    if (!row)
      continue;
    auto token = tokenRead(b);
    if (!token || std::get<0>(*token) == *row)
      continue;
    return LoopOneHot{*row, std::get<0>(*token), std::get<1>(*token),
                      std::get<2>(*token)};
  }
  return std::nullopt;
}

/// A float body value that is `(test) ? 1 : 0`.
std::optional<LoopOneHot> matchIndicator(Value y) {
  if (OpOperand *in = inputOf(y))
    return throughInput(in);
  if (auto conv = y.getDefiningOp<arith::UIToFPOp>())
    if (conv.getIn().getType().isInteger(1))
      return matchTest(conv.getIn());
  if (auto select = y.getDefiningOp<arith::SelectOp>()) {
    if (matchPattern(select.getTrueValue(), m_OneFloat()) &&
        matchPattern(select.getFalseValue(), m_AnyZeroFloat()))
      return matchTest(select.getCondition());
  }
  return std::nullopt;
}

/// Whether the 2-D tensor `tensor` is a one-hot matrix (see OneHot).
std::optional<OneHot> matchOneHot(Value tensor) {
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  if (!type || type.getRank() != 2 || !type.hasStaticShape())
    return std::nullopt;
  // A rounding to another float type (fsdp-autocast's bf16 operands) keeps
  // 0 and 1 exact.
  if (auto cast = tensor.getDefiningOp<arith::TruncFOp>())
    return matchOneHot(cast.getIn());
  if (auto cast = tensor.getDefiningOp<arith::ExtFOp>())
    return matchOneHot(cast.getIn());
  if (auto transpose = tensor.getDefiningOp<linalg::TransposeOp>()) {
    if (!transpose.hasPureTensorSemantics())
      return std::nullopt;
    std::optional<OneHot> inner = matchOneHot(transpose.getInput());
    if (!inner)
      return std::nullopt;
    ArrayRef<int64_t> perm = transpose.getPermutation();
    // Result dim i is input dim perm[i].
    OneHot out = *inner;
    out.classDim = perm[0] == inner->classDim ? 0 : 1;
    out.tokenDim = 1 - out.classDim;
    return out;
  }
  auto generic = tensor.getDefiningOp<linalg::GenericOp>();
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInits() != 1 || generic.getNumParallelLoops() != 2 ||
      generic.getNumLoops() != 2)
    return std::nullopt;
  AffineMap outMap =
      generic.getMatchingIndexingMap(generic.getDpsInitOperand(0));
  if (!outMap.isPermutation())
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  Value y = yield.getOperand(0);
  std::optional<LoopOneHot> loops =
      y.getType().isInteger(1) ? matchTest(y) : matchIndicator(y);
  if (!loops)
    return std::nullopt;
  // Loop dim d is result dim outMap^-1(d).
  OneHot out;
  out.classDim = *outMap.getResultPosition(
      getAffineDimExpr(loops->classLoop, tensor.getContext()));
  out.tokenDim = 1 - out.classDim;
  out.indices = loops->indices;
  out.tokenPos = loops->tokenPos;
  return out;
}

/// Erases `op` and then its producers that nothing else uses, if they are
/// side-effect free (the one-hot matrix and what built it).
void eraseDeadChain(Operation *op) {
  SmallVector<Operation *> work{op};
  while (!work.empty()) {
    Operation *cur = work.pop_back_val();
    if (!cur->use_empty() || !isMemoryEffectFree(cur))
      continue;
    SmallVector<Operation *> producers;
    for (Value v : cur->getOperands())
      if (Operation *def = v.getDefiningOp())
        producers.push_back(def);
    cur->erase();
    for (Operation *def : producers)
      if (llvm::find(work, def) == work.end())
        work.push_back(def);
  }
}

/// `out[idx[t], n] += other[t, n]` (rowsScatter) or `out[m, idx[t]] +=
/// other[m, t]` for every token t in order, as loops on tensors.
Value buildScatter(OpBuilder &b, Location loc, const OneHot &hot, Value other,
                   Value init, bool rowsScatter) {
  auto outType = cast<RankedTensorType>(init.getType());
  auto idxType = cast<RankedTensorType>(hot.indices.getType());
  int64_t tokens = idxType.getDimSize(hot.tokenPos);
  unsigned slotDim = rowsScatter ? 0 : 1;
  int64_t slots = outType.getDimSize(slotDim);
  int64_t width = outType.getDimSize(1 - slotDim);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value numTokens = arith::ConstantIndexOp::create(b, loc, tokens);
  Value numSlots = arith::ConstantIndexOp::create(b, loc, slots);
  Value numWidth = arith::ConstantIndexOp::create(b, loc, width);
  auto outer = scf::ForOp::create(
      b, loc, c0, numTokens, c1, ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t, ValueRange acc) {
        SmallVector<Value> at(idxType.getRank(), c0);
        at[hot.tokenPos] = t;
        Value raw = tensor::ExtractOp::create(b, loc, hot.indices, at);
        Value slot = raw;
        if (!raw.getType().isIndex())
          slot = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
        // Out of range (negative too, as unsigned): nothing to add, as the
        // token's one-hot column was all zeros. The inner loop then runs
        // no iteration and the clamped slot is never read.
        Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              slot, numSlots);
        Value safe = arith::SelectOp::create(b, loc, inRange, slot, c0);
        Value bound = arith::SelectOp::create(b, loc, inRange, numWidth, c0);
        auto inner = scf::ForOp::create(
            b, loc, c0, bound, c1, acc,
            [&](OpBuilder &b, Location loc, Value n, ValueRange acc) {
              SmallVector<Value> outAt = rowsScatter
                                             ? SmallVector<Value>{safe, n}
                                             : SmallVector<Value>{n, safe};
              SmallVector<Value> otherAt = rowsScatter
                                               ? SmallVector<Value>{t, n}
                                               : SmallVector<Value>{n, t};
              Value cur = tensor::ExtractOp::create(b, loc, acc[0], outAt);
              Value add = tensor::ExtractOp::create(b, loc, other, otherAt);
              Value sum = arith::AddFOp::create(b, loc, cur, add);
              Value next = tensor::InsertOp::create(b, loc, sum, acc[0], outAt);
              scf::YieldOp::create(b, loc, next);
            });
        scf::YieldOp::create(b, loc, inner.getResults());
      });
  return outer.getResult(0);
}

/// The same scatter as one `fsdp.scatter_add_rows` on the indices as a 1-D
/// tensor (the one-hot's other index dims have size 1), or null where the
/// device kernel has no form for the types (the product then stays).
Value buildDeviceScatter(OpBuilder &b, Location loc, const OneHot &hot,
                         Value other, Value init, bool rowsScatter) {
  auto idxType = cast<RankedTensorType>(hot.indices.getType());
  Type idxElem = idxType.getElementType();
  bool idxOk =
      idxElem.isIndex() || idxElem.isInteger(32) || idxElem.isInteger(64);
  Type elem = cast<RankedTensorType>(init.getType()).getElementType();
  if (!idxOk || !(elem.isF32() || elem.isBF16()))
    return Value();
  Value indices = hot.indices;
  if (idxType.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < idxType.getRank(); ++d)
      all.push_back(d);
    auto flat = RankedTensorType::get({idxType.getDimSize(hot.tokenPos)},
                                      idxType.getElementType());
    indices = tensor::CollapseShapeOp::create(
        b, loc, flat, indices, ArrayRef<ReassociationIndices>{all});
  }
  auto scatter = ScatterAddRowsOp::create(b, loc, init.getType(), other,
                                          indices, init, !rowsScatter);
  return scatter.getResult();
}

struct FSDPOneHotScatterPass
    : public mlir::fsdp::impl::FSDPOneHotScatterBase<FSDPOneHotScatterPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> matmuls;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics())
        return;
      auto matmul = dyn_cast<linalg::MatmulOp>(op.getOperation());
      // A matmul with a transposing or broadcasting indexing_maps attribute
      // reads its operands otherwise; only the plain C += A @ B is matched.
      if ((matmul && !matmul.hasUserDefinedMaps()) ||
          isWideningMatmul(op.getOperation()))
        matmuls.push_back(op);
    });
    for (linalg::LinalgOp op : matmuls)
      rewrite(op);
  }

  /// The generic fsdp-autocast writes for a matmul: C[m, n] += A[m, k] *
  /// B[k, n] with 16-bit operands widened in the body.
  static bool isWideningMatmul(Operation *op) {
    auto g = dyn_cast<linalg::GenericOp>(op);
    if (!g || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
        g.getNumLoops() != 3 || g.getNumReductionLoops() != 1 ||
        g.getIteratorTypesArray()[2] != utils::IteratorType::reduction)
      return false;
    MLIRContext *ctx = g.getContext();
    AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
               k = getAffineDimExpr(2, ctx);
    SmallVector<AffineMap> maps = g.getIndexingMapsArray();
    if (maps[0] != AffineMap::get(3, 0, {m, k}, ctx) ||
        maps[1] != AffineMap::get(3, 0, {k, n}, ctx) ||
        maps[2] != AffineMap::get(3, 0, {m, n}, ctx))
      return false;
    Block *body = g.getBody();
    auto arg = [&](Value v, unsigned i) {
      if (auto ext = v.getDefiningOp<arith::ExtFOp>())
        v = ext.getIn();
      return v == body->getArgument(i);
    };
    auto add =
        body->getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
    if (!add)
      return false;
    for (unsigned i = 0; i < 2; ++i) {
      auto mul = add->getOperand(i).getDefiningOp<arith::MulFOp>();
      if (mul && add->getOperand(1 - i) == body->getArgument(2) &&
          ((arg(mul.getLhs(), 0) && arg(mul.getRhs(), 1)) ||
           (arg(mul.getLhs(), 1) && arg(mul.getRhs(), 0))))
        return true;
    }
    return false;
  }

  void rewrite(linalg::LinalgOp op) {
    Value lhs = op.getDpsInputOperand(0)->get();
    Value rhs = op.getDpsInputOperand(1)->get();
    Value init = op.getDpsInitOperand(0)->get();
    auto outType = cast<RankedTensorType>(init.getType());
    auto elementOf = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType();
    };
    // The operands are in the result's type, or narrower floats that the
    // widening matmul's body extends.
    auto fits = [&](Value v) {
      auto e = dyn_cast<FloatType>(elementOf(v));
      return e && (e == outType.getElementType() ||
                   (isa<linalg::GenericOp>(op) &&
                    e.getWidth() <
                        outType.getElementType().getIntOrFloatBitWidth()));
    };
    if (!isa<FloatType>(outType.getElementType()) || !fits(lhs) || !fits(rhs))
      return;
    // C[m, n] += sum_k A[m, k] B[k, n]: a one-hot A with its class along m
    // scatters rows of B into rows of C; a one-hot B with its class along
    // n scatters columns of A into columns of C.
    std::optional<OneHot> hot = matchOneHot(lhs);
    bool rows = hot && hot->classDim == 0;
    if (!rows) {
      hot = matchOneHot(rhs);
      if (!hot || hot->classDim != 1)
        return;
    }
    OpBuilder b(op);
    Value other = rows ? rhs : lhs;
    if (elementOf(other) != outType.getElementType()) {
      auto wide = RankedTensorType::get(
          cast<RankedTensorType>(other.getType()).getShape(),
          outType.getElementType());
      other = arith::ExtFOp::create(b, op.getLoc(), wide, other);
    }
    Value scattered;
    if (device) {
      scattered = buildDeviceScatter(b, op.getLoc(), *hot, other, init, rows);
      if (!scattered)
        return;
    } else {
      scattered = buildScatter(b, op.getLoc(), *hot, other, init, rows);
    }
    if (report)
      op->emitRemark() << "one-hot matrix product as a "
                       << (device ? "device " : "") << "scatter-add over "
                       << cast<RankedTensorType>(hot->indices.getType())
                              .getDimSize(hot->tokenPos)
                       << " tokens";
    op->getResult(0).replaceAllUsesWith(scattered);
    eraseDeadChain(op);
  }
};

} // namespace

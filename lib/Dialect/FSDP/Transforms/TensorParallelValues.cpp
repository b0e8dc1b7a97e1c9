//===- TensorParallelValues.cpp - values and collectives of TP ------------===//
//
// What fsdp-tensor-parallel inserts: rank-local copies of shape-only
// values, all-gathers of sequence-split activations, this rank's part of a
// replicated value, and the collective that resolves a partial result
// (all-reduce, or with sequence parallelism a reduce-scatter along the
// tokens). docs/TENSOR_PARALLEL.md.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"
#include "TransformUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;
using mlir::fsdp::detail::castFloatElements;

std::string tensor_parallel::describe(Sharding s) {
  if (!s.isSharded())
    return "replicated";
  return std::string(s.sequence ? "sequence-split" : "sharded") +
         " along dim " + std::to_string(s.dim);
}

RankedTensorType tensor_parallel::localType(RankedTensorType type, Sharding s,
                                            int64_t size) {
  if (!s.isSharded())
    return type;
  SmallVector<int64_t> shape(type.getShape());
  shape[s.dim] /= size;
  return type.clone(shape);
}

Value tensor_parallel::localCopy(TPFunction &tp, Value v, int64_t dim) {
  auto key = std::make_pair(v, dim);
  if (Value known = tp.localCopies.lookup(key))
    return known;
  Operation *def = v.getDefiningOp();
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!def || !type || !type.hasStaticShape() ||
      type.getDimSize(dim) % tp.size != 0)
    return {};
  auto local = localType(type, Sharding{dim}, tp.size);
  OpBuilder b(def);
  b.setInsertionPointAfter(def);
  Value copy;
  if (isa<tensor::EmptyOp>(def)) {
    copy = tensor::EmptyOp::create(b, def->getLoc(), local.getShape(),
                                   local.getElementType());
  } else if (auto fill = dyn_cast<linalg::FillOp>(def)) {
    Value init = localCopy(tp, fill.getOutputs()[0], dim);
    if (!init)
      return {};
    b.setInsertionPointAfter(def);
    copy = linalg::FillOp::create(b, def->getLoc(), fill.getInputs()[0], init)
               .getResult(0);
  } else if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<SplatElementsAttr>(cst.getValue());
    if (!dense)
      return {};
    copy = arith::ConstantOp::create(
        b, def->getLoc(),
        SplatElementsAttr::get(local, dense.getSplatValue<Attribute>()));
  } else {
    return {};
  }
  tp.localCopies[key] = copy;
  tp.shardings[copy] = Sharding{dim};
  return copy;
}

namespace {

Value transposeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
}

/// Runs `collective` (which acts along dim 0) along `dim` of `v`: the dim
/// is moved to the front and back with transposes.
Value alongDim(OpBuilder &b, Location loc, Value v, int64_t dim,
               function_ref<Value(Value)> collective) {
  if (dim == 0)
    return collective(v);
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  SmallVector<int64_t> perm{dim}, inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  return transposeTo(b, loc, collective(transposeTo(b, loc, v, perm)), inverse);
}

RankedTensorType scaledDim0(Value v, int64_t num, int64_t den) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = shape[0] * num / den;
  return type.clone(shape);
}

/// Where a value's collective goes: right after it is made.
void setInsertionAfter(OpBuilder &b, Value v) {
  if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
}

} // namespace

/// The all-gather along dim 0 of `x` quantized in the step's format (each
/// rank's block viewed as [rows, cols] with cols its last dim), or null
/// where there is no format or the block does not fit it. It is the bits of
/// fsdp.quantized_all_gather as local steps around an asynchronous byte
/// all-gather (the amax all-reduce of the per-tensor formats, quantize,
/// all_gather_start; wait, dequantize), as fsdp-quantize-gathers splits
/// the parameter gathers; overlapGathers moves the wait to the first use.
static Value quantizedGather(TPFunction &tp, OpBuilder &b, Location loc,
                             Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  Type elem = type.getElementType();
  if (!tp.gatherFormat || (!elem.isF32() && !elem.isBF16()) ||
      !type.hasStaticShape() || type.getRank() < 2)
    return {};
  int64_t cols = type.getShape().back();
  int64_t rows = type.getNumElements() / cols;
  if (quantShapeError(*tp.gatherFormat, rows, cols))
    return {};
  ReassociationIndices all;
  for (int64_t d = 0; d < type.getRank(); ++d)
    all.push_back(d);
  Value flat = tensor::CollapseShapeOp::create(
      b, loc, x, ArrayRef<ReassociationIndices>{all});
  auto gatheredType =
      RankedTensorType::get({type.getNumElements() * tp.size}, elem);
  auto format = QuantFormatAttr::get(b.getContext(), *tp.gatherFormat);
  DenseI64ArrayAttr shape = b.getDenseI64ArrayAttr({rows, cols});
  ArrayAttr axes = b.getStrArrayAttr({tp.axis});
  Value amax;
  if (needsGroupAmax(*tp.gatherFormat)) {
    auto amaxType = RankedTensorType::get({1}, b.getF32Type());
    amax = AllReduceOp::create(
        b, loc, amaxType, QuantAmaxOp::create(b, loc, amaxType, flat),
        tp.meshRef, axes, ReduceKindAttr::get(b.getContext(), ReduceKind::max));
  }
  int64_t wire = quantWireBytes(*tp.gatherFormat, rows, cols);
  Value packet =
      QuantizeOp::create(b, loc, RankedTensorType::get({wire}, b.getI8Type()),
                         flat, amax, format, shape);
  auto bytesType = RankedTensorType::get({wire * tp.size}, b.getI8Type());
  auto start =
      AllGatherStartOp::create(b, loc, RequestType::get(b.getContext()),
                               bytesType, packet, tp.meshRef, axes,
                               /*members=*/DenseI64ArrayAttr());
  auto wait =
      WaitOp::create(b, loc, bytesType, start.getRequest(), start.getResult());
  tp.gatherWaits.push_back(wait);
  Value gathered = DequantizeOp::create(b, loc, gatheredType, wait.getResult(),
                                        format, shape);
  ++tp.quantizedGathers;
  return tensor::ExpandShapeOp::create(b, loc, scaledDim0(x, tp.size, 1),
                                       gathered,
                                       ArrayRef<ReassociationIndices>{all});
}

Value tensor_parallel::gatherSequence(TPFunction &tp, Value v) {
  Sharding s = shardingOf(tp, v);
  if (!s.isSharded() || !s.sequence)
    return v;
  if (Value known = tp.gathered.lookup(v))
    return known;
  OpBuilder b(v.getContext());
  setInsertionAfter(b, v);
  Location loc = v.getLoc();
  // A transpose of a sequence-split value (the backward's dY^T of a
  // row-parallel product, whose dX needs dY gathered too): the transpose of
  // the source's whole value, so one all-gather serves both.
  if (auto transpose = v.getDefiningOp<linalg::TransposeOp>()) {
    Value source = transpose.getInput();
    Sharding from = shardingOf(tp, source);
    if (from.sequence && from.outer == s.outer &&
        from.dim == transpose.getPermutation()[s.dim]) {
      Value whole = gatherSequence(tp, source);
      b.setInsertionPointAfter(transpose);
      whole = transposeTo(b, loc, whole, transpose.getPermutation());
      tp.gathered[v] = whole;
      return whole;
    }
  }
  Value whole = alongDim(b, loc, v, s.dim, [&](Value x) -> Value {
    if (Value q = quantizedGather(tp, b, loc, x))
      return q;
    return AllGatherOp::create(b, loc, scaledDim0(x, tp.size, 1), x, tp.meshRef,
                               b.getStrArrayAttr({tp.axis}),
                               /*members=*/DenseI64ArrayAttr())
        .getResult();
  });
  ++tp.allGathers;
  tp.gathered[v] = whole;
  return whole;
}

void tensor_parallel::gatherSequenceOperands(TPFunction &tp, Operation *op) {
  for (OpOperand &operand : op->getOpOperands())
    if (shardingOf(tp, operand.get()).sequence)
      operand.set(gatherSequence(tp, operand.get()));
}

bool tensor_parallel::canTakeRankPart(const TPFunction &tp, Value v,
                                      int64_t dim) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() && dim < type.getRank() &&
         type.getDimSize(dim) % tp.size == 0;
}

Value tensor_parallel::rankPart(TPFunction &tp, Value v, int64_t dim) {
  if (Value copy = localCopy(tp, v, dim))
    return copy;
  if (!canTakeRankPart(tp, v, dim))
    return {};
  auto key = std::make_pair(v, dim);
  if (Value known = tp.rankParts.lookup(key))
    return known;
  OpBuilder b(v.getContext());
  setInsertionAfter(b, v);
  Location loc = v.getLoc();
  // Every rank holds the whole value: its part is a slice at its offset
  // (the rank's index on the axis is computed once per function).
  auto type = cast<RankedTensorType>(v.getType());
  int64_t local = type.getDimSize(dim) / tp.size;
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(b.getIndexAttr(d == dim ? local : type.getDimSize(d)));
  offsets[dim] = rankOffset(tp, b, loc, local);
  Value part = tensor::ExtractSliceOp::create(
      b, loc, localType(type, Sharding{dim}, tp.size), v, offsets, sizes,
      strides);
  tp.rankParts[key] = part;
  tp.shardings[part] = Sharding{dim, /*sequence=*/true};
  return part;
}

/// The dim a partial activation is split along under sequence
/// parallelism: its outermost dim of size > 1 (the tokens of [B*S, H] or
/// of [1, S, H]; the samples of [B, S, H]), which must not be its last
/// (the features) and must divide evenly. -1: not an activation, or one
/// value per token ([N, 1]: a vocabulary-parallel cross-entropy's sum of
/// exponentials), which one all-reduce resolves where a reduce-scatter
/// would need an all-gather back for the vocabulary-split logits.
static int64_t tokenDim(const TPFunction &tp, RankedTensorType type) {
  if (type.getRank() < 2 || !type.hasStaticShape() ||
      type.getShape().back() == 1)
    return -1;
  for (int64_t d = 0; d + 1 < type.getRank(); ++d)
    if (type.getDimSize(d) != 1)
      return type.getDimSize(d) % tp.size == 0 ? d : -1;
  return -1;
}

Value tensor_parallel::resolvePartial(TPFunction &tp, OpBuilder &b,
                                      Location loc, Value partial,
                                      ReduceKind kind, bool mayScatter,
                                      Sharding *result) {
  auto type = cast<RankedTensorType>(partial.getType());
  Type elem = type.getElementType();
  Value p = castFloatElements(b, loc, partial,
                              kind == ReduceKind::sum ? tp.reduceType : Type());
  int64_t dim = (tp.sequenceParallel && mayScatter && kind == ReduceKind::sum)
                    ? tokenDim(tp, type)
                    : -1;
  Value reduced;
  if (dim >= 0) {
    reduced = alongDim(b, loc, p, dim, [&](Value x) -> Value {
      return ReduceScatterOp::create(b, loc, scaledDim0(x, 1, tp.size), x,
                                     tp.meshRef, b.getStrArrayAttr({tp.axis}),
                                     ReduceKindAttr::get(b.getContext(), kind),
                                     /*members=*/DenseI64ArrayAttr())
          .getResult();
    });
    ++tp.reduceScatters;
    *result = Sharding{dim, /*sequence=*/true};
  } else {
    reduced = AllReduceOp::create(b, loc, p.getType(), p, tp.meshRef,
                                  b.getStrArrayAttr({tp.axis}),
                                  ReduceKindAttr::get(b.getContext(), kind))
                  .getResult();
    ++tp.allReduces;
    *result = Sharding{};
  }
  return castFloatElements(b, loc, reduced, elem);
}

/// `linalg.generic` adding two tensors of its result's shape elementwise.
static bool isElementwiseSum(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }) ||
      generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)))
    return false;
  Block &body = generic.getRegion().front();
  if (body.getOperations().size() != 2)
    return false;
  Operation *add = &body.front();
  if (!isa<arith::AddFOp, arith::AddIOp>(add))
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return yield.getValues().size() == 1 &&
         yield.getValues()[0] == add->getResult(0) &&
         llvm::is_contained(add->getOperands(), body.getArgument(0)) &&
         llvm::is_contained(add->getOperands(), body.getArgument(1));
}

static Value resolvePending(TPFunction &tp, Value v) {
  if (Value known = tp.resolved.lookup(v))
    return known;
  PendingPartial pending = tp.partials.lookup(v);
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  Sharding result;
  Value sum = resolvePartial(tp, b, v.getLoc(), v, ReduceKind::sum,
                             pending.mayScatter, &result);
  tp.shardings[sum] = result;
  tp.resolved[v] = sum;
  return sum;
}

bool tensor_parallel::mergeOrResolvePartials(TPFunction &tp, Operation *op) {
  if (tp.partials.empty())
    return false;
  // A reshape of a partial sum is the partial sum of the reshape: the
  // exported backward reshapes each input gradient before adding them.
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op) &&
      tp.partials.count(op->getOperand(0)) &&
      !tp.resolved.count(op->getOperand(0))) {
    tp.partials[op->getResult(0)] = tp.partials.lookup(op->getOperand(0));
    return true;
  }
  if (isElementwiseSum(op) && op->getNumOperands() == 3 &&
      tp.partials.count(op->getOperand(0)) &&
      tp.partials.count(op->getOperand(1)) &&
      !tp.resolved.count(op->getOperand(0)) &&
      !tp.resolved.count(op->getOperand(1))) {
    // The sum of partial sums is the partial sum of the sum.
    PendingPartial a = tp.partials.lookup(op->getOperand(0));
    PendingPartial c = tp.partials.lookup(op->getOperand(1));
    tp.partials[op->getResult(0)] =
        PendingPartial{a.mayScatter && c.mayScatter};
    return true;
  }
  op->walk([&](Operation *inner) {
    for (OpOperand &operand : inner->getOpOperands())
      if (tp.partials.count(operand.get()))
        operand.set(resolvePending(tp, operand.get()));
  });
  return false;
}

/// Whether `user` only rearranges the gathered value `v` and can move with
/// its wait: a dequantize, a reshape, or a transpose of it whose init is
/// made for it alone (returned in `init`, which moves too).
static bool rearrangesGathered(Operation *user, Value v, Operation *&init) {
  init = nullptr;
  if (isa<DequantizeOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
    return true;
  auto transpose = dyn_cast<linalg::TransposeOp>(user);
  if (!transpose || transpose.getInput() != v)
    return false;
  auto empty = transpose.getInit().getDefiningOp<tensor::EmptyOp>();
  if (!empty || !empty->hasOneUse() || empty->getBlock() != user->getBlock())
    return false;
  init = empty;
  return true;
}

void tensor_parallel::overlapGathers(TPFunction &tp) {
  Block &body = tp.func.getBody().front();
  for (Operation *wait : tp.gatherWaits) {
    // The wait and what only rearranges its result (the dequantize, the
    // reshapes back to the value's shape, transposes of a gather along
    // another dim).
    llvm::SetVector<Operation *> chain, inits;
    chain.insert(wait);
    for (size_t i = 0; i < chain.size(); ++i)
      for (Value r : chain[i]->getResults())
        for (Operation *user : r.getUsers()) {
          Operation *init;
          if (user->getBlock() == &body && rearrangesGathered(user, r, init)) {
            chain.insert(user);
            if (init)
              inits.insert(init);
          }
        }
    // The first op that reads it otherwise (the return at the latest).
    Operation *first = body.getTerminator();
    for (Operation *op : chain)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (top && !chain.contains(top) && top->isBeforeInBlock(first))
            first = top;
        }
    SmallVector<Operation *> ordered(chain.begin(), chain.end());
    ordered.append(inits.begin(), inits.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : ordered)
      op->moveBefore(first);
  }
}

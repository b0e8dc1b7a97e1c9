//===- ExpandCollectives.cpp - semantic collectives to flat ones ----------===//
//
// Every byte a parameter gather or a gradient reduction moves becomes
// visible: the pack (pad, per-slot narrow, chunk-cat, strided swap) and
// unpack are upstream tensor/linalg ops around flat 1-D fsdp collectives.
//
//===----------------------------------------------------------------------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEXPANDCOLLECTIVES
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

namespace {

using Shape = SmallVector<int64_t>;

/// Builds the pack/unpack code for one collective, at one insertion point.
struct Expander {
  OpBuilder &b;
  Location loc;
  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  lm::Layout model;
  std::vector<int64_t> global;
  /// Phase and unit of the semantic op, the origin of every flat collective
  /// it expands to: bucketing and scheduling know where it belongs.
  OriginAttr origin = {};

  /// Flat collectives created so far (the pass's statistic).
  int64_t created = 0;

  Value tag(Value v) {
    cast<CollectiveOpInterface>(v.getDefiningOp()).setOrigin(origin);
    ++created;
    return v;
  }

  RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  Value flatten(Value v) {
    auto t = typeOf(v);
    if (t.getRank() == 1)
      return v;
    // A value this expander just reshaped from a flat collective result
    // (nested dims, HSDP): reuse the flat value instead of a round trip.
    if (auto expand = v.getDefiningOp<tensor::ExpandShapeOp>()) {
      Value src = expand.getSrc();
      if (typeOf(src).getRank() == 1) {
        if (expand->use_empty())
          expand->erase();
        return src;
      }
    }
    ReassociationIndices all;
    for (int64_t d = 0; d < t.getRank(); ++d)
      all.push_back(d);
    auto flat = RankedTensorType::get({t.getNumElements()}, t.getElementType());
    return tensor::CollapseShapeOp::create(b, loc, flat, v,
                                           ArrayRef<ReassociationIndices>{all});
  }

  Value reshapeFlat(Value flat, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, typeOf(flat).getElementType());
    if (shape.size() == 1)
      return flat;
    ReassociationIndices all;
    for (size_t d = 0; d < shape.size(); ++d)
      all.push_back(d);
    return tensor::ExpandShapeOp::create(b, loc, t, flat,
                                         ArrayRef<ReassociationIndices>{all});
  }

  Value zeros(ArrayRef<int64_t> shape, Type elem) {
    Value empty = tensor::EmptyOp::create(b, loc, shape, elem);
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elem));
    return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
        .getResult(0);
  }

  /// Axis names of the group that shards dim `d`.
  ArrayAttr axisNames(ArrayRef<int64_t> axes) {
    SmallVector<Attribute> names;
    for (int64_t a : axes)
      names.push_back(mesh.getAxisNames()[a]);
    return b.getArrayAttr(names);
  }

  SmallVector<OpFoldResult> indexAttrs(ArrayRef<int64_t> v) {
    SmallVector<OpFoldResult> out;
    for (int64_t x : v)
      out.push_back(b.getIndexAttr(x));
    return out;
  }

  /// Slice of `src` starting at `offsets` with `sizes`; dropping a leading
  /// unit dim when `dropLeading` (rank-reducing).
  Value slice(Value src, ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes,
              bool dropLeading) {
    auto t = typeOf(src);
    Shape resultShape(sizes.begin() + (dropLeading ? 1 : 0), sizes.end());
    auto rt = RankedTensorType::get(resultShape, t.getElementType());
    Shape ones(sizes.size(), 1);
    return tensor::ExtractSliceOp::create(b, loc, rt, src, indexAttrs(offsets),
                                          indexAttrs(sizes), indexAttrs(ones));
  }

  Value insert(Value src, Value dest, ArrayRef<int64_t> offsets,
               ArrayRef<int64_t> sizes) {
    Shape ones(sizes.size(), 1);
    return tensor::InsertSliceOp::create(b, loc, src, dest, indexAttrs(offsets),
                                         indexAttrs(sizes), indexAttrs(ones));
  }

  /// Whether slot j holds exactly [j*c, j*c + size_j) (ceil or even): the
  /// gathered slots then read, in order, as the tensor plus trailing padding.
  static bool isPaddedPrefix(ArrayRef<lm::DimShard> slots, int64_t c) {
    for (auto [j, s] : llvm::enumerate(slots)) {
      if (s.ranges.size() > 1)
        return false;
      if (!s.ranges.empty() && s.ranges[0].begin != (int64_t)j * c)
        return false;
    }
    return true;
  }

  /// Whether the slots, in order, each hold one range and together cover
  /// the dim in order (any policy): chunk-cat applies.
  static bool isInOrder(ArrayRef<lm::DimShard> slots) {
    int64_t next = 0;
    for (const lm::DimShard &s : slots) {
      if (s.ranges.size() > 1)
        return false;
      if (!s.ranges.empty()) {
        if (s.ranges[0].begin != next)
          return false;
        next = s.ranges[0].end;
      }
    }
    return true;
  }

  /// A single StridedShard axis on dim d: the `[k, sf]` swap applies.
  const lm::Placement *soleStrided(ArrayRef<int64_t> axes) {
    if (axes.size() != 1)
      return nullptr;
    const lm::Placement &p = model.placements[axes[0]];
    return p.kind == lm::Placement::Kind::StridedShard ? &p : nullptr;
  }

  /// Size of the group over `axes`.
  int64_t groupSize(ArrayRef<int64_t> axes) {
    int64_t k = 1;
    for (int64_t a : axes)
      k *= model.meshShape[a];
    return k;
  }

  /// Gathers dim `d` of `cur` (every other sharded dim already handled or
  /// still in slot form) and unpacks it to the full size.
  Value gatherDim(Value cur, int64_t d) {
    std::vector<int64_t> axes = lm::axesShardingDim(model, d);
    int64_t k = groupSize(axes);
    auto t = typeOf(cur);
    Shape slotShape(t.getShape());
    std::vector<lm::DimShard> slots = lm::slotsAlongDim(model, global, d);
    auto gatheredType =
        RankedTensorType::get({k * t.getNumElements()}, t.getElementType());
    Value gathered = tag(AllGatherOp::create(b, loc, gatheredType, flatten(cur),
                                             meshRef, axisNames(axes),
                                             /*members=*/DenseI64ArrayAttr()));
    if (d == 0 && isPaddedPrefix(slots, slotShape[d]))
      return unpackPaddedPrefix(gathered, slotShape, k);
    if (const lm::Placement *p = soleStrided(axes))
      return unpackStrided(gathered, slotShape, d, k, p->splitFactor);
    Shape blocked = {k};
    blocked.append(slotShape.begin(), slotShape.end());
    Value blocks = reshapeFlat(gathered, blocked);
    if (isInOrder(slots))
      return unpackChunkCat(blocks, blocked, slots, d);
    return unpackRanges(blocks, blocked, slots, d);
  }

  /// Shard(0), ceil or even: the first n rows of [k*c, ...] (a view).
  Value unpackPaddedPrefix(Value gathered, ArrayRef<int64_t> slotShape,
                           int64_t k) {
    Shape rows(slotShape);
    rows[0] = k * slotShape[0];
    Value all = reshapeFlat(gathered, rows);
    if (rows[0] == global[0])
      return all;
    Shape full(slotShape);
    full[0] = global[0];
    return slice(all, Shape(full.size(), 0), full, /*dropLeading=*/false);
  }

  /// StridedShard: [k, sf, m, ...] -> [sf, k, m, ...] -> [n, ...].
  Value unpackStrided(Value gathered, ArrayRef<int64_t> slotShape, int64_t d,
                      int64_t k, int64_t sf) {
    Type elem = typeOf(gathered).getElementType();
    int64_t m = slotShape[d] / sf;
    Shape split = {k};
    for (int64_t i = 0; i < (int64_t)slotShape.size(); ++i) {
      if (i == d)
        split.append({sf, m});
      else
        split.push_back(slotShape[i]);
    }
    Value v = reshapeFlat(gathered, split);
    // Move k next to m: dims [k, pre..., sf, m, post...] ->
    // [pre..., sf, k, m, post...].
    SmallVector<int64_t> perm;
    for (int64_t i = 1; i <= d; ++i)
      perm.push_back(i);
    perm.append({d + 1, 0});
    for (int64_t i = d + 2; i < (int64_t)split.size(); ++i)
      perm.push_back(i);
    Shape permuted;
    for (int64_t i : perm)
      permuted.push_back(split[i]);
    Value init = tensor::EmptyOp::create(b, loc, permuted, elem);
    Value tr =
        linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
    SmallVector<ReassociationIndices> groups;
    for (int64_t i = 0; i < (int64_t)slotShape.size(); ++i) {
      if (i < d)
        groups.push_back({i});
      else if (i == d)
        groups.push_back({d, d + 1, d + 2});
      else
        groups.push_back({i + 2});
    }
    Shape full(slotShape);
    full[d] = global[d];
    return tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get(full, elem), tr, groups);
  }

  /// Slot j's [pos, pos + len) along dim d of the gathered [k, slot...].
  Value slotPiece(Value blocks, ArrayRef<int64_t> blocked, int64_t d, int64_t j,
                  int64_t pos, int64_t len) {
    Shape offsets(blocked.size(), 0), sizes(blocked);
    offsets[0] = j;
    sizes[0] = 1;
    offsets[d + 1] = pos;
    sizes[d + 1] = len;
    return slice(blocks, offsets, sizes, /*dropLeading=*/true);
  }

  /// Chunk-cat: concatenate the slots, each narrowed to its true size.
  Value unpackChunkCat(Value blocks, ArrayRef<int64_t> blocked,
                       ArrayRef<lm::DimShard> slots, int64_t d) {
    SmallVector<Value> pieces;
    for (auto [j, s] : llvm::enumerate(slots))
      if (s.localSize > 0)
        pieces.push_back(slotPiece(blocks, blocked, d, j, 0, s.localSize));
    if (pieces.size() == 1)
      return pieces.front();
    return tensor::ConcatOp::create(b, loc, d, pieces);
  }

  /// General (nested axes): place every owned range where it belongs.
  Value unpackRanges(Value blocks, ArrayRef<int64_t> blocked,
                     ArrayRef<lm::DimShard> slots, int64_t d) {
    Shape full(blocked.begin() + 1, blocked.end());
    full[d] = global[d];
    Value dest =
        tensor::EmptyOp::create(b, loc, full, typeOf(blocks).getElementType());
    for (auto [j, s] : llvm::enumerate(slots)) {
      int64_t pos = 0;
      for (const lm::Range &r : s.ranges) {
        Value piece = slotPiece(blocks, blocked, d, j, pos, r.size());
        Shape offsets(full.size(), 0), sizes = full;
        offsets[d] = r.begin;
        sizes[d] = r.size();
        dest = insert(piece, dest, offsets, sizes);
        pos += r.size();
      }
    }
    return dest;
  }

  /// Packs dim `d` of the gradient into [k, slot...] (the inverse of
  /// gatherDim's unpack), reduce-scatters it and returns this rank's slot.
  Value reduceScatterDim(Value cur, int64_t d, ReduceKind reduce) {
    std::vector<int64_t> axes = lm::axesShardingDim(model, d);
    int64_t k = groupSize(axes);
    auto t = typeOf(cur);
    Shape fullShape(t.getShape());
    std::vector<lm::DimShard> slots = lm::slotsAlongDim(model, global, d);
    int64_t c = slots.empty() ? fullShape[d] : slots[0].slotSize;
    Shape slotShape = fullShape;
    slotShape[d] = c;
    Value packed;
    if (d == 0 && isPaddedPrefix(slots, c))
      packed = packPaddedPrefix(cur, k * c);
    else if (const lm::Placement *p = soleStrided(axes))
      packed = packStrided(cur, d, k, c / p->splitFactor, p->splitFactor);
    else
      packed = packSlots(cur, slotShape, slots, d, k);
    Value flat = flatten(packed);
    auto outType = RankedTensorType::get({typeOf(flat).getNumElements() / k},
                                         t.getElementType());
    Value scattered = tag(
        ReduceScatterOp::create(b, loc, outType, flat, meshRef, axisNames(axes),
                                ReduceKindAttr::get(b.getContext(), reduce),
                                /*members=*/DenseI64ArrayAttr()));
    return reshapeFlat(scattered, slotShape);
  }

  /// Pads the trailing rows with zeros: [k*c, ...] is already [k, slot].
  Value packPaddedPrefix(Value cur, int64_t rows) {
    auto t = typeOf(cur);
    if (rows == t.getDimSize(0))
      return cur;
    Shape low(t.getRank(), 0), high(t.getRank(), 0);
    high[0] = rows - t.getDimSize(0);
    Shape padded(t.getShape());
    padded[0] = rows;
    Value zero =
        arith::ConstantOp::create(b, loc, b.getZeroAttr(t.getElementType()));
    return tensor::PadOp::create(b, loc, t.clone(padded), cur, indexAttrs(low),
                                 indexAttrs(high), zero);
  }

  /// [n, ...] -> [sf, k, m, ...] -> [k, sf, m, ...].
  Value packStrided(Value cur, int64_t d, int64_t k, int64_t m, int64_t sf) {
    auto t = typeOf(cur);
    Type elem = t.getElementType();
    Shape split;
    SmallVector<ReassociationIndices> groups;
    for (int64_t i = 0; i < t.getRank(); ++i) {
      int64_t at = split.size();
      if (i == d) {
        groups.push_back({at, at + 1, at + 2});
        split.append({sf, k, m});
      } else {
        groups.push_back({at});
        split.push_back(t.getDimSize(i));
      }
    }
    Value v = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(split, elem), cur, groups);
    SmallVector<int64_t> perm = {d + 1};
    for (int64_t i = 0; i < (int64_t)split.size(); ++i)
      if (i != d + 1)
        perm.push_back(i);
    Shape permuted;
    for (int64_t i : perm)
      permuted.push_back(split[i]);
    Value init = tensor::EmptyOp::create(b, loc, permuted, elem);
    return linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
  }

  /// Chunk-cat's inverse: every slot narrowed from the gradient, padded
  /// with zeros to the slot size, stacked along a new leading dim.
  Value packSlots(Value cur, ArrayRef<int64_t> slotShape,
                  ArrayRef<lm::DimShard> slots, int64_t d, int64_t k) {
    Shape fullShape(typeOf(cur).getShape());
    Shape blocked = {k};
    blocked.append(slotShape.begin(), slotShape.end());
    Value packed = zeros(blocked, typeOf(cur).getElementType());
    for (auto [j, s] : llvm::enumerate(slots)) {
      int64_t pos = 0;
      for (const lm::Range &r : s.ranges) {
        Shape offsets(fullShape.size(), 0), sizes = fullShape;
        offsets[d] = r.begin;
        sizes[d] = r.size();
        Value piece = slice(cur, offsets, sizes, /*dropLeading=*/false);
        Shape dstOffsets(blocked.size(), 0), dstSizes = blocked;
        dstOffsets[0] = j;
        dstSizes[0] = 1;
        dstOffsets[d + 1] = pos;
        dstSizes[d + 1] = r.size();
        packed = insert(piece, packed, dstOffsets, dstSizes);
        pos += r.size();
      }
    }
    return packed;
  }

  Value allReduce(Value cur, ArrayRef<int64_t> axes, ReduceKind reduce) {
    auto t = typeOf(cur);
    Value flat = flatten(cur);
    Value r = tag(AllReduceOp::create(
        b, loc, flat.getType(), flat, meshRef, axisNames(axes),
        ReduceKindAttr::get(b.getContext(), reduce)));
    return reshapeFlat(r, t.getShape());
  }

  Value castTo(Value v, Type elem) {
    return mlir::fsdp::detail::castFloatElements(b, loc, v, elem);
  }
};

struct ExpandCollectivesPass
    : public mlir::fsdp::impl::FSDPExpandCollectivesBase<
          ExpandCollectivesPass> {
  void runOnOperation() override {
    SymbolTableCollection tables;
    WalkResult result = getOperation().walk([&](Operation *op) {
      if (auto gather = dyn_cast<ParamGatherOp>(op))
        return failed(expand(gather, tables)) ? WalkResult::interrupt()
                                              : WalkResult::advance();
      if (auto reduce = dyn_cast<GradReduceOp>(op))
        return failed(expand(reduce, tables)) ? WalkResult::interrupt()
                                              : WalkResult::advance();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  FailureOr<Expander> makeExpander(OpBuilder &b, Operation *op,
                                   LayoutAttr layout, RankedTensorType full,
                                   SymbolTableCollection &tables) {
    MeshOp mesh = lookupMesh(op, layout.getMesh(), &tables);
    if (!mesh)
      return op->emitOpError() << "refers to unknown mesh " << layout.getMesh(),
             failure();
    b.setInsertionPoint(op);
    return Expander{b,
                    op->getLoc(),
                    mesh,
                    layout.getMesh(),
                    layout.toDataParallelLayout(mesh.getAxisSizes()),
                    full.getShape().vec()};
  }

  LogicalResult expand(ParamGatherOp op, SymbolTableCollection &tables) {
    OpBuilder b(op);
    auto full = cast<RankedTensorType>(op.getResult().getType());
    auto ex = makeExpander(b, op, op.getLayout(), full, tables);
    if (failed(ex))
      return failure();
    ex->origin =
        OriginAttr::get(op.getContext(), op.getPhase(), op.getUnitAttr());
    Value cur = op.getShard();
    for (int64_t d = 0; d < full.getRank(); ++d)
      if (!lm::axesShardingDim(ex->model, d).empty())
        cur = ex->gatherDim(cur, d);
    op.getResult().replaceAllUsesWith(cur);
    op.erase();
    ++numGathers;
    numCollectives += ex->created;
    return success();
  }

  LogicalResult expand(GradReduceOp op, SymbolTableCollection &tables) {
    OpBuilder b(op);
    auto full = cast<RankedTensorType>(op.getGrad().getType());
    auto ex = makeExpander(b, op, op.getLayout(), full, tables);
    if (failed(ex))
      return failure();
    ex->origin =
        OriginAttr::get(op.getContext(), Phase::backward, op.getUnitAttr());
    Value cur = op.getGrad();
    Type elem = full.getElementType();
    // Casts and the scale multiply are float ops; refuse anything else
    // rather than build invalid IR.
    Type reduceElem = elem;
    if (auto rt = op.getReduceDtypeAttr()) {
      reduceElem = rt.getValue();
      if (!isa<FloatType>(elem) || !isa<FloatType>(reduceElem))
        return op.emitOpError()
               << "reduce_dtype " << reduceElem
               << " needs a floating-point gradient and reduce type, got "
               << elem;
    }
    if (op.getScaleAttr() && !isa<FloatType>(reduceElem))
      return op.emitOpError() << "a gradient scale needs a floating-point "
                                 "gradient, got "
                              << reduceElem;
    if (auto rt = op.getReduceDtypeAttr())
      cur = ex->castTo(cur, rt.getValue());
    // avg divides by each group's size, which composes to the product of
    // the data-parallel group sizes.
    ReduceKind reduce = op.getReduce();
    for (int64_t d = 0; d < full.getRank(); ++d)
      if (!lm::axesShardingDim(ex->model, d).empty())
        cur = ex->reduceScatterDim(cur, d, reduce);
    if (Value acc = op.getAccumulator()) {
      // Add the earlier micro-steps' sum of this rank's scattered slot.
      acc = ex->castTo(acc,
                       cast<RankedTensorType>(cur.getType()).getElementType());
      cur = arith::AddFOp::create(b, op.getLoc(), acc, cur);
    }
    std::vector<int64_t> replicate = lm::replicateAxes(ex->model);
    if (!replicate.empty() && !op.getPartial())
      cur = ex->allReduce(cur, replicate, reduce);
    if (auto scale = op.getScaleAttr()) {
      auto t = cast<RankedTensorType>(cur.getType());
      Value c = arith::ConstantOp::create(
          b, op.getLoc(),
          DenseElementsAttr::get(
              t, b.getFloatAttr(t.getElementType(), scale.getValueAsDouble())));
      cur = arith::MulFOp::create(b, op.getLoc(), cur, c);
    }
    cur = ex->castTo(cur, elem);
    op.getResult().replaceAllUsesWith(cur);
    op.erase();
    ++numReductions;
    numCollectives += ex->created;
    return success();
  }
};
} // namespace

//===- BucketCollectives.cpp - fuse flat collectives into buckets ---------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPBUCKETCOLLECTIVES
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

using mlir::fsdp::detail::BlockOrder;
using mlir::fsdp::detail::hoistBefore;

struct Member {
  // Interface methods are not const; a member's op is read and rewritten.
  mutable CollectiveOpInterface op;
  int64_t length; // elements of the per-rank contribution
};

/// Everything the collectives of one bucket have in common.
struct BucketKey {
  CollectiveKind kind;
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  Type elementType;
  std::optional<ReduceKind> reduce;
  Phase phase;
  /// Null unless buckets are per unit.
  StringAttr unit;

  bool operator==(const BucketKey &o) const {
    return kind == o.kind && mesh == o.mesh && axes == o.axes &&
           elementType == o.elementType && reduce == o.reduce &&
           phase == o.phase && unit == o.unit;
  }
};

/// The bucket key of a collective this pass may fuse; nullopt for others:
/// collectives without an origin, started, on buffers, quantized or not
/// 1-D static tensors of a sized element type.
std::optional<BucketKey> bucketKeyOf(CollectiveOpInterface op, bool perUnit) {
  OriginAttr origin = op.getOrigin();
  if (!origin || op.isAsync() || op.isOnBuffers() ||
      op.getCollectiveKind() == CollectiveKind::quantized_all_gather)
    return std::nullopt;
  auto in = cast<RankedTensorType>(op.getCollectiveInput().getType());
  if (in.getRank() != 1 || !in.hasStaticShape() ||
      !in.getElementType().isIntOrFloat())
    return std::nullopt;
  return BucketKey{op.getCollectiveKind(),
                   op.getMeshAttr(),
                   op.getAxes(),
                   in.getElementType(),
                   op.getReduction(),
                   origin.getPhase(),
                   perUnit ? origin.getUnit() : StringAttr()};
}

Value inputOf(const Member &m) { return m.op.getCollectiveInput(); }

RankedTensorType vectorOf(int64_t n, Type elem) {
  return RankedTensorType::get({n}, elem);
}

/// Rounds a 1-D tensor's length up to `padded` with zeros.
Value padTo(OpBuilder &b, Location loc, Value v, int64_t padded) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t extra = padded - t.getShape().back();
  if (extra == 0)
    return v;
  SmallVector<OpFoldResult> low(t.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> high(t.getRank(), b.getIndexAttr(0));
  high.back() = b.getIndexAttr(extra);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = padded;
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(t.getElementType()));
  return tensor::PadOp::create(b, loc, t.clone(shape), v, low, high, zero);
}

/// The 1-D tensor that the all-reduce members read directly, if every member
/// input is the slice [offsets[i], offsets[i] + length) of one tensor of
/// length `total` (an HSDP all-reduce over the outputs of one reduce-scatter
/// bucket with the same layout): the bucket can all-reduce that tensor as is.
/// Whatever lies between the members (alignment padding) is reduced too and
/// never read.
Value sharedSource(ArrayRef<Value> inputs, ArrayRef<int64_t> offsets,
                   int64_t total) {
  Value source;
  for (auto [in, offset] : llvm::zip_equal(inputs, offsets)) {
    auto slice = in.getDefiningOp<tensor::ExtractSliceOp>();
    if (!slice || slice.getSourceType().getRank() != 1 ||
        !slice.hasUnitStride() || (source && slice.getSource() != source) ||
        slice.getStaticOffsets()[0] != offset)
      return {};
    source = slice.getSource();
  }
  auto type = cast<RankedTensorType>(source.getType());
  if (!type.hasStaticShape() || type.getDimSize(0) != total)
    return {};
  return source;
}

/// Where every member sits in the bucket's flat buffer.
struct BucketLayout {
  SmallVector<int64_t> offsets; // per member, in elements
  SmallVector<int64_t> padded;  // per member: length rounded up to alignment
  int64_t total = 0;            // per-rank length of the bucket
  int64_t groupSize = 1;        // k (1 for an all-reduce)
  Type elementType;
  bool memberMajor = false; // `members`: member after member, not rank after
                            // rank (all-gather and reduce-scatter only)
};

/// Largest bucket-member alignment, in elements (documented in PASSES.md).
constexpr int64_t kMaxAlignment = int64_t(1) << 20;

struct BucketCollectivesPass
    : public mlir::fsdp::impl::FSDPBucketCollectivesBase<
          BucketCollectivesPass> {
  using Base::Base;

  using Group = std::pair<BucketKey, SmallVector<Member>>;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (maxCount < 1 || bucketBytes < 1)
      return emitError(UnknownLoc::get(ctx))
             << "options max-count and bucket-bytes must be positive";
    if (alignment < 1 || alignment > kMaxAlignment)
      return emitError(UnknownLoc::get(ctx))
             << "option alignment must be between 1 and " << kMaxAlignment
             << " elements, got " << static_cast<int64_t>(alignment);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (mode == BucketMode::none || func.isExternal() ||
        !func.getBody().hasOneBlock())
      return;
    Block &body = func.getBody().front();
    BlockOrder order(body);
    SymbolTableCollection tables;
    for (Group &group : groupCandidates(body))
      for (SmallVector<Member> &bucket : splitAtLimits(group.second))
        if (bucket.size() > 1)
          emitBucket(bucket, order, tables);
  }

  /// The collectives that may be fused, grouped by everything that must
  /// match, members in program order. Reduce-scatter groups come before
  /// all-reduce groups so that an HSDP all-reduce bucket sees the
  /// reduce-scatter bucket's output slices.
  SmallVector<Group> groupCandidates(Block &body) {
    SmallVector<Group> groups;
    for (Operation &op : body) {
      auto c = dyn_cast<CollectiveOpInterface>(&op);
      std::optional<BucketKey> key =
          c ? bucketKeyOf(c, mode == BucketMode::unit) : std::nullopt;
      if (!key)
        continue;
      Value perRank = key->kind == CollectiveKind::reduce_scatter
                          ? c.getCollectiveOutput()
                          : c.getCollectiveInput();
      int64_t length = cast<RankedTensorType>(perRank.getType()).getDimSize(0);
      auto *it = llvm::find_if(groups,
                               [&](const Group &g) { return g.first == *key; });
      if (it == groups.end())
        it = &groups.emplace_back(*key, SmallVector<Member>());
      it->second.push_back({c, length});
    }
    llvm::stable_sort(groups, [](const Group &a, const Group &b) {
      return a.first.kind < b.first.kind;
    });
    return groups;
  }

  /// Splits a group in program order at the byte and count limits.
  SmallVector<SmallVector<Member>> splitAtLimits(ArrayRef<Member> members) {
    SmallVector<SmallVector<Member>> buckets(1);
    int64_t bytes = 0;
    for (const Member &m : members) {
      auto in = cast<RankedTensorType>(inputOf(m).getType());
      int64_t b = 0;
      if (llvm::MulOverflow(
              in.getNumElements(),
              std::max<int64_t>(1, in.getElementTypeBitWidth() / 8), b))
        b = std::numeric_limits<int64_t>::max();
      int64_t sum = 0;
      if (!buckets.back().empty() &&
          (llvm::AddOverflow(bytes, b, sum) || sum > bucketBytes ||
           (int64_t)buckets.back().size() >= maxCount)) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(m);
      if (llvm::AddOverflow(bytes, b, bytes))
        bytes = std::numeric_limits<int64_t>::max();
    }
    return buckets;
  }

  void emitBucket(ArrayRef<Member> members, BlockOrder &order,
                  SymbolTableCollection &tables) {
    CollectiveOpInterface first = members.front().op;
    FailureOr<BucketLayout> layout = layoutBucket(members, tables);
    if (failed(layout)) {
      first->emitRemark() << "not bucketed: the bucket's size overflows "
                             "64-bit arithmetic";
      return;
    }
    Operation *point = issuePoint(members, order);
    if (!point)
      return;
    FailureOr<SmallVector<Operation *>> lateUsers =
        usersToDelay(members, point, order);
    if (failed(lateUsers))
      return;

    OpBuilder b(point);
    Location loc = point->getLoc();
    Value packed = packInputs(b, loc, members, *layout);
    CollectiveOpInterface bucket =
        createBucket(b, loc, members, packed, *layout);
    unpackResults(b, loc, members, bucket, *layout);
    for (Operation *u : *lateUsers)
      order.moveBefore(u, point);
    // The builder inserts before one of the members: erase them last.
    for (const Member &m : members)
      order.erase(m.op);
    ++numBuckets;
    numBucketed += members.size();
  }

  /// Offsets of the members in the flat buffer and the group size, with
  /// every product and sum checked.
  FailureOr<BucketLayout> layoutBucket(ArrayRef<Member> members,
                                       SymbolTableCollection &tables) {
    CollectiveOpInterface first = members.front().op;
    BucketLayout layout;
    layout.elementType =
        cast<RankedTensorType>(inputOf(members.front()).getType())
            .getElementType();
    if (first.getCollectiveKind() != CollectiveKind::all_reduce) {
      FailureOr<int64_t> k = first.getGroupSize(tables);
      if (failed(k))
        return failure();
      layout.groupSize = *k;
    }
    for (const Member &m : members) {
      int64_t padded = 0, rounded = 0;
      if (llvm::AddOverflow(m.length, alignment - 1, rounded) ||
          llvm::MulOverflow(rounded / alignment, (int64_t)alignment, padded))
        return failure();
      layout.offsets.push_back(layout.total);
      layout.padded.push_back(padded);
      if (llvm::AddOverflow(layout.total, padded, layout.total))
        return failure();
    }
    int64_t all = 0;
    if (llvm::MulOverflow(layout.groupSize, layout.total, all))
      return failure();
    layout.memberMajor =
        memberLayout && first.getCollectiveKind() != CollectiveKind::all_reduce;
    return layout;
  }

  /// Where the bucket is issued, with the members' inputs hoisted above it:
  /// gathers feed forward/backward compute spread over the unit, so the
  /// bucket goes where the first is needed; reductions go where the last
  /// input exists. Null (with a remark) if an input cannot be hoisted.
  Operation *issuePoint(ArrayRef<Member> members, BlockOrder &order) {
    bool gather =
        members.front().op.getCollectiveKind() == CollectiveKind::all_gather;
    Operation *point = gather ? members.front().op : members.back().op;
    for (const Member &m : members)
      if (!hoistBefore(inputOf(m), point, order)) {
        point->emitRemark() << "not bucketed: an input cannot be computed "
                               "before the bucket";
        return nullptr;
      }
    return point;
  }

  /// A reduction bucket is issued at its last member: what already reads an
  /// earlier member's result moves after the bucket (it cannot feed an
  /// input of the bucket: every input dominates the last member). Fails
  /// (with a remark) if a member's input depends on another member.
  FailureOr<SmallVector<Operation *>>
  usersToDelay(ArrayRef<Member> members, Operation *point, BlockOrder &order) {
    SmallVector<Operation *> lateUsers;
    if (members.front().op.getCollectiveKind() == CollectiveKind::all_gather)
      return lateUsers;
    Block *block = point->getBlock();
    llvm::SmallPtrSet<Operation *, 16> memberOps;
    llvm::SetVector<Operation *> users;
    for (const Member &m : members) {
      memberOps.insert(m.op);
      users.insert(m.op);
    }
    for (size_t i = 0; i < users.size(); ++i)
      for (Value r : users[i]->getResults())
        for (Operation *u : r.getUsers()) {
          Operation *top = block->findAncestorOpInBlock(*u);
          if (top && top != block->getTerminator() &&
              order.isBefore(top, point))
            users.insert(top);
        }
    for (Operation *u : users)
      if (!memberOps.contains(u))
        lateUsers.push_back(u);
    order.sort(lateUsers);
    for (const Member &m : members)
      if (Operation *def = inputOf(m).getDefiningOp())
        if (users.contains(def)) {
          point->emitRemark() << "not bucketed: a member's input depends "
                                 "on another member's result";
          return failure();
        }
    return lateUsers;
  }

  /// The bucket's per-rank input: every member zero-padded to its aligned
  /// length, [L] (all-gather, all-reduce) or [k, L] rows of slots
  /// (reduce-scatter, then flattened; member-major: every member's [k, L_i]
  /// after the other). An all-reduce over one reduce-scatter bucket's
  /// outputs reads that bucket's output as it is.
  Value packInputs(OpBuilder &b, Location loc, ArrayRef<Member> members,
                   const BucketLayout &layout) {
    CollectiveKind kind = members.front().op.getCollectiveKind();
    Type elem = layout.elementType;
    int64_t k = layout.groupSize;
    SmallVector<Value> inputs;
    for (const Member &m : members)
      inputs.push_back(inputOf(m));
    if (kind == CollectiveKind::all_reduce)
      if (Value shared = sharedSource(inputs, layout.offsets, layout.total))
        return shared;
    SmallVector<Value> pieces;
    for (auto [m, padded] : llvm::zip_equal(members, layout.padded)) {
      Value in = inputOf(m);
      if (kind != CollectiveKind::reduce_scatter) {
        in = padTo(b, loc, in, padded);
      } else if (!layout.memberMajor || padded != m.length) {
        // The k slots as rows, each padded; member-major flattens them back.
        in = tensor::ExpandShapeOp::create(
            b, loc, RankedTensorType::get({k, m.length}, elem), in,
            ArrayRef<ReassociationIndices>{{0, 1}});
        in = padTo(b, loc, in, padded);
        if (layout.memberMajor)
          in = tensor::CollapseShapeOp::create(
              b, loc, vectorOf(k * padded, elem), in,
              ArrayRef<ReassociationIndices>{{0, 1}});
      }
      pieces.push_back(in);
    }
    bool rows = kind == CollectiveKind::reduce_scatter && !layout.memberMajor;
    Value packed = tensor::ConcatOp::create(b, loc, rows ? 1 : 0, pieces);
    if (rows)
      packed = tensor::CollapseShapeOp::create(
          b, loc, vectorOf(k * layout.total, elem), packed,
          ArrayRef<ReassociationIndices>{{0, 1}});
    return packed;
  }

  /// One collective of the members' kind over the packed buffer, with their
  /// origin (the unit only if they all share it) and size.
  CollectiveOpInterface createBucket(OpBuilder &b, Location loc,
                                     ArrayRef<Member> members, Value packed,
                                     const BucketLayout &layout) {
    CollectiveOpInterface first = members.front().op;
    Type elem = layout.elementType;
    int64_t k = layout.groupSize, total = layout.total;
    FlatSymbolRefAttr mesh = first.getMeshAttr();
    ArrayAttr axes = first.getAxes();
    ReduceKindAttr reduce;
    if (std::optional<ReduceKind> r = first.getReduction())
      reduce = ReduceKindAttr::get(b.getContext(), *r);
    DenseI64ArrayAttr memberCounts;
    if (layout.memberMajor)
      memberCounts = b.getDenseI64ArrayAttr(layout.padded);
    Operation *bucket;
    switch (first.getCollectiveKind()) {
    case CollectiveKind::all_gather:
      bucket = AllGatherOp::create(b, loc, vectorOf(k * total, elem), packed,
                                   mesh, axes, memberCounts);
      break;
    case CollectiveKind::reduce_scatter:
      bucket = ReduceScatterOp::create(b, loc, vectorOf(total, elem), packed,
                                       mesh, axes, reduce, memberCounts);
      break;
    default:
      bucket = AllReduceOp::create(b, loc, vectorOf(total, elem), packed, mesh,
                                   axes, reduce);
      break;
    }
    OriginAttr origin = first.getOrigin();
    bool oneUnit = llvm::all_of(members, [&](const Member &m) {
      return m.op.getOrigin().getUnit() == origin.getUnit();
    });
    auto collective = cast<CollectiveOpInterface>(bucket);
    collective.setOrigin(
        OriginAttr::get(b.getContext(), origin.getPhase(),
                        oneUnit ? origin.getUnit() : StringAttr()));
    bucket->setAttr(kBucketSizeAttrName, b.getI64IntegerAttr(members.size()));
    return collective;
  }

  /// Replaces every member's result by its part of the bucket's output: the
  /// column block [:, off_i : off_i + L_i] of the gathered [k, L] buffer
  /// (flattened rank-major; member-major: the block [k, padded_i] at
  /// k * off_i, whole when unpadded), or the slice [off_i, off_i + L_i).
  void unpackResults(OpBuilder &b, Location loc, ArrayRef<Member> members,
                     CollectiveOpInterface bucket, const BucketLayout &layout) {
    Type elem = layout.elementType;
    int64_t k = layout.groupSize;
    bool gather = bucket.getCollectiveKind() == CollectiveKind::all_gather;
    Value out = bucket.getCollectiveOutput();
    Value blocks;
    if (gather && layout.memberMajor) {
      for (auto [m, offset, padded] :
           llvm::zip_equal(members, layout.offsets, layout.padded)) {
        auto slice = [&](Value v, int64_t at, int64_t n) -> Value {
          return tensor::ExtractSliceOp::create(
              b, loc, vectorOf(n, elem), v,
              ArrayRef<OpFoldResult>{b.getIndexAttr(at)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(n)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
        };
        Value result = slice(out, k * offset, k * padded);
        if (padded != m.length) {
          Value rows = tensor::ExpandShapeOp::create(
              b, loc, RankedTensorType::get({k, padded}, elem), result,
              ArrayRef<ReassociationIndices>{{0, 1}});
          Value block = tensor::ExtractSliceOp::create(
              b, loc, RankedTensorType::get({k, m.length}, elem), rows,
              ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(k),
                                     b.getIndexAttr(m.length)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
          result = tensor::CollapseShapeOp::create(
              b, loc, vectorOf(k * m.length, elem), block,
              ArrayRef<ReassociationIndices>{{0, 1}});
        }
        m.op.getCollectiveOutput().replaceAllUsesWith(result);
      }
      return;
    }
    if (gather)
      blocks = tensor::ExpandShapeOp::create(
          b, loc, RankedTensorType::get({k, layout.total}, elem), out,
          ArrayRef<ReassociationIndices>{{0, 1}});
    for (auto [m, offset] : llvm::zip_equal(members, layout.offsets)) {
      Value result;
      if (gather) {
        Value block = tensor::ExtractSliceOp::create(
            b, loc, RankedTensorType::get({k, m.length}, elem), blocks,
            ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(offset)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(k), b.getIndexAttr(m.length)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
        result = tensor::CollapseShapeOp::create(
            b, loc, vectorOf(k * m.length, elem), block,
            ArrayRef<ReassociationIndices>{{0, 1}});
      } else {
        result = tensor::ExtractSliceOp::create(
            b, loc, vectorOf(m.length, elem), out,
            ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(m.length)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
      }
      m.op.getCollectiveOutput().replaceAllUsesWith(result);
    }
  }
};
} // namespace

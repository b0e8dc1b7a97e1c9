//===- BucketCollectives.cpp - fuse flat collectives into buckets ---------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPBUCKETCOLLECTIVES
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

using mlir::fsdp::detail::BlockOrder;
using mlir::fsdp::detail::hoistBefore;

constexpr StringLiteral kPhase = "fsdp.phase", kUnit = "fsdp.unit";

enum class Kind { AllGather, ReduceScatter, AllReduce };

struct Member {
  Operation *op;
  Kind kind;
  int64_t length; // elements of the per-rank contribution
};

Value inputOf(Operation *op) { return op->getOperand(0); }

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

struct BucketCollectivesPass
    : public mlir::fsdp::impl::FSDPBucketCollectivesBase<
          BucketCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "unit" && mode != "greedy" && mode != "none") {
      getOperation().emitError()
          << "option mode must be unit, greedy or none, got '" << mode << "'";
      return signalPassFailure();
    }
    if (alignment < 1 || maxCount < 1 || bucketBytes < 1) {
      getOperation().emitError()
          << "options alignment, max-count and bucket-bytes must be positive";
      return signalPassFailure();
    }
    if (mode == "none")
      return;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        bucketFunction(func);
  }

  void bucketFunction(func::FuncOp func) {
    // Group candidates by everything that must match, in program order.
    // std::map keeps groups in a stable (key) order; members stay in program
    // order inside each group.
    // Reduce-scatter buckets come before all-reduce buckets so that an HSDP
    // all-reduce bucket sees the reduce-scatter bucket's output slices.
    std::map<std::pair<int, std::string>, SmallVector<Member>> groups;
    for (Operation &op : func.getBody().front()) {
      std::optional<Kind> kind;
      if (isa<AllGatherOp>(op))
        kind = Kind::AllGather;
      else if (isa<ReduceScatterOp>(op))
        kind = Kind::ReduceScatter;
      else if (isa<AllReduceOp>(op))
        kind = Kind::AllReduce;
      auto phase = op.getAttrOfType<StringAttr>(kPhase);
      if (!kind || !phase)
        continue;
      auto in = cast<RankedTensorType>(inputOf(&op).getType());
      if (in.getRank() != 1 || !in.hasStaticShape())
        continue;
      std::string key;
      llvm::raw_string_ostream os(key);
      os << op.getName() << "|" << op.getAttr("mesh") << "|"
         << op.getAttr("axes") << "|" << in.getElementType() << "|"
         << op.getAttr("reduce") << "|" << phase.getValue();
      if (mode == "unit") {
        // Collectives without a unit bucket together (per phase).
        if (auto unit = op.getAttrOfType<StringAttr>(kUnit))
          os << "|unit=" << unit.getValue();
      }
      int64_t length = in.getDimSize(0);
      if (*kind == Kind::ReduceScatter)
        length =
            cast<RankedTensorType>(op.getResult(0).getType()).getDimSize(0);
      groups[{static_cast<int>(*kind), key}].push_back({&op, *kind, length});
    }
    BlockOrder order(func.getBody().front());
    for (auto &[key, members] : groups) {
      // Split in program order at the byte and count limits.
      SmallVector<Member> bucket;
      int64_t bytes = 0;
      auto flush = [&]() {
        if (bucket.size() > 1)
          emitBucket(bucket, order);
        bucket.clear();
        bytes = 0;
      };
      for (Member &m : members) {
        auto in = cast<RankedTensorType>(inputOf(m.op).getType());
        int64_t b = in.getNumElements() *
                    std::max<int64_t>(1, in.getElementTypeBitWidth() / 8);
        if (!bucket.empty() &&
            (bytes + b > bucketBytes || (int64_t)bucket.size() >= maxCount))
          flush();
        bucket.push_back(m);
        bytes += b;
      }
      flush();
    }
  }

  void emitBucket(ArrayRef<Member> members, BlockOrder &order) {
    Operation *first = members.front().op, *last = members.back().op;
    Kind kind = members.front().kind;
    // Gathers feed forward/backward compute spread over the unit: issue the
    // bucket where the first is needed and bring the (argument-derived)
    // inputs up to it. Reductions are issued once the last input exists.
    Operation *point = kind == Kind::AllGather ? first : last;
    for (const Member &m : members)
      if (!hoistBefore(inputOf(m.op), point, order)) {
        point->emitRemark() << "not bucketed: an input cannot be computed "
                               "before the bucket";
        return;
      }
    // Reductions are issued at the last member; what already reads an
    // earlier member's result moves after the bucket (it cannot feed an
    // input of the bucket: every input dominates the last member).
    SmallVector<Operation *> lateUsers;
    if (kind != Kind::AllGather) {
      Block *block = point->getBlock();
      llvm::SmallPtrSet<Operation *, 16> memberOps;
      for (const Member &m : members)
        memberOps.insert(m.op);
      llvm::SetVector<Operation *> users;
      for (const Member &m : members)
        users.insert(m.op);
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
        if (Operation *def = inputOf(m.op).getDefiningOp())
          if (users.contains(def)) {
            point->emitRemark() << "not bucketed: a member's input depends "
                                   "on another member's result";
            return;
          }
    }

    OpBuilder b(point);
    Location loc = point->getLoc();
    auto firstIn =
        cast<RankedTensorType>(inputOf(members.front().op).getType());
    Type elem = firstIn.getElementType();
    auto mesh = first->getAttrOfType<FlatSymbolRefAttr>("mesh");
    auto axes = first->getAttrOfType<ArrayAttr>("axes");
    int64_t k = 1;
    if (kind != Kind::AllReduce) {
      auto outLen =
          cast<RankedTensorType>(first->getResult(0).getType()).getDimSize(0);
      k = kind == Kind::AllGather ? outLen / firstIn.getDimSize(0)
                                  : firstIn.getDimSize(0) / outLen;
    }
    SmallVector<int64_t> offsets;
    int64_t total = 0;
    for (const Member &m : members) {
      offsets.push_back(total);
      total += (m.length + alignment - 1) / alignment * alignment;
    }

    SmallVector<Value> inputs;
    for (const Member &m : members)
      inputs.push_back(inputOf(m.op));
    Value packed;
    if (kind == Kind::AllReduce)
      packed = sharedSource(inputs, offsets, total);
    if (!packed) {
      // Every member zero-padded to its aligned length: [L] (all-gather,
      // all-reduce) or [k, L] rows of slots (reduce-scatter).
      SmallVector<Value> pieces;
      for (const Member &m : members) {
        int64_t padded = (m.length + alignment - 1) / alignment * alignment;
        Value in = inputOf(m.op);
        if (kind == Kind::ReduceScatter)
          in = tensor::ExpandShapeOp::create(
              b, loc, RankedTensorType::get({k, m.length}, elem), in,
              ArrayRef<ReassociationIndices>{{0, 1}});
        pieces.push_back(padTo(b, loc, in, padded));
      }
      packed = tensor::ConcatOp::create(
          b, loc, kind == Kind::ReduceScatter ? 1 : 0, pieces);
    }
    if (kind == Kind::ReduceScatter)
      packed = tensor::CollapseShapeOp::create(
          b, loc, vectorOf(k * total, elem), packed,
          ArrayRef<ReassociationIndices>{{0, 1}});

    Operation *bucket;
    if (kind == Kind::AllGather)
      bucket = AllGatherOp::create(b, loc, vectorOf(k * total, elem), packed,
                                   mesh, axes);
    else if (kind == Kind::ReduceScatter)
      bucket = ReduceScatterOp::create(
          b, loc, vectorOf(total, elem), packed, mesh, axes,
          first->getAttrOfType<ReduceKindAttr>("reduce"));
    else
      bucket =
          AllReduceOp::create(b, loc, vectorOf(total, elem), packed, mesh, axes,
                              first->getAttrOfType<ReduceKindAttr>("reduce"));
    bucket->setAttr(kPhase, first->getAttr(kPhase));
    if (llvm::all_of(members,
                     [&](const Member &m) {
                       return m.op->getAttr(kUnit) == first->getAttr(kUnit);
                     }) &&
        first->getAttr(kUnit))
      bucket->setAttr(kUnit, first->getAttr(kUnit));
    bucket->setAttr("fsdp.bucket_size", b.getI64IntegerAttr(members.size()));

    Value out = bucket->getResult(0);
    Value blocks;
    if (kind == Kind::AllGather)
      blocks = tensor::ExpandShapeOp::create(
          b, loc, RankedTensorType::get({k, total}, elem), out,
          ArrayRef<ReassociationIndices>{{0, 1}});
    for (auto [i, m] : llvm::enumerate(members)) {
      Value result;
      SmallVector<OpFoldResult> one = {b.getIndexAttr(1)};
      if (kind == Kind::AllGather) {
        // Column block [:, off_i : off_i + L_i], flattened rank-major.
        Value block = tensor::ExtractSliceOp::create(
            b, loc, RankedTensorType::get({k, m.length}, elem), blocks,
            ArrayRef<OpFoldResult>{b.getIndexAttr(0),
                                   b.getIndexAttr(offsets[i])},
            ArrayRef<OpFoldResult>{b.getIndexAttr(k), b.getIndexAttr(m.length)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
        result = tensor::CollapseShapeOp::create(
            b, loc, vectorOf(k * m.length, elem), block,
            ArrayRef<ReassociationIndices>{{0, 1}});
      } else {
        result = tensor::ExtractSliceOp::create(
            b, loc, vectorOf(m.length, elem), out,
            ArrayRef<OpFoldResult>{b.getIndexAttr(offsets[i])},
            ArrayRef<OpFoldResult>{b.getIndexAttr(m.length)}, one);
      }
      m.op->getResult(0).replaceAllUsesWith(result);
    }
    for (Operation *u : lateUsers)
      order.moveBefore(u, point);
    // The builder inserts before one of the members: erase them last.
    for (const Member &m : members)
      order.erase(m.op);
  }
};
} // namespace

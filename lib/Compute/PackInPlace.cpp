//===- PackInPlace.cpp - producers write their slot of a packed buffer ----===//
//
// A bucket of a collective is packed by a `tensor.concat` of its members:
// the parameters cast to the gather dtype, the gradients of a unit. Its
// bufferization allocates the bucket and copies every member in from a
// buffer of its own -- one device memcpy per member and call on a GPU, one
// copy loop on the CPU. This pass makes each member's producer write its
// slot instead (destination passing): the producer's output becomes a slice
// of the bucket (reshaped to the producer's shape), and the packed value is
// a chain of `tensor.insert_slice`s of each member into the slice it was
// written to, which one-shot bufferization recognizes as in place. Members
// it cannot place (a function argument, a value with other uses) are still
// inserted, i.e. copied.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPACKINPLACE
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A member of a concat whose producer can write its slot: `chain` are the
/// reshapes from the producer's result to the member (in order), `init` is
/// the producer's output operand, `fill` the fill of it if any.
struct Placeable {
  unsigned index;
  linalg::LinalgOp producer;
  OpOperand *init;
  linalg::FillOp fill;
  SmallVector<Operation *> chain;
};

bool isStaticReshape(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op) &&
         op->getNumOperands() == 1;
}

/// The placement of `member` (operand `index` of a concat in `block`), if
/// its producer can write the slot: a linalg op of the same block whose
/// result reaches the concat only through single-use static reshapes, and
/// whose output is a static `tensor.empty` (or a fill of one) used only
/// there.
std::optional<Placeable> matchMember(Value member, unsigned index,
                                     Block *block) {
  Placeable p;
  p.index = index;
  Value v = member;
  while (Operation *def = v.getDefiningOp()) {
    if (def->getBlock() != block || !v.hasOneUse())
      return std::nullopt;
    if (isStaticReshape(def)) {
      p.chain.push_back(def);
      v = def->getOperand(0);
      continue;
    }
    auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
    if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
        isa<linalg::FillOp>(def))
      return std::nullopt;
    p.producer = linalgOp;
    p.init = linalgOp.getDpsInitOperand(cast<OpResult>(v).getResultNumber());
    break;
  }
  if (!p.producer)
    return std::nullopt;
  std::reverse(p.chain.begin(), p.chain.end());
  Value init = p.init->get();
  if (!init.hasOneUse())
    return std::nullopt;
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    if (fill->getBlock() != block || !fill.hasPureTensorSemantics())
      return std::nullopt;
    p.fill = fill;
    init = fill.getOutputs()[0];
    if (!init.hasOneUse())
      return std::nullopt;
  }
  auto empty = init.getDefiningOp<tensor::EmptyOp>();
  if (!empty || !empty.getType().hasStaticShape())
    return std::nullopt;
  return p;
}

/// The inverse of `reshape` applied to `v` (of the reshape's result type).
Value unreshape(OpBuilder &b, Operation *reshape, Value v) {
  Location loc = reshape->getLoc();
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(reshape))
    return tensor::ExpandShapeOp::create(b, loc, collapse.getSrcType(), v,
                                         collapse.getReassociationIndices());
  auto expand = cast<tensor::ExpandShapeOp>(reshape);
  return tensor::CollapseShapeOp::create(b, loc, expand.getSrcType(), v,
                                         expand.getReassociationIndices());
}

/// Rewrites one concat; returns whether any member was placed.
bool packInPlace(tensor::ConcatOp concat) {
  RankedTensorType type = concat.getResultType();
  if (!type.hasStaticShape())
    return false;
  Block *block = concat->getBlock();
  int64_t dim = concat.getDim();
  SmallVector<int64_t> offsets;
  int64_t offset = 0;
  for (Value member : concat.getInputs()) {
    offsets.push_back(offset);
    offset += cast<RankedTensorType>(member.getType()).getDimSize(dim);
  }
  // One member per producer: a producer with several results in the bucket
  // writes one slot, the others are copied.
  SmallVector<Placeable> placed;
  llvm::SmallPtrSet<Operation *, 8> producers;
  for (auto [index, member] : llvm::enumerate(concat.getInputs()))
    if (std::optional<Placeable> p = matchMember(member, index, block))
      if (producers.insert(p->producer).second)
        placed.push_back(std::move(*p));
  if (placed.empty())
    return false;
  // In program order of the producers: each writes a slice of the bucket as
  // it stands after the members before it.
  llvm::sort(placed, [](Placeable &a, Placeable &b) {
    return a.producer->isBeforeInBlock(b.producer);
  });
  auto firstOp = [](Placeable &p) -> Operation * {
    return p.fill ? p.fill.getOperation() : p.producer.getOperation();
  };
  Operation *first = firstOp(placed.front());
  for (Placeable &p : placed)
    if (firstOp(p)->isBeforeInBlock(first))
      first = firstOp(p);
  OpBuilder b(first);
  Location loc = concat.getLoc();
  Value bucket =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  auto sliceParams = [&](unsigned index) {
    auto memberType =
        cast<RankedTensorType>(concat.getInputs()[index].getType());
    SmallVector<OpFoldResult> offs(type.getRank(), b.getIndexAttr(0));
    offs[dim] = b.getIndexAttr(offsets[index]);
    SmallVector<OpFoldResult> sizes =
        llvm::map_to_vector(memberType.getShape(), [&](int64_t size) {
          return OpFoldResult(b.getIndexAttr(size));
        });
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    return std::make_tuple(offs, sizes, strides);
  };
  llvm::SmallBitVector done(concat.getInputs().size());
  for (Placeable &p : placed) {
    // The fill, if any, right before the producer: nothing between them
    // writes the bucket.
    if (p.fill)
      p.fill->moveBefore(p.producer);
    b.setInsertionPoint(firstOp(p));
    auto [offs, sizes, strides] = sliceParams(p.index);
    Value slot =
        tensor::ExtractSliceOp::create(b, loc, bucket, offs, sizes, strides);
    for (Operation *reshape : llvm::reverse(p.chain))
      slot = unreshape(b, reshape, slot);
    Operation *oldEmpty;
    if (p.fill) {
      OpOperand &out = p.fill.getDpsInitsMutable()[0];
      oldEmpty = out.get().getDefiningOp();
      out.set(slot);
    } else {
      oldEmpty = p.init->get().getDefiningOp();
      p.init->set(slot);
    }
    oldEmpty->erase();
    // The member's reshapes right after the producer, then its insertion.
    Operation *last = p.producer;
    for (Operation *reshape : p.chain) {
      reshape->moveAfter(last);
      last = reshape;
    }
    b.setInsertionPointAfter(last);
    Value member = concat.getInputs()[p.index];
    bucket = tensor::InsertSliceOp::create(b, loc, member, bucket, offs, sizes,
                                           strides);
    done.set(p.index);
  }
  // The other members are copied in where the concat was.
  b.setInsertionPoint(concat);
  for (auto [index, member] : llvm::enumerate(concat.getInputs())) {
    if (done.test(index))
      continue;
    auto [offs, sizes, strides] = sliceParams(index);
    bucket = tensor::InsertSliceOp::create(b, loc, member, bucket, offs, sizes,
                                           strides);
  }
  concat.replaceAllUsesWith(bucket);
  concat.erase();
  return true;
}

struct FSDPPackInPlacePass
    : public mlir::fsdp::impl::FSDPPackInPlaceBase<FSDPPackInPlacePass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<tensor::ConcatOp> concats;
    getOperation()->walk(
        [&](tensor::ConcatOp concat) { concats.push_back(concat); });
    for (tensor::ConcatOp concat : concats)
      packInPlace(concat);
  }
};

} // namespace

//===- GpuAsyncCollectives.cpp - no collective blocks the host on a GPU ---===//
//
// A blocking collective returns to the host once it has completed, so on a
// GPU the host waits there for the device work before it and for the
// collective itself. The fsdp passes make the collectives they place
// asynchronous (fsdp-schedule); the others -- the loss all-reduce of
// all-reduce-loss, the optimizer's gradient-norm all-reduce -- and every
// collective of a step built with schedule=false stay blocking. With
// compute=gpu each becomes a start and a wait: `fsdp.wait` makes the compute
// stream wait for the collective, not the host. A collective the fsdp
// passes did not place (no origin) starts as soon as its input exists and is
// waited for right before its result's first use, so the loss all-reduce
// runs during the backward; a placed one keeps its position (the start
// where it was, the wait right after), as schedule=false asked.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUASYNCCOLLECTIVES
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The started form of a blocking tensor collective with its operands and
/// attributes, at `b`'s insertion point; null for one without a started
/// form (a quantized gather).
Operation *startOf(OpBuilder &b, CollectiveOpInterface op) {
  Operation *start = createStartedCollective(b, op);
  // `fsdp.movable` (a quantized gather's amax all-reduce) is for the fsdp
  // passes, which have run, and only valid on a blocking collective.
  if (start)
    for (NamedAttribute a : op->getDiscardableAttrs())
      if (a.getName() != kMovableAttrName)
        start->setAttr(a.getName(), a.getValue());
  return start;
}

/// The op of `block` that is or holds the first use of `v` after `from`,
/// or the block's terminator.
Operation *firstUseAfter(Value v, Operation *from, Block &block) {
  Operation *first = block.getTerminator();
  for (Operation *user : v.getUsers()) {
    Operation *inBlock = block.findAncestorOpInBlock(*user);
    if (inBlock && from->isBeforeInBlock(inBlock) &&
        inBlock->isBeforeInBlock(first))
      first = inBlock;
  }
  return first;
}

struct FSDPGpuAsyncCollectivesPass
    : public mlir::fsdp::impl::FSDPGpuAsyncCollectivesBase<
          FSDPGpuAsyncCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<CollectiveOpInterface> blocking;
    getOperation().walk([&](CollectiveOpInterface op) {
      if (!op.isAsync() && !op.isOnBuffers() &&
          isa<AllGatherOp, ReduceScatterOp, AllReduceOp>(op) &&
          op->getBlock()->mightHaveTerminator())
        blocking.push_back(op);
    });
    for (CollectiveOpInterface op : blocking)
      split(op);
  }

  void split(CollectiveOpInterface op) {
    Block &block = *op->getBlock();
    bool placed = op.isMovable();
    OpBuilder b(op);
    if (!placed) {
      // As soon as the input exists.
      Value in = op.getCollectiveInput();
      Operation *def = in.getDefiningOp();
      if (def && def->getBlock() == &block)
        b.setInsertionPointAfter(def);
      else if (!def && cast<BlockArgument>(in).getOwner() == &block)
        b.setInsertionPointToStart(&block);
    }
    Operation *start = startOf(b, op);
    if (!start)
      return;
    Value result = op.getCollectiveOutput();
    if (!placed)
      b.setInsertionPoint(firstUseAfter(result, op, block));
    else
      b.setInsertionPointAfter(op);
    auto wait = WaitOp::create(b, op.getLoc(), result.getType(),
                               start->getResult(0), start->getResult(1));
    result.replaceAllUsesWith(wait.getResult());
    op->erase();
    ++(placed ? numInPlace : numMoved);
  }
};

} // namespace

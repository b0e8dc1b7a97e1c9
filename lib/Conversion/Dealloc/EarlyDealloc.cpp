//===- EarlyDealloc.cpp - free each buffer after its last use -------------===//
//
// Upstream ownership-based buffer deallocation frees the buffers of a block
// at its end: every gathered parameter and every temporary of a step would
// stay allocated until the step returns. This pass moves each such
// `memref.dealloc` up to just after the buffer's last use in its block.
// Uses are followed through views; an operation whose non-buffer result (a
// collective's request) is used later keeps the buffer alive until that
// use (the wait). Anything it cannot follow leaves the deallocation alone.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEARLYDEALLOC
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The operations of `block` that use `buffer` (through views), or
/// failure when the buffer escapes in a way this pass does not follow.
FailureOr<SmallVector<Operation *>>
usersInBlock(Value buffer, memref::DeallocOp dealloc, Block &block) {
  SmallVector<Operation *> users;
  SmallVector<Value> worklist = {buffer};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user == dealloc)
        continue;
      if (user->hasTrait<OpTrait::IsTerminator>() ||
          isa<memref::ExtractAlignedPointerAsIndexOp>(user))
        return failure(); // returned, yielded or its address taken
      bool view = false;
      if (auto viewLike = dyn_cast<ViewLikeOpInterface>(user))
        view = viewLike.getViewSource() == v;
      view |= isa<memref::ExtractStridedMetadataOp>(user);
      for (Value r : user->getResults()) {
        if (!isa<BaseMemRefType>(r.getType()))
          continue;
        if (!view)
          return failure(); // a buffer result the pass cannot relate
        worklist.push_back(r);
      }
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        return failure();
      users.push_back(top);
      // A request (or any non-buffer result) used later extends the use.
      for (Value r : user->getResults()) {
        if (isa<BaseMemRefType>(r.getType()))
          continue;
        for (Operation *later : r.getUsers()) {
          Operation *laterTop = block.findAncestorOpInBlock(*later);
          if (!laterTop)
            return failure();
          users.push_back(laterTop);
        }
      }
    }
  }
  return users;
}

struct FSDPEarlyDeallocPass
    : public mlir::fsdp::impl::FSDPEarlyDeallocBase<FSDPEarlyDeallocPass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp d) { deallocs.push_back(d); });
    for (memref::DeallocOp dealloc : deallocs) {
      Value buffer = dealloc.getMemref();
      auto alloc = buffer.getDefiningOp<memref::AllocOp>();
      Block *block = dealloc->getBlock();
      if (!alloc || alloc->getBlock() != block)
        continue;
      FailureOr<SmallVector<Operation *>> users =
          usersInBlock(buffer, dealloc, *block);
      if (failed(users))
        continue;
      Operation *last = alloc;
      for (Operation *u : *users)
        if (last->isBeforeInBlock(u))
          last = u;
      if (last->isBeforeInBlock(dealloc))
        dealloc->moveAfter(last);
    }
  }
};

} // namespace

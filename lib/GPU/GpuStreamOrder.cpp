//===- GpuStreamOrder.cpp - device ops in program order on one stream -----===//
//
// Makes every GPU op of host code asynchronous, each block one chain of
// tokens starting at a `gpu.wait async` (the runtime's `mgpuStreamCreate`,
// which returns the calling rank's compute stream). Unlike upstream
// `gpu-async-region`, no host wait is inserted before calls or returns:
// every device operation of a step (kernels, copies, allocations, cuBLAS,
// collectives) is enqueued on that one stream in program order, so the
// stream orders them, and the host, which never reads device memory
// during a step, runs ahead; the runner synchronizes after the step.
//
//===----------------------------------------------------------------------===//

#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUSTREAMORDER
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// `op` with an async token result (its last result), depending on `token`;
/// returns the token.
Value makeAsync(gpu::AsyncOpInterface asyncOp, Value token) {
  Operation *op = asyncOp.getOperation();
  asyncOp.addAsyncDependency(token);
  if (Value own = asyncOp.getAsyncToken())
    return own;
  SmallVector<Type> resultTypes(op->getResultTypes());
  resultTypes.push_back(gpu::AsyncTokenType::get(op->getContext()));
  Operation *async = Operation::create(
      op->getLoc(), op->getName(), resultTypes, op->getOperands(),
      op->getDiscardableAttrDictionary(), op->getPropertiesStorage(),
      op->getSuccessors(), op->getNumRegions());
  IRMapping mapping;
  for (auto [from, to] : llvm::zip(op->getRegions(), async->getRegions()))
    from.cloneInto(&to, mapping);
  OpBuilder(op).insert(async);
  op->replaceAllUsesWith(async->getResults().drop_back());
  op->erase();
  return async->getResults().back();
}

void orderBlock(Block &block) {
  Value token;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto asyncOp = dyn_cast<gpu::AsyncOpInterface>(op);
    if (!asyncOp)
      continue;
    if (auto wait = dyn_cast<gpu::WaitOp>(op)) {
      // A host wait the program asked for stays one.
      if (token)
        wait.addAsyncDependency(token);
      token = wait.getAsyncToken();
      continue;
    }
    if (!token) {
      OpBuilder b(&op);
      token = gpu::WaitOp::create(b, op.getLoc(),
                                  gpu::AsyncTokenType::get(op.getContext()),
                                  ValueRange())
                  .getAsyncToken();
    }
    token = makeAsync(asyncOp, token);
  }
}

struct FSDPGpuStreamOrderPass
    : public mlir::fsdp::impl::FSDPGpuStreamOrderBase<FSDPGpuStreamOrderPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::GPUModuleOp, gpu::LaunchOp>(op))
        return WalkResult::skip();
      for (Region &region : op->getRegions())
        for (Block &block : region)
          blocks.push_back(&block);
      return WalkResult::advance();
    });
    for (Block *block : blocks)
      orderBlock(*block);
  }
};

} // namespace

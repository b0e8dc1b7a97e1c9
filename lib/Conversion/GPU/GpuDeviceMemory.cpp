//===- GpuDeviceMemory.cpp - the step's buffers in device memory ----------===//
//
// With compute=gpu every kernel runs on the device, so every buffer a step
// allocates is a device buffer: `memref.alloc` / `memref.dealloc` in host
// code become `gpu.alloc` / `gpu.dealloc` (the runtime's `mgpuMemAlloc` /
// `mgpuMemFree`, ordered on the rank's compute stream). Host code that
// would read or write a buffer itself, or hand the device a host buffer
// (a stack allocation, a global), is diagnosed: it cannot run.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUDEVICEMEMORY
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

bool isHostCode(Operation *op) {
  return !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUModuleOp>();
}

/// Why host code cannot run `op` when buffers live on the device, or "".
StringRef hostAccess(Operation *op) {
  if (isa<memref::LoadOp, memref::StoreOp>(op))
    return "host code would access a device buffer";
  if (isa<memref::AllocaOp>(op))
    return "a stack buffer is host memory the device cannot read";
  if (isa<memref::GetGlobalOp>(op))
    return "a global buffer is host memory the device cannot read";
  return "";
}

struct FSDPGpuDeviceMemoryPass
    : public mlir::fsdp::impl::FSDPGpuDeviceMemoryBase<
          FSDPGpuDeviceMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    WalkResult walk =
        getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
          if (isa<gpu::GPUModuleOp, gpu::LaunchOp>(op))
            return WalkResult::skip();
          StringRef why = hostAccess(op);
          if (!why.empty()) {
            op->emitOpError("cannot run with compute=gpu: ") << why;
            return WalkResult::interrupt();
          }
          if (isa<memref::AllocOp, memref::DeallocOp>(op) && isHostCode(op))
            ops.push_back(op);
          return WalkResult::advance();
        });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (Operation *op : ops) {
      OpBuilder b(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto device = gpu::AllocOp::create(
            b, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        alloc.replaceAllUsesWith(device.getMemref());
        ++numAllocs;
      } else {
        auto dealloc = cast<memref::DeallocOp>(op);
        gpu::DeallocOp::create(b, dealloc.getLoc(), /*asyncToken=*/Type(),
                               ValueRange(), dealloc.getMemref());
      }
      op->erase();
    }
  }
};

} // namespace

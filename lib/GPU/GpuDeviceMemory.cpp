//===- GpuDeviceMemory.cpp - the step's buffers in device memory ----------===//
//
// With compute=gpu every kernel runs on the device, so every buffer a step
// allocates is a device buffer: `memref.alloc` / `memref.dealloc` in host
// code become `gpu.alloc` / `gpu.dealloc` (the runtime's `mgpuMemAlloc` /
// `mgpuMemFree`, ordered on the rank's compute stream), and the arena that
// fsdp-assign-buffers planned the other buffers into is the rank's device
// arena (`fsdprt_gpu_arena`, allocated once). A constant global the step
// reads (an index tensor, a splat that bufferization made a global: the
// decompositions of scatter, index_put and data-dependent guards make them)
// is copied to a device buffer where it is read. Host code that would read
// or write a buffer itself, or hand the device a host buffer it does not
// only read (a stack allocation, a global that leaves the function), is
// diagnosed: it cannot run. The one
// exception is a scalar the host computes or needs as a value (the
// optimizer's step count and bias corrections, its learning rate read with
// `tensor.extract`): a one-element buffer is read through a host copy after a
// wait on the stream (one host round trip per read) and written through a
// host copy copied to the device in stream order.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUDEVICEMEMORY
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A host read or write of a one-element buffer (a scalar the host computes
/// or needs as a value): it goes through a host copy of the buffer.
bool isScalarAccess(Operation *op) {
  MemRefType type;
  if (auto load = dyn_cast<memref::LoadOp>(op))
    type = load.getMemRefType();
  else if (auto store = dyn_cast<memref::StoreOp>(op))
    type = store.getMemRefType();
  return type && type.hasStaticShape() && type.getNumElements() == 1 &&
         type.getLayout().isIdentity();
}

/// A read: the device buffer copied to a host one once the stream has run
/// up to here (a host wait), then read. A write: the host buffer written,
/// then copied to the device buffer in stream order (a copy from pageable
/// host memory has read it when the call returns).
void accessScalar(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto load = dyn_cast<memref::LoadOp>(op);
  Value device =
      load ? load.getMemref() : cast<memref::StoreOp>(op).getMemref();
  Value host =
      memref::AllocaOp::create(b, loc, cast<MemRefType>(device.getType()));
  if (load) {
    gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), host, device);
    gpu::WaitOp::create(b, loc, Type(), ValueRange());
    load.getMemrefMutable().assign(host);
    return;
  }
  auto store = cast<memref::StoreOp>(op);
  store.getMemrefMutable().assign(host);
  b.setInsertionPointAfter(store);
  gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), device, host);
}

/// The host entry points and their device forms (fsdprt_gpu.h): the same
/// arguments, every pointer a device pointer. The quantization kernels are
/// enqueued on the rank's compute stream (the host forms would read device
/// memory from the host, outside the stream's order); the arena is device
/// memory allocated once per rank.
constexpr std::pair<RuntimeFunction, RuntimeFunction> kDeviceForms[] = {
    {RuntimeFunction::quant_amax, RuntimeFunction::gpu_quant_amax},
    {RuntimeFunction::quantize, RuntimeFunction::gpu_quantize},
    {RuntimeFunction::dequantize, RuntimeFunction::gpu_dequantize},
    // The planned arena (fsdp-assign-buffers): the rank's device arena.
    {RuntimeFunction::arena, RuntimeFunction::gpu_arena}};

/// Calls of the host entry points become calls of their device forms,
/// declared in place of the host ones.
void useDeviceForms(ModuleOp module) {
  SymbolTable symbols(module);
  for (auto [hostFn, deviceFn] : kDeviceForms) {
    auto decl = symbols.lookup<func::FuncOp>(getRuntimeFunctionName(hostFn));
    if (!decl)
      continue;
    StringRef device = getRuntimeFunctionName(deviceFn);
    if (!symbols.lookup(device)) {
      OpBuilder b(decl);
      symbols.insert(createRuntimeDeclaration(b, decl.getLoc(), deviceFn));
    }
    if (failed(SymbolTable::replaceAllSymbolUses(
            decl, StringAttr::get(module.getContext(), device), module)))
      continue;
    symbols.erase(decl);
  }
}

/// Whether `value` (or a view of it) leaves its block: a terminator's
/// operand (a result of the step, a loop's yield).
bool escapes(Value value) {
  for (Operation *user : value.getUsers()) {
    if (user->hasTrait<OpTrait::IsTerminator>())
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user))
      if (view.getViewSource() == value && escapes(view->getResult(0)))
        return true;
  }
  return false;
}

/// A constant global read in its block: its data can be copied to a device
/// buffer there, freed at the end of the block.
bool isCopyableGlobal(memref::GetGlobalOp op) {
  MemRefType type = op.getType();
  return type.hasStaticShape() && type.getLayout().isIdentity() &&
         !escapes(op.getResult());
}

/// `memref.get_global` -> a device buffer, the global copied into it in
/// stream order, freed before the block's terminator (after every read of
/// the block and of the regions in it). One allocation and one copy each
/// time the block runs; the constants the frontend's decompositions leave
/// are small (index tensors, splats).
void copyGlobalToDevice(memref::GetGlobalOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto device = gpu::AllocOp::create(
      b, loc, op.getType(), /*asyncToken=*/Type(),
      /*asyncDependencies=*/ValueRange(), /*dynamicSizes=*/ValueRange(),
      /*symbolOperands=*/ValueRange(), /*hostShared=*/false);
  op.getResult().replaceAllUsesWith(device.getMemref());
  b.setInsertionPointAfter(device);
  gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), device.getMemref(),
                        op.getResult());
  b.setInsertionPoint(op->getBlock()->getTerminator());
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(),
                         device.getMemref());
  op->moveBefore(device);
}

/// Why host code cannot run `op` when buffers live on the device, or "".
StringRef hostAccess(Operation *op) {
  if (isScalarAccess(op))
    return "";
  if (isa<memref::LoadOp, memref::StoreOp>(op))
    return "host code would access a device buffer";
  if (isa<memref::AllocaOp>(op))
    return "a stack buffer is host memory the device cannot read";
  if (auto global = dyn_cast<memref::GetGlobalOp>(op))
    if (!isCopyableGlobal(global))
      return "a global buffer that leaves its block (or has a dynamic shape "
             "or a layout) is host memory the device cannot read";
  return "";
}

struct FSDPGpuDeviceMemoryPass
    : public mlir::fsdp::impl::FSDPGpuDeviceMemoryBase<
          FSDPGpuDeviceMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    SmallVector<memref::GetGlobalOp> globals;
    WalkResult walk =
        getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
          if (isa<gpu::GPUModuleOp, gpu::LaunchOp>(op))
            return WalkResult::skip();
          StringRef why = hostAccess(op);
          if (!why.empty()) {
            op->emitOpError("cannot run with compute=gpu: ") << why;
            return WalkResult::interrupt();
          }
          if (isa<memref::AllocOp, memref::DeallocOp>(op) || isScalarAccess(op))
            ops.push_back(op);
          if (auto global = dyn_cast<memref::GetGlobalOp>(op))
            globals.push_back(global);
          return WalkResult::advance();
        });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (memref::GetGlobalOp global : globals)
      copyGlobalToDevice(global);
    for (Operation *op : ops) {
      OpBuilder b(op);
      if (isa<memref::LoadOp, memref::StoreOp>(op)) {
        accessScalar(op);
        continue;
      }
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
    useDeviceForms(getOperation());
    // What the runner reads: every buffer of this step is device memory.
    getOperation()->setAttr("fsdp.gpu", UnitAttr::get(&getContext()));
  }
};

} // namespace

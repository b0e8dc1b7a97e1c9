//===- KernelAlignment.cpp - what a kernel's buffers are aligned to -------===//
//
// The byte alignment of a buffer's base (its aligned pointer, before the
// static offset of its layout) as the step's code shows it: planned buffers
// are views of the rank's device arena at constant byte offsets, the arena,
// the scratch buffer and every device allocation come from the runtime's
// allocator (cudaMallocAsync: 256 bytes), the step's buffer arguments are
// separate allocations of the runners, and views keep their source's base.
// A kernel function's argument is aligned to what every call passes
// (followed through the segments that call it and the results they return).
// fsdp-gpu-kernels vectorizes an elementwise kernel only where every
// operand's accesses are aligned to their width (KernelVectorized.cpp).
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

namespace {

/// The largest power of two (at most kKnownAlignment) dividing `bytes`.
int64_t powerOfTwoDividing(int64_t bytes) {
  if (bytes == 0)
    return kKnownAlignment;
  return std::min<int64_t>(kKnownAlignment, bytes & -bytes);
}

/// Whether `callee` is a runtime function returning a device buffer of the
/// runtime's allocator (or of the host arena, which compute=gpu turns into
/// the device arena).
bool isRuntimeAllocation(StringRef callee) {
  return callee == "fsdprt_gpu_arena" || callee == "fsdprt_gpu_scratch" ||
         callee == "fsdprt_gpu_alloc" || callee == "fsdprt_jit_arena";
}

} // namespace

BufferAlignment::BufferAlignment(ModuleOp module) {
  module.walk([&](func::CallOp call) {
    callers[call.getCalleeAttr().getAttr()].push_back(call);
  });
}

/// The alignment of the pointer an LLVM value holds: a runtime allocation's
/// result, else unknown (1).
static int64_t pointerAlignment(Value ptr) {
  if (auto call = ptr.getDefiningOp<func::CallOp>())
    return isRuntimeAllocation(call.getCallee()) ? kRuntimeAlignment : 1;
  return 1;
}

/// The aligned pointer of a memref descriptor built from its fields
/// (`llvm.insertvalue` into position 1), or null.
static Value alignedPointerField(Value desc) {
  while (auto insert = desc.getDefiningOp<LLVM::InsertValueOp>()) {
    if (insert.getPosition() == ArrayRef<int64_t>{1})
      return insert.getValue();
    desc = insert.getContainer();
  }
  return nullptr;
}

int64_t BufferAlignment::of(Value buffer) {
  auto it = known.find(buffer);
  if (it != known.end())
    return it->second;
  // A cycle (none in a step's call graph) resolves to unknown.
  known[buffer] = 1;
  int64_t a = compute(buffer);
  known[buffer] = a;
  return a;
}

int64_t BufferAlignment::compute(Value buffer) {
  // An index (a view's byte shift): the power of two it is a multiple of.
  if (buffer.getType().isIndex() && !isa<BlockArgument>(buffer)) {
    if (std::optional<int64_t> c = getConstantIntValue(buffer))
      return powerOfTwoDividing(*c);
    Operation *def = buffer.getDefiningOp();
    if (isa<arith::AddIOp, arith::SubIOp>(def))
      return std::min(of(def->getOperand(0)), of(def->getOperand(1)));
    if (isa<arith::MulIOp>(def))
      return std::min(kKnownAlignment,
                      of(def->getOperand(0)) * of(def->getOperand(1)));
    return 1;
  }
  if (auto arg = dyn_cast<BlockArgument>(buffer)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func || !arg.getOwner()->isEntryBlock())
      return 1;
    // The step itself: each buffer argument is an allocation of the
    // runner's (fsdprt_gpu_alloc); nothing is known of an index.
    if (!func.isPrivate())
      return arg.getType().isIndex() ? 1 : kArgumentAlignment;
    auto calls = callers.find(func.getSymNameAttr());
    if (calls == callers.end() || calls->second.empty())
      return 1;
    int64_t a = kKnownAlignment;
    for (func::CallOp call : calls->second)
      a = std::min(a, of(call.getOperand(arg.getArgNumber())));
    return a;
  }
  Operation *def = buffer.getDefiningOp();
  if (auto view = dyn_cast<memref::ViewOp>(def))
    return std::min(of(view.getSource()), of(view.getByteShift()));
  if (auto view = dyn_cast<ViewLikeOpInterface>(def))
    return of(view.getViewSource());
  if (auto alloc = dyn_cast<memref::AllocOp>(def))
    return std::max<int64_t>(alloc.getAlignment().value_or(1),
                             kRuntimeAlignment);
  if (auto cast = dyn_cast<UnrealizedConversionCastOp>(def)) {
    if (cast->getNumOperands() != 1)
      return 1;
    Value ptr = alignedPointerField(cast.getOperand(0));
    return ptr ? pointerAlignment(ptr) : 1;
  }
  if (auto call = dyn_cast<func::CallOp>(def)) {
    auto module = call->getParentOfType<ModuleOp>();
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return 1;
    unsigned index = cast<OpResult>(buffer).getResultNumber();
    int64_t a = kKnownAlignment;
    callee.walk([&](func::ReturnOp ret) {
      a = std::min(a, of(ret.getOperand(index)));
    });
    return a;
  }
  return 1;
}

//===- GpuMultiTensor.cpp - independent per-tensor kernels as one ---------===//
//
// The optimizer updates every parameter with the same elementwise kernel and
// sums every gradient's squares with the same reduction: one launch per
// parameter (about 300 for GPT-2 small), mostly launch overhead. This pass
// puts a run of such kernel calls (`fsdp.multi_tensor` ops, outlined one per
// kernel function) into one kernel function, which fsdp-gpu-kernels launches
// once per stage (KernelMultiTensor.cpp): a multi-tensor launch, as torch's
// fused AdamW and apex's multi_tensor_apply, whose kernel parameters are the
// parts' buffers (no pointer table to upload, nothing for the host to wait
// for).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPMultiTensor.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SetVector.h"

#include <optional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUMULTITENSOR
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The kind of the multi-tensor ops `kernel` holds (every linalg op but
/// fills marked with one kind, nothing else but constants), or "".
StringRef partKind(func::FuncOp kernel) {
  if (!kernel || kernel.isExternal() || !kernel->hasAttr(kKernelAttrName) ||
      kernel->hasAttr(kMultiTensorAttrName))
    return "";
  StringRef kind;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<func::ReturnOp, linalg::FillOp>(op) || isMemoryEffectFree(&op))
      continue;
    auto mark = op.getAttrOfType<StringAttr>(kMultiTensorAttrName);
    if (!isa<linalg::LinalgOp>(op) || !mark ||
        (!kind.empty() && mark.getValue() != kind))
      return "";
    kind = mark.getValue();
  }
  return kind;
}

/// The buffer a call operand is part of: the arena (or other buffer) a
/// `memref.view` at a constant byte offset takes it from, with its bytes,
/// or the value itself (all of it) through subviews and reshapes.
struct Root {
  Value base;
  std::optional<std::pair<int64_t, int64_t>> bytes; // [begin, end)
};

std::optional<int64_t> byteSize(MemRefType t) {
  if (!t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return std::nullopt;
  return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
}

Root rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto view = dyn_cast<memref::ViewOp>(def)) {
      std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
      std::optional<int64_t> size = byteSize(view.getType());
      if (!shift || !size)
        return {view.getSource(), std::nullopt};
      return {view.getSource(), std::make_pair(*shift, *shift + *size)};
    }
    if (!isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
             memref::CastOp>(def))
      break;
    v = cast<ViewLikeOpInterface>(def).getViewSource();
  }
  return {v, std::nullopt};
}

/// Whether `a` and `b` may share bytes. A function argument that is
/// written may alias any other argument (the caller may pass one buffer
/// twice).
bool mayOverlap(const Root &a, const Root &b) {
  if (a.base != b.base)
    return isa<BlockArgument>(a.base) && isa<BlockArgument>(b.base) &&
           !a.bytes && !b.bytes;
  if (!a.bytes || !b.bytes)
    return true;
  return a.bytes->first < b.bytes->second && b.bytes->first < a.bytes->second;
}

/// One call of a part: its operands' roots, and which ones it writes.
struct Part {
  func::CallOp call;
  func::FuncOp kernel;
  SmallVector<Root> roots;
  SmallVector<bool> written;
};

Part describe(func::CallOp call, func::FuncOp kernel) {
  Part p{call, kernel, {}, {}};
  llvm::DenseSet<Value> writes;
  kernel.walk([&](linalg::LinalgOp op) {
    for (Value init : op.getDpsInits())
      writes.insert(init);
  });
  for (auto [operand, arg] :
       llvm::zip(call.getOperands(), kernel.getArguments())) {
    p.roots.push_back(rootOf(operand));
    p.written.push_back(writes.contains(arg));
  }
  return p;
}

/// Whether `a` and `b` can run at once: neither writes what the other
/// reads or writes.
bool independent(const Part &a, const Part &b) {
  for (auto [ra, wa] : llvm::zip(a.roots, a.written))
    for (auto [rb, wb] : llvm::zip(b.roots, b.written))
      if ((wa || wb) && mayOverlap(wa ? ra : rb, wa ? rb : ra))
        return false;
  return true;
}

struct FSDPGpuMultiTensorPass
    : public mlir::fsdp::impl::FSDPGpuMultiTensorBase<FSDPGpuMultiTensorPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (maxArgs < 2)
      return emitError(UnknownLoc::get(ctx))
             << "option max-args must be at least 2, got "
             << static_cast<int64_t>(maxArgs);
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<Block *> blocks;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !func->hasAttr(kKernelAttrName))
        func.walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      groupBlock(*block, symbols);
    // Kernel functions whose every call was grouped.
    for (func::FuncOp kernel : grouped)
      if (SymbolTable::symbolKnownUseEmpty(kernel, module))
        kernel.erase();
  }

  /// The kernel functions of grouped calls.
  llvm::SetVector<func::FuncOp> grouped;

  unsigned counter = 0;

  void groupBlock(Block &block, SymbolTable &symbols) {
    SmallVector<Part> run;
    llvm::SetVector<Value> runArgs;
    StringRef runKind;
    auto flush = [&]() {
      if (run.size() > 1)
        buildGroup(run, runArgs, runKind, symbols);
      run.clear();
      runArgs.clear();
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto call = dyn_cast<func::CallOp>(op);
      func::FuncOp kernel =
          call ? symbols.lookup<func::FuncOp>(call.getCallee()) : nullptr;
      StringRef kind = partKind(kernel);
      if (kind.empty()) {
        if (!isMemoryEffectFree(&op))
          flush();
        continue;
      }
      Part part = describe(call, kernel);
      llvm::SetVector<Value> args = runArgs;
      args.insert(call.getOperands().begin(), call.getOperands().end());
      bool fits = kind == runKind && int64_t(args.size()) <= maxArgs &&
                  llvm::all_of(run, [&](const Part &other) {
                    return independent(other, part);
                  });
      if (!fits) {
        flush();
        args.clear();
        args.insert(call.getOperands().begin(), call.getOperands().end());
      }
      runKind = kind;
      runArgs = std::move(args);
      run.push_back(std::move(part));
    }
    flush();
  }

  /// One kernel function with every part's ops (on the run's distinct
  /// operands), called where the run's last call was.
  void buildGroup(ArrayRef<Part> run, const llvm::SetVector<Value> &args,
                  StringRef kind, SymbolTable &symbols) {
    MLIRContext *ctx = &getContext();
    func::CallOp last = run.back().call;
    OpBuilder b(ctx);
    SmallVector<Type> types =
        llvm::map_to_vector(args, [](Value v) { return v.getType(); });
    auto group = func::FuncOp::create(
        b, last.getLoc(), ("__fsdp_multi_tensor_" + Twine(counter++)).str(),
        b.getFunctionType(types, {}));
    group.setPrivate();
    group->setAttr(kKernelAttrName, UnitAttr::get(ctx));
    group->setAttr(kMultiTensorAttrName, b.getStringAttr(kind));
    group->setAttr("passthrough", b.getStrArrayAttr({"noinline"}));
    Block *entry = group.addEntryBlock();
    b.setInsertionPointToStart(entry);
    llvm::DenseMap<Value, unsigned> index;
    for (auto [i, v] : llvm::enumerate(args))
      index[v] = i;
    for (const Part &part : run) {
      func::CallOp call = part.call;
      func::FuncOp kernel = part.kernel;
      IRMapping map;
      for (auto [operand, arg] :
           llvm::zip(call.getOperands(), kernel.getArguments()))
        map.map(arg, entry->getArgument(index.lookup(operand)));
      for (Operation &op : kernel.getBody().front().without_terminator())
        b.clone(op, map);
    }
    func::ReturnOp::create(b, last.getLoc());
    symbols.insert(group);
    OpBuilder at(last);
    func::CallOp::create(at, last.getLoc(), group, args.getArrayRef());
    for (const Part &part : run) {
      grouped.insert(part.kernel);
      part.call->erase();
    }
    ++numGroups;
    numParts += run.size();
  }
};

} // namespace

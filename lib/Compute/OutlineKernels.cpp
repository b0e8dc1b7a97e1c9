//===- OutlineKernels.cpp - one function per bufferized linalg op ---------===//
//
// Moves every linalg op of a bufferized function into a private function of
// its own (`__fsdp_kernel_<n>`) and calls it. Structurally equal ops (same
// op, attributes, operand types and body) share one kernel, so a model of L
// identical blocks compiles each kernel once. A `linalg.fill` directly
// followed by a linalg op that accumulates into the filled buffer (a matmul
// into zeros, a max into -inf) shares that op's kernel, so that the BLAS
// lowering can see the zeros (beta = 0, no fill). The step function keeps only
// calls, allocations and collectives: loop lowering, control-flow
// conversion and LLVM's optimizer then see many small functions instead of
// one that grows with the model.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPOUTLINEKERNELS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Whether `v` is a constant that the kernel can rematerialize itself.
Operation *constantDef(Value v) {
  Operation *def = v.getDefiningOp();
  if (def && def->hasTrait<OpTrait::ConstantLike>() &&
      def->getNumOperands() == 0 && def->getNumRegions() == 0)
    return def;
  return nullptr;
}

/// Only ops on buffers: a tensor op has results the caller uses. Copies
/// too: each is a memcpy or a strided copy loop.
bool isOutlined(Operation *op) {
  return (isa<linalg::LinalgOp>(op) && op->getNumResults() == 0 &&
          !op->getParentOfType<linalg::LinalgOp>()) ||
         isa<memref::CopyOp>(op);
}

/// The ops to outline, one kernel each: one op, or a fill and the op that
/// accumulates into the filled buffer.
SmallVector<SmallVector<Operation *, 2>> collectGroups(ModuleOp module) {
  SmallVector<SmallVector<Operation *, 2>> groups;
  llvm::DenseSet<Operation *> grouped;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func->hasAttr(kKernelAttrName))
      continue;
    func.walk([&](Operation *op) {
      if (!isOutlined(op) || grouped.contains(op))
        return;
      groups.push_back({op});
      auto fill = dyn_cast<linalg::FillOp>(op);
      auto next = dyn_cast_or_null<linalg::LinalgOp>(op->getNextNode());
      if (fill && next && !isa<linalg::FillOp>(next.getOperation()) &&
          isOutlined(next.getOperation()) &&
          llvm::is_contained(next.getDpsInits(), fill.getOutputs()[0])) {
        groups.back().push_back(next);
        grouped.insert(next);
      }
    });
  }
  return groups;
}

/// The candidate kernel of `group`, detached, and the values the call
/// passes it: the ops' own operands, then values their bodies capture
/// (constants are cloned into the kernel instead).
func::FuncOp buildKernel(MLIRContext *ctx, ArrayRef<Operation *> group,
                         SmallVector<Value> &args) {
  Operation *op = group.front();
  llvm::SetVector<Value> used;
  for (Operation *member : group) {
    used.insert(member->getOperands().begin(), member->getOperands().end());
    getUsedValuesDefinedAbove(member->getRegions(), used);
  }
  SmallVector<Operation *> constants;
  for (Value v : used) {
    if (Operation *c = constantDef(v))
      constants.push_back(c);
    else
      args.push_back(v);
  }
  SmallVector<Type> argTypes =
      llvm::map_to_vector(args, [](Value v) { return v.getType(); });
  OpBuilder b(ctx);
  auto kernel = func::FuncOp::create(b, op->getLoc(), "__fsdp_kernel",
                                     b.getFunctionType(argTypes, {}));
  Block *entry = kernel.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  for (auto [from, to] : llvm::zip(args, entry->getArguments()))
    map.map(from, to);
  for (Operation *c : constants)
    if (!map.contains(c->getResult(0)))
      map.map(c->getResult(0), b.clone(*c)->getResult(0));
  for (Operation *member : group)
    b.clone(*member, map);
  func::ReturnOp::create(b, op->getLoc());
  return kernel;
}

/// The deduplication key of a candidate kernel: its generic form.
std::string kernelKey(func::FuncOp kernel) {
  std::string key;
  llvm::raw_string_ostream os(key);
  OpPrintingFlags flags;
  flags.printGenericOpForm().elideLargeElementsAttrs(1 << 30);
  kernel->print(os, flags);
  return key;
}

struct FSDPOutlineKernelsPass
    : public mlir::fsdp::impl::FSDPOutlineKernelsBase<FSDPOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SymbolTable symbols(module);
    Builder b(ctx);
    llvm::StringMap<func::FuncOp> kernels;
    unsigned counter = 0;
    for (ArrayRef<Operation *> group : collectGroups(module)) {
      Operation *op = group.front();
      SmallVector<Value> args;
      func::FuncOp kernel = buildKernel(ctx, group, args);
      func::FuncOp &existing = kernels[kernelKey(kernel)];
      if (!existing) {
        kernel.setSymName(("__fsdp_kernel_" + llvm::Twine(counter++)).str());
        kernel.setPrivate();
        kernel->setAttr(kKernelAttrName, UnitAttr::get(ctx));
        kernel->setAttr("passthrough", b.getStrArrayAttr({"noinline"}));
        symbols.insert(kernel);
        existing = kernel;
      } else {
        kernel.erase();
      }
      OpBuilder at(op);
      func::CallOp::create(at, op->getLoc(), existing, args);
      // The caller is left with calls, allocations and collectives:
      // nothing LLVM's optimizer would speed up, only slow to optimize.
      if (auto caller = op->getParentOfType<func::FuncOp>()) {
        caller->setAttr("passthrough",
                        b.getStrArrayAttr({"noinline", "optnone"}));
      }
      for (Operation *member : llvm::reverse(group))
        member->erase();
    }
  }
};

} // namespace

//===- GpuMergeModules.cpp - every kernel of a step in one gpu.module -----===//
//
// gpu-kernel-outlining puts each kernel into a gpu.module of its own. Each
// module is compiled separately by gpu-module-to-binary (one NVPTX code
// generation, one ptxas and one fatbinary process) and loaded separately
// at run time (one mgpuModuleLoad). A step's kernels therefore move into
// one module: one binary, one assembler run, one load per device.
//
//===----------------------------------------------------------------------===//

#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUMERGEMODULES
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr llvm::StringLiteral kMergedName = "__fsdp_kernels";

struct FSDPGpuMergeModulesPass
    : public mlir::fsdp::impl::FSDPGpuMergeModulesBase<
          FSDPGpuMergeModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> sources(module.getOps<gpu::GPUModuleOp>());
    if (sources.size() < 2)
      return;
    OpBuilder b(module.getContext());
    auto merged =
        gpu::GPUModuleOp::create(b, sources.front().getLoc(), kMergedName);
    // Renamed if the name is taken.
    SymbolTable(module).insert(merged, Block::iterator(sources.front()));
    Block &body = merged.getBodyRegion().front();
    llvm::StringSet<> names;
    llvm::DenseMap<StringAttr, StringAttr> movedFrom;
    for (gpu::GPUModuleOp source : sources) {
      // A module whose symbols would collide with ones already merged (or
      // that carries its own targets) stays as it is.
      Block &from = source.getBodyRegion().front();
      bool clash = source.getTargetsAttr() != nullptr;
      for (Operation &op : from)
        if (auto sym = SymbolTable::getSymbolName(&op))
          clash |= names.contains(sym.getValue());
      if (clash)
        continue;
      for (Operation &op : llvm::make_early_inc_range(from)) {
        if (auto sym = SymbolTable::getSymbolName(&op))
          names.insert(sym.getValue());
        op.moveBefore(&body, body.end());
      }
      movedFrom[source.getSymNameAttr()] = merged.getSymNameAttr();
      source.erase();
      ++numMerged;
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr kernel = launch.getKernel();
      auto it = movedFrom.find(kernel.getRootReference());
      if (it != movedFrom.end())
        launch.setKernelAttr(
            SymbolRefAttr::get(it->second, kernel.getNestedReferences()));
    });
  }
};

} // namespace

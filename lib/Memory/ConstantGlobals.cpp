//===- ConstantGlobals.cpp - constants' globals in program order ----------===//
//
// One-shot bufferization with function boundaries bufferizes the functions
// that call no other in the iteration order of a map keyed by the
// functions' addresses, and creates each tensor constant's memref.global
// (its name uniqued by a counter, its place at the top of the module) when
// it meets the constant: the globals' order and names changed from one run
// to the next. Creating them first, in program order and with upstream's
// own helper, leaves bufferization only to find them.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/BufferUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCONSTANTGLOBALS
#include "fsdp/Memory/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPConstantGlobalsPass
    : public mlir::fsdp::impl::FSDPConstantGlobalsBase<
          FSDPConstantGlobalsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    // Module::walk visits the functions, and the ops in each, in program
    // order.
    WalkResult walked = module.walk([&](arith::ConstantOp constant) {
      if (!isa<RankedTensorType>(constant.getType()) ||
          !constant->getParentOfType<func::FuncOp>() ||
          constant->getParentOfType<ModuleOp>() != module)
        return WalkResult::advance();
      if (failed(bufferization::getGlobalFor(constant, symbols, alignment))) {
        constant.emitError("cannot create the global of this constant");
        return WalkResult::interrupt();
      }
      ++numConstants;
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

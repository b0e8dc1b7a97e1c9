//===- Passes.td - fsdp conversion passes ------------------*- tablegen -*-===//

#ifndef FSDP_CONVERSION_PASSES_TD
#define FSDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFSDPToRuntime : Pass<"convert-fsdp-to-runtime", "ModuleOp"> {
  let summary = "Lower buffer collectives to calls into the fsdprt C runtime";
  let description = [{
    Runs after bufferization. Every `fsdp.buffer.*` collective becomes a call
    to the runtime's JIT entry points (`fsdprt_jit_all_gather`, ...) with raw
    pointers, element count, dtype code, reduction code and the group's
    mesh-axis bit mask; the runtime resolves the calling rank's communicator
    and caches one sub-communicator per mask. Functions that carry fsdp
    argument/result attributes get `llvm.emit_c_interface`, and their
    signature (names, shard and global types, layouts) is recorded in the
    module attribute `fsdp.signatures` for the runner.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // FSDP_CONVERSION_PASSES_TD

//===- Passes.td - conversions -----------------------------*- tablegen -*-===//

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
    and caches one sub-communicator per mask.

    Functions that carry fsdp argument/result attributes are the runner's
    entries: their signature (a `#fsdp.signature` of `#fsdp.port`s: names,
    slot and global types, layouts, the training fields) is recorded in the
    module attribute `fsdp.signatures`, their fsdp attributes are dropped,
    and they get `llvm.emit_c_interface`. An entry with results returns
    them through memory: it takes a pointer to the results area first and
    stores each result's memref descriptor there (3 + 2 x rank 64-bit
    words, one after the other in result order) instead of returning them,
    so its C interface is `_mlir_ciface_<entry>(results, arg0, ...)`, each
    argument a pointer to its descriptor, and the text of the lowered module
    grows linearly with the number of results. An entry must not be called,
    and its arguments and results must be statically shaped tensors or
    memrefs of a type the runner reads (f16, bf16, f32, f64, 8-bit, i32,
    i64); anything else is diagnosed at the function.

    Every `cf.assert` outside a kernel body (a run-time check of the step:
    the PyTorch frontend's guards on values the forward read from a tensor;
    the asserts inside linalg bodies, torch-mlir's bounds checks, stay)
    becomes a call to
    `fsdprt_jit_guard` with the condition and its message (an internal
    global string): a failed check records the message as the rank's error,
    aborts the world so that no peer waits for the rank, and the runner
    reports it, instead of cf.assert's own lowering, which aborts the
    process.

    Operations no lowering after this pass lowers are rejected at the
    operation: `gpu` dialect operations (device code written into the step
    by hand; the pass runs before any device code is generated, and the GPU
    lowering writes all of it), and, without `device`, the device
    scatter-add `fsdp.buffer.scatter_add_rows`, which only the GPU
    lowering's `fsdp-gpu-scatter-add` lowers (the CPU lowering turns a
    one-hot product into host loops instead, `fsdp-one-hot-scatter`).
  }];
  let options = [
    Option<"device", "device", "bool", /*default=*/"false",
           "The step is lowered for the GPU (compute=gpu): device operations "
           "such as fsdp.buffer.scatter_add_rows are left to the GPU "
           "lowering">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // FSDP_CONVERSION_PASSES_TD

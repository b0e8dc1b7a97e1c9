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

def FSDPEarlyDealloc : Pass<"fsdp-early-dealloc", "ModuleOp"> {
  let summary = "Free each buffer right after its last use (after the wait "
                "of a collective that uses it)";
  let description = [{
    Runs after upstream ownership-based buffer deallocation, before
    `bufferization-lower-deallocations`: ownership-based deallocation frees
    the buffers of a block in one `bufferization.dealloc` at its end, with
    run-time alias checks. For each memref of such an op the pass finds the
    allocation it belongs to: a `memref.alloc` or `bufferization.clone`, or
    the results of a call to a function that returns only buffers it
    allocates itself (`func.return` operands that are, through views,
    `memref.alloc` or `bufferization.clone` results: such results never
    alias the call's arguments, and results that share one buffer are one
    allocation). It then follows every alias of the allocation (views,
    `ViewLikeOpInterface`) to its uses, counting an operation whose
    non-buffer result (a collective's request) is used later as used until
    that later use (the `fsdp.buffer.wait`), and:

    - when an alias is a retained value of the op (a result of the
      function), drops the memref from the op, which never frees it;
    - when every use is followed and the op frees it unconditionally,
      removes it from the op and frees the allocation once with a
      `memref.dealloc` right after its last use;
    - otherwise (returned or yielded, passed to an operation that returns a
      buffer the pass does not know, address taken, freed elsewhere,
      conditional ownership) leaves it in the op, freed at the end.

    An op left without memrefs is erased. A plain `memref.dealloc` of a
    known allocation moves up to just after its last use the same way. The
    work is linear in the size of the function (each allocation's uses are
    walked once). Module pass: it reads the callees' bodies.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

//===----------------------------------------------------------------------===//
// Compute lowering for CPU (the `compute=fast` path of fsdp-lower-to-llvm)
//===----------------------------------------------------------------------===//

def FSDPFoldTransposes : Pass<"fsdp-fold-transposes"> {
  let summary = "Fold linalg.transpose on tensors into the indexing maps of "
                "the linalg ops that read it";
  let description = [{
    A consumer that reads a transposed tensor is made a `linalg.generic`
    (named ops are generalized) whose indexing map for that input reads
    the transpose's source with permuted indices; transposes left without
    a use are erased. `x @ w.T` then needs no transposed copy of `w`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FSDPFuseElementwise : Pass<"fsdp-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg producers into their consumers";
  let description = [{
    Upstream elementwise fusion on tensors, restricted to producers with a
    single use and to consumers that are not contractions (so that
    multiply-accumulate bodies stay whole for `fsdp-linalg-to-blas`).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def FSDPOutlineSegments : Pass<"fsdp-outline-segments", "ModuleOp"> {
  let summary = "Move the compute between collectives into deduplicated "
                "private functions";
  let description = [{
    Runs on tensors, before bufferization. Every maximal run of
    side-effect-free, non-`fsdp` ops in a function's body (the forward or
    backward compute of an FSDP unit between its collectives, the loss, the
    packing of a bucket) becomes a call to a private `__fsdp_segment_<n>`
    function that takes the values the run reads and returns the values
    used after it; captured constants are cloned in. Structurally equal
    runs (the same code on other tensors: the identical blocks of a model)
    share one function. The step function is left with collectives and
    one call per run, so bufferization, lowering and LLVM's code
    generation see a step that grows by a few calls per unit and a number
    of functions that does not grow with the depth of the model.
  }];
  let options = [
    Option<"minOps", "min-ops", "unsigned", /*default=*/"8",
           "Outline a run only if it holds at least this many ops "
           "(constants not counted)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def FSDPOutlineKernels : Pass<"fsdp-outline-kernels", "ModuleOp"> {
  let summary = "Move every bufferized linalg op into a deduplicated "
                "private function";
  let description = [{
    Runs after bufferization. Each linalg op on buffers (and each
    `memref.copy`) becomes a call to a
    private `__fsdp_kernel_<n>` function (marked `no_inline`) that holds
    the op, with its operands and captured values as arguments and
    captured constants cloned in. Structurally equal ops share one kernel.
    The step function is left with calls, allocations and collectives, so
    the cost of loop lowering, `convert-scf-to-cf` and LLVM's optimizer
    grows with the number of distinct kernels, not with the size of one
    function.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def FSDPLinalgToBlas : Pass<"fsdp-linalg-to-blas", "ModuleOp"> {
  let summary = "Lower contractions on buffers to cblas_sgemm/cblas_dgemm "
                "calls";
  let description = [{
    A linalg op on buffers whose body is a single multiply-accumulate and
    whose iteration space has one M, one N and one K dimension (plus any
    batch dimensions) -- `linalg.matmul`, `linalg.batch_matmul`, their
    transposed variants, generic contractions -- becomes one `cblas_?gemm`
    call per batch index (an `scf.for` nest over the batch dimensions).
    Operands are passed in place: the unit-stride dimension decides
    CblasNoTrans/CblasTrans, the other stride is the leading dimension, a
    column-major result swaps the operands. f32 and f64 only; other element
    types, dynamic shapes or strides, broadcast (zero-stride) matrix
    operands and several M/N/K dimensions stay linalg ops for the loop
    lowering. With `report`, every contraction gets a remark saying which
    way it went and why.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per contraction: lowered to BLAS, or why not">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FSDP_CONVERSION_PASSES_TD

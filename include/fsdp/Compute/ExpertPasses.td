//===- ExpertPasses.td - lowering of sparse-expert ops -----*- tablegen -*-===//
//
// The CPU lowering of the grouped products of FSDPExpertOps.td
// (ExpertPasses.h): one contraction per group, one BLAS gemm per group.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_COMPUTE_EXPERTPASSES_TD
#define FSDP_COMPUTE_EXPERTPASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPGroupedMatmul : Pass<"fsdp-grouped-matmul"> {
  let summary = "Lower grouped matrix products (sparse experts) to one "
                "contraction per group";
  let description = [{
    Runs on tensors. `fsdp.grouped_matmul` (rows grouped by the end offsets
    `offsets[g]`, group `g` times its own matrix `rhs[g]`) and
    `fsdp.grouped_matmul_transpose_lhs` (per group, `lhs^T @ rhs` summed
    over the group's rows: the experts' weight gradients) become an
    `scf.for` over the groups. Each iteration reads the group's end from
    `offsets` (clamped to `[start, rows]`), slices the group's rows (a
    slice of dynamic size, no copy after bufferization) and runs one
    contraction, a `linalg.generic` marked `fsdp.grouped_segment`, into the
    zero-filled result in place; bf16 and f16 products accumulate in an
    f32 result (the operands widened in the body), rounded once after the
    groups. The work is the rows' products: a sparse
    mixture of experts with top-k routing over `E` experts costs `k / E` of
    computing every expert on every token. `fsdp-grouped-matmul-to-blas`
    makes each contraction a BLAS gemm (compute=fast); otherwise the loop
    lowering takes it (compute=loops).

    With `device` (compute=gpu) the ops are kept: host loops cannot read
    the offsets, which live on the device. Bufferization makes each an
    `fsdp.buffer.grouped_matmul` and `fsdp-gpu-grouped-matmul` the
    runtime's device grouped gemm. An element type other than f32 and bf16,
    or offsets other than i32, i64 and index, is an error at the op.
  }];
  let options = [
    Option<"device", "device", "bool", /*default=*/"false",
           "Keep the grouped products for the device grouped gemm "
           "(compute=gpu)">
  ];
  let statistics = [
    Statistic<"numLowered", "grouped-products", "Grouped products lowered">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPGroupedMatmulToBlas
    : Pass<"fsdp-grouped-matmul-to-blas", "ModuleOp"> {
  let summary = "One BLAS gemm call per group of a grouped product";
  let description = [{
    Runs on buffers, before `fsdp-linalg-to-blas`. Each contraction marked
    `fsdp.grouped_segment` by `fsdp-grouped-matmul` (`C = A @ B` or
    `C = A^T @ B` on the group's rows, whose count is a run-time value)
    becomes one `cblas_sgemm` / `cblas_dgemm` call with beta = 1 (the result
    was zero-filled before the groups), the sizes read with `memref.dim`
    and the leading dimensions from the buffers' strided metadata. A bf16
    or f16 group (16-bit operands, the f32 accumulator of
    `fsdp-grouped-matmul`) runs `cblas_sgemm` on f32 copies of its operands
    (exact: a 16-bit product is exact in f32), freed after the call, as
    `fsdp-linalg-to-blas` does for the dense 16-bit contractions. One whose
    accumulator is not f32 or f64, or whose rows are not contiguous, stays
    a loop (`report`: a remark says why).
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark at each group contraction">
  ];
  let statistics = [
    Statistic<"numCalls", "gemm-calls", "Group contractions made gemm calls">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FSDPTopk : Pass<"fsdp-topk"> {
  let summary = "Choose the form of each fsdp.topk_indices for the target";
  let description = [{
    Runs on tensors. `fsdp.topk_indices` picks the indices aten's CPU topk
    kernel picks (ties and NaN in aten's order); the frontend also gives it
    a `stable` operand, the same selection with equal values in position
    order, computed with elementwise ops. On the CPU paths (compute=fast
    and loops) this pass drops `stable`, so that its computation is dead
    and the op runs the runtime's kernel after bufferization
    (`fsdp-topk-to-runtime`). With `device` (compute=gpu, where host code
    cannot read the input) the op is replaced by `stable`; an op without
    one is an error there. The same holds for the op with `sort`
    (torch.sort with stable=False), whose `stable` form is the stable sort.
  }];
  let options = [
    Option<"device", "device", "bool", /*default=*/"false",
           "Use the stable form (compute=gpu)">
  ];
  let statistics = [
    Statistic<"numKernels", "kernels", "Ops left for the runtime kernel">,
    Statistic<"numStable", "stable", "Ops replaced by their stable form">
  ];
}

def FSDPTopkToRuntime : Pass<"fsdp-topk-to-runtime", "ModuleOp"> {
  let summary = "fsdp.buffer.topk_indices as calls of the runtime's topk";
  let description = [{
    Runs on buffers (compute=fast and loops). Each
    `fsdp.buffer.topk_indices` becomes a call of `fsdprt_jit_topk_indices`
    (fsdprt.h), which selects each row's indices with aten's CPU algorithm
    (`std::partial_sort` when `k * 64 <= n`, else `std::nth_element` and
    `std::sort`; NaN above every number), so ties resolve as in torch; with
    `sort`, a call of `fsdprt_jit_sort_indices` (aten's unstable sort,
    `std::sort` of every row). The
    rows are the input's last dim; an input that is not a contiguous
    row-major buffer is copied into one first. Static shapes and an f32,
    f64, bf16, f16, i32 or i64 input are required (an error at the op
    otherwise).
  }];
  let statistics = [
    Statistic<"numCalls", "calls",
              "fsdprt_jit_topk_indices and fsdprt_jit_sort_indices calls">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // FSDP_COMPUTE_EXPERTPASSES_TD

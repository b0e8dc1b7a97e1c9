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
    zero-filled result in place. The work is the rows' products: a sparse
    mixture of experts with top-k routing over `E` experts costs `k / E` of
    computing every expert on every token. `fsdp-grouped-matmul-to-blas`
    makes each contraction a BLAS gemm (compute=fast); otherwise the loop
    lowering takes it (compute=loops).

    With `device` (compute=gpu) each such op is an error naming what is
    missing: a grouped gemm on the device.
  }];
  let options = [
    Option<"device", "device", "bool", /*default=*/"false",
           "Refuse the grouped products (compute=gpu has no grouped gemm)">
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
    and the leading dimensions from the buffers' strided metadata. One whose
    element type is not f32 or f64, or whose rows are not contiguous, stays
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

#endif // FSDP_COMPUTE_EXPERTPASSES_TD

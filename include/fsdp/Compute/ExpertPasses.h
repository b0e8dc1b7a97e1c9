//===- ExpertPasses.h - lowering of sparse-expert ops -----------*- C++ -*-===//
//
// fsdp-grouped-matmul and fsdp-grouped-matmul-to-blas (ExpertPasses.td).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_COMPUTE_EXPERTPASSES_H
#define FSDP_COMPUTE_EXPERTPASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Compute/ExpertPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Compute/ExpertPasses.h.inc"

} // namespace mlir::fsdp

#endif

//===- Passes.h - CPU compute lowering passes -------------------*- C++ -*-===//

#ifndef FSDP_COMPUTE_PASSES_H
#define FSDP_COMPUTE_PASSES_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {
#define GEN_PASS_DECL
#include "fsdp/Compute/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

#endif

//===- Passes.h - fsdp conversion passes ------------------------*- C++ -*-===//

#ifndef FSDP_CONVERSION_PASSES_H
#define FSDP_CONVERSION_PASSES_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {
#define GEN_PASS_DECL
#include "fsdp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

#endif

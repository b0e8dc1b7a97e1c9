//===- FSDPDialect.h - fsdp dialect -----------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.h.inc"

#endif

//===- FSDPExpertOps.h - sparse mixture-of-experts ops ----------*- C++ -*-===//
//
// fsdp.grouped_matmul and fsdp.grouped_matmul_transpose_lhs
// (FSDPExpertOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPEXPERTOPS_H
#define FSDP_DIALECT_FSDP_IR_FSDPEXPERTOPS_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h.inc"

#endif

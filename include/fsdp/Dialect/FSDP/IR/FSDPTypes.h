//===- FSDPTypes.h - fsdp types ---------------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPTYPES_H
#define FSDP_DIALECT_FSDP_IR_FSDPTYPES_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.h.inc"

#endif

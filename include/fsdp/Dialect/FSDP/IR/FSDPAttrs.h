//===- FSDPAttrs.h - fsdp attributes ----------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPATTRS_H
#define FSDP_DIALECT_FSDP_IR_FSDPATTRS_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Layout/LayoutMath.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsAttributes.h.inc"

namespace mlir::fsdp {
/// Converts one placement attribute; nullopt if `attr` is not a placement.
std::optional<::fsdp::layout::Placement> toPlacement(Attribute attr);
} // namespace mlir::fsdp

#endif

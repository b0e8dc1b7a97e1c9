//===- FSDPOps.h - fsdp operations ------------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPOPS_H
#define FSDP_DIALECT_FSDP_IR_FSDPOPS_H

#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::fsdp {
/// Collectives touch state shared with other ranks.
struct CollectiveResource
    : public SideEffects::Resource::Base<CollectiveResource> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CollectiveResource)
  StringRef getName() final { return "fsdp.collective"; }
};

class MeshOp;
/// Resolves the mesh a layout refers to, as seen from `from`.
MeshOp lookupMesh(Operation *from, FlatSymbolRefAttr mesh,
                  SymbolTableCollection *tables = nullptr);
/// Size of the group of `op` over `axes` of `mesh`; failure if the mesh or
/// an axis is unknown, or an axis is listed twice.
FailureOr<int64_t> groupSizeOf(Operation *op, FlatSymbolRefAttr mesh,
                               ArrayAttr axes, SymbolTableCollection &tables);
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

namespace mlir::fsdp {
/// The started form (`*_start`) of a blocking tensor all-gather,
/// reduce-scatter or all-reduce, with its operands and inherent attributes
/// (member layout included), at `b`'s insertion point; null for a
/// collective without one (a quantized gather). Discardable attributes are
/// the caller's to copy.
Operation *createStartedCollective(OpBuilder &b, CollectiveOpInterface op);
} // namespace mlir::fsdp

#endif

//===- FSDPInterfaces.td - fsdp op interfaces --------------*- tablegen -*-===//

#ifndef FSDP_INTERFACES_TD
#define FSDP_INTERFACES_TD

include "mlir/IR/OpBase.td"

def FSDP_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    A flat collective in any of its forms: on tensors (`fsdp.all_gather`),
    started on tensors (`fsdp.all_gather_start`), on buffers
    (`fsdp.buffer.all_gather`) or started on buffers
    (`fsdp.buffer.all_gather_start`). Passes read what a collective does
    through this interface (its kind, group, reduction, input and output)
    rather than by op name or attribute name.

    A collective's origin (`fsdp.origin`, a `#fsdp.origin`) says which
    training phase and FSDP unit it serves. Only collectives with an origin
    were created by the fsdp passes, and only those are theirs to move,
    bucket, quantize or split (`isMovable`).
  }];
  let methods = [
    InterfaceMethod<"What the collective does.",
      "::mlir::fsdp::CollectiveKind", "getCollectiveKind">,
    InterfaceMethod<"The mesh whose axes form the group.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr">,
    InterfaceMethod<"The mesh axes of the group (names, in mesh order).",
      "::mlir::ArrayAttr", "getAxes">,
    InterfaceMethod<"The reduction, for reduce-scatter and all-reduce.",
      "std::optional<::mlir::fsdp::ReduceKind>", "getReduction">,
    InterfaceMethod<"What this rank sends (a tensor or a buffer).",
      "::mlir::Value", "getCollectiveInput", (ins), [{}],
      [{ return $_op.getInput(); }]>,
    InterfaceMethod<[{What this rank receives: the result tensor (the
      pending one of a started collective) or the output buffer.}],
      "::mlir::Value", "getCollectiveOutput">,
    InterfaceMethod<"Whether the op only starts the collective (a request "
      "and an `fsdp.wait`/`fsdp.buffer.wait` complete it).",
      "bool", "isAsync">,
    InterfaceMethod<"Whether input and output are buffers (bufferized IR).",
      "bool", "isOnBuffers", (ins), [{}],
      [{ return ::llvm::isa<::mlir::MemRefType>($_op.getInput().getType()); }]>,
    InterfaceMethod<"The phase and unit the collective serves; null for a "
      "collective the fsdp passes did not create.",
      "::mlir::fsdp::OriginAttr", "getOrigin", (ins), [{}],
      [{ return $_op->template getAttrOfType<::mlir::fsdp::OriginAttr>(
             ::mlir::fsdp::kOriginAttrName); }]>,
    InterfaceMethod<"Records the phase and unit the collective serves.",
      "void", "setOrigin", (ins "::mlir::fsdp::OriginAttr":$origin), [{}],
      [{ $_op->setAttr(::mlir::fsdp::kOriginAttrName, origin); }]>,
    InterfaceMethod<[{Whether the fsdp passes may move, bucket, quantize or
      split this collective: exactly those with an origin.}],
      "bool", "isMovable", (ins), [{}],
      [{ return static_cast<bool>(
             $_op->template getAttrOfType<::mlir::fsdp::OriginAttr>(
                 ::mlir::fsdp::kOriginAttrName)); }]>,
    InterfaceMethod<[{The member-major bucket layout (`members`): each
      member's count per rank, in order; null for the rank-major layout
      (and for kinds that have only that one).}],
      "::mlir::DenseI64ArrayAttr", "getMemberCounts", (ins), [{}],
      [{ return $_op->template getAttrOfType<::mlir::DenseI64ArrayAttr>(
             "members"); }]>,
    InterfaceMethod<"Number of ranks in the group; failure if the mesh or an "
      "axis is unknown.",
      "::mlir::FailureOr<int64_t>", "getGroupSize",
      (ins "::mlir::SymbolTableCollection &":$tables), [{}],
      [{ return ::mlir::fsdp::groupSizeOf($_op, $_op.getMeshAttr(),
                                          $_op.getAxes(), tables); }]>,
  ];
}

#endif // FSDP_INTERFACES_TD

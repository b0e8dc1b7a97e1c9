//===- FSDPAttrs.td - placements and layouts ---------------*- tablegen -*-===//

#ifndef FSDP_ATTRS_TD
#define FSDP_ATTRS_TD

include "fsdp/Dialect/FSDP/IR/FSDPBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def FSDP_ReplicateAttr : FSDP_Attr<"Replicate", "replicate"> {
  let summary = "the tensor is whole along this mesh axis";
}

def FSDP_ShardAttr : FSDP_Attr<"Shard", "shard"> {
  let summary = "tensor dim `dim` is split over this mesh axis";
  let parameters = (ins "int64_t":$dim);
  let assemblyFormat = "`<` $dim `>`";
}

def FSDP_StridedShardAttr : FSDP_Attr<"StridedShard", "strided_shard"> {
  let summary = "dim split into `split_factor` parts first, each split over this axis";
  let description = [{
    View dim `dim` as `[split_factor, k, n / (split_factor * k)]`; rank `i`
    of the axis holds index `i` of the middle axis, i.e. the concatenation
    of `split_factor` strided pieces (tensor parallelism inside FSDP).
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$split_factor);
  let assemblyFormat = "`<` $dim `,` $split_factor `>`";
  let genVerifyDecl = 1;
}

def FSDP_PartialAttr : FSDP_Attr<"Partial", "partial"> {
  let summary = "a partial result still to be reduced over this mesh axis";
  let parameters = (ins EnumParameter<FSDP_ReduceKind>:$reduce);
  let assemblyFormat = "`<` $reduce `>`";
}

def FSDP_LayoutAttr : FSDP_Attr<"Layout", "layout"> {
  let summary = "mesh + one placement per mesh axis + uneven policy";
  let description = [{
    ```mlir
    #fsdp.layout<@mesh, [replicate, shard<0>]>
    #fsdp.layout<@mesh, [shard<1>], policy = balanced>
    ```
    Placements are written without the `#fsdp.` prefix. The policy decides
    who holds the remainder rows of an uneven `shard` (`ceil`, the default,
    as PyTorch FSDP2; `balanced`, one extra row on the first `n % k` ranks).
    Rules that need the mesh or the tensor shape are checked where the
    layout is attached.
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$placements,
                        DefaultValuedParameter<"::mlir::fsdp::UnevenPolicy",
                            "::mlir::fsdp::UnevenPolicy::ceil">:$policy);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Converts to the MLIR-free layout model for a mesh of `meshShape`.
    ::fsdp::layout::Layout toLayout(::llvm::ArrayRef<int64_t> meshShape) const;
    /// The data-parallel part, over the TP-local tensor the step sees (the
    /// layout itself when no mesh axis is tensor-parallel).
    ::fsdp::layout::Layout
    toDataParallelLayout(::llvm::ArrayRef<int64_t> meshShape) const {
      return ::fsdp::layout::dataParallelView(toLayout(meshShape));
    }
  }];
}

def FSDP_OriginAttr : FSDP_Attr<"Origin", "origin"> {
  let summary = "the training phase and FSDP unit a collective belongs to";
  let description = [{
    ```mlir
    fsdp.all_gather %x over @mesh ["shard"]
        {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : ...
    ```
    `fsdp-expand-collectives` sets it (as the discardable attribute
    `fsdp.origin`) on every flat collective it creates. It is the contract
    between the passes: only collectives with an origin are the fsdp
    passes' to bucket, quantize, schedule and move; any other collective
    (a user's, or the loss all-reduce) stays where it is.
  }];
  let parameters = (ins EnumParameter<FSDP_Phase>:$phase,
                        OptionalParameter<"::mlir::StringAttr">:$unit);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // FSDP_ATTRS_TD

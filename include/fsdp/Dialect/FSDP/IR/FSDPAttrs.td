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

def FSDP_TPShardAttr : FSDP_Attr<"TPShard", "tp_shard"> {
  let summary = "tensor parallelism: dim `dim` is split over this (tensor-parallel) mesh axis";
  let description = [{
    A tensor-parallel placement (docs/TENSOR_PARALLEL.md): the mesh axis is a
    tensor-parallel axis and rank `t` of it holds the `t`-th of its equal
    parts of dim `dim`. Before `fsdp-tensor-parallel` the argument has the
    global type; after it (the function carries `fsdp.tp_local`) the
    TP-local type. The data-parallel placements of the same layout shard the
    TP-local tensor, so `[shard<0>, tp_shard<0>]` owns what DTensor's
    `[_StridedShard(0, 2), Shard(0)]` owns.
  }];
  let parameters = (ins "int64_t":$dim);
  let assemblyFormat = "`<` $dim `>`";
}

def FSDP_TPReplicateAttr : FSDP_Attr<"TPReplicate", "tp_replicate"> {
  let summary = "tensor parallelism: every rank of this tensor-parallel axis holds the whole tensor";
  let description = [{
    Unlike `replicate` (a data-parallel replica whose gradient is
    all-reduced over the axis and averaged), the ranks of a tensor-parallel
    axis compute the same gradient of a replicated parameter: no reduction
    over the axis, no divisor.
  }];
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

def FSDP_PortAttr : FSDP_Attr<"Port", "port"> {
  let summary = "one argument or result of a lowered step, as the runner sees it";
  let description = [{
    ```mlir
    #fsdp.port<"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>,
               layout = #fsdp.layout<@mesh, [shard<0>]>>
    #fsdp.port<"loss" : tensor<f32>, loss>
    #fsdp.port<"lr" : tensor<f32>, role = lr>
    #fsdp.port<"w.exp_avg" : tensor<3x16xf32>, global_type = tensor<10x16xf32>,
               layout = #fsdp.layout<@mesh, [shard<0>]>, state_of = 0>
    ```
    The name is the runner's file stem (`<name>.npy`); the type is what one
    rank's function takes or returns (the slot, for a sharded value); the
    global type, written only when it differs, is the full tensor. The
    optional fields are the training contract (docs/SEMANTICS.md):
    `update_of = j` (a result that is argument `j` of the next step),
    `state_of = i` (optimizer state of parameter argument `i`),
    `role = lr | step` (an optimizer input) and `loss`. Inside a
    `#fsdp.signature` ports are written without the `#fsdp.port` prefix.
    Rules that need the mesh (the slot of the global type under the
    layout) are checked on the module's `fsdp.signatures`.
  }];
  let parameters = (ins
      "::mlir::StringAttr":$name,
      "::mlir::RankedTensorType":$type,
      "::mlir::RankedTensorType":$globalType,
      OptionalParameter<"::mlir::fsdp::LayoutAttr">:$layout,
      OptionalParameter<"std::optional<int64_t>">:$updateOf,
      OptionalParameter<"std::optional<int64_t>">:$stateOf,
      OptionalParameter<"std::optional<::mlir::fsdp::OptimRole>">:$role,
      DefaultValuedParameter<"bool", "false">:$loss);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def FSDP_SignatureAttr : FSDP_Attr<"Signature", "signature"> {
  let summary = "the arguments and results of a lowered step";
  let description = [{
    ```mlir
    module attributes {fsdp.signatures = {step = #fsdp.signature<
        args = [<"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>,
                 layout = #fsdp.layout<@mesh, [shard<0>]>>,
                <"x" : tensor<8x16xf32>>],
        results = [<"loss" : tensor<f32>, loss>]>}} {...}
    ```
    What `convert-fsdp-to-runtime` records for the runner, which sees only
    the lowered LLVM function: one `#fsdp.port` per argument and per result,
    in order. Names are unique among the arguments and among the results;
    `update_of` and `state_of` name arguments; a result updates an argument
    of its own types and layout, and no argument is updated twice. The
    module attribute `fsdp.signatures` maps each entry's name to its
    signature; there the dialect also checks every layout against its mesh
    (FSDPSignature.h has the reader and writer).
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::fsdp::PortAttr">:$args,
                        ArrayRefParameter<"::mlir::fsdp::PortAttr">:$results);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def FSDP_MemoryPlanAttr : FSDP_Attr<"MemoryPlan", "memory_plan"> {
  let summary = "the static memory of one lowered step on one rank";
  let description = [{
    ```mlir
    module attributes {fsdp.memory_plans = {step = #fsdp.memory_plan<
        arena = 1048576, outside = 4096, buffers = 120,
        largest = array<i64: 262144, 131072, 65536>>}} {...}
    ```
    What `fsdp-assign-buffers` records for the runner: the bytes of the
    rank's arena (every planned buffer is a view of it), the peak bytes of
    the statically sized buffers that stay outside it (the step's results,
    buffers freed conditionally), the number of planned buffers and the
    sizes of the largest ones (for the error of an arena that cannot be
    allocated). The static peak of the step is `arena + outside`.
  }];
  let parameters = (ins "int64_t":$arena, "int64_t":$outside,
                        "int64_t":$buffers,
                        "::mlir::DenseI64ArrayAttr":$largest);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // FSDP_ATTRS_TD

//===- Passes.td - fsdp passes -----------------------------*- tablegen -*-===//

#ifndef FSDP_TRANSFORMS_PASSES_TD
#define FSDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPLayoutReport : Pass<"fsdp-layout-report", "ModuleOp"> {
  let summary = "Print every rank's shard of each value that carries a layout";
  let description = [{
    For every function argument and result with an `fsdp.layout`, prints for
    each rank of the mesh: its mesh coordinates, local (true) shape, global
    offsets, the owned ranges of every sharded dim, the padded slot shape and
    the padding bytes it sends. The IR is not changed.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
  ];
}

def FSDPPartition : Pass<"fsdp-partition", "ModuleOp"> {
  let summary = "Turn one rank's step with full-size parameters into the sharded SPMD program";
  let description = [{
    For every function with `fsdp.layout` arguments: each sharded parameter
    argument becomes this rank's padded slot (`fsdp.global_type` records the
    full type); its uses read an `fsdp.param_gather`. With
    reshard-after-forward (the default) uses that the loss depends on read a
    forward gather and the others (backward) read a second gather placed
    before the first of them, so the forward copy can be freed in between.
    Every result marked `fsdp.grad_of = i` goes through `fsdp.grad_reduce`
    and becomes the reduced gradient's slot. `Replicate`-only parameters keep
    their type and get an all-reduced (DDP) gradient.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"reduceOp", "reduce-op", "std::string", /*default=*/"\"avg\"",
           "Gradient reduction: avg (mean over data-parallel ranks) or sum">,
    Option<"gradScale", "grad-scale", "double", /*default=*/"0.0",
           "Multiply summed gradients by this factor (needs reduce-op=sum; 0 = off)">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Cast shards to this element type before gathering (e.g. bf16)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Element type the gradient reduction runs in (e.g. f32)">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Free gathered parameters after forward and gather again for backward">,
    Option<"allReduceLoss", "all-reduce-loss", "bool", /*default=*/"false",
           "All-reduce the loss to the mean over all data-parallel ranks">,
    Option<"unevenPolicy", "uneven-policy", "std::string", /*default=*/"\"\"",
           "Override every layout's uneven policy (ceil or balanced)">,
  ];
}

def FSDPExpandCollectives : Pass<"fsdp-expand-collectives", "ModuleOp"> {
  let summary = "Rewrite parameter gathers and gradient reductions into flat collectives";
  let description = [{
    `fsdp.param_gather` becomes a flat 1-D `fsdp.all_gather` of the padded
    slot followed by its unpack: a view of the first `n` rows (Shard(0),
    `ceil` or even), per-slot narrowing (`balanced`, nested axes), chunk-cat
    along the dim (Shard(d > 0)) or the `[k, sf] -> [sf, k]` swap
    (StridedShard). `fsdp.grad_reduce` becomes the inverse pack, a flat
    `fsdp.reduce_scatter` and, for HSDP, an `fsdp.all_reduce` over the
    replicate axes (DDP: only the all-reduce). Every copy is an upstream
    tensor op, so all bytes moved are visible.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect"];
}

#endif // FSDP_TRANSFORMS_PASSES_TD

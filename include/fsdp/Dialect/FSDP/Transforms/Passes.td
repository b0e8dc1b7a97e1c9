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

#endif // FSDP_TRANSFORMS_PASSES_TD

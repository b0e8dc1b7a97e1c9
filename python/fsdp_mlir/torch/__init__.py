"""PyTorch frontend: export an `nn.Module`'s training step for fsdp-opt.

    from fsdp_mlir.torch import export_step, load_results

    export_step(model, loss_fn, batch, "out/", mesh="2x4", units=[Block])
    # fsdp-opt out/step.mlir --fsdp-pipeline="lower=true all-reduce-loss=true" -o out/l.mlir
    # fsdp-run out/l.mlir --inputs out --outputs out/results
    loss, grads = load_results("out/results", model)

Needs `torch` and `torch-mlir` (python/requirements-torch.txt). See docs/FRONTENDS.md.
"""

from .export import (
    ExportError,
    assign_units,
    export_step,
    load_inputs,
    load_results,
    parse_placement,
    reference,
)
from .step import CompiledStep, compile_step

__all__ = [
    "CompiledStep",
    "ExportError",
    "compile_step",
    "assign_units",
    "export_step",
    "load_inputs",
    "load_results",
    "parse_placement",
    "reference",
]

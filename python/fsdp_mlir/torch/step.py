"""A compiled training step, callable from PyTorch.

    step = compile_step(model, loss_fn, example_batch, mesh="2",
                        optimizer=OptimizerConfig("adamw"))
    for batch, lr in zip(batches, lrs):
        loss = step(*batch, lr=lr)        # every rank of the mesh, in-process
    params = step.parameters()            # {name: torch.Tensor}, gathered

`compile_step` exports the step (`export_step`), compiles it with `fsdp-opt
--fsdp-pipeline` (the export's options, the optimizer's and any extra
pipeline options given as keywords: `bucket_bytes=4096` becomes
`bucket-bytes=4096`) and loads it into the in-process runner
(`fsdp_mlir.runner`). Parameters and optimizer state stay sharded in the
runner between calls; the results are the bits `fsdp-run --steps N` gives
for the same batches and learning rates. Without an optimizer a call
returns the loss and the gradients.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable

import numpy as np
import torch

from fsdp_mlir.optim import OptimizerConfig
from fsdp_mlir.runner import Program
from fsdp_mlir.torch.export import ExportError, _batch_entries, export_step

_EXPORT_OPTIONS = (
    "units",
    "placement",
    "policy",
    "param_dtype",
    "reduce_dtype",
    "verify",
    "tp_plan",
    "sequence_parallel",
    "sequence_gather_quant",
)


def fsdp_opt() -> str:
    """The project's fsdp-opt: $FSDP_TOOLS_DIR, the build tree, or PATH."""
    candidates = []
    if os.environ.get("FSDP_TOOLS_DIR"):
        candidates.append(os.path.join(os.environ["FSDP_TOOLS_DIR"], "fsdp-opt"))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "..", "build", "bin", "fsdp-opt"))
    for c in candidates:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("fsdp-opt")
    if not found:
        raise ExportError("fsdp-opt not found: set FSDP_TOOLS_DIR or build the project")
    return found


def _pipeline_option(key: str, value) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (tuple, list)):
        value = ",".join(str(v) for v in value)
    return f"{key.replace('_', '-')}={value}"


class CompiledStep:
    """The callable `compile_step` returns (see the module's doc)."""

    def __init__(self, program: Program, model: dict, loss_fn: Callable, optimizer, workdir: str):
        self.program = program
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.workdir = workdir
        self._last = None

    def __call__(self, *batch, lr: float | None = None):
        entries = _batch_entries(self.loss_fn, batch[0] if len(batch) == 1 else batch)
        for name, tensor in entries:
            self.program.set_input(name, tensor.detach().cpu().numpy())
        if self.optimizer is not None:
            if lr is None:
                raise ExportError("a training step needs lr=")
            self.program.set_input("lr", np.asarray(lr, np.float32))
        elif lr is not None:
            raise ExportError("lr= is for a step compiled with an optimizer")
        # What is not set in memory (buffers) comes from the export.
        out = self.program.run(steps=1, input_dir=self.workdir)
        self._last = out
        loss = torch.from_numpy(np.array(out["loss"]).reshape(-1)[-1:].reshape(()))
        if self.optimizer is not None:
            return loss
        grads = {
            r["param"]: torch.from_numpy(out[r["name"]])
            for r in self.model["results"]
            if r["kind"] == "grad"
        }
        return loss, grads

    def parameters(self) -> dict:
        """The current global value of every trained parameter (after the
        last call); frozen ones (requires_grad=False) are not results: they
        keep the values the step was compiled with."""
        if self._last is None:
            raise ExportError("no step has run yet")
        return {
            p["name"]: torch.from_numpy(self._last[p["name"]])
            for p in self.model["params"]
            if p["name"] in self._last
        }

    @property
    def steps_taken(self) -> int:
        return self.program.steps_taken

    def close(self):
        self.program.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def compile_step(
    module: torch.nn.Module,
    loss_fn: Callable,
    example_batch,
    *,
    mesh="2",
    optimizer: OptimizerConfig | None = None,
    backend: str = "threads",
    workdir: str | None = None,
    **options,
) -> CompiledStep:
    """Exports, compiles and loads the training step of `module` (see the
    module's doc). `options`: export options (units, placement, policy,
    param_dtype, reduce_dtype, verify, tp_plan with a mesh such as
    "dp=2,tp=2") and extra `--fsdp-pipeline` options."""
    export = {k: options.pop(k) for k in list(options) if k in _EXPORT_OPTIONS}
    workdir = workdir or tempfile.mkdtemp(prefix="fsdp-step-")
    model = export_step(module, loss_fn, example_batch, workdir, mesh=mesh, **export)
    pipeline = model["config"]["pipeline"]
    if optimizer is not None:
        pipeline += " " + optimizer.pipeline_options()
    pipeline = " ".join([pipeline] + [_pipeline_option(k, v) for k, v in options.items()])
    lowered = os.path.join(workdir, "lowered.mlir")
    cmd = [fsdp_opt(), os.path.join(workdir, "step.mlir"), f"--fsdp-pipeline={pipeline}"]
    proc = subprocess.run([*cmd, "-o", lowered], capture_output=True, text=True)
    if proc.returncode != 0:
        # The exported step stays in `workdir`: the command reproduces it.
        raise ExportError(
            f"fsdp-opt failed ({pipeline}):\n{proc.stderr.strip()}\n"
            f"  the exported step is kept; reproduce with:\n  {shlex.join(cmd)} -o /dev/null"
        )
    program = Program(lowered, backend=backend, jit_cache_dir=None)
    with torch.no_grad():
        for name, p in module.named_parameters():
            program.set_input(name, p.detach().cpu().numpy().astype(np.float32))
    return CompiledStep(program, model, loss_fn, optimizer, workdir)

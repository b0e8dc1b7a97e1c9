"""Training a PyTorch model with the compiled step, and the same training in
torch.optim for comparison.

`export_training` exports the model's step (`export_step`) and lays out the
inputs of `fsdp-run --steps N` (docs/RUNTIME.md, "Training runs"): each batch
tensor as a directory of one file per step (`tokens/<g>.npy`), the learning
rate schedule as `lr.npy` [N]. Compile the step with the returned pipeline
(the export's options plus the optimizer's) and run it:

    fsdp-opt DIR/step.mlir --fsdp-pipeline="PIPELINE" -o lowered.mlir
    fsdp-run lowered.mlir --inputs DIR --outputs OUT --steps N

`train_reference` runs the same training with torch.optim in float32 on the
global batch (the numbers FSDP2 training would give, up to rounding), and
`compare_training` reads OUT (`loss.npy` [N], the final parameters) and
returns the largest relative differences.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch

from fsdp_mlir.optim import OptimizerConfig
from fsdp_mlir.torch.decompositions import eager_context
from fsdp_mlir.torch.export import ExportError, _batch_entries, export_step


def lr_schedule(steps: int, peak: float = 3e-3, floor: float = 3e-4, warmup: int = 0) -> np.ndarray:
    """Linear warmup to `peak`, then cosine decay to `floor` (float32, [steps])."""
    warmup = warmup or max(1, steps // 10)
    lrs = []
    for s in range(steps):
        if s < warmup:
            lrs.append(peak * (s + 1) / warmup)
        else:
            t = (s - warmup) / max(1, steps - warmup - 1)
            lrs.append(floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(t, 1.0))))
    return np.array(lrs, np.float32)


def export_training(
    module: torch.nn.Module,
    loss_fn: Callable,
    batches: Sequence,
    out_dir: str | os.PathLike,
    cfg: OptimizerConfig,
    lrs,
    **export_options,
) -> dict:
    """Exports the step of `module` (`export_step` with `batches[0]` and
    `export_options`) and writes one file per step for every batch tensor and
    `lr.npy`. Returns the model description with `"train_pipeline"`: the
    `--fsdp-pipeline` options that compile it with the optimizer."""
    lrs = np.asarray(lrs, np.float32)
    if lrs.shape != (len(batches),):
        raise ExportError(
            f"lrs: expected one learning rate per batch ({len(batches)}), got shape {lrs.shape}"
        )
    out_dir = str(out_dir)
    model = export_step(module, loss_fn, batches[0], out_dir, **export_options)
    for g, batch in enumerate(batches):
        for name, tensor in _batch_entries(loss_fn, batch):
            if g == 0:
                os.remove(os.path.join(out_dir, name + ".npy"))
                os.makedirs(os.path.join(out_dir, name), exist_ok=True)
            np.save(os.path.join(out_dir, name, f"{g}.npy"), tensor.numpy())
    np.save(os.path.join(out_dir, "lr.npy"), lrs)
    model["train_pipeline"] = f"{model['config']['pipeline']} {cfg.pipeline_options()}"
    return model


def train_reference(
    module: torch.nn.Module, loss_fn: Callable, batches: Sequence, cfg: OptimizerConfig, lrs
):
    """The same training with torch.optim (float32, foreach=False) on the
    global batch, on a copy of `module`. Returns (losses [N], {name: final
    parameter}) for the parameters that require grad (the frozen ones are
    not trained, and not results of the compiled step either)."""
    ref = copy.deepcopy(module).float()
    params = [p for p in ref.parameters() if p.requires_grad]
    if cfg.kind == "adamw":
        opt = torch.optim.AdamW(
            params,
            lr=0.0,
            betas=tuple(cfg.betas),
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            foreach=False,
        )
    else:
        opt = torch.optim.SGD(
            params,
            lr=0.0,
            momentum=cfg.momentum,
            dampening=cfg.dampening,
            nesterov=cfg.nesterov,
            weight_decay=cfg.weight_decay,
            foreach=False,
        )
    losses = []
    for batch, lr in zip(batches, np.asarray(lrs, np.float32)):
        for group in opt.param_groups:
            group["lr"] = float(lr)
        opt.zero_grad(set_to_none=True)
        args = [t for _, t in _batch_entries(loss_fn, batch)]
        with eager_context():  # a checkpointed forward recomputes in the backward
            loss = loss_fn(ref, *args)
            loss.backward()
        if cfg.max_grad_norm > 0.0:
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=False)
        opt.step()
        losses.append(float(loss.detach()))
    final = {n: p.detach().numpy().copy() for n, p in ref.named_parameters() if p.requires_grad}
    return np.array(losses, np.float32), final


def compare_training(out_dir, reference, exclude=None) -> dict:
    """Largest relative differences of fsdp-run's training output (`loss.npy`,
    the final parameters) from `train_reference`'s: {"loss": per-step
    relative errors [N], "params": {name: max|a - b| / max|b|}}.

    exclude: {name: boolean mask} of parameter entries not compared. Entries
    whose gradient is zero in exact arithmetic (the key bias of attention:
    softmax ignores a per-row constant) get rounding noise as gradient, and
    Adam's normalization turns any noise into full-size steps, so they
    differ between any two implementations."""
    ref_losses, ref_params = reference
    path = os.path.join(str(out_dir), "loss.npy")
    if not os.path.isfile(path):
        raise ExportError(f"{path}: not found (run fsdp-run --steps N)")
    losses = np.load(path).astype(np.float64)
    if losses.shape != ref_losses.shape:
        raise ExportError(
            f"{path}: {losses.shape[0] if losses.ndim else 0} steps, "
            f"the reference has {len(ref_losses)}"
        )
    loss_err = np.abs(losses - ref_losses) / np.abs(ref_losses)
    params = {}
    for name, want in ref_params.items():
        got = np.load(os.path.join(str(out_dir), name + ".npy")).astype(np.float64)
        if exclude and name in exclude:
            keep = ~np.asarray(exclude[name], bool)
            got, want = got[keep], want[keep]
        scale = float(np.abs(want).max()) or 1.0
        params[name] = float(np.abs(got - want).max()) / scale
    return {"loss": loss_err, "losses": losses, "ref_losses": ref_losses, "params": params}

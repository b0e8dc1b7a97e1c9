"""Numpy model of the optimizer step that `fsdp-optimizer` appends.

It follows torch.optim's single-tensor code paths (CPU, `foreach=False`):
`torch.optim.SGD` (momentum, dampening, nesterov, weight decay, the first
step's `momentum_buffer = grad`), `torch.optim.AdamW` (bias correction,
decoupled weight decay) and `torch.nn.utils.clip_grad_norm_`. Element-wise
arithmetic runs in the arrays' dtype (float32 like the compiled program, or
float64), one numpy operation per torch operation in torch's order; scalars
that torch computes as Python floats (bias corrections, step size) are
float64 here too. docs/SEMANTICS.md §5.5.

State is keyed like the step's arguments: `momentum_buffer.<name>`,
`exp_avg.<name>`, `exp_avg_sq.<name>`; `step` is the number of steps already
taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

OPTIMIZERS = ("sgd", "adamw")
CLIP_EPS = 1e-6  # clip_grad_norm_ divides by total_norm + 1e-6


@dataclass
class OptimizerConfig:
    """Hyper-parameters; the names and defaults of the fsdp-optimizer options
    (weight_decay defaults to 0 for both optimizers)."""

    kind: str = "sgd"
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float = 0.0
    keep_grads: bool = False

    def __post_init__(self):
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optimizer '{self.kind}': expected one of {OPTIMIZERS}")

    def state_names(self) -> tuple:
        """State prefixes per parameter, in argument order."""
        if self.kind == "adamw":
            return ("exp_avg", "exp_avg_sq")
        return ("momentum_buffer",) if self.momentum != 0.0 else ()

    def pipeline_options(self) -> str:
        """The `--fsdp-pipeline` / `--fsdp-optimizer` option string."""
        opts = [f"optimizer={self.kind}"]
        if self.kind == "sgd":
            opts += [f"momentum={self.momentum!r}", f"dampening={self.dampening!r}"]
            if self.nesterov:
                opts.append("nesterov=true")
        else:
            opts += [f"betas={self.betas[0]!r},{self.betas[1]!r}", f"eps={self.eps!r}"]
        opts.append(f"weight-decay={self.weight_decay!r}")
        if self.max_grad_norm:
            opts.append(f"max-grad-norm={self.max_grad_norm!r}")
        if self.keep_grads:
            opts.append("keep-grads=true")
        return " ".join(opts)


def clip_grad_norm(grads: dict, max_norm: float, dtype=np.float32):
    """(clipped grads, total norm) as clip_grad_norm_(norm_type=2): the norm of
    the per-tensor norms, then every gradient times min(1, max / (norm + 1e-6))."""
    norms = [np.sqrt(np.sum(np.square(np.asarray(g, np.float64)))) for g in grads.values()]
    total = dtype(np.sqrt(np.sum(np.square(np.asarray(norms, np.float64)))))
    coef = np.minimum(dtype(max_norm) / (total + dtype(CLIP_EPS)), dtype(1.0))
    return {k: (np.asarray(g, dtype) * coef).astype(dtype) for k, g in grads.items()}, total


def sgd_update(cfg: OptimizerConfig, p, g, buf, lr: float, step: float, dtype=np.float32):
    """torch.optim.SGD on one tensor; returns (param, momentum_buffer or None)."""
    p, g = np.asarray(p, dtype), np.asarray(g, dtype)
    if cfg.weight_decay != 0.0:
        g = g + dtype(cfg.weight_decay) * p
    if cfg.momentum != 0.0:
        if step == 0:
            buf = g.copy()
        else:
            buf = np.asarray(buf, dtype) * dtype(cfg.momentum) + dtype(1.0 - cfg.dampening) * g
        g = g + dtype(cfg.momentum) * buf if cfg.nesterov else buf
    return p + dtype(-lr) * g, buf


def adamw_update(cfg: OptimizerConfig, p, g, m, v, lr: float, step: float, dtype=np.float32):
    """torch.optim.AdamW on one tensor; `step` is the count before this step.
    Returns (param, exp_avg, exp_avg_sq)."""
    p, g = np.asarray(p, dtype), np.asarray(g, dtype)
    m, v = np.asarray(m, dtype), np.asarray(v, dtype)
    beta1, beta2 = cfg.betas
    t = float(dtype(step) + dtype(1.0))  # torch keeps the step in a float tensor
    if cfg.weight_decay != 0.0:
        p = p * dtype(1.0 - lr * cfg.weight_decay)
    w = dtype(1.0 - beta1)
    m = m + w * (g - m) if w < 0.5 else g - (g - m) * (dtype(1.0) - w)  # torch.lerp
    v = v * dtype(beta2) + dtype(1.0 - beta2) * g * g
    bias_correction1 = 1.0 - beta1**t
    bias_correction2 = 1.0 - beta2**t
    step_size = lr / bias_correction1
    denom = np.sqrt(v) / dtype(math.sqrt(bias_correction2)) + dtype(cfg.eps)
    p = p + dtype(-step_size) * m / denom
    return p, m, v


def optimizer_step(
    cfg: OptimizerConfig,
    params: dict,
    grads: dict,
    state: dict,
    lr: float,
    step: float,
    dtype=np.float32,
):
    """One step over every parameter (dict order = argument order).

    Returns (new params, new state, grad_norm or None); state holds
    `<state>.<name>` arrays and `step` (the count after this step).
    """
    grad_norm = None
    if cfg.max_grad_norm > 0.0:
        grads, grad_norm = clip_grad_norm(grads, cfg.max_grad_norm, dtype)
    new_params, new_state = {}, {}
    for name, p in params.items():
        g = grads[name]
        if cfg.kind == "sgd":
            buf = state.get(f"momentum_buffer.{name}")
            new_params[name], buf = sgd_update(cfg, p, g, buf, lr, step, dtype)
            if cfg.momentum != 0.0:
                new_state[f"momentum_buffer.{name}"] = buf
        else:
            zeros = np.zeros_like(np.asarray(p, dtype))
            m = state.get(f"exp_avg.{name}", zeros)
            v = state.get(f"exp_avg_sq.{name}", zeros)
            new_params[name], m, v = adamw_update(cfg, p, g, m, v, lr, step, dtype)
            new_state[f"exp_avg.{name}"] = m
            new_state[f"exp_avg_sq.{name}"] = v
    new_state["step"] = dtype(float(step) + 1.0)
    return new_params, new_state, grad_norm


def torch_step(
    cfg: OptimizerConfig,
    params: dict,
    grads: dict,
    state: dict,
    lr: float,
    step: float,
):
    """The same step with torch.optim itself (float32, foreach=False), for
    tests; returns what optimizer_step returns, as float64 numpy arrays."""
    import torch

    names = list(params)
    tensors = [torch.nn.Parameter(torch.tensor(np.asarray(params[n], np.float32))) for n in names]
    for t, n in zip(tensors, names):
        t.grad = torch.tensor(np.asarray(grads[n], np.float32))
    if cfg.kind == "sgd":
        opt = torch.optim.SGD(
            tensors,
            lr=lr,
            momentum=cfg.momentum,
            dampening=cfg.dampening,
            nesterov=cfg.nesterov,
            weight_decay=cfg.weight_decay,
            foreach=False,
        )
        if cfg.momentum != 0.0 and step > 0:
            for t, n in zip(tensors, names):
                buf = np.asarray(state[f"momentum_buffer.{n}"], np.float32)
                opt.state[t]["momentum_buffer"] = torch.tensor(buf)
    else:
        opt = torch.optim.AdamW(
            tensors,
            lr=lr,
            betas=tuple(cfg.betas),
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            foreach=False,
        )
        for t, n in zip(tensors, names):
            opt.state[t]["step"] = torch.tensor(float(step), dtype=torch.float32)
            for s in ("exp_avg", "exp_avg_sq"):
                value = np.asarray(state.get(f"{s}.{n}", np.zeros_like(params[n])), np.float32)
                opt.state[t][s] = torch.tensor(value)
    grad_norm = None
    if cfg.max_grad_norm > 0.0:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(tensors, cfg.max_grad_norm, foreach=False))
    opt.step()
    new_params = {n: t.detach().numpy().astype(np.float64) for t, n in zip(tensors, names)}
    new_state = {}
    for t, n in zip(tensors, names):
        for s in cfg.state_names():
            new_state[f"{s}.{n}"] = opt.state[t][s].numpy().astype(np.float64)
    new_state["step"] = float(step) + 1.0
    return new_params, new_state, grad_norm

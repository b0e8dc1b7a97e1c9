"""Numpy reference of the generated training step, in float64.

`loss_and_grads(model, params, data)` runs the forward pass and the
hand-derived backward pass on whatever rows `data` holds; `reference_results`
does it on the whole global batch read from a data directory, which is what a
sharded run averaged over ranks must reproduce: the mean loss over the global
batch and its gradients.
"""

from __future__ import annotations

import math

import numpy as np

from .. import model as M
from ..optim import OptimizerConfig, optimizer_step

GELU_C0 = math.sqrt(2.0 / math.pi)
GELU_C1 = 0.044715


# ------------------------------------------------------------------ pieces


def gelu(z):
    return 0.5 * z * (1.0 + np.tanh(GELU_C0 * (z + GELU_C1 * z**3)))


def gelu_grad(z):
    t = np.tanh(GELU_C0 * (z + GELU_C1 * z**3))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_C0 * (1.0 + 3.0 * GELU_C1 * z * z)


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def mse(pred, target):
    diff = pred - target
    return np.mean(diff * diff), 2.0 * diff / diff.size


def rmsnorm(h, g, eps):
    rs = 1.0 / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps)
    nh = h * rs
    return nh * g, nh, rs


def rmsnorm_backward(dn, nh, rs, g):
    """(dh, dg) for n = nh * g, nh = h * rs."""
    dg = np.sum(dn * nh, axis=tuple(range(dn.ndim - 1)))
    dnh = dn * g
    dh = rs * (dnh - nh * np.mean(dnh * nh, axis=-1, keepdims=True))
    return dh, dg


# --------------------------------------------------------------------- MLP


def mlp_step(model, p, data, want_grads=True):
    widths = model["config"]["widths"]
    act = model["config"]["act"]
    nl = len(widths) - 1
    h = data["x"]
    inputs, preacts = [], []
    for i in range(nl):
        z = h @ p[f"l{i}.weight"].T + p[f"l{i}.bias"]
        inputs.append(h)
        preacts.append(z)
        if i == nl - 1:
            h = z
        elif act == "gelu":
            h = gelu(z)
        else:
            h = np.maximum(z, 0.0)
    loss, grad = mse(h, data["y"])
    if not want_grads:
        return loss, None
    grads = {}
    for i in reversed(range(nl)):
        if i < nl - 1:
            z = preacts[i]
            grad = grad * (gelu_grad(z) if act == "gelu" else (z > 0.0))
        grads[f"l{i}.weight"] = grad.T @ inputs[i]
        grads[f"l{i}.bias"] = grad.sum(axis=0)
        grad = grad @ p[f"l{i}.weight"]
    return loss, grads


# ------------------------------------------------------------- transformer


def swiglu_forward(h, p, unit, eps):
    n, nh, rs = rmsnorm(h, p[f"{unit}.mlp_norm.weight"], eps)
    a = n @ p[f"{unit}.w1.weight"].T
    c = n @ p[f"{unit}.w3.weight"].T
    m = a * sigmoid(a) * c
    return h + m @ p[f"{unit}.w2.weight"].T, (n, nh, rs, a, c, m)


def swiglu_backward(dh, p, unit, saved, grads):
    n, nh, rs, a, c, m = saved
    grads[f"{unit}.w2.weight"] = dh.T @ m
    dm = dh @ p[f"{unit}.w2.weight"]
    s = sigmoid(a)
    da = dm * c * s * (1.0 + a * (1.0 - s))
    dc = dm * a * s
    grads[f"{unit}.w1.weight"] = da.T @ n
    grads[f"{unit}.w3.weight"] = dc.T @ n
    dn = da @ p[f"{unit}.w1.weight"] + dc @ p[f"{unit}.w3.weight"]
    dnorm, dg = rmsnorm_backward(dn, nh, rs, p[f"{unit}.mlp_norm.weight"])
    grads[f"{unit}.mlp_norm.weight"] = dg
    return dh + dnorm


def attention_forward(h, p, unit, eps, bsz, seq):
    """Single-head causal attention on rows h (bsz*seq, dim)."""
    dim = h.shape[1]
    scale = 1.0 / math.sqrt(dim)
    n, nh, rs = rmsnorm(h, p[f"{unit}.attn_norm.weight"], eps)
    q, k, v = ((n @ p[f"{unit}.{w}.weight"].T).reshape(bsz, seq, dim) for w in ("wq", "wk", "wv"))
    scores = np.einsum("bid,bjd->bij", q, k) * scale
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    scores = np.where(future, -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    o = np.einsum("bij,bjd->bid", probs, v).reshape(bsz * seq, dim)
    out = h + o @ p[f"{unit}.wo.weight"].T
    return out, (n, nh, rs, q, k, v, probs, o, scale)


def attention_backward(dh, p, unit, saved, grads):
    n, nh, rs, q, k, v, probs, o, scale = saved
    bsz, seq, dim = q.shape
    grads[f"{unit}.wo.weight"] = dh.T @ o
    do = (dh @ p[f"{unit}.wo.weight"]).reshape(bsz, seq, dim)
    dprobs = np.einsum("bid,bjd->bij", do, v)
    dv = np.einsum("bij,bid->bjd", probs, do)
    dscores = probs * (dprobs - np.sum(dprobs * probs, axis=-1, keepdims=True)) * scale
    dq = np.einsum("bij,bjd->bid", dscores, k)
    dk = np.einsum("bij,bid->bjd", dscores, q)
    dn = 0.0
    for w, d in (("wq", dq), ("wk", dk), ("wv", dv)):
        d = d.reshape(bsz * seq, dim)
        grads[f"{unit}.{w}.weight"] = d.T @ n
        dn = dn + d @ p[f"{unit}.{w}.weight"]
    dnorm, dg = rmsnorm_backward(dn, nh, rs, p[f"{unit}.attn_norm.weight"])
    grads[f"{unit}.attn_norm.weight"] = dg
    return dh + dnorm


def transformer_step(model, p, data, want_grads=True):
    cfg = model["config"]
    x = data["x"]
    bsz, seq, dim = x.shape
    h = x.reshape(bsz * seq, dim)
    saved = []
    for i in range(cfg["blocks"]):
        unit = f"blocks.{i}"
        if cfg["attention"]:
            h, st = attention_forward(h, p, unit, cfg["eps"], bsz, seq)
            saved.append((attention_backward, unit, st))
        h, st = swiglu_forward(h, p, unit, cfg["eps"])
        saved.append((swiglu_backward, unit, st))
    loss, dh = mse(h, data["y"].reshape(bsz * seq, dim))
    if not want_grads:
        return loss, None
    grads = {}
    for backward, unit, st in reversed(saved):
        dh = backward(dh, p, unit, st, grads)
    return loss, grads


# --------------------------------------------------------------------- API


def loss_and_grads(model: dict, params: dict, data: dict, dtype=np.float64):
    """(mean loss, {param name: gradient}) for the rows in data, computed in
    `dtype` (float64 by default)."""
    params = {k: np.asarray(v, dtype=dtype) for k, v in params.items()}
    data = {k: np.asarray(v, dtype=dtype) for k, v in data.items()}
    step = mlp_step if model["kind"] == "mlp" else transformer_step
    return step(model, params, data)


def loss_only(model: dict, params: dict, data: dict) -> float:
    step = mlp_step if model["kind"] == "mlp" else transformer_step
    return float(step(model, params, data, want_grads=False)[0])


def results_from(model: dict, loss, grads: dict, cast: bool = True) -> dict:
    """Result name -> array, optionally rounded to each result's dtype."""
    out = {}
    for r in model["results"]:
        v = np.asarray(loss if r["kind"] == "loss" else grads[r["param"]], np.float64)
        out[r["name"]] = M.round_to(v, r["dtype"]) if cast else v
    return out


def reference_results(model: dict, values: dict, rank: int | None = None) -> dict:
    """Expected results on the whole global batch (rank=None: global mean
    loss and its gradients) or on one rank's micro-batch."""
    if rank is None:
        params = {p["name"]: values[p["name"]] for p in model["params"]}
        data = {d["name"]: values[d["name"]] for d in model["data"]}
    else:
        local = M.rank_slice(model, values, rank)
        params = {p["name"]: local[p["name"]] for p in model["params"]}
        data = {d["name"]: local[d["name"]] for d in model["data"]}
    loss, grads = loss_and_grads(model, params, data)
    return results_from(model, loss, grads)


def reference_from_dir(data_dir: str) -> dict:
    model = M.load_model(data_dir)
    return reference_results(model, M.load_inputs(model, data_dir))


# ---------------------------------------------------------------- training


def _step_slice(value, global_shape, s: int):
    """A per-step input: the value itself, or slice s of a leading step dim."""
    value = np.asarray(value)
    if list(value.shape) == list(global_shape):
        return value
    if value.ndim == len(global_shape) + 1 and list(value.shape[1:]) == list(global_shape):
        return value[s]
    raise M.ModelError(
        f"input of shape {list(value.shape)}: expected {list(global_shape)} "
        f"or [steps, {', '.join(map(str, global_shape))}]"
    )


def train(
    model: dict,
    values: dict,
    cfg: OptimizerConfig,
    steps: int,
    lr,
    state: dict | None = None,
    step: int = 0,
    dtype=np.float32,
) -> dict:
    """`steps` training steps on the global batch: forward and backward
    (mean loss over the global batch, `dtype` arithmetic) and the optimizer
    step of `fsdp-optimizer` (optim.optimizer_step).

    `values` holds the initial parameters and the data by name, as
    `M.load_inputs` returns them; a data array with a leading step dimension
    `[steps, ...global shape]` gives step s its slice s (the same rule as
    fsdp-run's training mode). `lr` is a number or an array `[steps]`.
    `state` holds initial optimizer state by argument name (missing: zeros)
    and `step` the steps already taken. Returns a dict with `loss` [steps],
    `grad_norm` [steps] (None without clipping), and the final `params`,
    `state` (including `step`).
    """
    params = {p["name"]: np.asarray(values[p["name"]], dtype) for p in model["params"]}
    state = dict(state or {})
    lrs = np.broadcast_to(np.asarray(lr, np.float64), (steps,))
    losses, norms = [], []
    count = float(step)
    for s in range(steps):
        data = {d["name"]: _step_slice(values[d["name"]], d["shape"], s) for d in model["data"]}
        loss, grads = loss_and_grads(model, params, data, dtype=dtype)
        losses.append(float(loss))
        # torch (and fsdp-run) keep lr as a float32 value.
        lr_s = float(np.float32(lrs[s]))
        params, new_state, norm = optimizer_step(cfg, params, grads, state, lr_s, count, dtype)
        state.update(new_state)
        count = float(new_state["step"])
        if norm is not None:
            norms.append(float(norm))
    return {
        "loss": np.asarray(losses),
        "grad_norm": np.asarray(norms) if cfg.max_grad_norm > 0.0 else None,
        "params": params,
        "state": state,
    }

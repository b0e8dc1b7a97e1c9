"""Tensor-parallel plans: `{module path pattern: style}` (torch's
`parallelize_module` and Hugging Face's `base_model_tp_plan` styles) to the
tensor-parallel placement of every parameter (docs/TENSOR_PARALLEL.md).

The compiler (`fsdp-tensor-parallel`) partitions the step; the plan only
says how each parameter lies over the `tp` mesh axis: `tp_shard<d>` (this
rank holds the d-th dim's part) or `tp_replicate`."""

from __future__ import annotations

import re

import torch

# Styles and what they do to a Linear's weight [out, in] and bias [out].
# The "_rep" variants (output replicated) and "local_*" (no DTensor
# wrapping) place parameters as their base style: the compiler decides
# where activations are reduced.
COLWISE = ("colwise", "colwise_rep", "local_colwise")
ROWWISE = ("rowwise", "rowwise_rep", "local_rowwise")
REPLICATED = ("replicated_with_grad_allreduce", "local")
# Norms, dropout and residuals on this rank's tokens: the module's
# parameters stay whole (their gradients, sums over split tokens, are
# all-reduced) and the step is partitioned with sequence parallelism.
SEQUENCE_PARALLEL = ("sequence_parallel",)
UNSUPPORTED = {
    "gather": "gathered outputs of a local module are not supported",
    "isolate": "isolated modules are not supported",
}
STYLES = COLWISE + ROWWISE + REPLICATED + SEQUENCE_PARALLEL + tuple(UNSUPPORTED)


class PlanError(ValueError):
    pass


def _pattern(pattern: str) -> re.Pattern:
    """HF's plan keys: dotted module paths where `*` is one path component."""
    return re.compile(r"(?:.*\.)?" + r"[^.]+".join(re.escape(p) for p in pattern.split("*")))


def resolve_plan(module: torch.nn.Module, tp_plan) -> dict:
    """`"auto"` -> the model's own `config.base_model_tp_plan` (keys relative
    to the base model, e.g. `layers.*.self_attn.q_proj`); a dict is used as
    given."""
    if tp_plan == "auto":
        config = getattr(module, "config", None)
        plan = getattr(config, "base_model_tp_plan", None)
        if not plan:
            raise PlanError(
                f"tp_plan='auto': {type(module).__name__} has no config.base_model_tp_plan; "
                "give a {module path pattern: style} dict"
            )
        return dict(plan)
    if isinstance(tp_plan, dict):
        return dict(tp_plan)
    raise PlanError(f"tp_plan: expected 'auto' or a {{pattern: style}} dict, got {tp_plan!r}")


def uses_sequence_parallel(module: torch.nn.Module, tp_plan) -> bool:
    """Whether the plan has a `sequence_parallel` module: then the compiler
    splits activations over their tokens between tensor-parallel products
    (`fsdp-tensor-parallel sequence-parallel`)."""
    return any(s in SEQUENCE_PARALLEL for s in resolve_plan(module, tp_plan).values())


def _is_conv1d(mod) -> bool:
    # transformers' GPT-2 Conv1D: weight [in, out], y = x @ W + b.
    return type(mod).__name__ == "Conv1D" and hasattr(mod, "nf")


def _linear_placements(path: str, mod, style: str) -> dict:
    colwise = style in COLWISE
    if isinstance(mod, torch.nn.Linear):
        out_dim = 0
    elif _is_conv1d(mod):
        out_dim = 1
    elif isinstance(mod, torch.nn.Embedding):
        raise PlanError(
            f"tp_plan: '{path}' is an Embedding with style '{style}': a sharded "
            "embedding table is read by index, which the partitioner does not split; "
            "leave it out of the plan (replicated)"
        )
    else:
        raise PlanError(
            f"tp_plan: '{path}' ({type(mod).__name__}) has style '{style}', which "
            "applies to Linear (and GPT-2's Conv1D) modules"
        )
    in_dim = 1 - out_dim
    places = {}
    for name, _ in mod.named_parameters(recurse=False):
        if name == "weight":
            places[name] = {"kind": "tp_shard", "dim": out_dim if colwise else in_dim}
        elif name == "bias":
            places[name] = {"kind": "tp_shard", "dim": 0} if colwise else {"kind": "tp_replicate"}
        else:
            places[name] = {"kind": "tp_replicate"}
    return places


def tp_placements(module: torch.nn.Module, tp_plan, tp_size: int) -> dict:
    """Parameter name -> tensor-parallel placement (a placement dict)."""
    plan = resolve_plan(module, tp_plan)
    for pattern, style in plan.items():
        if style not in STYLES:
            raise PlanError(
                f"tp_plan: '{pattern}': unknown style '{style}'; expected one of "
                + ", ".join(STYLES)
            )
        if style in UNSUPPORTED:
            raise PlanError(f"tp_plan: '{pattern}': style '{style}': {UNSUPPORTED[style]}")
    compiled = [(_pattern(p), s, p) for p, s in plan.items()]
    out = {}
    matched = set()
    for path, mod in module.named_modules():
        style = None
        for rx, s, p in compiled:
            if path and rx.fullmatch(path):
                style = s
                matched.add(p)
                break
        if style is None or style in REPLICATED + SEQUENCE_PARALLEL:
            continue
        for name, place in _linear_placements(path, mod, style).items():
            out[f"{path}.{name}"] = place
    if not matched:
        raise PlanError("tp_plan: no module path matches any of its patterns: " + ", ".join(plan))
    replicate = {"kind": "tp_replicate"}
    result = {}
    for n, p in module.named_parameters():
        place = out.get(n, replicate)
        if place["kind"] == "tp_shard" and p.shape[place["dim"]] % tp_size:
            raise PlanError(
                f"tp_plan: '{n}' ({'x'.join(map(str, p.shape))}) is split along dim "
                f"{place['dim']} over tp = {tp_size}, which does not divide "
                f"{p.shape[place['dim']]}"
                + (
                    "; PyTorch's tensor parallelism pads a vocabulary to a multiple of the "
                    "TP size: pad the model's vocab_size"
                    if "vocab" in n or "lm_head" in n or "embed" in n
                    else ""
                )
            )
        result[n] = place
    return result

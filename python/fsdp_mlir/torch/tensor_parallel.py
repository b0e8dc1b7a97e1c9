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
# The "_rep" and "_gather_output" variants (output replicated) and
# "local_*" (no DTensor wrapping) place parameters as their base style: the
# compiler decides where activations are reduced (an LM head's logits stay
# split over the vocabulary and the cross-entropy is vocabulary-parallel).
COLWISE = ("colwise", "colwise_rep", "colwise_gather_output", "local_colwise")
ROWWISE = ("rowwise", "rowwise_rep", "local_rowwise")
# The vocabulary split over tp: an Embedding's table [vocab, dim] along its
# rows (each rank looks up its range, the partial lookups are summed), an
# LM head [vocab, dim] as colwise. Hugging Face's "embedding_rowwise"; torch's
# RowwiseParallel(input_layouts=Replicate()) on an Embedding ("rowwise").
VOCAB_PARALLEL = ("vocab_parallel", "embedding_rowwise")
REPLICATED = ("replicated_with_grad_allreduce", "local", "replicate")
# Norms, dropout and residuals on this rank's tokens: the module's
# parameters stay whole (their gradients, sums over split tokens, are
# all-reduced) and the step is partitioned with sequence parallelism.
SEQUENCE_PARALLEL = ("sequence_parallel",)
UNSUPPORTED = {
    "gather": "gathered outputs of a local module are not supported",
    "isolate": "isolated modules are not supported",
    "embedding_colwise": "an embedding split along its hidden dim is not supported; "
    "split the vocabulary (embedding_rowwise or vocab_parallel)",
}
STYLES = COLWISE + ROWWISE + VOCAB_PARALLEL + REPLICATED + SEQUENCE_PARALLEL + tuple(UNSUPPORTED)


class PlanError(ValueError):
    pass


def _pattern(pattern: str) -> re.Pattern:
    """HF's plan keys: dotted module paths where `*` is one path component."""
    return re.compile(r"(?:.*\.)?" + r"[^.]+".join(re.escape(p) for p in pattern.split("*")))


def model_plan(module: torch.nn.Module) -> dict:
    """A Hugging Face model's own plan, as `from_pretrained(tp_plan="auto")`
    applies it: `config.base_model_tp_plan` (keys relative to the base
    model), the class's `_tp_plan` (the LM head: "colwise_rep" or
    "colwise_gather_output") and, where transformers adds it, the input
    embeddings ("embedding_rowwise"). Empty when the model has none."""
    config = getattr(module, "config", None)
    plan = dict(getattr(config, "base_model_tp_plan", None) or {})
    if not plan:
        return {}
    plan.update(getattr(type(module), "_tp_plan", None) or {})
    full = getattr(module, "tp_plan", None)
    if isinstance(full, dict):
        plan.update(full)
    return plan


def resolve_plan(module: torch.nn.Module, tp_plan) -> dict:
    """`"auto"` -> the model's own plan (model_plan); a dict is used as
    given."""
    if tp_plan == "auto":
        plan = model_plan(module)
        if not plan:
            raise PlanError(
                f"tp_plan='auto': {type(module).__name__} has no config.base_model_tp_plan; "
                "give a {module path pattern: style} dict"
            )
        return plan
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


def _embedding_placements(path: str, mod, style: str) -> dict:
    if style in VOCAB_PARALLEL or style in ROWWISE:
        return {"weight": {"kind": "tp_shard", "dim": 0}}
    raise PlanError(
        f"tp_plan: '{path}' is an Embedding with style '{style}', which would split its "
        "hidden dim; split its vocabulary instead (embedding_rowwise, vocab_parallel or "
        "rowwise: each rank looks up its rows)"
    )


def _linear_placements(path: str, mod, style: str) -> dict:
    if isinstance(mod, torch.nn.Embedding):
        return _embedding_placements(path, mod, style)
    colwise = style in COLWISE or style in VOCAB_PARALLEL
    if isinstance(mod, torch.nn.Linear):
        out_dim = 0
    elif _is_conv1d(mod):
        out_dim = 1
    else:
        raise PlanError(
            f"tp_plan: '{path}' ({type(mod).__name__}) has style '{style}', which "
            "applies to Linear (and GPT-2's Conv1D) and Embedding modules"
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


def _text(place) -> str:
    return f"tp_shard<{place['dim']}>" if place["kind"] == "tp_shard" else place["kind"]


def _planned(module, plan) -> dict:
    """id(parameter) -> (placement, module path, style, parameter name)
    for the parameters of the modules the plan names. A parameter tied
    between two modules (GPT-2's wte and lm_head) must be placed alike."""
    compiled = [(_pattern(p), s, p) for p, s in plan.items()]
    placed = {}
    matched = set()
    for path, mod in module.named_modules(remove_duplicate=False):
        style = next((s for rx, s, p in compiled if path and rx.fullmatch(path)), None)
        matched.update(p for rx, s, p in compiled if path and rx.fullmatch(path))
        if style is None or style in REPLICATED + SEQUENCE_PARALLEL:
            continue
        for name, place in _linear_placements(path, mod, style).items():
            param = getattr(mod, name)
            key = id(param)
            if key in placed and placed[key][0] != place:
                other, opath, ostyle, _ = placed[key]
                raise PlanError(
                    f"tp_plan: the tied parameter '{path}.{name}' is also '{opath}.{name}': "
                    f"'{opath}' ({ostyle}) places it {_text(other)} and '{path}' ({style}) "
                    f"{_text(place)}; a tied embedding and LM head split the vocabulary on "
                    "both (embedding_rowwise or vocab_parallel on the embedding, colwise on "
                    "the LM head)"
                )
            placed.setdefault(key, (place, path, style, name))
    if not matched:
        raise PlanError("tp_plan: no module path matches any of its patterns: " + ", ".join(plan))
    return placed


def _check_heads(module, placed, tp_size: int) -> None:
    """Attention heads split over tp: the model's head counts must divide."""
    config = getattr(module, "config", None)
    attention = any("attn" in path or "attention" in path for _, path, _, _ in placed.values())
    if config is None or not attention:
        return
    for key in ("num_attention_heads", "num_key_value_heads", "n_head"):
        heads = getattr(config, key, None)
        if isinstance(heads, int) and heads % tp_size:
            raise PlanError(
                f"tp_plan: {key} = {heads} is not divisible by tp = {tp_size}: the plan splits "
                "attention projections by heads; use a tp size that divides the heads"
            )


def _vocab_error(name, p, dim, tp_size, embeddings) -> str:
    size = p.shape[dim]
    padded = -(-size // tp_size) * tp_size
    text = (
        f"tp_plan: '{name}' ({'x'.join(map(str, p.shape))}) is split along dim {dim} over "
        f"tp = {tp_size}, which does not divide {size}"
    )
    if id(p) in embeddings or "vocab" in name or "lm_head" in name or "embed" in name:
        text += (
            f": the vocabulary ({size}) must divide over tp; pad it to {padded} as "
            "PyTorch's and Megatron's tensor parallelism do (Hugging Face: "
            f"model.resize_token_embeddings({size}, pad_to_multiple_of={tp_size}))"
        )
    return text


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
    placed = _planned(module, plan)
    _check_heads(module, placed, tp_size)
    embeddings = {id(m.weight) for m in module.modules() if isinstance(m, torch.nn.Embedding)}
    replicate = {"kind": "tp_replicate"}
    result = {}
    for n, p in module.named_parameters():
        place = placed.get(id(p), (replicate,))[0]
        if place["kind"] == "tp_shard" and p.shape[place["dim"]] % tp_size:
            raise PlanError(_vocab_error(n, p, place["dim"], tp_size, embeddings))
        result[n] = place
    return result

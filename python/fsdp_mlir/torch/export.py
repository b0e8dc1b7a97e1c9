"""Export a PyTorch training step (forward + backward) as an annotated fsdp step.

    export_step(model, loss_fn, batch, "out/", mesh="2x4", units=[Block])

traces `torch.func.grad_and_value` of `loss_fn(model, *batch)` with `make_fx`
on one rank's micro-batch, imports it with torch-mlir (linalg on tensors), and
annotates the function's signature: every parameter gets its name, FSDP unit
and layout, the first result is the loss and the others are the gradients.
The global parameters and batch are written as `.npy` next to `model.json`.
See docs/FRONTENDS.md.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import os
import re
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.fx.traceback as fx_traceback

from .. import model as M
from . import tensor_parallel as TP
from . import verify as V
from .decompositions import VALUE_DEPENDENT_SHAPE, eager_context
from .importer import (
    _TORCH_OP_RE,
    FUNCTION,
    ExportError,
    _ModulePaths,
    annotate,
    buffer_argument,
    buffer_carrier,
    guard_message,
    import_graph,
)

FRONTEND_KIND = "torch"

_PLACEMENT_RE = re.compile(
    r"^\s*(?:(replicate)|shard\s*[<(]\s*(\d+)\s*[>)]"
    r"|strided_shard\s*[<(]\s*(\d+)\s*,\s*(\d+)\s*[>)])\s*$",
    re.I,
)

_NPY_DTYPES = {
    torch.float32: ("f32", np.float32),
    torch.float64: ("f64", np.float64),
    torch.int64: ("i64", np.int64),
    torch.int32: ("i32", np.int32),
}

# Buffer dtypes the step can take as arguments.
_BUFFER_DTYPES = {**_NPY_DTYPES, torch.uint8: ("u8", np.uint8)}

# ---------------------------------------------------------------- options


def _parse_mesh(mesh) -> dict:
    if isinstance(mesh, int):
        mesh = str(mesh)
    elif isinstance(mesh, (tuple, list)):
        mesh = "x".join(str(int(s)) for s in mesh)
    try:
        return M.parse_mesh(str(mesh))
    except M.ModelError as err:
        raise ExportError(str(err)) from None


def parse_placement(spec, name: str = "", ndim: int | None = None) -> dict:
    """`replicate`, `shard<d>` / `Shard(d)`, `strided_shard<d, sf>` -> placement dict."""
    m = _PLACEMENT_RE.match(str(spec))
    if not m:
        raise ExportError(
            f"placement {spec!r} for '{name}': expected replicate, shard<d> or strided_shard<d, sf>"
        )
    if m.group(1):
        return {"kind": "replicate"}
    if m.group(2) is not None:
        p = {"kind": "shard", "dim": int(m.group(2))}
    else:
        p = {"kind": "strided_shard", "dim": int(m.group(3)), "sf": int(m.group(4))}
        if p["sf"] < 1:
            raise ExportError(f"placement {spec!r} for '{name}': split factor must be >= 1")
    if ndim is not None and p["dim"] >= ndim:
        raise ExportError(
            f"placement {spec!r} for '{name}': the parameter has {ndim} dim(s), "
            f"so dim {p['dim']} does not exist"
        )
    return p


def _placement_for(name: str, param: torch.Tensor, placement) -> str:
    """The placement spec (text) on the shard axis for one parameter."""
    spec = None
    if placement is None:
        spec = None
    elif isinstance(placement, str):
        spec = placement
    elif isinstance(placement, Mapping):
        for pattern, value in placement.items():
            if re.fullmatch(pattern, name):
                spec = value
                break
    elif callable(placement):
        spec = placement(name, param)
    else:
        raise ExportError(
            "placement: expected None, a placement string, a {regex: placement} dict or a "
            f"callable (name, param) -> placement; got {type(placement).__name__}"
        )
    if spec is None:
        # FSDP2's default: Shard(0); a scalar parameter cannot be split.
        spec = "shard<0>" if param.dim() > 0 else "replicate"
    return spec


def _layout(
    name: str, param: torch.Tensor, mesh: dict, placement, policy: str, tp_place=None
) -> dict:
    """The FSDP placement on the shard axis, `replicate` on the replicate
    axis (HSDP), the tensor-parallel placement on the `tp` axis."""
    spec = _placement_for(name, param, placement)
    p = parse_placement(spec, name, param.dim())
    roles = M.axis_roles(mesh)
    if "tp" in roles:
        tp = tp_place or {"kind": "tp_replicate"}
        placements = [
            p if r == "shard" else tp if r == "tp" else {"kind": "replicate"} for r in roles
        ]
        if p["kind"] == "shard" and tp["kind"] == "tp_shard" and tp["dim"] == p["dim"]:
            k = mesh["shape"][roles.index("shard")] if "shard" in roles else 1
            n = param.shape[p["dim"]] // mesh["shape"][roles.index("tp")]
            if n % k:
                raise ExportError(
                    f"'{name}' ({'x'.join(map(str, param.shape))}): its tensor-parallel part "
                    f"has {n} along dim {p['dim']}, which the data-parallel axis ({k}) must "
                    f"split evenly; give it another FSDP placement (placement=...)"
                )
        return {"placements": placements, "policy": "ceil" if p["kind"] == "replicate" else policy}
    if p["kind"] == "strided_shard":
        k = mesh["shape"][-1]
        n = param.shape[p["dim"]]
        if n % (p["sf"] * k) != 0:
            raise ExportError(
                f"strided_shard<{p['dim']}, {p['sf']}> on '{name}' "
                f"({'x'.join(map(str, param.shape))}) needs dim {p['dim']} divisible by "
                f"sf*k = {p['sf']}*{k} = {p['sf'] * k}; got {n}"
            )
    placements = [{"kind": "replicate"}] * (len(mesh["shape"]) - 1) + [p]
    return {"placements": placements, "policy": "ceil" if p["kind"] == "replicate" else policy}


def _unit_matcher(units) -> Callable[[str, torch.nn.Module], bool]:
    """units: None, a class, a regex string, or a list of those, or a callable
    (path, module) -> bool. Classes match by isinstance, strings by re.fullmatch
    on the module path (e.g. r"blocks\\.\\d+")."""
    if units is None:
        return lambda path, mod: False
    if callable(units) and not isinstance(units, type):
        return lambda path, mod: bool(units(path, mod))
    items = units if isinstance(units, (list, tuple, set)) else [units]
    classes = tuple(u for u in items if isinstance(u, type))
    patterns = []
    for u in items:
        if isinstance(u, str):
            patterns.append(re.compile(u))
        elif not isinstance(u, type):
            raise ExportError(
                f"units: expected module classes or path regexes, got {type(u).__name__}"
            )
    return lambda path, mod: (
        (bool(classes) and isinstance(mod, classes)) or any(p.fullmatch(path) for p in patterns)
    )


def assign_units(module: torch.nn.Module, units) -> dict:
    """Parameter name -> unit name. Each submodule that `units` matches is one
    FSDP unit (named by its path) holding the parameters below it that no
    deeper unit holds; the others belong to the root unit, "root"."""
    match = _unit_matcher(units)
    unit_paths = [path for path, mod in module.named_modules() if path and match(path, mod)]
    out = {}
    for name, _ in module.named_parameters():
        holders = [path for path in unit_paths if name.startswith(path + ".")]
        out[name] = max(holders, key=len) if holders else "root"
    return out


def _batch_entries(loss_fn, batch) -> list:
    """[(name, tensor)] of the global batch, named by the loss function's
    parameters after the module (or by the dict keys)."""
    if isinstance(batch, torch.Tensor):
        batch = (batch,)
    if isinstance(batch, Mapping):
        entries = list(batch.items())
    else:
        batch = tuple(batch)
        names = []
        try:
            params = list(inspect.signature(loss_fn).parameters.values())[1:]
            names = [
                p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            pass
        if len(names) < len(batch):
            names = [f"input{i}" for i in range(len(batch))]
        entries = list(zip(names, batch))
    for name, t in entries:
        if not isinstance(t, torch.Tensor):
            raise ExportError(f"example_batch '{name}': expected a tensor, got {type(t).__name__}")
        if t.dim() == 0:
            raise ExportError(f"example_batch '{name}': needs a batch dimension (dim 0)")
        if t.dtype not in _NPY_DTYPES:
            raise ExportError(f"example_batch '{name}': dtype {t.dtype} is not supported")
    return entries


# ---------------------------------------------------------------- tracing


def trace_step(
    module, loss_fn, param_names, local_batch, buffer_names=(), trainable=None, experts="sparse"
):
    """FX graph of (params..., buffers..., batch...) -> (loss, *grads,
    *updated buffers), and the names of the updated buffers (those the forward
    changes: batch norm's running statistics in training mode, counters).
    `trainable`: the names of the parameters differentiated (default: those
    with requires_grad); the others (frozen) are arguments without a
    gradient. `experts`: how grouped matrix products (MoE experts) are
    traced, "sparse" (fsdp.grouped_matmul) or "dense" (every expert on every
    row, masked)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from .decompositions import BufferUpdates, ScalarReads, library_patterns, table
    from .experts import FunctionalizedFunctions

    param_names = list(param_names)
    buffer_names = list(buffer_names)
    if trainable is None:
        trainable = [n for n, p in module.named_parameters() if p.requires_grad]
    trainable = set(trainable)
    differentiated = [i for i, n in enumerate(param_names) if n in trainable]

    def step(params, buffers, *batch):
        frozen = {n: p for n, p in zip(param_names, params) if n not in trainable}

        def loss_of(p):
            # Copies made inside the transform: the forward may update them in
            # place (num_batches_tracked.add_(1)); functionalization turns that
            # into a value, returned with the batch norm updates as aux.
            bufs = {
                n: b.to(dtype) if dtype != b.dtype else b.clone()
                for n, b, dtype in zip(buffer_names, buffers, buffer_dtypes)
            }
            updates = BufferUpdates(bufs, experts)
            values = {**frozen, **{param_names[i]: t for i, t in zip(differentiated, p)}, **bufs}
            with updates, bound_to(module, values):
                loss = loss_fn(module, *batch)
            return loss, tuple(
                updates.updates.get(n, bufs[n]).to(buffer_carrier(bufs[n].dtype))
                for n in buffer_names
            )

        grads, (loss, new_buffers) = torch.func.grad_and_value(loss_of, has_aux=True)(
            tuple(params[i] for i in differentiated)
        )
        return (loss, *grads, *new_buffers)

    params = tuple(p.detach() for _, p in module.named_parameters())
    buffer_dtypes = [module.get_buffer(n).dtype for n in buffer_names]
    buffers = tuple(buffer_argument(module, n) for n in buffer_names)
    recorder = _ModulePaths(module)
    functions = CustomFunctions()

    def where():
        if not recorder.stack:
            return "the loss function"
        path, cls = recorder.stack[-1]
        return f"{path or 'the root module'} ({cls})"

    reads = ScalarReads(where)
    try:
        # SDPA's math backend: autograd then differentiates plain ops (the
        # fused CPU kernel's backward has no torch-mlir lowering).
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with (
            fx_traceback.preserve_node_meta(),
            sdpa_kernel(SDPBackend.MATH),
            functions,
            FunctionalizedFunctions(),
            library_patterns(experts),
            reads,
        ):
            # functionalize: in-place ops (gradient accumulation, masked_fill_)
            # become their out-of-place forms, which torch-mlir lowers.
            fn = torch.func.functionalize(step, remove="mutations")
            gm = make_fx(fn, decomposition_table=table(), record_stack_traces=True)(
                params, buffers, *local_batch
            )
    except (RuntimeError, NotImplementedError) as err:
        raise _trace_failure(err, recorder.stack) from None
    finally:
        recorder.remove()
    functions.check()
    guards = _add_guard_outputs(gm, reads.guards)
    updated = _drop_unchanged_buffers(
        gm, len(params), len(differentiated), buffer_names, len(guards)
    )
    gm.fsdp_guards = guards
    return gm, updated


class _ForwardOnlyContext:
    """The `ctx` of an old-style forward run as plain differentiable ops:
    what it saves for the backward is not needed."""

    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        pass

    save_for_forward = mark_dirty = mark_non_differentiable = save_for_backward

    def set_materialize_grads(self, value):
        pass


def _plain_forward(cls, args, kwargs):
    """The forward of a custom Function as plain ops (old style: with a
    ctx that keeps nothing)."""
    from torch.autograd.function import _SingleLevelFunction

    if cls.setup_context is _SingleLevelFunction.setup_context:
        return cls.forward(_ForwardOnlyContext(), *args, **kwargs)
    return cls.forward(*args, **kwargs)


class CustomFunctions:
    """While tracing: a `torch.autograd.Function` (with or without
    `setup_context`; functionalize has no rule for custom functions, and
    torch.func refuses those without setup_context) runs its forward as
    plain ops, so autograd differentiates them. Each one's (class, argument
    shapes) is recorded; `check()` then compares, in eager torch on random inputs of
    those shapes, the function's own backward with autograd's derivative of
    its forward, and refuses one whose backward is something else (a
    straight-through estimator, a gradient reversal): tracing through it
    would silently change the gradient."""

    def __init__(self):
        self.seen = {}

    def __enter__(self):
        self.original = torch.autograd.Function.__dict__["apply"]
        original, seen = self.original, self.seen

        def apply(cls, *args, **kwargs):
            # The frontend's own Functions (experts.py) keep their derivative.
            if kwargs or getattr(cls, "fsdp_keep", False):
                return original.__get__(None, cls)(*args, **kwargs)
            spec = tuple(
                ("tensor", tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                for a in args
            )
            seen.setdefault(cls, spec)
            return _plain_forward(cls, args, {})

        torch.autograd.Function.apply = classmethod(apply)
        return self

    def __exit__(self, *exc):
        torch.autograd.Function.apply = self.original

    def check(self):
        for cls, spec in self.seen.items():
            _check_traced_through(cls, spec)


def _check_traced_through(cls, spec):
    g = torch.Generator().manual_seed(0)
    args = []
    for a in spec:
        if isinstance(a, tuple) and a and a[0] == "tensor":
            _, shape, dtype = a
            if dtype.is_floating_point:
                args.append(torch.randn(shape, generator=g, dtype=torch.float64))
            else:
                args.append(torch.zeros(shape, dtype=dtype))
        else:
            args.append(a)
    floats = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    for a in floats:
        a.requires_grad_(True)
    try:
        with torch.enable_grad():
            own = cls.apply(*args)
            plain = _plain_forward(cls, args, {})
        outs = [o for o in (own if isinstance(own, tuple) else (own,)) if o.requires_grad]
        plains = [
            p
            for o, p in zip(
                own if isinstance(own, tuple) else (own,),
                plain if isinstance(plain, tuple) else (plain,),
            )
            if o.requires_grad
        ]
        if not outs:
            return
        cotangents = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
        want = torch.autograd.grad(outs, floats, cotangents, allow_unused=True)
        got = torch.autograd.grad(plains, floats, cotangents, allow_unused=True)
    except Exception:  # noqa: BLE001 - the check needs shapes it could not rebuild
        return
    for w, a in zip(want, got):
        w = torch.zeros(()) if w is None else w
        a = torch.zeros(()) if a is None else a
        scale = max(float(w.abs().max()), 1e-30)
        if float((w - a).abs().max()) > 1e-6 * scale:
            raise ExportError(
                f"torch.autograd.Function '{cls.__qualname__}': the step traces its "
                "forward as plain ops and lets autograd differentiate them, but its own "
                "backward is not the derivative of its forward (a straight-through or "
                "gradient-reversal function?), so tracing through it would change the "
                "gradient; write that gradient with ops (x.detach() tricks) instead"
            )


def _add_guard_outputs(gm, guards: list) -> list:
    """Appends the guards' boolean tensors to the graph's results (after the
    loss, gradients and buffers: annotate takes them from there) and returns
    their records. Guards on the same tensor and value are one."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    results = list(out.args[0])
    records, seen = [], set()
    for node, record in guards:
        if node.graph is not gm.graph:
            continue
        key = (node.args[0].name if node.args else node.name, repr(record["value"]))
        if key in seen:
            continue
        seen.add(key)
        records.append(record)
        results.append(node)
    if records:
        out.args = (results,)
        gm.recompile()
    return records


_DATA_DEPENDENT_RE = re.compile(
    r"(aten\.[\w.]+)(?: with a boolean mask)?: " + re.escape(VALUE_DEPENDENT_SHAPE)
)


def _trace_failure(err: Exception, stack: list) -> Exception:
    """An error of the trace as an ExportError naming the submodule the
    forward was in (the innermost one still running) and the aten op; a
    value-dependent branch or shape (`.item()`, `bool(tensor)`, `nonzero`)
    is said to be one. Other errors pass through."""
    from .decompositions import UnsupportedInModel

    if isinstance(err, UnsupportedInModel):  # says what it is; export_step words it
        return err
    msg = str(err).strip()
    first = msg.splitlines()[0] if msg else repr(err)
    where = ""
    if stack:
        path, cls = stack[-1]
        where = f" in {path or 'the root module'} ({cls})"
    m = _DATA_DEPENDENT_RE.search(msg)
    if m:
        op = m.group(1).removesuffix(".default")
        return ExportError(
            f"unsupported op '{op}'{where}: the forward sizes a tensor by the "
            "values of another (nonzero, torch.where with one argument, a boolean mask "
            "selecting elements, unique); the step is traced once for every batch, so use a "
            "formulation whose shapes do not depend on the data"
        )
    if not stack:
        return err
    m = _TORCH_OP_RE.search(msg) or re.search(r"\b(aten\.[A-Za-z0-9_.]+)", msg)
    op = f" at '{m.group(1)}'" if m else ""
    return ExportError(f"tracing the step failed{op}{where}: {first}")


_COPY_OPS = (
    torch.ops.aten.clone.default,
    torch.ops.aten._to_copy.default,
    torch.ops.prims.convert_element_type.default,
)


def _drop_unchanged_buffers(
    gm, n_params: int, n_grads: int, buffer_names: list, n_guards: int = 0
) -> list:
    """Removes the buffers the step returns unchanged (the copy of their own
    argument) from the graph's results; returns the names of the others.
    The `n_guards` results after the buffers stay (and move up)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    results = list(out.args[0])
    first = 1 + n_grads
    kept, updated = results[:first], []
    for i, name in enumerate(buffer_names):
        node = results[first + i]
        arg = placeholders[n_params + i]
        # The argument itself, its copy, or its round trip through the
        # buffer's own dtype (exact for a carrier).
        while node is not arg and getattr(node, "target", None) in _COPY_OPS:
            node = node.args[0]
        same = node is arg
        if not same:
            kept.append(node)
            updated.append(name)
    kept += results[first + len(buffer_names) : first + len(buffer_names) + n_guards]
    if len(kept) != len(results):
        out.args = (kept,)
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return updated


@contextlib.contextmanager
def bound_to(module: torch.nn.Module, values: dict):
    """A context in which `module`'s parameters and buffers are `values`
    ({name: tensor}, the traced ones): every read inside `loss_fn` sees them,
    the forward's and also `module.parameters()`, `named_parameters()`,
    `module.head.weight`, `state_dict(keep_vars=True)`, so that a loss term computed from
    the parameters themselves (a weight penalty) gets its gradient. This is
    `torch.func.functional_call`'s reparametrization held for the whole
    `loss_fn` call instead of one forward; tied weights follow their first
    name, as there.

    On exit every submodule gets back the very tensors it held: torch's
    restore assumes one submodule per path, and a submodule reachable by
    two paths (peft's prompt tuning keeps the input embeddings as
    `word_embeddings` too) got the traced tensor back through the second."""
    from torch.nn.utils.stateless import _reparametrize_module

    saved = [(m, dict(m._parameters), dict(m._buffers)) for m in module.modules()]
    try:
        with _reparametrize_module(module, values, tie_weights=True, strict=False):
            yield
    finally:
        for m, params, buffers in saved:
            m._parameters.clear()
            m._parameters.update(params)
            m._buffers.clear()
            m._buffers.update(buffers)


# ---------------------------------------------------------------- export


def export_step(
    module: torch.nn.Module,
    loss_fn: Callable,
    example_batch,
    out_dir: str | os.PathLike | None = None,
    *,
    mesh="8",
    units=None,
    placement=None,
    policy: str = "ceil",
    param_dtype: str | None = None,
    reduce_dtype: str | None = None,
    output: str | os.PathLike | None = None,
    verify: bool | None = None,
    buffer_updates: str | None = None,
    tp_plan=None,
    sequence_parallel: bool = False,
    sequence_gather_quant: str | None = None,
    experts: str = "sparse",
) -> dict:
    """Writes `<out_dir>/step.mlir` (or `output`), `model.json` and the global
    parameters and batch as `.npy`; returns the model description.

    loss_fn(model, *batch) -> scalar loss of the micro-batch it is given (a mean
    over the batch, so that averaging over ranks gives the global-batch mean).
    example_batch: the GLOBAL batch (tuple, dict or tensor); dim 0 of each
    tensor is split over the mesh's data-parallel ranks. mesh: "N", "RxS"
    (HSDP), or named axes "dp=2,tp=2" / "replicate=2,shard=2,tp=2" (`tp` is
    the tensor-parallel axis; every rank of it reads the same batch).
    tp_plan: with a `tp` axis, {module path pattern: style} (styles of
    torch's parallelize_module / Hugging Face: colwise, rowwise,
    colwise_rep, rowwise_rep, replicated_with_grad_allreduce,
    embedding_rowwise / vocab_parallel for embeddings split along the
    vocabulary) or "auto" (the model's own plan: config.base_model_tp_plan,
    its LM head and input embeddings, vocabulary-parallel); parameters
    outside the plan are replicated over `tp` (docs/TENSOR_PARALLEL.md).
    sequence_parallel: split activations over their tokens between
    tensor-parallel products (also on when the plan has a
    `sequence_parallel` module).
    sequence_gather_quant: with sequence parallelism, all-gather activations
    along the tokens quantized in this format (fp8_e4m3_tensor,
    mxfp8_rowwise, ...: the formats of the quantized parameter gathers,
    docs/QUANTIZATION.md), as TransformerEngine's gather_along_first_dim
    with FP8 inputs; a gather whose [tokens, features] block the format
    cannot block stays unquantized.
    verify: run the imported step unsharded on rank 0's micro-batch and compare
    it with torch eager (fsdp_mlir.torch.verify); None (default) does so when
    the project's tools are found (above verify.AUTO_LIMIT elements on the
    step traced for one sample of that micro-batch), True always on the
    whole micro-batch (an error if the tools are missing), False never.
    buffer_updates: how buffers the forward updates (batch norm's running
    statistics in training mode) leave the step: "fed_back" (results with
    `fsdp.update_of`, fed back by `fsdp-run --steps`; on several ranks each
    rank keeps and updates its own copy) or "results" (rank-local results
    only, not fed back). None: "fed_back".
    experts: how a sparse mixture of experts' grouped matrix products
    (`F.grouped_mm` with offsets, transformers' experts in every
    implementation that runs on the CPU) are exported: "sparse" (default;
    `fsdp.grouped_matmul`, one product per expert on its own rows) or
    "dense" (every expert on every row, masked by the routing: E / top-k
    times the multiply-adds, for comparison).
    """
    if not isinstance(module, torch.nn.Module):
        raise ExportError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    mesh_d = _parse_mesh(mesh)
    world = M.mesh_world(mesh_d)
    if policy not in M.POLICIES:
        raise ExportError(f"policy '{policy}': expected one of {M.POLICIES}")
    if experts not in ("sparse", "dense"):
        raise ExportError(f"experts '{experts}': expected sparse or dense")
    for opt, value in (("param_dtype", param_dtype), ("reduce_dtype", reduce_dtype)):
        if value is not None and value not in ("f32", "bf16", "f16", "f64"):
            raise ExportError(f"{opt} '{value}': expected f32, bf16, f16 or f64")

    entries = _batch_entries(loss_fn, example_batch)
    sizes = {name: t.shape[0] for name, t in entries}
    global_batch = next(iter(sizes.values()))
    if any(s != global_batch for s in sizes.values()):
        raise ExportError(
            "example_batch: every tensor needs the same batch size (dim 0); got "
            + ", ".join(f"{n}: {s}" for n, s in sizes.items())
        )
    batch_world = M.data_parallel_world(mesh_d)
    if global_batch % batch_world != 0:
        raise ExportError(
            f"example_batch: batch size {global_batch} does not split over {batch_world} ranks "
            f"(mesh {'x'.join(map(str, mesh_d['shape']))}): {global_batch} % {batch_world} = "
            f"{global_batch % batch_world}; use a multiple of {batch_world}"
        )
    local = global_batch // batch_world
    tp_places = {}
    if M.tp_axis(mesh_d) is not None:
        if tp_plan is None:
            raise ExportError(
                f"mesh '{mesh}' has a tp axis: give tp_plan ('auto' or {{pattern: style}})"
            )
        try:
            tp_places = TP.tp_placements(module, tp_plan, mesh_d["shape"][M.tp_axis(mesh_d)])
        except TP.PlanError as err:
            raise ExportError(str(err)) from None
        sequence_parallel = sequence_parallel or TP.uses_sequence_parallel(module, tp_plan)
    elif tp_plan is not None:
        raise ExportError(f"tp_plan needs a mesh with a tp axis (e.g. dp=2,tp=2), got '{mesh}'")
    elif sequence_parallel:
        raise ExportError(f"sequence_parallel needs a mesh with a tp axis, got '{mesh}'")

    named = [(n, p) for n, p in module.named_parameters()]
    if not named:
        raise ExportError("module has no parameters")
    if not any(p.requires_grad for _, p in named):
        raise ExportError(
            "no parameter requires grad: a training step needs at least one trainable parameter"
        )
    for n, p in named:
        if p.dtype != torch.float32:
            raise ExportError(f"parameter '{n}' has dtype {p.dtype}; only float32 is supported")
    data_names = [n for n, _ in entries]
    named_buffers = list(module.named_buffers())
    for n, b in named_buffers:
        if buffer_carrier(b.dtype) not in _BUFFER_DTYPES:
            raise ExportError(f"buffer '{n}' has dtype {b.dtype}, which is not supported")
    clash = set(data_names) & {n for n, _ in named + named_buffers} | ({"loss"} & set(data_names))
    if clash:
        raise ExportError(f"batch names clash with parameter or result names: {sorted(clash)}")
    unit_of = assign_units(module, units)

    params = []
    for n, p in named:
        layout = _layout(n, p, mesh_d, placement, policy, tp_places.get(n))
        params.append(
            {
                "name": n,
                "shape": list(p.shape),
                "unit": unit_of[n],
                "dtype": "f32",
                # requires_grad=False: sharded and gathered like the others,
                # without a gradient (no reduce-scatter, no optimizer state).
                "frozen": not p.requires_grad,
                "layout": layout,
                "layout_attr": M.layout_text(mesh_d, layout),
            }
        )
    data = []
    for n, t in entries:
        data.append(
            {
                "name": n,
                "dtype": _NPY_DTYPES[t.dtype][0],
                "local_shape": [local] + list(t.shape[1:]),
                "shape": list(t.shape),
            }
        )
    results = [{"name": "loss", "kind": "loss", "dtype": "f32", "shape": []}]
    for i, p in enumerate(params):
        if p["frozen"]:
            continue
        results.append(
            {
                "name": f"grad.{p['name']}",
                "kind": "grad",
                "grad_of": i,
                "param": p["name"],
                "dtype": "f32",
                "shape": list(p["shape"]),
            }
        )
    options = ["lower=true", "all-reduce-loss=true"]
    if param_dtype:
        options.append(f"param-dtype={param_dtype}")
    if reduce_dtype:
        options.append(f"reduce-dtype={reduce_dtype}")
    if sequence_parallel:
        options.append("sequence-parallel=true")
    if sequence_gather_quant:
        if not sequence_parallel:
            raise ExportError("sequence_gather_quant needs sequence parallelism")
        if not re.fullmatch(r"[a-z0-9_]+", sequence_gather_quant):
            raise ExportError(f"sequence_gather_quant: bad format '{sequence_gather_quant}'")
        options.append(f"sequence-gather-quant={sequence_gather_quant}")
    model = {
        "format": M.FORMAT_VERSION,
        "kind": FRONTEND_KIND,
        "config": {
            "module": type(module).__qualname__,
            "units": sorted({p["unit"] for p in params}, key=[p["unit"] for p in params].index),
            "param_dtype": param_dtype,
            "reduce_dtype": reduce_dtype,
            "pipeline": " ".join(options),
        },
        "function": FUNCTION,
        "dtype": "f32",
        "seed": None,
        "mesh": mesh_d,
        "world": world,
        "local_batch": local,
        "global_batch": global_batch,
        "placement": placement if isinstance(placement, str) or placement is None else "custom",
        "policy": policy,
        "args": [p["name"] for p in params] + data_names,
        "params": params,
        "data": data,
        "results": results,
    }

    local_batch = [t[:local] for _, t in entries]
    if buffer_updates is None:
        buffer_updates = "fed_back"
    if buffer_updates not in ("fed_back", "results"):
        raise ExportError(f"buffer_updates '{buffer_updates}': expected fed_back or results")
    base = copy.deepcopy(model)

    def step_for(batch, model):
        """Traces, imports and annotates the step of `batch` (rank 0's
        micro-batch, or verify's sample of it); completes `model`."""
        from .decompositions import UnsupportedInModel

        try:
            gm, updated = trace_step(
                module,
                loss_fn,
                [n for n, _ in named],
                batch,
                [n for n, _ in named_buffers],
                experts=experts,
            )
        except UnsupportedInModel as err:
            raise ExportError(str(err)) from None
        model["guards"] = [dict(g, message=guard_message(g)) for g in gm.fsdp_guards]
        _add_buffers(model, named_buffers, updated, mesh_d, buffer_updates == "fed_back")
        return annotate(import_graph(gm), model), gm

    text, gm = step_for(local_batch, model)

    def sample_step(sample):
        sampled = copy.deepcopy(base)
        sampled["local_batch"] = sample[0].shape[0]
        return (*step_for(sample, sampled), sampled)

    model["verify"] = _verify(text, model, module, loss_fn, local_batch, verify, gm, sample_step)

    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        path = output or os.path.join(out_dir, FUNCTION + ".mlir")
        with open(path, "w") as f:
            f.write(text)
        for n, p in named:
            np.save(os.path.join(out_dir, n + ".npy"), p.detach().numpy().astype(np.float32))
        for b in model["buffers"]:
            np.save(os.path.join(out_dir, b["name"] + ".npy"), buffer_file(b, module, world))
        for n, t in entries:
            np.save(
                os.path.join(out_dir, n + ".npy"),
                t.detach().numpy().astype(_NPY_DTYPES[t.dtype][1]),
            )
        with open(os.path.join(out_dir, M.MODEL_JSON), "w") as f:
            json.dump(model, f, indent=1)
            f.write("\n")
    elif output is not None:
        with open(output, "w") as f:
            f.write(text)
    model["mlir"] = text
    return model


def _add_buffers(
    model: dict, named_buffers: list, updated: list, mesh: dict, fed_back: bool
) -> None:
    """Buffers become arguments after the parameters, before the batch; those
    the forward updates are also results (`fsdp.update_of` their argument).

    A buffer the step only reads is replicated (`replicate` on every mesh
    axis): every rank gets the whole value. An updated buffer (batch norm's
    running statistics in training mode) is rank-local, as in FSDP2 and DDP
    without SyncBatchNorm: each rank updates its own copy from its
    micro-batch, so it has no layout. With `fed_back`, the updated buffers'
    results carry `fsdp.update_of` (their argument), so that `fsdp-run
    --steps` feeds them back and each rank keeps its own copy (the file holds
    one value, every rank's start); otherwise they are plain results and the
    argument is batch-like (its file holds every rank's copy along dim 0)."""
    n_params = len(model["params"])
    replicated = {"placements": [{"kind": "replicate"}] * len(mesh["shape"]), "policy": "ceil"}
    buffers = []
    for i, (n, b) in enumerate(named_buffers):
        entry = {
            "name": n,
            "kind": "buffer",
            "dtype": _BUFFER_DTYPES[buffer_carrier(b.dtype)][0],
            "torch_dtype": str(b.dtype).replace("torch.", ""),
            "shape": list(b.shape),
            "updated": n in updated,
            "arg": n_params + i,
        }
        if entry["updated"]:
            entry["layout"] = None
            entry["local_shape"] = list(b.shape)
            entry["fed_back"] = fed_back
            # Fed back: the runner gives every rank the same start value.
            # Otherwise a batch-like input: every rank's copy along dim 0.
            entry["file_shape"] = (
                [b.shape[0] * model["world"]] + list(b.shape[1:])
                if b.dim() and not fed_back
                else list(b.shape)
            )
        else:
            entry["layout"] = replicated
            entry["layout_attr"] = M.layout_text(mesh, replicated)
            entry["file_shape"] = list(b.shape)
        buffers.append(entry)
    model["buffers"] = buffers
    names = [b["name"] for b in buffers]
    model["args"] = model["args"][:n_params] + names + model["args"][n_params:]
    for n in updated:
        b = buffers[names.index(n)]
        model["results"].append(
            {
                "name": n,
                "kind": "buffer",
                "buffer": n,
                "update_of": b["arg"] if fed_back else None,
                "dtype": b["dtype"],
                "shape": b["shape"],
            }
        )


def _buffer_value(b: dict, module: torch.nn.Module) -> np.ndarray:
    t = buffer_argument(module, b["name"])
    return t.numpy().astype(_BUFFER_DTYPES[t.dtype][1])


def buffer_file(b: dict, module: torch.nn.Module, world: int) -> np.ndarray:
    """The .npy content of a buffer argument: its value (every rank starts
    from it), or for an updated buffer that is not fed back every rank's copy
    concatenated along dim 0 (a batch-like input)."""
    value = _buffer_value(b, module)
    if b["updated"] and not b.get("fed_back") and value.ndim:
        value = np.concatenate([value] * world, axis=0)
    return value


def _verify(
    text, model, module, loss_fn, local_batch, verify, graph=None, sample_step=None
) -> dict:
    """The self-check of export_step (see verify.py): its report, or why it
    was skipped. `graph` (the traced step) lets a failure name the first op
    whose value differs. By default a model above verify.AUTO_LIMIT elements
    is checked on a sample: the step traced again for the first
    verify.SAMPLE samples of rank 0's micro-batch (`sample_step(batch) ->
    (text, graph, model)`), which compiles the same program and runs it on
    less data."""
    if verify is False:
        return {"skipped": "verify=False"}
    sample = None
    if verify is None:
        if V.missing_tools():
            return {"skipped": f"{', '.join(V.missing_tools())} not found"}
        size = sum(p.numel() for p in module.parameters()) + sum(
            b.numel() for b in module.buffers()
        )
        rows = local_batch[0].shape[0] if local_batch else 0
        if size > V.AUTO_LIMIT and sample_step is not None and rows > V.SAMPLE:
            local_batch = [t[: V.SAMPLE] for t in local_batch]
            text, graph, model = sample_step(local_batch)
            sample = V.SAMPLE
    try:
        report = V.verify_step(text, model, module, loss_fn, local_batch, graph=graph)
    except V.VerifyError as err:
        raise ExportError(str(err)) from None
    if sample is not None:
        report["sample"] = sample
    return report


def load_results(out_dir, module: torch.nn.Module | None = None, model: dict | None = None):
    """(loss, {parameter name: gradient tensor}) from a runner's output directory.
    Gradients are shaped like the parameters; with `module`, every parameter of
    the module that requires grad must have one (and the shapes must agree)."""
    names = None
    if model is not None:
        names = [r["param"] for r in model["results"] if r["kind"] == "grad"]
    elif module is not None:
        names = [n for n, p in module.named_parameters() if p.requires_grad]
    else:
        raise ExportError("load_results needs the module or the model description")
    loss_path = os.path.join(out_dir, "loss.npy")
    if not os.path.isfile(loss_path):
        raise ExportError(f"{loss_path}: not found")
    loss = torch.from_numpy(np.load(loss_path).astype(np.float32))
    grads = {}
    shapes = dict(module.named_parameters()) if module is not None else {}
    for n in names:
        path = os.path.join(out_dir, f"grad.{n}.npy")
        if not os.path.isfile(path):
            raise ExportError(f"{path}: not found (no gradient for '{n}')")
        g = torch.from_numpy(np.load(path))
        if n in shapes and tuple(g.shape) != tuple(shapes[n].shape):
            raise ExportError(
                f"{path}: shape {tuple(g.shape)}, but parameter '{n}' is {tuple(shapes[n].shape)}"
            )
        grads[n] = g
    return loss, grads


def load_inputs(export_dir, module: torch.nn.Module) -> dict:
    """Copies the exported parameters into `module` and returns the exported
    global batch as {name: tensor} (in argument order)."""
    model = M.load_model(str(export_dir))
    if model.get("kind") != FRONTEND_KIND:
        raise ExportError(f"{export_dir}: not written by fsdp_mlir.torch")
    own = dict(module.named_parameters())
    with torch.no_grad():
        for p in model["params"]:
            if p["name"] not in own or list(own[p["name"]].shape) != p["shape"]:
                raise ExportError(f"{export_dir}: parameter '{p['name']}' does not fit the module")
            value = np.load(os.path.join(export_dir, p["name"] + ".npy"))
            own[p["name"]].copy_(torch.from_numpy(value))
        for b in model.get("buffers", []):
            value = np.load(os.path.join(export_dir, b["name"] + ".npy"))
            own = module.get_buffer(b["name"])
            if b["updated"] and value.ndim:  # every rank's copy: take rank 0's
                value = value[: own.shape[0]]
            own.copy_(torch.from_numpy(value))
    return {
        d["name"]: torch.from_numpy(np.load(os.path.join(export_dir, d["name"] + ".npy")))
        for d in model["data"]
    }


def reference(
    module: torch.nn.Module, loss_fn: Callable, batch, dtype=torch.float64, world: int | None = None
):
    """(loss, {name: gradient}) of loss_fn(module, *batch) on the whole batch
    with torch autograd, computed in `dtype` (float64 by default) on a copy of
    the module: what the sharded step must reproduce.

    With `world`, the batch is cut into `world` micro-batches (rows [r*b,
    (r+1)*b)) and the loss and gradients are the means of each micro-batch's,
    which is what data parallelism computes when the loss depends on the
    micro-batch as a whole (batch norm in training mode normalizes by each
    rank's own batch statistics)."""
    if world is not None:
        return _mean_of_ranks(reference_ranks(module, loss_fn, batch, world, dtype))
    import copy

    ref = copy.deepcopy(module).to(dtype)
    entries = _batch_entries(loss_fn, batch)
    args = [t.to(dtype) if t.is_floating_point() else t for _, t in entries]
    ref.zero_grad(set_to_none=True)
    # The backward in the same context: a checkpointed forward recomputes there.
    with eager_context():
        loss = loss_fn(ref, *args)
        loss.backward()
    return loss.detach(), {
        n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach()
        for n, p in ref.named_parameters()
        if p.requires_grad
    }


def reference_ranks(module, loss_fn, batch, world: int, dtype=torch.float64) -> list:
    """Per rank r: (loss, {name: gradient}, {buffer name: value after the
    step}) of its micro-batch, in `dtype`, each on its own copy of the module
    (each rank updates its own buffers)."""
    import copy

    entries = _batch_entries(loss_fn, batch)
    b = entries[0][1].shape[0] // world
    out = []
    for r in range(world):
        ref = copy.deepcopy(module).to(dtype)
        args = [
            (t.to(dtype) if t.is_floating_point() else t)[r * b : (r + 1) * b] for _, t in entries
        ]
        ref.zero_grad(set_to_none=True)
        with eager_context():
            loss = loss_fn(ref, *args)
            loss.backward()
        grads = {
            n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach()
            for n, p in ref.named_parameters()
            if p.requires_grad
        }
        buffers = {n: t.detach().clone() for n, t in ref.named_buffers()}
        out.append((loss.detach(), grads, buffers))
    return out


def _mean_of_ranks(ranks: list):
    loss = sum(r[0] for r in ranks) / len(ranks)
    grads = {n: sum(r[1][n] for r in ranks) / len(ranks) for n in ranks[0][1]}
    return loss, grads


def load_buffers(out_dir, model: dict, rank: int | None = None) -> dict:
    """{buffer name: value} of the updated buffers in a runner's output
    directory: rank 0's copy (`<name>.npy`), or with `rank` that rank's
    (`<name>.rank<r>.npy`, written by `fsdp-run --all-ranks`)."""
    out = {}
    for r in model["results"]:
        if r["kind"] != "buffer":
            continue
        stem = r["name"] if rank is None else f"{r['name']}.rank{rank}"
        path = os.path.join(out_dir, stem + ".npy")
        if not os.path.isfile(path):
            raise ExportError(f"{path}: not found (no value for buffer '{r['buffer']}')")
        out[r["buffer"]] = torch.from_numpy(np.load(path))
    return out

"""The export's self-check: run the imported step and compare it with torch.

`export_step(..., verify=True)` calls `verify_step` on the step it has just
imported. The step is run unsharded, on one rank, through the project's own
pipeline (`fsdp-opt --fsdp-pipeline="lower=true all-reduce-loss=true"`, then
`fsdp-run` with a mesh of size 1) on rank 0's micro-batch of the example batch
(the exported step's shapes), and its loss and every gradient (and, for buffers
the forward updates, every new buffer value) are compared with torch eager in
float32 on the same micro-batch. A result further than `rtol` from torch
(relative to its own max norm, floored at 1e-3 of the largest gradient's) is an
`ExportError` naming the worst result. This catches an import that computes
something else than the module (a wrong constant in a lowering, a decomposition
with a bug) before anything is sharded. See docs/FRONTENDS.md, "verify".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch

from .decompositions import eager_context
from .importer import (
    _op_name,
    annotate,
    buffer_argument,
    import_graph,
    node_module_path,
    with_mesh_shape,
)

# verify=None (the default) checks every step (the check compiles and runs it
# once more, unsharded). Above this many elements of parameters and buffers,
# it checks the step traced for the first SAMPLE samples of rank 0's
# micro-batch: the same program on less data (the run's activations and
# time shrink with it); verify=True checks the exported micro-batch itself.
AUTO_LIMIT = 4_000_000
SAMPLE = 1
RTOL = 1e-5
# Each gradient is compared against its own max norm, floored at this fraction
# of the largest gradient's: gradients that are zero in exact arithmetic
# (attention key biases) hold only rounding noise.
FLOOR = 1e-3
PIPELINE = "lower=true all-reduce-loss=true"

_PACKAGE_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


class VerifyError(ValueError):
    """The imported step does not compute what the module computes."""


def find_tool(name: str) -> str | None:
    """`FSDP_TOOLS_DIR`, else this checkout's build/bin, else PATH."""
    dirs = [os.environ.get("FSDP_TOOLS_DIR"), os.path.join(_PACKAGE_REPO, "build", "bin")]
    for d in dirs:
        if d:
            path = os.path.join(d, name)
            if os.access(path, os.X_OK):
                return path
    return shutil.which(name)


def missing_tools() -> list:
    return [t for t in ("fsdp-opt", "fsdp-run") if find_tool(t) is None]


def relative_errors(got: dict, ref: dict, grads: list) -> dict:
    """{name: max|got - ref| / scale}: scale is max|ref|, for the gradients
    (names in `grads`) floored at FLOOR times the largest gradient's."""
    top = max((float(ref[n].abs().max()) for n in grads if ref[n].numel()), default=0.0)
    out = {}
    for name, r in ref.items():
        g = got[name].double()
        r = r.double()
        if r.numel() == 0:
            out[name] = 0.0
            continue
        if not bool(torch.isfinite(g).all()) and bool(torch.isfinite(r).all()):
            out[name] = float("inf")
            continue
        scale = float(r.abs().max())
        if name in grads:
            scale = max(scale, FLOOR * top)
        err = float((g - r).abs().max())
        out[name] = err / scale if scale > 0 else err
    return out


def _run(cmd, what, tmp):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        first = next(
            (ln for ln in proc.stderr.splitlines() if "error" in ln.lower()),
            proc.stderr.strip()[:300],
        )
        raise VerifyError(
            f"verify: {what} failed on the exported step (exit {proc.returncode}): "
            f"{first.strip()}; rerun: {' '.join(cmd)} (inputs kept in {tmp})"
        )


def run_unsharded(text: str, model: dict, inputs: dict, workdir: str) -> dict:
    """Runs the step `text` (as exported for `model`) on one rank with the
    given inputs ({name: array}, parameters at full shape, batch at the local
    shape); returns {result name: array}."""
    tools = {t: find_tool(t) for t in ("fsdp-opt", "fsdp-run")}
    mesh = model["mesh"]
    try:
        text = with_mesh_shape(text, mesh, [1] * len(mesh["shape"]))
    except ValueError as err:  # ExportError: no mesh in the step
        raise VerifyError(f"verify: {err}") from None
    step = os.path.join(workdir, "step.mlir")
    with open(step, "w") as f:
        f.write(text)
    data = os.path.join(workdir, "inputs")
    os.makedirs(data, exist_ok=True)
    for name, value in inputs.items():
        np.save(os.path.join(data, name + ".npy"), value)
    lowered = os.path.join(workdir, "lowered.mlirbc")
    out = os.path.join(workdir, "out")
    _run(
        [tools["fsdp-opt"], step, f"--fsdp-pipeline={PIPELINE}", "--emit-bytecode", "-o", lowered],
        "fsdp-opt",
        workdir,
    )
    _run([tools["fsdp-run"], lowered, "--inputs", data, "--outputs", out], "fsdp-run", workdir)
    results = {}
    for r in model["results"]:
        path = os.path.join(out, r["name"] + ".npy")
        if not os.path.isfile(path):
            raise VerifyError(f"verify: fsdp-run wrote no {r['name']}.npy")
        results[r["name"]] = np.load(path)
    return results


def eager_reference(module, loss_fn, local_batch, buffer_results=()):
    """torch eager in float32 on a copy of the module: {result name: tensor}
    for the loss, every gradient and the updated buffers."""
    import copy

    ref = copy.deepcopy(module)
    # Frozen parameters (requires_grad=False) have no gradient result.
    params = {n: p for n, p in ref.named_parameters() if p.requires_grad}
    for p in params.values():
        p.grad = None
    # backward(), not autograd.grad: reentrant activation checkpointing
    # accumulates the gradients of its region into .grad only. In the same
    # context: a checkpointed forward recomputes in the backward.
    with eager_context():
        loss = loss_fn(ref, *local_batch)
        loss.backward()
    out = {"loss": loss.detach()}
    for n, p in params.items():
        out[f"grad.{n}"] = torch.zeros_like(p) if p.grad is None else p.grad.detach()
    buffers = dict(ref.named_buffers())
    for result, buf in buffer_results:
        out[result] = buffers[buf].detach().clone()
    return out


# A result off from torch's float32 is still accepted when it is as close to
# float64 as torch's own float32 is, within this factor: rounding noise of a
# gradient that is zero in exact arithmetic (a bias before a batch norm) is
# not an error.
NOISE_FACTOR = 8.0


def _rejudge(errors, got, ref32, grads, module, loss_fn, local_batch, buffer_results):
    """The results above the tolerance, judged against float64: each one's
    error becomes its distance to float64 over max(tolerance scale, the
    distance of torch's float32 to float64 times NOISE_FACTOR), in units of
    the tolerance's scale, so that <= rtol still means ok."""
    import copy

    m64 = copy.deepcopy(module).double()
    batch64 = [t.double() if t.is_floating_point() else t for t in local_batch]
    ref64 = eager_reference(m64, loss_fn, batch64, buffer_results)
    top = max((float(ref64[n].abs().max()) for n in grads if ref64[n].numel()), default=0.0)
    out = dict(errors)
    for name, e in errors.items():
        if e <= RTOL or not ref64[name].is_floating_point():
            continue
        r64 = ref64[name]
        scale = float(r64.abs().max())
        if name in grads:
            scale = max(scale, FLOOR * top)
        ours = float((got[name].double() - r64).abs().max())
        torch32 = float((ref32[name].double() - r64).abs().max())
        allowed = max(RTOL * scale, NOISE_FACTOR * torch32)
        out[name] = RTOL * ours / allowed if allowed > 0 else ours
    return out


# The first-divergence search returns at most this many intermediate values
# of the traced step from one more compile and run (the first ones in graph
# order); a step with more reports only whether one of those differs.
PROBE_LIMIT = 600


# Ops whose value may fold to their operand (an argument returned as it is
# is refused by fsdp-opt): not probed.
_COPIES = {"aten::clone", "aten::_to_copy", "aten::copy", "aten::lift_fresh_copy"}


def _probe_nodes(graph) -> list:
    """The float tensor values of the traced step's ops, in graph order."""
    import operator

    nodes = []
    for node in graph.graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype != torch.float32 or not val.numel():
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is not None and (
            any(r.alias_info is not None for r in schema.returns) or schema.name in _COPIES
        ):
            continue  # a view or copy may be an argument itself after the import
        if node.target is operator.getitem or schema is not None:
            nodes.append(node)
    return nodes[:PROBE_LIMIT]


def _eager_values(graph, args, nodes) -> dict:
    """{node name: value} of `nodes` when torch runs the traced step itself."""
    wanted = {n.name for n in nodes}
    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.name in wanted:
                values[n.name] = out.detach().clone()
            return out

    # Flat arguments, no output processing: the graph's results were pruned
    # (unchanged buffers) after tracing, its output spec was not.
    flat = torch.utils._pytree.tree_leaves(args)
    with torch.no_grad():
        Recorder(graph).run(*flat, enable_io_processing=False)
    return values


def first_divergence(graph, text_of, model, inputs, graph_args, workdir, rtol=RTOL):
    """The first op of the traced step (graph order) whose value in the
    compiled step differs from torch's running the same graph by more than
    `rtol` relative to its own max norm: (op, node name, module path, error),
    or None. The step is imported once more with those values as extra
    results (`text_of(graph) -> annotated text` for a model whose results
    include them as "probe" results) and run unsharded."""
    import copy

    nodes = _probe_nodes(graph)
    if not nodes:
        return None
    probe = copy.deepcopy(graph)
    by_name = {n.name: n for n in probe.graph.nodes}
    out = next(n for n in probe.graph.nodes if n.op == "output")
    out.args = (tuple(out.args[0]) + tuple(by_name[n.name] for n in nodes),)
    probe.recompile()
    os.makedirs(workdir, exist_ok=True)
    probed = dict(model)
    probed["results"] = list(model["results"]) + [
        {"name": f"probe.{i}", "kind": "probe"} for i in range(len(nodes))
    ]
    got = run_unsharded(text_of(probe, probed), probed, inputs, workdir)
    want = _eager_values(graph, graph_args, nodes)
    for i, node in enumerate(nodes):
        g = torch.from_numpy(np.asarray(got[f"probe.{i}"])).double()
        w = want[node.name].double().reshape(g.shape)
        # Equal values (an infinite mask fill too) and NaN against NaN agree;
        # the scale is the largest finite magnitude.
        same = (g == w) | (torch.isnan(g) & torch.isnan(w))
        diff = torch.where(same, torch.zeros_like(g), (g - w).abs())
        finite = w[torch.isfinite(w)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        err = float(diff.max())
        rel = err / scale if scale > 0 else err
        if not rel <= rtol:
            return _op_name(node), node.name, node_module_path(node), rel
    return None


def verify_step(text, model, module, loss_fn, local_batch, *, rtol=RTOL, keep=None, graph=None):
    """Runs the exported step unsharded and compares it with torch eager in
    float32 (see the module's docstring). Returns {"results", "worst",
    "rel_err", "rtol"}; raises VerifyError on a mismatch."""
    missing = missing_tools()
    if missing:
        raise VerifyError(
            f"verify: {', '.join(missing)} not found (build them, or set FSDP_TOOLS_DIR; "
            "verify=False skips the check)"
        )
    inputs = {}
    for p in model["params"]:
        inputs[p["name"]] = module.get_parameter(p["name"]).detach().numpy().astype(np.float32)
    for b in model.get("buffers", []):
        inputs[b["name"]] = buffer_argument(module, b["name"]).numpy().copy()
    for d, t in zip(model["data"], local_batch):
        inputs[d["name"]] = t.detach().numpy()
    buffer_results = [(r["name"], r["buffer"]) for r in model["results"] if r["kind"] == "buffer"]
    tmp = tempfile.mkdtemp(prefix="fsdp-verify-", dir=keep)
    failed = True
    try:
        got = run_unsharded(text, model, inputs, tmp)
        ref = eager_reference(module, loss_fn, local_batch, buffer_results)
        grads = [r["name"] for r in model["results"] if r["kind"] == "grad"]
        got = {k: torch.from_numpy(np.asarray(v)) for k, v in got.items()}
        errors = relative_errors(got, ref, grads)
        if any(not e <= rtol for e in errors.values()):
            errors = _rejudge(errors, got, ref, grads, module, loss_fn, local_batch, buffer_results)
        worst = max(errors, key=errors.get)
        report = {"results": len(errors), "worst": worst, "rel_err": errors[worst], "rtol": rtol}
        if not errors[worst] <= rtol:
            bad = sorted((k for k in errors if not errors[k] <= rtol), key=errors.get, reverse=True)
            listed = ", ".join(f"{k} {errors[k]:.2e}" for k in bad[:5])
            more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
            first = _first_op_text(graph, module, model, inputs, local_batch, tmp, rtol)
            raise VerifyError(
                f"verify: the imported step differs from torch eager (float32, unsharded, "
                f"rank 0's micro-batch): {worst} is {errors[worst]:.2e} off relative "
                f"(tolerance {rtol:g}); {len(bad)} of {len(errors)} results are off: "
                f"{listed}{more}{first} (step and inputs kept in {tmp})"
            )
        failed = False
        return report
    finally:
        # Kept when the check fails, so that its step and inputs can be rerun.
        if not failed:
            shutil.rmtree(tmp, ignore_errors=True)


def _first_op_text(graph, module, model, inputs, local_batch, tmp, rtol) -> str:
    """ "; the first op whose value differs is ..." for a failed check, or ""
    when there is no graph, no op differs or the search itself fails."""
    if graph is None:
        return ""
    params = tuple(p.detach() for _, p in module.named_parameters())
    buffers = tuple(buffer_argument(module, b["name"]) for b in model.get("buffers", []))
    try:
        found = first_divergence(
            graph,
            lambda g, m: annotate(import_graph(g), m),
            model,
            inputs,
            (params, buffers, *local_batch),
            os.path.join(tmp, "probe"),
            rtol,
        )
    except Exception:  # the search is a hint: the check's own error stands
        return ""
    if found is None:
        return ""
    op, name, path, rel = found
    where = f" in {path or 'the root module'}" if path is not None else ""
    return f"; the first op whose value differs is {op} (node {name}{where}, {rel:.2e} off)"

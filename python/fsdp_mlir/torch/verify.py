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

from .. import model as M
from .decompositions import eager_context

# verify=None (the default) checks steps whose parameters and buffers have at
# most this many elements in all (the check compiles and runs the step once
# more, unsharded); verify=True checks any size.
AUTO_LIMIT = 4_000_000
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
    one = dict(mesh, shape=[1] * len(mesh["shape"]))
    src_mesh, new_mesh = M.mesh_text(mesh), M.mesh_text(one)
    if src_mesh not in text:
        raise VerifyError(f"verify: the step has no '{src_mesh}'")
    step = os.path.join(workdir, "step.mlir")
    with open(step, "w") as f:
        f.write(text.replace(src_mesh, new_mesh, 1))
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
    params = dict(ref.named_parameters())
    for p in params.values():
        p.grad = None
    with eager_context():
        loss = loss_fn(ref, *local_batch)
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    out = {"loss": loss.detach()}
    for (n, p), g in zip(params.items(), grads):
        out[f"grad.{n}"] = torch.zeros_like(p) if g is None else g.detach()
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


def verify_step(text, model, module, loss_fn, local_batch, *, rtol=RTOL, keep=None):
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
        t = module.get_buffer(b["name"]).detach()
        inputs[b["name"]] = t.numpy().copy()
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
            raise VerifyError(
                f"verify: the imported step differs from torch eager (float32, unsharded, "
                f"rank 0's micro-batch): {worst} is {errors[worst]:.2e} off relative "
                f"(tolerance {rtol:g}); {len(bad)} of {len(errors)} results are off: "
                f"{listed}{more} (step and inputs kept in {tmp})"
            )
        failed = False
        return report
    finally:
        # Kept when the check fails, so that its step and inputs can be rerun.
        if not failed:
            shutil.rmtree(tmp, ignore_errors=True)

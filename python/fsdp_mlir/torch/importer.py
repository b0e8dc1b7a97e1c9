"""The traced step as MLIR: torch-mlir's import to linalg on tensors, and the
fsdp annotation of its signature, written through MLIR's Python bindings (the
ones torch-mlir ships) rather than by editing text.

export.py (which traces and exports) and verify.py (which checks the export)
both build on this module; neither imports the other's internals.
"""

from __future__ import annotations

import os
import re

import torch
import torch.fx.traceback as fx_traceback

from .. import model as M

FUNCTION = "step"

# Buffers of other dtypes (a bool causal mask, small integers, half
# precision) travel in a dtype that holds every value exactly and are
# converted back at the start of the step.
_BUFFER_CARRIERS = {
    torch.bool: torch.uint8,
    torch.int8: torch.int32,
    torch.int16: torch.int32,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
}


def buffer_carrier(dtype: torch.dtype) -> torch.dtype:
    """The dtype a buffer of `dtype` is a step argument in."""
    return _BUFFER_CARRIERS.get(dtype, dtype)


def buffer_argument(module: torch.nn.Module, name: str) -> torch.Tensor:
    """The value of buffer `name` as the step takes it (its carrier dtype)."""
    t = module.get_buffer(name).detach()
    return t.to(buffer_carrier(t.dtype))


class ExportError(ValueError):
    """The model, batch or options cannot be exported (the message says why)."""


class _ModulePaths:
    """Records the module path of every traced op through forward hooks, so
    errors and the step's locations can name the submodule an op came from:
    node.meta["nn_module_stack"] for the ops of a module's forward, and
    node.meta["custom"]["backward_of"] for the ops of its backward (each
    autograd node a module's forward creates runs its backward under the
    module's path)."""

    def __init__(self, module: torch.nn.Module):
        self.handles = []
        self.stack = []
        self.starts = []
        self.labelled = set()
        for path, mod in module.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._pre(path, mod)))
            self.handles.append(mod.register_forward_hook(self._post))

    def _set(self):
        meta = fx_traceback.get_current_meta()
        if self.stack:
            path, cls = self.stack[-1]
            meta["nn_module_stack"] = {path or "<root>": (path, cls)}
        else:
            meta.pop("nn_module_stack", None)

    def _pre(self, path, mod):
        cls = type(mod).__qualname__

        def hook(_mod, _args):
            self.stack.append((path, cls))
            self.starts.append(torch._C._autograd._get_sequence_nr())
            self._set()

        return hook

    def _post(self, _mod, _args, out):
        if self.stack:
            path, _ = self.stack.pop()
            self._label_backward(path, self.starts.pop(), out)
        self._set()

    def _label_backward(self, path: str, start: int, out):
        """The autograd nodes created since the module's forward began
        (sequence number from `start`) that lead to its outputs, not yet
        claimed by a submodule (whose forward ended first), run their
        backward under `path`."""
        leaves = torch.utils._pytree.tree_leaves(out)
        todo = [t.grad_fn for t in leaves if isinstance(t, torch.Tensor)]
        seen = set()
        while todo:
            node = todo.pop()
            if node is None or node in seen or node._sequence_nr() < start:
                continue
            seen.add(node)
            todo.extend(f for f, _ in node.next_functions)
            if node in self.labelled:
                continue
            self.labelled.add(node)
            self.handles.append(node.register_prehook(self._enter_backward(path)))
            self.handles.append(node.register_hook(self._leave_backward))

    @staticmethod
    def _enter_backward(path):
        def hook(_grad_outputs):
            meta = fx_traceback.get_current_meta()
            meta["custom"] = dict(meta.get("custom") or {}, backward_of=path)

        return hook

    @staticmethod
    def _leave_backward(_grad_inputs, _grad_outputs):
        meta = fx_traceback.get_current_meta()
        custom = dict(meta.get("custom") or {})
        custom.pop("backward_of", None)
        if custom:
            meta["custom"] = custom
        else:
            meta.pop("custom", None)

    def remove(self):
        for h in self.handles:
            h.remove()


def node_backward_of(node) -> str | None:
    """The module path whose backward the op belongs to (see _ModulePaths)."""
    return (node.meta.get("custom") or {}).get("backward_of")


_FRAME_RE = re.compile(r'File "([^"]+)", line ([0-9]+),')
_OWN_DIRS = tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in (torch.__file__, __file__))


def _user_frame(node):
    """(file, line) of the innermost frame of the op's stack trace outside
    torch and this frontend: the model's (or the loss function's) source
    line, or None."""
    frames = _FRAME_RE.findall(node.meta.get("stack_trace") or "")
    for file, line in reversed(frames):
        if not os.path.abspath(file).startswith(_OWN_DIRS):
            return file, int(line)
    return None


def node_location(node, context):
    """The MLIR location of a traced op: `"<module path>"("<aten op> at
    file:line")` for an op of a module's forward, `"<module path>
    (backward)"(...)` for one of its backward, `"<aten op> at file:line"`
    outside every module (the loss function); file:line is the user's source
    line when the trace has it. Names only: a file location inside them
    would be all that mlir's diagnostics print."""
    from torch_mlir import ir

    if node.op != "call_function":
        return ir.Location.unknown(context=context)
    frame = _user_frame(node)
    what = _op_name(node) + (f" at {frame[0]}:{frame[1]}" if frame else "")
    loc = ir.Location.name(what, context=context)
    path, back = node_module_path(node), node_backward_of(node)
    if path is not None:
        return ir.Location.name(path or "<root>", childLoc=loc, context=context)
    if back is not None:
        return ir.Location.name(f"{back or '<root>'} (backward)", childLoc=loc, context=context)
    return loc


def node_module_path(node) -> str | None:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path, _ = list(stack.values())[-1]
    return path


_TORCH_OP_RE = re.compile(r"torch\.((?:aten|prims|torchvision)\.[A-Za-z0-9_.]+)")
_UPSTREAM_DIALECTS = {
    "arith",
    "math",
    "linalg",
    "tensor",
    "func",
    "cf",
    "scf",
    "bufferization",
    "complex",
    "affine",
    "builtin",
    "ml_program",
}


def _op_name(node) -> str:
    target = node.target
    name = getattr(target, "__name__", str(target))
    if hasattr(target, "name") and callable(target.name):
        name = target.name().replace("::", ".")
    return name


def _where_ops(gm, op: str) -> list:
    """Where the nodes whose aten op is `op` (any overload) come from: module
    paths for ops of a module's forward, `the backward of <path>` for ops of
    its backward (_ModulePaths), else the backward of the module the forward
    op ran in (`x_backward` of `x`), else the loss / backward."""

    def base(name):
        return ".".join(name.split(".")[:2])

    def label(path):
        return "the root module" if path == "" else path

    found, backward, outside = [], [], False
    for node in gm.graph.nodes:
        if node.op == "call_function" and base(_op_name(node)) == base(op):
            path, back = node_module_path(node), node_backward_of(node)
            if path is not None:
                if label(path) not in found:
                    found.append(label(path))
            elif back is not None:
                if f"the backward of {label(back)}" not in backward:
                    backward.append(f"the backward of {label(back)}")
            else:
                outside = True
    found = found or backward  # the forward's modules first, where it has the op
    if found or not outside:
        return found
    if base(op).endswith("_backward"):
        fwd = base(op)[: -len("_backward")]
        fwd_paths = _where_ops(gm, fwd) or _where_ops(gm, fwd + "_with_indices")
        if fwd_paths and "the loss function or the backward pass" not in fwd_paths:
            return [f"the backward of {p}" for p in fwd_paths]
    return ["the loss function or the backward pass"]


def _unsupported(gm, op: str, detail: str) -> ExportError:
    paths = _where_ops(gm, op)
    where = f" in {', '.join(paths)}" if paths else ""
    return ExportError(f"unsupported op '{op}'{where}: {detail}")


STAGES = (
    (
        "builtin.module(func.func(torch-match-quantized-custom-ops),"
        " torchdynamo-export-to-torch-backend-pipeline)",
        "the torch backend",
    ),
    (
        "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline"
        "{allow-non-finites=true})",
        "linalg",
    ),
)


def torch_mlir_opt() -> str:
    """torch-mlir's own `torch-mlir-opt` (installed next to the interpreter)."""
    import shutil
    import sys

    here = os.path.join(os.path.dirname(sys.executable), "torch-mlir-opt")
    found = here if os.access(here, os.X_OK) else shutil.which("torch-mlir-opt")
    if not found:
        raise ExportError("torch-mlir-opt not found (pip install -r python/requirements-torch.txt)")
    return found


_LEGALIZE_RE = re.compile(
    r"failed to legalize operation "
    r"'(?:torch\.operator'.*?name = \"torch\.([\w.]+)\"|torch\.([\w.]+)')"
)
_CRASH_PATTERN_RE = re.compile(r"ConvertAten(\w+?)Op\b")


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


def _lower_failure(gm, stage: str, stderr: str, crashed: bool) -> ExportError:
    m = _LEGALIZE_RE.search(stderr)
    if m:
        op = m.group(1) or m.group(2)
        return _unsupported(gm, op, f"torch-mlir cannot lower it to {stage}")
    m = _CRASH_PATTERN_RE.search(stderr) if crashed else None
    if m:
        op = "aten." + _snake(m.group(1))
        return _unsupported(gm, op, f"torch-mlir crashed lowering it to {stage}")
    first = next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip()[:200])
    what = "crashed" if crashed else "failed"
    return ExportError(f"torch-mlir {what} lowering the step to {stage}: {first.strip()}")


def reproduce_command(opt: str, src: str, pipeline: str) -> str:
    """The shell command that reruns one torch-mlir-opt stage (as torch-mlir's
    compiler_utils prints it)."""
    import shlex

    return f"{shlex.quote(opt)} {shlex.quote(src)} --pass-pipeline={shlex.quote(pipeline)}"


def _outside_op(text: str):
    """(name, printed op) of the first op outside the upstream dialects, or None."""
    from torch_mlir import ir

    found = []

    def visit(op):
        name = op.name
        if name.split(".", 1)[0] not in _UPSTREAM_DIALECTS:
            found.append((name, str(op).splitlines()[0].strip()[:120]))
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    with _context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        module.operation.walk(visit)
    return found[0] if found else None


def _import_with_locations(gm) -> str:
    """torch-mlir's FX import (torch dialect), each op at node_location, as
    text with its locations."""
    from torch_mlir import fx as tfx
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import ContextCache, FxImporter

    class LocatedCache(ContextCache):
        __slots__ = ()

        def get_node_location(self, node):
            return node_location(node, self._c)

    context = ir.Context()
    torch_d.register_dialect(context)
    importer = FxImporter(context=context)
    # The importer asks its ContextCache for each node's location (the
    # default one builds file locations from the stack trace only).
    importer._cc = LocatedCache(context, py_attr_tracker=importer._py_attr_tracker)
    module = tfx.stateless_fx_import(
        gm, output_type="raw", fx_importer=importer, model_name=FUNCTION
    )
    return _print(module)


def _print(module) -> str:
    """The module's text with its locations (the step's diagnostics name the
    module path and the source line of the op they are about)."""
    return module.operation.get_asm(enable_debug_info=True)


def import_graph(gm, workdir: str | None = None) -> str:
    """torch-mlir import to linalg on tensors; MLIR text. The FX graph is
    imported in-process; the lowering runs in torch-mlir-opt, so that a failure
    (or a crash) becomes an error naming the op. When a stage fails, its input
    is kept (in a new directory under `workdir`, default the system's temporary
    directory) and the error ends with the command that reproduces it."""
    import shutil
    import subprocess
    import tempfile

    opt = torch_mlir_opt()
    try:
        text = _import_with_locations(gm)
    except Exception as err:  # the importer raises several types
        msg = str(err).strip()
        kept = tempfile.mkdtemp(prefix="fsdp-export-", dir=workdir)
        graph = os.path.join(kept, "graph.py")
        with open(graph, "w") as f:
            f.write(gm.print_readable(print_output=False))
        where = f" (the traced FX graph is kept in {graph})"
        m = _TORCH_OP_RE.search(msg)
        if m:
            raise _unsupported(gm, m.group(1), "torch-mlir cannot import it" + where) from None
        first = msg.splitlines()[0] if msg else repr(err)
        raise ExportError(f"torch-mlir import failed: {first}{where}") from None
    text, fsdp_calls = _fsdp_ops_to_calls(text)
    stages = STAGES
    if fsdp_calls:
        stages = STAGES[:-1] + ((_linalg_stage_without_contract(opt), STAGES[-1][1]),)
    tmp = tempfile.mkdtemp(prefix="fsdp-export-", dir=workdir)
    for i, (pipeline, stage) in enumerate(stages):
        src = os.path.join(tmp, f"stage{i}.mlir")
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run(
            [opt, src, f"--pass-pipeline={pipeline}", "--mlir-print-debuginfo"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            crashed = proc.returncode < 0 or proc.returncode > 128
            err = _lower_failure(gm, stage, proc.stderr, crashed)
            log = os.path.join(tmp, f"stage{i}.stderr")
            with open(log, "w") as f:
                f.write(proc.stderr)
            raise ExportError(
                f"{err}\n  the input of this stage is kept; reproduce with:\n"
                f"  {reproduce_command(opt, src, pipeline)}\n"
                f"  (add --mlir-print-ir-after-all --mlir-disable-threading for the IR after "
                f"each pass; torch-mlir-opt's full output is in {log})"
            ) from None
        text = proc.stdout
    outside = _outside_op(text)
    if outside is not None:
        op, where = outside
        raise ExportError(
            f"the import produced '{op}', which is outside the upstream MLIR dialects: "
            f"{where}\n  the input of the last stage is kept; reproduce with:\n"
            f"  {reproduce_command(opt, src, pipeline)}"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    return _calls_to_fsdp_ops(text, fsdp_calls)


# The frontend's own operators (experts.OPS) as torch-mlir imports them.
_FSDP_OPERATOR_RE = re.compile(
    r'torch\.operator "(?P<name>torch\.fsdp\.\w+)"\((?P<args>[^)]*)\)\s*:\s*'
    r"\((?P<types>.*)\)\s*->\s*(?P<result>\S+)(?P<loc>\s+loc\(.*\))?\s*$"
)
_FSDP_CALL_RE = re.compile(
    r"^(?P<lhs>\s*%[\w#]+\s*=\s*)(?:func\.)?call @(?P<callee>fsdp_op_\d+)\((?P<rest>.*)$"
)


def _split_top(text: str) -> list:
    """`text` split at the commas outside brackets (operand and type lists,
    whose types hold commas of their own)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text.strip():
        parts.append(text[start:].strip())
    return parts


def _bool_constant(text: str, name: str, op: str) -> bool:
    """The value of the `torch.constant.bool` named `name` (an operand of the
    frontend's operator `op`)."""
    m = re.search(
        rf"^\s*{re.escape(name)} = torch\.constant\.bool (true|false)(?:\s+loc\(.*\))?\s*$",
        text,
        re.M,
    )
    if not m:
        raise ExportError(f"torch-mlir import: {op} takes a constant flag, got {name}")
    return m.group(1) == "true"


def _fsdp_ops_to_calls(text: str):
    """The frontend's operators (MoE experts' grouped products, the router's
    topk) have no torch-mlir lowering: each becomes a call of a private
    declaration, which torch-mlir converts to builtin tensor types like any
    call, and which `_calls_to_fsdp_ops` turns into the fsdp op after the
    lowering. Trailing boolean constants (experts.FLAGS) become the op's
    unit attributes, with those it always has (experts.ATTRS). Returns the
    text and {callee: (fsdp op name, attributes)}."""
    from .experts import ATTRS, FLAGS, OPS

    calls, decls, lines = {}, [], text.splitlines()
    for i, line in enumerate(lines):
        m = _FSDP_OPERATOR_RE.search(line)
        if not m:
            continue
        name = m.group("name")
        if name not in OPS:
            raise ExportError(f"torch-mlir import: unknown fsdp operator {name}")
        args, types = m.group("args"), m.group("types")
        flags, on = FLAGS.get(name, ()), list(ATTRS.get(name, ()))
        if flags:
            arg_list, type_list = _split_top(args), _split_top(types)
            values = arg_list[len(arg_list) - len(flags) :]
            on += [f for f, v in zip(flags, values) if _bool_constant(text, v, name)]
            args = ", ".join(arg_list[: len(arg_list) - len(flags)])
            types = ", ".join(type_list[: len(type_list) - len(flags)])
        attrs = " {" + ", ".join(on) + "}" if on else ""
        callee = f"fsdp_op_{len(calls)}"
        calls[callee] = (OPS[name], attrs)
        sig = f"({types}) -> {m.group('result')}"
        lines[i] = line[: m.start()] + f"func.call @{callee}({args}) : {sig}{m.group('loc') or ''}"
        decls.append(f"  func.func private @{callee}{sig}")
    if not calls:
        return text, calls
    at = next(i for i, ln in enumerate(lines) if re.match(r"^module\b.*\{\s*$", ln))
    lines[at + 1 : at + 1] = decls
    return "\n".join(lines) + "\n", calls


def _calls_to_fsdp_ops(text: str, calls: dict) -> str:
    """Each call `_fsdp_ops_to_calls` made, now on builtin tensors, as its
    fsdp op (generic form, the call's operands and types, the op's
    attributes); the declarations are dropped."""
    if not calls:
        return text
    out = []
    for line in text.splitlines():
        if re.match(r"^\s*func\.func private @fsdp_op_\d+\b", line):
            continue
        m = _FSDP_CALL_RE.match(line)
        if m and m.group("callee") in calls:
            op, attrs = calls[m.group("callee")]
            operands, sep, rest = m.group("rest").partition(")")
            line = f'{m.group("lhs")}"{op}"({operands}{sep}{attrs}{rest}'
        elif "@fsdp_op_" in line:
            raise ExportError(f"torch-mlir output: unexpected use of an fsdp operator: {line}")
        out.append(line)
    return "\n".join(out) + "\n"


def _linalg_stage_without_contract(opt: str) -> str:
    """The linalg stage's pipeline without its last pass, the check of the
    linalg-on-tensors contract, which refuses calls of declarations. The
    export checks instead that nothing outside the upstream dialects
    remains (and the fsdp ops come back after the stage)."""
    import subprocess

    spec = STAGES[-1][0]
    proc = subprocess.run(
        [opt, "-", f"--pass-pipeline={spec}", "--dump-pass-pipeline"],
        input="module {}\n",
        capture_output=True,
        text=True,
    )
    lines = proc.stderr.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "builtin.module("), None)
    if start is None:
        raise ExportError(f"{opt} --dump-pass-pipeline printed no pipeline:\n{proc.stderr}")
    pipeline, depth = "", 0
    for ln in lines[start:]:
        pipeline += ln.strip()
        depth += ln.count("(") - ln.count(")")
        if depth == 0:
            break
    contract = ",torch-verify-linalg-on-tensors-backend-contract"
    if contract not in pipeline:
        raise ExportError(f"{opt}: the linalg stage has no {contract[1:]} pass to leave out")
    return pipeline.replace(contract, "")


# ---------------------------------------------------------------- annotate


def guard_message(g: dict) -> str:
    """The run-time error of a guard that fails (see ScalarReads)."""
    source = f" ({g['source']})" if g.get("source") else ""
    return (
        f"guard failed: {g['op']} in {g['module']}{source} read {g['value']!r} on the "
        "example batch, and the step was specialized on that value; this batch gives another "
        "value, for which the step would compute something else. Export the step with a batch "
        "that gives this value, or write the forward without reading the tensor."
    )


def _context():
    """An MLIR context of torch-mlir's bindings that accepts the fsdp dialect
    (not registered there): `#fsdp.layout` attributes stay opaque and the
    mesh is written in the generic form, which fsdp-opt parses as usual."""
    from torch_mlir import ir

    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx


def _step_function(module):
    from torch_mlir import ir

    for op in module.body.operations:
        if op.operation.name == "func.func" and (
            ir.StringAttr(op.attributes["sym_name"]).value == FUNCTION
        ):
            return op
    raise ExportError(f"torch-mlir output has no func.func @{FUNCTION}")


def _guards_to_asserts(fn, model: dict) -> list:
    """The guards (boolean results after the loss, gradients and buffers,
    before verify's probes) leave the signature and the return: each becomes
    `cf.assert` of its value with its message, which fsdp-opt lowers to the
    runtime's failed-guard entry point (the step records the error and
    fsdp-run reports it). Returns the result types left."""
    from torch_mlir import ir
    from torch_mlir.dialects import cf, tensor
    from torch_mlir.dialects import func as func_d

    guards = model["guards"]
    first = sum(1 for r in model["results"] if r["kind"] != "probe")
    at = range(first, first + len(guards))
    block = fn.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    if ret.operation.name != "func.return":
        raise ExportError(f"torch-mlir output: @{FUNCTION} does not end in a return")
    values = list(ret.operands)
    res_types = list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)
    if len(values) != len(res_types) or at.stop > len(values):
        raise ExportError(f"torch-mlir output: @{FUNCTION}'s return does not match its results")
    i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
    with ir.InsertionPoint(ret):
        for k, (g, i) in enumerate(zip(guards, at)):
            if values[i].type != i1:
                raise ExportError(
                    f"torch-mlir output: guard {k} is {values[i].type}, expected tensor<i1>"
                )
            flag = tensor.ExtractOp(values[i], [])
            cf.AssertOp(flag.result, guard_message(g))
        keep = [i for i in range(len(values)) if i not in at]
        func_d.ReturnOp([values[i] for i in keep])
    ret.operation.erase()
    return [res_types[i] for i in keep]


def _result_attrs(r: dict) -> str:
    if r["kind"] == "loss":
        return M.port_attrs(r["name"], loss=True)
    if r["kind"] == "buffer":  # an updated buffer: the next value of its argument
        return M.port_attrs(r["name"], update_of=r["update_of"])
    if r["kind"] == "probe":  # verify's intermediate values: plain results
        return M.port_attrs(r["name"])
    return M.port_attrs(r["name"], grad_of=r["grad_of"])


def _arg_attrs(model: dict) -> list:
    """Every argument's fsdp attribute dictionary (as text): a parameter's
    name, layout and unit; a buffer's name, and a replicated layout unless
    the step updates it (then it is rank-local, without a layout, like the
    batch); a batch input's name."""
    buffer_at = {b["arg"]: b for b in model.get("buffers", [])}
    n_params = len(model["params"])
    out = []
    for i, name in enumerate(model["args"]):
        if i in buffer_at:
            b = buffer_at[i]
            layout = None if b["layout"] is None else b["layout_attr"]
            out.append(M.port_attrs(b["name"], layout=layout))
        elif i < n_params:
            p = model["params"][i]
            out.append(M.port_attrs(name, layout=p["layout_attr"], unit=p["unit"]))
        else:
            out.append(M.port_attrs(name))
    return out


def _set_mesh(module, mesh: dict):
    """Puts `fsdp.mesh` first in the module, replacing one of the same name."""
    from torch_mlir import ir

    for op in list(module.body.operations):
        if op.operation.name == "fsdp.mesh":
            op.operation.erase()
    attrs = {
        "sym_name": ir.StringAttr.get(mesh["name"]),
        "axis_names": ir.ArrayAttr.get([ir.StringAttr.get(a) for a in mesh["axes"]]),
        "axis_sizes": ir.DenseI64ArrayAttr.get([int(s) for s in mesh["shape"]]),
    }
    first = module.body.operations[0] if len(module.body.operations) else None
    point = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(module.body)
    with point:
        ir.Operation.create("fsdp.mesh", attributes=attrs)


def annotate(text: str, model: dict) -> str:
    """Adds the mesh and the fsdp attributes to torch-mlir's `@step` (the
    attribute dictionaries are model.port_attrs', parsed by MLIR)."""
    from torch_mlir import ir

    with _context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except Exception as err:  # MLIRError, with the diagnostics
            raise ExportError(f"torch-mlir output does not parse: {err}") from None
        fn = _step_function(module)
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        arg_types, res_types = list(ftype.inputs), list(ftype.results)
        if model.get("guards"):
            res_types = _guards_to_asserts(fn, model)
        if len(arg_types) != len(model["args"]) or len(res_types) != len(model["results"]):
            raise ExportError(
                f"torch-mlir's @{FUNCTION} has {len(arg_types)} arguments and {len(res_types)} "
                f"results; expected {len(model['args'])} and {len(model['results'])}"
            )
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, res_types))
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [ir.Attribute.parse(a) for a in _arg_attrs(model)]
        )
        fn.attributes["res_attrs"] = ir.ArrayAttr.get(
            [ir.Attribute.parse(_result_attrs(r)) for r in model["results"]]
        )
        _set_mesh(module, model["mesh"])
        return _print(module)


def with_mesh_shape(text: str, mesh: dict, shape) -> str:
    """The annotated step with its mesh's axis sizes replaced by `shape`
    (verify runs it unsharded on a mesh of ones)."""
    from torch_mlir import ir

    with _context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        if not any(op.operation.name == "fsdp.mesh" for op in module.body.operations):
            raise ExportError(f"the step has no fsdp.mesh @{mesh['name']}")
        _set_mesh(module, dict(mesh, shape=list(shape)))
        return _print(module)

"""Execute a generated step with upstream MLIR tools only (no fsdp pass).

The step is a per-rank program, so it can be checked without the project's
passes: drop the fsdp bits (the mesh op and the fsdp.* attributes), lower with
upstream mlir-opt to the LLVM dialect (the compiler's lowering pipeline, which
fsdp-opt prints), translate, compile to a shared object,
and call `_mlir_ciface_<func>` through ctypes. Running it once per rank on that
rank's micro-batch and averaging over ranks gives what the sharded program must
produce (the gradient of the global mean loss), so the outputs can be compared
with the numpy reference by `fsdp_mlir.dev.check`.

    python -m fsdp_mlir.dev.upstream_exec model.mlir --data DATA --out OUT
    python -m fsdp_mlir.dev.check DATA OUT
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from .. import model as M

DEFAULT_TOOLS_DIR = "/usr/lib/llvm-22/bin"

# The lowering to the LLVM dialect is the compiler's (`fsdp-lower-to-llvm`,
# printed by fsdp-opt); see lowering_pipeline(). Upstream mlir-opt has none
# of the project's own passes (`fsdp-*`, `convert-fsdp-to-runtime`), so they
# are dropped from it. None changes what an f32 step without collectives
# computes beyond the rounding order: fsdp-lower-ifs only makes
# convert-scf-to-cf's work linear; without fsdp-one-hot-scatter a one-hot
# product stays a matrix product (the same sums, with the zero terms);
# without fsdp-reduction-loops a reduction sums element after element instead
# of in blocks (the same terms, rounded in another order); without
# fsdp-expand-powers a constant power stays llvm.powi (the same products) or
# a libm powf call (rounded once); the others rewrite ops such a step has
# none of (grouped products, topk, bf16 conversions), order constant globals
# or add attributes for the runner. A pass that did change the values would
# show as a mismatch against the compiler's own run, which the tests compare.
PROJECT_PASS = re.compile(r"(?:convert-)?fsdp-[\w-]+")


class ToolError(RuntimeError):
    """An external tool is missing or failed (message has its stderr)."""


# --------------------------------------------------------------- rewriting

_MESH_LINE = re.compile(r'^\s*(fsdp\.mesh\b|"fsdp\.mesh"\s*\().*\n?', re.M)
_OPEN = "([{<"
_CLOSE = ")]}>"


def _match_close(text: str, i: int) -> int:
    """Index of the bracket closing text[i], skipping strings and `->`."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE and not (c == ">" and i > 0 and text[i - 1] == "-"):
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced brackets in MLIR text")


def _split_top(text: str):
    """Split at commas not nested in brackets or strings."""
    parts, start, i = [], 0, 0
    while i < len(text):
        c = text[i]
        if c in _OPEN:
            i = _match_close(text, i)
        elif c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == ",":
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _without_fsdp(entries):
    return [e for e in entries if not re.match(r"fsdp\.", e)]


_ATTR_DICT_AT_TOP = re.compile(r"\{[ \t]*fsdp\.[\w.]*\s*(=|,|\})")


def strip_fsdp(text: str, func: str = "step", c_interface: bool = True) -> str:
    """Remove `fsdp.mesh` ops and fsdp.* argument/result attributes of `func`;
    optionally add `llvm.emit_c_interface` to it."""
    text = _MESH_LINE.sub("", text)
    m = re.search(r"func\.func\s+(?:\w+\s+)?@" + re.escape(func) + r"\s*\(", text)
    if not m:
        raise ValueError(f"no func.func @{func} in the module")
    out = [text[: m.end() - 1]]
    i, depth = m.end() - 1, 0
    attributes_added = False
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "<":
            j = _match_close(text, i)
            out.append(text[i : j + 1])
            i = j + 1
            continue
        elif c == "{":
            j = _match_close(text, i)
            before = "".join(out).rstrip()
            is_func_attrs = depth == 0 and before.endswith("attributes")
            is_attr_dict = depth > 0 or _ATTR_DICT_AT_TOP.match(text, i)
            if is_func_attrs:
                entries = _without_fsdp(_split_top(text[i + 1 : j]))
                if c_interface and "llvm.emit_c_interface" not in entries:
                    entries.append("llvm.emit_c_interface")
                attributes_added = True
                out.append("{" + ", ".join(entries) + "}")
                i = j + 1
                continue
            if is_attr_dict:
                entries = _without_fsdp(_split_top(text[i + 1 : j]))
                if entries:
                    out.append("{" + ", ".join(entries) + "}")
                else:  # drop the dict and the space before it
                    out = [before]
                i = j + 1
                continue
            # The function body.
            if c_interface and not attributes_added:
                out = [before + " attributes {llvm.emit_c_interface} "]
            out.append(text[i:])
            return "".join(out)
        out.append(c)
        i += 1
    raise ValueError(f"func.func @{func} has no body")


def generic_mesh_form(text: str) -> str:
    """Rewrite `fsdp.mesh @m [a = 2, b = 4]` into the generic op form, which
    upstream mlir-opt accepts with --allow-unregistered-dialect."""

    def repl(m):
        name, body = m.group(2), m.group(3)
        axes = [a.split("=") for a in body.split(",")]
        names = ", ".join(f'"{a.strip()}"' for a, _ in axes)
        sizes = ", ".join(s.strip() for _, s in axes)
        return (
            f'{m.group(1)}"fsdp.mesh"() {{sym_name = "{name}", axis_names = [{names}],'
            f" axis_sizes = array<i64: {sizes}>}} : () -> ()"
        )

    return re.sub(r"^(\s*)fsdp\.mesh\s+@([\w$.-]+)\s*\[([^\]]*)\]", repl, text, flags=re.M)


# --------------------------------------------------------------- compiling


def find_tool(name: str) -> str | None:
    for d in (
        os.environ.get("FSDP_MLIR_TOOLS_DIR"),
        os.environ.get("LLVM_TOOLS_DIR"),  # set by the project's ctest hook
        DEFAULT_TOOLS_DIR,
    ):
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return shutil.which(name) or shutil.which(f"{name}-22")


def find_fsdp_opt() -> str | None:
    """The project's fsdp-opt: FSDP_TOOLS_DIR (set by the ctest hook), the
    repository's build/bin, or PATH."""
    repo_bin = os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "bin")
    for d in (os.environ.get("FSDP_TOOLS_DIR"), repo_bin):
        if d and os.access(os.path.join(d, "fsdp-opt"), os.X_OK):
            return os.path.abspath(os.path.join(d, "fsdp-opt"))
    return shutil.which("fsdp-opt")


_PIPELINE = {}


def lowering_pipeline() -> str:
    """The compiler's lowering to the LLVM dialect as a --pass-pipeline for
    upstream mlir-opt: fsdp-opt prints its `fsdp-lower-to-llvm` pipeline, and
    the project's own passes are dropped (a stripped step has no
    collectives), so the pipeline is written once, in the compiler."""
    if "text" not in _PIPELINE:
        fsdp_opt = find_fsdp_opt()
        if not fsdp_opt:
            raise ToolError("fsdp-opt not found (it prints the lowering pipeline)")
        proc = subprocess.run(
            # The scalar reference (compute=loops): no BLAS calls to link;
            # malloc/free (arena=false): no runtime to hand out an arena.
            [
                fsdp_opt,
                "--fsdp-lower-to-llvm=compute=loops arena=false",
                "--dump-pass-pipeline",
                "-o",
                os.devnull,
            ],
            input="",
            capture_output=True,
            text=True,
            check=False,
        )
        lines = proc.stderr.splitlines()
        if proc.returncode != 0 or not lines or not lines[0].startswith("Pass Manager"):
            raise ToolError(f"{fsdp_opt} did not print its pipeline:\n{proc.stderr}")
        # One pass or option list per line: joining the stripped lines gives
        # the textual pipeline.
        text = "".join(line.strip() for line in lines[1:])
        text = re.sub(rf"(?<=[(,]){PROJECT_PASS.pattern}(\{{[^}}]*\}})?(,|(?=\)))", "", text)
        # A nest left empty (func.func() of a function pass) is no pipeline.
        text = re.sub(r"(?<=[(,])func\.func\(\)(,|(?=\)))", "", text)
        _PIPELINE["text"] = text
    return _PIPELINE["text"]


def find_c_compiler() -> str | None:
    cc = os.environ.get("CC")
    return shutil.which(cc) if cc else (shutil.which("gcc") or shutil.which("cc"))


def missing_tools() -> list:
    missing = [t for t in ("mlir-opt", "mlir-translate", "llc") if not find_tool(t)]
    if not find_fsdp_opt():
        missing.append("fsdp-opt")
    if not find_c_compiler():
        missing.append("C compiler (gcc/cc)")
    return missing


def _run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def compile_step(mlir_text: str, workdir: str, func: str = "step") -> str:
    """Lower a generated step (fsdp bits are stripped here) to a shared object."""
    missing = missing_tools()
    if missing:
        raise ToolError("missing tools: " + ", ".join(missing))
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "step.mlir")
    with open(src, "w") as f:
        f.write(strip_fsdp(mlir_text, func))
    llvm_mlir = os.path.join(workdir, "step.llvm.mlir")
    ll = os.path.join(workdir, "step.ll")
    obj = os.path.join(workdir, "step.o")
    so = os.path.join(workdir, "step.so")
    _run([find_tool("mlir-opt"), src, f"--pass-pipeline={lowering_pipeline()}", "-o", llvm_mlir])
    _run([find_tool("mlir-translate"), "--mlir-to-llvmir", llvm_mlir, "-o", ll])
    _run([find_tool("llc"), "-O2", "-relocation-model=pic", "-filetype=obj", ll, "-o", obj])
    # -Bsymbolic: the wrapper must call this library's `step`, not glibc's
    # legacy regexp function of the same name, which is earlier in the scope.
    _run([find_c_compiler(), "-shared", "-Wl,-Bsymbolic", obj, "-o", so, "-lm"])
    return so


_DESCRIPTORS = {}


def memref_descriptor(rank: int):
    """ctypes struct of a ranked memref: {allocated, aligned, offset, sizes, strides}."""
    if rank not in _DESCRIPTORS:
        fields = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
        ]
        if rank:
            fields += [
                ("sizes", ctypes.c_int64 * rank),
                ("strides", ctypes.c_int64 * rank),
            ]
        _DESCRIPTORS[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return _DESCRIPTORS[rank]


_STORAGE = {"f32": np.float32, "bf16": np.uint16}
_POISON = 0xDEADBEEF  # allocated pointer of memrefs backed by globals


class UpstreamStep:
    """A compiled step callable on numpy arrays in storage dtypes."""

    def __init__(self, so_path: str, func: str, arg_specs, result_specs):
        """arg_specs / result_specs: lists of (shape, dtype name)."""
        self._lib = ctypes.CDLL(so_path)
        self._fn = getattr(self._lib, f"_mlir_ciface_{func}")
        self.arg_specs = [(tuple(s), d) for s, d in arg_specs]
        self.result_specs = [(tuple(s), d) for s, d in result_specs]
        self._results_t = type(
            "Results",
            (ctypes.Structure,),
            {
                "_fields_": [
                    (f"r{i}", memref_descriptor(len(s)))
                    for i, (s, _) in enumerate(self.result_specs)
                ]
            },
        )
        self._fn.argtypes = [ctypes.POINTER(self._results_t)] + [
            ctypes.POINTER(memref_descriptor(len(s))) for s, _ in self.arg_specs
        ]
        self._fn.restype = None
        self._free = ctypes.CDLL(None).free
        self._free.argtypes = [ctypes.c_void_p]

    @staticmethod
    def _describe(a: np.ndarray):
        d = memref_descriptor(a.ndim)()
        ptr = a.ctypes.data
        d.allocated = d.aligned = ptr
        d.offset = 0
        for k in range(a.ndim):
            d.sizes[k] = a.shape[k]
            d.strides[k] = a.strides[k] // a.itemsize
        return d

    def __call__(self, *arrays):
        if len(arrays) != len(self.arg_specs):
            raise ValueError(f"expected {len(self.arg_specs)} arguments, got {len(arrays)}")
        keep, descs = [], []
        for a, (shape, dtype) in zip(arrays, self.arg_specs):
            a = np.asarray(a, dtype=_STORAGE[dtype], order="C")
            if a.shape != shape:
                raise ValueError(f"argument shape {a.shape}, expected {shape}")
            keep.append(a)
            descs.append(self._describe(a))
        results = self._results_t()
        self._fn(ctypes.byref(results), *[ctypes.byref(d) for d in descs])
        inputs = {a.ctypes.data for a in keep}
        out, freed = [], set()
        for i, (shape, dtype) in enumerate(self.result_specs):
            d = getattr(results, f"r{i}")
            np_t = np.dtype(_STORAGE[dtype])
            count = int(np.prod(shape))
            if shape:
                sizes = tuple(d.sizes[k] for k in range(len(shape)))
                strides = tuple(d.strides[k] for k in range(len(shape)))
                expect = tuple(int(np.prod(shape[k + 1 :])) for k in range(len(shape)))
                if sizes != shape or strides != expect:
                    raise ToolError(f"result {i}: sizes {sizes} strides {strides}")
            addr = d.aligned + d.offset * np_t.itemsize
            buf = (ctypes.c_char * (count * np_t.itemsize)).from_address(addr)
            out.append(np.frombuffer(bytes(buf), dtype=np_t).reshape(shape))
            if d.allocated and d.allocated not in inputs | freed | {_POISON}:
                freed.add(d.allocated)
        for p in freed:
            self._free(p)
        return out


def load_step(model: dict, so_path: str) -> UpstreamStep:
    args = []
    for name in model["args"]:
        entry = next(e for e in model["params"] + model["data"] if e["name"] == name)
        args.append((entry.get("local_shape", entry["shape"]), entry["dtype"]))
    results = [(r["shape"], r["dtype"]) for r in model["results"]]
    return UpstreamStep(so_path, model["function"], args, results)


def run_rank(step: UpstreamStep, model: dict, local_values: dict) -> dict:
    """One rank's step on float64 values; returns result name -> float64."""
    entries = {e["name"]: e for e in model["params"] + model["data"]}
    arrays = [M.to_storage(local_values[name], entries[name]["dtype"]) for name in model["args"]]
    outs = step(*arrays)
    return {r["name"]: M.from_storage(o, r["dtype"]) for r, o in zip(model["results"], outs)}


def run_data_parallel(model: dict, values: dict, step: UpstreamStep) -> dict:
    """Run every rank on its micro-batch and average over ranks (the avg
    reduction the compiled program performs): global mean loss and its
    gradients, float64, keyed by result name."""
    total = None
    for rank in range(model["world"]):
        res = run_rank(step, model, M.rank_slice(model, values, rank))
        total = res if total is None else {k: total[k] + res[k] for k in total}
    return {k: v / model["world"] for k, v in total.items()}


def write_results(model: dict, results: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for r in model["results"]:
        np.save(
            os.path.join(out_dir, r["name"] + ".npy"),
            M.to_storage(results[r["name"]], r["dtype"]),
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.dev.upstream_exec",
        description="Run a generated step with upstream MLIR tools on every rank's "
        "micro-batch; write the rank-averaged loss and gradients.",
    )
    ap.add_argument("mlir", help="generated model (.mlir)")
    ap.add_argument("--data", required=True, help="directory written by fsdp_mlir.dev.gen --data")
    ap.add_argument("--out", required=True, help="directory for <result name>.npy")
    ap.add_argument("--workdir", help="keep intermediate files here (default: temporary)")
    args = ap.parse_args(argv)
    try:
        model = M.load_model(args.data)
        values = M.load_inputs(model, args.data)
        with open(args.mlir) as f:
            text = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            so = compile_step(text, args.workdir or tmp, model["function"])
            results = run_data_parallel(model, values, load_step(model, so))
    except (M.ModelError, ToolError, ValueError) as err:
        print(f"fsdp_mlir.dev.upstream_exec: error: {err}", file=sys.stderr)
        return 2
    write_results(model, results, args.out)
    print(f"wrote {len(results)} results for {model['world']} ranks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

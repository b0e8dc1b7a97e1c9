"""Run a step compiled ahead of time by fsdp-compile, in this process.

A step library (``fsdp-compile step.mlir -o step.so``) holds the step's code
and a JSON manifest in its ``.fsdp.manifest`` section. It runs through
libfsdprun's C API (``fsdp_mlir.runner``, the same runner as for a lowered
module and as ``fsdp-run``), which links no LLVM and builds from runtime/
alone with CMake (docs/RUNTIME.md), on machines without LLVM. This is the
command line the GPU check drives (standard library only, no numpy).

    python -m fsdp_mlir.aot run step.so --runtime build/lib/libfsdprt.so \\
        --inputs data --outputs out --steps 3 --report report.json
    python -m fsdp_mlir.aot manifest step.so
    python -m fsdp_mlir.aot compare out reference --rtol 1e-5

``run`` loads the runtime ``--runtime`` (the emulated runtime, one built
from runtime/ alone) and the runner library beside it (``--runner``, else as
``fsdp_mlir.runner`` finds it), runs the steps, writes the results as
``fsdp-run --outputs`` does and a JSON report of load and step times. A GPU
step that finds no usable GPU stops with exit status 77 (``EXIT_NO_GPU``)
and the runner's reason, which the GPU check reports as skipped.
docs/AOT.md.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import math
import os
import struct
import sys
from array import array
from pathlib import Path

from fsdp_mlir import runner as _runner

MANIFEST_SECTION = ".fsdp.manifest"
MANIFEST_VERSION = 2


class AotError(Exception):
    """A step library that cannot run here, or inputs that do not fit it."""


class NoGpuError(AotError):
    """A GPU step where the runtime finds no usable GPU (or no NCCL)."""


# Exit status of ``run`` for NoGpuError (automake's "skipped").
EXIT_NO_GPU = 77


# --- The manifest, read from the ELF file without loading it ---


def elf_section_range(data: bytes, wanted: str, path: str = "") -> tuple[int, int] | None:
    """(file offset, size) of section ``wanted`` of an ELF64 little-endian
    image."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise AotError(f"{path} is not a step library (not an ELF64 file)")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        name = struct.unpack_from("<I", data, base)[0]
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    try:
        _, stroff, _ = header(shstrndx)
        for i in range(shnum):
            name, offset, size = header(i)
            end = data.index(b"\0", stroff + name)
            if data[stroff + name : end] == wanted.encode():
                return offset, size
    except (struct.error, ValueError):
        raise AotError(f"{path} is not a step library (bad ELF section headers)") from None
    return None


def read_manifest(path: str) -> dict:
    """The checked manifest of a step library."""
    data = Path(path).read_bytes()
    where = elf_section_range(data, MANIFEST_SECTION, path)
    if where is None:
        raise AotError(
            f"{path} is not a step library (no {MANIFEST_SECTION} section; "
            "build one with fsdp-compile)"
        )
    try:
        raw = data[where[0] : where[0] + where[1]]
        manifest = json.loads(raw.split(b"\0", 1)[0].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AotError(f"{path}: corrupt manifest: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "fsdp-step":
        raise AotError(f"{path}: corrupt manifest: not an fsdp-step manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise AotError(
            f"{path}: manifest version {manifest.get('version')}, this runner "
            f"reads version {MANIFEST_VERSION}"
        )
    return manifest


def gpu_info(manifest: dict, path: str) -> dict | None:
    """The manifest's ``gpu`` entry ({"tf32": bool, "emulation": bool}) of a
    GPU step, None for a host step (no ``gpu`` key, as the runner reads it)."""
    info = manifest.get("gpu")
    if isinstance(info, dict):
        return {
            "tf32": bool(info.get("tf32", False)),
            "emulation": bool(info.get("emulation", False)),
        }
    if info is not None:
        raise AotError(f"{path}: corrupt manifest: 'gpu' is not an object")
    return None


# --- .npy files (C order, little-endian; no numpy needed) ---


def read_npy(path: str) -> tuple[str, list[int], bytes]:
    data = Path(path).read_bytes()
    if data[:6] != b"\x93NUMPY":
        raise AotError(f"{path} is not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,), start = struct.unpack_from("<H", data, 8), 10
    else:
        (hlen,), start = struct.unpack_from("<I", data, 8), 12
    header = ast.literal_eval(data[start : start + hlen].decode("latin1"))
    if header.get("fortran_order"):
        raise AotError(f"{path}: Fortran-order arrays are not supported")
    descr = header["descr"]
    return descr, list(header["shape"]), data[start + hlen :]


def write_npy(path: str, descr: str, shape: list[int], data: bytes) -> None:
    # The spelling fsdp-run writes, so that equal arrays give equal files.
    dims = ",".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(data)
    os.replace(tmp, path)


# --- Running: libfsdprun's C API (fsdp_mlir.runner) ---

# What the runner says when a GPU step cannot run on this machine.
_NO_GPU = ("this machine cannot run it", "was built without the GPU runtime")


def _flush_c_stdio() -> None:
    """Writes out what the step printed with C's stdio before Python prints
    (both buffer a pipe)."""
    ctypes.CDLL(None).fflush(None)


def run_step(
    path: str, inputs: list[str], outputs: str, steps: int = 1,
    runtime_path: str | None = None, entry_name: str | None = None,
    timeout: float = 60.0, runner: str | None = None,
) -> dict:  # fmt: skip
    """Runs the step library and writes its results; returns the report
    (fsdp-run's --json object, with the keys the GPU check reads).
    `runner`: the libfsdprun.so to run with (default: fsdp_mlir.runner's)."""
    manifest = read_manifest(path)
    gpu = gpu_info(manifest, path)
    runtime_path = runtime_path or os.environ.get("FSDP_RUNTIME_LIBRARY")
    if runtime_path and not Path(runtime_path).is_file():
        raise AotError(
            f"cannot load the runtime libfsdprt.so (--runtime PATH or "
            f"FSDP_RUNTIME_LIBRARY): {runtime_path} does not exist"
        )
    sys.stdout.flush()
    try:
        _runner.load(runtime_path, runner)
        with _runner.Program(path, entry=entry_name, timeout=timeout) as prog:
            try:
                prog.run(steps, input_dir=list(inputs), outputs=False)
            finally:
                _flush_c_stdio()
            prog.write_outputs(outputs)
            report, world = prog.report(), prog.world_size
    except _runner.RunnerError as e:
        if gpu is not None and any(s in e.message for s in _NO_GPU):
            raise NoGpuError(e.message) from None
        raise AotError(e.message) from None
    finally:
        _flush_c_stdio()
    entries = [e["name"] for e in manifest.get("entries", [])]
    ranks = report.get("comm", [])
    report.update(
        library=path,
        runner_library=_runner.loaded()[0],
        runtime_library=_runner.loaded()[1],
        entry=entry_name or (entries[0] if entries else ""),
        world=world,
        device="gpu" if gpu is not None else "cpu",
        gpu=gpu,
        gpus=len(set(report.get("devices", []))),
        # Rank 0's collectives per step (the runtime's counters).
        comm_per_step={k: v / steps for k, v in ranks[0].items()} if ranks else {},
        load_s=report["parse_s"] + report["jit_s"],
        median_step_s=report["step_median_s"],
        min_step_s=report["step_min_s"],
    )
    return report


# --- Comparing result directories (fp32 / fp64 / bf16 within a relative tolerance) ---


def _values(descr: str, data: bytes) -> list[float] | bytes:
    if descr == "<f4":
        return array("f", data).tolist()
    if descr == "<f8":
        return array("d", data).tolist()
    if descr == "<u2":  # bf16 bits
        halves = array("H", data)
        return array("f", b"".join(struct.pack("<I", h << 16) for h in halves)).tolist()
    return data


def _compare_numpy(name, descr, got: bytes, want: bytes, rtol, atol, metric) -> list[str] | None:
    """compare_dirs' rules for one float file with numpy; None without
    numpy (or for other dtypes): the pure Python path decides."""
    try:
        import numpy as np
    except ImportError:
        return None
    if descr in ("<f4", "<f8"):
        g, w = (np.frombuffer(b, descr).astype(np.float64) for b in (got, want))
    elif descr == "<u2":  # bf16 bits
        g, w = (
            (np.frombuffer(b, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            for b in (got, want)
        )
    else:
        return None
    if metric == "norm":
        diff, size = float(np.linalg.norm(g - w)), float(np.linalg.norm(w))
        if not diff <= atol + rtol * size:
            rel = diff / max(size, 1e-30)
            return [f"{name}: relative difference {rel:.3g} (2-norm) over {rtol:g}"]
        return []
    bad = (g != w) & ~(np.abs(g - w) <= atol + rtol * np.abs(w))
    if not bad.any():
        return []
    worst = float(np.max(np.abs(g - w)[bad] / np.maximum(np.abs(w[bad]), 1e-30)))
    return [f"{name}: relative difference {worst:.3g} over {rtol:g}"]


def compare_dirs(
    got: str, want: str, rtol: float, atol: float = 0.0, metric: str = "elementwise"
) -> list[str]:
    """Differences between the .npy files of ``want`` and those of ``got``:
    floats within ``atol + rtol * |want|`` (``metric`` "elementwise") or
    ``||got - want|| <= atol + rtol * ||want||`` in the 2-norm of each file
    ("norm": results summed in another order, where single elements that
    cancel differ more), others equal."""
    if metric not in ("elementwise", "norm"):
        raise AotError(f"metric '{metric}': expected elementwise or norm")
    problems = []
    names = sorted(f for f in os.listdir(want) if f.endswith(".npy"))
    if not names:
        return [f"{want} holds no .npy files"]
    for name in names:
        path = f"{got}/{name}"
        if not os.path.exists(path):
            problems.append(f"{name}: missing in {got}")
            continue
        gd, gs, gb = read_npy(path)
        wd, ws, wb = read_npy(f"{want}/{name}")
        if gd != wd or gs != ws:
            problems.append(f"{name}: {gd} {gs} vs {wd} {ws}")
            continue
        fast = _compare_numpy(name, gd, gb, wb, rtol, atol, metric)
        if fast is not None:  # numpy where there is one (GPT-2: 124M values)
            problems += fast
            continue
        g, w = _values(gd, gb), _values(wd, wb)
        if isinstance(g, bytes):
            if g != w:
                problems.append(f"{name}: differs")
            continue
        if metric == "norm":
            diff = math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(g, w)))
            size = math.sqrt(math.fsum(b * b for b in w))
            if not diff <= atol + rtol * size:  # also NaN
                rel = diff / max(size, 1e-30)
                problems.append(f"{name}: relative difference {rel:.3g} (2-norm) over {rtol:g}")
            continue
        worst, bad = 0.0, False
        for a, b in zip(g, w):
            if a != b and not (abs(a - b) <= atol + rtol * abs(b)):
                rel = abs(a - b) / max(abs(b), 1e-30)
                worst, bad = (rel if rel != rel or rel > worst else worst), True  # NaN too
        if bad:
            problems.append(f"{name}: relative difference {worst:.3g} over {rtol:g}")
    return problems


# --- Command line ---


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.aot", description=__doc__.split("\n\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a step library")
    r.add_argument("library")
    r.add_argument(
        "--inputs",
        action="append",
        required=True,
        help="directory of global .npy inputs (repeatable)",
    )
    r.add_argument("--outputs", required=True)
    r.add_argument("--steps", type=int, default=1)
    r.add_argument("--entry")
    r.add_argument(
        "--runtime", help="libfsdprt.so (default: $FSDP_RUNTIME_LIBRARY, else the library path)"
    )
    r.add_argument("--runner", help="libfsdprun.so (default: see fsdp_mlir.runner)")
    r.add_argument("--timeout", type=float, default=60.0)
    r.add_argument("--report", help="write the JSON report here")
    m = sub.add_parser("manifest", help="print a step library's manifest")
    m.add_argument("library")
    c = sub.add_parser("compare", help="compare two result directories")
    c.add_argument("got")
    c.add_argument("want")
    c.add_argument("--rtol", type=float, default=0.0)
    c.add_argument("--atol", type=float, default=0.0)
    c.add_argument(
        "--metric", choices=["elementwise", "norm"], default="elementwise",
        help="compare each element, or each file's 2-norm of the difference",
    )  # fmt: skip
    a = ap.parse_args(argv)
    try:
        if a.cmd == "manifest":
            print(json.dumps(read_manifest(a.library), indent=2, sort_keys=True))
        elif a.cmd == "compare":
            problems = compare_dirs(a.got, a.want, a.rtol, a.atol, a.metric)
            for p in problems:
                print(p)
            print("SAME" if not problems else f"DIFFERENT ({len(problems)} file(s))")
            return 1 if problems else 0
        else:
            if a.steps < 1:
                raise AotError("--steps must be at least 1")
            report = run_step(
                a.library,
                a.inputs,
                a.outputs,
                a.steps,
                a.runtime,
                a.entry,
                a.timeout,
                a.runner,
            )
            if a.report:
                Path(a.report).write_text(json.dumps(report, indent=2) + "\n")
            print(
                f"{report['entry']}: {report['steps']} step(s) on {report['world']} rank(s), "
                f"load {report['load_s']:.3f} s, median step {report['median_step_s'] * 1e3:.3f} ms"
            )
    except NoGpuError as e:
        print(f"fsdp_mlir.aot: skipped (no GPU): {e}", file=sys.stderr)
        return EXIT_NO_GPU
    except (AotError, OSError) as e:
        print(f"fsdp_mlir.aot: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

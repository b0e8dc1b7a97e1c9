"""Run a step compiled ahead of time by fsdp-compile, without LLVM or MLIR.

A step library (``fsdp-compile step.mlir -o step.so``) holds the step's code
and a JSON manifest in its ``.fsdp.manifest`` section: the entry's ports
(dtypes, slot and global shapes, every rank's owned ranges) and its mesh.
This module needs the Python standard library and the runtime, libfsdprt.so
(built from runtime/ with CMake), nothing else: it is the runner of machines
that have no LLVM (the GPU check machine, a deployment).

    python -m fsdp_mlir.aot run step.so --runtime build/libfsdprt.so \\
        --inputs data --outputs out --steps 3 --report report.json
    python -m fsdp_mlir.aot manifest step.so
    python -m fsdp_mlir.aot compare out reference --rtol 1e-5

``run`` cuts each global ``<name>.npy`` of the input directories into every
rank's buffer as fsdp-run does, runs the steps on one thread per rank through
the threads backend, and writes the gathered results as fsdp-run writes them
(the same names; a training step's fed-back arguments under their names and
its per-step scalars stacked). It also writes a JSON report of load and step
times.

A GPU step (``compute=gpu``; the manifest's ``gpu`` key) runs on the device
path instead: each rank thread gets a GPU context (rank r on device r mod the
device count) and an NCCL communicator, its arguments are uploaded to device
buffers, fed-back state stays on the device between steps, every step is
followed by a synchronize (inside the step time), and the results are
downloaded. Without a usable GPU it stops with exit status 77
(``EXIT_NO_GPU``) and the runtime's reason, which the GPU check reports as
skipped.

What it does not do (fsdp-run does): the MPI backend, checkpoints (save and
resume), per-step input directories (``<name>/step-K.npy``; a stacked
``<name>.npy`` with a leading step dimension works), ``--all-ranks``, memory
and communication statistics, meshes of more than 64 ranks, and the replica
agreement check of results. docs/AOT.md.
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
import threading
import time
from array import array
from pathlib import Path

MANIFEST_SECTION = ".fsdp.manifest"
MANIFEST_VERSION = 2


class AotError(Exception):
    """A step library that cannot run here, or inputs that do not fit it."""


class NoGpuError(AotError):
    """A GPU step where the runtime finds no usable GPU (or no NCCL)."""


# Exit status of ``run`` for NoGpuError (automake's "skipped").
EXIT_NO_GPU = 77


# ---------------------------------------------------------------------------
# The manifest, read from the ELF file before it is loaded
# ---------------------------------------------------------------------------


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


def elf_section(path: str, wanted: str) -> bytes | None:
    """The contents of section ``wanted`` of an ELF64 little-endian file."""
    data = Path(path).read_bytes()
    where = elf_section_range(data, wanted, path)
    if where is None:
        return None
    return data[where[0] : where[0] + where[1]]


def read_manifest(path: str) -> dict:
    """The checked manifest of a step library."""
    raw = elf_section(path, MANIFEST_SECTION)
    if raw is None:
        raise AotError(
            f"{path} is not a step library (no {MANIFEST_SECTION} section; "
            "build one with fsdp-compile)"
        )
    try:
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


# Entry points only a step lowered with compute=gpu calls (its host code's
# device allocations and stream), for manifests without the "gpu" key.
_GPU_SYMBOLS = (
    b"mgpuStreamCreate",
    b"mgpuMemAlloc",
    b"fsdprt_gpu_gemm_f32",
    b"fsdprt_gpu_gemm_bf16",
    b"fsdprt_gpu_gemm_bf16_f32",
)


def gpu_info(manifest: dict, path: str) -> dict | None:
    """The manifest's ``gpu`` entry ({"tf32": bool, "emulation": bool}) of a
    GPU step, None for a host step. A library whose manifest predates the
    key is a GPU step when its dynamic symbols name the device entry
    points."""
    info = manifest.get("gpu")
    if isinstance(info, dict):
        return {
            "tf32": bool(info.get("tf32", False)),
            "emulation": bool(info.get("emulation", False)),
        }
    if info is not None:
        raise AotError(f"{path}: corrupt manifest: 'gpu' is not an object")
    data = Path(path).read_bytes()
    where = elf_section_range(data, ".dynstr", path)
    if where is None:
        return None
    names = data[where[0] : where[0] + where[1]].split(b"\0")
    if any(n in names for n in _GPU_SYMBOLS):
        return {"tf32": False, "emulation": False}
    return None


# LLVM's x86 feature names that /proc/cpuinfo spells differently (any of
# the alternatives).
_CPUINFO_NAMES = {
    "64bit": ["lm"],
    "x87": ["fpu"],
    "sahf": ["lahf_lm"],
    "lzcnt": ["abm"],
    "prfchw": ["3dnowprefetch"],
    "sha": ["sha_ni"],
    "crc32": ["sse4_2"],
    "rdrnd": ["rdrand"],
    "avxvnni": ["avx_vnni"],
    "cmpxchg16b": ["cx16"],
    "bmi": ["bmi1"],
    "pclmul": ["pclmulqdq"],
    "sse3": ["pni"],
    "shstk": ["user_shstk", "shstk"],
}
# System features that compiled code never uses unless asked (privileged or
# OS-managed instructions), which kernels and virtual machines often hide.
_SYSTEM_FEATURES = {
    "shstk",
    "sgx",
    "pconfig",
    "ptwrite",
    "enqcmd",
    "uintr",
    "waitpkg",
    "hreset",
    "kl",
    "widekl",
    "invpcid",
    # Random-number instructions: emitted only for their intrinsics. Linux
    # drops the rdseed flag on Zen 5 (a hardware erratum) while CPUID, which
    # the C++ loader reads, still reports it.
    "rdseed",
    "rdrnd",
}


def _cpuinfo_flags() -> set[str] | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


def missing_features(features: list[str], flags: set[str]) -> list[str]:
    """The LLVM features of ``features`` that the cpuinfo ``flags`` lack."""
    missing = []
    for f in features:
        if f in _SYSTEM_FEATURES:
            continue
        names = _CPUINFO_NAMES.get(f, [f.replace(".", "_").replace("-", "_")])
        # avx512vnni -> avx512_vnni, avx512bf16 -> avx512_bf16, ...
        names += ["avx512_" + n[6:] for n in names if n.startswith("avx512")]
        if not any(n in flags for n in names):
            missing.append(f)
    return missing


def check_cpu(manifest: dict, path: str) -> None:
    target = manifest.get("target", {})
    flags = _cpuinfo_flags()
    if flags is None:
        return
    missing = missing_features(target.get("features", []), flags)
    if missing:
        raise AotError(
            f"{path} was built for CPU '{target.get('cpu')}' and uses features "
            f"this host lacks: {', '.join(missing)} (build it with "
            "--mcpu=x86-64 to run anywhere)"
        )


# OpenBLAS picks its kernels from the CPU model when it loads, and a release
# older than the CPU falls back to its SSE3 ("Prescott") kernels, several
# times slower on an AVX-512 machine. As fsdp-run does (lib/Runner/Blas.h),
# a compute=fast step's OpenBLAS is loaded first, and loaded again with the
# kernels of the CPU's vector units when that happens and OPENBLAS_CORETYPE
# is not set.
_AVX512_CORES = {"SkylakeX", "Cooperlake", "SapphireRapids"}
_AVX2_CORES = {"Haswell", "Zen", "Excavator"}
_openblas = None  # kept loaded: the step library resolves against it


def better_blas_core(detected: str, flags: set[str]) -> str | None:
    """The OpenBLAS core to use instead of ``detected`` on a CPU with the
    cpuinfo ``flags``, or None when ``detected`` uses its widest vector
    units (blas::betterCore in lib/Runner/Blas.cpp)."""
    if not {"avx2", "fma"} <= flags or detected in _AVX512_CORES:
        return None
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"  # also over AVX2 kernels
    return None if detected in _AVX2_CORES else "Haswell"


def load_openblas(needed: list[str]) -> str | None:
    """Loads the OpenBLAS among ``needed`` (once); returns its core."""
    global _openblas
    path = next((n for n in needed if "openblas" in os.path.basename(n)), None)
    if path is None:
        return None
    if _openblas is None:
        import _ctypes

        def open_() -> ctypes.CDLL:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib

        lib = open_()
        better = None
        if "OPENBLAS_CORETYPE" not in os.environ:
            core = lib.openblas_get_corename().decode()
            better = better_blas_core(core, _cpuinfo_flags() or set())
        if better:
            _ctypes.dlclose(lib._handle)
            os.environ["OPENBLAS_CORETYPE"] = better
            try:
                lib = open_()
            finally:
                del os.environ["OPENBLAS_CORETYPE"]
        _openblas = lib
    return _openblas.openblas_get_corename().decode()


# ---------------------------------------------------------------------------
# .npy files (C order, little-endian; no numpy needed)
# ---------------------------------------------------------------------------


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


def _same_descr(a: str, b: str) -> bool:
    norm = {"|u1": "<u1", "|i1": "<i1", "|b1": "<b1", "?": "<b1"}
    return norm.get(a, a) == norm.get(b, b)


def _prod(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------------------
# Shards: global arrays to rank buffers and back (lib/Runner/Shards.cpp)
# ---------------------------------------------------------------------------


def _owned_runs(ranges: list[list[list[int]]], slot: list[int], glob: list[int]):
    """(slot offset, global offset, count) of every contiguous owned run."""
    if not glob:
        yield 0, 0, 1
        return
    index = [[x for b, e in dim for x in range(b, e)] for dim in ranges]
    if any(not idx for idx in index):
        return
    n = len(glob)
    slot_stride, glob_stride = [1] * n, [1] * n
    for d in range(n - 2, -1, -1):
        slot_stride[d] = slot_stride[d + 1] * slot[d + 1]
        glob_stride[d] = glob_stride[d + 1] * glob[d + 1]
    inner = index[-1]
    inner_runs = []
    i = 0
    while i < len(inner):
        j = i + 1
        while j < len(inner) and inner[j] == inner[j - 1] + 1:
            j += 1
        inner_runs.append((i, inner[i], j - i))
        i = j
    pos = [0] * (n - 1)
    while True:
        so = sum(pos[d] * slot_stride[d] for d in range(n - 1))
        go = sum(index[d][pos[d]] * glob_stride[d] for d in range(n - 1))
        for s, g, c in inner_runs:
            yield so + s, go + g, c
        d = n - 2
        while d >= 0:
            pos[d] += 1
            if pos[d] < len(index[d]):
                break
            pos[d] = 0
            d -= 1
        if d < 0:
            return


def shard_input(port: dict, glob: bytes, rank: int) -> bytearray:
    eb = port["element_bytes"]
    slot = bytearray(_prod(port["shape"]) * eb)
    if port["layout"] is None:
        if not port["shape"] or port["rank_local"]:
            slot[:] = glob[: len(slot)]
        else:
            slot[:] = glob[rank * len(slot) : (rank + 1) * len(slot)]
        return slot
    shards = _shards(port)
    if shards["partial"] and not shards["owners"][rank]:
        return slot
    for so, go, c in _owned_runs(shards["ranks"][rank], port["shape"], port["global_shape"]):
        slot[so * eb : (so + c) * eb] = glob[go * eb : (go + c) * eb]
    return slot


def _shards(port: dict) -> dict:
    if "shards" not in port:
        raise AotError(f"port '{port['name']}': no per-rank ranges (mesh over 64 ranks)")
    return port["shards"]


def assemble(port: dict, pieces: list[bytes]) -> bytes:
    """The global value of a result from every rank's slot."""
    if port["layout"] is None:
        return bytes(pieces[0])
    eb = port["element_bytes"]
    shards = _shards(port)
    out = bytearray(_prod(port["global_shape"]) * eb)
    if not shards["partial"]:
        for r, piece in enumerate(pieces):
            for so, go, c in _owned_runs(shards["ranks"][r], port["shape"], port["global_shape"]):
                out[go * eb : (go + c) * eb] = piece[so * eb : (so + c) * eb]
        return bytes(out)
    code = {"<f4": "f", "<f8": "d"}.get(port["dtype"])
    if code is None:
        raise AotError(f"result '{port['name']}': partial sums need f32 or f64")
    total = array(code, bytes(out))
    for r, piece in enumerate(pieces):
        values = array(code, bytes(piece))
        for so, go, c in _owned_runs(shards["ranks"][r], port["shape"], port["global_shape"]):
            for e in range(c):
                total[go + e] += values[so + e]
    return total.tobytes()


# ---------------------------------------------------------------------------
# The runtime and the step library
# ---------------------------------------------------------------------------


class _Options(ctypes.Structure):
    _fields_ = [
        ("timeout_s", ctypes.c_double),
        ("check_desync", ctypes.c_int32),
        ("axis_names", ctypes.POINTER(ctypes.c_char_p)),
    ]


_LOADED: dict[str, str | None] = {}


def _library_file(lib: ctypes.CDLL) -> str | None:
    """The file a loaded library came from (dladdr of one of its symbols)."""

    class _DlInfo(ctypes.Structure):
        _fields_ = [
            ("dli_fname", ctypes.c_char_p),
            ("dli_fbase", ctypes.c_void_p),
            ("dli_sname", ctypes.c_char_p),
            ("dli_saddr", ctypes.c_void_p),
        ]

    try:
        dladdr = ctypes.CDLL(None).dladdr
        addr = ctypes.cast(lib.fsdprt_abi_version, ctypes.c_void_p)
    except AttributeError:
        return None
    info = _DlInfo()
    if not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def load_runtime(path: str | None) -> ctypes.CDLL:
    """libfsdprt.so, loaded RTLD_GLOBAL so that the step library's
    dependency on it (by soname) resolves to this copy."""
    candidates = [path] if path else []
    if not path:
        if env := os.environ.get("FSDP_RUNTIME_LIBRARY"):
            candidates.append(env)
        candidates.append("libfsdprt.so")
    errors = []
    for c in candidates:
        try:
            lib = ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
            continue
        # A step library binds to the first libfsdprt.so of the process (by
        # soname): a second, different one would not be the one it calls.
        where = _library_file(lib)
        first = _LOADED.setdefault("runtime", where)
        if where and first and where != first:
            raise AotError(
                f"this process already runs on {first}; {where} cannot replace it "
                "(run the other runtime in another process)"
            )
        return lib
    raise AotError(
        "cannot load the runtime libfsdprt.so (--runtime PATH or "
        "FSDP_RUNTIME_LIBRARY): " + "; ".join(errors)
    )


class _Allocator:
    """The step's malloc and free (fsdp_step_set_allocator): libc's, with
    the live buffers recorded per thread, so that the results the step hands
    over are freed and its arguments or constants are not."""

    MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
    FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self) -> None:
        libc = ctypes.CDLL(None)
        self._malloc = libc.malloc
        self._malloc.restype = ctypes.c_void_p
        self._malloc.argtypes = [ctypes.c_size_t]
        self._free = libc.free
        self._free.argtypes = [ctypes.c_void_p]
        self.local = threading.local()
        self.malloc = self.MALLOC(self._on_malloc)
        self.free = self.FREE(self._on_free)

    def _live(self) -> set[int]:
        if not hasattr(self.local, "live"):
            self.local.live = set()
        return self.local.live

    def _on_malloc(self, n: int) -> int:
        p = self._malloc(n)
        if p:
            self._live().add(p)
        return p

    def _on_free(self, p: int) -> None:
        if p:
            self._live().discard(p)
        self._free(p)

    def release(self, p: int) -> None:
        live = self._live()
        if p in live:
            live.discard(p)
            self._free(p)


class StepLibrary:
    """A loaded step library and its manifest."""

    def __init__(self, path: str, runtime: ctypes.CDLL):
        self.path = path
        t0 = time.perf_counter()
        self.manifest = read_manifest(path)
        abi = runtime.fsdprt_abi_version()
        if self.manifest.get("abi_version") != abi:
            raise AotError(
                f"{path} was built for runtime ABI version "
                f"{self.manifest.get('abi_version')}; this runtime has version "
                f"{abi} (rebuild it with fsdp-compile)"
            )
        check_cpu(self.manifest, path)
        self.gpu = gpu_info(self.manifest, path)
        self.read_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        # Ranks are the parallelism (as in fsdp-run): one BLAS thread each,
        # read when a compute=fast step's OpenBLAS loads with it.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        try:
            self.blas_core = load_openblas(self.manifest.get("needed", []))
            self.lib = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            needed = ", ".join(self.manifest.get("needed", []))
            raise AotError(f"cannot load {path} (it needs {needed}): {e}") from None
        self.allocator = _Allocator()
        self.lib.fsdp_step_set_allocator(self.allocator.malloc, self.allocator.free)
        self.load_seconds = time.perf_counter() - t1

    def entry(self, name: str | None) -> dict:
        entries = self.manifest["entries"]
        if name is None:
            if len(entries) != 1:
                raise AotError(f"{self.path} has {len(entries)} entries; choose one with --entry")
            return entries[0]
        for e in entries:
            if e["name"] == name:
                return e
        raise AotError(f"{self.path} has no entry '{name}'")


# ---------------------------------------------------------------------------
# Running the steps
# ---------------------------------------------------------------------------


def _descriptor(buf, shape: list[int]):
    return _descriptor_at(ctypes.addressof(buf), shape)


def _descriptor_at(addr: int, shape: list[int]):
    words = (ctypes.c_int64 * (3 + 2 * len(shape)))()
    words[0] = words[1] = addr
    words[2] = 0
    stride = 1
    for i in range(len(shape) - 1, -1, -1):
        words[3 + i] = shape[i]
        words[3 + len(shape) + i] = stride
        stride *= shape[i]
    return words


def _read_result(port: dict, words, base: int) -> tuple[bytes, int]:
    """Result elements (row-major) from its descriptor; and its allocation."""
    rank = len(port["shape"])
    eb = port["element_bytes"]
    allocated, aligned, offset = words[base], words[base + 1], words[base + 2]
    sizes = [words[base + 3 + d] for d in range(rank)]
    strides = [words[base + 3 + rank + d] for d in range(rank)]
    n = _prod(sizes)
    expect, contiguous = 1, True
    for d in range(rank - 1, -1, -1):
        contiguous &= sizes[d] == 1 or strides[d] == expect
        expect *= sizes[d]
    if n == 0:
        return b"", allocated
    if contiguous:
        return ctypes.string_at(aligned + offset * eb, n * eb), allocated
    out = bytearray(n * eb)
    idx = [0] * rank
    for e in range(n):
        src = offset + sum(i * s for i, s in zip(idx, strides))
        out[e * eb : (e + 1) * eb] = ctypes.string_at(aligned + src * eb, eb)
        for d in range(rank - 1, -1, -1):
            idx[d] += 1
            if idx[d] < sizes[d]:
                break
            idx[d] = 0
    return bytes(out), allocated


def _input_shape(port: dict, world: int) -> list[int]:
    shape = list(port["global_shape"])
    if port["layout"] is None and not port["rank_local"] and shape:
        shape[0] *= world
    return shape


def bind_inputs(entry: dict, dirs: list[str], steps: int) -> list[tuple[bytes, int]]:
    """Per argument: the global bytes and the bytes of one step's slice (0:
    the same value every step)."""
    world = _prod(entry["mesh"]["shape"])
    bound = []
    for i, p in enumerate(entry["args"]):
        expect = _input_shape(p, world)
        fed = entry["training"] and entry["fed_by"][i] >= 0
        path = next(
            (f"{d}/{p['name']}.npy" for d in dirs if os.path.exists(f"{d}/{p['name']}.npy")), None
        )
        if path is None:
            if fed and p["starts_at_zero"]:
                bound.append((bytes(_prod(expect) * p["element_bytes"]), 0))
                continue
            raise AotError(f"input '{p['name']}': no {p['name']}.npy in {', '.join(dirs)}")
        descr, shape, data = read_npy(path)
        if not _same_descr(descr, p["dtype"]):
            raise AotError(f"input '{p['name']}' ({path}) has dtype {descr}, expected {p['dtype']}")
        if shape == expect:
            bound.append((data, 0))
        elif entry["training"] and not fed and shape[1:] == expect and shape and shape[0] >= steps:
            bound.append((data, len(data) // shape[0]))
        else:
            raise AotError(f"input '{p['name']}' ({path}) has shape {shape}, expected {expect}")
    return bound


def _step_slice(data: bytes, step_bytes: int, step: int) -> bytes:
    """One step's slice of a stacked input (the whole of a constant one)."""
    if not step_bytes:
        return data
    return data[step * step_bytes : (step + 1) * step_bytes]


class _Stats(ctypes.Structure):
    _fields_ = [
        ("calls", ctypes.c_uint64 * 3),
        ("bytes_sent", ctypes.c_uint64 * 3),
        ("bytes_received", ctypes.c_uint64 * 3),
        ("total_calls", ctypes.c_uint64),
        ("total_bytes_sent", ctypes.c_uint64),
        ("total_bytes_received", ctypes.c_uint64),
        ("exposed_ns", ctypes.c_uint64),
    ]


class _NcclId(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_char * 128)]


class _HostBuffers:
    """Arguments in host memory (the CPU path)."""

    def __init__(self, rt: ctypes.CDLL, allocator: _Allocator):
        self.rt, self.allocator = rt, allocator
        self.keep: list = []

    def upload(self, data: bytes, size: int) -> int:
        buf = ctypes.create_string_buffer(data, max(1, size))
        self.keep.append(buf)
        return ctypes.addressof(buf)

    def write(self, ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    def copy(self, dst: int, src: int, n: int, allocated: int) -> None:
        ctypes.memmove(dst, src, n)

    def read(self, ptr: int, n: int, allocated: int) -> bytes:
        return ctypes.string_at(ptr, n)

    def release(self, ptr: int) -> None:
        self.allocator.release(ptr)

    def finish(self) -> None:
        pass


# The allocated pointer of a memref.get_global descriptor (MLIR's LLVM
# lowering): a constant the step returns, never freed.
_GLOBAL_ALLOCATED = 0xDEADBEEF


def _gpu_message(rt: ctypes.CDLL, ctx) -> str:
    """The context's first error, else the thread's last GPU error."""
    msg = (ctx is not None and rt.fsdprt_gpu_context_error_message(ctx)) or b""
    msg = msg or rt.fsdprt_gpu_last_error_message() or b"unknown GPU error"
    return msg.decode(errors="replace")


class _DeviceBuffers:
    """Arguments in device memory of the thread's GPU context (the GPU
    path). Results the step allocated come from the same device pool
    (mgpuMemAlloc); a host buffer it returns (from its malloc hook) is
    read and freed as on the CPU path."""

    def __init__(self, rt: ctypes.CDLL, allocator: _Allocator, ctx: ctypes.c_void_p):
        self.rt, self.allocator, self.ctx = rt, allocator, ctx
        self.stream = rt.fsdprt_gpu_compute_stream(ctx)
        self.args: list[int] = []

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise AotError(f"{what}: {_gpu_message(self.rt, self.ctx)}")

    def _host(self, ptr: int) -> bool:
        return ptr in self.allocator._live()

    def upload(self, data: bytes, size: int) -> int:
        ptr = self.rt.fsdprt_gpu_alloc(max(1, size))
        if not ptr:
            self._check(1, f"cannot allocate {size} bytes on the device")
        self.args.append(ptr)
        if data:
            self._check(self.rt.fsdprt_gpu_copy_to_device(ptr, data, len(data)), "upload")
        return ptr

    def write(self, ptr: int, data: bytes) -> None:
        self._check(self.rt.fsdprt_gpu_copy_to_device(ptr, data, len(data)), "upload")

    def copy(self, dst: int, src: int, n: int, allocated: int) -> None:
        if self._host(allocated):
            self.write(dst, ctypes.string_at(src, n))
        elif n:
            self.rt.mgpuMemcpy(dst, src, n, self.stream)

    def read(self, ptr: int, n: int, allocated: int) -> bytes:
        if self._host(allocated):
            return ctypes.string_at(ptr, n)
        out = ctypes.create_string_buffer(max(1, n))
        if n:
            self._check(self.rt.fsdprt_gpu_copy_to_host(out, ptr, n), "download")
        return out.raw[:n]

    def release(self, ptr: int) -> None:
        if self._host(ptr):
            self.allocator.release(ptr)
        elif ptr and ptr != _GLOBAL_ALLOCATED and ptr not in self.args:
            self.rt.fsdprt_gpu_free(ptr)

    def finish(self) -> None:
        for p in self.args:
            self.rt.fsdprt_gpu_free(p)
        self.args = []
        self.rt.fsdprt_gpu_synchronize(self.ctx)


def _read_device_result(port: dict, words, base: int, buffers) -> tuple[bytes, int]:
    """_read_result through ``buffers``: the span the descriptor covers is
    copied to the host, then read as a host result."""
    rank = len(port["shape"])
    eb = port["element_bytes"]
    allocated, aligned, offset = words[base], words[base + 1], words[base + 2]
    sizes = [words[base + 3 + d] for d in range(rank)]
    strides = [words[base + 3 + rank + d] for d in range(rank)]
    if _prod(sizes) == 0:
        return b"", allocated
    span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides) if n > 1)
    host = ctypes.create_string_buffer(
        buffers.read(aligned + offset * eb, span * eb, allocated), span * eb
    )
    local = (ctypes.c_int64 * (3 + 2 * rank))()
    local[0] = local[1] = ctypes.addressof(host)
    local[2] = 0
    for d in range(rank):
        local[3 + d], local[3 + rank + d] = sizes[d], strides[d]
    return _read_result(port, local, 0)[0], allocated


class _Rank(threading.Thread):
    def __init__(self, run: Run, rank: int):
        super().__init__(name=f"rank{rank}")
        self.run_ = run
        self.rank = rank
        self.error: str | None = None
        self.results: list[list[bytes]] = []  # per step run, per result
        self.seconds: list[float] = []
        self.exposed: list[float] = []
        self.stats: dict | None = None

    def run(self) -> None:
        try:
            self._steps()
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = str(e)
            self.run_.abort(f"rank {self.rank}: {e}")

    def _comm(self):
        """(comm, GPU context or None, buffers) of this rank."""
        r = self.run_
        rt = r.runtime
        comm = ctypes.c_void_p()
        if r.gpu is None:
            if rt.fsdprt_threads_comm(r.world, ctypes.c_int64(self.rank), ctypes.byref(comm)) != 0:
                raise AotError("cannot get the rank's communicator")
            rt.fsdprt_set_thread_comm(comm)
            return comm, None, _HostBuffers(rt, r.step.allocator)
        device = self.rank % r.devices
        ctx = ctypes.c_void_p()
        ok = rt.fsdprt_gpu_context_create(device, ctypes.byref(ctx)) == 0
        failure = None if ok else f"cannot use GPU {device}: {_gpu_message(rt, None)}"
        if ok:
            self.ctx = ctx
        # NCCL's setup waits for every rank and has no timeout: nobody starts
        # it unless every rank has its GPU.
        r.setup_failures[self.rank] = failure
        try:
            r.setup.wait(timeout=r.options.timeout_s if r.options.timeout_s > 0 else None)
        except threading.BrokenBarrierError:
            pass  # a rank stopped: the failures say which
        if failure is not None:
            raise AotError(failure)
        others = [f"rank {k}" for k, f in enumerate(r.setup_failures) if f is not None]
        if others:
            raise AotError(f"not setting up NCCL: {', '.join(others)} could not use a GPU")
        if r.setup.broken:
            raise AotError("not setting up NCCL: another rank stopped")
        shape = r.entry["mesh"]["shape"]
        dims = (ctypes.c_int64 * len(shape))(*shape)
        st = rt.fsdprt_nccl_comm_create(
            len(shape), dims, self.rank, ctypes.byref(r.nccl_id), device,
            ctypes.byref(r.options), ctypes.byref(comm),
        )  # fmt: skip
        if st != 0:
            raise AotError(f"NCCL communicator on GPU {device}: {_gpu_message(rt, None)}")
        self.nccl = comm
        rt.fsdprt_set_thread_comm(comm)
        return comm, ctx, _DeviceBuffers(rt, r.step.allocator, ctx)

    def _steps(self) -> None:
        self.ctx = self.nccl = None
        buffers = None
        try:
            buffers = self._run_steps()
        finally:
            rt = self.run_.runtime
            if buffers is not None:
                buffers.finish()
            if self.nccl is not None:
                rt.fsdprt_set_thread_comm(None)
                rt.fsdprt_comm_destroy(self.nccl)
            if self.ctx is not None:
                rt.fsdprt_gpu_context_destroy(self.ctx)

    def _run_steps(self):
        r = self.run_
        rt = r.runtime
        entry = r.entry
        comm, ctx, buffers = self._comm()
        rt.fsdprt_comm_reset_stats(comm)
        args = [
            buffers.upload(
                bytes(shard_input(p, _step_slice(g, s, 0), self.rank)),
                _prod(p["shape"]) * p["element_bytes"],
            )
            for p, (g, s) in zip(entry["args"], r.inputs)
        ]
        descs = [_descriptor_at(a, p["shape"]) for a, p in zip(args, entry["args"])]
        offsets, words = [], 0
        for p in entry["results"]:
            offsets.append(words)
            words += 3 + 2 * len(p["shape"])
        area = (ctypes.c_int64 * max(1, words))()
        pointers = ([ctypes.c_void_p(ctypes.addressof(area))] if entry["results"] else []) + [
            ctypes.c_void_p(ctypes.addressof(d)) for d in descs
        ]
        packed = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(p) for p in pointers])
        fn = getattr(r.step.lib, entry["symbol"])
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p]
        training = entry["training"]
        read = (
            _read_result if ctx is None else (lambda p, a, o: _read_device_result(p, a, o, buffers))
        )
        for step in range(r.steps):
            for i, (p, (g, s)) in enumerate(zip(entry["args"], r.inputs)):
                if s and step > 0:
                    buffers.write(
                        args[i], bytes(shard_input(p, _step_slice(g, s, step), self.rank))
                    )
            before = _Stats()
            rt.fsdprt_comm_get_stats(comm, ctypes.byref(before))
            t0 = time.perf_counter()
            fn(packed)
            if ctx is not None:
                # The step only enqueues; its time is the device's.
                if rt.fsdprt_gpu_synchronize(ctx) != 0:
                    raise AotError(_gpu_message(rt, ctx))
            self.seconds.append(time.perf_counter() - t0)
            after = _Stats()
            rt.fsdprt_comm_get_stats(comm, ctypes.byref(after))
            self.exposed.append((after.exposed_ns - before.exposed_ns) * 1e-9)
            if rt.fsdprt_comm_error(comm) != 0:
                raise AotError(rt.fsdprt_comm_error_message(comm).decode())
            last = step == r.steps - 1
            outs, done = [], set()
            for k, p in enumerate(entry["results"]):
                # The device path downloads what is written: the last step's
                # results and every step's training scalars.
                keep = ctx is None or last or (training and not p["shape"])
                outs.append(read(p, area, offsets[k])[0] if keep else b"")
            for k, p in enumerate(entry["results"]):
                j = p["update_of"]
                if training and j is not None:
                    n = _prod(p["shape"]) * p["element_bytes"]
                    src = area[offsets[k] + 1] + area[offsets[k] + 2] * p["element_bytes"]
                    if ctx is None:
                        ctypes.memmove(args[j], outs[k], len(outs[k]))
                    else:
                        buffers.copy(args[j], src, n, area[offsets[k]])
            for k in range(len(entry["results"])):
                allocated = area[offsets[k]]
                if allocated not in done:
                    done.add(allocated)
                    buffers.release(allocated)
            self.results.append(outs)
        stats = _Stats()
        if rt.fsdprt_comm_get_stats(comm, ctypes.byref(stats)) == 0:
            self.stats = {
                "calls": stats.total_calls,
                "bytes_sent": stats.total_bytes_sent,
                "bytes_received": stats.total_bytes_received,
            }
        return buffers


class Run:
    """N steps of one entry on every rank of its mesh, one thread each: the
    threads backend for host steps, NCCL on the GPUs for GPU steps."""

    def __init__(
        self,
        step: StepLibrary,
        runtime: ctypes.CDLL,
        entry: dict,
        inputs,
        steps: int,
        timeout: float,
    ):
        self.step, self.runtime, self.entry = step, runtime, entry
        self.inputs, self.steps = inputs, steps
        self.gpu = step.gpu
        shape = entry["mesh"]["shape"]
        self.options = _Options()
        runtime.fsdprt_options_init(ctypes.byref(self.options))
        self.options.timeout_s = timeout
        self.world = None
        if self.gpu is not None:
            self.devices = require_gpus(runtime, _prod(shape), step.path, self.gpu)
            self.setup = threading.Barrier(_prod(shape))
            self.setup_failures: list[str | None] = [None] * _prod(shape)
            runtime.fsdprt_gpu_set_tf32(1 if self.gpu["tf32"] else 0)
            self.nccl_id = _NcclId()
            st = runtime.fsdprt_nccl_get_unique_id(ctypes.byref(self.nccl_id))
            if st == 6:  # FSDPRT_ERR_UNSUPPORTED: built without NCCL
                raise NoGpuError(
                    f"{step.path} is a GPU step and this libfsdprt has no NCCL backend "
                    "(build the runtime with NCCL)"
                )
            if st != 0:
                raise AotError("ncclGetUniqueId: " + _gpu_message(runtime, None))
            return
        self.world = ctypes.c_void_p()
        dims = (ctypes.c_int64 * len(shape))(*shape)
        if (
            runtime.fsdprt_threads_world_create(
                len(shape), dims, ctypes.byref(self.options), ctypes.byref(self.world)
            )
            != 0
        ):
            raise AotError("cannot create the threads world")

    def abort(self, reason: str) -> None:
        if self.world is not None:
            self.runtime.fsdprt_world_abort(self.world, reason.encode())
        elif self.gpu is not None:
            self.setup.abort()  # ranks still waiting to set up NCCL stop

    def go(self) -> list[_Rank]:
        ranks = [_Rank(self, r) for r in range(_prod(self.entry["mesh"]["shape"]))]
        for t in ranks:
            t.start()
        for t in ranks:
            t.join()
        if self.world is not None:
            self.runtime.fsdprt_world_destroy(self.world)
        errors = [f"rank {t.rank}: {t.error}" for t in ranks if t.error]
        if errors:
            raise AotError("; ".join(errors))
        return ranks


def _nccl_version() -> int | None:
    """NCCL's version code (2.30.1: 23001) from the library the runtime
    loaded, None when it is not there."""
    try:
        fn = ctypes.CDLL(None).ncclGetVersion
    except AttributeError:
        return None
    v = ctypes.c_int()
    return v.value if fn(ctypes.byref(v)) == 0 else None


def _emulated(runtime: ctypes.CDLL) -> bool:
    try:
        fn = runtime.fsdprt_gpu_emulated
    except AttributeError:  # a runtime from before the emulation
        return False
    fn.restype = ctypes.c_int32
    return fn() != 0


def require_gpus(runtime: ctypes.CDLL, world: int, path: str, gpu: dict | None = None) -> int:
    """The number of GPUs the ranks spread over (rank r on device r mod it);
    NoGpuError with the runtime's reason when there is none, or when ranks
    would share a GPU and NCCL cannot (before 2.30); AotError for a step
    compiled for the host emulation of CUDA on a real runtime, or the other
    way around."""
    if not runtime.fsdprt_gpu_built():
        raise NoGpuError(f"{path} is a GPU step and this libfsdprt has no GPU runtime")
    emulation, emulated = bool(gpu and gpu.get("emulation")), _emulated(runtime)
    if emulation and not emulated:
        raise AotError(
            f"{path} was compiled with gpu-emulation=true (its kernels are host functions), "
            "but this libfsdprt runs real GPUs: run it with the emulated runtime "
            "(--runtime <build>/lib/cuda-emulation/libfsdprt.so)"
        )
    if emulated and gpu is not None and not emulation:
        raise AotError(
            f"{path} was compiled for real GPUs, but this libfsdprt is the host emulation "
            "of CUDA: lower it with gpu-emulation=true, or use the runtime built over CUDA"
        )
    if runtime.fsdprt_gpu_require_devices(1) != 0:
        raise NoGpuError(f"{path} is a GPU step (compute=gpu): {_gpu_message(runtime, None)}")
    count = ctypes.c_int32()
    if runtime.fsdprt_gpu_device_count(ctypes.byref(count)) != 0 or count.value < 1:
        raise NoGpuError(f"{path} is a GPU step (compute=gpu): {_gpu_message(runtime, None)}")
    n = count.value
    if world > n:
        v = _nccl_version()
        if v is not None and v < 23000:
            raise NoGpuError(
                f"{world} ranks on {n} GPU(s) need NCCL 2.30 or later to share a GPU "
                f"(this NCCL is {v // 10000}.{v // 100 % 100}.{v % 100})"
            )
    return min(n, world)


def _declare(runtime: ctypes.CDLL) -> None:
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    runtime.fsdprt_abi_version.restype = i32
    runtime.fsdprt_comm_error.restype = ctypes.c_int
    runtime.fsdprt_comm_error.argtypes = [vp]
    runtime.fsdprt_comm_error_message.restype = ctypes.c_char_p
    runtime.fsdprt_comm_error_message.argtypes = [vp]
    runtime.fsdprt_threads_comm.argtypes = [vp, i64, vp]
    runtime.fsdprt_set_thread_comm.argtypes = [vp]
    runtime.fsdprt_world_abort.argtypes = [vp, ctypes.c_char_p]
    runtime.fsdprt_world_destroy.argtypes = [vp]
    runtime.fsdprt_threads_world_create.argtypes = [i32, vp, vp, vp]
    runtime.fsdprt_options_init.argtypes = [vp]
    runtime.fsdprt_comm_get_stats.argtypes = [vp, vp]
    runtime.fsdprt_comm_reset_stats.argtypes = [vp]
    runtime.fsdprt_comm_destroy.argtypes = [vp]
    # The GPU runtime and the nccl backend (stubs when not built).
    runtime.fsdprt_gpu_built.restype = i32
    runtime.fsdprt_gpu_device_count.argtypes = [vp]
    runtime.fsdprt_gpu_require_devices.argtypes = [i32]
    runtime.fsdprt_gpu_last_error_message.restype = ctypes.c_char_p
    runtime.fsdprt_gpu_context_create.argtypes = [i32, vp]
    runtime.fsdprt_gpu_context_destroy.argtypes = [vp]
    runtime.fsdprt_gpu_compute_stream.restype = vp
    runtime.fsdprt_gpu_compute_stream.argtypes = [vp]
    runtime.fsdprt_gpu_synchronize.argtypes = [vp]
    runtime.fsdprt_gpu_context_error_message.restype = ctypes.c_char_p
    runtime.fsdprt_gpu_context_error_message.argtypes = [vp]
    runtime.fsdprt_gpu_alloc.restype = vp
    runtime.fsdprt_gpu_alloc.argtypes = [i64]
    runtime.fsdprt_gpu_free.argtypes = [vp]
    runtime.fsdprt_gpu_copy_to_device.argtypes = [vp, ctypes.c_char_p, i64]
    runtime.fsdprt_gpu_copy_to_host.argtypes = [vp, vp, i64]
    runtime.fsdprt_gpu_set_tf32.argtypes = [i32]
    runtime.fsdprt_nccl_get_unique_id.argtypes = [vp]
    runtime.fsdprt_nccl_comm_create.argtypes = [i32, vp, i64, vp, i32, vp, vp]
    runtime.mgpuMemcpy.argtypes = [vp, vp, i64, vp]


def run_step(
    path: str,
    inputs: list[str],
    outputs: str,
    steps: int = 1,
    runtime_path: str | None = None,
    entry_name: str | None = None,
    timeout: float = 60.0,
) -> dict:
    """Runs the step library and writes its results; returns the report."""
    t0 = time.perf_counter()
    runtime = load_runtime(runtime_path)
    _declare(runtime)
    step = StepLibrary(path, runtime)
    entry = step.entry(entry_name)
    world = _prod(entry["mesh"]["shape"])
    if world > 64:
        raise AotError(f"the mesh has {world} ranks; this runner runs at most 64")
    bound = bind_inputs(entry, inputs, steps)
    load_s = time.perf_counter() - t0
    run = Run(step, runtime, entry, bound, steps, timeout)
    ranks = run.go()
    os.makedirs(outputs, exist_ok=True)
    training = entry["training"]
    last = len(ranks[0].results) - 1
    for k, p in enumerate(entry["results"]):
        j = p["update_of"]
        if training and j is not None:
            port = entry["args"][j]
            data = assemble(port, [t.results[last][k] for t in ranks])
            write_npy(f"{outputs}/{port['name']}.npy", port["dtype"], port["global_shape"], data)
        elif training and not p["shape"]:
            data = b"".join(assemble(p, [t.results[s][k] for t in ranks]) for s in range(last + 1))
            write_npy(f"{outputs}/{p['name']}.npy", p["dtype"], [last + 1], data)
        else:
            data = assemble(p, [t.results[last][k] for t in ranks])
            write_npy(f"{outputs}/{p['name']}.npy", p["dtype"], p["global_shape"], data)
    seconds = [max(t.seconds[s] for t in ranks) for s in range(steps)]
    exposed = [max(t.exposed[s] for t in ranks) for s in range(steps)]
    ordered = sorted(seconds)
    stats = ranks[0].stats or {}
    return {
        "library": path,
        "entry": entry["name"],
        "world": world,
        "device": "gpu" if step.gpu is not None else "cpu",
        "gpu": step.gpu,
        "gpus": run.devices if step.gpu is not None else 0,
        "blas_core": step.blas_core,
        # Rank 0's collectives per step (the runtime's counters).
        "comm_per_step": {k: v / steps for k, v in stats.items()},
        "steps": steps,
        "read_manifest_s": step.read_seconds,
        "dlopen_s": step.load_seconds,
        "load_s": load_s,
        "step_s": seconds,
        # The communication the step's compute waited for (fsdprt_stats_t
        # exposed_ns), the most of any rank.
        "step_exposed_comm_s": exposed,
        "median_step_s": ordered[len(ordered) // 2] if ordered else 0.0,
        "min_step_s": ordered[0] if ordered else 0.0,
    }


# ---------------------------------------------------------------------------
# Comparing result directories (fp32 / fp64 / bf16 within a relative tolerance)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


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
                a.library, a.inputs, a.outputs, a.steps, a.runtime, a.entry, a.timeout
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

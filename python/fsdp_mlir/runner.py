"""Run a lowered fsdp step in this process (the C API of libfsdprun.so).

    from fsdp_mlir.runner import Program

    with Program("lowered.mlir") as prog:          # parse, check, JIT
        prog.set_input("x", x)                     # global values (numpy)
        out = prog.run(steps=1)                    # every rank of the mesh
        loss = out["loss"]

A training step (results with `fsdp.update_of`) keeps its parameter and
optimizer shards in the runner between `run` calls; `set_input` on a
fed-back argument restarts it from that value. Inputs not set in memory are
read from `input_dir` as `fsdp-run --inputs` reads them. The results are the
same bits `fsdp-run` writes for the same module and inputs.

The library is found through $FSDP_RUNNER_LIB, next to $FSDP_TOOLS_DIR
(`<dir>/../lib/libfsdprun.so`), or in the project's `build/lib`.
"""

from __future__ import annotations

import ctypes
import json
import os

import numpy as np

_DTYPES = ["<f4", "<f8", "<u2", "<f2", "<i4", "<i8", "|u1"]  # fsdprun_dtype_t


class RunnerError(RuntimeError):
    """A failed call: `status` is the C status name, the message says why."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status


class _Options(ctypes.Structure):
    _fields_ = [
        ("entry", ctypes.c_char_p),
        ("jit_cache_dir", ctypes.c_char_p),
        ("backend", ctypes.c_int),
        ("timeout_s", ctypes.c_double),
        ("world", ctypes.c_int64),
    ]


class _RunOptions(ctypes.Structure):
    _fields_ = [
        ("steps", ctypes.c_int64),
        ("warmup", ctypes.c_int64),
        ("input_dir", ctypes.c_char_p),
        ("save_dir", ctypes.c_char_p),
        ("save_every", ctypes.c_int64),
        ("resume_dir", ctypes.c_char_p),
        ("cuda_graphs", ctypes.c_int64),
    ]


def library_path() -> str:
    """Where libfsdprun.so is (see the module's doc)."""
    env = os.environ.get("FSDP_RUNNER_LIB")
    if env:
        return env
    candidates = []
    tools = os.environ.get("FSDP_TOOLS_DIR")
    if tools:
        candidates.append(os.path.join(tools, "..", "lib", "libfsdprun.so"))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "lib", "libfsdprun.so"))
    for c in candidates:
        if os.path.exists(c):
            return os.path.normpath(c)
    raise RunnerError("not found", "libfsdprun.so: set FSDP_RUNNER_LIB or build the project")


def available() -> bool:
    """Whether libfsdprun.so can be found."""
    try:
        library_path()
    except RunnerError:
        return False
    return True


_lib = None


def _library():
    global _lib
    if _lib is None:
        # Local: the library's LLVM must not interpose on another LLVM in the
        # process (torch's triton); the JIT finds the runtime by path.
        lib = ctypes.CDLL(library_path())
        P, I64, PI64 = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        # fsdprun_input_info / fsdprun_output_info: handle, index, name,
        # dtype, rank, shape.
        info = [
            P,
            I64,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_int),
            PI64,
            ctypes.POINTER(PI64),
        ]
        sigs = {
            "fsdprun_program_create_from_file": [
                ctypes.c_char_p,
                ctypes.POINTER(_Options),
                ctypes.POINTER(P),
            ],
            "fsdprun_program_create_from_string": [
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.POINTER(_Options),
                ctypes.POINTER(P),
            ],
            "fsdprun_program_destroy": [P],
            "fsdprun_world_size": [P, PI64],
            "fsdprun_is_training": [P, ctypes.POINTER(ctypes.c_int)],
            "fsdprun_steps_taken": [P, PI64],
            "fsdprun_num_inputs": [P, PI64],
            "fsdprun_num_outputs": [P, PI64],
            "fsdprun_input_info": info,
            "fsdprun_output_info": info,
            "fsdprun_set_input": [
                P,
                ctypes.c_char_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                I64,
                PI64,
            ],
            "fsdprun_run": [P, ctypes.POINTER(_RunOptions)],
            "fsdprun_output_shape": [P, ctypes.c_char_p, PI64, ctypes.POINTER(PI64)],
            "fsdprun_get_output": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t],
            "fsdprun_report_json": [P, ctypes.POINTER(ctypes.c_char_p)],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        lib.fsdprun_last_error.restype = ctypes.c_char_p
        lib.fsdprun_status_string.restype = ctypes.c_char_p
        lib.fsdprun_status_string.argtypes = [ctypes.c_int]
        _lib = lib
    return _lib


def _check(status: int):
    if status != 0:
        lib = _library()
        raise RunnerError(
            lib.fsdprun_status_string(status).decode(), lib.fsdprun_last_error().decode()
        )


def _bytes_arg(s):
    return None if s is None else os.fsencode(s)


def _as_host(value, dtype: str) -> np.ndarray:
    """A C-contiguous numpy array of the port's dtype (bf16 as its bits)."""
    a = np.asarray(value)
    if dtype == "<u2" and a.dtype != np.uint16:
        import ml_dtypes

        a = a.astype(ml_dtypes.bfloat16).view(np.uint16)
    # np.ascontiguousarray would make a 0-d array 1-d.
    return a if a.flags.c_contiguous else a.copy(order="C")


class Program:
    """A lowered step loaded into this process (see the module's doc)."""

    def __init__(
        self,
        module,
        *,
        entry: str | None = None,
        backend: str = "threads",
        timeout: float = 60.0,
        jit_cache_dir: str | None = None,
        text: bool = False,
    ):
        """`module`: a path to a lowered .mlir/.mlirbc or to a step library
        built by fsdp-compile (loaded without compiling), or (text=True, or
        bytes) the module itself."""
        lib = _library()
        opts = _Options(
            _bytes_arg(entry),
            _bytes_arg(jit_cache_dir),
            {"threads": 0, "mpi": 1}[backend],
            timeout,
            0,
        )
        handle = ctypes.c_void_p()
        if text or isinstance(module, (bytes, bytearray)):
            data = module.encode() if isinstance(module, str) else bytes(module)
            _check(
                lib.fsdprun_program_create_from_string(
                    data, len(data), ctypes.byref(opts), ctypes.byref(handle)
                )
            )
        else:
            _check(
                lib.fsdprun_program_create_from_file(
                    os.fsencode(module), ctypes.byref(opts), ctypes.byref(handle)
                )
            )
        self._handle = handle
        self.inputs = self._ports(lib.fsdprun_num_inputs, lib.fsdprun_input_info)
        self.outputs = self._ports(lib.fsdprun_num_outputs, lib.fsdprun_output_info)

    def _ports(self, count_fn, info_fn) -> dict:
        n = ctypes.c_int64()
        _check(count_fn(self._handle, ctypes.byref(n)))
        ports = {}
        for i in range(n.value):
            name, dtype, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_int64()
            shape = ctypes.POINTER(ctypes.c_int64)()
            _check(
                info_fn(
                    self._handle,
                    i,
                    ctypes.byref(name),
                    ctypes.byref(dtype),
                    ctypes.byref(rank),
                    ctypes.byref(shape),
                )
            )
            ports[name.value.decode()] = (
                _DTYPES[dtype.value],
                tuple(shape[d] for d in range(rank.value)),
            )
        return ports

    def _live(self):
        if self._handle is None:
            raise RunnerError("invalid program handle", "the program is closed")
        return self._handle

    @property
    def world_size(self) -> int:
        n = ctypes.c_int64()
        _check(_library().fsdprun_world_size(self._live(), ctypes.byref(n)))
        return n.value

    @property
    def training(self) -> bool:
        t = ctypes.c_int()
        _check(_library().fsdprun_is_training(self._live(), ctypes.byref(t)))
        return bool(t.value)

    @property
    def steps_taken(self) -> int:
        n = ctypes.c_int64()
        _check(_library().fsdprun_steps_taken(self._live(), ctypes.byref(n)))
        return n.value

    def set_input(self, name: str, value):
        """Sets the global value of input `name` (checked against the step)."""
        dtype = self.inputs[name][0] if name in self.inputs else "<f4"
        a = _as_host(value, dtype)
        code = _DTYPES.index(a.dtype.str) if a.dtype.str in _DTYPES else _DTYPES.index(dtype)
        shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
        _check(
            _library().fsdprun_set_input(
                self._live(), name.encode(), a.ctypes.data, a.nbytes, code, a.ndim, shape
            )
        )

    def run(
        self,
        steps: int = 1,
        *,
        warmup: int = 0,
        input_dir=None,
        save_dir=None,
        save_every: int = 0,
        resume_dir=None,
        cuda_graphs: bool = True,
    ) -> dict:
        """Runs `steps` steps; returns every output as a numpy array.
        `cuda_graphs=False`: a compute=gpu step runs every step as compiled
        (no CUDA graph replay)."""
        opts = _RunOptions(
            steps,
            warmup,
            _bytes_arg(input_dir),
            _bytes_arg(save_dir),
            save_every,
            _bytes_arg(resume_dir),
            1 if cuda_graphs else 0,
        )
        _check(_library().fsdprun_run(self._live(), ctypes.byref(opts)))
        return {name: self.output(name) for name in self.outputs}

    def output(self, name: str) -> np.ndarray:
        """Output `name` of the last run (bf16 as uint16 bit patterns)."""
        lib = _library()
        rank, shape = ctypes.c_int64(), ctypes.POINTER(ctypes.c_int64)()
        _check(
            lib.fsdprun_output_shape(
                self._live(), name.encode(), ctypes.byref(rank), ctypes.byref(shape)
            )
        )
        dims = tuple(shape[d] for d in range(rank.value))
        out = np.empty(dims, np.dtype(self.outputs[name][0]))
        _check(lib.fsdprun_get_output(self._live(), name.encode(), out.ctypes.data, out.nbytes))
        return out

    def report(self) -> dict:
        """The last run's timings and memory (`fsdp-run --json`'s object)."""
        text = ctypes.c_char_p()
        _check(_library().fsdprun_report_json(self._live(), ctypes.byref(text)))
        return json.loads(text.value.decode())

    def close(self):
        if self._handle is not None:
            _library().fsdprun_program_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

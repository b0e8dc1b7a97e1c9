"""Run a lowered fsdp step, or a step library, in this process (the C API
of libfsdprun.so).

    from fsdp_mlir.runner import Program

    with Program("lowered.mlir") as prog:          # parse, check, JIT
        prog.set_input("x", x)                     # global values (numpy)
        out = prog.run(steps=1)                    # every rank of the mesh
        loss = out["loss"]

    with Program("step.so") as prog:               # fsdp-compile's library
        prog.run(steps=3, input_dir="data", outputs=False)
        prog.write_outputs("out")                  # fsdp-run --outputs

A training step (results with `fsdp.update_of`) keeps its parameter and
optimizer shards in the runner between `run` calls; `set_input` on a
fed-back argument restarts it from that value. Inputs not set in memory are
read from `input_dir` (one directory or a list, the first holding
`<name>.npy` wins) as `fsdp-run --inputs` reads them. The results are the
same bits `fsdp-run` writes for the same module and inputs.

Only `set_input` and the arrays `run` and `output` return need numpy: a
step library runs from files with the standard library alone (what
`fsdp_mlir.aot` does where only CUDA, a C++ compiler and Python are).

The library is $FSDP_RUNNER_LIB, else the one beside the runtime
`load(runtime=...)` names (`libfsdprun.so` in its folder or the folder
above), beside $FSDP_TOOLS_DIR (`<dir>/../lib` in the full build, `<dir>/..`
in one of runtime/ alone), or in the project's `build/lib`.
"""

from __future__ import annotations

import ctypes
import json
import os

_DTYPES = ["<f4", "<f8", "<u2", "<f2", "<i4", "<i8", "|u1"]  # fsdprun_dtype_t
_NAME = "libfsdprun.so"


class RunnerError(RuntimeError):
    """A failed call: `status` is the C status name, `message` says why."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}" if message else status)
        self.status, self.message = status, message or status


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
        ("more_input_dirs", ctypes.POINTER(ctypes.c_char_p)),
    ]


def library_path(runtime: str | None = None) -> str:
    """Where libfsdprun.so is (see the module's doc)."""
    env = os.environ.get("FSDP_RUNNER_LIB")
    if env:
        return env
    candidates = []
    if runtime:
        folder = os.path.dirname(os.path.abspath(runtime))
        candidates += [os.path.join(folder, _NAME), os.path.join(folder, "..", _NAME)]
    tools = os.environ.get("FSDP_TOOLS_DIR")
    if tools:
        candidates += [os.path.join(tools, "..", "lib", _NAME), os.path.join(tools, "..", _NAME)]
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "lib", _NAME))
    for c in candidates:
        if os.path.exists(c):
            return os.path.normpath(c)
    raise RunnerError(
        "not found", f"{_NAME}: set FSDP_RUNNER_LIB, build the project or build runtime/"
    )


def available() -> bool:
    """Whether libfsdprun.so can be found."""
    try:
        library_path()
    except RunnerError:
        return False
    return True


_lib = None
_paths = ("", "")  # the libfsdprun.so and libfsdprt.so this process runs with


def _loaded_runtime(lib) -> str:
    """The file of the libfsdprt.so the runner library was bound to."""

    class _DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]  # fmt: skip

    rt = ctypes.CDLL("libfsdprt.so", mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
    info = _DlInfo()
    where = ctypes.cast(rt.fsdprt_abi_version, ctypes.c_void_p)
    ctypes.CDLL(None).dladdr(where, ctypes.byref(info))
    return os.path.realpath(info.fname.decode()) if info.fname else ""


def load(runtime: str | None = None, library: str | None = None):
    """The runner library (`library`, else library_path's), loaded once per
    process. `runtime`: the libfsdprt.so to run with (the emulated runtime,
    a runtime built from runtime/ alone), loaded first so that the runner
    and every step library bind to it by its soname; a process runs with
    one runtime."""
    global _lib, _paths
    want = os.path.realpath(runtime) if runtime else None
    if want and not os.path.isfile(want):
        raise RunnerError("not found", f"the runtime {runtime} does not exist")
    if _lib is None:
        if want:
            ctypes.CDLL(want)
        path = os.path.realpath(library or library_path(runtime))
        # Local: nothing of the runner interposes on the host's libraries.
        lib = ctypes.CDLL(path)
        _declare(lib)
        _lib, _paths = lib, (path, _loaded_runtime(lib))
    if want and want != _paths[1]:
        raise RunnerError(
            "another runtime",
            f"this process already runs with {_paths[1]}; run {runtime} in a new process",
        )
    return _lib


def loaded() -> tuple[str, str]:
    """The files of the libfsdprun.so and libfsdprt.so loaded ("" before
    `load`)."""
    return _paths


def _declare(lib) -> None:
    P, I64, PI64 = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
    S, PS = ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)
    Opts, PP = ctypes.POINTER(_Options), ctypes.POINTER(P)
    # fsdprun_input_info / fsdprun_output_info: handle, index, name, dtype,
    # rank, shape.
    info = [P, I64, PS, ctypes.POINTER(ctypes.c_int), PI64, ctypes.POINTER(PI64)]
    sigs = {
        "fsdprun_program_create_from_file": [S, Opts, PP],
        "fsdprun_program_create_from_string": [S, ctypes.c_size_t, Opts, PP],
        "fsdprun_program_destroy": [P],
        "fsdprun_world_size": [P, PI64],
        "fsdprun_is_training": [P, ctypes.POINTER(ctypes.c_int)],
        "fsdprun_steps_taken": [P, PI64],
        "fsdprun_num_inputs": [P, PI64],
        "fsdprun_num_outputs": [P, PI64],
        "fsdprun_input_info": info,
        "fsdprun_output_info": info,
        "fsdprun_set_input": [P, S, P, ctypes.c_size_t, ctypes.c_int, I64, PI64],
        "fsdprun_run": [P, ctypes.POINTER(_RunOptions)],
        "fsdprun_output_shape": [P, S, PI64, ctypes.POINTER(PI64)],
        "fsdprun_get_output": [P, S, P, ctypes.c_size_t],
        "fsdprun_write_outputs": [P, S],
        "fsdprun_report_json": [P, PS],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.fsdprun_last_error.restype = S
    lib.fsdprun_status_string.restype = S
    lib.fsdprun_status_string.argtypes = [ctypes.c_int]


def _check(status: int):
    if status != 0:
        lib = load()
        raise RunnerError(
            lib.fsdprun_status_string(status).decode(), lib.fsdprun_last_error().decode()
        )


def _bytes_arg(s):
    return None if s is None else os.fsencode(s)


def _as_host(value, dtype: str):
    """A C-contiguous numpy array of the port's dtype (bf16 as its bits)."""
    import numpy as np

    a = np.asarray(value)
    if dtype == "<u2" and a.dtype != np.uint16:
        import ml_dtypes

        a = a.astype(ml_dtypes.bfloat16).view(np.uint16)
    # np.ascontiguousarray would make a 0-d array 1-d.
    return a if a.flags.c_contiguous else a.copy(order="C")


class Program:
    """A lowered step or a step library loaded into this process (see the
    module's doc)."""

    def __init__(
        self,
        module,
        *,
        entry: str | None = None,
        backend: str = "threads",
        timeout: float = 60.0,
        jit_cache_dir: str | None = None,
        text: bool = False,
        runtime: str | None = None,
    ):
        """`module`: a path to a lowered .mlir/.mlirbc or to a step library
        built by fsdp-compile (loaded without compiling), or (text=True, or
        bytes) the module itself. `runtime`: see `load`."""
        self._handle = None
        lib = load(runtime)
        opts = _Options(
            _bytes_arg(entry), _bytes_arg(jit_cache_dir), {"threads": 0, "mpi": 1}[backend],
            timeout, 0,
        )  # fmt: skip
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
                info_fn(self._handle, i, ctypes.byref(name), ctypes.byref(dtype),
                        ctypes.byref(rank), ctypes.byref(shape))
            )  # fmt: skip
            ports[name.value.decode()] = (
                _DTYPES[dtype.value],
                tuple(shape[d] for d in range(rank.value)),
            )
        return ports

    def _live(self):
        if self._handle is None:
            raise RunnerError("invalid program handle", "the program is closed")
        return self._handle

    def _int(self, fn, ctype=ctypes.c_int64) -> int:
        n = ctype()
        _check(fn(self._live(), ctypes.byref(n)))
        return n.value

    @property
    def world_size(self) -> int:
        return self._int(load().fsdprun_world_size)

    @property
    def training(self) -> bool:
        return bool(self._int(load().fsdprun_is_training, ctypes.c_int))

    @property
    def steps_taken(self) -> int:
        return self._int(load().fsdprun_steps_taken)

    def set_input(self, name: str, value):
        """Sets the global value of input `name` (checked against the step)."""
        dtype = self.inputs[name][0] if name in self.inputs else "<f4"
        a = _as_host(value, dtype)
        code = _DTYPES.index(a.dtype.str) if a.dtype.str in _DTYPES else _DTYPES.index(dtype)
        shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
        _check(
            load().fsdprun_set_input(
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
        outputs: bool = True,
    ) -> dict | None:
        """Runs `steps` steps; returns every output as a numpy array
        (`outputs=False`: None, for `write_outputs` or `output` later).
        `input_dir`: a directory or a list of them. `cuda_graphs=False`: a
        compute=gpu step runs every step as compiled (no CUDA graph
        replay)."""
        dirs = [input_dir] if isinstance(input_dir, (str, os.PathLike)) else list(input_dir or [])
        more = (ctypes.c_char_p * max(1, len(dirs)))(*[os.fsencode(d) for d in dirs[1:]], None)
        opts = _RunOptions(
            steps, warmup, _bytes_arg(dirs[0] if dirs else None), _bytes_arg(save_dir),
            save_every, _bytes_arg(resume_dir), 1 if cuda_graphs else 0,
            ctypes.cast(more, ctypes.POINTER(ctypes.c_char_p)) if len(dirs) > 1 else None,
        )  # fmt: skip
        _check(load().fsdprun_run(self._live(), ctypes.byref(opts)))
        return {name: self.output(name) for name in self.outputs} if outputs else None

    def output(self, name: str):
        """Output `name` of the last run (bf16 as uint16 bit patterns)."""
        import numpy as np

        lib = load()
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

    def write_outputs(self, directory) -> None:
        """Writes every output of the last run as `<directory>/<name>.npy`,
        the files `fsdp-run --outputs` writes."""
        _check(load().fsdprun_write_outputs(self._live(), os.fsencode(directory)))

    def report(self) -> dict:
        """The last run's timings and memory (`fsdp-run --json`'s object)."""
        text = ctypes.c_char_p()
        _check(load().fsdprun_report_json(self._live(), ctypes.byref(text)))
        return json.loads(text.value.decode())

    def close(self):
        if self._handle is not None:
            load().fsdprun_program_destroy(self._handle)
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

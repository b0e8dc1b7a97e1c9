"""The LLVM-free runner (fsdp_mlir.aot) and step libraries in the
in-process runner: its .npy files against numpy's, its shard cutting and
assembly against a brute-force model, its CPU check, and (with the tools
built) a step library run by fsdp_mlir.runner and by fsdp_mlir.aot with the
JIT's bits."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from fsdp_mlir import aot, runner

TOOLS = os.environ.get("FSDP_TOOLS_DIR", "")
BUILD = os.environ.get("FSDP_BUILD_DIR", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP = os.path.join(ROOT, "test", "Tools", "Inputs", "step.mlir")


def _tool(name):
    path = os.path.join(TOOLS, name)
    return path if os.access(path, os.X_OK) else None


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(5, dtype=np.int64),
        np.float32(2.5),
        np.zeros((2, 0, 3), np.float64),
        np.arange(6, dtype=np.uint16).reshape(2, 3),
    ],
)
def test_npy_round_trip_with_numpy(tmp_path, array):
    np.save(tmp_path / "a.npy", array)
    descr, shape, data = aot.read_npy(str(tmp_path / "a.npy"))
    assert (descr, tuple(shape)) == (array.dtype.str, array.shape)
    assert data == np.ascontiguousarray(array).tobytes()
    aot.write_npy(str(tmp_path / "b.npy"), descr, shape, data)
    back = np.load(tmp_path / "b.npy")
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


def _port(ranks, slot, glob, partial=False):
    return {
        "name": "p",
        "dtype": "<f4",
        "element_bytes": 4,
        "shape": slot,
        "global_shape": glob,
        "layout": "#fsdp.layout<...>",
        "rank_local": False,
        "shards": {
            "partial": partial,
            "owners": [True] + [False] * (len(ranks) - 1),
            "ranks": ranks,
        },
    }


def test_shards_cut_and_assemble_like_the_index_model():
    # Rank 0 owns rows 0-1 and columns [0, 2) + [4, 5) (strided), rank 1 the
    # rest; slots are padded to 3 columns.
    ranks = [[[[0, 2]], [[0, 2], [4, 5]]], [[[0, 2]], [[2, 4]]]]
    port = _port(ranks, [2, 3], [2, 5])
    glob = np.arange(10, dtype=np.float32).reshape(2, 5)
    pieces = [aot.shard_input(port, glob.tobytes(), r) for r in range(2)]
    s0 = np.frombuffer(bytes(pieces[0]), np.float32).reshape(2, 3)
    s1 = np.frombuffer(bytes(pieces[1]), np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s0, glob[:, [0, 1, 4]])
    np.testing.assert_array_equal(s1[:, :2], glob[:, [2, 3]])
    assert not s1[:, 2].any()
    back = np.frombuffer(aot.assemble(port, pieces), np.float32).reshape(2, 5)
    np.testing.assert_array_equal(back, glob)


def test_partial_results_are_summed_and_inputs_go_to_the_owner():
    port = _port([[], []], [], [], partial=True)
    assert bytes(aot.shard_input(port, np.float32(3).tobytes(), 1)) == bytes(4)
    pieces = [np.float32(1.5).tobytes(), np.float32(2.0).tobytes()]
    assert np.frombuffer(aot.assemble(port, pieces), np.float32)[0] == 3.5


def test_cpu_features_map_to_cpuinfo_flags():
    flags = {"sse2", "pni", "avx512_vnni", "pclmulqdq", "lm"}
    assert aot.missing_features(["sse2", "sse3", "avx512vnni", "pclmul", "64bit"], flags) == []
    assert aot.missing_features(["avx2", "shstk"], flags) == ["avx2"]
    # A kernel that hides rdseed (Zen 5) still runs code built for the host.
    assert aot.missing_features(["sse2", "rdseed", "rdrnd"], flags) == []


def test_an_sse_fallback_of_openblas_is_replaced_on_a_vector_cpu():
    avx512 = {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"}
    assert aot.better_blas_core("Prescott", avx512) == "SkylakeX"
    assert aot.better_blas_core("Prescott", {"avx2", "fma"}) == "Haswell"
    assert aot.better_blas_core("SkylakeX", avx512) is None
    assert aot.better_blas_core("Zen", {"avx2", "fma"}) is None
    assert aot.better_blas_core("Haswell", avx512) == "SkylakeX"
    assert aot.better_blas_core("Prescott", {"sse3"}) is None


@pytest.mark.skipif(
    not (_tool("fsdp-opt") and _tool("fsdp-compile")), reason="fsdp-opt / fsdp-compile not built"
)
def test_a_compute_fast_library_runs_openblas_vector_kernels(tmp_path):
    lowered, lib = tmp_path / "l.mlir", tmp_path / "step.so"
    subprocess.run(
        [_tool("fsdp-opt"), STEP, "--fsdp-pipeline=lower=true compute=fast", "-o", lowered],
        check=True,
    )
    subprocess.run([_tool("fsdp-compile"), lowered, "-o", lib], check=True, capture_output=True)
    rng = np.random.default_rng(5)
    np.save(tmp_path / "w.npy", rng.standard_normal((10, 4)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((8, 4)).astype(np.float32))
    # In a fresh process: this one may hold an OpenBLAS already.
    code = (
        "import json, sys; from fsdp_mlir import aot; "
        "r = aot.run_step(sys.argv[1], [sys.argv[2]], sys.argv[3], steps=1, "
        "runtime_path=sys.argv[4]); "
        "print(json.dumps(r['blas_core']))"
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    out = subprocess.run(
        [sys.executable, "-c", code, str(lib), str(tmp_path), str(tmp_path / "o"), RUNTIME],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    core = json.loads(out.stdout.strip().splitlines()[-1])
    assert core is not None
    flags = aot._cpuinfo_flags() or set()
    assert aot.better_blas_core(core, flags) is None, f"OpenBLAS runs {core} kernels"


def test_compare_finds_differences(tmp_path):
    for d, v in (("a", 1.0), ("b", 1.0 + 1e-6), ("c", 1.1)):
        os.makedirs(tmp_path / d)
        np.save(tmp_path / d / "x.npy", np.full(3, v, np.float32))
    assert aot.compare_dirs(str(tmp_path / "b"), str(tmp_path / "a"), 1e-5) == []
    assert aot.compare_dirs(str(tmp_path / "b"), str(tmp_path / "a"), 0.0)
    assert aot.compare_dirs(str(tmp_path / "c"), str(tmp_path / "a"), 1e-5)


@pytest.mark.skipif(
    not (_tool("fsdp-opt") and _tool("fsdp-compile") and _tool("fsdp-run") and runner.available()),
    reason="fsdp-opt / fsdp-compile / libfsdprun not built",
)
def test_a_step_library_runs_in_process_and_without_llvm(tmp_path):
    lowered, lib = tmp_path / "l.mlir", tmp_path / "step.so"
    subprocess.run(
        [_tool("fsdp-opt"), STEP, "--fsdp-pipeline=lower=true", "-o", lowered], check=True
    )
    subprocess.run([_tool("fsdp-compile"), lowered, "-o", lib], check=True, capture_output=True)
    rng = np.random.default_rng(5)
    np.save(tmp_path / "w.npy", rng.standard_normal((10, 4)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((8, 4)).astype(np.float32))
    with runner.Program(lowered) as prog:
        jit = prog.run(input_dir=tmp_path)["y"]
    with runner.Program(lib) as prog:
        assert prog.world_size == 4
        y = prog.run(input_dir=tmp_path, steps=2)["y"]
        assert prog.report()["precompiled"] is True
    assert y.tobytes() == jit.tobytes()
    report = aot.run_step(
        str(lib), [str(tmp_path)], str(tmp_path / "out"), steps=2,
        runtime_path=os.path.join(BUILD, "lib", "libfsdprt.so"),
    )  # fmt: skip
    assert report["world"] == 4 and len(report["step_s"]) == 2
    assert np.load(tmp_path / "out" / "y.npy").tobytes() == jit.tobytes()
    with pytest.raises(runner.RunnerError, match="from its file, not from memory"):
        runner.Program(lib.read_bytes())


# ---------------------------------------------------------------------------
# The device path (GPU steps)
# ---------------------------------------------------------------------------

RUNTIME = os.path.join(BUILD, "lib", "libfsdprt.so")
needs_tools = pytest.mark.skipif(
    not (_tool("fsdp-opt") and _tool("fsdp-compile") and os.path.exists(RUNTIME)),
    reason="fsdp-opt / fsdp-compile / libfsdprt not built",
)


def _mark_gpu(src, dst, gpu='{"tf32": false, "emulation": false}'):
    subprocess.run(
        [sys.executable, os.path.join(ROOT, "test", "Tools", "Inputs", "patch_manifest.py"),
         src, dst, "--set", f"gpu={gpu}"],
        check=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")),
    )  # fmt: skip


def _cpu_library(tmp_path, pipeline="lower=true compute=loops"):
    lowered, lib = tmp_path / "l.mlir", tmp_path / "step.so"
    subprocess.run(
        [_tool("fsdp-opt"), STEP, f"--fsdp-pipeline={pipeline}", "-o", lowered], check=True
    )
    subprocess.run([_tool("fsdp-compile"), lowered, "-o", lib], check=True, capture_output=True)
    rng = np.random.default_rng(5)
    np.save(tmp_path / "w.npy", rng.standard_normal((10, 4)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((8, 4)).astype(np.float32))
    return lib


def test_gpu_steps_are_told_by_the_manifest_or_the_device_symbols(tmp_path):
    assert aot.gpu_info({"gpu": {"tf32": True}}, "x") == {"tf32": True, "emulation": False}
    with pytest.raises(aot.AotError, match="x: corrupt manifest: 'gpu' is not an object"):
        aot.gpu_info({"gpu": True}, "x")
    # Without the key: the dynamic symbols name the device entry points.
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    for name, call in (("gpu", "mgpuStreamCreate"), ("host", "fsdprt_jit_wait")):
        src = tmp_path / f"{name}.c"
        src.write_text(f"void *{call}(void);\nvoid *f(void) {{ return {call}(); }}\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", tmp_path / f"{name}.so", src], check=True)
    assert aot.gpu_info({}, str(tmp_path / "gpu.so")) == {"tf32": False, "emulation": False}
    assert aot.gpu_info({}, str(tmp_path / "host.so")) is None


@needs_tools
def test_a_gpu_step_without_a_gpu_says_so_and_exits_77(tmp_path, capsys):
    # This runtime has the CUDA runtime built in; the machine has no driver
    # (or, with a GPU, CUDA_VISIBLE_DEVICES hides it).
    lib = _cpu_library(tmp_path)
    _mark_gpu(lib, tmp_path / "gpu.so")
    rt = aot.load_runtime(RUNTIME)
    aot._declare(rt)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        rc = aot.main(
            ["run", str(tmp_path / "gpu.so"), "--runtime", RUNTIME, "--inputs", str(tmp_path),
             "--outputs", str(tmp_path / "out")]
        )  # fmt: skip
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    err = capsys.readouterr().err
    assert rc == aot.EXIT_NO_GPU == 77
    assert "skipped (no GPU)" in err and "is a GPU step (compute=gpu)" in err
    assert "GPU needed" in err or "no GPU runtime" in err, err
    assert not (tmp_path / "out").exists()
    # The host step itself runs.
    assert aot.main(
        ["run", str(lib), "--runtime", RUNTIME, "--inputs", str(tmp_path),
         "--outputs", str(tmp_path / "cpu")]
    ) == 0  # fmt: skip


class _FakeGpu:
    """The runtime with its GPU entry points on host memory and NCCL
    communicators from a threads world: a host step runs through the device
    path (contexts, uploads, device-to-device feeding back, downloads,
    frees, synchronizes), and the bookkeeping is checked."""

    def __init__(self, real, devices=2):
        self.real, self.devices = real, devices
        self.buffers: dict[int, ctypes.Array] = {}
        self.freed: list[int] = []
        self.errors: list[str] = []
        self.syncs = self.contexts = self.device_copies = self.uploads = 0
        self.tf32 = None
        self.world = None
        self.broken: set[int] = set()  # devices whose context fails
        self.communicators = 0
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.real, name)

    @staticmethod
    def _set(ref, value):
        ref._obj.value = value

    def fsdprt_gpu_built(self):
        return 1

    def fsdprt_gpu_require_devices(self, n):
        return 0

    def fsdprt_gpu_device_count(self, ref):
        self._set(ref, self.devices)
        return 0

    def fsdprt_gpu_context_create(self, device, ref):
        assert 0 <= device < self.devices
        if device in self.broken:
            return 10  # FSDPRT_ERR_NO_DEVICE
        with self.lock:
            self.contexts += 1
        self._set(ref, 0x1000 + device)
        return 0

    def fsdprt_gpu_context_destroy(self, ctx):
        pass

    def fsdprt_gpu_compute_stream(self, ctx):
        return ctx

    def fsdprt_gpu_synchronize(self, ctx):
        with self.lock:
            self.syncs += 1
        return 0

    def fsdprt_gpu_context_error_message(self, ctx):
        return b""

    def fsdprt_gpu_set_tf32(self, on):
        self.tf32 = on

    def fsdprt_gpu_alloc(self, n):
        buf = ctypes.create_string_buffer(n)
        with self.lock:
            self.buffers[ctypes.addressof(buf)] = buf
        return ctypes.addressof(buf)

    def fsdprt_gpu_free(self, p):
        with self.lock:
            if self.buffers.pop(p, None) is None:
                self.errors.append(f"free of {p:#x}, not a device buffer")
            self.freed.append(p)

    def _device(self, p, n):
        with self.lock:
            if not any(a <= p and p + n <= a + len(b) for a, b in self.buffers.items()):
                self.errors.append(f"{p:#x}+{n} is not in a device buffer")

    def fsdprt_gpu_copy_to_device(self, dst, src, n):
        self._device(dst, n)
        with self.lock:
            self.uploads += 1
        ctypes.memmove(dst, src, n)
        return 0

    def fsdprt_gpu_copy_to_host(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return 0

    def mgpuMemcpy(self, dst, src, n, stream):
        self._device(dst, n)
        with self.lock:
            self.device_copies += 1
        ctypes.memmove(dst, src, n)

    def fsdprt_nccl_get_unique_id(self, ref):
        return 0

    def fsdprt_nccl_comm_create(self, ndims, dims, rank, uid, device, opts, ref):
        assert device == rank % self.devices
        with self.lock:
            self.communicators += 1
        with self.lock:
            if self.world is None:
                self.world = ctypes.c_void_p()
                assert (
                    self.real.fsdprt_threads_world_create(
                        ndims, dims, opts, ctypes.byref(self.world)
                    )
                    == 0
                )
        comm = ctypes.c_void_p()
        assert self.real.fsdprt_threads_comm(self.world, rank, ctypes.byref(comm)) == 0
        self._set(ref, comm.value)
        return 0

    def fsdprt_comm_destroy(self, comm):
        return 0


def _training_library(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    subprocess.run(
        [sys.executable, "-m", "fsdp_mlir.dev.gen", "mlp", "--widths", "16,10,7,4", "--batch", "2",
         "--mesh", "2x2", "-o", tmp_path / "m.mlir", "--data", tmp_path],
        check=True, env=env,
    )  # fmt: skip
    np.save(tmp_path / "lr.npy", np.float32(1e-2))
    lowered, lib = tmp_path / "l.mlir", tmp_path / "step.so"
    # arena=false: a GPU step's results are its own device allocations (it
    # plans no host arena), so the device path frees them; this CPU step
    # stands in for one on the fake GPU runtime.
    subprocess.run(
        [_tool("fsdp-opt"), tmp_path / "m.mlir", "-o", lowered,
         "--fsdp-pipeline=lower=true all-reduce-loss=true compute=loops optimizer=adamw"
         " arena=false"],
        check=True,
    )  # fmt: skip
    subprocess.run([_tool("fsdp-compile"), lowered, "-o", lib], check=True, capture_output=True)
    return lib


@needs_tools
@pytest.mark.parametrize("training", [False, True])
def test_the_device_path_matches_the_host_path(tmp_path, monkeypatch, training):
    # A training step feeds its updates back on the device (mgpuMemcpy) and
    # stacks its per-step loss.
    # arena=false as in _training_library: a stand-in for a GPU step.
    lib = (
        _training_library(tmp_path)
        if training
        else _cpu_library(tmp_path, "lower=true compute=loops arena=false")
    )
    _mark_gpu(lib, tmp_path / "gpu.so", '{"tf32": true, "emulation": false}')
    host = aot.run_step(str(lib), [str(tmp_path)], str(tmp_path / "host"), 3, RUNTIME)
    real = aot.load_runtime(RUNTIME)
    aot._declare(real)
    fake = _FakeGpu(real)
    monkeypatch.setattr(aot, "load_runtime", lambda path: fake)
    monkeypatch.setattr(aot, "_declare", lambda rt: None)
    monkeypatch.setattr(aot, "_nccl_version", lambda: None)  # ranks share the 2 "GPUs"
    report = aot.run_step(str(tmp_path / "gpu.so"), [str(tmp_path)], str(tmp_path / "dev"), 3)
    assert report["device"] == "gpu" and report["gpus"] == 2 and report["world"] == 4
    assert report["gpu"] == {"tf32": True, "emulation": False} and fake.tf32 == 1
    assert fake.contexts == 4 and fake.syncs >= 4 * 3, (fake.contexts, fake.syncs)
    assert fake.errors == []
    assert fake.buffers == {}, "device buffers left"  # every argument freed
    assert report["comm_per_step"] == host["comm_per_step"]
    # The host step's results are host buffers: fed back by uploads.
    args = len(aot.read_manifest(str(lib))["entries"][0]["args"])
    assert fake.device_copies == 0
    assert (fake.uploads > 4 * args) == training, (fake.uploads, args)
    assert aot.compare_dirs(str(tmp_path / "dev"), str(tmp_path / "host"), 0.0) == []


@pytest.fixture(params=["numpy", "python"])
def compare_path(request, monkeypatch):
    """compare_dirs with numpy and in pure Python (a machine without numpy)."""
    if request.param == "python":
        monkeypatch.setattr(aot, "_compare_numpy", lambda *a: None)
    return request.param


def test_compare_finds_differences_both_ways(tmp_path, compare_path):
    for d, v in (("a", [1.0, 2.0]), ("b", [1.0 + 1e-6, 2.0]), ("c", [1.1, 2.0]),
                 ("n", [np.nan, 2.0])):  # fmt: skip
        os.makedirs(tmp_path / d)
        np.save(tmp_path / d / "x.npy", np.array(v, np.float32))
        np.save(tmp_path / d / "h.npy", np.array(v, np.float32).view(np.uint16)[1::2])  # bf16
    a = str(tmp_path / "a")
    assert aot.compare_dirs(str(tmp_path / "b"), a, 1e-5) == []
    assert len(aot.compare_dirs(str(tmp_path / "b"), a, 0.0)) == 1
    assert len(aot.compare_dirs(str(tmp_path / "c"), a, 1e-5)) == 2
    assert len(aot.compare_dirs(str(tmp_path / "n"), a, 1e-5)) == 2
    assert len(aot.compare_dirs(str(tmp_path / "n"), a, 1e-5, metric="norm")) == 2


def test_compare_in_the_norm_tolerates_cancelling_elements(tmp_path, compare_path):
    want = np.array([1.0, -1.0, 1e-4], np.float32)
    got = want + np.array([0, 0, 1e-6], np.float32)  # 1% off in one small element
    for d, v in (("want", want), ("got", got)):
        os.makedirs(tmp_path / d)
        np.save(tmp_path / d / "g.npy", v)
    got_dir, want_dir = str(tmp_path / "got"), str(tmp_path / "want")
    assert aot.compare_dirs(got_dir, want_dir, 1e-5)  # elementwise: 1e-2
    assert aot.compare_dirs(got_dir, want_dir, 1e-5, metric="norm") == []
    assert aot.compare_dirs(got_dir, want_dir, 1e-7, metric="norm")
    np.save(tmp_path / "got" / "g.npy", np.full(3, np.nan, np.float32))
    assert aot.compare_dirs(got_dir, want_dir, 1e-5, metric="norm")


# The runtime built on the host emulation of CUDA, cuBLAS and NCCL, and
# steps whose kernels are host functions (compute=gpu gpu-emulation=true):
# a GPU step through the device path without a GPU.
EMULATED = os.path.join(BUILD, "lib", "cuda-emulation", "libfsdprt.so")


@needs_tools
@pytest.mark.skipif(not os.path.exists(EMULATED), reason="no emulated libfsdprt built")
@pytest.mark.parametrize("training", [False, True])
def test_an_emulated_gpu_step_runs_on_the_device_path_like_the_cpu_path(tmp_path, training):
    lib = _training_library(tmp_path) if training else _cpu_library(tmp_path)  # inputs
    model = tmp_path / "m.mlir" if training else STEP
    extra = " all-reduce-loss=true optimizer=adamw" if training else ""
    gpu, emu = tmp_path / "gpu.mlir", tmp_path / "emu.so"
    r = subprocess.run(
        [_tool("fsdp-opt"), model, "-o", gpu,
         f"--fsdp-pipeline=lower=true{extra} compute=gpu gpu-emulation=true"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    subprocess.run([_tool("fsdp-compile"), gpu, "-o", emu], check=True, capture_output=True)
    info = aot.gpu_info(aot.read_manifest(str(emu)), str(emu))
    assert info is not None
    host = aot.run_step(str(lib), [str(tmp_path)], str(tmp_path / "host"), 3, RUNTIME)
    # Another libfsdprt.so: another process (a step binds to the first one).
    with pytest.raises(aot.AotError, match="cannot replace it"):
        aot.load_runtime(EMULATED)
    subprocess.run(
        [sys.executable, "-m", "fsdp_mlir.aot", "run", emu, "--runtime", EMULATED, "--inputs",
         tmp_path, "--outputs", tmp_path / "emu", "--steps", "3", "--report", tmp_path / "r.json"],
        check=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")),
    )  # fmt: skip
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["device"] == "gpu" and report["world"] == host["world"]
    assert report["gpu"] == {"tf32": False, "emulation": True} and len(report["step_s"]) == 3
    assert (
        aot.compare_dirs(str(tmp_path / "emu"), str(tmp_path / "host"), 1e-5, metric="norm") == []
    )


@needs_tools
def test_no_rank_sets_up_nccl_unless_every_rank_has_its_gpu(tmp_path, monkeypatch):
    lib = _cpu_library(tmp_path)
    _mark_gpu(lib, tmp_path / "gpu.so")
    real = aot.load_runtime(RUNTIME)
    aot._declare(real)
    fake = _FakeGpu(real, devices=4)
    fake.broken = {2}
    monkeypatch.setattr(aot, "load_runtime", lambda path: fake)
    monkeypatch.setattr(aot, "_declare", lambda rt: None)
    with pytest.raises(aot.AotError) as e:
        aot.run_step(str(tmp_path / "gpu.so"), [str(tmp_path)], str(tmp_path / "out"))
    assert "rank 2: cannot use GPU 2" in str(e.value)
    assert "rank 0: not setting up NCCL: rank 2 could not use a GPU" in str(e.value)
    assert fake.communicators == 0


@needs_tools
def test_an_emulation_step_is_refused_by_the_real_runtime(tmp_path, capsys):
    lib = _cpu_library(tmp_path)
    _mark_gpu(lib, tmp_path / "emu.so", '{"tf32": false, "emulation": true}')
    rc = aot.main(
        ["run", str(tmp_path / "emu.so"), "--runtime", RUNTIME, "--inputs", str(tmp_path),
         "--outputs", str(tmp_path / "out")]
    )  # fmt: skip
    assert rc == 1
    assert "compiled with gpu-emulation=true" in capsys.readouterr().err

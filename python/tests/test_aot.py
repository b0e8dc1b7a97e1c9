"""The LLVM-free runner (fsdp_mlir.aot, over fsdp_mlir.runner) and step
libraries in the in-process runner: its .npy files against numpy's, its
shard cutting and assembly against a brute-force model, its CPU check, and
(with the tools built) a step library run by fsdp_mlir.runner and by
fsdp_mlir.aot with the JIT's bits, without numpy."""

import json
import os
import subprocess
import sys

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
    # Which kernels are right for this CPU: unittests/Runner/BlasTest.cpp.
    core = json.loads(out.stdout.strip().splitlines()[-1])
    assert core is not None


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


def test_gpu_steps_are_told_by_the_manifest():
    assert aot.gpu_info({"gpu": {"tf32": True}}, "x") == {"tf32": True, "emulation": False}
    with pytest.raises(aot.AotError, match="x: corrupt manifest: 'gpu' is not an object"):
        aot.gpu_info({"gpu": True}, "x")
    assert aot.gpu_info({}, "x") is None


@needs_tools
def test_a_gpu_step_without_a_gpu_says_so_and_exits_77(tmp_path, capsys):
    # This runtime has the CUDA runtime built in; the machine has no driver
    # (or, with a GPU, CUDA_VISIBLE_DEVICES hides it).
    lib = _cpu_library(tmp_path)
    _mark_gpu(lib, tmp_path / "gpu.so")
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
    assert "skipped (no GPU)" in err and "is a compute=gpu step" in err
    assert "GPU needed" in err or "no GPU runtime" in err, err
    assert not (tmp_path / "out").exists()
    # The host step itself runs.
    assert aot.main(
        ["run", str(lib), "--runtime", RUNTIME, "--inputs", str(tmp_path),
         "--outputs", str(tmp_path / "cpu")]
    ) == 0  # fmt: skip


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
def test_an_emulation_step_is_refused_by_the_real_runtime(tmp_path, capsys):
    lib = _cpu_library(tmp_path)
    _mark_gpu(lib, tmp_path / "emu.so", '{"tf32": false, "emulation": true}')
    rc = aot.main(
        ["run", str(tmp_path / "emu.so"), "--runtime", RUNTIME, "--inputs", str(tmp_path),
         "--outputs", str(tmp_path / "out")]
    )  # fmt: skip
    assert rc == 1
    assert "compiled with gpu-emulation=true" in capsys.readouterr().err


@needs_tools
@pytest.mark.skipif(not runner.available(), reason="libfsdprun not built")
def test_the_aot_runner_needs_no_numpy_and_one_runtime_per_process(tmp_path):
    lib = _cpu_library(tmp_path)
    half = tmp_path / "more"
    half.mkdir()
    os.replace(tmp_path / "x.npy", half / "x.npy")  # two input directories
    code = (
        "import sys; sys.modules['numpy'] = None; from fsdp_mlir import aot, runner; "
        "r = aot.run_step(sys.argv[1], [sys.argv[2], sys.argv[3]], sys.argv[4], 2, sys.argv[5]); "
        "print(r['world'], r['runtime_library'] == runner.loaded()[1]); "
        "runner.load(sys.argv[6])"
    )  # fmt: skip
    other = EMULATED if os.path.exists(EMULATED) else str(lib)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run(
        [sys.executable, "-c", code, lib, tmp_path, half, tmp_path / "out", RUNTIME, other],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert r.stdout.split() == ["4", "True"], r.stdout + r.stderr
    assert "this process already runs with" in r.stderr and "in a new process" in r.stderr
    want = tmp_path / "want"
    subprocess.run(
        [_tool("fsdp-run"), lib, "--inputs", tmp_path, "--inputs", half, "--outputs", want],
        check=True, capture_output=True,
    )  # fmt: skip
    assert (tmp_path / "out" / "y.npy").read_bytes() == (want / "y.npy").read_bytes()

"""The in-process runner (fsdp_mlir.runner over libfsdprun.so): the same
bits as the fsdp-run command line on the same module and inputs, its
training state kept between runs, and clear errors for misuse."""

import os
import subprocess
import sys

import numpy as np
import pytest

from fsdp_mlir import runner

TOOLS = os.environ.get("FSDP_TOOLS_DIR", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP = os.path.join(ROOT, "test", "Tools", "Inputs", "step.mlir")


def _tool(name):
    path = os.path.join(TOOLS, name)
    return path if os.access(path, os.X_OK) else None


pytestmark = pytest.mark.skipif(
    not (_tool("fsdp-opt") and _tool("fsdp-run") and runner.available()),
    reason="fsdp-opt / libfsdprun not built",
)


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    d = tmp_path_factory.mktemp("step")
    out = d / "lowered.mlir"
    subprocess.run([_tool("fsdp-opt"), STEP, "--fsdp-pipeline=lower=true", "-o", out], check=True)
    rng = np.random.default_rng(3)
    np.save(d / "w.npy", rng.standard_normal((10, 4)).astype(np.float32))
    np.save(d / "x.npy", rng.standard_normal((8, 4)).astype(np.float32))
    return d


def test_in_process_matches_the_command_line(lowered):
    subprocess.run(
        [
            _tool("fsdp-run"),
            lowered / "lowered.mlir",
            "--inputs",
            lowered,
            "--outputs",
            lowered / "out",
        ],
        check=True,
        capture_output=True,
    )
    cli = np.load(lowered / "out" / "y.npy")
    w, x = np.load(lowered / "w.npy"), np.load(lowered / "x.npy")
    with runner.Program(lowered / "lowered.mlir") as prog:
        assert prog.world_size == 4 and not prog.training
        assert prog.inputs == {"w": ("<f4", (10, 4)), "x": ("<f4", (8, 4))}
        prog.set_input("w", w)
        prog.set_input("x", x)
        y = prog.run()["y"]
        assert y.tobytes() == cli.tobytes()
        # Inputs from a directory, as fsdp-run reads them: the same bits.
        prog2 = runner.Program((lowered / "lowered.mlir").read_text(), text=True)
        assert prog2.run(input_dir=lowered)["y"].tobytes() == cli.tobytes()
        prog2.close()
    np.testing.assert_allclose(y, x[:2] @ w.T, rtol=1e-5)


def test_timing_report(lowered):
    with runner.Program(lowered / "lowered.mlir") as prog:
        prog.run(steps=3, warmup=1, input_dir=lowered)
        report = prog.report()
        assert report["steps"] == 3 and report["warmup"] == 1 and len(report["step_s"]) == 3


def test_read_only_arguments_are_cut_once_per_session(lowered, tmp_path):
    """The step never writes w or x (their ports say read_only): a session
    cuts their shards once (4 ranks x 2 arguments), not before every step
    or run; a value set in memory, or another file, is cut again."""
    text = (lowered / "lowered.mlir").read_text()
    assert "fsdp.read_only_args = {step = array<i64: 0, 1>}" in text
    w, x = np.load(lowered / "w.npy"), np.load(lowered / "x.npy")
    with runner.Program(lowered / "lowered.mlir") as prog:
        y = prog.run(steps=3, input_dir=lowered)["y"]
        assert prog.report()["input_slices"] == 8
        assert prog.run(steps=2, input_dir=lowered)["y"].tobytes() == y.tobytes()
        assert prog.report()["input_slices"] == 0
        prog.set_input("x", 2 * x)
        y2 = prog.run(input_dir=lowered)["y"]
        np.testing.assert_allclose(y2, 2 * x[:2] @ w.T, rtol=1e-5)
        assert prog.report()["input_slices"] == 4
        other = tmp_path / "other"
        other.mkdir()
        np.save(other / "w.npy", 3 * w)
        np.testing.assert_allclose(prog.run(input_dir=other)["y"], 6 * x[:2] @ w.T, rtol=1e-5)
        assert prog.report()["input_slices"] == 4
    np.testing.assert_allclose(y, x[:2] @ w.T, rtol=1e-5)


def test_misuse_is_an_error_not_a_crash(lowered):
    prog = runner.Program(lowered / "lowered.mlir")
    with pytest.raises(runner.RunnerError, match="no run has completed"):
        prog.output("y")
    with pytest.raises(runner.RunnerError, match="dtype mismatch"):
        prog.set_input("w", np.zeros((10, 4), np.float64))
    with pytest.raises(runner.RunnerError, match="expected \\[10, 4\\]"):
        prog.set_input("w", np.zeros((4, 10), np.float32))
    with pytest.raises(runner.RunnerError, match="no input 'v'"):
        prog.set_input("v", np.zeros((4,), np.float32))
    with pytest.raises(runner.RunnerError, match="input 'w' is not set"):
        prog.run()
    prog.set_input("w", np.zeros((10, 4), np.float32))
    prog.set_input("x", np.ones((8, 4), np.float32))
    assert (prog.run()["y"] == 0).all()  # the failed run left it usable
    prog.close()
    with pytest.raises(runner.RunnerError, match="closed"):
        prog.run()
    with pytest.raises(runner.RunnerError, match="cannot read"):
        runner.Program(lowered / "missing.mlir")
    with pytest.raises(runner.RunnerError, match="cannot parse"):
        runner.Program("not mlir {", text=True)


def test_library_keeps_its_llvm_to_itself():
    """Loading the runner does not put its libLLVM into the process's global
    scope, where it would interpose on another LLVM loaded later (torch's
    triton crashed in its static initializers)."""
    pytest.importorskip("triton")
    code = "from fsdp_mlir import runner; runner.load(); import triton"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]

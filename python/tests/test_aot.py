"""The LLVM-free runner (fsdp_mlir.aot) and step libraries in the
in-process runner: its .npy files against numpy's, its shard cutting and
assembly against a brute-force model, its CPU check, and (with the tools
built) a step library run by fsdp_mlir.runner and by fsdp_mlir.aot with the
JIT's bits."""

import os
import subprocess

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

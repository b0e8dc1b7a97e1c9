"""The generated MLIR, lowered and run with upstream tools only, matches numpy."""

import os

import numpy as np
import pytest
from conftest import build, generate, requires_upstream_tools

from fsdp_mlir import model as M
from fsdp_mlir.dev import check, gen, upstream_exec
from fsdp_mlir.dev import reference as R
from fsdp_mlir.dev.upstream_exec import generic_mesh_form, strip_fsdp

LAYOUT = "#fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>"
SIGNATURE = """module {
  fsdp.mesh @mesh [replicate = 2, shard = 4]
  func.func @step(
      %w: tensor<10x16xf32> {fsdp.layout = LAYOUT, fsdp.name = "a{b,c}", fsdp.unit = "l0"},
      %x: tensor<8x16xf32> {bufferization.writable = true, fsdp.name = "x"})
      -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
          tensor<10x16xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad"}) {
    %m = "fsdp.marker"() {fsdp.keep = 1} : () -> tensor<f32>
    return %m, %w : tensor<f32>, tensor<10x16xf32>
  }
}
""".replace("LAYOUT", LAYOUT)


def test_strip_fsdp_signature():
    out = strip_fsdp(SIGNATURE)
    assert "fsdp.mesh" not in out and "fsdp.layout" not in out and "fsdp.name" not in out
    assert "%w: tensor<10x16xf32>,\n" in out
    assert "%x: tensor<8x16xf32> {bufferization.writable = true})" in out
    assert (
        "-> (tensor<f32>,\n          tensor<10x16xf32>) attributes {llvm.emit_c_interface} {" in out
    )
    # The body is left alone.
    assert '"fsdp.marker"() {fsdp.keep = 1}' in out


def test_strip_fsdp_merges_existing_attributes():
    text = SIGNATURE.replace(") {\n    %m", ') attributes {sym_visibility = "public"} {\n    %m')
    out = strip_fsdp(text)
    assert 'attributes {sym_visibility = "public", llvm.emit_c_interface} {' in out
    assert strip_fsdp(SIGNATURE, c_interface=False).count("llvm.emit_c_interface") == 0


def test_generic_mesh_form():
    out = generic_mesh_form(SIGNATURE)
    assert (
        '  "fsdp.mesh"() {sym_name = "mesh", axis_names = ["replicate", "shard"],'
        " axis_sizes = array<i64: 2, 4>} : () -> ()\n" in out
    )


def run_single_rank(tmp_path, argv):
    """Compile the mesh-size-1 step and run it on the (only) rank's batch."""
    text, data, model = generate(tmp_path, argv + ["--mesh", "1"])
    so = upstream_exec.compile_step(text, str(tmp_path / "work"))
    step = upstream_exec.load_step(model, so)
    values = M.load_inputs(model, data)
    return model, upstream_exec.run_rank(step, model, values), R.reference_results(model, values)


CASES = {
    "mlp-gelu": ["mlp", "--widths", "8,12,10,5", "--batch", "3"],
    "mlp-relu": ["mlp", "--widths", "8,12,5", "--batch", "4", "--act", "relu"],
    "transformer": [
        "transformer",
        "--blocks",
        "2",
        "--dim",
        "8",
        "--ffn",
        "12",
        "--seq",
        "4",
        "--batch",
        "2",
    ],
    "transformer-attention": [
        "transformer",
        "--blocks",
        "2",
        "--dim",
        "8",
        "--ffn",
        "12",
        "--seq",
        "5",
        "--batch",
        "2",
        "--attention",
    ],
}


@requires_upstream_tools
@pytest.mark.parametrize("case", sorted(CASES))
def test_single_rank_matches_reference(tmp_path, case):
    model, got, ref = run_single_rank(tmp_path, CASES[case])
    for r in model["results"]:
        assert got[r["name"]].shape == tuple(r["shape"])
        res = check.compare(ref[r["name"]], got[r["name"]], rtol=1e-5, atol=0.0)
        assert res["ok"], (r["name"], res)


@requires_upstream_tools
def test_bf16_single_rank(tmp_path):
    model, got, ref = run_single_rank(tmp_path, CASES["mlp-gelu"] + ["--dtype", "bf16"])
    for r in model["results"]:
        # Results are rounded to bf16: one rounding step (2^-8 relative) apart.
        res = check.compare(ref[r["name"]], got[r["name"]], rtol=2**-7, atol=0.0)
        assert res["ok"], (r["name"], res)


@requires_upstream_tools
def test_mismatch_would_be_caught(tmp_path):
    """Same program, wrong inputs: the comparison must fail."""
    text, data, model = generate(tmp_path, CASES["mlp-gelu"] + ["--mesh", "1"])
    step = upstream_exec.load_step(model, upstream_exec.compile_step(text, str(tmp_path / "work")))
    values = M.load_inputs(model, data)
    ref = R.reference_results(model, values)
    values["l1.bias"] = values["l1.bias"] * 1.01
    got = upstream_exec.run_rank(step, model, values)
    assert not all(
        check.compare(ref[r["name"]], got[r["name"]], 1e-5, 0.0)["ok"] for r in model["results"]
    )


@requires_upstream_tools
@pytest.mark.parametrize(
    "argv",
    [
        ["mlp", "--widths", "8,10,6", "--batch", "2", "--mesh", "2x2", "--policy", "balanced"],
        [
            "transformer",
            "--blocks",
            "1",
            "--dim",
            "8",
            "--ffn",
            "12",
            "--seq",
            "3",
            "--batch",
            "1",
            "--mesh",
            "3",
            "--attention",
        ],
    ],
    ids=["mlp-hsdp", "transformer-3"],
)
def test_data_parallel_emulation_passes_checker(tmp_path, argv, capsys):
    """Every rank runs the step on its micro-batch; the rank average (what the
    compiler's avg collectives produce) passes the checker against the
    global-batch reference."""
    text, data, model = generate(tmp_path, argv)
    mlir = str(tmp_path / "model.mlir")
    out = str(tmp_path / "out")
    assert upstream_exec.main([mlir, "--data", data, "--out", out]) == 0
    assert sorted(os.listdir(out)) == sorted(r["name"] + ".npy" for r in model["results"])
    assert check.main([data, out]) == 0
    assert "PASS" in capsys.readouterr().out
    # A single rank's gradient is not the global one.
    values = M.load_inputs(model, data)
    step = upstream_exec.load_step(model, upstream_exec.compile_step(text, str(tmp_path / "work")))
    rank0 = upstream_exec.run_rank(step, model, M.rank_slice(model, values, 0))
    upstream_exec.write_results(model, rank0, out)
    assert check.main([data, out]) == 1
    assert check.main([data, out, "--loss-rank", "0", "--rtol", "1e9"]) == 0


def test_missing_tools_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(upstream_exec, "find_tool", lambda name: None)
    with pytest.raises(upstream_exec.ToolError, match="mlir-opt"):
        upstream_exec.compile_step(gen.emit_step(build(CASES["mlp-relu"])), str(tmp_path))


def test_result_arrays_keep_scalar_shape():
    assert M.to_storage(np.float64(1.5), "f32").shape == ()
    assert M.to_storage(np.float64(1.5), "bf16").shape == ()

"""Generator: options, layouts, files, and the shape of the emitted MLIR."""

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import build, generate, requires_upstream_tools

from fsdp_mlir import model as M
from fsdp_mlir.dev import gen
from fsdp_mlir.dev.upstream_exec import find_tool, generic_mesh_form

SMALL_MLP = ["mlp", "--widths", "16,10,6", "--batch", "3"]
SMALL_TR = ["transformer", "--blocks", "1", "--dim", "8", "--ffn", "12", "--seq", "4"]


def arg_attrs(text):
    """{fsdp.name: attribute dict text} for every function argument."""
    sig = text[text.index("func.func") : text.index("->")]
    return {
        m.group(2): m.group(1)
        for m in re.finditer(r"\{([^{}]*fsdp\.name = \"([^\"]+)\"[^{}]*)\}", sig)
    }


def layout_of(text, name):
    m = re.search(r"fsdp\.layout = (#fsdp\.layout<.*?>)(?:, fsdp)", arg_attrs(text)[name])
    return m.group(1)


@pytest.mark.parametrize(
    "spec,axes,shape",
    [("8", ["shard"], [8]), ("1", ["shard"], [1]), ("2x4", ["replicate", "shard"], [2, 4])],
)
def test_parse_mesh(spec, axes, shape):
    mesh = M.parse_mesh(spec)
    assert mesh["axes"] == axes and mesh["shape"] == shape
    assert M.mesh_world(mesh) == int(np.prod(shape))


@pytest.mark.parametrize("spec", ["0", "2x0", "2x2x2", "abc", "x4", ""])
def test_parse_mesh_rejects(spec):
    with pytest.raises(M.ModelError):
        M.parse_mesh(spec)


def test_mesh_line_and_signature(tmp_path):
    text, data, model = generate(tmp_path, SMALL_MLP + ["--mesh", "2x4"])
    assert "  fsdp.mesh @mesh [replicate = 2, shard = 4]\n" in text
    assert re.search(r"%l0_weight: tensor<10x16xf32> \{fsdp\.layout = ", text)
    assert '%x: tensor<3x16xf32> {fsdp.name = "x"}' in text
    assert '%y: tensor<3x6xf32> {fsdp.name = "y"}' in text
    assert 'tensor<f32> {fsdp.loss, fsdp.name = "loss"}' in text
    for i, p in enumerate(model["params"]):
        shape = "x".join(map(str, p["shape"]))
        assert (
            f'tensor<{shape}xf32> {{fsdp.grad_of = {i} : i64, fsdp.name = "grad.{p["name"]}"}}'
            in text
        )
        assert f'fsdp.unit = "{p["unit"]}"' in arg_attrs(text)[p["name"]]
    assert model["args"] == ["l0.weight", "l0.bias", "l1.weight", "l1.bias", "x", "y"]


@pytest.mark.parametrize(
    "opts,weight,bias",
    [
        ([], "[shard<0>]", "[shard<0>]"),
        (["--mesh", "2x4"], "[replicate, shard<0>]", "[replicate, shard<0>]"),
        (["--placement", "dim1"], "[shard<1>]", "[shard<0>]"),
        (
            ["--mesh", "2x4", "--placement", "dim1"],
            "[replicate, shard<1>]",
            "[replicate, shard<0>]",
        ),
        (["--placement", "replicate"], "[replicate]", "[replicate]"),
        (
            ["--mesh", "2x2", "--placement", "replicate"],
            "[replicate, replicate]",
            "[replicate, replicate]",
        ),
        (
            ["--policy", "balanced"],
            "[shard<0>], policy = balanced",
            "[shard<0>], policy = balanced",
        ),
    ],
)
def test_layouts(tmp_path, opts, weight, bias):
    text, _, _ = generate(tmp_path, SMALL_MLP + opts)
    assert layout_of(text, "l0.weight") == f"#fsdp.layout<@mesh, {weight}>"
    assert layout_of(text, "l0.bias") == f"#fsdp.layout<@mesh, {bias}>"


def test_strided_layout(tmp_path):
    # 12 and 24 rows split as sf=2 (or 3) over k=2 (mesh 2x2's shard axis).
    argv = ["mlp", "--widths", "4,12,24", "--mesh", "2x2", "--placement", "strided"]
    text, _, _ = generate(tmp_path, argv)
    assert layout_of(text, "l0.weight") == "#fsdp.layout<@mesh, [replicate, strided_shard<0, 2>]>"
    assert layout_of(text, "l0.bias") == "#fsdp.layout<@mesh, [replicate, shard<0>]>"
    text, _, _ = generate(tmp_path, argv + ["--strided-sf", "3"], name="sf3")
    assert "strided_shard<0, 3>" in layout_of(text, "l0.weight")


def test_strided_not_divisible_is_an_error(tmp_path, capsys):
    argv = ["mlp", "--widths", "16,10,6", "--mesh", "4", "--placement", "strided"]
    assert gen.main(argv + ["-o", str(tmp_path / "m.mlir")]) == 2
    err = capsys.readouterr().err
    assert "l0.weight" in err and "divisible" in err and "sf*k = 2*4 = 8" in err
    assert not (tmp_path / "m.mlir").exists()


def test_uneven_sizes_are_accepted(tmp_path):
    # 10 and 6 rows, 16 columns over 4 or 3 ranks: not divisible.
    for opts in (["--mesh", "4"], ["--mesh", "3", "--placement", "dim1", "--policy", "balanced"]):
        text, _, model = generate(tmp_path, SMALL_MLP + opts, name="m" + opts[1])
        assert model["params"][0]["shape"] == [10, 16]


def test_data_files_at_global_batch(tmp_path):
    _, data, model = generate(tmp_path, SMALL_MLP + ["--mesh", "2x4"])
    assert model["world"] == 8 and model["local_batch"] == 3 and model["global_batch"] == 24
    files = sorted(os.listdir(data))
    expected = sorted([n + ".npy" for n in model["args"]] + ["model.json"])
    assert files == expected
    assert np.load(os.path.join(data, "x.npy")).shape == (24, 16)
    assert np.load(os.path.join(data, "y.npy")).shape == (24, 6)
    assert np.load(os.path.join(data, "l1.weight.npy")).shape == (6, 10)
    assert np.load(os.path.join(data, "l1.bias.npy")).dtype == np.float32
    with open(os.path.join(data, "model.json")) as f:
        j = json.load(f)
    assert j["kind"] == "mlp" and j["config"] == {"widths": [16, 10, 6], "act": "gelu"}
    assert j["mesh"] == {"name": "mesh", "axes": ["replicate", "shard"], "shape": [2, 4]}
    assert [r["name"] for r in j["results"]] == ["loss"] + ["grad." + n for n in model["args"][:4]]


def test_transformer_files_and_shapes(tmp_path):
    text, data, model = generate(tmp_path, SMALL_TR + ["--batch", "2", "--attention"])
    names = [p["name"] for p in model["params"]]
    assert names == [
        "blocks.0.attn_norm.weight",
        "blocks.0.wq.weight",
        "blocks.0.wk.weight",
        "blocks.0.wv.weight",
        "blocks.0.wo.weight",
        "blocks.0.mlp_norm.weight",
        "blocks.0.w1.weight",
        "blocks.0.w3.weight",
        "blocks.0.w2.weight",
    ]
    assert {p["unit"] for p in model["params"]} == {"blocks.0"}
    assert np.load(os.path.join(data, "x.npy")).shape == (16, 4, 8)
    assert "%x: tensor<2x4x8xf32>" in text
    assert "tensor<12x8xf32> {fsdp.layout" in text  # w1: ffn x dim
    assert "tensor<8x12xf32> {fsdp.layout" in text  # w2: dim x ffn
    no_attn, _, m2 = generate(tmp_path, SMALL_TR, name="noattn")
    assert "wq" not in no_attn and len(m2["params"]) == 4


def test_widths_and_layers(tmp_path):
    m = build(["mlp", "--layers", "3", "--hidden", "7", "--in", "5", "--out", "2"])
    assert m["config"]["widths"] == [5, 7, 7, 2]
    m = build(["mlp", "--layers", "3", "--widths", "4,9,3"])
    assert m["config"]["widths"] == [4, 9, 3]
    assert gen.main(["mlp", "--widths", "4", "-o", str(tmp_path / "a.mlir")]) == 2


def test_bf16_storage(tmp_path):
    text, data, model = generate(tmp_path, SMALL_MLP + ["--dtype", "bf16"])
    assert "%l0_weight: tensor<10x16xbf16>" in text
    assert "tensor<10x16xbf16> {fsdp.grad_of = 0 : i64" in text
    assert "tensor<f32> {fsdp.loss" in text
    raw = np.load(os.path.join(data, "l0.weight.npy"))
    assert raw.dtype == np.uint16 and raw.shape == (10, 16)
    values = M.from_storage(raw, "bf16")
    # bf16 bits are the upper half of the f32 bits.
    as_f32 = (raw.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(values, as_f32)


def test_seed_determinism(tmp_path):
    _, d1, _ = generate(tmp_path, SMALL_MLP + ["--seed", "3"], name="a")
    _, d2, _ = generate(tmp_path, SMALL_MLP + ["--seed", "3"], name="b")
    _, d3, _ = generate(tmp_path, SMALL_MLP + ["--seed", "4"], name="c")
    a, b, c = (np.load(os.path.join(d, "l0.weight.npy")) for d in (d1, d2, d3))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_stdout_output(capsys):
    assert gen.main(SMALL_MLP) == 0
    assert capsys.readouterr().out.startswith("module {\n  fsdp.mesh @mesh [shard = 8]\n")


def body_of(text):
    return text[text.index(") {\n", text.index("->")) :]


def uses_around_loss(text, name):
    """(used in forward, used in backward) for parameter `name`: uses of its
    SSA value before / after the loss is computed."""
    body = body_of(text)
    loss_at = re.search(r"^\s*%loss\d+ = ", body, re.M).start()
    ssa = "%" + re.sub(r"\W", "_", name)
    uses = [m.start() for m in re.finditer(re.escape(ssa) + r"\b", body)]
    return any(u < loss_at for u in uses), any(u > loss_at for u in uses)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_mlp_weights_reread_in_backward(dtype):
    """dX = dZ . W re-reads every weight but the first layer's (no dX needed
    for the data); biases are forward-only."""
    model = build(["mlp", "--widths", "6,5,4,3", "--dtype", dtype])
    text = gen.emit_step(model)
    for p in model["params"]:
        fwd, bwd = uses_around_loss(text, p["name"])
        assert fwd, p["name"]
        assert bwd == (p["name"] in ("l1.weight", "l2.weight")), p["name"]


@pytest.mark.parametrize("attention", [False, True])
def test_transformer_params_reread_in_backward(attention):
    model = build(SMALL_TR + ["--blocks", "2"] + (["--attention"] if attention else []))
    text = gen.emit_step(model)
    for p in model["params"]:
        assert uses_around_loss(text, p["name"]) == (True, True), p["name"]


def test_only_upstream_ops_in_body():
    for argv in (SMALL_MLP + ["--act", "relu"], SMALL_TR + ["--attention"]):
        body = body_of(gen.emit_step(build(argv)))
        ops = set(re.findall(r"= ([a-z_]+\.[a-z_]+)", body))
        ops |= set(re.findall(r"^\s*([a-z_]+\.[a-z_]+) ", body, re.M))
        assert ops, "no ops found"
        assert all(
            op.split(".")[0] in {"linalg", "tensor", "arith", "math", "func"}
            or op in {"linalg.yield"}
            for op in ops
        ), ops
        assert "return" in body


@requires_upstream_tools
@pytest.mark.parametrize(
    "argv",
    [
        SMALL_MLP + ["--mesh", "2x4"],
        SMALL_MLP + ["--act", "relu", "--placement", "dim1", "--policy", "balanced"],
        SMALL_MLP + ["--dtype", "bf16", "--placement", "replicate"],
        ["mlp", "--widths", "4,8,4", "--placement", "strided", "--mesh", "2"],
        SMALL_TR + ["--attention", "--mesh", "2x2"],
    ],
    ids=["hsdp", "relu-dim1-balanced", "bf16-replicate", "strided", "transformer"],
)
def test_upstream_mlir_opt_parses(argv):
    """Upstream mlir-opt verifies the module once the mesh op is in generic form
    (#fsdp.layout stays an opaque attribute of an unregistered dialect)."""
    text = generic_mesh_form(gen.emit_step(build(argv)))
    proc = subprocess.run(
        [find_tool("mlir-opt"), "--allow-unregistered-dialect", "-"],
        input=text,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout
    assert printed.count("fsdp.layout = #fsdp.layout<@mesh") == len(build(argv)["params"])
    assert '"fsdp.mesh"()' in printed


def project_fsdp_opt():
    """The project's fsdp-opt when built (the ctest hook sets FSDP_TOOLS_DIR)."""
    d = os.environ.get("FSDP_TOOLS_DIR")
    path = os.path.join(d, "fsdp-opt") if d else shutil.which("fsdp-opt")
    return path if path and os.access(path, os.X_OK) else None


@pytest.mark.skipif(project_fsdp_opt() is None, reason="fsdp-opt not built")
@pytest.mark.parametrize(
    "argv",
    [
        SMALL_MLP + ["--mesh", "2x4"],
        SMALL_MLP + ["--placement", "dim1", "--policy", "balanced", "--mesh", "3"],
        SMALL_MLP + ["--dtype", "bf16", "--placement", "replicate"],
        ["mlp", "--widths", "4,8,4", "--placement", "strided", "--mesh", "2x2"],
        SMALL_TR + ["--attention", "--mesh", "1"],
    ],
    ids=["hsdp", "dim1-balanced", "bf16-replicate", "strided", "transformer"],
)
def test_project_fsdp_opt_verifies(argv):
    """The generated modules, custom mesh syntax included, verify with fsdp-opt."""
    proc = subprocess.run(
        [project_fsdp_opt(), "-", "-o", os.devnull],
        input=gen.emit_step(build(argv)),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr

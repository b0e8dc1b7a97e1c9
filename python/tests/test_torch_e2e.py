"""PyTorch models end to end: export -> fsdp-opt --fsdp-pipeline -> fsdp-run,
loss and every gradient against torch autograd on the global batch (float64)."""

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step, load_results  # noqa: E402
from fsdp_mlir.torch.export import reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = 1e-5
GLOBAL_BATCH = 8


def mlp_case():
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(2)
    batch = (torch.randn(GLOBAL_BATCH, 6, generator=g), torch.randn(GLOBAL_BATCH, 3, generator=g))
    return T.MLP(), T.mse_loss, batch, [torch.nn.Linear]


def gpt_case():
    torch.manual_seed(3)
    return T.GPT(), T.lm_loss, T.gpt_batch(GLOBAL_BATCH), [T.Block]


def cnn_case():
    torch.manual_seed(4)
    g = torch.Generator().manual_seed(5)
    images = torch.randn(GLOBAL_BATCH, 2, 8, 8, generator=g)
    labels = torch.randint(0, 5, (GLOBAL_BATCH,), generator=g)
    return T.CNN(), T.cls_loss, (images, labels), [r"conv\d"]


CASES = {"mlp": mlp_case, "gpt": gpt_case, "cnn": cnn_case}


def run_case(tmp_path, case, mesh, backend="threads", np_=None, **options):
    module, loss_fn, batch, units = CASES[case]()
    out = str(tmp_path / f"{case}-{mesh}")
    model = export_step(module, loss_fn, batch, out, mesh=mesh, units=units, **options)
    results = T.compile_and_run(out, model["config"]["pipeline"], backend, np_)
    loss, grads = load_results(results, module)
    ref_loss, ref_grads = reference(module, loss_fn, batch)
    errors = T.max_rel_errors(loss, grads, ref_loss, ref_grads)
    return model, errors


@pytest.mark.parametrize("mesh", ["1", "2", "4", "8", "2x4"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_autograd(tmp_path, case, mesh):
    model, errors = run_case(tmp_path, case, mesh)
    assert len(errors) == 1 + len(model["params"])
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"{case} on mesh {mesh}: relative errors above {RTOL}: {bad}"


def test_gpt_units_and_files(tmp_path):
    module, loss_fn, batch, units = gpt_case()
    out = tmp_path / "gpt"
    export_step(module, loss_fn, batch, str(out), mesh="2x4", units=units)
    model = json.loads((out / "model.json").read_text())
    unit_of = {p["name"]: p["unit"] for p in model["params"]}
    assert unit_of["blocks.0.attn.qkv.weight"] == "blocks.0"
    assert unit_of["blocks.1.ln2.bias"] == "blocks.1"
    assert unit_of["tok.weight"] == unit_of["head.weight"] == "root"
    assert model["local_batch"] == 1 and model["global_batch"] == 8
    assert model["data"][0] == {
        "name": "tokens",
        "dtype": "i64",
        "local_shape": [1, 8],
        "shape": [8, 8],
    }
    for name, _ in module.named_parameters():
        assert (out / f"{name}.npy").is_file()
    assert (out / "tokens.npy").is_file() and (out / "targets.npy").is_file()
    text = (out / "step.mlir").read_text()
    # The mesh in MLIR's generic form (the exporter builds it with MLIR's
    # Python bindings, where the fsdp dialect is not registered).
    assert (
        '"fsdp.mesh"() {axis_names = ["replicate", "shard"], axis_sizes = array<i64: 2, 4>,'
        ' sym_name = "mesh"}' in text
    )
    assert (
        '{fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "tok.weight",'
        ' fsdp.unit = "root"}' in text
    )
    assert 'tensor<1x8xi64> {fsdp.name = "tokens"}' in text
    assert '{fsdp.loss, fsdp.name = "loss"}' in text
    assert "tm_tensor" not in text and "torch." not in text


def test_gpt_rmsnorm_silu_shard1_balanced_bucketed(tmp_path):
    """RMSNorm + SiLU blocks, shard<1> on 2-D weights, balanced policy,
    bucketed and scheduled collectives (the pipeline's defaults)."""
    torch.manual_seed(6)
    module = T.GPT(norm="rms", blocks=1)
    for blk in module.blocks:
        blk.act = torch.nn.SiLU()
    batch = T.gpt_batch(GLOBAL_BATCH, seed=7)
    out = str(tmp_path / "gpt-rms")
    placement = {
        r"blocks\.\d+\.(fc|out|attn\.qkv|attn\.proj)\.weight": "shard<1>",
        "head.weight": "shard<1>",
    }

    def place(name, p):
        return "shard<1>" if p.dim() == 2 else None

    for opts in ({"placement": placement}, {"placement": place}):
        model = export_step(
            module, T.lm_loss, batch, out, mesh="4", units=[T.Block], policy="balanced", **opts
        )
        layouts = {p["name"]: p["layout_attr"] for p in model["params"]}
        assert layouts["blocks.0.fc.weight"] == "#fsdp.layout<@mesh, [shard<1>], policy = balanced>"
        assert layouts["blocks.0.fc.bias"] == "#fsdp.layout<@mesh, [shard<0>], policy = balanced>"
    results = T.compile_and_run(out, model["config"]["pipeline"] + " bucket=unit schedule=true")
    loss, grads = load_results(results, module)
    ref_loss, ref_grads = reference(module, T.lm_loss, batch)
    errors = T.max_rel_errors(loss, grads, ref_loss, ref_grads)
    assert max(errors.values()) <= RTOL, errors


def test_replicate_placement_is_ddp(tmp_path):
    model, errors = run_case(tmp_path, "mlp", "4", placement="replicate")
    assert {p["layout_attr"] for p in model["params"]} == {"#fsdp.layout<@mesh, [replicate]>"}
    assert max(errors.values()) <= RTOL, errors


@pytest.mark.skipif(T.mpirun() is None, reason="mpirun not found")
def test_gpt_mpirun_np4(tmp_path):
    model, errors = run_case(tmp_path, "gpt", "4", backend="mpi", np_=4)
    assert max(errors.values()) <= RTOL, errors


def test_cli_export_and_check(tmp_path):
    spec = tmp_path / "spec.py"
    spec.write_text(
        "import torch\n"
        "import torch_models as T\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return {'module': T.MLP(), 'loss_fn': T.mse_loss,\n"
        "            'batch': (torch.randn(8, 6), torch.randn(8, 3)), 'units': [torch.nn.Linear]}\n"
    )
    from fsdp_mlir.torch.__main__ import main

    out = str(tmp_path / "out")
    assert main(["export", f"{spec}:build", "--mesh", "2x2", "-o", out]) == 0
    assert os.path.isfile(os.path.join(out, "step.mlir"))
    model = json.loads(open(os.path.join(out, "model.json")).read())
    assert model["mesh"]["shape"] == [2, 2]
    results = T.compile_and_run(out)
    # The spec builds fresh random tensors at each call: check
    # reads the exported parameters and batch, so it still passes.
    assert main(["check", f"{spec}:build", out, results]) == 0
    os.remove(os.path.join(results, "grad.layers.0.bias.npy"))
    assert main(["check", f"{spec}:build", out, results]) == 2


def test_documented_commands(tmp_path, example="gpt", mesh="2x4"):
    """docs/FRONTENDS.md and the README: export, fsdp-opt, fsdp-run, check."""
    from fsdp_mlir.torch.__main__ import main

    out = str(tmp_path / example)
    spec = f"fsdp_mlir.torch.examples:{example}"
    assert main(["export", spec, "--mesh", mesh, "-o", out]) == 0
    results = T.compile_and_run(out)
    assert main(["check", spec, out, results]) == 0

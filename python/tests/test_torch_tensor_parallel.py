"""Tensor parallelism from the PyTorch frontend (docs/TENSOR_PARALLEL.md):
export_step(..., mesh="dp=2,tp=2", tp_plan=...) -> fsdp-opt (which partitions
the step over "tp" and shards it over "dp") -> fsdp-run on 4 ranks; the loss
and every gradient within 1e-5 relative of float64 torch autograd on the
global batch (test_torch_models' measure). The plan's errors are checked
without running anything."""

import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402
from test_torch_models import RTOL, lm_loss, run, tokens  # noqa: E402
from torch_models import errors_vs_float64  # noqa: E402

from fsdp_mlir.torch import export_step  # noqa: E402
from fsdp_mlir.torch.export import ExportError  # noqa: E402
from fsdp_mlir.torch.tensor_parallel import tp_placements, uses_sequence_parallel  # noqa: E402

needs_tools = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)


def tiny_llama():
    """One layer, width 16, 2 heads and 2 KV heads (one of each per TP rank)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@needs_tools
def test_llama_auto_plan_dp2_tp2(tmp_path):
    module = tiny_llama()
    # One sequence per data-parallel rank (two: test_torch_sequence_parallel).
    batch = tokens(2)
    out = str(tmp_path / "llama")
    model = export_step(module, lm_loss, batch, out, mesh="dp=2,tp=2", tp_plan="auto", verify=False)
    layouts = {p["name"]: p["layout_attr"] for p in model["params"]}
    assert "tp_shard<0>" in layouts["model.layers.0.self_attn.q_proj.weight"]
    assert "tp_shard<1>" in layouts["model.layers.0.mlp.down_proj.weight"]
    assert "tp_replicate" in layouts["model.norm.weight"]
    results = run(out, model["config"]["pipeline"])
    errors = errors_vs_float64(model, module, lm_loss, batch, results, 4)
    assert len(errors) == 1 + len(model["params"])
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"
    # The partitioned step all-reduces over "tp" (forward and backward of
    # attention and MLP), and FSDP gathers over "dp" only.
    text = subprocess.run(
        [T.tool("fsdp-opt"), os.path.join(out, "step.mlir"), "--fsdp-tensor-parallel"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert text.count('over @mesh ["tp"] sum') >= 4


@needs_tools
def test_mlp_plan_by_hand_hsdp_tp(tmp_path):
    """A {pattern: style} plan on replicate=2,shard=2,tp=2 (8 ranks)."""
    module = T.MLP((6, 8, 4, 8, 3))
    g = torch.Generator().manual_seed(0)
    batch = (torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g))
    plan = {"layers.0": "colwise", "layers.1": "rowwise", "layers.2": "colwise_rep"}
    out = str(tmp_path / "mlp")
    with pytest.raises(ExportError, match="does not divide"):
        export_step(module, T.mse_loss, batch, out, mesh="dp=2,tp=3", tp_plan=plan, verify=False)
    plan["layers.2"] = "replicated_with_grad_allreduce"
    model = export_step(
        module, T.mse_loss, batch, out, mesh="replicate=2,shard=2,tp=2", tp_plan=plan, verify=False
    )
    results = run(out, model["config"]["pipeline"])
    errors = errors_vs_float64(model, module, T.mse_loss, batch, results, 8)
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"


def test_plan_styles_and_errors():
    module = T.MLP((6, 8, 4))
    places = tp_placements(module, {"layers.0": "colwise", "layers.1": "rowwise"}, 2)
    assert places["layers.0.weight"] == {"kind": "tp_shard", "dim": 0}
    assert places["layers.0.bias"] == {"kind": "tp_shard", "dim": 0}
    assert places["layers.1.weight"] == {"kind": "tp_shard", "dim": 1}
    assert places["layers.1.bias"] == {"kind": "tp_replicate"}
    places = tp_placements(module, {"layers.*": "replicated_with_grad_allreduce"}, 2)
    assert all(p == {"kind": "tp_replicate"} for p in places.values())
    with pytest.raises(ValueError, match="unknown style 'diagonal'"):
        tp_placements(module, {"layers.0": "diagonal"}, 2)
    # sequence_parallel modules keep their parameters whole.
    places = tp_placements(module, {"layers.0": "sequence_parallel"}, 2)
    assert all(p == {"kind": "tp_replicate"} for p in places.values())
    assert uses_sequence_parallel(module, {"layers.0": "sequence_parallel"})
    assert not uses_sequence_parallel(module, {"layers.0": "colwise"})
    with pytest.raises(ValueError, match="no module path matches"):
        tp_placements(module, {"blocks.*.mlp": "colwise"}, 2)
    with pytest.raises(
        ValueError, match=r"'layers.0.weight' \(8x6\) is split along dim 0 over tp = 3"
    ):
        tp_placements(module, {"layers.1": "rowwise", "layers.0": "colwise"}, 3)
    emb = torch.nn.Sequential(torch.nn.Embedding(10, 4))
    with pytest.raises(ValueError, match="Embedding"):
        tp_placements(emb, {"0": "colwise"}, 2)
    with pytest.raises(ValueError, match="base_model_tp_plan"):
        tp_placements(module, "auto", 2)


def test_mesh_and_plan_arguments():
    module = T.MLP((6, 8, 4))
    batch = (torch.randn(4, 6), torch.randn(4, 4))
    with pytest.raises(ExportError, match="give tp_plan"):
        export_step(module, T.mse_loss, batch, None, mesh="dp=2,tp=2", verify=False)
    with pytest.raises(ExportError, match="needs a mesh with a tp axis"):
        export_step(module, T.mse_loss, batch, None, mesh="4", tp_plan="auto", verify=False)
    with pytest.raises(ExportError, match="expected dp, shard, replicate or tp"):
        export_step(module, T.mse_loss, batch, None, mesh="dp=2,pp=2", verify=False)


@needs_tools
def test_gpt2_plan_by_hand_dp2_tp2(tmp_path):
    """GPT-2's Conv1D layers (weight [in, out]): its MLP split by a hand plan,
    attention replicated (its fused c_attn cannot be split by heads)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    torch.manual_seed(0)
    module = transformers.GPT2LMHeadModel(config).eval()
    batch = tokens(2)
    plan = {"h.*.mlp.c_fc": "colwise", "h.*.mlp.c_proj": "rowwise"}
    out = str(tmp_path / "gpt2")
    model = export_step(module, lm_loss, batch, out, mesh="dp=2,tp=2", tp_plan=plan, verify=False)
    layouts = {p["name"]: p["layout_attr"] for p in model["params"]}
    assert "tp_shard<1>" in layouts["transformer.h.0.mlp.c_fc.weight"]
    assert "tp_shard<0>" in layouts["transformer.h.0.mlp.c_proj.weight"]
    results = run(out, model["config"]["pipeline"])
    errors = errors_vs_float64(model, module, lm_loss, batch, results, 4)
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"


@needs_tools
def test_compile_step_sgd_dp2_tp2():
    """compile_step with a tensor-parallel plan: three SGD (momentum) steps
    in process on dp=2,tp=2 against torch.optim.SGD in float64."""
    import copy

    from fsdp_mlir.optim import OptimizerConfig
    from fsdp_mlir.torch import compile_step

    torch.manual_seed(0)
    module = T.MLP((6, 8, 4, 8, 3))
    ref = copy.deepcopy(module).double()
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)) for _ in range(3)]
    plan = {f"layers.{i}": ("colwise", "rowwise")[i % 2] for i in range(4)}
    cfg = OptimizerConfig(kind="sgd", momentum=0.9)
    step = compile_step(
        module, T.mse_loss, batches[0], mesh="dp=2,tp=2", optimizer=cfg, tp_plan=plan, verify=False
    )
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        got = float(step(x, y, lr=0.1))
        opt.zero_grad()
        loss = T.mse_loss(ref, x.double(), y.double())
        loss.backward()
        opt.step()
        assert abs(got - loss.item()) <= RTOL * abs(loss.item())
    params = step.parameters()
    for name, p in ref.named_parameters():
        err = float((params[name].double() - p.detach()).abs().max() / p.detach().abs().max())
        assert err <= RTOL, (name, err)
    step.close()

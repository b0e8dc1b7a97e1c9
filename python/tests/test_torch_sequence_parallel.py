"""Sequence parallelism from the PyTorch frontend (docs/TENSOR_PARALLEL.md):
Hugging Face Llama and Qwen3 with tp_plan="auto" and GPT-2 with a plan
written by hand, with and without sequence parallelism, on dp=2,tp=2 and
replicate=2,shard=2,tp=2 (the latter under mpirun with the mpi backend):
the loss and every gradient within 1e-5 relative of float64 torch autograd
on the global batch. With sequence parallelism the partitioned step
reduce-scatters activations along the tokens and gathers them before
column-parallel products (checked on the partitioned IR)."""

import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
transformers = pytest.importorskip("transformers")

import torch_models as T  # noqa: E402
from test_torch_models import RTOL, lm_loss, tokens  # noqa: E402
from torch_models import errors_vs_float64  # noqa: E402

from fsdp_mlir.torch import export_step  # noqa: E402

needs_tools = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)


def tiny_llama():
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def tiny_qwen3():
    """Qwen3's plan adds replicated_with_grad_allreduce q/k norms."""
    config = transformers.Qwen3Config(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    return transformers.Qwen3ForCausalLM(config).eval()


def tiny_gpt2():
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


GPT2_PLAN = {
    "h.*.mlp.c_fc": "colwise",
    "h.*.mlp.c_proj": "rowwise",
    "h.*.ln_*": "sequence_parallel",
}

MODELS = {
    "llama": (tiny_llama, "auto"),
    "qwen3": (tiny_qwen3, "auto"),
    "gpt2": (tiny_gpt2, GPT2_PLAN),
}


def partitioned(out, sp):
    opt = "--fsdp-tensor-parallel" + ("=sequence-parallel=true" if sp else "")
    return subprocess.run(
        [T.tool("fsdp-opt"), os.path.join(out, "step.mlir"), opt],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def check(tmp_path, name, sp, mesh, world, backend="threads", samples=1):
    build, plan = MODELS[name]
    module = build()
    # `samples` sequences per data-parallel rank.
    batch = tokens(samples * world // 2)
    out = str(tmp_path / name)
    model = export_step(
        module, lm_loss, batch, out, mesh=mesh, tp_plan=plan, sequence_parallel=sp, verify=False
    )
    assert ("sequence-parallel=true" in model["config"]["pipeline"]) == (sp or plan is GPT2_PLAN)
    np_ = world if backend == "mpi" else None
    results = T.compile_and_run(out, model["config"]["pipeline"], backend, np_)
    errors = errors_vs_float64(model, module, lm_loss, batch, results, world)
    assert len(errors) == 1 + len(model["params"])
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"
    text = partitioned(out, sp or plan is GPT2_PLAN)
    scatters = len(re.findall(r'fsdp\.reduce_scatter [^\n]*\["tp"\] sum :', text))
    # A vocabulary-parallel cross-entropy's one all-gather of its [N, 3] row
    # statistics is not a sequence gather.
    stats = len(re.findall(r"fsdp\.all_gather [^\n]*: tensor<[0-9]+x3xf32> -> ", text))
    assert stats <= 1, stats
    gathers = text.count("fsdp.all_gather") - stats
    if sp or plan is GPT2_PLAN:
        assert scatters > 0 and gathers > 0, (scatters, gathers)
    else:
        # Without sequence parallelism nothing is scattered or gathered but
        # the cross-entropy's statistics (a vocabulary-parallel table's rank
        # index is an fsdp.axis_index).
        assert "fsdp.reduce_scatter" not in text and gathers == 0, (scatters, gathers)


@needs_tools
@pytest.mark.parametrize("sp", [False, True], ids=["tp", "tp+sp"])
@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_auto_plan_dp2_tp2(tmp_path, name, sp):
    check(tmp_path, name, sp, "dp=2,tp=2", 4)


@needs_tools
@pytest.mark.parametrize("sp", [False, True], ids=["tp", "tp+sp"])
def test_llama_two_samples_per_rank(tmp_path, sp):
    """Attention's [B, H, S, D] -> [B*H, S, D] with 2 samples per rank and
    the heads split (strided blocks of heads), on dp=2,tp=2."""
    check(tmp_path, "llama", sp, "dp=2,tp=2", 4, samples=2)


@needs_tools
def test_gpt2_hand_plan_sequence_parallel_dp2_tp2(tmp_path):
    check(tmp_path, "gpt2", True, "dp=2,tp=2", 4)


@needs_tools
@pytest.mark.skipif(T.mpirun() is None, reason="mpirun not found")
@pytest.mark.parametrize("name", ["llama", "qwen3", "gpt2"])
def test_hsdp_tp_sequence_parallel_mpi_np8(tmp_path, name):
    check(tmp_path, name, True, "replicate=2,shard=2,tp=2", 8, backend="mpi")


@needs_tools
@pytest.mark.parametrize("sp", [False, True], ids=["tp", "tp+sp"])
def test_llama_adamw_20_steps_tensor_parallel_equals_tp1(sp):
    """20 AdamW steps (weight decay, clipping) of the Llama with tensor
    parallelism, with and without sequence parallelism, on dp=2,tp=2 and
    the same training without tensor parallelism (mesh 2: the same
    data-parallel split), in process: every
    loss within 1e-5 of the other's and of torch.optim.AdamW in float64;
    the final parameters as close to float64 as torch's own float32
    training (Adam's normalized updates carry float32 noise over steps)."""
    import copy

    from fsdp_mlir.optim import OptimizerConfig
    from fsdp_mlir.torch import compile_step

    module = tiny_llama()
    ref64, ref32 = copy.deepcopy(module).double(), copy.deepcopy(module)
    batches = [tokens(2, seed=s) for s in range(20)]
    cfg = OptimizerConfig(kind="adamw", weight_decay=0.01, max_grad_norm=1.0)
    common = {"optimizer": cfg, "verify": False}
    tp_sp = compile_step(
        module,
        lm_loss,
        batches[0],
        mesh="dp=2,tp=2",
        tp_plan="auto",
        sequence_parallel=sp,
        **common,
    )
    tp1 = compile_step(module, lm_loss, batches[0], mesh="2", **common)
    refs = [
        (r, torch.optim.AdamW(r.parameters(), lr=1e-3, weight_decay=0.01)) for r in (ref64, ref32)
    ]
    for (batch,) in batches:
        got_sp = float(tp_sp(batch, lr=1e-3))
        got_1 = float(tp1(batch, lr=1e-3))
        losses = []
        for r, opt in refs:
            opt.zero_grad()
            loss = lm_loss(r, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(r.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        assert abs(got_sp - got_1) <= RTOL * abs(got_1), (got_sp, got_1)
        assert abs(got_sp - losses[0]) <= RTOL * abs(losses[0]), (got_sp, losses[0])
    p_sp, p_1 = tp_sp.parameters(), tp1.parameters()
    p32 = dict(ref32.named_parameters())
    for name, p in ref64.named_parameters():
        want = p.detach()
        scale = float(want.abs().max())

        def err(got, want=want):
            return float((got.double() - want).abs().max())

        bound = max(RTOL * scale, 2 * err(p32[name].detach()))
        assert err(p_sp[name]) <= bound, (name, err(p_sp[name]), bound)
        assert err(p_1[name]) <= bound, (name, err(p_1[name]), bound)
    tp_sp.close()
    tp1.close()


def _report_and_measured(tmp_path, sp):
    """fsdp-comm-report (JSON) of the 2-block transformer on dp=2,tp=2 and
    what fsdp-run --json measured on every rank for one step."""
    import json
    import sys

    out = tmp_path / ("sp" if sp else "tp")
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    subprocess.run(
        [sys.executable, "-m", "fsdp_mlir.dev.gen", "transformer", "--attention", "--blocks", "2"]
        + ["--dim", "16", "--ffn", "32", "--seq", "8", "--batch", "2", "--mesh", "dp=2,tp=2"]
        + ["-o", str(out / "m.mlir"), "--data", str(out / "data")],
        check=True,
        capture_output=True,
        env=env,
    )
    pipeline = "all-reduce-loss=true" + (" sequence-parallel=true" if sp else "")
    report = subprocess.run(
        [T.tool("fsdp-opt"), str(out / "m.mlir"), f"--fsdp-pipeline={pipeline}"]
        + ["--fsdp-comm-report=format=json", "-o", "/dev/null"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    subprocess.run(
        [T.tool("fsdp-opt"), str(out / "m.mlir"), f"--fsdp-pipeline=lower=true {pipeline}"]
        + ["-o", str(out / "l.mlir")],
        check=True,
        capture_output=True,
    )
    measured = subprocess.run(
        [T.tool("fsdp-run"), str(out / "l.mlir"), "--inputs", str(out / "data")]
        + ["--outputs", str(out / "out"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (fn,) = json.loads(report)["functions"]
    return fn, json.loads(measured[measured.index("{") :])["comm"]


@needs_tools
def test_comm_report_tensor_parallel_bytes_equal_measured(tmp_path):
    """The communication report's bytes equal what the runtime measured on
    every rank, with and without sequence parallelism; the two steps differ
    only in their tensor-parallel collectives, so the difference of the
    report's tensor-parallel bytes equals the difference measured."""
    steps = {sp: _report_and_measured(tmp_path, sp) for sp in (False, True)}
    for fn, measured in steps.values():
        assert len(measured) == fn["ranks"] == 4
        for rank, got in zip(fn["per_rank"], measured):
            assert got["bytes_sent"] == rank["bytes_sent"]
            assert got["bytes_received"] == rank["bytes_received"]
            assert got["calls"] == rank["collectives"]
        assert fn["tensor_parallel"]["count"] > 0
    (tp, tp_measured), (sp, sp_measured) = steps[False], steps[True]
    for key in ("bytes_sent", "bytes_received"):
        assert (
            sp["tensor_parallel"][key] - tp["tensor_parallel"][key]
            == sp_measured[0][key] - tp_measured[0][key]
        )
    # Sequence parallelism: reduce-scatters and all-gathers over "tp".
    assert (
        sp["collectives"]["reduce_scatter"]["count"] > tp["collectives"]["reduce_scatter"]["count"]
    )

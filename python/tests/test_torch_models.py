"""Model-zoo architectures end to end: tiny configurations of Hugging Face,
torchvision and timm models, export -> fsdp-opt -> fsdp-run on 2 ranks (a
cheap subset also on 4, and one HSDP 2x2 case), loss and every gradient within
1e-5 relative of float64 torch autograd (each gradient against its own max
norm, floored at 1e-3 of the largest gradient's: gradients that are zero in
exact arithmetic hold only rounding noise). Batch norm in training mode is
checked against the mean of each rank's own float64 reference, and each
rank's updated running statistics against its own. The export's self-check
(verify) is tested here too. A case is skipped when its package
(transformers, torchvision, timm) is missing."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn.functional as F  # noqa: E402
import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step  # noqa: E402
from fsdp_mlir.torch import verify as V  # noqa: E402
from fsdp_mlir.torch.export import load_buffers, reference_ranks  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = T.RTOL
lm_loss = T.hf_lm_loss


def cls_loss(model, images, labels):
    return F.cross_entropy(model(images), labels)


def tokens(n, vocab=32, seq=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, vocab, (n, seq), generator=g),)


def images(n, size=32, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=g), torch.randint(0, classes, (n,), generator=g)


def tiny_lm(config_cls, model_cls, **extra):
    """Decoder LMs: one layer, width 16, 2 heads (1 KV head where the family
    has grouped-query attention), vocabulary 32. The Hugging Face models are
    in eval mode (no dropout; they have no batch norm), as for every case that
    compares with a deterministic reference."""
    transformers = pytest.importorskip("transformers")
    config = getattr(transformers, config_cls)(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=16,
        **extra,
    )
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).eval()  # eval: no dropout


def gpt2(n):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval(), lm_loss, tokens(n)


def llama(n):
    return tiny_lm("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=1), lm_loss, tokens(n)


def gemma(n):
    """tanh-GELU (hidden_act gelu_pytorch_tanh): needs the exact constant."""
    model = tiny_lm("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=1, head_dim=8)
    return model, lm_loss, tokens(n)


def mixtral(n, experts_implementation=None):
    """Sparse MoE: 8 experts, top 2, router softmax + topk. transformers'
    default experts implementation ("grouped_mm": sort by expert, histc,
    int32 cumsum of the counts, grouped matrix products, an inverse
    permutation written by index_put), "batched_mm" or "eager" (a loop over
    the experts nonzero() finds): the export writes each as the grouped
    form, one fsdp.grouped_matmul per expert layer."""
    model = tiny_lm(
        "MixtralConfig",
        "MixtralForCausalLM",
        num_key_value_heads=1,
        num_local_experts=8,
        num_experts_per_tok=2,
    )
    if experts_implementation:
        model.config._experts_implementation = experts_implementation
    return model, lm_loss, tokens(n)


def opt(n):
    """Positions from the attention mask (cumsum); a padded sequence."""
    transformers = pytest.importorskip("transformers")
    config = transformers.OPTConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        ffn_dim=32,
        num_attention_heads=2,
        max_position_embeddings=16,
        word_embed_proj_dim=16,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    (tok,) = tokens(n)
    mask = torch.ones_like(tok)
    mask[::2, -3:] = 0  # right padding on every other sequence

    def loss_fn(model, tokens, mask):
        return model(input_ids=tokens, attention_mask=mask, labels=tokens).loss

    return transformers.OPTForCausalLM(config).eval(), loss_fn, (tok, mask)


def bert(n):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=3,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    (tok,) = tokens(n)
    labels = torch.arange(n) % 3

    def loss_fn(model, tokens, labels):
        return model(input_ids=tokens, labels=labels).loss

    return transformers.BertForSequenceClassification(config).eval(), loss_fn, (tok, labels)


def t5(n):
    """Encoder-decoder: relative position buckets (a log of the distance),
    T5's RMS layer norm, the decoder's shifted labels, tied embeddings."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=32,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    (tok,) = tokens(n)
    (labels,) = tokens(n, seq=6, seed=1)

    def loss_fn(model, tokens, labels):
        return model(input_ids=tokens, labels=labels).loss

    return transformers.T5ForConditionalGeneration(config).eval(), loss_fn, (tok, labels)


def vit(n):
    """Hugging Face ViT: patch embedding convolution, class token, learned
    position embeddings."""
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(
        image_size=16,
        patch_size=4,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)

    def loss_fn(model, images, labels):
        return model(pixel_values=images, labels=labels).loss

    return transformers.ViTForImageClassification(config).eval(), loss_fn, images(n, 16)


def resnet18(n, train, size=32):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=5)
    model.train(train)
    return model, cls_loss, images(n, size)


def mobilenet_v3_small(n):
    """Grouped (depthwise) convolutions, squeeze-excitation, hardswish and
    hardsigmoid; the backward of its padding. Eval mode: batch norm with the
    running statistics, no dropout."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=5)
    return model.eval(), cls_loss, images(n)


def swin(n):
    """Shifted windows, an integer buffer (the relative position index) and
    its bias table's indexing backward. Eval mode: stochastic depth off."""
    pytest.importorskip("torchvision")
    from torchvision.models.swin_transformer import SwinTransformer

    torch.manual_seed(0)
    model = SwinTransformer(
        patch_size=[4, 4],
        embed_dim=8,
        depths=[1, 1],
        num_heads=[1, 2],
        window_size=[2, 2],
        num_classes=5,
    )
    return model.eval(), cls_loss, images(n, 16)


def convnext(n):
    """Depthwise 7x7 convolutions and a layer norm over channels."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model(
        "convnext_atto", num_classes=5, dims=(8, 16, 16, 16), depths=(1, 1, 1, 1)
    )
    return model.eval(), cls_loss, images(n)


def falcon(n):
    """Falcon's new decoder architecture: the fused query-key-value
    projection read through an index on an inner dim, whose backward is an
    index_put with accumulation on that dim."""
    transformers = pytest.importorskip("transformers")
    config = transformers.FalconConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_kv_heads=1,
        new_decoder_architecture=True,
    )
    torch.manual_seed(0)
    return transformers.FalconForCausalLM(config).eval(), lm_loss, tokens(n)


def levit(n):
    """timm LeViT (one block per stage): attention biases gathered by an index table (their
    gradient: index_put with accumulation behind a whole dim), strided
    subsampling attention, batch norm (eval), hardswish."""
    import types

    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model(
        "levit_128s", num_classes=5, img_size=32, depth=(1, 1, 1), pretrained=False
    )
    # In eval mode timm caches the gathered biases per device (a tensor
    # computed from a parameter, kept across calls: an eager call before the
    # export would make them a constant of the step): always gather them.
    for m in model.modules():
        if hasattr(m, "attention_bias_cache"):
            m.get_attention_biases = types.MethodType(
                lambda self, device: self.attention_biases[:, self.attention_bias_idxs], m
            )
    return model.eval(), cls_loss, images(n)


def bart(n):
    """Encoder-decoder with the decoder's labels shifted right; its causal
    mask is built whole (transformers reads whether the padding mask is all
    ones to drop it, which the frontend answers without the read)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BartConfig(
        vocab_size=32,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=16,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(3, 32, (n, 8), generator=g)
    labels = torch.randint(3, 32, (n, 6), generator=g)

    def loss_fn(model, tokens, labels):
        return model(input_ids=tokens, labels=labels).loss

    return transformers.BartForConditionalGeneration(config).eval(), loss_fn, (tok, labels)


def deberta(n):
    """DeBERTa-v2: disentangled attention with log-bucketed relative
    positions (content-to-position and position-to-content), a masked-LM
    head; the padding warning's read of the first and last tokens is
    skipped."""
    transformers = pytest.importorskip("transformers")
    config = transformers.DebertaV2Config(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=16,
        pos_att_type=["p2c", "c2p"],
        type_vocab_size=0,
    )
    torch.manual_seed(0)
    return transformers.DebertaV2ForMaskedLM(config).eval(), lm_loss, tokens(n)


def sparse_moe(n):
    """The hand-written Mixtral-style MoE (fsdp_mlir.torch.examples.moe: 8
    experts, top 2, F.grouped_mm on the rows sorted by expert)."""
    from fsdp_mlir.torch import examples

    ex = examples.moe(global_batch=n)
    return ex["module"], ex["loss_fn"], ex["batch"]


CASES = {
    "falcon": falcon,
    "levit": levit,
    "bart": bart,
    "deberta": deberta,
    "swin": swin,
    "convnext": convnext,
    "gpt2": gpt2,
    "llama": llama,
    "mixtral": mixtral,
    "mixtral-batched-mm": lambda n: mixtral(n, "batched_mm"),
    "mixtral-eager": lambda n: mixtral(n, "eager"),
    "moe": sparse_moe,
    "gemma": gemma,
    "opt": opt,
    "bert": bert,
    "t5": t5,
    "vit": vit,
    "resnet18-eval": lambda n: resnet18(n, False),
    "resnet18-train": lambda n: resnet18(n, True, size=48),
    "mobilenet-v3-small": mobilenet_v3_small,
}
# Global batch per case on 2 ranks (one sample per rank unless named here).
# Batch norm in training mode: 4 images of 48x48 per rank, so that resnet's
# last stage normalizes 16 values per channel (with 2, float32 itself is 7%
# off float64).
BATCH = {"resnet18-train": 8}
# The cases also run on 4 ranks (one sample per rank): cheap ones, one of
# each kind (decoder LM, encoder classifier, CNN, vision transformer, MoE).
FOUR_RANKS = ("gpt2", "bert", "resnet18-eval", "vit", "mixtral")
WORLDS = [(case, 2) for case in sorted(CASES)] + [(case, 4) for case in FOUR_RANKS]


def run(out, pipeline, extra=()):
    lowered = os.path.join(out, "lowered.mlirbc")
    results = os.path.join(out, "results")
    step = os.path.join(out, "step.mlir")
    subprocess.run(
        [T.tool("fsdp-opt"), step, f"--fsdp-pipeline={pipeline}", "--emit-bytecode", "-o", lowered],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [T.tool("fsdp-run"), lowered, "--inputs", out, "--outputs", results, *extra],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return results


@pytest.mark.parametrize(("case", "world"), WORLDS, ids=[f"{c}-{w}" for c, w in WORLDS])
def test_model_matches_float64_autograd(tmp_path, case, world):
    module, loss_fn, batch = CASES[case](BATCH.get(case, world))
    out = str(tmp_path / case)
    model = export_step(module, loss_fn, batch, out, mesh=str(world), verify=False)
    results = run(out, model["config"]["pipeline"], ["--all-ranks"])
    errors = T.errors_vs_float64(model, module, loss_fn, batch, results, world)
    assert len(errors) == 1 + len(model["params"])
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"{case}: relative errors above {RTOL}: {bad}"
    updated = [b for b in model["buffers"] if b["updated"]]
    assert bool(updated) == (case == "resnet18-train")
    if updated:  # every rank's own running statistics, against its own reference
        ranks = reference_ranks(module, loss_fn, batch, world)
        for r in range(world):
            got = load_buffers(results, model, rank=r)
            for name, value in got.items():
                ref = ranks[r][2][name]
                if not ref.is_floating_point():
                    assert torch.equal(value, ref), (name, r)
                    continue
                err = V.relative_errors({name: value}, {name: ref}, [])[name]
                assert err <= RTOL, f"rank {r}: buffer {name} is {err:.2e} off"


def test_llama_hsdp_2x2(tmp_path):
    module, loss_fn, batch = llama(4)
    out = str(tmp_path / "llama")
    model = export_step(module, loss_fn, batch, out, mesh="2x2", verify=False)
    results = run(out, model["config"]["pipeline"])
    errors = T.errors_vs_float64(model, module, loss_fn, batch, results, 4)
    assert max(errors.values()) <= RTOL, errors


class BatchNormNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn1(self.conv1(x))).mean((2, 3)))


def test_buffers_are_arguments_and_updated_ones_results(tmp_path):
    """Every buffer is an argument after the parameters; in training mode the
    running statistics and the counter are results, fed back (fsdp.update_of;
    on several ranks each rank keeps its own copy), or plain rank-local
    results with buffer_updates="results"; in eval mode they are replicated
    inputs only."""
    torch.manual_seed(0)
    module = BatchNormNet()
    batch = images(4, size=6)
    one = export_step(module, cls_loss, batch, None, mesh="1", verify=False)
    two = export_step(module, cls_loss, batch, None, mesh="2", verify=False)
    n_params = len(one["params"])
    names = [n for n, _ in module.named_buffers()]
    assert names == ["bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"]
    assert [b["name"] for b in one["buffers"]] == names
    assert one["args"][n_params : n_params + len(names)] == names
    assert all(b["updated"] and b["layout"] is None for b in one["buffers"])
    fed = [r for r in one["results"] if r["kind"] == "buffer"]
    assert [r["update_of"] for r in fed] == list(range(n_params, n_params + len(names)))
    assert 'tensor<4xf32> {fsdp.name = "bn1.running_mean", fsdp.update_of = 5 : i64}' in one["mlir"]
    assert 'tensor<i64> {fsdp.name = "bn1.num_batches_tracked"}' in one["mlir"]
    assert [r["update_of"] for r in two["results"] if r["kind"] == "buffer"] == [
        r["update_of"] for r in fed
    ]
    local = export_step(
        module, cls_loss, batch, None, mesh="2", verify=False, buffer_updates="results"
    )
    assert all(r["update_of"] is None for r in local["results"] if r["kind"] == "buffer")
    module.eval()
    ev = export_step(module, cls_loss, batch, None, mesh="2", verify=False)
    assert not [r for r in ev["results"] if r["kind"] == "buffer"]
    assert (
        "tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate]>, "
        'fsdp.name = "bn1.running_mean"}' in ev["mlir"]
    )


def test_updated_buffers_are_fed_back_by_fsdp_run_steps(tmp_path):
    """One rank, `fsdp-run --steps 3` on one batch: the running statistics
    after three steps are torch's after three forwards in training mode."""
    torch.manual_seed(0)
    module = BatchNormNet()
    batch = images(4, size=6)
    out = str(tmp_path / "bn")
    model = export_step(module, cls_loss, batch, out, mesh="1", verify=True)
    results = run(out, model["config"]["pipeline"], ["--steps", "3"])
    got = load_buffers(results, model)
    ref = BatchNormNet()
    ref.load_state_dict(module.state_dict())
    ref.double()
    for _ in range(3):
        cls_loss(ref, batch[0].double(), batch[1])
    assert int(got["bn1.num_batches_tracked"]) == 3
    for name in ("bn1.running_mean", "bn1.running_var"):
        err = V.relative_errors({name: got[name]}, {name: ref.get_buffer(name)}, [])[name]
        assert err <= RTOL, (name, err)


def test_verify_passes_and_reports(tmp_path):
    module, loss_fn, batch = gemma(2)
    model = export_step(module, loss_fn, batch, str(tmp_path / "g"), mesh="2", verify=True)
    report = model["verify"]
    assert report["results"] == 1 + len(model["params"])
    assert report["rel_err"] <= RTOL


def test_verify_catches_the_tanh_gelu_constant(tmp_path):
    """Without the GELU decomposition torch-mlir's constant 0.797724 is used:
    the self-check fails, names the worst result and the first op whose value
    differs (the GELU, in the MLP's activation). (A fresh process: torch
    caches how an op was decomposed.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    script = (
        "import sys, torch\n"
        "import test_torch_models as M\n"
        "from fsdp_mlir.torch import ExportError, export_step, decompositions as D\n"
        "del D.OVERRIDES[D.aten.gelu.default]\n"
        "module, loss_fn, batch = M.gemma(2)\n"
        "try:\n"
        "    export_step(module, loss_fn, batch, None, mesh='2', verify=True)\n"
        "except ExportError as err:\n"
        "    print(err); sys.exit(3)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.path.dirname(here)]))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "verify: the imported step differs from torch eager" in proc.stdout
    assert "off relative (tolerance 1e-05)" in proc.stdout
    # The op that computes the wrong values, found by running the traced
    # graph's intermediate values through the pipeline once more.
    assert "the first op whose value differs is aten.gelu (node gelu in " in proc.stdout
    assert "mlp.act_fn" in proc.stdout


def test_verify_checks_large_models_on_a_sample(tmp_path, monkeypatch):
    """By default a model above verify.AUTO_LIMIT elements is checked too, on
    the step traced for one sample of rank 0's micro-batch (the same program
    on less data), and a wrong decomposition is caught there as well."""
    monkeypatch.setattr(V, "AUTO_LIMIT", 0)
    module, loss_fn, batch = gemma(4)
    model = export_step(module, loss_fn, batch, None, mesh="2")
    report = model["verify"]
    assert report["sample"] == V.SAMPLE == 1 and model["local_batch"] == 2
    assert report["results"] == 1 + len(model["params"]) and report["rel_err"] <= RTOL
    here = os.path.dirname(os.path.abspath(__file__))
    script = (
        "import sys\n"
        "import test_torch_models as M\n"
        "from fsdp_mlir.torch import ExportError, export_step, decompositions as D, verify as V\n"
        "del D.OVERRIDES[D.aten.gelu.default]\n"
        "V.AUTO_LIMIT = 0\n"
        "module, loss_fn, batch = M.gemma(4)\n"
        "try:\n"
        "    export_step(module, loss_fn, batch, None, mesh='2')\n"
        "except ExportError as err:\n"
        "    print(err); sys.exit(3)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.path.dirname(here)]))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "verify: the imported step differs from torch eager" in proc.stdout
    assert "the first op whose value differs is aten.gelu" in proc.stdout


def test_cli_verify_flag(tmp_path):
    from fsdp_mlir.torch.__main__ import main

    out = str(tmp_path / "gpt")
    assert (
        main(["export", "fsdp_mlir.torch.examples:gpt", "--mesh", "2", "-o", out, "--verify"]) == 0
    )
    import json

    model = json.loads(open(os.path.join(out, "model.json")).read())
    assert model["verify"]["rel_err"] <= RTOL
    assert main(["export", "fsdp_mlir.torch.examples:gpt", "-o", out, "--no-verify"]) == 0
    model = json.loads(open(os.path.join(out, "model.json")).read())
    assert model["verify"] == {"skipped": "verify=False"}


def _ddp_reference(module, batches, cfg, lrs, world):
    """Data-parallel training as DDP does it without SyncBatchNorm: one set
    of parameters, every rank's own batch-norm buffers updated by its own
    forward, the gradient of the mean of the ranks' losses, torch's AdamW
    (float32). Returns the losses and every rank's final buffers."""
    from torch.func import functional_call

    params = {n: p.detach().clone().requires_grad_(True) for n, p in module.named_parameters()}
    buffers = [{n: b.detach().clone() for n, b in module.named_buffers()} for _ in range(world)]
    opt = torch.optim.AdamW(
        list(params.values()),
        lr=0.0,
        betas=tuple(cfg.betas),
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
        foreach=False,
    )
    losses = []
    for (x, y), lr in zip(batches, lrs):
        for group in opt.param_groups:
            group["lr"] = float(lr)
        opt.zero_grad(set_to_none=True)
        b = x.shape[0] // world
        per_rank = [
            cls_loss_functional(
                functional_call,
                module,
                {**params, **buffers[r]},
                x[r * b : (r + 1) * b],
                y[r * b : (r + 1) * b],
            )
            for r in range(world)
        ]
        loss = torch.stack(per_rank).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return np.array(losses, np.float32), buffers


def cls_loss_functional(functional_call, module, state, x, y):
    return F.cross_entropy(functional_call(module, state, (x,)), y)


def test_batch_norm_cnn_trains_20_adamw_steps_on_two_ranks(tmp_path):
    """20 AdamW steps of a convolution + batch norm net on 2 ranks
    (`fsdp-run --steps 20`): every step's loss as DDP-style training in
    torch gives, and each rank's running statistics (kept and fed back per
    rank) within 1e-5 of that rank's in torch."""
    from fsdp_mlir.optim import OptimizerConfig
    from fsdp_mlir.torch.train import export_training, lr_schedule

    torch.manual_seed(0)
    module = BatchNormNet()
    steps, world = 20, 2
    batches = [images(8, size=6, seed=s) for s in range(steps)]
    cfg = OptimizerConfig("adamw", weight_decay=0.01)
    lrs = lr_schedule(steps, peak=1e-2)
    out = str(tmp_path / "bn")
    model = export_training(module, cls_loss, batches, out, cfg, lrs, mesh=str(world), verify=False)
    results = run(out, model["train_pipeline"], ["--steps", str(steps), "--all-ranks"])
    ref_losses, ref_buffers = _ddp_reference(module, batches, cfg, lrs, world)
    losses = np.load(os.path.join(results, "loss.npy"))
    assert np.abs(losses - ref_losses).max() / np.abs(ref_losses).max() < 1e-5, (losses, ref_losses)
    assert losses[-1] < losses[0]
    for r in range(world):
        got = load_buffers(results, model, rank=r)
        assert int(got["bn1.num_batches_tracked"]) == steps
        for name in ("bn1.running_mean", "bn1.running_var"):
            want = ref_buffers[r][name].numpy()
            err = np.abs(got[name].numpy() - want).max() / np.abs(want).max()
            assert err <= 1e-5, f"rank {r}: {name} is {err:.2e} off"
    # The two ranks saw different batches: their statistics differ.
    a, b = (load_buffers(results, model, rank=r)["bn1.running_mean"] for r in range(world))
    assert not torch.equal(a, b)


class PaddedEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4, padding_idx=3)

    def forward(self, tokens):
        return self.emb(tokens)


def test_embedding_backward_is_a_scatter_in_torch_order(tmp_path):
    """The embedding backward runs as fsdp-one-hot-scatter's loop over the
    tokens, not as a one-hot product: on one rank its gradient is bitwise
    torch's (aten sums each row token by token, in index order). The
    repeated token's contributions cancel in that order only (1e8 + 1 -
    1e8 + 1 is 1 in float32, 2 summed otherwise); the padding token and an
    index repeated in other rows are covered too."""
    torch.manual_seed(0)
    module = PaddedEmbedding()
    tokens = torch.tensor([[1, 3, 1, 1, 5, 1, 2]]).repeat(2, 1)
    scale = torch.tensor([1e8, 1.0, -1e8, 1.0, 3.0, 1.0, 2.0]).reshape(1, 7, 1)
    weights = torch.randn(2, 7, 4, generator=torch.Generator().manual_seed(1)) * scale

    def loss_fn(model, tokens, weights):
        return (model(tokens) * weights).sum()

    out = str(tmp_path / "emb")
    model = export_step(module, loss_fn, (tokens, weights), out, mesh="1", verify=False)
    remarks = subprocess.run(
        [
            T.tool("fsdp-opt"),
            os.path.join(out, "step.mlir"),
            "--pass-pipeline=builtin.module(func.func(fsdp-one-hot-scatter{report=true}))",
            "-o",
            os.devnull,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    assert "one-hot matrix product as a scatter-add over 14 tokens" in remarks
    results = run(out, model["config"]["pipeline"])
    got = np.load(os.path.join(results, "grad.emb.weight.npy"))
    module.zero_grad(set_to_none=True)
    loss_fn(module, tokens, weights).backward()
    want = module.emb.weight.grad.numpy()
    assert np.array_equal(got, want), np.abs(got - want).max()
    assert not want[3].any()  # the padding row


@pytest.mark.parametrize("implementation", [None, "eager", "batched_mm"])
def test_mixtral_experts_are_grouped_products(implementation):
    """Whatever experts implementation transformers runs, the step has one
    fsdp.grouped_matmul per expert product (gate_up and down) and one per
    input gradient, one fsdp.grouped_matmul_transpose_lhs per weight
    gradient, and no product of every expert on every row."""
    module, loss_fn, batch = mixtral(2, implementation)
    text = export_step(module, loss_fn, batch, None, mesh="2", verify=False)["mlir"]
    assert text.count('"fsdp.grouped_matmul"(') == 4
    assert text.count('"fsdp.grouped_matmul_transpose_lhs"(') == 2
    assert "aten.nonzero" not in text
    if implementation is None:
        # The whole step (attention and LM head included) against the dense
        # form: 0.20 of its contraction FLOPs at this size.
        from fsdp_mlir.torch.experts import contraction_flops

        dense = export_step(module, loss_fn, batch, None, mesh="2", verify=False, experts="dense")
        sparse, dense = contraction_flops(text)["total"], contraction_flops(dense["mlir"])["total"]
        assert 0 < sparse <= 0.3 * dense, (sparse, dense)


class LoopedExperts(torch.nn.Module):
    """Experts run on the rows nonzero() finds for each: shapes that depend
    on the routing's values."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 4, 4))

    def forward(self, x):
        ids = x.argmax(-1) % 2
        out = torch.zeros_like(x)
        for e in range(2):
            rows = torch.nonzero(ids == e).squeeze(-1)
            out = out.index_add(0, rows, x[rows] @ self.w[e])
        return out


def test_value_dependent_expert_loop_names_the_op_and_the_module():
    from fsdp_mlir.torch import ExportError

    module = torch.nn.Sequential(LoopedExperts())
    with pytest.raises(ExportError) as err:
        export_step(module, lambda m, x: m(x).sum(), (torch.randn(4, 4),), None, mesh="2")
    assert str(err.value).startswith("unsupported op 'aten.nonzero' in 0 (LoopedExperts)"), err


def test_sparse_moe_matches_dense_form_with_a_quarter_of_the_flops(tmp_path):
    """The hand-written MoE (8 experts, top 2) exported sparse (grouped
    products) and dense (every expert on every row, the routing as a mask):
    on 2 ranks both match float64 autograd within RTOL and each other, and
    the sparse step's contraction FLOPs, counted on the exported IR, are at
    most 0.3 of the dense step's."""
    from fsdp_mlir.torch import load_results
    from fsdp_mlir.torch.experts import contraction_flops

    module, loss_fn, batch = sparse_moe(2)
    got, flops = {}, {}
    for form in ("sparse", "dense"):
        out = str(tmp_path / form)
        model = export_step(module, loss_fn, batch, out, mesh="2", verify=False, experts=form)
        flops[form] = contraction_flops(model["mlir"])["total"]
        results = run(out, model["config"]["pipeline"])
        errors = T.errors_vs_float64(model, module, loss_fn, batch, results, 2)
        bad = {k: v for k, v in errors.items() if not v <= RTOL}
        assert not bad, f"{form}: relative errors above {RTOL}: {bad}"
        loss, grads = load_results(results, module)
        got[form] = {"loss": loss, **{f"grad.{n}": g for n, g in grads.items()}}
    assert 0 < flops["sparse"] <= 0.3 * flops["dense"], flops
    names = [k for k in got["dense"] if k != "loss"]
    errors = V.relative_errors(got["sparse"], got["dense"], names)
    assert max(errors.values()) <= RTOL, errors


def test_mixtral_trains_10_adamw_steps(tmp_path):
    """The sparse MoE trains: 10 AdamW steps on 2 ranks (`fsdp-run --steps
    10`) on one repeated batch, every step's loss and the final parameters
    within 1e-4 of torch.optim on the global batch, the loss going down.
    The router sees new weights every step, so the experts it picks are
    torch's at every step or the losses part."""
    from fsdp_mlir.optim import OptimizerConfig
    from fsdp_mlir.torch.train import (
        compare_training,
        export_training,
        lr_schedule,
        train_reference,
    )

    module, loss_fn, batch = mixtral(2)
    steps = 10
    batches = [batch] * steps
    cfg = OptimizerConfig("adamw", weight_decay=0.01)
    lrs = lr_schedule(steps, peak=1e-2)
    out = str(tmp_path / "mixtral")
    model = export_training(module, loss_fn, batches, out, cfg, lrs, mesh="2", verify=False)
    results = run(out, model["train_pipeline"], ["--steps", str(steps)])
    errors = compare_training(results, train_reference(module, loss_fn, batches, cfg, lrs))
    losses = errors["losses"]
    assert losses[-1] < losses[0], losses
    assert errors["loss"].max() < 1e-4, errors["loss"]
    worst = max(errors["params"].items(), key=lambda kv: kv[1])
    assert worst[1] < 1e-4, f"final parameters: {worst}"

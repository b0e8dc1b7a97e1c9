"""Fine-tuning with the PyTorch frontend: a loss that reads the parameters
itself (a weight penalty, a submodule's weight read directly) gets the
gradient of those terms; frozen parameters (requires_grad=False) are
sharded and gathered without gradients, reduce-scatters or optimizer state;
a Llama with peft LoRA adapters trains 20 AdamW steps with only the
adapters updated. Gradients against float64 torch autograd, training
against torch.optim."""

import json
import re
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_models as T  # noqa: E402

from fsdp_mlir import runner  # noqa: E402
from fsdp_mlir.optim import OptimizerConfig  # noqa: E402
from fsdp_mlir.torch import compile_step, export_step, load_results  # noqa: E402
from fsdp_mlir.torch import verify as V  # noqa: E402
from fsdp_mlir.torch.export import reference  # noqa: E402
from fsdp_mlir.torch.train import export_training, lr_schedule, train_reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = T.RTOL


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


def classifier_batch(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def penalty_loss(model, x, y):
    """An L2 penalty over `model.parameters()`, computed in the loss."""
    return F.cross_entropy(model(x), y) + 0.5 * sum((p * p).sum() for p in model.parameters())


def direct_reads_loss(model, x, y):
    """Parameters read by attribute, by name and from the state dict."""
    named = dict(model.named_parameters())
    return (
        F.cross_entropy(model(x), y)
        + 0.3 * (model.head.weight**2).sum()
        + 0.2 * named["body.bias"].sum()
        + 0.1 * model.state_dict(keep_vars=True)["body.weight"].abs().sum()
    )


def plain_loss(model, x, y):
    return F.cross_entropy(model(x), y)


def check_against_float64(tmp_path, module, loss_fn, batch, **options):
    """torch_models.check_against_float64 on 2 ranks; also returns the
    float64 gradients."""
    model = T.check_against_float64(tmp_path / "step", module, loss_fn, batch, **options)
    return model, reference(module, loss_fn, batch)[1]


@pytest.mark.parametrize("loss_fn", [penalty_loss, direct_reads_loss], ids=lambda f: f.__name__)
def test_loss_reading_parameters_gets_their_gradients(tmp_path, loss_fn):
    torch.manual_seed(0)
    module = Classifier()
    batch = classifier_batch()
    _, grads = check_against_float64(tmp_path, module, loss_fn, batch, verify=False)
    # The terms matter: without them every gradient is far from these.
    _, without = reference(module, plain_loss, batch)
    for name in ("head.weight", "body.bias", "body.weight"):
        scale = float(grads[name].abs().max())
        assert float((grads[name] - without[name]).abs().max()) > 0.05 * scale, name


def test_verify_passes_for_a_loss_reading_parameters(tmp_path):
    torch.manual_seed(0)
    model = export_step(
        Classifier(), penalty_loss, classifier_batch(), str(tmp_path), mesh="2", verify=True
    )
    assert model["verify"]["rel_err"] <= model["verify"]["rtol"]


# ---------------------------------------------------------------- frozen


def comm_report(step_mlir, pipeline) -> dict:
    """fsdp-comm-report (JSON) of the compiled step, before the lowering
    (which the report does not read): @step's collectives."""
    pipeline = " ".join(o for o in pipeline.split() if o != "lower=true")
    proc = subprocess.run(
        [
            T.tool("fsdp-opt"),
            str(step_mlir),
            f"--fsdp-pipeline={pipeline}",
            "--fsdp-comm-report=format=json",
            "-o",
            "/dev/null",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(proc.stdout)
    return next(f for f in report["functions"] if f["name"] == "step")["collectives"]


def slot_bytes(model, names) -> int:
    """Bytes of the parameter slots of `names` on one rank (shard<0>, ceil)."""
    world = model["world"]
    total = 0
    for p in model["params"]:
        if p["name"] in names:
            rows = -(-p["shape"][0] // world)
            total += 4 * rows * int(np.prod(p["shape"][1:], dtype=np.int64))
    return total


def test_frozen_parameters_are_sharded_without_gradients(tmp_path):
    torch.manual_seed(0)
    module = Classifier()
    module.body.weight.requires_grad_(False)
    # The penalty reads the frozen weight too: it needs no gradient.
    model, grads = check_against_float64(
        tmp_path, module, penalty_loss, classifier_batch(), verify=True
    )
    frozen = {p["name"] for p in model["params"] if p["frozen"]}
    assert frozen == {"body.weight"}
    assert set(grads) == {"body.bias", "head.weight", "head.bias"}
    assert [r["param"] for r in model["results"] if r["kind"] == "grad"] == [
        "body.bias",
        "head.weight",
        "head.bias",
    ]
    # Still a sharded parameter: its layout and unit, and it is gathered.
    text = open(tmp_path / "step" / "step.mlir").read()
    assert text.count("fsdp.grad_of") == 3
    assert text.count("fsdp.layout = ") == 4
    collectives = comm_report(tmp_path / "step" / "step.mlir", model["config"]["pipeline"])
    world = model["world"]
    all_names = {p["name"] for p in model["params"]}
    trainable = all_names - frozen
    # Every rank sends its slot of each gradient k times (k = world) and
    # gathers every parameter; nothing is reduced for the frozen weight.
    assert collectives["reduce_scatter"]["bytes_sent"] == world * slot_bytes(model, trainable)
    assert collectives["all_gather"]["bytes_received"] >= world * slot_bytes(model, all_names)


def test_a_step_needs_a_trainable_parameter(tmp_path):
    module = Classifier()
    module.requires_grad_(False)
    with pytest.raises(Exception, match="no parameter requires grad"):
        export_step(module, plain_loss, classifier_batch(), str(tmp_path), mesh="2")


# ---------------------------------------------------------------- LoRA

STEPS = 20


lm_loss = T.hf_lm_loss


def tiny_llama(layers):
    """A tiny Llama (width 16, grouped-query attention, vocabulary 32) with
    fixed random weights, in eval mode."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def lora_llama():
    """A tiny Llama (2 layers, width 16, grouped-query attention) with peft
    LoRA adapters (rank 4) on the attention projections and the MLP's down
    projection: every decoder layer holds frozen base weights and trainable
    adapters in one unit."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    base = tiny_llama(2)
    lora = peft.LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"]
    )
    model = peft.get_peft_model(base, lora)
    # peft starts B at zero (the adapted model is the base model); random B
    # makes every adapter's gradient nonzero from the first step.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.1)
    return model, transformers.models.llama.modeling_llama.LlamaDecoderLayer


def counting_batches(steps, n, vocab=32, seq=8):
    """Sequences counting up from a random start (mod vocab): learnable."""
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(steps):
        start = torch.randint(0, vocab, (n, 1), generator=g)
        batches.append(((start + torch.arange(seq)) % vocab,))
    return batches


ADAMW = OptimizerConfig("adamw", weight_decay=0.01)


def check_lora_training(losses, final, reference, module):
    ref_losses, ref_final = reference
    losses = np.asarray(losses, np.float64)
    loss_err = np.abs(losses - ref_losses) / np.abs(ref_losses)
    assert loss_err.max() <= 1e-5, f"loss errors per step: {loss_err}"
    # The adapters alone learn: 3.49 -> 3.36 in torch.
    assert losses[-1] < 0.98 * losses[0], f"the loss did not go down: {losses}"
    adapters = {n for n, p in module.named_parameters() if p.requires_grad}
    assert adapters and all("lora_" in n for n in adapters)
    assert set(final) == set(ref_final) == adapters
    for name in adapters:
        got, want = np.asarray(final[name], np.float64), ref_final[name].astype(np.float64)
        err = float(np.abs(got - want).max()) / float(np.abs(want).max())
        assert err <= 1e-4, f"{name}: {err:.2e} off torch.optim"


def check_base_weights_stay(model, lowered):
    """The base weights stay bit-identical: no result is theirs and the
    lowered step never writes their arguments (fsdp-mark-read-only-args'
    `fsdp.read_only_args`; argument i is parameter i), so the runner cuts
    their shards from the inputs once and every step reads those bits."""
    frozen = [i for i, p in enumerate(model["params"]) if p["frozen"]]
    assert frozen
    assert not {model["params"][i]["name"] for i in frozen} & {
        r.get("param") for r in model["results"]
    }
    found = re.search(r"fsdp\.read_only_args = \{step = array<i64: ([0-9, ]*)>\}", lowered)
    assert found, "the lowered step records no read-only arguments"
    read_only = {int(i) for i in found.group(1).split(",")}
    assert set(frozen) <= read_only, sorted(set(frozen) - read_only)


@pytest.mark.skipif(not runner.available(), reason="libfsdprun not built")
def test_lora_llama_trains_only_the_adapters_with_compile_step(tmp_path):
    module, layer = lora_llama()
    base = {n: p.detach().clone() for n, p in module.named_parameters() if not p.requires_grad}
    batches = counting_batches(STEPS, 4)
    lrs = lr_schedule(STEPS, peak=3e-2, floor=3e-3)
    step = compile_step(
        module,
        lm_loss,
        batches[0],
        mesh="2",
        optimizer=ADAMW,
        units=[layer],
        workdir=str(tmp_path),
        verify=False,  # the training is compared with torch.optim below
    )
    try:
        losses = [float(step(*batch, lr=lr)) for batch, lr in zip(batches, lrs)]
        final = {n: v.numpy() for n, v in step.parameters().items()}
        model = step.model
        lowered = open(tmp_path / "lowered.mlir").read()
    finally:
        step.close()
    reference = train_reference(module, lm_loss, batches, ADAMW, lrs)
    check_lora_training(losses, final, reference, module)
    # The base weights are inputs the step never writes, and the module
    # (torch's) is untouched.
    assert {p["name"] for p in model["params"] if p["frozen"]} == set(base)
    check_base_weights_stay(model, lowered)
    for name, value in module.named_parameters():
        if name in base:
            assert torch.equal(value, base[name]), name


def test_lora_llama_trains_with_fsdp_run_on_4_ranks(tmp_path):
    module, layer = lora_llama()
    batches = counting_batches(STEPS, 4)
    lrs = lr_schedule(STEPS, peak=3e-2, floor=3e-3)
    out = tmp_path / "lora"
    model = export_training(
        module, lm_loss, batches, out, ADAMW, lrs, mesh="4", units=[layer], verify=False
    )
    # Half the steps, a checkpoint, then the rest resumed from it: the
    # checkpoint holds the adapters and their optimizer state; the frozen
    # base weights come from the inputs again.
    half = str(STEPS // 2)
    first = T.compile_and_run(
        str(out), model["train_pipeline"], extra=["--steps", half, "--save", str(out / "ckpt")]
    )
    second = str(out / "resumed")
    subprocess.run(
        [T.tool("fsdp-run"), str(out / "lowered.mlir"), "--inputs", str(out), "--outputs", second]
        + ["--steps", half, "--resume", str(out / "ckpt")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    losses = np.concatenate([np.load(f"{first}/loss.npy"), np.load(f"{second}/loss.npy")])
    reference = train_reference(module, lm_loss, batches, ADAMW, lrs)
    final = {n: np.load(f"{second}/{n}.npy") for n in reference[1]}
    check_lora_training(losses, final, reference, module)
    # Reduce-scatters carry the adapters' gradients only; every parameter is
    # gathered; optimizer state (exp_avg, exp_avg_sq) only for the adapters.
    adapters = {p["name"] for p in model["params"] if not p["frozen"]}
    collectives = comm_report(out / "step.mlir", model["train_pipeline"])
    assert collectives["reduce_scatter"]["bytes_sent"] == 4 * slot_bytes(model, adapters)
    all_names = {p["name"] for p in model["params"]}
    assert collectives["all_gather"]["bytes_received"] >= 4 * slot_bytes(model, all_names)
    lowered = open(f"{out}/lowered.mlir").read()
    for p in model["params"]:
        assert (f'"exp_avg.{p["name"]}"' in lowered) == (not p["frozen"]), p["name"]
    check_base_weights_stay(model, lowered)


# ------------------------------------------- buffers of any dtype, Functions


def whisper(n):
    """Its encoder's positional embedding is frozen (requires_grad=False)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.WhisperConfig(
        vocab_size=32,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=8,
        max_source_positions=8,
        max_target_positions=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(config).eval()
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(n, 8, 16, generator=g)
    labels = torch.randint(3, 32, (n, 6), generator=g)

    def loss_fn(model, feats, labels):
        return model(input_features=feats, labels=labels).loss

    return model, loss_fn, (feats, labels)


def bloom(n):
    """BloomGelu is a torch.autograd.Function without setup_context."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BloomConfig(vocab_size=32, hidden_size=16, n_layer=1, n_head=2)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = transformers.BloomForCausalLM(config).eval()
    return model, T.hf_lm_loss, (torch.randint(0, 32, (n, 8), generator=g),)


def gpt_bigcode(n):
    """Its causal mask is a bool buffer."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPTBigCodeConfig(
        vocab_size=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = transformers.GPTBigCodeForCausalLM(config).eval()
    return model, T.hf_lm_loss, (torch.randint(0, 32, (n, 8), generator=g),)


@pytest.mark.parametrize("case", [whisper, bloom, gpt_bigcode], ids=lambda f: f.__name__)
def test_model_matches_float64_autograd(tmp_path, case):
    module, loss_fn, batch = case(2)
    model, _ = check_against_float64(tmp_path, module, loss_fn, batch, verify=False)
    if case is whisper:
        assert [p["name"] for p in model["params"] if p["frozen"]] == [
            "model.encoder.embed_positions.weight"
        ]
    if case is gpt_bigcode:
        (mask,) = [b for b in model["buffers"] if b["torch_dtype"] == "bool"]
        assert mask["dtype"] == "u8" and not mask["updated"]


class GradReverse(torch.autograd.Function):
    """Identity forward, negated gradient: not the derivative of its forward."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Cube(torch.autograd.Function):
    """New style (setup_context), with its own (correct) backward."""

    @staticmethod
    def forward(x):
        return x * x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class WithFunction(Classifier):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.head(self.fn.apply(torch.tanh(self.body(x))))


def test_custom_autograd_functions(tmp_path):
    torch.manual_seed(0)
    check_against_float64(
        tmp_path, WithFunction(Cube), plain_loss, classifier_batch(), verify=False
    )
    with pytest.raises(Exception, match="'GradReverse'.*not the derivative of its forward"):
        export_step(WithFunction(GradReverse), plain_loss, classifier_batch(), None, mesh="2")


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_lora_with_activation_checkpointing(tmp_path, reentrant):
    """The usual LoRA recipe: peft adapters with transformers' gradient
    checkpointing in training mode (torch.utils.checkpoint around every
    decoder layer, and a hook that calls requires_grad_ on the input
    embeddings' output, which a functorch transform refuses). The trace
    calls the checkpointed layers directly (the same values and gradients);
    the adapters' gradients match float64 autograd within 1e-5 on 2 ranks,
    and the export's own check passes."""
    module, _ = lora_llama()
    module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    module.train()  # checkpointing is active in training mode only (no dropout here)
    assert module.base_model.model.model.layers[0].gradient_checkpointing
    (tokens,) = counting_batches(1, 4)[0]
    model = T.check_against_float64(tmp_path / "step", module, lm_loss, (tokens,), verify=True)
    assert model["verify"]["rel_err"] <= model["verify"]["rtol"]
    assert all("lora_" in p["name"] for p in model["params"] if not p["frozen"])


def test_prompt_tuning_and_the_module_after_the_export(tmp_path):
    """peft's prompt tuning: trainable virtual-token embeddings before a
    frozen Llama, whose input embeddings peft also holds as
    `word_embeddings` (one submodule under two paths). The virtual tokens'
    gradient matches float64 autograd on 2 ranks, and the export leaves
    every submodule its own parameters (it had left the traced tensor in
    the embeddings, which broke copying the module)."""
    peft = pytest.importorskip("peft")
    base = tiny_llama(1)
    module = peft.get_peft_model(
        base, peft.PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=3)
    )
    before = {n: p for n, p in module.named_parameters(remove_duplicate=False)}
    (tokens,) = counting_batches(1, 2)[0]
    model = T.check_against_float64(tmp_path / "step", module, lm_loss, (tokens,), verify=False)
    assert [p["name"] for p in model["params"] if not p["frozen"]] == [
        "prompt_encoder.default.embedding.weight"
    ]
    after = dict(module.named_parameters(remove_duplicate=False))
    assert after.keys() == before.keys()
    assert all(after[n] is p for n, p in before.items())


def test_lora_gradients_on_hsdp_2x2(tmp_path):
    """HSDP: the adapters' gradients are reduce-scattered over the shard
    axis and all-reduced over the replicate axis, the base weights neither."""
    module, layer = lora_llama()
    (tokens,) = counting_batches(1, 4)[0]
    out = str(tmp_path / "hsdp")
    model = export_step(module, lm_loss, (tokens,), out, mesh="2x2", units=[layer], verify=False)
    loss, grads = load_results(T.compile_and_run(out, model["config"]["pipeline"]), model=model)
    ref_loss, ref_grads = reference(module, lm_loss, (tokens,))
    assert set(grads) == set(ref_grads) and all("lora_" in n for n in grads)
    errors = V.relative_errors(
        {"loss": loss, **grads}, {"loss": ref_loss, **ref_grads}, list(grads)
    )
    assert max(errors.values()) <= RTOL, errors

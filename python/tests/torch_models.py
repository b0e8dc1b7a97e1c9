"""Small PyTorch models for the frontend tests (sizes kept tiny: every test
traces, imports, compiles and runs them)."""

import math
import os
import shutil
import subprocess

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, widths=(6, 10, 7, 3)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.silu(x) if i % 2 else F.gelu(x)
        return x


def mse_loss(model, x, y):
    return F.mse_loss(model(x), y)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


class ManualAttention(nn.Module):
    """Softmax attention written out (mask with a lower-triangular matrix)."""

    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        s = x.shape[1]
        scores = self.q(x) @ self.k(x).transpose(-1, -2) / math.sqrt(x.shape[-1])
        mask = torch.tril(torch.ones(s, s, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ self.v(x)


class Block(nn.Module):
    def __init__(self, dim, heads, ffn, norm="layer", act="gelu"):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim) if norm == "layer" else RMSNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim) if norm == "layer" else RMSNorm(dim)
        self.fc = nn.Linear(dim, ffn)
        self.out = nn.Linear(ffn, dim)
        self.act = nn.GELU() if act == "gelu" else nn.SiLU()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token + position embedding, causal attention blocks, final norm, head."""

    def __init__(self, vocab=13, seq=8, dim=16, heads=2, ffn=32, blocks=2, norm="layer"):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn, norm) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1])
        h = self.tok(tokens) + self.pos(pos)
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


def lm_loss(model, tokens, targets):
    logits = model(tokens)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class CNN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 2 * 2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def cls_loss(model, images, labels):
    return F.cross_entropy(model(images), labels)


def gpt_batch(n, vocab=13, seq=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (n, seq), generator=g)
    targets = torch.randint(0, vocab, (n, seq), generator=g)
    return tokens, targets


# ------------------------------------------------------------------ running

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tool(name):
    """The project's tool when built: FSDP_TOOLS_DIR (set by the ctest hook),
    else build/bin of this checkout, else PATH."""
    d = os.environ.get("FSDP_TOOLS_DIR") or os.path.join(REPO, "build", "bin")
    path = os.path.join(d, name)
    return path if os.access(path, os.X_OK) else shutil.which(name)


def mpirun():
    return shutil.which("mpirun")


def compile_and_run(
    out, pipeline="lower=true all-reduce-loss=true", backend="threads", np_=None, extra=()
):
    """fsdp-opt + fsdp-run (with `extra` flags) on an export directory;
    returns the results dir."""
    lowered = os.path.join(out, "lowered.mlir")
    results = os.path.join(out, "results")
    step = os.path.join(out, "step.mlir")
    subprocess.run(
        [tool("fsdp-opt"), step, f"--fsdp-pipeline={pipeline}", "-o", lowered],
        check=True,
        capture_output=True,
    )
    cmd = [tool("fsdp-run"), lowered, "--inputs", out, "--outputs", results, *extra]
    if backend == "mpi":
        flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
        cmd = [mpirun(), *flags, "-np", str(np_), *cmd, "--backend", "mpi"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return results


def max_rel_errors(got_loss, got, ref_loss, ref):
    """{name: max|got - ref| / max|ref|} for the loss and every gradient."""

    def rel(a, b):
        a, b = a.double(), b.double()
        scale = float(b.abs().max())
        return float((a - b).abs().max()) / scale if scale else float((a - b).abs().max())

    out = {"loss": rel(got_loss, ref_loss)}
    for name, g in ref.items():
        out[name] = rel(got[name], g)
    return out


# ------------------------------------------------ checks against float64

RTOL = 1e-5


def hf_lm_loss(model, tokens):
    """A Hugging Face causal LM's own loss on `tokens` (the labels are the
    inputs; the model shifts them)."""
    return model(input_ids=tokens, labels=tokens).loss


def float64_twin(module):
    """The module the float64 reference runs: itself, or for an MoE with
    transformers' grouped_mm experts (aten's grouped product has no float64
    kernel; the frontend's own reference would use the decomposition under
    test) a copy with the batched_mm experts, the same math by other code."""
    config = getattr(module, "config", None)
    if getattr(config, "_experts_implementation", None) != "grouped_mm":
        return module
    import copy

    twin = copy.deepcopy(module)
    twin.config._experts_implementation = "batched_mm"
    return twin


def errors_vs_float64(model, module, loss_fn, batch, results, world):
    """Relative errors of the run's loss and gradients against float64.

    With batch norm in training mode each rank normalizes by its own
    micro-batch's statistics, and a deep network of them is ill-conditioned
    in float32: there torch's own float32 is measured against float64 too,
    and a result passes when it is within RTOL or within V.NOISE_FACTOR of
    torch's float32 error (the errors returned are scaled so that <= RTOL
    means that)."""
    from fsdp_mlir.torch import load_results
    from fsdp_mlir.torch import verify as V
    from fsdp_mlir.torch.export import reference

    loss, grads = load_results(results, module)
    per_rank = any(b["updated"] for b in model["buffers"])
    w = world if per_rank else None

    def as_results(loss, grads):
        return {"loss": loss, **{f"grad.{n}": g for n, g in grads.items()}}

    ref = as_results(*reference(float64_twin(module), loss_fn, batch, world=w))
    names = [k for k in ref if k != "loss"]
    errors = V.relative_errors(as_results(loss, grads), ref, names)
    if per_rank:
        torch32 = V.relative_errors(
            as_results(*reference(module, loss_fn, batch, world=w, dtype=torch.float32)),
            ref,
            names,
        )
        errors = {k: RTOL * e / max(RTOL, V.NOISE_FACTOR * torch32[k]) for k, e in errors.items()}
    return errors


def check_against_float64(out, module, loss_fn, batch, world=2, **options):
    """Exports on `world` ranks into `out`, compiles and runs the step, and
    asserts that the loss and every gradient are within RTOL of float64
    autograd (errors_vs_float64). Returns the export's model description."""
    from fsdp_mlir.torch import export_step

    model = export_step(module, loss_fn, batch, str(out), mesh=str(world), **options)
    results = compile_and_run(str(out), model["config"]["pipeline"])
    errors = errors_vs_float64(model, module, loss_fn, batch, results, world)
    trainable = sum(1 for p in model["params"] if not p["frozen"])
    assert len(errors) == 1 + trainable, sorted(errors)
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"
    return model

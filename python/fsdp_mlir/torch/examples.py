"""Example models for `python -m fsdp_mlir.torch export fsdp_mlir.torch.examples:gpt`.

Each function returns what the CLI needs: the module, the loss function
`loss_fn(model, *batch)` (a mean over the micro-batch), the global batch, and
the FSDP units (the classes `fully_shard` would be applied to).
"""

from __future__ import annotations

import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, dim: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, ffn)
        self.out = nn.Linear(ffn, dim)

    def attn(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=32, seq=16, dim=32, heads=4, ffn=64, blocks=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


def lm_loss(model, tokens, targets):
    """Mean next-token cross-entropy over the micro-batch."""
    return F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def gpt(global_batch: int = 16, seed: int = 0) -> dict:
    """A 2-block GPT and a random token batch (16 sequences of 16 tokens)."""
    torch.manual_seed(seed)
    model = GPT()
    tokens = torch.randint(0, 32, (global_batch, 16))
    targets = torch.roll(tokens, -1, dims=1)
    return {"module": model, "loss_fn": lm_loss, "batch": (tokens, targets), "units": [Block]}


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def classify_loss(model, images, labels):
    return F.cross_entropy(model(images), labels)


def cnn(global_batch: int = 16, seed: int = 0) -> dict:
    """A two-conv CNN on 8x8 single-channel images."""
    torch.manual_seed(seed)
    images = torch.randn(global_batch, 1, 8, 8)
    labels = torch.randint(0, 10, (global_batch,))
    return {
        "module": CNN(),
        "loss_fn": classify_loss,
        "batch": (images, labels),
        "units": [r"conv\d"],
    }


class MLP(nn.Module):
    """Linear layers with ReLU between them (`widths`: input, hidden..., output)."""

    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


def mse_loss(model, x, y):
    return F.mse_loss(model(x), y)


def counting_batches(
    steps: int, global_batch: int = 16, vocab: int = 30, seq: int = 8, seed: int = 12
) -> list:
    """`steps` language-model batches (tokens, targets) a GPT can learn: each
    sequence counts from a random start by a random stride of 1 to 3 (mod
    `vocab`), the targets are the next tokens."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(steps):
        start = torch.randint(0, vocab, (global_batch, 1), generator=g)
        stride = torch.randint(1, 4, (global_batch, 1), generator=g)
        tokens = (start + stride * torch.arange(seq)) % vocab
        batches.append((tokens, torch.roll(tokens, -1, dims=1)))
    return batches


def gpt_training(steps: int, global_batch: int = 16, seed: int = 11) -> dict:
    """A GPT with uneven widths for 4 shards (30 vocabulary rows, a 36-wide
    model: 108 qkv rows, 70 hidden units), `steps` counting batches, AdamW
    and a learning-rate schedule (warmup, cosine decay): the training that
    tests and benchmarks run with the compiled step and with torch.optim.

    `exclude` names the entries not compared after training: the key bias
    (entries 36..71 of each qkv.bias) has a zero gradient in exact
    arithmetic, and Adam turns its rounding noise into steps of size lr."""
    from fsdp_mlir.optim import OptimizerConfig
    from fsdp_mlir.torch.train import lr_schedule

    torch.manual_seed(seed)
    blocks, dim = 2, 36
    module = GPT(vocab=30, seq=8, dim=dim, heads=4, ffn=70, blocks=blocks)
    key_bias = torch.zeros(3 * dim, dtype=torch.bool)
    key_bias[dim : 2 * dim] = True
    return {
        "module": module,
        "loss_fn": lm_loss,
        "batches": counting_batches(steps, global_batch),
        "optimizer": OptimizerConfig("adamw", betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
        "lrs": lr_schedule(steps, peak=1e-2, floor=1e-3, warmup=max(1, steps // 4)),
        "units": [Block],
        "exclude": {f"blocks.{b}.qkv.bias": key_bias.numpy() for b in range(blocks)},
    }


class SparseMoE(nn.Module):
    """A Mixtral-style sparse mixture of experts: a linear router, softmax,
    the top-k experts of each token with their probabilities renormalized,
    SwiGLU experts. The (token, expert) rows are sorted by expert and each
    expert runs on its own rows (`F.grouped_mm` with the end offsets of the
    groups), as transformers' "grouped_mm" experts do; the export writes
    those products as `fsdp.grouped_matmul` (or, with `experts="dense"`,
    every expert on every row)."""

    def __init__(self, dim: int, ffn: int, experts: int = 8, top_k: int = 2):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.gate_up = nn.Parameter(torch.randn(experts, dim, 2 * ffn) * dim**-0.5)
        self.down = nn.Parameter(torch.randn(experts, ffn, dim) * ffn**-0.5)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = F.softmax(self.router(x), dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // self.top_k
        counts = (flat.unsqueeze(1) == torch.arange(self.experts)).sum(0)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        gate, up = F.grouped_mm(x[token], self.gate_up, offs=offs).chunk(2, dim=-1)
        rows = F.grouped_mm(F.silu(gate) * up, self.down, offs=offs)
        rows = rows * weights.reshape(-1)[order].unsqueeze(-1)
        return torch.zeros_like(x).index_add(0, token, rows).reshape(shape)


class MoELM(nn.Module):
    """Embedding, one residual sparse MoE block after an RMS norm, a head."""

    def __init__(self, vocab: int, dim: int, ffn: int, experts: int = 8, top_k: int = 2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.RMSNorm(dim)
        self.moe = SparseMoE(dim, ffn, experts, top_k)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.emb(tokens)
        x = x + self.moe(self.norm(x))
        return self.head(x)


def moe(
    global_batch: int = 4,
    seq: int = 8,
    vocab: int = 32,
    dim: int = 16,
    ffn: int = 32,
    experts: int = 8,
    top_k: int = 2,
    seed: int = 0,
) -> dict:
    """A tiny sparse MoE language model (8 experts, top 2)."""
    torch.manual_seed(seed)
    model = MoELM(vocab, dim, ffn, experts, top_k)
    g = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, vocab, (global_batch, seq + 1), generator=g)
    return {
        "module": model,
        "loss_fn": lm_loss,
        "batch": (tokens[:, :-1], tokens[:, 1:]),
        "units": [SparseMoE],
    }

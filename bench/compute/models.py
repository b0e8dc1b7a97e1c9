"""The benchmark's PyTorch models, as specs of the PyTorch frontend
(`python -m fsdp_mlir.torch export bench/compute/models.py:mlp512`)."""

import torch

# The frontend's example models, at benchmark sizes.
from fsdp_mlir.torch.examples import GPT, MLP, lm_loss, mse_loss


def mlp512():
    """MLP 512-512-512-512, batch 512: 3 x 512^3 multiply-adds per pass."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 512, generator=g)
    y = torch.randn(512, 512, generator=g)
    return {
        "module": MLP((512, 512, 512, 512)),
        "loss_fn": mse_loss,
        "batch": (x, y),
        "mesh": "1",
    }


def gpt128():
    """2-block GPT, D=128, T=32, V=256, 4 heads, batch 16."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (16, 32), generator=g)
    targets = torch.randint(0, 256, (16, 32), generator=g)
    return {
        "module": GPT(vocab=256, seq=32, dim=128, heads=4, ffn=512, blocks=2),
        "loss_fn": lm_loss,
        "batch": (tokens, targets),
        "mesh": "1",
    }


def gpt2_small():
    """Hugging Face GPT-2 small at full size (124M parameters, vocabulary
    50,257, 12 layers, width 768), random init, eval mode (no dropout), one
    sequence of 128 tokens: the nn.Embedding backward's cost shows at this
    vocabulary."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50257, (1, 128), generator=g)
    return {"module": model, "loss_fn": hf_lm_loss, "batch": (tokens,), "mesh": "1"}


class Embedding(torch.nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)

    def forward(self, tokens):
        return self.wte(tokens)


def embedding_gpt2():
    """GPT-2 small's token embedding alone (50,257 x 768), 128 tokens, loss
    sum(embedding * weights): the step is the gather and the embedding
    backward (one-hot product or scatter-add loop)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50257, (1, 128), generator=g)
    weights = torch.randn(1, 128, 768, generator=g)
    return {
        "module": Embedding(50257, 768),
        "loss_fn": weighted_sum,
        "batch": (tokens, weights),
        "mesh": "1",
    }


class Bias(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return x + self.bias


def bias_grad():
    """A bias over 4,096 tokens of width 768 (batch 8 x 512 tokens), loss
    mean(y * t): the step is an elementwise pass and the bias gradient, a
    column sum over the 4,096 tokens (`fsdp-reduction-loops`' tiles of
    columns)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 512, 768, generator=g)
    t = 1000 + torch.randn(8, 512, 768, generator=g)
    return {"module": Bias(768), "loss_fn": weighted_mean, "batch": (x, t), "mesh": "1"}


def weighted_mean(model, x, t):
    return (model(x) * t).mean()


def weighted_sum(model, tokens, weights):
    return (model(tokens) * weights).sum()


def hf_lm_loss(model, tokens):
    return model(input_ids=tokens, labels=tokens).loss


# Multiply-adds of matrix products per training step (forward + backward =
# 3 x forward), for GFLOP/s.
def flops(name):
    if name == "mlp512":
        return 3 * 2 * 512 * (3 * 512 * 512)
    if name == "gpt128":
        b, t, d, f, v, blocks = 16, 32, 128, 512, 256, 2
        per_block = 2 * b * t * (3 * d * d + d * d + 2 * d * f) + 2 * 2 * b * t * t * d
        return 3 * (blocks * per_block + 2 * b * t * d * v)
    if name in ("embedding_gpt2", "bias_grad"):
        return 0  # no matrix product (the embedding's backward is a scatter-add)
    if name in ("gpt2_small", "gpt2_shape"):
        t, d, v, layers = 128, 768, 50257, 12
        per_layer = 2 * t * (3 * d * d + d * d + 2 * 4 * d * d) + 2 * 2 * t * t * d
        return 3 * (layers * per_layer + 2 * t * d * v)
    raise KeyError(name)


def gpt2_shape():
    """GPT-2 small's shape (124M parameters: 12 blocks, D=768, 12 heads,
    V=50257), T=128, batch 1: the step whose load time docs/AOT.md reports
    (bench/compute/aot_load.py)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50257, (1, 128), generator=g)
    targets = torch.randint(0, 50257, (1, 128), generator=g)
    return {
        "module": GPT(vocab=50257, seq=128, dim=768, heads=12, ffn=3072, blocks=12),
        "loss_fn": lm_loss,
        "batch": (tokens, targets),
        "mesh": "1",
    }

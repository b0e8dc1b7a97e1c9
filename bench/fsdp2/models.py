"""The 8-rank benchmark's models, as specs of the PyTorch frontend
(`python -m fsdp_mlir.torch export bench/fsdp2/models.py:gpt128x8 --mesh 8`).

Each spec names its FSDP units (`units`); `units(module)` returns the
submodules FSDP2's `fully_shard` is applied to, matched by the same rule as
the frontend's export, so both sides shard the same groups of parameters.
"""

import itertools

import torch
import torch.nn.functional as F
from fsdp_mlir.torch.examples import GPT, Block, lm_loss
from fsdp_mlir.torch.export import _unit_matcher
from torch import nn


class MLP(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Linear(a, b) for a, b in itertools.pairwise(widths)
        )

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


def mse_loss(model, x, y):
    return F.mse_loss(model(x), y)


def _mlp(widths, global_batch):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(global_batch, widths[0], generator=g)
    y = torch.randn(global_batch, widths[-1], generator=g)
    return {
        "module": MLP(widths),
        "loss_fn": mse_loss,
        "batch": (x, y),
        "units": [nn.Linear],
    }


def mlp512x8():
    """MLP 512-512-512-512, global batch 1024 (128 per rank on 8 ranks)."""
    return _mlp((512, 512, 512, 512), 1024)


def mlp_smoke():
    """A small MLP for the smoke run (2 ranks)."""
    return _mlp((16, 24, 8), 8)


def gpt128x8():
    """2-block GPT, D=128, T=32, V=256, 4 heads, global batch 64 (8 per rank)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (64, 32), generator=g)
    targets = torch.randint(0, 256, (64, 32), generator=g)
    return {
        "module": GPT(vocab=256, seq=32, dim=128, heads=4, ffn=512, blocks=2),
        "loss_fn": lm_loss,
        "batch": (tokens, targets),
        "units": [Block],
    }


def units(module):
    """The submodules that are FSDP units of `module` under its spec's rule."""
    rule = [Block] if isinstance(module, GPT) else [nn.Linear]
    match = _unit_matcher(rule)
    return [mod for path, mod in module.named_modules() if path and match(path, mod)]

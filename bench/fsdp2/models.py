"""The 8-rank benchmark's models, as specs of the PyTorch frontend
(`python -m fsdp_mlir.torch export bench/fsdp2/models.py:gpt128x8 --mesh 8`).

Each spec names its FSDP units (`units`): FSDP2's `fully_shard` is applied to
the submodules the frontend's export makes units, so both sides shard the
same groups of parameters.
"""

import torch
from fsdp_mlir.torch.examples import GPT, MLP, Block, lm_loss, mse_loss
from torch import nn


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

"""Steps with the PyTorch frontend's scatter decompositions and a guard on
a value read from a tensor (docs/FRONTENDS.md), for the compute=gpu
emulation tests: their index tensors and splats are constants of the step
(`memref.get_global` once bufferized), which the device reads through a
copy (fsdp-gpu-device-memory).

`scatter`: index_put with accumulation over a batch of row indices, scatter
along dim 1 with a constant index, index_add over a constant index.
`guard`: the forward reads `int(n.sum())` and slices by it (the step is
specialized on the value and guarded)."""

import torch
import torch.nn as nn


class Scatter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x, rows):
        h = torch.tanh(self.lin(x))  # (N, 6)
        acc = torch.zeros(3, 6).index_put((rows,), h, accumulate=True)
        cols = torch.tensor([[0, 5], [2, 1], [4, 3]])
        acc = acc.scatter(1, cols, h[:3, :2] * 2.0)
        acc = acc.index_add(0, torch.tensor([2, 0, 1, 2]), h[:4] * 0.5)
        return (acc * acc).mean() + h.sum() * 0.01


class Guard(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x, n):
        k = int(n.sum())
        return self.lin(x)[:, :k].pow(2).mean()


def scatter():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 4, generator=g)
    rows = torch.tensor([0, 2, 1, 0, 2, 2, 1, 0])
    return {"module": Scatter(), "loss_fn": lambda m, x, r: m(x, r), "batch": (x, rows)}


def guard():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 4, generator=g)
    n = torch.tensor([[1, 1]] * 8)
    return {"module": Guard(), "loss_fn": lambda m, x, n: m(x, n), "batch": (x, n)}

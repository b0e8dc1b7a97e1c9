"""Scatter, index_put, sort, topk and cumsum end to end: small modules whose
forward or backward uses each form, export -> fsdp-opt (compute=fast and
compute=loops) -> fsdp-run on 2 ranks, the loss and every gradient within
1e-5 relative of float64 torch autograd. The scatters run as
fsdp-one-hot-scatter's loops (the remarks are counted), never as
tm_tensor ops, and accumulate in aten's order (bitwise on one rank)."""

import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step, load_results  # noqa: E402
from fsdp_mlir.torch import verify as V  # noqa: E402
from fsdp_mlir.torch.export import reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = 1e-5
PIPELINE = "lower=true all-reduce-loss=true"


class Indexing(torch.nn.Module):
    """Reads and writes a parameter through advanced indexing: a gather by
    an index on an inner dim (its backward: index_put with accumulation on
    that dim, Falcon's and LeViT's form), separated index tensors, a write
    with repeated indices (the last wins) and an index_add / index_copy."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(4, 6, 5, generator=g))
        self.bias = torch.nn.Parameter(torch.randn(3, 5, generator=g))
        self.rows = torch.nn.Parameter(torch.randn(6, 5, generator=g))

    def forward(self, x):
        inner = torch.tensor([[0, 2, 2], [5, -1, 0]])
        picked = self.table[:, inner]  # (4, 2, 3, 5)
        apart = self.table[torch.tensor([1, 3, 1]), :, torch.tensor([4, 0, 4])]  # (3, 6)
        written = self.table.clone()
        written[:, torch.tensor([1, 4, 1])] = self.bias * 2.0
        added = self.rows.index_add(0, torch.tensor([2, 0, 2]), self.bias, alpha=0.5)
        copied = self.rows.index_copy(1, torch.tensor([4, 1]), self.table[0, :, :2] * 3.0)
        v = x.mean(0)
        return (
            (picked.sum((1, 2)) * v[:5]).sum()
            + (apart * v[2:8]).sum()
            + (written.square() * v[:5]).sum()
            + (added * v[:5]).sum()
            + copied.tanh().sum()
        )


class Scatters(torch.nn.Module):
    """scatter (src and value), scatter_add and scatter_reduce, one per dim."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.base = torch.nn.Parameter(torch.randn(3, 4, 5, generator=g))
        self.src = torch.nn.Parameter(torch.randn(3, 4, 5, generator=g))
        self.index = [torch.randint(0, n, (2, 3, 4), generator=g).tolist() for n in self.base.shape]

    def forward(self, x):
        idx = [torch.tensor(i) for i in self.index]
        src = self.src[:2, :3, :4] * x[0, 0]
        return (
            (self.base.scatter(0, idx[0], src) * x[0, 1]).square().sum()
            + self.base.scatter_add(1, idx[1], src).square().sum()
            + self.base.scatter_reduce(2, idx[2], src, "mean").square().sum()
            + (self.base.scatter(2, idx[2], 0.5) * x[0, 2]).square().sum()
        )


class SortTopkCumsum(torch.nn.Module):
    """sort, topk and cumsum along a dim of 13 (not a power of two), with
    their gradients (the backward of sort and topk is a scatter)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 13)

    def forward(self, x):
        h = self.lin(x)
        s = torch.sort(h, dim=-1, descending=True).values
        t = torch.topk(h, 4, dim=-1).values
        c = torch.cumsum(h, dim=-1)
        return (s * torch.arange(13.0)).mean() + t.square().mean() + c.square().mean()


def batch(n=2, width=8, seed=3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, width, generator=g),)


def loss_of(model, x):
    return model(x)


def run(out, options):
    step = os.path.join(out, "step.mlir")
    lowered = os.path.join(out, "lowered.mlirbc")
    results = os.path.join(out, "results")
    subprocess.run(
        [T.tool("fsdp-opt"), step, f"--fsdp-pipeline={options}", "--emit-bytecode", "-o", lowered],
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run(
        [T.tool("fsdp-run"), lowered, "--inputs", out, "--outputs", results],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return results


def scatter_loops(out):
    """(one-hot products fsdp-one-hot-scatter turns into loops, matrix
    products left after it)."""
    proc = subprocess.run(
        [
            T.tool("fsdp-opt"),
            os.path.join(out, "step.mlir"),
            "--pass-pipeline=builtin.module(func.func(fsdp-one-hot-scatter{report=true}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    loops = proc.stderr.count("one-hot matrix product as a scatter-add")
    return loops, proc.stdout.count("linalg.matmul")


# Matrix products of the step that are not scatters: the Linear's forward
# and its weight gradient.
PRODUCTS = {Indexing: 0, Scatters: 0, SortTopkCumsum: 2}


@pytest.mark.parametrize("case", list(PRODUCTS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("compute", ["fast", "loops"])
def test_indexing_matches_float64_autograd(tmp_path, case, compute):
    module = case()
    data = batch()
    out = str(tmp_path / "step")
    model = export_step(module, loss_of, data, out, mesh="2", verify=False)
    assert "tm_tensor" not in model["mlir"]
    if compute == "fast":  # every scatter is a loop
        loops, products = scatter_loops(out)
        assert loops > 0 and products == PRODUCTS[case], (loops, products)
    results = run(out, f"{PIPELINE} compute={compute}")
    loss, grads = load_results(results, module)
    ref_loss, ref_grads = reference(module, loss_of, data, world=2)
    names = [f"grad.{n}" for n in ref_grads]
    got = {"loss": loss, **{f"grad.{n}": g for n, g in grads.items()}}
    want = {"loss": ref_loss, **{f"grad.{n}": g for n, g in ref_grads.items()}}
    errors = V.relative_errors(got, want, names)
    assert max(errors.values()) <= RTOL, errors


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3, 4))

    def forward(self, scale):
        # The backward of the gather: index_put(accumulate=True) on dim 1.
        return (self.w[:, torch.tensor([1, 1, 2, 1, 1])] * scale).sum()


def test_accumulation_is_in_aten_order(tmp_path):
    """On one rank the accumulated gradient is bitwise torch's: 1e8 + 1 -
    1e8 + 1 sums to 1 in float32 in index order only."""
    module = Accumulate()
    scale = torch.tensor([1e8, 1.0, 2.0, -1e8, 1.0]).expand(1, 3, 5).contiguous()
    out = str(tmp_path / "acc")
    export_step(module, loss_of, (scale,), out, mesh="1", verify=False)
    results = run(out, PIPELINE)
    got = np.load(os.path.join(results, "grad.w.npy"))
    module.zero_grad(set_to_none=True)
    loss_of(module, scale).backward()
    want = module.w.grad.numpy()
    assert np.array_equal(got, want), (got, want)


class ReadsValues(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n):
        y = self.lin(x)
        return y[:, : int(n[0].sum())].sum()


def test_guard_fires_on_a_batch_with_another_value(tmp_path):
    """The step reads `int(n[0].sum())` (3 on the example batch, on both
    ranks): the same values run and match torch; a batch whose second rank
    reads 4 fails with the guard's message, naming the op, the module, the
    source line and the value, on that rank."""
    torch.manual_seed(0)
    module = ReadsValues()
    x, n = torch.randn(4, 4), torch.tensor([[1, 2]] * 4)

    def loss_fn(model, x, n):
        return model(x, n)

    out = str(tmp_path / "guard")
    model = export_step(module, loss_fn, (x, n), out, mesh="2", verify=False)
    assert [g["value"] for g in model["guards"]] == [3]
    results = run(out, PIPELINE)
    loss, _ = load_results(results, module)
    ref_loss, _ = reference(module, loss_fn, (x, n), world=2)
    assert abs(float(loss) - float(ref_loss)) <= RTOL * abs(float(ref_loss))
    np.save(os.path.join(out, "n.npy"), np.array([[1, 2]] * 2 + [[2, 2]] * 2, np.int64))
    with pytest.raises(subprocess.CalledProcessError) as err:
        run(out, PIPELINE)
    stderr = err.value.stderr.decode()
    assert "rank 1: guard failed: aten._local_scalar_dense in the root module (ReadsValues)" in (
        stderr
    ), stderr
    assert "return y[:, : int(n[0].sum())].sum()) read 3 on the example batch" in stderr
    assert "rank 1: rank 1" not in stderr and "rank 0: rank 0" not in stderr, stderr

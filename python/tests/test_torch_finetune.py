"""Fine-tuning with the PyTorch frontend: a loss that reads the parameters
itself (a weight penalty, a submodule's weight read directly) gets the
gradient of those terms, on 2 ranks against float64 torch autograd."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step, load_results  # noqa: E402
from fsdp_mlir.torch import verify as V  # noqa: E402
from fsdp_mlir.torch.export import reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = 1e-5


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


def check_against_float64(tmp_path, module, loss_fn, batch, world=2):
    """Export on `world` ranks, run, and compare the loss and every gradient
    with float64 autograd; returns the float64 gradients."""
    out = str(tmp_path / "step")
    model = export_step(module, loss_fn, batch, out, mesh=str(world), verify=False)
    loss, grads = load_results(T.compile_and_run(out, model["config"]["pipeline"]), module)
    ref_loss, ref_grads = reference(module, loss_fn, batch)
    names = list(ref_grads)
    got = {"loss": loss, **{f"grad.{n}": g for n, g in grads.items()}}
    want = {"loss": ref_loss, **{f"grad.{n}": g for n, g in ref_grads.items()}}
    errors = V.relative_errors(got, want, [f"grad.{n}" for n in names])
    assert len(errors) == 1 + len(names)
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"
    return ref_grads


@pytest.mark.parametrize("loss_fn", [penalty_loss, direct_reads_loss], ids=lambda f: f.__name__)
def test_loss_reading_parameters_gets_their_gradients(tmp_path, loss_fn):
    torch.manual_seed(0)
    module = Classifier()
    batch = classifier_batch()
    grads = check_against_float64(tmp_path, module, loss_fn, batch)
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

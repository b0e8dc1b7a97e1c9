"""Sparse MoE routing end to end: a Mixtral-style router whose logits tie
picks the experts torch's CPU topk picks (its tie order is that of
std::nth_element / std::partial_sort, not position order), exported ->
fsdp-opt -> fsdp-run on 2 ranks, loss and every gradient within 1e-5 of
float64 torch autograd."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402
from torch import nn  # noqa: E402

from fsdp_mlir.torch import examples, export_step  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

RTOL = T.RTOL
EXPERTS, TOP_K = 8, 2


class TiedRouterLM(nn.Module):
    """Embedding, a residual Mixtral-style sparse MoE (examples.SparseMoE:
    softmax router, top 2 of 8, SwiGLU experts as grouped products), a head.
    Built by `tied_router_lm` so that the router's logits are small
    integers, exact in any summation order, with experts sharing rows of
    the router: their probabilities tie bit for bit."""

    def __init__(self, vocab, dim, ffn):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.moe = examples.SparseMoE(dim, ffn, EXPERTS, TOP_K)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.emb(tokens)
        return self.head(x + self.moe(x))


def tied_router_lm(vocab=16, dim=8, ffn=16):
    torch.manual_seed(0)
    model = TiedRouterLM(vocab, dim, ffn)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.emb.weight.copy_(torch.randint(-1, 2, (vocab, dim), generator=g).float())
        # 8 experts, 3 distinct router rows: experts 1, 2, 4 and 6 tie, and so
        # do 0 and 5, and 3 and 7.
        rows = torch.randint(-1, 2, (3, dim), generator=g).float()
        model.moe.router.weight.copy_(rows[[0, 1, 1, 2, 1, 0, 1, 2]])
    return model


def router_picks(model, tokens, stable):
    """The experts each token's router picks: torch.topk's, or the first
    two of a stable descending sort (ties in expert order)."""
    with torch.no_grad():
        probs = torch.softmax(model.moe.router(model.emb(tokens)).reshape(-1, EXPERTS), -1)
    if stable:
        return torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :TOP_K]
    return torch.topk(probs, TOP_K, -1).indices


def lm_loss(model, tokens, targets):
    return nn.functional.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def test_tied_router_picks_torchs_experts(tmp_path):
    """The router's logits tie; torch's CPU topk picks among the tied experts
    in its own order, which a stable sort does not reproduce on this batch
    (checked first, so that the test can tell them apart). The step picks
    torch's experts: every expert's gradient, zero for the experts no token
    picked, matches float64 autograd on 2 ranks."""
    module = tied_router_lm()
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, 16, (2, 9), generator=g)
    batch = (data[:, :-1], data[:, 1:])
    picks = router_picks(module, batch[0], stable=False)
    stable = router_picks(module, batch[0], stable=True)
    differ = (picks.sort(-1).values != stable.sort(-1).values).any(-1)
    assert differ.any(), "no token's experts depend on the tie order"
    out = str(tmp_path / "tied")
    model = export_step(module, lm_loss, batch, out, mesh="2")
    assert model["mlir"].count('"fsdp.topk_indices"(') == 1
    results = T.compile_and_run(out, model["config"]["pipeline"])
    errors = T.errors_vs_float64(model, module, lm_loss, batch, results, 2)
    assert len(errors) == 1 + len(model["params"])
    bad = {k: v for k, v in errors.items() if not v <= RTOL}
    assert not bad, f"relative errors above {RTOL}: {bad}"

"""A float32 audit of every decomposition the frontend applies while tracing
(decompositions.OVERRIDES and the replacements of the trace's function mode):
each runs in float32 on hard but realistic inputs (data with an offset, long
accumulations of repeated indices, saturated activations) and must be within
3x torch float32's own error against float64 aten, and exact where aten's
float32 result is (copies, selections, counts). Runs in torch alone (the
reductions after fsdp-opt are test_reduction_accuracy.py's).

Every entry of OVERRIDES must have a case here: a new decomposition is
audited when it is added."""

import pytest

torch = pytest.importorskip("torch")

from fsdp_mlir.torch import decompositions as D  # noqa: E402

aten = torch.ops.aten

# At most this many times torch float32's own distance to float64.
FACTOR = 3.0
# Half an ulp of float32: the error allowed where torch float32 is exact.
HALF_ULP = 2.0**-24


def gen(seed):
    return torch.Generator().manual_seed(seed)


def offset(*shape, seed, base=1000.0):
    return base + torch.randn(*shape, generator=gen(seed))


def rel_error(got, want) -> float:
    """max |got - want| / max |want| (NaN against NaN and equal infinities
    agree)."""
    got, want = got.double(), want.double()
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    diff = torch.where(same, torch.zeros_like(got), (got - want).abs())
    finite = want[torch.isfinite(want)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    err = float(diff.max()) if diff.numel() else 0.0
    return err / scale if scale > 0 else err


def as_f64(args):
    def f64(a):
        return a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

    return [f64(a) for a in args]


def outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


# (aten op, decomposition, float32 arguments, keyword arguments). The same
# arguments in float64 give the reference (aten's float64 kernel).
def cases():
    g = torch.randn(4, 3, 8, 8, generator=gen(1))
    x_pool = offset(4, 3, 16, 16, seed=2)
    _, pool_idx = torch.nn.functional.max_pool2d_with_indices(x_pool, 2, 2)
    tokens = torch.randint(0, 4, (4096,), generator=gen(3))
    rows = offset(4096, 8, seed=4)
    logits = torch.randn(4096, 7, generator=gen(5))
    target = torch.randint(0, 7, (4096,), generator=gen(6))
    logits2d = torch.randn(8, 7, 4, 4, generator=gen(7))
    target2d = torch.randint(0, 7, (8, 4, 4), generator=gen(8))
    saturated = torch.cat([torch.linspace(-40, 40, 4001), torch.randn(999, generator=gen(9))])
    long_row = offset(4, 4096, seed=10)
    base = offset(6, 5, seed=11)
    idx_rows = torch.randint(0, 6, (4096,), generator=gen(12))
    scatter_idx = torch.randint(0, 6, (4096, 5), generator=gen(13))
    src = offset(4096, 5, seed=14)
    ties = torch.randint(0, 5, (6, 40), generator=gen(15)).float()
    nll_weight = torch.rand(7, generator=gen(16)) + 0.5
    return [
        (
            aten.avg_pool2d_backward.default,
            D.avg_pool2d_backward,
            [g, x_pool, [2, 2], [2, 2], [0, 0], False, True, None],
        ),
        (
            aten.max_pool2d_with_indices_backward.default,
            D.max_pool2d_with_indices_backward,
            [g, x_pool, [2, 2], [2, 2], [0, 0], [1, 1], False, pool_idx],
        ),
        (
            aten.embedding_dense_backward.default,
            D.embedding_dense_backward,
            [rows, tokens, 4, -1, False],
        ),
        (
            aten.nll_loss_backward.default,
            D.nll_loss_backward,
            [
                torch.tensor(1.0),
                torch.log_softmax(logits, 1),
                target,
                nll_weight,
                1,
                -100,
                (nll_weight[target]).sum(),
            ],
        ),
        (
            aten.nll_loss2d_backward.default,
            D.nll_loss2d_backward,
            [
                torch.tensor(1.0),
                torch.log_softmax(logits2d, 1),
                target2d,
                None,
                1,
                -100,
                torch.tensor(float(target2d.numel())),
            ],
        ),
        (aten.gelu.default, D.gelu, [saturated], {"approximate": "none"}),
        ("gelu-tanh", D.gelu, [saturated], {"approximate": "tanh"}),
        (aten.cumsum.default, D.cumsum, [long_row, 1]),
        # The backward of a pad: negative amounts (a slice), then a padding.
        (aten.constant_pad_nd.default, D.constant_pad_nd, [base, [-1, 2, 0, -3], 0.5]),
        # Restriding a keepdim result read in order (adaptive pooling).
        (aten.as_strided.default, D.as_strided, [base, [5, 1, 6], [6, 6, 1], 0]),
        (
            aten.as_strided_scatter.default,
            D.as_strided_scatter,
            [base, offset(30, seed=17), [30], [1], 0],
        ),
        (aten.index_put.default, D.index_put, [base, [idx_rows], src, True]),
        (aten._unsafe_index_put.default, D.index_put, [base, [idx_rows[:6]], src[:6], False]),
        (aten.scatter.src, D.scatter, [base, 0, scatter_idx[:6], src[:6]]),
        (aten.scatter.value, D.scatter_value, [base, 0, scatter_idx[:6], 2.5]),
        ("scatter.reduce", D.scatter, [base, 0, scatter_idx, src], {"reduce": "add"}),
        ("scatter.value_reduce", D.scatter_value, [base, 0, scatter_idx, 1.5], {"reduce": "add"}),
        (aten.scatter_add.default, D.scatter_add, [base, 0, scatter_idx, src]),
        ("scatter_reduce-sum", D.scatter_reduce, [base, 0, scatter_idx, src, "sum"]),
        ("scatter_reduce-mean", D.scatter_reduce, [base, 0, scatter_idx, src, "mean"]),
        (aten.index_add.default, D.index_add, [base, 0, idx_rows, src]),
        (aten.index_copy.default, D.index_copy, [base, 0, torch.tensor([4, 0, 2]), src[:3]]),
        (aten.histc.default, D.histc, [offset(4096, seed=18), 50, 996.0, 1004.0]),
        (aten.sort.default, D.sort, [ties, 1, True]),
        (aten.sort.stable, D.sort_stable, [ties], {"stable": True, "dim": 1}),
        (aten.topk.default, D.topk, [offset(6, 300, seed=19), 5, 1, True, True]),
    ]


def aten_op(op):
    names = {
        "gelu-tanh": aten.gelu.default,
        "scatter.reduce": aten.scatter.reduce,
        "scatter.value_reduce": aten.scatter.value_reduce,
        "scatter_reduce-sum": aten.scatter_reduce.two,
        "scatter_reduce-mean": aten.scatter_reduce.two,
    }
    return names.get(op, op)


def case_id(case):
    op = case[0]
    return op if isinstance(op, str) else str(op).replace("aten.", "")


CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_decomposition_within_3x_torch_float32(case):
    op, decomposition, args = case[:3]
    kwargs = case[3] if len(case) > 3 else {}
    op = aten_op(op)
    ours = outputs(decomposition(*args, **kwargs))
    torch32 = outputs(op(*args, **kwargs))
    ref = outputs(op(*as_f64(args), **kwargs))
    assert len(ours) == len(torch32) == len(ref)
    for i, (o, t, r) in enumerate(zip(ours, torch32, ref)):
        assert o.shape == t.shape and o.dtype == t.dtype, (i, o.shape, t.shape, o.dtype, t.dtype)
        if not r.is_floating_point():
            # Indices: a stable sort's are aten's, and the unstable sort's
            # and topk's (torch's own kernel eagerly, the runtime's copy of
            # it in a step).
            if op in (aten.sort.default, aten.sort.stable, aten.topk.default):
                assert torch.equal(o, t), f"output {i}: indices differ"
            continue
        theirs = rel_error(t, r)
        err = rel_error(o, r)
        assert err <= FACTOR * max(theirs, HALF_ULP), (
            f"output {i}: {err:.2e} off float64, torch float32 {theirs:.2e}"
        )


# Overrides that compute nothing: they refuse an op whose result's shape
# depends on values, or read a value and guard it (test_torch_frontend.py).
REFUSALS = (
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
)
NOT_NUMERIC = (*REFUSALS, aten._local_scalar_dense.default, aten.index.Tensor)


def test_every_override_is_audited():
    audited = {aten_op(c[0]) for c in CASES}
    missing = [str(op) for op in D.OVERRIDES if op not in audited and op not in NOT_NUMERIC]
    assert not missing, f"decompositions without an accuracy case: {missing}"
    for op in REFUSALS:
        with pytest.raises(RuntimeError, match=D.VALUE_DEPENDENT_SHAPE):
            D.OVERRIDES[op](torch.ones(3))

"""Numpy reference: hand-derived backward vs finite differences, global-batch
semantics."""

import numpy as np
import pytest
from conftest import build

from fsdp_mlir import model as M
from fsdp_mlir.dev import reference as R

CASES = {
    "mlp-gelu": ["mlp", "--widths", "5,7,6,3", "--batch", "3", "--mesh", "1"],
    "mlp-relu": ["mlp", "--widths", "5,7,6,3", "--batch", "3", "--mesh", "1", "--act", "relu"],
    "transformer": [
        "transformer",
        "--blocks",
        "2",
        "--dim",
        "4",
        "--ffn",
        "6",
        "--seq",
        "3",
        "--batch",
        "2",
        "--mesh",
        "1",
    ],
    "transformer-attention": [
        "transformer",
        "--blocks",
        "2",
        "--dim",
        "4",
        "--ffn",
        "6",
        "--seq",
        "3",
        "--batch",
        "2",
        "--mesh",
        "1",
        "--attention",
    ],
}


def split(model, values):
    params = {p["name"]: values[p["name"]] for p in model["params"]}
    data = {d["name"]: values[d["name"]] for d in model["data"]}
    return params, data


@pytest.mark.parametrize("case", sorted(CASES))
def test_backward_matches_finite_differences(case):
    """Central differences of the float64 loss, every parameter entry."""
    model = build(CASES[case])
    params, data = split(model, M.init_values(model))
    _, grads = R.loss_and_grads(model, params, data)
    h = 1e-6
    for name, value in params.items():
        numeric = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            plus, minus = dict(params), dict(params)
            plus[name] = value.copy()
            minus[name] = value.copy()
            plus[name][idx] += h
            minus[name][idx] -= h
            numeric[idx] = (R.loss_only(model, plus, data) - R.loss_only(model, minus, data)) / (
                2 * h
            )
        assert grads[name].shape == value.shape
        scale = np.max(np.abs(numeric))
        assert scale > 1e-4, f"{name}: gradient too small to test"
        np.testing.assert_allclose(
            grads[name], numeric, rtol=0, atol=1e-7 * max(scale, 1.0), err_msg=name
        )


def test_loss_is_mean_squared_error():
    """Zero-hidden-layer MLP is linear regression: check against its closed form."""
    model = build(["mlp", "--widths", "4,3", "--batch", "5", "--mesh", "1"])
    values = M.init_values(model)
    w, b = values["l0.weight"], values["l0.bias"]
    x, y = values["x"], values["y"]
    resid = x @ w.T + b - y
    loss, grads = R.loss_and_grads(model, *split(model, values))
    assert loss == pytest.approx(np.sum(resid**2) / resid.size, rel=1e-14)
    np.testing.assert_allclose(grads["l0.weight"], 2 * resid.T @ x / resid.size, rtol=1e-12)
    np.testing.assert_allclose(grads["l0.bias"], 2 * resid.sum(0) / resid.size, rtol=1e-12)


def test_gelu_is_tanh_approximation():
    z = np.linspace(-4, 4, 33)
    expected = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    np.testing.assert_allclose(R.gelu(z), expected, rtol=1e-15)
    h = 1e-6
    np.testing.assert_allclose(R.gelu_grad(z), (R.gelu(z + h) - R.gelu(z - h)) / (2 * h), atol=1e-8)


def test_causal_attention_ignores_the_future():
    """Changing the last position of the input changes no earlier output row's loss
    contribution: check through gradients w.r.t. a target at position 0."""
    model = build(CASES["transformer-attention"])
    params, data = split(model, M.init_values(model))
    cfg = model["config"]
    bsz, seq, dim = model["local_batch"], cfg["seq"], cfg["dim"]

    def first_position_output(x):
        h = x.reshape(bsz * seq, dim)
        out, _ = R.attention_forward(h, params, "blocks.0", cfg["eps"], bsz, seq)
        return out.reshape(bsz, seq, dim)[:, 0]

    x2 = data["x"].copy()
    x2[:, -1] += 1.0
    np.testing.assert_array_equal(first_position_output(data["x"]), first_position_output(x2))


@pytest.mark.parametrize("case", ["mlp-gelu", "transformer-attention"])
def test_global_reference_is_mean_over_ranks(case):
    """Mean loss / gradients on the global batch equal the average over ranks
    of each rank's micro-batch results (equal micro-batch sizes)."""
    argv = [a for a in CASES[case]]
    argv[argv.index("--mesh") + 1] = "2x2"
    model = build(argv)
    values = M.init_values(model)
    assert values["x"].shape[0] == 4 * model["local_batch"]
    glob = R.reference_results(model, values)
    per_rank = [R.reference_results(model, values, rank=r) for r in range(4)]
    for r in model["results"]:
        mean = sum(pr[r["name"]] for pr in per_rank) / 4
        np.testing.assert_allclose(glob[r["name"]], mean, rtol=2e-6, atol=1e-7, err_msg=r["name"])
    # Ranks hold different rows, so their losses differ.
    assert len({float(pr["loss"]) for pr in per_rank}) == 4


def test_reference_from_dir_casts_to_result_dtype(tmp_path):
    from conftest import generate

    _, data, model = generate(
        tmp_path, ["mlp", "--widths", "4,5,3", "--dtype", "bf16", "--mesh", "2"]
    )
    res = R.reference_from_dir(data)
    for r in model["results"]:
        np.testing.assert_array_equal(res[r["name"]], M.round_to(res[r["name"]], r["dtype"]))
    assert res["loss"].shape == ()
    assert res["grad.l0.weight"].shape == (5, 4)

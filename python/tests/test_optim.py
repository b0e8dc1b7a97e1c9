"""The numpy optimizer model (fsdp_mlir.optim) against torch.optim, and the
multi-step training reference (reference.train)."""

import numpy as np
import pytest
from conftest import build

from fsdp_mlir import model as M
from fsdp_mlir.dev import reference as R
from fsdp_mlir.optim import OptimizerConfig, clip_grad_norm, optimizer_step, torch_step

torch = pytest.importorskip("torch")

CONFIGS = {
    "sgd": OptimizerConfig("sgd"),
    "sgd-wd": OptimizerConfig("sgd", weight_decay=0.05),
    "sgd-momentum": OptimizerConfig("sgd", momentum=0.9, dampening=0.2, weight_decay=0.01),
    "sgd-nesterov": OptimizerConfig("sgd", momentum=0.8, nesterov=True, weight_decay=0.01),
    "sgd-clip": OptimizerConfig("sgd", momentum=0.5, max_grad_norm=0.1),
    "adamw": OptimizerConfig("adamw"),
    "adamw-wd": OptimizerConfig("adamw", weight_decay=0.1, betas=(0.8, 0.95), eps=1e-6),
    "adamw-lerp-high": OptimizerConfig("adamw", betas=(0.3, 0.99)),
    "adamw-clip": OptimizerConfig("adamw", weight_decay=0.01, max_grad_norm=0.2),
}


def assert_close(got, ref, tol=1e-6, floor=1e-30):
    """max|got - ref| <= tol * max(max|ref|, floor)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    scale = max(float(np.max(np.abs(ref))), floor)
    assert float(np.max(np.abs(got - ref))) <= tol * scale


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_three_steps_match_torch(name):
    """Three steps from step 0 (SGD's first-step buffer, AdamW's bias
    correction at t = 1, 2, 3), fed the same gradients as torch."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(7)
    shapes = {"w": (5, 3), "b": (5,), "s": ()}
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    ours_p, ours_s = dict(params), {}
    torch_p, torch_s = dict(params), {}
    for step, lr in enumerate((0.1, 0.05, 0.02)):
        grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        ours_p, new_s, ours_norm = optimizer_step(cfg, ours_p, grads, ours_s, lr, step)
        ours_s.update(new_s)
        torch_p, new_t, torch_norm = torch_step(cfg, torch_p, grads, torch_s, lr, step)
        torch_s.update(new_t)
        for k in params:
            assert_close(ours_p[k], torch_p[k])
        # torch's vectorized kernels fuse multiply-adds; where a momentum
        # or first-moment update cancels, the rounding difference is
        # relative to the gradient, not to the (small) result.
        for k in cfg.state_names():
            for p in params:
                floor = float(np.max(np.abs(grads[p])))
                assert_close(ours_s[f"{k}.{p}"], torch_s[f"{k}.{p}"], floor=floor)
        assert ours_s["step"] == torch_s["step"] == step + 1
        if cfg.max_grad_norm:
            assert_close(ours_norm, torch_norm)
        else:
            assert ours_norm is None and torch_norm is None


def test_clip_scales_only_above_the_bound():
    grads = {"a": np.array([3.0, 0.0], np.float32), "b": np.array([4.0], np.float32)}
    clipped, norm = clip_grad_norm(grads, 10.0)
    assert norm == np.float32(5.0)
    assert np.array_equal(clipped["a"], grads["a"])
    clipped, norm = clip_grad_norm(grads, 1.0)
    assert_close(np.concatenate([clipped["a"], clipped["b"]]), [0.6, 0.0, 0.8], 1e-6)


def test_zero_padding_stays_zero():
    """A slot's padding (param, grad and state 0) is left at 0."""
    for cfg in CONFIGS.values():
        z = {"p": np.zeros(3, np.float32)}
        state = {f"{s}.p": np.zeros(3, np.float32) for s in cfg.state_names()}
        p, s, _ = optimizer_step(cfg, z, z, state, 0.1, 4)
        assert not np.any(p["p"])
        assert all(not np.any(v) for k, v in s.items() if k != "step")


def test_config_rejects_unknown_optimizer():
    with pytest.raises(ValueError, match="expected one of"):
        OptimizerConfig("adam")


def test_pipeline_options_round_trip():
    cfg = OptimizerConfig("adamw", betas=(0.8, 0.95), weight_decay=0.1, max_grad_norm=1.0)
    assert cfg.pipeline_options() == (
        "optimizer=adamw betas=0.8,0.95 eps=1e-08 weight-decay=0.1 max-grad-norm=1.0"
    )


# ---------------------------------------------------------------- training


def mlp(world=2):
    model = build(["mlp", "--widths", "6,5,3", "--batch", "2", "--mesh", str(world)])
    return model, M.init_values(model)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_train_matches_manual_steps(dtype):
    model, values = mlp()
    cfg = OptimizerConfig("adamw", weight_decay=0.1, max_grad_norm=1.0)
    out = R.train(model, values, cfg, steps=3, lr=[1e-2, 5e-3, 1e-3], dtype=dtype)
    params = {p["name"]: np.asarray(values[p["name"]], dtype) for p in model["params"]}
    data = {d["name"]: values[d["name"]] for d in model["data"]}
    state, losses = {}, []
    for s, lr in enumerate([1e-2, 5e-3, 1e-3]):
        loss, grads = R.loss_and_grads(model, params, data, dtype=dtype)
        losses.append(float(loss))
        params, new_state, _ = optimizer_step(
            cfg, params, grads, state, float(np.float32(lr)), s, dtype
        )
        state.update(new_state)
    assert np.array_equal(out["loss"], losses)
    for name, value in params.items():
        assert np.array_equal(out["params"][name], value)
    assert out["state"]["step"] == 3 and out["grad_norm"].shape == (3,)


def test_train_reads_a_leading_step_dimension():
    model, values = mlp()
    steps = 2
    per_step = dict(values)
    rng = np.random.default_rng(3)
    for d in model["data"]:
        per_step[d["name"]] = rng.standard_normal([steps] + d["shape"])
    cfg = OptimizerConfig("sgd", momentum=0.9)
    out = R.train(model, per_step, cfg, steps=steps, lr=0.1, dtype=np.float64)
    # Step 1 alone, started from step 0's result, sees data slice 1.
    first = R.train(
        model,
        {**values, **{d["name"]: per_step[d["name"]][0] for d in model["data"]}},
        cfg,
        steps=1,
        lr=0.1,
        dtype=np.float64,
    )
    second = R.train(
        model,
        {**first["params"], **{d["name"]: per_step[d["name"]][1] for d in model["data"]}},
        cfg,
        steps=1,
        lr=0.1,
        state=first["state"],
        step=1,
        dtype=np.float64,
    )
    assert np.array_equal(out["loss"], np.concatenate([first["loss"], second["loss"]]))
    bad = dict(values, x=np.zeros((5, 5)))
    with pytest.raises(M.ModelError, match="expected"):
        R.train(model, bad, cfg, steps=1, lr=0.1)


def test_training_reduces_the_loss():
    model, values = mlp()
    out = R.train(model, values, OptimizerConfig("adamw"), steps=20, lr=1e-2)
    assert out["loss"][-1] < 0.8 * out["loss"][0]

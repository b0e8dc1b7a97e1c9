"""One optimizer step of a compiled program against torch.optim and numpy.

    optim_check.py options VARIANT
        prints the --fsdp-pipeline options of VARIANT (keep-grads=true)
    optim_check.py inputs DATA ROOT VARIANT...
        for each VARIANT writes lr.npy, step.npy and the optimizer state of
        every parameter of DATA/model.json into ROOT/VARIANT.in: random
        state when the variant starts after step 0; zeros on a first step
    optim_check.py check DATA ROOT VARIANT... [--grad-rtol R]
        for each VARIANT, compares ROOT/VARIANT.out (fsdp-run's outputs run
        on ROOT/VARIANT.in) with torch.optim (float32, foreach=False) and
        with fsdp_mlir.optim, both applied to the initial parameters and
        state and to the gradients the program returned (grad.<name>.npy,
        from keep-grads=true), which are checked against the numpy
        reference with rtol R; without them (keep-grads=false) the update is
        computed from the numpy reference gradients and compared with rtol
        1e-5.

    optim_check.py train DATA ROOT VARIANT STEPS
        writes per-step data (a leading step dimension) and a learning-rate
        schedule into ROOT/train.in
    optim_check.py train-check DATA ROOT VARIANT STEPS
        compares fsdp-run's training outputs ROOT/train.out (loss.npy,
        grad_norm.npy, the final parameters, state and step) with
        fsdp_mlir.dev.reference.train in float32, within 1e-5 of max|ref|

A tensor passes when max|got - ref| <= 1e-6 * max|ref| (the acceptance
tolerance of one step against torch.optim). Prints one line per tensor, and
PASS or FAIL.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from fsdp_mlir import model as M
from fsdp_mlir.dev import reference
from fsdp_mlir.optim import OptimizerConfig, optimizer_step, torch_step

TOL = 1e-6
# The update from the reference's float64 gradients (rounded to float32)
# instead of the program's own.
REFERENCE_GRAD_TOL = 1e-5

# name: (hyper-parameters, steps already taken, lr)
VARIANTS = {
    # AdamW, decoupled weight decay, bias correction at t = 4.
    "adamw": (OptimizerConfig("adamw", weight_decay=0.1), 3, 1e-3),
    # AdamW with other betas and eps, clipped (the norm is about 1.5).
    "adamw-clip": (
        OptimizerConfig("adamw", betas=(0.8, 0.95), eps=1e-6, weight_decay=0.01, max_grad_norm=0.5),
        5,
        2e-3,
    ),
    # SGD with momentum, dampening and L2 weight decay, after two steps.
    "sgd-momentum": (
        OptimizerConfig("sgd", momentum=0.9, dampening=0.1, weight_decay=0.01),
        2,
        0.05,
    ),
    # First SGD step (momentum_buffer = grad), Nesterov, clipped.
    "sgd-nesterov-clip": (
        OptimizerConfig("sgd", momentum=0.9, nesterov=True, weight_decay=0.01, max_grad_norm=0.3),
        0,
        0.1,
    ),
    # Plain SGD; clipping that does not bind (coefficient 1).
    "sgd": (OptimizerConfig("sgd", max_grad_norm=100.0), 7, 0.1),
}


def make_inputs(data: str, opt: str, variant: str, seed: int = 1) -> None:
    model = M.load_model(data)
    cfg, step, lr = VARIANTS[variant]
    rng = np.random.default_rng(seed)
    os.makedirs(opt, exist_ok=True)
    np.save(os.path.join(opt, "lr.npy"), np.asarray(lr, np.float32))
    np.save(os.path.join(opt, "step.npy"), np.asarray(step, np.float32))
    for p in model["params"]:
        for s in cfg.state_names():
            shape = p["shape"]
            if step == 0:
                value = np.zeros(shape)
            elif s == "exp_avg_sq":
                value = 1e-3 * rng.random(shape)
            else:
                value = 1e-2 * rng.standard_normal(shape)
            np.save(os.path.join(opt, f"{s}.{p['name']}.npy"), value.astype(np.float32))


def load(path: str) -> np.ndarray:
    return np.load(path).astype(np.float64)


def last(path: str) -> np.ndarray:
    """A per-step scalar result: fsdp-run's training mode writes the value of
    every step ([N]); the value of the last one."""
    value = load(path)
    return value.reshape(-1)[-1] if value.ndim == 1 else value


def compare(name: str, got, ref, tol: float) -> bool:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        print(f"  {name}: shape {got.shape}, expected {ref.shape}  FAIL")
        return False
    ref_max = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    ok = bool(np.all(np.isfinite(got))) and err <= tol * ref_max
    status = "ok" if ok else "FAIL"
    print(f"  {name}: max|ref| {ref_max:.4e}  err {err:.3e}  rel {err / ref_max:.2e}  {status}")
    return ok


def check_variant(data: str, root: str, variant: str, grad_rtol: float) -> bool:
    model = M.load_model(data)
    cfg, _, _ = VARIANTS[variant]
    opt, out = os.path.join(root, variant + ".in"), os.path.join(root, variant + ".out")
    print(f"{variant}: {cfg.pipeline_options()}")
    values = M.load_inputs(model, data)
    names = [p["name"] for p in model["params"]]
    params = {n: values[n].astype(np.float32) for n in names}
    lr = float(load(os.path.join(opt, "lr.npy")))
    step = float(load(os.path.join(opt, "step.npy")))
    state = {}
    for n in names:
        for s in cfg.state_names():
            state[f"{s}.{n}"] = load(os.path.join(opt, f"{s}.{n}.npy")).astype(np.float32)
    ok = True
    ref = reference.reference_results(model, values)
    if all(os.path.isfile(os.path.join(out, f"grad.{n}.npy")) for n in names):
        grads = {n: load(os.path.join(out, f"grad.{n}.npy")) for n in names}
        for n in names:
            ok &= compare(f"grad.{n} vs numpy", grads[n], ref[f"grad.{n}"], grad_rtol)
        tol = TOL
    else:
        grads = {n: ref[f"grad.{n}"] for n in names}
        tol = REFERENCE_GRAD_TOL
    grads = {n: g.astype(np.float32) for n, g in grads.items()}
    expected = {
        "torch": torch_step(cfg, params, grads, state, lr, step),
        "numpy": optimizer_step(cfg, params, grads, state, lr, step, np.float32),
    }
    for who, (new_params, new_state, norm) in expected.items():
        for n in names:
            got = load(os.path.join(out, f"{n}.npy"))
            ok &= compare(f"{n} vs {who}", got, new_params[n], tol)
        for key, value in new_state.items():
            ok &= compare(f"{key} vs {who}", load(os.path.join(out, f"{key}.npy")), value, tol)
        norm_file = os.path.join(out, "grad_norm.npy")
        if norm is not None:
            ok &= compare(f"grad_norm vs {who}", last(norm_file), norm, tol)
        elif os.path.isfile(norm_file):
            print("  grad_norm.npy written without clipping  FAIL")
            ok = False
    if cfg.max_grad_norm > 0.0:
        norm = float(last(os.path.join(out, "grad_norm.npy")))
        active = "active" if norm > cfg.max_grad_norm else "inactive"
        print(f"  clipping {active}: norm {norm:.6g}, max {cfg.max_grad_norm:g}")
    # The step did change every parameter.
    for n in names:
        if np.array_equal(load(os.path.join(out, f"{n}.npy")), params[n]):
            print(f"  {n} did not change  FAIL")
            ok = False
    return ok


TRAIN_TOL = 1e-5


def train_inputs(data: str, root: str, variant: str, steps: int) -> None:
    model = M.load_model(data)
    _, _, lr = VARIANTS[variant]
    rng = np.random.default_rng(2)
    opt = os.path.join(root, "train.in")
    os.makedirs(opt, exist_ok=True)
    for d in model["data"]:
        batch = rng.standard_normal([steps] + d["shape"]).astype(np.float32)
        np.save(os.path.join(opt, d["name"] + ".npy"), batch)
    # A linear decay to a tenth.
    np.save(os.path.join(opt, "lr.npy"), np.linspace(lr, lr / 10, steps).astype(np.float32))


def train_check(data: str, root: str, variant: str, steps: int) -> bool:
    model = M.load_model(data)
    cfg, _, _ = VARIANTS[variant]
    opt, out = os.path.join(root, "train.in"), os.path.join(root, "train.out")
    values = M.load_inputs(model, data)
    for d in model["data"]:
        values[d["name"]] = load(os.path.join(opt, d["name"] + ".npy"))
    lr = load(os.path.join(opt, "lr.npy"))
    ref = reference.train(model, values, cfg, steps, lr, dtype=np.float32)
    print(f"train {variant}: {steps} steps, {cfg.pipeline_options()}")
    ok = compare("loss", load(os.path.join(out, "loss.npy")), ref["loss"], TRAIN_TOL)
    if cfg.max_grad_norm > 0.0:
        got = load(os.path.join(out, "grad_norm.npy"))
        ok &= compare("grad_norm", got, ref["grad_norm"], TRAIN_TOL)
    for name, value in list(ref["params"].items()) + list(ref["state"].items()):
        ok &= compare(name, load(os.path.join(out, name + ".npy")), value, TRAIN_TOL)
    print("PASS" if ok else "FAIL")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("options", "inputs", "check", "train", "train-check"))
    ap.add_argument("args", nargs="+")
    ap.add_argument("--grad-rtol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.command == "options":
        (variant,) = args.args
        print(VARIANTS[variant][0].pipeline_options() + " keep-grads=true")
        return 0
    if args.command == "inputs":
        data, root, *variants = args.args
        for variant in variants:
            make_inputs(data, os.path.join(root, variant + ".in"), variant, args.seed)
        return 0
    if args.command in ("train", "train-check"):
        data, root, variant, steps = args.args
        if args.command == "train":
            train_inputs(data, root, variant, int(steps))
            return 0
        return 0 if train_check(data, root, variant, int(steps)) else 1
    data, root, *variants = args.args
    ok = True
    for variant in variants:
        ok &= check_variant(data, root, variant, args.grad_rtol)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

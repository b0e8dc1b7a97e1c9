"""Compare a runner's outputs with the numpy reference.

    python -m fsdp_mlir.dev.check DATA OUT [--rtol R] [--atol A] [--loss-rank N]

DATA is the directory written by `fsdp_mlir.dev.gen --data` (model.json and the
global inputs); OUT holds `<result name>.npy` for the loss and every gradient
at global shape. A tensor passes when

    max |out - ref| <= atol + rtol * max |ref|

(max-norm error relative to the max-norm of the reference tensor). The exit
status is 0 when every result passes, 1 on a mismatch, a missing file, a wrong
shape or a non-finite value, and 2 when DATA itself cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from .. import model as M
from .reference import reference_results

DEFAULT_RTOL = {"f32": 1e-5, "bf16": 2e-2}


def compare(ref: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> dict:
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    ref_max = float(np.max(np.abs(ref))) if ref.size else 0.0
    finite = bool(np.all(np.isfinite(got)))
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    if not finite:
        err = float("inf")
    rel = err / ref_max if ref_max > 0 else (0.0 if err == 0 else float("inf"))
    ok = finite and err <= atol + rtol * ref_max
    return {"ref_max": ref_max, "abs_err": err, "rel_err": rel, "ok": ok}


def load_output(path: str, dtype: str) -> np.ndarray:
    return M.from_storage(np.load(path), dtype)


def check(
    data_dir: str,
    out_dir: str,
    rtol: float | None = None,
    atol: float = 0.0,
    loss_rank: int | None = None,
    skip_loss: bool = False,
    stream=None,
) -> bool:
    """Print the comparison table; True when every result passes."""
    stream = stream or sys.stdout
    model = M.load_model(data_dir)
    if model.get("kind") == "torch":
        raise M.ModelError(
            f"{data_dir}: written by fsdp_mlir.torch; compare with "
            "python -m fsdp_mlir.torch check SPEC DATA OUT"
        )
    values = M.load_inputs(model, data_dir)
    ref = reference_results(model, values)
    if loss_rank is not None:
        if not 0 <= loss_rank < model["world"]:
            raise M.ModelError(f"--loss-rank {loss_rank}: world size is {model['world']}")
        ref["loss"] = reference_results(model, values, rank=loss_rank)["loss"]
    if rtol is None:
        rtol = DEFAULT_RTOL[model["dtype"]]

    rows = []
    all_ok = True
    for r in model["results"]:
        if skip_loss and r["kind"] == "loss":
            continue
        name, shape = r["name"], tuple(r["shape"])
        shape_text = "x".join(map(str, shape)) or "scalar"
        path = os.path.join(out_dir, name + ".npy")
        status = None
        if not os.path.isfile(path):
            status = "MISSING"
        else:
            try:
                got = load_output(path, r["dtype"])
            except (ValueError, OSError, M.ModelError) as err:
                status = f"UNREADABLE ({err})"
            else:
                if got.shape != shape:
                    status = f"SHAPE {'x'.join(map(str, got.shape)) or 'scalar'}"
        if status is not None:
            all_ok = False
            rows.append((name, shape_text, None, status))
            continue
        res = compare(ref[name], got, rtol, atol)
        all_ok &= res["ok"]
        if r["kind"] == "loss":
            print(
                f"loss: got {float(got):.9g}  reference {float(ref[name]):.9g}"
                + (f" (rank {loss_rank})" if loss_rank is not None else " (global mean)"),
                file=stream,
            )
        rows.append((name, shape_text, res, "ok" if res["ok"] else "MISMATCH"))

    width = max([len(r[0]) for r in rows] + [6])
    print(
        f"{'result':<{width}}  {'shape':>10}  {'max|ref|':>11}  {'max abs err':>11}"
        f"  {'rel err':>9}  status",
        file=stream,
    )
    for name, shape_text, res, status in rows:
        if res is None:
            nums = f"{'-':>11}  {'-':>11}  {'-':>9}"
        else:
            nums = f"{res['ref_max']:11.4e}  {res['abs_err']:11.4e}  {res['rel_err']:9.2e}"
        print(f"{name:<{width}}  {shape_text:>10}  {nums}  {status}", file=stream)
    print(
        f"{'PASS' if all_ok else 'FAIL'}: {len(rows)} results, rtol {rtol:g}, atol {atol:g}"
        " (max abs error vs atol + rtol * max|ref|)",
        file=stream,
    )
    return all_ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.dev.check",
        description="Compare a runner's loss and gradients with the numpy reference.",
    )
    ap.add_argument("data", help="directory written by fsdp_mlir.dev.gen --data")
    ap.add_argument("out", help="directory holding <result name>.npy")
    ap.add_argument(
        "--rtol",
        type=float,
        help="relative tolerance vs max|ref| per tensor (default 1e-5 f32, 2e-2 bf16)",
    )
    ap.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0)")
    ap.add_argument(
        "--loss-rank",
        type=int,
        help="compare the loss with rank N's micro-batch loss instead of the global mean",
    )
    ap.add_argument("--skip-loss", action="store_true", help="do not check the loss")
    args = ap.parse_args(argv)
    try:
        ok = check(args.data, args.out, args.rtol, args.atol, args.loss_rank, args.skip_loss)
    except M.ModelError as err:
        print(f"fsdp_mlir.dev.check: error: {err}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Multi-step training through fsdp-run against the numpy reference.

train_check.py inputs DATA OUT STEPS
    writes into OUT one batch per step for every data argument of
    DATA/model.json ([STEPS, ...global shape], step 0 the generator's
    batch) and lr.npy [STEPS]: a learning-rate schedule (linear warmup
    over the first tenth of the steps, then cosine decay to a tenth of
    the peak)
train_check.py check DATA IN OUT STEPS OPTIONS [--rtol R]
    trains the same model in numpy float32 on the global batch
    (fsdp_mlir.dev.reference.train, the optimizer of OPTIONS, a
    --fsdp-pipeline option string such as "optimizer=adamw
    weight-decay=0.1") from DATA's initial parameters with IN's batches
    and schedule, and compares every step's loss with OUT/loss.npy
    (fsdp-run's) within a relative R (default 1e-4). Prints the worst
    step and PASS or FAIL.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
from fsdp_mlir import model as M
from fsdp_mlir.dev import reference
from fsdp_mlir.optim import OptimizerConfig

PEAK_LR = 3e-3


def schedule(steps: int) -> np.ndarray:
    warm = max(1, steps // 10)
    lr = []
    for s in range(steps):
        if s < warm:
            lr.append(PEAK_LR * (s + 1) / warm)
        else:
            t = (s - warm) / max(1, steps - warm)
            lr.append(PEAK_LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))))
    return np.asarray(lr, np.float32)


def write_inputs(data_dir: str, out: str, steps: int) -> None:
    model = M.load_model(data_dir)
    values = M.load_inputs(model, data_dir)
    rng = np.random.default_rng(model["seed"] + 1)
    os.makedirs(out, exist_ok=True)
    for d in model["data"]:
        batches = rng.standard_normal([steps] + list(d["shape"]))
        batches[0] = values[d["name"]]
        np.save(
            os.path.join(out, d["name"] + ".npy"), M.to_storage(batches, d["dtype"])
        )
    np.save(os.path.join(out, "lr.npy"), schedule(steps))


def parse_options(text: str) -> OptimizerConfig:
    """The optimizer of a --fsdp-pipeline option string."""
    opts = dict(item.split("=", 1) for item in text.split())
    cfg = {"kind": opts.get("optimizer", "sgd")}
    for key, name, conv in (
        ("momentum", "momentum", float),
        ("dampening", "dampening", float),
        ("weight-decay", "weight_decay", float),
        ("eps", "eps", float),
        ("max-grad-norm", "max_grad_norm", float),
    ):
        if key in opts:
            cfg[name] = conv(opts[key])
    if "nesterov" in opts:
        cfg["nesterov"] = opts["nesterov"] == "true"
    if "betas" in opts:
        cfg["betas"] = tuple(float(b) for b in opts["betas"].split(","))
    return OptimizerConfig(**cfg)


def check(
    data_dir: str, in_dir: str, out_dir: str, steps: int, options: str, rtol: float
) -> int:
    model = M.load_model(data_dir)
    values = M.load_inputs(model, data_dir)
    for d in model["data"]:
        values[d["name"]] = M.from_storage(
            np.load(os.path.join(in_dir, d["name"] + ".npy")), d["dtype"]
        )
    lr = np.load(os.path.join(in_dir, "lr.npy"))
    ref = reference.train(
        model, values, parse_options(options), steps, lr, dtype=np.float32
    )
    got = np.load(os.path.join(out_dir, "loss.npy"))
    if got.shape != (steps,):
        print(f"loss.npy has shape {list(got.shape)}, expected [{steps}]\nFAIL")
        return 1
    rel = np.abs(got.astype(np.float64) - ref["loss"]) / np.abs(ref["loss"])
    worst = int(np.argmax(rel))
    print(
        f"{steps} steps: loss {ref['loss'][0]:.6f} -> {ref['loss'][-1]:.6f}; worst step "
        f"{worst + 1}: {got[worst]:.7g} vs numpy {ref['loss'][worst]:.7g} "
        f"(relative {rel[worst]:.2e}, limit {rtol:g})"
    )
    ok = bool(np.all(rel <= rtol)) and ref["loss"][-1] < ref["loss"][0]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def same(full: str, first: str, second: str, rtol: float | None) -> int:
    def arrays(d):
        return {
            f[:-4]: np.load(os.path.join(d, f))
            for f in os.listdir(d)
            if f.endswith(".npy")
        }

    want, a, b = arrays(full), arrays(first), arrays(second)
    b["loss"] = np.concatenate([a["loss"], b["loss"]])
    if sorted(want) != sorted(b):
        print(f"other files: {sorted(set(want) ^ set(b))}\nFAIL")
        return 1
    for name in sorted(want):
        w, g = want[name].astype(np.float64), b[name].astype(np.float64)
        if rtol is None:
            bad = want[name].tobytes() != b[name].tobytes()
        elif name == "loss":
            bad = not np.all(np.abs(g - w) <= rtol * np.abs(w))
        else:
            bad = np.max(np.abs(g - w), initial=0) > rtol * max(
                np.max(np.abs(w), initial=0), 1e-30
            )
        if bad:
            print(f"{name} differs\nFAIL")
            return 1
    how = "bit-identical" if rtol is None else f"within {rtol:g}"
    print(f"resumed run: {len(want)} arrays {how} to the uninterrupted run")
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "inputs":
        write_inputs(argv[1], argv[2], int(argv[3]))
        return 0
    if argv[0] == "same":
        rtol = float(argv[argv.index("--rtol") + 1]) if "--rtol" in argv else None
        return same(argv[1], argv[2], argv[3], rtol)
    rtol = float(argv[argv.index("--rtol") + 1]) if "--rtol" in argv else 1e-4
    return check(argv[1], argv[2], argv[3], int(argv[4]), argv[5], rtol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

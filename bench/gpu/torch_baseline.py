"""torch eager and torch.compile on the GPU, next to the packed steps: the
same model and batch (bench/gpu/models.py, fixed seeds), one training step
(forward, backward, gradients set to None before it) timed on one GPU.

    python3 bench/gpu/torch_baseline.py --pack pack.json --out torch.json [--dry-run]
    python3 bench/gpu/torch_baseline.py --one gpt256 none eager     # one row, JSON on stdout

Every (model, autocast) of the pack's ``torch`` fields is one row with two
measurements, each in its own process (a crash or a hung compile costs that
measurement only):

- eager: fp32 with TF32 off (the packed fp32 steps run exact fp32 gemms),
  or under ``torch.autocast("cuda", torch.bfloat16)`` for bf16 rows;
- compile: ``torch.compile(model)`` (inductor, default mode) in the same
  precision, for the rows whose ``torch`` field has ``"compile": true``
  (compiling takes a minute per row); the first call's time is the compile time, refused past
  ``--compile-budget`` seconds (the process is stopped) and reported as
  skipped with the reason.

Times are the median of ``--iters`` steps after ``--warmup`` (CUDA
synchronized around each). Rows run GPT-2 first, bf16 first, within a total
``--budget``. Without torch, CUDA or transformers (GPT-2), or
with --dry-run, every measurement is "skipped" with the reason. Standard
library only until a measurement runs; exit status 0 unless the pack cannot
be read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _rows(pack: dict) -> list[dict]:
    rows, seen = [], set()
    for s in pack["steps"]:
        t = s.get("torch")
        if not t:
            continue
        key = f"{t['model']}|{t.get('autocast') or 'none'}"
        if key not in seen:
            seen.add(key)
            rows.append(
                {"key": key, "model": t["model"], "autocast": t.get("autocast") or "none",
                 "compile": False}
            )  # fmt: skip
        if t.get("compile"):
            next(r for r in rows if r["key"] == key)["compile"] = True
    # The goal's rows first (GPT-2, bf16), so that the budget reaches them.
    return sorted(
        rows, key=lambda r: (r["model"] != "gpt2_small", r["autocast"] != "bf16")
    )


def measure(
    model: str, autocast: str, mode: str, warmup: int, iters: int, device="cuda"
) -> dict:
    """One measurement in this process (the --one child); ``device`` "cpu"
    checks this code where there is no GPU."""
    import contextlib

    import torch

    gpu = device == "cuda"
    if gpu and not torch.cuda.is_available():
        return {"skipped": "no CUDA device (torch.cuda.is_available() is false)"}
    sys.path.insert(0, HERE)
    import models

    try:
        spec = models.load(model)
    except ImportError as e:  # transformers for GPT-2
        return {"skipped": f"cannot build {model}: {e}"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(device)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    module = spec["module"].to(dev)
    batch = [t.to(dev) for t in spec["batch"]]
    loss_fn = spec["loss_fn"]
    params = list(module.parameters())
    run = torch.compile(module) if mode == "compile" else module
    ctx = (
        (lambda: torch.autocast(device, dtype=torch.bfloat16))
        if autocast == "bf16"
        else contextlib.nullcontext
    )

    def step():
        for p in params:
            p.grad = None
        with ctx():
            loss = loss_fn(run, *batch)
        loss.backward()
        return loss

    t0 = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - t0
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "median_ms": times[len(times) // 2] * 1e3,
        "min_ms": times[0] * 1e3,
        "first_call_s": first,
        "loss": float(loss),
        "device": torch.cuda.get_device_name(0) if gpu else "cpu",
        "torch": torch.__version__,
        "batch": [list(t.shape) for t in batch],
    }


def _child(row: dict, mode: str, timeout: float, a) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", row["model"], row["autocast"], mode,
           "--warmup", str(a.warmup), "--iters", str(a.iters)]  # fmt: skip
    t0 = time.perf_counter()
    try:
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        what = "compile and " if mode == "compile" else ""
        return {
            "skipped": f"{what}{a.iters + a.warmup + 1} steps took over {timeout:.0f} s (budget)"
        }
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        tail = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
        why = tail[-1] if tail else f"exit {r.returncode}"
        return {"skipped": f"{mode} failed: {why[:200]}"}
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"skipped": f"{mode}: no result ({r.stdout[-200:]!r})"}
    out["wall_s"] = wall
    return out


def baseline(pack: dict, a) -> dict:
    rows = _rows(pack)
    result = {"rows": {}}
    why = None
    if a.dry_run:
        why = "dry run"
    else:
        probe = subprocess.run(
            [sys.executable, "-c", "import torch; print(int(torch.cuda.is_available()))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            why = "torch is not installed"
        elif probe.stdout.strip() != "1":
            why = "no CUDA device (torch.cuda.is_available() is false)"
    deadline = time.perf_counter() + a.budget
    for row in rows:
        entry = {"model": row["model"], "autocast": row["autocast"]}
        for mode in ("eager", "compile"):
            left = deadline - time.perf_counter()
            if why is not None:
                entry[mode] = {"skipped": why}
            elif mode == "compile" and not row["compile"]:
                entry[mode] = {
                    "skipped": "not measured (the pack asks for compile on fewer rows)"
                }
            elif left < 10:
                entry[mode] = {
                    "skipped": f"the baseline's {a.budget:.0f} s budget is spent"
                }
            else:
                limit = a.compile_budget if mode == "compile" else a.eager_budget
                entry[mode] = _child(row, mode, min(limit, left), a)
            m = entry[mode]
            print(
                f"torch {row['model']} ({row['autocast']}) {mode}: "
                + (
                    f"{m['median_ms']:.3f} ms"
                    if "median_ms" in m
                    else f"skipped: {m['skipped']}"
                ),
                flush=True,
            )
        result["rows"][row["key"]] = entry
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", help="pack.json (its steps' torch fields are the rows)")
    ap.add_argument("--out", help="write the JSON here (default: stdout)")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "AUTOCAST", "MODE"))
    ap.add_argument(
        "--device", default="cuda", help="with --one: cuda, or cpu to check this script"
    )
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for all rows")
    ap.add_argument("--eager-budget", type=float, default=60.0)
    ap.add_argument("--compile-budget", type=float, default=90.0)
    a = ap.parse_args(argv)
    if a.one:
        model, autocast, mode = a.one
        print(json.dumps(measure(model, autocast, mode, a.warmup, a.iters, a.device)))
        return 0
    if not a.pack:
        ap.error("--pack or --one")
    with open(a.pack) as f:
        pack = json.load(f)
    text = json.dumps(baseline(pack, a), indent=2) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

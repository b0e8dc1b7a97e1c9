#!/usr/bin/env python3
"""Memory benchmark (see bench/memory/run.sh).

For the generator's transformer (`transformer --attention`, one FSDP unit
per block, the same local batch on every rank) on W = 1, 2, 4, 8 ranks:

1. the static peak bytes per rank by kind from `--fsdp-memory-report`
   (scheduled pipeline), without and with `recompute=all`;
2. the step run by `fsdp-run` (threads backend) with and without
   recompute: the results must agree bit for bit, or within 1e-6 of each
   tensor's largest value where a reduction sums in another order
   (compute=fast lets LLVM reorder a reduction's sum, and recompute can fuse
   another producer into it; docs/PASSES.md, fsdp-recompute); the largest
   per-rank
   allocation high-water mark of the compiled step (`jit_peak_bytes` of
   `fsdp-run --json`: what the step mallocs, not the arguments the runner
   holds) is printed next to the static peaks; it must be lower with
   recompute (the lowering frees each buffer after its last use).

Parameter shards, their gradients and optimizer state are sharded: their
bytes per rank scale as 1/W, which the script checks for the parameter
shards. Activations depend on the local batch only.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver

fail, run = (_driver := Driver("bench/memory")).fail, _driver.run
KINDS = [
    "parameter_shards",
    "gathered_parameters",
    "activations",
    "gradients",
    "optimizer_state",
    "inputs",
    "temporaries",
]


def generate(args, world, path, data):
    cmd = [args.python, "-m", "fsdp_mlir.dev.gen", "transformer", "--attention"]
    cmd += [
        "--blocks",
        str(args.blocks),
        "--dim",
        str(args.dim),
        "--ffn",
        str(args.ffn),
    ]
    cmd += ["--seq", str(args.seq), "--batch", str(args.batch), "--mesh", str(world)]
    cmd += ["-o", str(path), "--data", str(data)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    run(cmd, env=env)


def report(args, mlir, pipeline):
    proc = run(
        [
            args.fsdp_opt,
            str(mlir),
            f"--fsdp-pipeline={pipeline}",
            "--fsdp-memory-report=format=json",
            "-o",
            os.devnull,
        ]
    )
    return json.loads(proc.stdout)["functions"][0]


def measured_peak(stdout):
    """The largest per-rank allocation high-water mark in fsdp-run's JSON
    output, if it reports one (any key naming a peak or high-water mark in
    bytes); None otherwise."""
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None
    found = []

    def walk(x, key=""):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)
        elif (
            isinstance(x, (int, float))
            and ("high_water" in key or "peak" in key)
            and ("bytes" in key)
        ):
            found.append(x)

    walk(data)
    return max(found) if found else None


def run_step(args, lowered, data, out):
    proc = run(
        [
            args.fsdp_run,
            str(lowered),
            "--inputs",
            str(data),
            "--outputs",
            str(out),
            "--json",
        ]
    )
    return measured_peak(proc.stdout)


def difference(a, b):
    """0.0 if the outputs in `a` and `b` are bit-identical, else the largest
    difference of a tensor relative to its largest value (inf if the files
    differ)."""
    names = sorted(n for n in os.listdir(a) if n.endswith(".npy"))
    if sorted(n for n in os.listdir(b) if n.endswith(".npy")) != names or not names:
        return float("inf")
    worst = 0.0
    for n in names:
        x, y = np.load(os.path.join(a, n)), np.load(os.path.join(b, n))
        if x.shape != y.shape:
            return float("inf")
        if x.tobytes() != y.tobytes():
            x, y = x.astype(np.float64), y.astype(np.float64)
            scale = float(np.abs(x).max()) or 1.0
            worst = max(worst, float(np.abs(x - y).max()) / scale, 1e-300)
    return worst


def kib(b):
    return "n/a" if b is None else f"{b / 1024:,.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", default=str(ROOT / "build/bin/fsdp-opt"))
    ap.add_argument("--fsdp-run", default=str(ROOT / "build/bin/fsdp-run"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=4, help="local batch per rank")
    ap.add_argument("--worlds", default="1,2,4,8", help="world sizes")
    ap.add_argument("--no-run", action="store_true", help="static reports only")
    ap.add_argument("--smoke", action="store_true", help="tiny model, W = 1, 2")
    args = ap.parse_args()
    if args.smoke:
        args.blocks, args.dim, args.ffn, args.seq, args.batch = 2, 8, 16, 4, 2
        args.worlds = "1,2"
    worlds = [int(w) for w in args.worlds.split(",")]

    print(
        f"transformer --attention: {args.blocks} blocks, dim {args.dim}, ffn {args.ffn}, "
        f"seq {args.seq}, local batch {args.batch}; fsdp-run threads backend\n"
    )
    print("Static peak per rank (KiB), fsdp-memory-report after --fsdp-pipeline:\n")
    print(
        "| W | parameter shards | gathered | gradients | activations | activations, "
        "recompute | ratio | total | total, recompute | step's buffers | measured "
        "| step's buffers, recompute | measured, recompute | results with recompute |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    drops = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for w in worlds:
            mlir, data = tmp / f"w{w}.mlir", tmp / f"data{w}"
            generate(args, w, mlir, data)
            off = report(args, mlir, "")
            on = report(args, mlir, "recompute=all")
            measured = {}
            same = "not run"
            if not args.no_run:
                for name, pipeline in (
                    ("off", "lower=true all-reduce-loss=true"),
                    ("on", "lower=true all-reduce-loss=true recompute=all"),
                ):
                    lowered = tmp / f"w{w}-{name}.ll.mlir"
                    run(
                        [
                            args.fsdp_opt,
                            str(mlir),
                            f"--fsdp-pipeline={pipeline}",
                            "-o",
                            str(lowered),
                        ]
                    )
                    measured[name] = run_step(
                        args, lowered, data, tmp / f"out{w}-{name}"
                    )
                diff = difference(tmp / f"out{w}-off", tmp / f"out{w}-on")
                if diff > 1e-6:
                    fail(
                        f"W={w}: results with recompute differ from those without ({diff:.2e})"
                    )
                same = "bit-identical" if diff == 0.0 else f"within {diff:.1e}"
            p, q = off["peak_bytes"], on["peak_bytes"]
            for kind in ("parameter_shards", "gathered_parameters", "inputs"):
                if p[kind] != q[kind]:
                    fail(f"W={w}: recompute changed {kind}: {p[kind]} -> {q[kind]}")
            if q["activations"] >= p["activations"]:
                fail(f"W={w}: recompute did not lower the activation peak")
            # Buffers are freed after their last use (fsdp-early-dealloc),
            # so the measured peak follows liveness as the static one does.
            if measured.get("off") is not None and measured.get("on") is not None:
                if measured["on"] >= measured["off"]:
                    fail(
                        f"W={w}: recompute did not lower the measured peak: "
                        f"{measured['off']} -> {measured['on']} bytes"
                    )
                drops.append((w, measured["off"], measured["on"]))
            rows.append((w, p))

            # The arguments (shards, data) are held by the runner all step:
            # the step's own buffers peak where the total does.
            def own(r):
                return (
                    r["peak_total_bytes"]
                    - r["peak_bytes"]["parameter_shards"]
                    - r["peak_bytes"]["inputs"]
                )

            print(
                f"| {w} | {kib(p['parameter_shards'])} | {kib(p['gathered_parameters'])} "
                f"| {kib(p['gradients'])} | {kib(p['activations'])} | {kib(q['activations'])} "
                f"| {p['activations'] / q['activations']:.2f}x "
                f"| {kib(off['peak_total_bytes'])} | {kib(on['peak_total_bytes'])} "
                f"| {kib(own(off))} | {kib(measured.get('off'))} "
                f"| {kib(own(on))} | {kib(measured.get('on'))} | {same} |",
                flush=True,
            )
    w0, p0 = rows[0]
    for w, p in rows[1:]:
        if p["parameter_shards"] * w != p0["parameter_shards"] * w0:
            fail(
                f"parameter shards do not scale as 1/W: W={w0} {p0['parameter_shards']}, "
                f"W={w} {p['parameter_shards']}"
            )
    print("\nparameter shards scale as 1/W: yes")
    for w, off, on in drops:
        print(
            f"W={w}: measured peak {kib(off)} -> {kib(on)} KiB with recompute "
            f"({off / on:.2f}x lower)"
        )


if __name__ == "__main__":
    main()

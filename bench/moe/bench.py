#!/usr/bin/env python3
"""Sparse against dense experts (see bench/moe/run.sh).

The model is fsdp_mlir.torch.examples.MoELM (embedding, RMS norm, a
Mixtral-style sparse MoE block: router, softmax, top-k, SwiGLU experts, a
head). It is exported twice on one rank, `experts="sparse"` (the rows
sorted by expert, fsdp.grouped_matmul: one gemm per expert on its own rows)
and `experts="dense"` (every expert on every row, masked by the routing),
each lowered with `--fsdp-pipeline="lower=true compute=fast"` and run by
`fsdp-run --steps N --warmup W --json`; both runs' loss and gradients are
compared with each other. The contraction FLOPs are counted on the exported
linalg IR (fsdp_mlir.torch.experts.contraction_flops). Prints a markdown
table: FLOPs, median step time, and the sparse / dense ratios.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver

fail, run = (_driver := Driver("bench/moe")).fail, _driver.run
sys.path.insert(0, str(ROOT / "python"))


def step(args, work, form):
    """Exports, lowers and times one form; (FLOPs, timing, results dir)."""
    import torch  # noqa: F401 - the frontend needs it
    from fsdp_mlir.torch import examples, export_step
    from fsdp_mlir.torch.experts import contraction_flops

    seq = 16
    ex = examples.moe(
        global_batch=args.tokens // seq,
        seq=seq,
        vocab=args.vocab,
        dim=args.dim,
        ffn=args.ffn,
        experts=args.experts,
        top_k=args.top_k,
    )
    out = work / form
    model = export_step(
        ex["module"],
        ex["loss_fn"],
        ex["batch"],
        out,
        mesh="1",
        verify=False,
        experts=form,
    )
    lowered = work / f"{form}.mlir"
    run(
        [
            args.fsdp_opt,
            out / "step.mlir",
            "--fsdp-pipeline=lower=true compute=fast",
            "-o",
            lowered,
        ]
    )
    results = work / f"{form}.out"
    proc = run(
        [args.fsdp_run, lowered, "--inputs", out, "--outputs", results]
        + ["--steps", args.steps, "--warmup", args.warmup, "--json"]
    )
    timing = json.loads(proc.stdout.strip().splitlines()[-1])
    return contraction_flops(model["mlir"]), timing, results


def compare(a, b):
    """Largest relative difference of any result (against its own max)."""
    import numpy as np

    worst = 0.0
    for f in sorted(Path(a).glob("*.npy")):
        x, y = (
            np.load(f).astype(np.float64),
            np.load(Path(b) / f.name).astype(np.float64),
        )
        scale = max(np.abs(y).max(), 1e-30)
        worst = max(worst, float(np.abs(x - y).max() / scale))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument(
        "--smoke", action="store_true", help="seconds: a tiny model, 1 step"
    )
    args = ap.parse_args()
    if args.smoke:
        args.tokens, args.dim, args.ffn, args.vocab, args.steps, args.warmup = (
            64,
            16,
            32,
            32,
            1,
            0,
        )
    with tempfile.TemporaryDirectory(prefix="bench-moe-") as tmp:
        work = Path(tmp)
        got = {form: step(args, work, form) for form in ("sparse", "dense")}
        diff = compare(got["sparse"][2], got["dense"][2])
    if not diff <= 1e-4:
        fail(f"the sparse and dense steps' results differ by {diff:.2e} (relative)")
    print(
        f"## {args.experts} experts, top {args.top_k}, {args.tokens} tokens, dim {args.dim}, "
        f"ffn {args.ffn}, vocab {args.vocab}; one rank, compute=fast, median of {args.steps} "
        f"steps after {args.warmup} warmup"
    )
    print()
    print("| experts | contraction GFLOP (all / expert products) | step |")
    print("|---|---|---|")
    for form, (flops, timing, _) in got.items():
        expert = (
            flops["grouped"]
            if form == "sparse"
            else flops["total"] - got["sparse"][0]["dense"]
        )
        print(
            f"| {form} | {flops['total'] / 1e9:.3f} / {expert / 1e9:.3f} | "
            f"{timing['step_median_s'] * 1e3:.1f} ms |"
        )
    s, d = got["sparse"], got["dense"]
    print()
    print(
        f"sparse / dense: contraction FLOPs {s[0]['total'] / d[0]['total']:.3f}, "
        f"step time {s[1]['step_median_s'] / d[1]['step_median_s']:.3f}; "
        f"results agree within {diff:.1e} (relative)"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Training-loop benchmarks (see bench/training/run.sh).

Resident memory over many steps: fsdp-run runs S steps of

- the generator's transformer step (`gen transformer --attention`, 8 ranks,
  forward + backward + gradient reduction; no update_of results, so the
  same inputs every step), and
- a training step (test/Tools/Inputs/train_sgd.py: SGD with momentum on 4
  ranks, the updates fed back, one batch and learning rate per step),

each lowered twice: by `fsdp-lower-to-llvm` (buffers freed within the step)
and, as the baseline, by the same pipeline without the deallocation passes
(every buffer the step allocates is leaked). fsdp-run's --json reports the
process's resident set after every step and the bytes the compiled code
still holds after a step; the table gives the resident set after step 10
and after step S and the growth per 1,000 steps.

AdamW against numpy (--adamw-steps A, 200 by default): the generator's
transformer (attention, 2 blocks, uneven widths dim 18 / ffn 30, HSDP 2x4 =
8 ranks, a fresh global batch of 16 every step) compiled with
`optimizer=adamw betas=0.9,0.95 eps=1e-8 weight-decay=0.1`, trained for A
steps by `fsdp-run --steps A` with a learning-rate schedule (warmup, cosine
decay; test/Integration/Inputs/train_check.py), and the same training in
numpy float32 on the global batch (fsdp_mlir.dev.reference.train): the largest
relative difference of a step's loss, and the loss curve every A/10 steps.

A PyTorch GPT against torch.optim (--gpt-steps G, 200 by default; needs
torch and torch-mlir): `fsdp_mlir.torch.examples.gpt_training` (2 blocks,
uneven widths vocab 30 / dim 36 / ffn 70, counting sequences, AdamW with a
schedule) exported by `fsdp_mlir.torch.train.export_training` for HSDP 2x4
with one batch file per step, trained by `fsdp-run --steps G`, and the same
training with torch.optim.AdamW in float32 on the global batch: the largest
relative difference of a step's loss and of a final parameter.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver, python_env

fail, run = (_driver := Driver("bench/training")).fail, _driver.run

# fsdp-lower-to-llvm (compute=fast) without buffer-deallocation-pipeline and
# convert-bufferization-to-memref: the lowering before deallocation existed.
NO_DEALLOC = (
    "builtin.module(func.func(convert-elementwise-to-linalg),"
    "func.func(fsdp-fold-transposes,fsdp-fuse-elementwise,canonicalize),"
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "convert-fsdp-to-runtime,fsdp-outline-kernels,fsdp-linalg-to-blas,"
    "func.func(convert-linalg-to-loops),arith-expand{include-bf16=true},"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,"
    "reconcile-unrealized-casts)"
)


def lower(args, src, out, dealloc):
    if dealloc:
        run([args.fsdp_opt, src, "--fsdp-lower-to-llvm", "-o", out])
    else:
        run([args.fsdp_opt, src, f"--pass-pipeline={NO_DEALLOC}", "-o", out])


def models(args, tmp):
    """(name, partitioned step, inputs directory) of each model."""
    out = []
    data = tmp / "transformer"
    gen = [
        args.python,
        "-m",
        "fsdp_mlir.dev.gen",
        "transformer",
        "--attention",
        "--blocks",
        "2",
    ]
    gen += ["--dim", "32", "--ffn", "64", "--seq", "8", "--batch", "2", "--mesh", "8"]
    run(
        gen + ["--data", str(data), "-o", str(tmp / "transformer.mlir")],
        env=python_env(),
    )
    run(
        [
            args.fsdp_opt,
            str(tmp / "transformer.mlir"),
            "--fsdp-pipeline",
            "-o",
            str(tmp / "transformer.part.mlir"),
        ]
    )
    out.append(
        ("transformer step, 8 ranks (repeated)", tmp / "transformer.part.mlir", data)
    )
    script = ROOT / "test" / "Tools" / "Inputs" / "train_sgd.py"
    with open(tmp / "sgd.mlir", "w") as f:
        f.write(run([args.python, str(script), "mlir", "4"]).stdout)
    run([args.python, str(script), "make", str(tmp / "sgd"), str(args.steps)])
    out.append(("SGD training, 4 ranks (fed back)", tmp / "sgd.mlir", tmp / "sgd"))
    return out


def measure(args, lowered, inputs, outputs):
    proc = run(
        [
            args.fsdp_run,
            lowered,
            "--inputs",
            inputs,
            "--outputs",
            outputs,
            "--steps",
            str(args.steps),
            "--json",
            "--no-jit-cache",
        ]
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


ADAMW = "optimizer=adamw betas=0.9,0.95 eps=1e-8 weight-decay=0.1"


def print_loss_curve(loss, steps):
    """The loss every steps/10 steps and at the last, as a Markdown table."""
    every = max(1, steps // 10)
    cols = list(range(0, steps, every))
    if cols[-1] != steps - 1:
        cols.append(steps - 1)
    print("| step | " + " | ".join(str(s + 1) for s in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    print("| loss | " + " | ".join(f"{loss[s]:.4f}" for s in cols) + " |")


def adamw(args, tmp):
    """The AdamW acceptance run against numpy (see the module docstring)."""
    steps = args.adamw_steps
    check = ROOT / "test" / "Integration" / "Inputs" / "train_check.py"
    gen = [
        args.python,
        "-m",
        "fsdp_mlir.dev.gen",
        "transformer",
        "--attention",
        "--blocks",
        "2",
    ]
    gen += ["--dim", "18", "--ffn", "30", "--seq", "8", "--batch", "2", "--mesh", "2x4"]
    run(
        gen + ["--data", str(tmp / "data"), "-o", str(tmp / "adamw.mlir")],
        env=python_env(),
    )
    run(
        [
            args.python,
            str(check),
            "inputs",
            str(tmp / "data"),
            str(tmp / "in"),
            str(steps),
        ],
        env=python_env(),
    )
    run(
        [
            args.fsdp_opt,
            str(tmp / "adamw.mlir"),
            f"--fsdp-pipeline=lower=true all-reduce-loss=true {ADAMW}",
            "-o",
            str(tmp / "l.mlir"),
        ]
    )
    r = json.loads(
        run(
            [
                args.fsdp_run,
                str(tmp / "l.mlir"),
                "--inputs",
                str(tmp / "in"),
                "--inputs",
                str(tmp / "data"),
                "--outputs",
                str(tmp / "out"),
                "--steps",
                str(steps),
                "--json",
            ]
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    proc = subprocess.run(
        [
            args.python,
            str(check),
            "check",
            str(tmp / "data"),
            str(tmp / "in"),
            str(tmp / "out"),
            str(steps),
            ADAMW,
        ],
        text=True,
        capture_output=True,
        env=python_env(),
        check=False,
    )
    print(
        f"\nAdamW, generator transformer (dim 18, ffn 30, 2 blocks), HSDP 2x4, {steps} steps "
        f"with a learning-rate schedule, against numpy float32 on the global batch"
    )
    print(proc.stdout.strip())
    loss = r["loss"]
    print_loss_curve(loss, steps)
    print(
        f"median step {r['step_median_s'] * 1e3:.2f} ms, JIT {r['jit_s']:.2f} s, "
        f"measured peak per rank {max(r['measured_peak_bytes'])} B (arena + what is outside it)"
    )
    if proc.returncode != 0:
        fail("the AdamW run does not match numpy:\n" + proc.stdout + proc.stderr)


def gpt(args, tmp):
    """The PyTorch GPT against torch.optim (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "python"))
    from fsdp_mlir.torch.examples import gpt_training
    from fsdp_mlir.torch.train import compare_training, export_training, train_reference

    steps = args.gpt_steps
    t = gpt_training(steps)
    out = tmp / "gpt"
    model = export_training(
        t["module"],
        t["loss_fn"],
        t["batches"],
        out,
        t["optimizer"],
        t["lrs"],
        mesh="2x4",
        units=t["units"],
        policy="balanced",
    )
    lowered = str(tmp / "gpt.mlir")
    run(
        [
            args.fsdp_opt,
            str(out / "step.mlir"),
            f"--fsdp-pipeline={model['train_pipeline']}",
            "-o",
            lowered,
        ]
    )
    r = json.loads(
        run(
            [
                args.fsdp_run,
                lowered,
                "--inputs",
                str(out),
                "--outputs",
                str(tmp / "gpt-out"),
                "--steps",
                str(steps),
                "--json",
            ]
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    reference = train_reference(
        t["module"], t["loss_fn"], t["batches"], t["optimizer"], t["lrs"]
    )
    errors = compare_training(tmp / "gpt-out", reference, t["exclude"])
    worst_step = int(errors["loss"].argmax())
    worst_param = max(errors["params"].items(), key=lambda kv: kv[1])
    print(
        f"\nAdamW, PyTorch GPT (2 blocks, vocab 30, dim 36, ffn 70), HSDP 2x4, {steps} steps with a "
        "learning-rate schedule, one batch file per step, against torch.optim.AdamW float32 on the "
        "global batch"
    )
    print(
        f"largest loss difference {errors['loss'].max():.2e} relative (step {worst_step + 1}: "
        f"{errors['losses'][worst_step]:.6f} vs {errors['ref_losses'][worst_step]:.6f}); largest "
        f"final-parameter difference {worst_param[1]:.2e} ({worst_param[0]}; key biases excluded)"
    )
    loss = errors["losses"]
    print_loss_curve(loss, steps)
    print(f"median step {r['step_median_s'] * 1e3:.2f} ms")
    if errors["loss"].max() >= 1e-4:
        fail("the GPT's losses differ from torch.optim's by more than 1e-4")


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--fsdp-opt", required=True)
    p.add_argument("--fsdp-run", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--adamw-steps", type=int, default=200, help="0: skip the AdamW run")
    p.add_argument(
        "--gpt-steps",
        type=int,
        default=200,
        help="0: skip the PyTorch GPT run (needs torch, torch-mlir)",
    )
    p.add_argument("--smoke", action="store_true", help="20 steps, to check the script")
    args = p.parse_args()
    if args.smoke:
        args.steps = 20
        args.adamw_steps = min(args.adamw_steps, 5)
        args.gpt_steps = 0
    if 0 < args.steps < 20:
        fail("--steps must be 0 (skip the resident-set runs) or at least 20")
    if args.steps:
        print(
            f"Resident set of fsdp-run over {args.steps} steps (MiB), with and without "
            "buffer deallocation in the lowering"
        )
        print(
            f"| model | lowering | after step 10 | after step {args.steps} | growth per "
            "1,000 steps | held after a step (B/rank) | peak of the step (B/rank) |"
        )
        print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-training-") as t:
        tmp = Path(t)
        for name, src, inputs in models(args, tmp) if args.steps else []:
            for dealloc in (False, True):
                lowered = str(tmp / f"l{int(dealloc)}.mlir")
                lower(args, str(src), lowered, dealloc)
                r = measure(args, lowered, str(inputs), str(tmp / "out"))
                rss = r["rss_bytes"]
                mib = [x / 2**20 for x in rss]
                growth = (mib[-1] - mib[9]) * 1000 / (len(mib) - 10)
                held = max(r["jit_held_after_step_bytes"])
                peak = max(r["measured_peak_bytes"])  # arena + outside
                label = "deallocation (default)" if dealloc else "without deallocation"
                print(
                    f"| {name} | {label} | {mib[9]:.1f} | {mib[-1]:.1f} | {growth:+.2f} MiB "
                    f"| {held} | {peak} |"
                )
                if dealloc and held != 0:
                    fail(f"{name}: the step still holds {held} B after it")
        if args.adamw_steps > 0:
            adamw(args, tmp)
        if args.gpt_steps > 0:
            gpt(args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())

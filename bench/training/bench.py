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
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

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


def fail(message):
    sys.exit(f"bench/training: {message}")


def run(cmd, **kw):
    proc = subprocess.run(cmd, check=False, text=True, capture_output=True, **kw)
    if proc.returncode != 0:
        fail(
            f"command failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + e.get("PYTHONPATH", "")
    return e


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
        "fsdp_mlir.gen",
        "transformer",
        "--attention",
        "--blocks",
        "2",
    ]
    gen += ["--dim", "32", "--ffn", "64", "--seq", "8", "--batch", "2", "--mesh", "8"]
    run(gen + ["--data", str(data), "-o", str(tmp / "transformer.mlir")], env=env())
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


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--fsdp-opt", required=True)
    p.add_argument("--fsdp-run", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--smoke", action="store_true", help="20 steps, to check the script")
    args = p.parse_args()
    if args.smoke:
        args.steps = 20
    if args.steps < 20:
        fail("--steps must be at least 20")
    print(
        f"Resident set of fsdp-run over {args.steps} steps (MiB), with and without "
        "buffer deallocation in the lowering"
    )
    print(
        f"| model | lowering | after step 10 | after step {args.steps} | growth per 1,000 "
        "steps | held by the step after it (B/rank) | peak of the step (B/rank) |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-training-") as t:
        tmp = Path(t)
        for name, src, inputs in models(args, tmp):
            for dealloc in (False, True):
                lowered = str(tmp / f"l{int(dealloc)}.mlir")
                lower(args, str(src), lowered, dealloc)
                r = measure(args, lowered, str(inputs), str(tmp / "out"))
                rss = r["rss_bytes"]
                mib = [x / 2**20 for x in rss]
                growth = (mib[-1] - mib[9]) * 1000 / (len(mib) - 10)
                held = max(r["jit_held_after_step_bytes"])
                peak = max(r["jit_peak_bytes"])
                label = "deallocation (default)" if dealloc else "without deallocation"
                print(
                    f"| {name} | {label} | {mib[9]:.1f} | {mib[-1]:.1f} | {growth:+.2f} MiB "
                    f"| {held} | {peak} |"
                )
                if dealloc and held != 0:
                    fail(f"{name}: the step still holds {held} B after it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compute benchmark (see bench/compute/run.sh).

1. Single-rank training step of the same PyTorch model, weights and batch:
   torch eager (forward + backward, torch.set_num_threads(T)) against
   fsdp-opt + fsdp-run with compute=fast and compute=loops (the scalar
   reference), each `fsdp-run --steps N --warmup W --json` timing itself.
   Every fsdp-run result is checked against torch autograd
   (`fsdp_mlir.torch check --rtol 1e-4`: the loss is an f32 mean over up to
   262,144 elements). Reports median step times, ratios to torch in
   the same run and GFLOP/s of the matrix products.
2. Compile to executable: `fsdp-opt --fsdp-pipeline=lower=true` and fsdp-run's
   JIT (cold, --no-jit-cache; then warm from the cache) for the generator's
   transformer (`gen transformer --attention --dim 16 --ffn 32`) at about
   100, 300 and 1,000 parameters.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver, python_env

fail, run = (_driver := Driver("bench/compute")).fail, _driver.run
# models.py (here) builds on fsdp_mlir (python/).
sys.path[:0] = [str(HERE), str(ROOT / "python")]


def torch_step_seconds(spec, threads, steps, warmup):
    import models
    import torch

    torch.set_num_threads(threads)
    built = getattr(models, spec)()
    module, loss_fn, batch = built["module"], built["loss_fn"], built["batch"]
    times = []
    for i in range(warmup + steps):
        module.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = loss_fn(module, *batch)
        loss.backward()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    return statistics.median(times), min(times)


def fsdp_step(args, spec, work, compute):
    exported = work / spec
    if not (exported / "step.mlir").exists():
        run(
            [
                args.python,
                "-m",
                "fsdp_mlir.torch",
                "export",
                f"{HERE / 'models.py'}:{spec}",
            ]
            + ["--mesh", "1", "-o", exported],
            env=python_env(),
        )
    lowered = work / f"{spec}.{compute}.mlir"
    run(
        [
            args.fsdp_opt,
            exported / "step.mlir",
            f"--fsdp-pipeline=lower=true compute={compute}",
            "-o",
            lowered,
        ]
    )
    out = work / f"{spec}.{compute}.out"
    proc = run(
        [args.fsdp_run, lowered, "--inputs", exported, "--outputs", out]
        + ["--steps", args.steps, "--warmup", args.warmup, "--json"]
    )
    timing = json.loads(proc.stdout.strip().splitlines()[-1])
    # The loss is an f32 mean over up to 262,144 elements: 1e-4 relative.
    run(
        [
            args.python,
            "-m",
            "fsdp_mlir.torch",
            "check",
            f"{HERE / 'models.py'}:{spec}",
            exported,
            out,
        ]
        + ["--rtol", "1e-4"],
        env=python_env(),
    )
    return timing


def step_table(args, work):
    import models

    print(
        f"## single-rank step, {args.threads} thread(s), median of {args.steps} steps after {args.warmup} warmup"
    )
    print(
        "| model | torch eager | fsdp fast | fast / torch | fsdp loops | loops / torch | fast GFLOP/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for spec in args.models.split(","):
        t_med, _ = torch_step_seconds(spec, args.threads, args.steps, args.warmup)
        fast = fsdp_step(args, spec, work, "fast")
        loops = fsdp_step(args, spec, work, "loops") if args.loops else None
        f_med = fast["step_median_s"]
        gflops = models.flops(spec) / f_med / 1e9
        loops_cols = (
            f"{loops['step_median_s'] * 1e3:.1f} ms | {loops['step_median_s'] / t_med:.1f}x"
            if loops
            else "- | -"
        )
        print(
            f"| {spec} | {t_med * 1e3:.1f} ms | {f_med * 1e3:.1f} ms | {f_med / t_med:.2f}x | "
            f"{loops_cols} | {gflops:.1f} |"
        )
        sys.stdout.flush()


def compile_table(args, work):
    print(
        "## compile to executable, generator transformer --attention --dim 16 --ffn 32"
    )
    print(
        "| parameters | fsdp-opt lower=true | fsdp-run parse + JIT (cold) | total cold | parse + JIT (cached) |"
    )
    print("|---|---|---|---|---|")
    phases = []
    for blocks in map(int, args.blocks.split(",")):
        model, data = work / f"t{blocks}.mlir", work / f"t{blocks}"
        run(
            [
                args.python,
                "-m",
                "fsdp_mlir.dev.gen",
                "transformer",
                "--attention",
                "--dim",
                "16",
                "--ffn",
                "32",
            ]
            + ["--blocks", blocks, "--mesh", "2", "-o", model, "--data", data],
            env=python_env(),
        )
        # Bytecode: smaller and faster to read than text (the step stores
        # its results through memory, so text grows linearly too).
        lowered = work / f"t{blocks}.lowered.mlirbc"
        t0 = time.perf_counter()
        run(
            [
                args.fsdp_opt,
                model,
                "--fsdp-pipeline=lower=true all-reduce-loss=true",
                "--emit-bytecode",
                "-o",
                lowered,
            ]
        )
        opt_s = time.perf_counter() - t0
        cache = work / f"jit-cache-{blocks}"  # empty: the first run is cold
        common = [
            args.fsdp_run,
            lowered,
            "--inputs",
            data,
            "--outputs",
            work / f"t{blocks}.out",
            "--json",
        ]
        cold = json.loads(
            run([*common, "--jit-cache-dir", cache]).stdout.strip().splitlines()[-1]
        )
        warm = json.loads(
            run([*common, "--jit-cache-dir", cache]).stdout.strip().splitlines()[-1]
        )
        if cold["jit_cached"] or not warm["jit_cached"]:
            fail("expected a cold first run and a cached second run")
        run(
            # fp32 through 100+ blocks of backward drifts past 1e-5 of the
            # float64 reference on the first blocks' gradients (1-2e-5).
            [
                args.python,
                "-m",
                "fsdp_mlir.dev.check",
                data,
                work / f"t{blocks}.out",
                "--rtol",
                "1e-5" if blocks < 100 else "5e-5",
            ],
            env=python_env(),
        )
        cold_s = cold["parse_s"] + cold["jit_s"]
        print(
            f"| {9 * blocks + 3} | {opt_s:.2f} s | {cold_s:.2f} s | {opt_s + cold_s:.2f} s | "
            f"{warm['parse_s'] + warm['jit_s']:.3f} s |"
        )
        phases.append((9 * blocks + 3, cold.get("jit_phases_s", {})))
        sys.stdout.flush()
    # fsdp-run's cold JIT by phase (kernels_beside runs on a second thread,
    # beside prepare_glue and codegen_glue).
    for params, p in phases:
        if p:
            print(
                f"- {params} parameters, cold JIT phases: "
                + ", ".join(f"{k} {v:.3f} s" for k, v in p.items())
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", default=str(ROOT / "build/bin/fsdp-opt"))
    ap.add_argument("--fsdp-run", default=str(ROOT / "build/bin/fsdp-run"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--models", default="mlp512,gpt128")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (fsdp-run: one BLAS thread per rank)",
    )
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--no-loops",
        dest="loops",
        action="store_false",
        help="skip the compute=loops runs",
    )
    ap.add_argument(
        "--blocks",
        default="11,33,111",
        help="transformer depths for the compile table (9 params each)",
    )
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="seconds: MLP only, 2 steps, one small compile",
    )
    args = ap.parse_args()
    if args.smoke:
        args.models, args.steps, args.warmup, args.loops, args.blocks = (
            "mlp512",
            2,
            1,
            False,
            "1",
        )
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-compute-") as tmp:
        work = Path(tmp)
        print(f"# nproc {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
        if not args.skip_steps:
            step_table(args, work)
        if not args.skip_compile:
            compile_table(args, work)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Bucketing and scheduling benchmark (see bench/buckets/run.sh).

For transformer stacks of several depths (the generator's `transformer
--attention`: 9 parameters per block, one FSDP unit per block):

1. collectives per step, bucketed (`--fsdp-pipeline`, one bucket per unit and
   phase) vs unbucketed (`bucket=none`), from `--fsdp-comm-report`;
2. step time on fsdp-run's threads backend, bucketed / unbucketed: the
   median of R steps that `fsdp-run --steps R --warmup 1 --json` times
   itself; R = 1 + block-steps / blocks keeps the timed steps about equally
   long for every depth; runs alternate between the variants and the
   minimum over rounds is kept; the last step's results are checked against
   the numpy reference;
3. `fsdp-opt --fsdp-pipeline` compile time against the number of parameters
   (wall time of the whole tool, minimum over rounds), with the per-pass
   breakdown (-mlir-timing) of the largest.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver

fail, run = (_driver := Driver("bench/buckets")).fail, _driver.run
PARAMS_PER_BLOCK = 9  # attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2


def timed(cmd):
    start = time.perf_counter()
    run(cmd)
    return time.perf_counter() - start


def generate(args, blocks, path, data=None):
    cmd = [args.python, "-m", "fsdp_mlir.dev.gen", "transformer", "--attention"]
    cmd += ["--blocks", str(blocks), "--dim", str(args.dim), "--ffn", str(args.ffn)]
    cmd += ["--seq", str(args.seq), "--batch", str(args.batch), "--mesh", args.mesh]
    cmd += ["-o", str(path)]
    if data:
        cmd += ["--data", str(data)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    run(cmd, env=env)
    count = len(re.findall(r"fsdp\.layout = ", path.read_text()))
    if count != PARAMS_PER_BLOCK * blocks:
        fail(f"{path}: {count} parameters, expected {PARAMS_PER_BLOCK} x {blocks}")
    return count


def pipeline(variant):
    return f"all-reduce-loss=true {variant}".strip()


def collectives(args, model, variant, work):
    report = work / "report.json"
    run(
        [args.fsdp_opt, str(model), f"--fsdp-pipeline={pipeline(variant)}"]
        + [f"--fsdp-comm-report=format=json output={report}", "-o", "/dev/null"]
    )
    fn = json.loads(report.read_text())["functions"][0]
    return fn["total"]["count"], fn["collectives"], fn["total"]["bytes_sent"]


def world_size(mesh):
    size = 1
    for n in mesh.split("x"):
        size *= int(n)
    return size


def runner(args, backend):
    """The command that runs a lowered module on every rank."""
    if backend == "threads":
        return [args.fsdp_run]
    mpirun = [args.mpirun, "-np", str(world_size(args.mesh)), "--oversubscribe"]
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")
    return mpirun + [args.fsdp_run, "--backend", "mpi"]


def step_times(args, model, data, work, repeat, backend):
    """Seconds per step for each variant: fsdp-run's own median over
    `repeat` timed steps after one warmup step, minimum over rounds."""
    lowered = {}
    for name, variant in VARIANTS:
        lowered[name] = work / f"{name}.lowered.mlir"
        run(
            [args.fsdp_opt, str(model)]
            + [f"--fsdp-pipeline={pipeline(variant)} lower=true"]
            + ["-o", str(lowered[name])]
        )
    best = {}
    for _ in range(args.run_rounds):
        for name, _variant in VARIANTS:
            out = work / f"out-{backend}-{name}"
            proc = run(
                runner(args, backend)
                + [str(lowered[name]), "--inputs", str(data), "--outputs", str(out)]
                + ["--steps", str(repeat), "--warmup", "1", "--json"]
            )
            seconds = json.loads(proc.stdout.strip().splitlines()[-1])["step_median_s"]
            best[name] = min(best.get(name, seconds), seconds)
    for name, _variant in VARIANTS:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        check = subprocess.run(
            [
                args.python,
                "-m",
                "fsdp_mlir.dev.check",
                str(data),
                str(work / f"out-{backend}-{name}"),
            ],
            check=False,
            text=True,
            capture_output=True,
            env=env,
        )
        if check.returncode != 0:
            fail(
                f"{name} ({backend}) results do not match the reference:\n"
                f"{check.stdout}{check.stderr}"
            )
    return best


def compile_time(args, model, variant):
    cmd = [args.fsdp_opt, str(model), f"--fsdp-pipeline={variant}", "-o", "/dev/null"]
    return min(timed(cmd) for _ in range(args.rounds))


def pass_breakdown(args, model):
    out = run(
        [
            args.fsdp_opt,
            str(model),
            "--fsdp-pipeline",
            "-o",
            "/dev/null",
            "-mlir-timing",
        ]
    ).stderr
    rows = re.findall(r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\S.*)$", out, re.MULTILINE)
    return [(name, float(sec)) for sec, name in rows]


VARIANTS = [("bucketed", ""), ("unbucketed", "bucket=none")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", default=str(ROOT / "build/bin/fsdp-opt"))
    ap.add_argument("--fsdp-run", default=str(ROOT / "build/bin/fsdp-run"))
    ap.add_argument("--python", default=str(ROOT / ".venv/bin/python"))
    ap.add_argument(
        "--blocks", default="8,32,128", help="stacks for the collectives table"
    )
    ap.add_argument(
        "--run-blocks", default="8,32", help="stacks that are also run and timed"
    )
    ap.add_argument(
        "--compile-blocks", default="8,32,64,111,128", help="compile-time sizes"
    )
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=32)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument(
        "--block-steps",
        type=int,
        default=8000,
        help="blocks x steps of the long entry (R = 1 + this / blocks)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="compile-time rounds")
    ap.add_argument("--run-rounds", type=int, default=2, help="fsdp-run rounds")
    ap.add_argument(
        "--mpi",
        action="store_true",
        help="also time the run-blocks stacks on the mpi backend (one process per rank)",
    )
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--workdir", default=None)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="one block on a 1x2 mesh, one round, 3 steps; also --mpi when an "
        "MPI launcher is found: checks that the script, the unbucketed "
        "baseline and the result checks work (seconds; no timings worth reading)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.blocks = args.run_blocks = args.compile_blocks = "1"
        args.mesh, args.rounds, args.run_rounds, args.block_steps = "1x2", 1, 1, 2
        if shutil.which(args.mpirun):
            args.mpi = True
        else:
            print(f"# mpi backend skipped: no {args.mpirun}")
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
        measure(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="fsdp-bench-buckets-") as tmp:
            measure(args, Path(tmp))


def measure(args, work):
    blocks = [int(b) for b in args.blocks.split(",") if b]
    run_blocks = {int(b) for b in args.run_blocks.split(",") if b}
    compile_blocks = [int(b) for b in args.compile_blocks.split(",") if b]

    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(
        f"# transformer --attention --dim {args.dim} --ffn {args.ffn} --seq {args.seq}"
    )
    print(
        f"#   --batch {args.batch} --mesh {args.mesh}; fsdp-pipeline all-reduce-loss=true"
    )
    print()
    backends = ["threads"] + (["mpi"] if args.mpi else [])
    header = (
        "| blocks | parameters | collectives unbucketed | collectives bucketed | fewer "
    )
    for b in backends:
        header += f"| {b} step ms unbucketed | {b} step ms bucketed | {b} bucketed / unbucketed "
    print(header + "|")
    print("|---:" * (5 + 3 * len(backends)) + "|")
    for n in blocks:
        nwork = work / f"blocks{n}"
        nwork.mkdir(exist_ok=True)
        model = nwork / "model.mlir"
        data = nwork / "data" if n in run_blocks else None
        params = generate(args, n, model, data)
        counts = {}
        for name, variant in VARIANTS:
            counts[name] = collectives(args, model, variant, nwork)
        # Bucketing regroups the same bytes, in fewer collectives.
        if counts["bucketed"][2] != counts["unbucketed"][2]:
            fail(f"{n} blocks: bucketed and unbucketed bytes differ: {counts}")
        if not 0 < counts["bucketed"][0] < counts["unbucketed"][0]:
            fail(f"{n} blocks: bucketing did not reduce the collectives: {counts}")
        fewer = counts["unbucketed"][0] / counts["bucketed"][0]
        step = []
        for backend in backends:
            if not data:
                step += ["-", "-", "-"]
                continue
            t = step_times(args, model, data, nwork, 1 + args.block_steps // n, backend)
            step += [
                f"{t['unbucketed'] * 1e3:.1f}",
                f"{t['bucketed'] * 1e3:.1f}",
                f"{t['bucketed'] / t['unbucketed']:.2f}x",
            ]
        print(
            f"| {n} | {params} | {counts['unbucketed'][0]} | {counts['bucketed'][0]} "
            f"| {fewer:.1f}x | {' | '.join(step)} |",
            flush=True,
        )

    if compile_blocks:
        print()
        print(
            "| blocks | parameters | compile s (bucketed, scheduled) | ms / parameter "
            "| compile s (bucket=none) |"
        )
        print("|---:|---:|---:|---:|---:|")
    largest = None
    for n in compile_blocks:
        model = work / f"compile{n}.mlir"
        params = generate(args, n, model)
        bucketed = compile_time(args, model, "")
        unbucketed = compile_time(args, model, "bucket=none")
        print(
            f"| {n} | {params} | {bucketed:.2f} | {bucketed / params * 1e3:.2f} "
            f"| {unbucketed:.2f} |",
            flush=True,
        )
        largest = model
    if largest:
        print()
        print(f"# -mlir-timing of --fsdp-pipeline, {largest.name}:")
        for name, sec in pass_breakdown(args, largest):
            print(f"#   {sec:7.4f} s  {name}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The planned arena's static peak per rank against the malloc/free
high-water mark of the same step (`arena=false`), both measured by
fsdp-run (`--json`: `plan.peak_bytes`, per rank `measured_peak_bytes`).

    bench/fsdp2/arena_vs_malloc.py                 # every row (~2 min)
    bench/fsdp2/arena_vs_malloc.py --models hsdp2x4,gpt256x8
    bench/fsdp2/arena_vs_malloc.py --models gpt2_small   # needs transformers

Rows: the steps of the `--print-memory` and arena lit tests
(test/Integration/training-transformer-hsdp-2x4.test and arena.test) and
the FSDP2 comparison's GPT models (bench/fsdp2/models.py). Memory counts do
not depend on the machine's load; no times are reported. Results:
docs/BENCHMARKS.md, "Static memory: the planned arena".
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver, python_env

fail, run = (_driver := Driver("bench/fsdp2/arena_vs_malloc")).fail, _driver.run
INTEGRATION = ROOT / "test" / "Integration" / "Inputs"
TOOLS = ROOT / "test" / "Tools" / "Inputs"
ADAMW = "optimizer=adamw betas=0.9,0.95 eps=1e-8 weight-decay=0.1"


def gen(args, work, name, gen_args, steps_inputs=True):
    """A generator model and its per-step inputs: the model, [inputs]."""
    model, data = work / f"{name}.mlir", work / f"{name}-data"
    run(
        [args.python, "-m", "fsdp_mlir.dev.gen"]
        + gen_args
        + ["-o", model, "--data", data],
        env=python_env(),
    )
    inputs = [data]
    if steps_inputs:
        per_step = work / f"{name}-in"
        run(
            [args.python, INTEGRATION / "train_check.py", "inputs", data, per_step, 2],
            env=python_env(),
        )
        inputs.insert(0, per_step)
    return model, inputs


def torch_export(args, work, spec, world):
    out = work / spec
    run(
        [args.python, "-m", "fsdp_mlir.torch", "export", f"{HERE / 'models.py'}:{spec}"]
        + ["--mesh", str(world), "-o", out],
        env=python_env(),
    )
    return out / "step.mlir", [out]


def sgd(args, work):
    model, inputs = work / "sgd.mlir", work / "sgd-in"
    model.write_text(
        run([args.python, TOOLS / "train_sgd.py", "mlir", 4], env=python_env()).stdout
    )
    run([args.python, TOOLS / "train_sgd.py", "make", inputs, 2], env=python_env())
    return model, [inputs]


def cases(args, work):
    """name -> (model and inputs, --fsdp-pipeline options)."""
    t = ["transformer", "--attention", "--blocks", "2", "--dim", "18", "--ffn", "30"]
    mlp = ["mlp", "--widths", "16,37,23,10", "--mesh", "3"]
    low = "lower=true all-reduce-loss=true"
    return {
        "hsdp2x4": (
            lambda: gen(
                args,
                work,
                "hsdp2x4",
                t + ["--seq", "8", "--batch", "2", "--mesh", "2x4"],
            ),
            f"{low} {ADAMW}",
        ),
        "transformer2x2": (
            lambda: gen(
                args, work, "t2x2", t + ["--seq", "8", "--batch", "2", "--mesh", "2x2"]
            ),
            f"{low} optimizer=adamw",
        ),
        "transformer2x2-recompute": (
            lambda: gen(
                args, work, "t2x2r", t + ["--seq", "8", "--batch", "2", "--mesh", "2x2"]
            ),
            f"{low} optimizer=adamw recompute=all",
        ),
        "mlp-fp8-loops": (
            lambda: gen(args, work, "mq", mlp, steps_inputs=False),
            f"{low} quantize=fp8_e4m3_tensor quantize-min-elements=0 compute=loops",
        ),
        "mlp-schedule": (
            lambda: gen(args, work, "ms", mlp, steps_inputs=False),
            f"{low} schedule=true",
        ),
        "sgd4": (lambda: sgd(args, work), None),  # fsdp-lower-to-llvm
        "gpt256x8": (
            lambda: torch_export(args, work, "gpt256x8", 8),
            "lower=true compute=fast all-reduce-loss=true",
        ),
        "gpt512x8": (
            lambda: torch_export(args, work, "gpt512x8", 8),
            "lower=true compute=fast all-reduce-loss=true",
        ),
        "gpt2_small": (
            lambda: torch_export(args, work, "gpt2_small", 2),
            "lower=true compute=fast all-reduce-loss=true",
        ),
    }


def measure(args, work, name, model, inputs, options, arena):
    lowered = work / f"{name}.{'on' if arena else 'off'}.mlir"
    if options is None:
        flag = "--fsdp-lower-to-llvm" + ("" if arena else "=arena=false")
    else:
        flag = f"--fsdp-pipeline={options}" + ("" if arena else " arena=false")
    run([args.fsdp_opt, model, flag, "-o", lowered])
    cmd = [args.fsdp_run, lowered, "--outputs", work / f"{name}.out", "--json"]
    cmd += ["--steps", "2"]
    for i in inputs:
        cmd += ["--inputs", i]
    proc = run(cmd, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    line = next(x for x in proc.stdout.splitlines() if x.startswith("{"))
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    venv = ROOT / ".venv" / "bin" / "python"
    ap.add_argument(
        "--python",
        default=str(venv) if venv.exists() else sys.executable,
        help="the interpreter with numpy and torch (default: .venv's)",
    )
    ap.add_argument(
        "--models",
        default="hsdp2x4,transformer2x2,transformer2x2-recompute,mlp-fp8-loops,"
        "mlp-schedule,sgd4,gpt256x8,gpt512x8",
    )
    args = ap.parse_args()
    args.fsdp_opt = Path(args.bin) / "fsdp-opt"
    args.fsdp_run = Path(args.bin) / "fsdp-run"
    print(
        "| step | plan (arena + outside) | measured, arena | measured, `arena=false` "
        "| plan / malloc |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="arena-vs-malloc-") as tmp:
        work = Path(tmp)
        table = cases(args, work)
        for name in args.models.split(","):
            if name not in table:
                fail(f"unknown model {name} (known: {', '.join(table)})")
            make, options = table[name]
            model, inputs = make()
            on = measure(args, work, name, model, inputs, options, True)
            off = measure(args, work, name, model, inputs, options, False)
            plan = on["plan"]
            measured = max(on["measured_peak_bytes"])
            malloc = max(off["measured_peak_bytes"])
            print(
                f"| {name} | {plan['arena_bytes']:,} + {plan['outside_bytes']:,} "
                f"= {plan['peak_bytes']:,} B | {measured:,} B | {malloc:,} B "
                f"| {plan['peak_bytes'] / malloc:.4f} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()

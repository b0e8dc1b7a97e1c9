"""JIT against ahead-of-time load time of one lowered step (docs/AOT.md,
docs/BENCHMARKS.md "Ahead-of-time compilation"): fsdp-compile's time and the
library's size, then fsdp-run's parse + JIT with an empty cache (cold), from
the cache (warm) and from the step library, each the median of --repeat
process runs of one step (`fsdp-run --json`: parse_s, jit_s; and the
process's wall time).

    .venv/bin/python bench/compute/aot_load.py LOWERED.mlir INPUTS_DIR [--repeat 3]
    .venv/bin/python bench/compute/aot_load.py --smoke   # a small generated step, once

The GPT-2-size step: `python -m fsdp_mlir.torch export
bench/compute/models.py:gpt2_shape -o gpt2/` and `fsdp-opt gpt2/step.mlir
--fsdp-pipeline="lower=true all-reduce-loss=true compute=fast" -o
gpt2/lowered.mlir`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fsdp_run(bin_dir, module, inputs, out, extra):
    t0 = time.perf_counter()
    p = subprocess.run(
        [f"{bin_dir}/fsdp-run", module, "--inputs", inputs, "--outputs", out, "--json", *extra],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    report = json.loads(p.stdout.strip().splitlines()[-1])
    return report["parse_s"], report["jit_s"], wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lowered", nargs="?")
    ap.add_argument("inputs", nargs="?")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--smoke", action="store_true", help="a small generated step, one repeat"
    )
    a = ap.parse_args()
    bin_dir = f"{a.build}/bin"
    if a.smoke:
        return smoke(a, bin_dir)
    if not (a.lowered and a.inputs):
        ap.error("give LOWERED.mlir and INPUTS_DIR (or --smoke)")
    return measure(a, bin_dir)


def smoke(a, bin_dir) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        subprocess.run(
            [sys.executable, "-m", "fsdp_mlir.dev.gen", "mlp", "--widths", "8,4", "--batch", "2",
             "--mesh", "2", "-o", f"{tmp}/m.mlir", "--data", f"{tmp}/data"],
            check=True, env=env,
        )  # fmt: skip
        subprocess.run(
            [
                f"{bin_dir}/fsdp-opt",
                f"{tmp}/m.mlir",
                "--fsdp-pipeline=lower=true",
                "-o",
                f"{tmp}/l.mlir",
            ],
            check=True,
        )
        a.lowered, a.inputs, a.repeat = f"{tmp}/l.mlir", f"{tmp}/data", 1
        return measure(a, bin_dir)


def measure(a, bin_dir) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        lib = f"{tmp}/step.so"
        t0 = time.perf_counter()
        p = subprocess.run(
            [f"{bin_dir}/fsdp-compile", a.lowered, "-o", lib, "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        compile_wall = time.perf_counter() - t0
        c = json.loads(p.stdout)
        rows = {"jit, cold cache": [], "jit, warm cache": [], "step library": []}
        for _ in range(a.repeat):
            cache = tempfile.mkdtemp(dir=tmp)
            rows["jit, cold cache"].append(
                fsdp_run(
                    bin_dir, a.lowered, a.inputs, f"{tmp}/o", ["--jit-cache-dir", cache]
                )
            )
            rows["jit, warm cache"].append(
                fsdp_run(
                    bin_dir, a.lowered, a.inputs, f"{tmp}/o", ["--jit-cache-dir", cache]
                )
            )
            rows["step library"].append(
                fsdp_run(bin_dir, lib, a.inputs, f"{tmp}/o", [])
            )
        size = os.path.getsize(lib)
    print(f"module: {a.lowered} ({os.path.getsize(a.lowered) / 1e6:.1f} MB of text)")
    print(
        f"fsdp-compile: {compile_wall:.2f} s wall (parse {c['parse_s']:.2f} s, "
        f"compile {c['compile_s']:.2f} s, link {c['link_s']:.2f} s); library {size / 1e6:.2f} MB"
    )
    print(f"median of {a.repeat} runs of one step:\n")
    print(
        "| code from | parse | JIT / load | parse + JIT / load | process wall (1 step, inputs) |"
    )
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        parse = statistics.median(r[0] for r in runs)
        jit = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        print(
            f"| {name} | {parse:.3f} s | {jit:.3f} s | {parse + jit:.3f} s | {wall:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

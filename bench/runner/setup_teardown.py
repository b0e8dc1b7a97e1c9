"""Setup and teardown of fsdp-run around one step: time and page faults.

Exports Hugging Face GPT-2 small with the PyTorch frontend (2 ranks, one
non-training step: the loss and every gradient), lowers it with
`compute=fast`, warms the JIT cache, then runs

    fsdp-run lowered.mlir --inputs DIR --outputs OUT --json [--steps N]

under `/usr/bin/time -v` for N = 1 and N = --steps, and prints per run the
wall, user and system seconds, the process's minor page faults, the step's
own time (the slowest rank, from --json) and the wall time outside it, with
the part of it a rank spent reserving the step's arena (`arena_reserve_s`:
the kernel faulting in and zeroing its pages, which grows with the plan and
the machine's first-touch speed, not with the runner). Each run writes
its results over the previous run's files (the kernel frees their page
cache when they are replaced), or with `--fresh-outputs` into a new
directory, as a first run does. The
page faults between steps are the difference of the two runs' faults less
the faults inside the extra steps (`step_page_faults`), per extra step.

    .venv/bin/python bench/runner/setup_teardown.py --bin build/bin --work /tmp/st
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), file=sys.stderr)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def timed(cmd):
    """`cmd` under /usr/bin/time -v: its --json report and the counters."""
    p = subprocess.run(
        ["/usr/bin/time", "-v"] + [str(c) for c in cmd],
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout}{p.stderr}")

    def field(name):
        m = re.search(rf"{name}[^:]*: ([0-9:.]+)", p.stderr)
        return m.group(1) if m else "0"

    m = re.search(r"\(h:mm:ss or m:ss\): ([0-9:.]+)", p.stderr)
    wall = m.group(1) if m else "0"
    parts = [float(x) for x in wall.split(":")]
    seconds = sum(v * 60 ** (len(parts) - 1 - i) for i, v in enumerate(parts))
    return json.loads(p.stdout), {
        "wall_s": seconds,
        "user_s": float(field("User time")),
        "sys_s": float(field("System time")),
        "minor_faults": int(field("Minor")),
        "max_rss_kib": int(field("Maximum resident set size")),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--work", default="/tmp/fsdp-setup-teardown")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (median)")
    ap.add_argument(
        "--fresh-outputs",
        action="store_true",
        help="write each run's results into a new directory instead of "
        "over the previous run's files",
    )
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    exported = work / "gpt2"
    if not (exported / "step.mlir").exists():
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        spec = f"{ROOT / 'bench' / 'fsdp2' / 'models.py'}:gpt2_small"
        run(
            [
                args.python,
                "-m",
                "fsdp_mlir.torch",
                "export",
                spec,
                "--mesh",
                "2",
                "-o",
                exported,
            ],
            env=env,
        )
    lowered = work / "gpt2.lowered.mlir"
    if not lowered.exists():
        run(
            [
                Path(args.bin) / "fsdp-opt",
                exported / "step.mlir",
                "--fsdp-pipeline=lower=true compute=fast all-reduce-loss=true",
                "-o",
                lowered,
            ]
        )
    fsdp_run = Path(args.bin) / "fsdp-run"
    runs = 0

    def command(steps):
        nonlocal runs
        runs += 1
        out = work / "out"
        if args.fresh_outputs:
            # The previous run's directory goes before the timed run starts.
            for old in work.glob("out-*"):
                shutil.rmtree(old)
            out = work / f"out-{runs}"
        return [
            fsdp_run,
            lowered,
            "--inputs",
            exported,
            "--outputs",
            out,
            "--jit-cache-dir",
            work / "jit-cache",
            "--json",
            "--steps",
            str(steps),
        ]

    timed(command(1))  # fills the JIT cache
    rows = {}
    for steps in (1, args.steps):
        samples = [timed(command(steps)) for _ in range(args.repeat)]
        samples.sort(key=lambda s: s[1]["wall_s"])
        report, counters = samples[len(samples) // 2]
        step = max(report["step_s"])
        rows[steps] = (report, counters)
        print(
            f"steps {steps}: wall {counters['wall_s']:.2f} s, user {counters['user_s']:.2f} s, "
            f"sys {counters['sys_s']:.2f} s, minor page faults {counters['minor_faults']}, "
            f"max RSS {counters['max_rss_kib'] / 1024:.0f} MiB, slowest step {step:.2f} s, "
            f"outside the steps {counters['wall_s'] - sum(report['step_s']):.2f} s "
            f"(of which reserving the arena {report.get('arena_reserve_s', 0):.2f} s)"
        )
    (r1, c1), (rn, cn) = rows[1], rows[args.steps]
    extra = args.steps - 1
    if extra > 0:
        inside = sum(rn["step_page_faults"]) - sum(r1["step_page_faults"])
        between = (cn["minor_faults"] - c1["minor_faults"] - inside) / extra
        print(
            f"page faults per extra step: {(cn['minor_faults'] - c1['minor_faults']) / extra:.0f} "
            f"in all, {inside / extra:.0f} inside the step, {between:.0f} between steps"
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs every integration test's step lowered with compute=gpu on the host
emulation of CUDA and compares its results with the CPU path
(docs/GPU.md, "Emulation").

The steps are the ones scripts/gpu-kernel-check.py assembles with ptxas
(each test/Integration/*.test `fsdp_mlir.dev.gen` step with each of its
lowering pipelines, every MLP-suite case). Each is lowered twice, with
`compute=gpu gpu-emulation=true` and with `compute=loops` (the other
pipeline options unchanged), and run once with fsdp-run on the same
generated inputs: the GPU step on the emulated libfsdprt
(build/lib/cuda-emulation, one emulated GPU per rank, NCCL collectives on
device buffers), the CPU step on the threads backend. A step passes when
every result agrees within the tolerance (fp32: 1e-5 of the largest
magnitude; steps with 16-bit parameters: 1e-2, computing in 16 bits:
2e-2). Prints one line
per step and a summary; exits 1 if a step fails, 77 (skipped) when the
emulated runtime was not built.
"""

import argparse
import concurrent.futures
import importlib.util
import os
import shlex
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


def kernel_check():
    """scripts/gpu-kernel-check.py as a module (its step list)."""
    spec = importlib.util.spec_from_file_location(
        "gpu_kernel_check", os.path.join(ROOT, "scripts", "gpu-kernel-check.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Its step list, its pipeline-option rewriting and its subprocess helper.
KERNEL_CHECK = kernel_check()
run = KERNEL_CHECK.run
with_compute = KERNEL_CHECK.with_compute


def tolerance(gen, options):
    """2e-2 for steps that compute in 16 bits (param-dtype=bf16/f16 runs
    fsdp-autocast: the GPU's fused attention keeps the scores and
    probabilities in f32 where the CPU path rounds them to bf16, a few bf16
    roundings apart), 1e-2 for other steps with 16-bit parameters or
    reductions, else 1e-5."""
    values = {
        o.split("=", 1)[0]: o.split("=", 1)[1] for o in options.split() if "=" in o
    }
    if values.get("param-dtype") in ("bf16", "f16") and values.get(
        "mixed-precision"
    ) != "traffic":
        return 2e-2
    low = any(
        values.get(k) in ("bf16", "f16")
        for k in ("param-dtype", "compute-dtype", "reduce-dtype")
    )
    return (
        1e-2 if low or "bf16" in shlex.split(gen) or "f16" in shlex.split(gen) else 1e-5
    )


def runs_of(options, data, tmp):
    """(entry, input directories, output name) of each fsdp-run of a step:
    one run, or with gradient accumulation the accumulating micro-step from
    zero accumulators, then the finishing step on its partial sums."""
    if not any(o.startswith("accumulation-steps=") for o in options.split()):
        return [(None, [data], "out")]
    return [
        ("step_accumulate", [data, os.path.join(tmp, "zeros")], "micro"),
        ("step", [data, "{micro}"], "out"),
    ]


def compare(got, want, rtol):
    import numpy as np

    names = sorted(n for n in os.listdir(want) if n.endswith(".npy"))
    if not names or sorted(n for n in os.listdir(got) if n.endswith(".npy")) != names:
        return 0.0, "different or no result files"
    worst = 0.0
    for n in names:
        x = np.load(os.path.join(got, n)).astype(np.float64)
        y = np.load(os.path.join(want, n)).astype(np.float64)
        if x.shape != y.shape:
            return worst, f"{n}: shape {x.shape} instead of {y.shape}"
        if not np.isfinite(x).all() and np.isfinite(y).all():
            return worst, f"{n}: not finite"
        scale = max(float(np.abs(y).max()) if y.size else 0.0, 1e-30)
        err = float(np.abs(x - y).max()) / scale if y.size else 0.0
        worst = max(worst, err)
        if err > rtol:
            return (
                worst,
                f"{n}: {err:.2e} of its largest magnitude off (tolerance {rtol:g})",
            )
    return worst, None


def check_step(step, args, env):
    name, gen, options = step
    bindir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        model, data = os.path.join(tmp, "m.mlir"), os.path.join(tmp, "data")
        g = run(
            [args.python, "-m", "fsdp_mlir.dev.gen"]
            + shlex.split(gen)
            + ["-o", model, "--data", data],
            env=env,
        )
        if g.returncode:
            return {
                "name": name,
                "ok": False,
                "error": "generator failed: " + g.stderr.strip()[-1000:],
            }
        import numpy as np

        # A learning rate for the optimizer steps that take one as an input.
        np.save(os.path.join(data, "lr.npy"), np.float32(0.01))
        if any(o.startswith("accumulation-steps=") for o in options.split()):
            z = run(
                [
                    args.python,
                    os.path.join(
                        ROOT, "test", "Integration", "Inputs", "zero_accumulators.py"
                    ),
                    data,
                    os.path.join(tmp, "zeros"),
                ],
                env=env,
            )
            if z.returncode:
                return {
                    "name": name,
                    "ok": False,
                    "error": "zero_accumulators failed: " + z.stderr.strip()[-1000:],
                }
        outs = {}
        for kind, compute, extra_env in (
            ("cpu", "compute=loops", {}),
            (
                "gpu",
                "compute=gpu gpu-emulation=true",
                {"LD_LIBRARY_PATH": args.emulated},
            ),
        ):
            lowered = os.path.join(tmp, f"{kind}.mlir")
            p = run(
                [
                    os.path.join(bindir, "fsdp-opt"),
                    model,
                    f"--fsdp-pipeline={with_compute(options, *compute.split())}",
                    "-o",
                    lowered,
                ]
            )
            if p.returncode:
                return {
                    "name": name,
                    "ok": False,
                    "error": f"{compute} failed: " + p.stderr.strip()[-1000:],
                }
            for entry, inputs, out_name in runs_of(options, data, tmp):
                out = os.path.join(tmp, f"{kind}-{out_name}")
                cmd = [
                    os.path.join(bindir, "fsdp-run"),
                    lowered,
                    "--outputs",
                    out,
                    "--no-jit-cache",
                ]
                for d in inputs:
                    cmd += [
                        "--inputs",
                        d.format(micro=os.path.join(tmp, f"{kind}-micro")),
                    ]
                if entry:
                    cmd += ["--entry", entry]
                p = run(cmd, env=dict(env, **extra_env), timeout=args.timeout)
                if p.returncode:
                    return {
                        "name": name,
                        "ok": False,
                        "error": f"fsdp-run ({kind}) failed: "
                        + p.stderr.strip()[-1000:],
                    }
            outs[kind] = out
        rtol = tolerance(gen, options)
        worst, error = compare(outs["gpu"], outs["cpu"], rtol)
        results = len([n for n in os.listdir(outs["cpu"]) if n.endswith(".npy")])
        r = {
            "name": name,
            "options": options,
            "results": results,
            "worst": worst,
            "rtol": rtol,
            "ok": error is None,
        }
        if error:
            r["error"] = error
        return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("FSDP_JOBS", "2")))
    ap.add_argument("--filter", default="", help="only steps whose name contains this")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per fsdp-run")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    args.emulated = os.path.join(args.build, "lib", "cuda-emulation")
    if not os.path.exists(os.path.join(args.emulated, "libfsdprt.so")):
        print(
            f"SKIP: no emulated runtime at {args.emulated} (built with the GPU runtime's tests)"
        )
        return SKIP
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    steps = [s for s in KERNEL_CHECK.integration_steps() if args.filter in s[0]]
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        args.workdir = workdir
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda s: check_step(s, args, env), steps))
    for r in results:
        if r["ok"]:
            print(
                f"ok   {r['name']:<40} {r['results']:3d} results, worst {r['worst']:.1e} (tolerance {r['rtol']:g})"
            )
        else:
            print(f"FAIL {r['name']:<40} {r.get('options', '')}\n     {r['error']}")
    failed = [r for r in results if not r["ok"]]
    print(
        f"{len(results) - len(failed)} of {len(results)} steps agree with the CPU path on the emulated GPUs"
    )
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

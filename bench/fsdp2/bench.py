#!/usr/bin/env python3
"""8-rank training step: fsdp-opt + fsdp-run against PyTorch FSDP2.

The same PyTorch model, initial weights and global batch run as

- PyTorch FSDP2: `fully_shard` on every FSDP unit (each Linear of the MLP,
  each block of the GPT) and on the root, gloo, one process per rank (CPU,
  `torch.set_num_threads(1)`), each rank forward + backward on its
  micro-batch; a step's time is the slowest rank's, measured after a
  barrier;
- fsdp-opt + fsdp-run: the step exported by the PyTorch frontend on the
  same mesh, `--fsdp-pipeline="lower=true compute=fast all-reduce-loss=true"`,
  `fsdp-run --steps N --warmup W --json` on the threads backend (8 rank
  threads in one process) and, when mpirun exists, the mpi backend (8
  processes); a step's time is the slowest rank's.

Both end with the reduced gradient shards on every rank (FSDP2's
`reduce_scatter`; fsdp-run's reduce-scatters), with no optimizer. The
fsdp-run results are checked against torch autograd (`fsdp_mlir.torch
check`) before their times are reported. Medians of N steps after W
warmup, ratios from the same run.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver, python_env

fail, run = (_driver := Driver("bench/fsdp2")).fail, _driver.run
sys.path[:0] = [str(HERE), str(ROOT / "python")]


# --- PyTorch FSDP2 ----------------------------------------------------------


def _fsdp2_rank(rank, world, spec, steps, warmup, init_file, result_file):
    import models
    import torch
    import torch.distributed as dist
    from fsdp_mlir.torch.export import _unit_matcher
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    mesh = init_device_mesh("cpu", (world,))
    built = getattr(models, spec)()
    module, loss_fn, batch = built["module"], built["loss_fn"], built["batch"]
    # The submodules the frontend's export makes FSDP units (same rule).
    is_unit = _unit_matcher(built["units"])
    for path, unit in module.named_modules():
        if path and is_unit(path, unit):
            fully_shard(unit, mesh=mesh)
    fully_shard(module, mesh=mesh)
    # This rank's micro-batch: the global batch split along dim 0, as
    # fsdp-run splits data arguments.
    local = tuple(t.chunk(world, dim=0)[rank] for t in batch)
    times = []
    for i in range(warmup + steps):
        module.zero_grad(set_to_none=True)
        dist.barrier()
        t0 = time.perf_counter()
        loss = loss_fn(module, *local)
        loss.backward()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    import resource

    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, peak_rss))
    if rank == 0:
        worst = [max(t[s] for t, _ in gathered) for s in range(steps)]
        rss = max(r for _, r in gathered)
        Path(result_file).write_text(json.dumps({"steps": worst, "rss": rss}))
    # Leave together and without gloo's teardown: destroying the group while
    # a peer closes its connections can abort the process ("terminate called
    # without an active exception"). Past the barrier nothing is left to send.
    dist.barrier()
    os._exit(0)


def fsdp2_step_seconds(spec, world, steps, warmup):
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init_file = Path(tmp) / "init"
        result_file = Path(tmp) / "times.json"
        mp.spawn(
            _fsdp2_rank,
            args=(world, spec, steps, warmup, str(init_file), str(result_file)),
            nprocs=world,
            join=True,
        )
        result = json.loads(result_file.read_text())
    return statistics.median(result["steps"]), result["rss"]


def eager_ideal_seconds(spec, world, steps, warmup):
    """The no-communication limit of `world` eager ranks on this machine:
    torch, 1 thread, forward + backward of one rank's micro-batch, times
    ranks / cores (median of `steps` after `warmup`)."""
    import models
    import torch

    torch.set_num_threads(1)
    built = getattr(models, spec)()
    module, loss_fn, batch = built["module"], built["loss_fn"], built["batch"]
    local = tuple(t.chunk(world, dim=0)[0] for t in batch)
    times = []
    for i in range(warmup + steps):
        module.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss_fn(module, *local).backward()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * world / (os.cpu_count() or 1)


# --- fsdp-opt + fsdp-run ----------------------------------------------------


def fsdp_step_seconds(args, spec, world, work, backend, blas_choice=""):
    exported = work / spec
    spec_ref = f"{HERE / 'models.py'}:{spec}"
    if not (exported / "step.mlir").exists():
        run(
            [args.python, "-m", "fsdp_mlir.torch", "export", spec_ref]
            + ["--mesh", str(world), "-o", exported],
            env=python_env(),
        )
    lowered = work / f"{spec}.lowered.mlir"
    if not lowered.exists():
        run(
            [
                args.fsdp_opt,
                exported / "step.mlir",
                "--fsdp-pipeline=lower=true compute=fast all-reduce-loss=true",
                "-o",
                lowered,
            ]
        )
    out = work / f"{spec}.{backend}{blas_choice}.out"
    timing_args = ["--steps", args.steps, "--warmup", args.warmup, "--json"]
    common = [lowered, "--inputs", exported, "--outputs", out] + timing_args
    # The process's peak resident set (GNU time's %M, KiB, on stderr).
    timed = (
        ["/usr/bin/time", "-f", "maxrss_kib %M"]
        if Path("/usr/bin/time").exists()
        else []
    )
    # FSDP_BLAS: the BLAS the runner opens (docs/COMPUTE.md, "Runtime side").
    blas_env = dict(os.environ, FSDP_BLAS=blas_choice) if blas_choice else None
    if backend == "threads":
        proc = run(timed + [args.fsdp_run] + common, env=blas_env)
    else:
        mpirun = [args.mpirun, "-np", str(world), "--oversubscribe"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        # One OpenBLAS thread per process, as torch's set_num_threads(1).
        proc = run(
            timed + mpirun + [args.fsdp_run, "--backend", "mpi"] + common,
            env=dict(blas_env or os.environ, OPENBLAS_NUM_THREADS="1"),
        )
    # Under MPI every rank prints its own line: the slowest rank per step.
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:
        fail(f"no timing from fsdp-run ({backend}):\n{proc.stdout}{proc.stderr}")
    per_step = [max(t["step_s"][s] for t in lines) for s in range(int(args.steps))]
    # Page faults of a steady-state step: every rank of the run (the threads
    # process, or each MPI process's own).
    faults = statistics.median(
        sum(t["step_page_faults"][s] for t in lines) for s in range(int(args.steps))
    )
    # The communication the step waited for (the runner's exposed_ns), the
    # most of any rank per step.
    exposed = statistics.median(
        max(t["step_exposed_comm_s"][s] for t in lines) for s in range(int(args.steps))
    )
    rss = [
        int(x.split()[1]) * 1024
        for x in proc.stderr.splitlines()
        if x.startswith("maxrss_kib")
    ]
    # GNU time measures the threads process (all ranks) or mpirun itself.
    rss_rank = rss[0] / world if rss and backend == "threads" else None
    plan = lines[0].get("plan", {}).get("peak_bytes")
    # f32 loss means over the whole batch: 1e-4 relative, as bench/compute.
    run(
        [args.python, "-m", "fsdp_mlir.torch", "check", spec_ref, exported, out]
        + ["--rtol", "1e-4"],
        env=python_env(),
    )
    # The BLAS (MKL or OpenBLAS) and kernels the compute=fast step ran.
    blas = " ".join(x for x in (lines[0].get("blas"), lines[0].get("blas_core")) if x)
    blas = blas or "none"
    return statistics.median(per_step), faults, rss_rank, plan, exposed, blas


def _has_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument(
        "--models",
        default="mlp512x8,gpt128x8,gpt256x8,gpt512x8"
        + (",gpt2_small" if _has_transformers() else ""),
    )
    ap.add_argument("--steps", default="10")
    ap.add_argument("--warmup", default="2")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny models, 2 steps")
    ap.add_argument(
        "--blas",
        default="",
        help="comma-separated FSDP_BLAS values (openblas, mkl): each backend "
        "runs once per BLAS, in the same run (default: the runner's choice)",
    )
    args = ap.parse_args()
    args.fsdp_opt = Path(args.bin) / "fsdp-opt"
    args.fsdp_run = Path(args.bin) / "fsdp-run"
    if args.smoke:
        args.models, args.steps, args.warmup, args.world = "mlp_smoke", "2", "1", 2
    try:
        import torch  # noqa: F401
    except ImportError:
        print("bench/fsdp2: skipped (torch is not installed)")
        return
    backends = ["threads"]
    if not args.no_mpi and shutil.which(args.mpirun):
        backends.append("mpi")
    # (backend, FSDP_BLAS) per column group; "" is the runner's choice.
    blas_choices = [b for b in args.blas.split(",") if b] or [""]
    variants = [(b, c) for b in backends for c in blas_choices]
    label = lambda b, c: f"{b} ({c})" if c else b
    print(
        f"## training step, median of {args.steps} steps after "
        f"{args.warmup} warmup (load average {os.getloadavg()[0]:.1f}, "
        f"{os.cpu_count()} cores)"
    )
    head = "| model | ranks | FSDP2 (gloo) | eager ideal |" + "".join(
        f" fsdp-run {label(b, c)} | {label(b, c)} / ideal | exposed comm"
        f" ({label(b, c)}) | page faults / step ({label(b, c)}) |"
        for b, c in variants
    )
    head += " plan peak / rank | RSS / rank (threads) | FSDP2 RSS / rank |"
    print(head)
    print("|---|---|---|---|" + "---|---|---|---|" * len(variants) + "---|---|---|")
    mib = lambda b: (
        (f"{b / 2**20:.1f} MiB" if b >= 2**20 else f"{b / 1024:.0f} KiB") if b else "-"
    )
    blas_cores = set()
    with tempfile.TemporaryDirectory(prefix="fsdp2-bench-") as tmp:
        work = Path(tmp)
        for spec in args.models.split(","):
            import models

            world = models.WORLD.get(spec, args.world)
            steps, warmup = int(args.steps), int(args.warmup)
            ref, ref_rss = fsdp2_step_seconds(spec, world, steps, warmup)
            ideal = eager_ideal_seconds(spec, world, steps, warmup)
            cells, extra = [], None
            for backend, choice in variants:
                t, faults, rss, plan, exposed, blas = fsdp_step_seconds(
                    args, spec, world, work, backend, choice
                )
                blas_cores.add(blas)
                cells.append(
                    f" {t * 1e3:.1f} ms | {t / ideal:.2f}x | {exposed * 1e3:.1f} ms"
                    f" | {faults:.0f} |"
                )
                if backend == "threads" and extra is None:
                    extra = f" {mib(plan)} | {mib(rss)} |"
            print(
                f"| {spec} | {world} | {ref * 1e3:.1f} ms | {ideal * 1e3:.1f} ms |"
                + "".join(cells)
                + (extra or " - | - |")
                + f" {mib(ref_rss)} |"
            )
            sys.stdout.flush()
    forced = os.environ.get("OPENBLAS_CORETYPE")
    print(
        f"\nfsdp-run's BLAS: {', '.join(sorted(blas_cores)) or '-'}"
        + (f" (OPENBLAS_CORETYPE={forced} in the environment)" if forced else "")
    )


if __name__ == "__main__":
    main()

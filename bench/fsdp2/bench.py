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
    gathered = [None] * world
    dist.all_gather_object(gathered, times)
    if rank == 0:
        worst = [max(t[s] for t in gathered) for s in range(steps)]
        Path(result_file).write_text(json.dumps(worst))
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
        worst = json.loads(result_file.read_text())
    return statistics.median(worst)


# --- fsdp-opt + fsdp-run ----------------------------------------------------


def fsdp_step_seconds(args, spec, world, work, backend):
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
    out = work / f"{spec}.{backend}.out"
    timing_args = ["--steps", args.steps, "--warmup", args.warmup, "--json"]
    common = [lowered, "--inputs", exported, "--outputs", out] + timing_args
    if backend == "threads":
        proc = run([args.fsdp_run] + common)
    else:
        mpirun = [args.mpirun, "-np", str(world), "--oversubscribe"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        # One OpenBLAS thread per process, as torch's set_num_threads(1).
        proc = run(
            mpirun + [args.fsdp_run, "--backend", "mpi"] + common,
            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
        )
    # Under MPI every rank prints its own line: the slowest rank per step.
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:
        fail(f"no timing from fsdp-run ({backend}):\n{proc.stdout}{proc.stderr}")
    per_step = [max(t["step_s"][s] for t in lines) for s in range(int(args.steps))]
    # f32 loss means over the whole batch: 1e-4 relative, as bench/compute.
    run(
        [args.python, "-m", "fsdp_mlir.torch", "check", spec_ref, exported, out]
        + ["--rtol", "1e-4"],
        env=python_env(),
    )
    return statistics.median(per_step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--models", default="mlp512x8,gpt128x8")
    ap.add_argument("--steps", default="10")
    ap.add_argument("--warmup", default="2")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny models, 2 steps")
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
    print(
        f"## {args.world}-rank step, median of {args.steps} steps after "
        f"{args.warmup} warmup (load average {os.getloadavg()[0]:.1f})"
    )
    head = "| model | FSDP2 (gloo) |" + "".join(
        f" fsdp-run {b} | {b} / FSDP2 |" for b in backends
    )
    print(head)
    print("|---|---|" + "---|---|" * len(backends))
    with tempfile.TemporaryDirectory(prefix="fsdp2-bench-") as tmp:
        work = Path(tmp)
        for spec in args.models.split(","):
            ref = fsdp2_step_seconds(
                spec, args.world, int(args.steps), int(args.warmup)
            )
            cells = []
            for backend in backends:
                t = fsdp_step_seconds(args, spec, args.world, work, backend)
                cells.append(f" {t * 1e3:.1f} ms | {t / ref:.2f}x |")
            print(f"| {spec} | {ref * 1e3:.1f} ms |" + "".join(cells))
            sys.stdout.flush()


if __name__ == "__main__":
    main()

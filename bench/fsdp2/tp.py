#!/usr/bin/env python3
"""Tensor parallelism: fsdp-opt + fsdp-run against DTensor TP + FSDP2.

The same Hugging Face Llama (models.llama_tp: random init, float32), initial
weights and global batch on the meshes dp=2,tp=2 and dp=4,tp=2, with and
without sequence parallelism, run as

- DTensor + FSDP2: `parallelize_module` on the 'tp' dim of a 2-D
  DeviceMesh with the plan fsdp-opt is given (`--plan base`: the model's
  `base_model_tp_plan`, colwise -> ColwiseParallel, rowwise ->
  RowwiseParallel; `--plan auto`: also the vocabulary-parallel embedding
  and LM head), then `fully_shard` on 'dp' for every decoder layer and
  the root; gloo, one process per rank (CPU, `torch.set_num_threads(1)`).
  With sequence parallelism the plan adds what torch's Llama recipe does
  for the parts the model's plan does not cover (_tp_plan below). A
  step's time is the slowest rank's, measured after a barrier;
- fsdp-opt + fsdp-run: `export_step(..., mesh="dp=D,tp=2",
  tp_plan=config.base_model_tp_plan or "auto", sequence_parallel=...)`,
  `--fsdp-pipeline` with the
  export's options and `compute=fast` (lower=true), `fsdp-run --steps N
  --warmup W --json` on the threads backend and, when mpirun exists, the
  mpi backend (one process per rank, as torch).

The loss is treated alike on both sides: by default neither step reduces it
over the data-parallel ranks (each rank holds the loss of its micro-batch,
as a torch training loop does; the export's `all-reduce-loss=true` is
dropped) and rank 0's losses are compared; with `--all-reduce-loss` both
all-reduce it (fsdp-opt's `all-reduce-loss=true`, a `dist.all_reduce` over
'dp' in the torch step, counted with its collectives) and the global
batch's mean losses are compared.

Both end a step with the reduced gradient shards on every rank, with no
optimizer. Per case the driver checks that the two give the same
gradients (DTensor's `full_tensor()` against fsdp-run's gathered by
`load_results`: max |a - b| / max |b| per parameter, and the loss), and
counts the collectives of one step on both sides: fsdp-opt's
`--fsdp-comm-report` (checked against what `fsdp-run` counted), torch's by
a TorchDispatchMode on every rank that sees the c10d ops FSDP2 calls and
the functional collectives DTensor calls. Medians of N steps after W
warmup; ratios from the same run.
"""

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from driver import ROOT, Driver

fail, run = (_driver := Driver("bench/fsdp2 (tp)")).fail, _driver.run
sys.path[:0] = [str(HERE), str(ROOT / "python")]

KINDS = ("all_gather", "reduce_scatter", "all_reduce")
TP = 2
# Plan styles that split an embedding's vocabulary.
VOCAB_STYLES = ("embedding_rowwise", "vocab_parallel")

# --- torch's collectives, counted -------------------------------------------

# Ops of the c10d namespaces that are not collectives.
_NOT_COLLECTIVES = {
    "wait_tensor",
    "_wrap_tensor_autograd",
    "barrier",
    "monitored_barrier",
}


def _kind(op_name):
    name = op_name.replace("_", "")
    for kind in KINDS:
        if kind.replace("_", "") in name:
            return kind
    return "other"


def _group(value):
    """(name, size) of a process group given by name or object."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    if isinstance(value, str):
        group = _resolve_process_group(value)
    elif isinstance(value, dist.ProcessGroup):
        group = value
    else:
        group = dist.ProcessGroup.unbox(value)
    return group.group_name, group.size()


def _collective_counter():
    """A TorchDispatchMode that records (kind, group name, bytes sent,
    bytes received) of every collective dispatched on this thread, with
    the runtime's convention: all_gather sends its input m and receives
    k*m; reduce_scatter sends k*m and receives m; all_reduce n and n."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.namespace in ("c10d", "_c10d_functional"):
                self._record(func, args, kwargs)
            return func(*args, **kwargs)

        def _record(self, func, args, kwargs):
            op = func._schema.name.split("::")[1]
            if op in _NOT_COLLECTIVES:
                return
            values = {a.name: v for a, v in zip(func._schema.arguments, args)}
            values.update(kwargs)
            group = values.get("group_name", values.get("process_group"))
            name, size = _group(group)
            data = next(
                values[k]
                for k in ("input", "inputs", "input_tensor", "input_tensors", "tensors")
                if k in values
            )
            sent = sum(
                t.numel() * t.element_size()
                for t in tree_leaves(data)
                if isinstance(t, torch.Tensor)
            )
            kind = _kind(op)
            received = {"all_gather": sent * size, "reduce_scatter": sent // size}.get(
                kind, sent
            )
            self.calls.append((kind, name, sent, received, op))

    return Counter()


def _summarize(calls, tp_group):
    """{kind: [count, sent, received]} of all calls and of the TP group's."""
    total = {k: [0, 0, 0] for k in KINDS + ("other",)}
    tp = {k: [0, 0, 0] for k in KINDS + ("other",)}
    for kind, group, sent, received, _ in calls:
        for table in (total, tp) if group == tp_group else (total,):
            table[kind][0] += 1
            table[kind][1] += sent
            table[kind][2] += received
    return {"all": total, "tp": tp, "ops": sorted({c[4] for c in calls})}


# --- DTensor + FSDP2 ---------------------------------------------------------


def bench_plan(model, plan):
    """The tp_plan both sides apply: "base", the model's
    config.base_model_tp_plan (the embedding and the LM head whole), or
    "auto", the model's whole plan (also the embedding and the LM head split
    along the vocabulary)."""
    return dict(model.config.base_model_tp_plan) if plan == "base" else "auto"


def _model_plan(model, plan):
    """{module path: style} of bench_plan as fsdp-opt reads it
    (fsdp_mlir.torch.tensor_parallel: Hugging Face's plan keys, matched at
    the end of a module's path)."""
    from fsdp_mlir.torch import tensor_parallel as T

    plan = T.resolve_plan(model, bench_plan(model, plan))
    return {
        path: style
        for path, _ in model.named_modules()
        for pattern, style in plan.items()
        if path and T._pattern(pattern).fullmatch(path)
    }


def _tp_plan(model, sp, plan):
    """parallelize_module's plan for the HF model, with the styles of the
    plan fsdp-opt is given (_model_plan): colwise ->
    ColwiseParallel, rowwise -> RowwiseParallel, an LM head's
    colwise_gather_output / colwise_rep -> ColwiseParallel with its output
    gathered, an embedding's embedding_rowwise / vocab_parallel ->
    RowwiseParallel (the vocabulary split). With sequence parallelism,
    torch's Llama recipe (torchtitan's) for the rest: row-parallel outputs
    reduce-scattered along the tokens, norms as SequenceParallel, attention
    and MLP inputs gathered (PrepareModuleInput, kept as DTensors so that
    the q, k, v input gradients add up before one reduce-scatter), and where
    the embedding is not split the first layer's input cut to this rank's
    tokens (a local slice) and, where the LM head is not split either, its
    input gathered."""
    from torch import nn
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    styles = _model_plan(model, plan)
    modules = dict(model.named_modules())
    vocab = any(isinstance(modules[p], nn.Embedding) for p in styles)
    tokens = Shard(1) if sp else Replicate()
    plan = {}
    for path, style in styles.items():
        if isinstance(modules[path], nn.Embedding) and style in VOCAB_STYLES:
            # With SP the output stays a DTensor split along the tokens,
            # so the model still sees the whole sequence's length.
            plan[path] = RowwiseParallel(
                input_layouts=Replicate(),
                output_layouts=tokens,
                use_local_output=not sp,
            )
        elif style in ("colwise", "local_colwise"):
            plan[path] = ColwiseParallel()
        elif style in ("rowwise", "rowwise_rep", "local_rowwise"):
            # Row-parallel into the residual stream: local tensors where
            # the stream is (the embedding not split), DTensors otherwise.
            plan[path] = RowwiseParallel(
                output_layouts=tokens, use_local_output=not (sp and vocab)
            )
        elif style in ("colwise_rep", "colwise_gather_output"):
            plan[path] = ColwiseParallel(
                input_layouts=tokens, output_layouts=Replicate()
            )
        else:
            fail(f"{path}: tp plan style '{style}' has no DTensor style here")
    if sp:
        gather = {"desired_input_layouts": (Replicate(),), "input_layouts": (Shard(1),)}
        plan.update(
            {
                "model.layers.*.input_layernorm": SequenceParallel(),
                "model.layers.*.post_attention_layernorm": SequenceParallel(),
                "model.layers.*.self_attn": PrepareModuleInput(
                    input_kwarg_layouts={"hidden_states": Shard(1)},
                    desired_input_kwarg_layouts={"hidden_states": Replicate()},
                ),
                "model.layers.*.mlp": PrepareModuleInput(**gather),
                "model.norm": SequenceParallel(),
            }
        )
        if not vocab:
            plan["model.layers.0"] = PrepareModuleInput(
                input_layouts=(Replicate(),),
                desired_input_layouts=(Shard(1),),
                use_local_output=True,
            )
        if "lm_head" not in plan:
            plan["lm_head"] = PrepareModuleInput(**gather, use_local_output=True)
    return plan


def _dtensor_rank(rank, world, case, steps, warmup, init_file, out_dir):
    import models
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    torch.set_num_threads(1)
    # full_tensor() of a gradient on both dims warns that it takes two
    # all-gathers; it runs after the measured steps.
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    dp = world // TP
    mesh = init_device_mesh("cpu", (dp, TP), mesh_dim_names=("dp", "tp"))
    built = models.llama_tp(case["size"], dp)
    module, loss_fn = built["module"], built["loss_fn"]
    parallelize_module(module, mesh["tp"], _tp_plan(module, case["sp"], case["plan"]))
    for layer in module.model.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(module, mesh=mesh["dp"])
    # This rank's micro-batch: its data-parallel rank's part of the batch.
    local = tuple(
        t.chunk(dp, dim=0)[mesh["dp"].get_local_rank()] for t in built["batch"]
    )

    def step():
        loss = loss_fn(module, *local)
        loss.backward()
        if case["all_reduce_loss"]:
            # The mean over the data-parallel ranks, as fsdp-opt's
            # all-reduce-loss=true (4 bytes).
            loss = loss.detach().clone()
            dist.all_reduce(loss, group=mesh["dp"].get_group())
            loss /= dp
        return loss

    times = []
    for i in range(warmup + steps):
        module.zero_grad(set_to_none=True)
        dist.barrier()
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    # One more step, its collectives counted (not timed).
    module.zero_grad(set_to_none=True)
    dist.barrier()
    counter = _collective_counter()
    with counter:
        loss = step()
    counts = _summarize(counter.calls, mesh["tp"].get_group().group_name)
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, counts, float(loss.detach())))
    # The global gradients (full_tensor() gathers over both dims).
    grads = {n: p.grad.full_tensor() for n, p in module.named_parameters()}
    if rank == 0:
        worst = [max(t[s] for t, _, _ in gathered) for s in range(steps)]
        every = [c for _, c, _ in gathered]
        # Rank 0's loss: its micro-batch's, or with all_reduce_loss the
        # global batch's (the same on every rank).
        loss0 = gathered[0][2]
        torch.save(grads, Path(out_dir) / "grads.pt")
        Path(out_dir, "result.json").write_text(
            json.dumps(
                {
                    "steps": worst,
                    "counts": every[0],
                    "same_on_every_rank": all(c == every[0] for c in every),
                    "loss": loss0,
                }
            )
        )
    # Leave together, without gloo's teardown (bench.py's _fsdp2_rank).
    dist.barrier()
    os._exit(0)


def dtensor_case(case, steps, warmup, work):
    import torch
    import torch.multiprocessing as mp

    out = work / f"dtensor-{case['name']}"
    out.mkdir()
    mp.spawn(
        _dtensor_rank,
        args=(case["world"], case, steps, warmup, str(out / "init"), str(out)),
        nprocs=case["world"],
        join=True,
    )
    result = json.loads((out / "result.json").read_text())
    result["grads"] = torch.load(out / "grads.pt")
    return result


# --- fsdp-opt + fsdp-run -----------------------------------------------------


def fsdp_export(case, work):
    import models
    from fsdp_mlir.torch import export_step

    built = models.llama_tp(case["size"], case["world"] // TP)
    out = work / f"fsdp-{case['name']}"
    model = export_step(
        built["module"],
        built["loss_fn"],
        built["batch"],
        str(out),
        mesh=f"dp={case['world'] // TP},tp={TP}",
        units=built["units"],
        # The base plan, as the DTensor side: embedding and LM head whole
        # ("auto" would also split them along the vocabulary).
        tp_plan=bench_plan(built["module"], case["plan"]),
        sequence_parallel=case["sp"],
        verify=False,
    )
    # Without --all-reduce-loss no loss all-reduce, as the torch step.
    options = model["config"]["pipeline"].split()
    if not case["all_reduce_loss"]:
        options.remove("all-reduce-loss=true")
    pipeline = " ".join(options + ["compute=fast"])
    lowered = out / "lowered.mlir"
    run(
        [args.fsdp_opt, out / "step.mlir", f"--fsdp-pipeline={pipeline}", "-o", lowered]
    )
    # The collectives of one step, per kind and of them the TP ones.
    report = run(
        [
            args.fsdp_opt,
            out / "step.mlir",
            f"--fsdp-pipeline={pipeline.replace('lower=true', '')}",
        ]
        + ["--fsdp-comm-report=format=json", "-o", os.devnull]
    )
    fn = json.loads(report.stdout)["functions"][0]
    counts = {
        "all": {k: _triple(fn["collectives"][k]) for k in KINDS},
        "tp": {k: _triple(fn["tensor_parallel"]["collectives"][k]) for k in KINDS},
    }
    return built["module"], out, lowered, pipeline, counts


def _triple(c):
    return [c["count"], c["bytes_sent"], c["bytes_received"]]


def fsdp_run(case, out, lowered, backend):
    results = out / f"results-{backend}"
    cmd = [args.fsdp_run, lowered, "--inputs", out, "--outputs", results]
    cmd += ["--steps", args.steps, "--warmup", args.warmup, "--json"]
    env = None
    if backend == "mpi":
        mpirun = [args.mpirun, "-np", str(case["world"]), "--oversubscribe"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        cmd = mpirun + cmd + ["--backend", "mpi"]
        # One OpenBLAS thread per process, as torch's set_num_threads(1).
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = run(cmd, env=env)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:
        fail(f"no timing from fsdp-run ({backend}):\n{proc.stdout}{proc.stderr}")
    steps = int(args.steps)
    per_step = [max(t["step_s"][s] for t in lines) for s in range(steps)]
    # What the runtime counted over warmup + steps, per rank and step (an
    # MPI process fills only its own rank's entry).
    per_rank = [c for t in lines for c in t.get("comm", []) if c["calls"]]
    runs = steps + int(args.warmup)
    measured = {
        (c["calls"] / runs, c["bytes_sent"] / runs, c["bytes_received"] / runs)
        for c in per_rank
    }
    return (statistics.median(per_step), min(per_step)), results, measured


# --- comparison ---------------------------------------------------------------


def max_rel(got, ref):
    got, ref = got.double(), ref.double()
    scale = float(ref.abs().max())
    err = float((got - ref).abs().max())
    return err / scale if scale else err


def compare(module, results, dtensor):
    from fsdp_mlir.torch import load_results

    loss, grads = load_results(str(results), module)
    errors = {"loss": abs(float(loss) - dtensor["loss"]) / abs(dtensor["loss"])}
    if set(grads) != set(dtensor["grads"]):
        fail(f"gradients differ in names: {sorted(set(grads) ^ set(dtensor['grads']))}")
    for name, g in grads.items():
        errors[name] = max_rel(g, dtensor["grads"][name])
    worst = max(errors, key=errors.get)
    return errors[worst], worst


def fmt_counts(c, kinds=KINDS):
    n = sum(c[k][0] for k in kinds)
    return f"{n} ({' / '.join(str(c[k][0]) for k in kinds)})"


def mib(b):
    return f"{b / 2**20:.2f}"


def main():
    global args
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--size", default="llama256", help="models.LLAMA_SIZES key")
    ap.add_argument("--dp", default="2,4", help="data-parallel sizes (tp is 2)")
    ap.add_argument("--steps", default="10")
    ap.add_argument("--warmup", default="2")
    ap.add_argument(
        "--plan",
        choices=("base", "auto"),
        default="base",
        help="base: config.base_model_tp_plan (embedding and LM head whole); "
        "auto: the model's whole plan (vocabulary-parallel embedding and LM head)",
    )
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument(
        "--no-sp", action="store_true", help="without sequence parallelism only"
    )
    ap.add_argument(
        "--all-reduce-loss",
        action="store_true",
        help="both steps all-reduce the loss over 'dp' (default: neither does; "
        "rank 0's micro-batch losses are compared)",
    )
    ap.add_argument(
        "--rtol", type=float, default=1e-5, help="gradients: max |a-b| / max |b|"
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny Llama, dp=2,tp=2 with SP only, 2 steps",
    )
    args = ap.parse_args()
    if args.smoke:
        args.size, args.dp, args.steps, args.warmup = "llama_smoke", "2", "2", "1"
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("bench/fsdp2 (tp): skipped (torch or transformers is not installed)")
        return
    backends = ["threads"]
    if not args.no_mpi and shutil.which(args.mpirun):
        backends.append("mpi")
    cases = [
        {
            "name": f"dp{dp}tp{TP}{'sp' if sp else ''}",
            "size": args.size,
            "world": int(dp) * TP,
            "sp": sp,
            "plan": args.plan,
            "all_reduce_loss": args.all_reduce_loss,
        }
        for dp in args.dp.split(",")
        for sp in ((False,) if args.no_sp else (False, True))
        if sp or not args.smoke
    ]
    print(
        f"## {args.size}, tp plan {args.plan}, "
        f"loss {'all-reduced over dp' if args.all_reduce_loss else 'per rank'}, median of {args.steps} steps after {args.warmup} warmup "
        f"(load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} cores)\n"
    )
    rows = []
    failed = []
    pipelines = set()
    with tempfile.TemporaryDirectory(prefix="fsdp2-tp-bench-") as tmp:
        work = Path(tmp)
        for case in cases:
            t0 = time.perf_counter()
            steps, warmup = int(args.steps), int(args.warmup)
            dt = dtensor_case(case, steps, warmup, work)
            module, out, lowered, pipeline, ours = fsdp_export(case, work)
            times, err, worst = {}, 0.0, None
            for backend in backends:
                times[backend], results, measured = fsdp_run(
                    case, out, lowered, backend
                )
                expected = {
                    (
                        sum(ours["all"][k][0] for k in KINDS),
                        sum(ours["all"][k][1] for k in KINDS),
                        sum(ours["all"][k][2] for k in KINDS),
                    )
                }
                if measured != expected:
                    fail(
                        f"{case['name']} ({backend}): fsdp-run counted {measured} "
                        f"(collectives, bytes sent, received per step), the report {expected}"
                    )
                e, w = compare(module, results, dt)
                if not e <= args.rtol:
                    failed.append(f"{case['name']} ({backend}): {w} {e:.2e}")
                if worst is None or e > err:
                    err, worst = e, w
            rows.append((case, dt, ours, times, err, worst))
            pipelines.add(pipeline)
            print(
                f"{case['name']}: DTensor {statistics.median(dt['steps']) * 1e3:.1f} ms, "
                + ", ".join(
                    f"fsdp-run {b} {t[0] * 1e3:.1f} ms" for b, t in times.items()
                )
                + f", gradients max rel diff {err:.1e} ({worst}), "
                f"{time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )
            if dt["counts"]["all"]["other"][0] or not dt["same_on_every_rank"]:
                fail(f"{case['name']}: torch collectives {dt['counts']}")
    print_tables(rows, backends)
    print("fsdp-opt --fsdp-pipeline: " + "; ".join(f'"{p}"' for p in sorted(pipelines)))
    if failed:
        fail("gradients differ from DTensor's beyond --rtol: " + "; ".join(failed))


def print_tables(rows, backends):
    print("Step time per rank: median (min) of the steps, each the slowest rank's\n")
    head = "| mesh | SP | DTensor + FSDP2 (gloo) |" + "".join(
        f" fsdp-run {b} | {b} / DTensor |" for b in backends
    )
    print(head + " gradients: max rel diff |")
    print("|---|---|---:|" + "---:|---:|" * len(backends) + "---:|")
    ms = lambda t: f"{t[0] * 1e3:.1f} ms ({t[1] * 1e3:.0f})"
    for case, dt, _, times, err, _ in rows:
        ref = (statistics.median(dt["steps"]), min(dt["steps"]))
        cells = "".join(f" {ms(t)} | {t[0] / ref[0]:.2f}x |" for t in times.values())
        print(
            f"| dp={case['world'] // TP},tp={TP} | {'yes' if case['sp'] else 'no'} "
            f"| {ms(ref)} |{cells} {err:.1e} |"
        )
    print(
        "\nCollectives per step and rank: total (all_gather / reduce_scatter / "
        "all_reduce), of them over tp; MiB sent per rank"
    )
    print(
        "\n| mesh | SP | DTensor + FSDP2 | of them TP | fsdp-opt | of them TP "
        "| MiB sent DTensor (TP) | MiB sent fsdp-opt (TP) |"
    )
    print("|---|---|---|---|---|---|---:|---:|")
    for case, dt, ours, _, _, _ in rows:
        c = dt["counts"]
        sent = lambda t: sum(t[k][1] for k in KINDS)
        print(
            f"| dp={case['world'] // TP},tp={TP} | {'yes' if case['sp'] else 'no'} "
            f"| {fmt_counts(c['all'])} | {fmt_counts(c['tp'])} "
            f"| {fmt_counts(ours['all'])} | {fmt_counts(ours['tp'])} "
            f"| {mib(sent(c['all']))} ({mib(sent(c['tp']))}) "
            f"| {mib(sent(ours['all']))} ({mib(sent(ours['tp']))}) |"
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

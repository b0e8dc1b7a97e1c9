"""Command line of the PyTorch frontend.

    python -m fsdp_mlir.torch export my_model.py:build --mesh 2x4 -o out/
    fsdp-opt out/step.mlir --fsdp-pipeline="lower=true all-reduce-loss=true" -o out/lowered.mlir
    fsdp-run out/lowered.mlir --inputs out --outputs out/results
    python -m fsdp_mlir.torch check my_model.py:build out out/results

`SPEC` is `FILE.py:FUNCTION` or `package.module:FUNCTION`; the function takes no
arguments and returns a dict with `module`, `loss_fn` and `batch` (the global
batch) and optionally `units`, `placement`, `policy`, `mesh`. Options given on
the command line override the dict's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shlex
import sys

from .export import ExportError, export_step, load_inputs, load_results, reference

KEYS = ("module", "loss_fn", "batch")


def load_spec(spec: str) -> dict:
    if ":" not in spec:
        raise ExportError(f"'{spec}': expected FILE.py:FUNCTION or package.module:FUNCTION")
    where, func = spec.rsplit(":", 1)
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise ExportError(f"{where}: not found")
        name = "_fsdp_torch_spec_" + os.path.splitext(os.path.basename(where))[0]
        loader = importlib.util.spec_from_file_location(name, where)
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        loader.loader.exec_module(mod)
    else:
        mod = importlib.import_module(where)
    if not hasattr(mod, func):
        raise ExportError(f"{where} has no function '{func}'")
    built = getattr(mod, func)()
    if not isinstance(built, dict) or any(k not in built for k in KEYS):
        raise ExportError(f"{spec}() must return a dict with keys {', '.join(KEYS)}")
    return built


def _units_arg(values):
    return values if values else None


def _tp_plan_arg(text: str):
    """`auto`, or PATTERN=STYLE[,PATTERN=STYLE...]."""
    if text == "auto":
        return "auto"
    plan = {}
    for item in text.split(","):
        pattern, sep, style = item.partition("=")
        if not sep:
            raise ExportError(f"--tp-plan '{item}': expected auto or PATTERN=STYLE,...")
        plan[pattern.strip()] = style.strip()
    return plan


def cmd_export(args) -> int:
    built = load_spec(args.spec)
    placement = built.get("placement")
    if args.placement:
        placement = {}
        for item in args.placement:
            if "=" in item:
                pattern, spec = item.split("=", 1)
                placement[pattern] = spec
            elif len(args.placement) == 1:
                placement = item
            else:
                raise ExportError(f"--placement '{item}': expected REGEX=PLACEMENT")
    model = export_step(
        built["module"],
        built["loss_fn"],
        built["batch"],
        args.output,
        mesh=args.mesh or built.get("mesh", "8"),
        units=_units_arg(args.unit) or built.get("units"),
        placement=placement,
        policy=args.policy or built.get("policy", "ceil"),
        param_dtype=args.param_dtype,
        reduce_dtype=args.reduce_dtype,
        verify=args.verify,
        tp_plan=_tp_plan_arg(args.tp_plan) if args.tp_plan else built.get("tp_plan"),
        sequence_parallel=args.sequence_parallel or built.get("sequence_parallel", False),
        experts=args.experts,
    )
    mesh = "x".join(map(str, model["mesh"]["shape"]))
    units = ", ".join(model["config"]["units"])
    print(
        f"wrote {os.path.join(args.output, 'step.mlir')}: {len(model['params'])} parameters "
        f"in units [{units}], mesh {mesh}, global batch {model['global_batch']} "
        f"({model['local_batch']} per rank)"
    )
    report = model["verify"]
    if "skipped" in report:
        print(f"verify: skipped ({report['skipped']})")
    else:
        print(
            f"verify: {report['results']} results match torch eager (float32, unsharded); "
            f"worst {report['worst']} {report['rel_err']:.2e}"
        )
    print(
        f"next: fsdp-opt {os.path.join(args.output, 'step.mlir')} "
        f'--fsdp-pipeline="{model["config"]["pipeline"]}" -o lowered.mlir'
    )
    return 0


def cmd_check(args) -> int:
    built = load_spec(args.spec)
    module = built["module"]
    batch = load_inputs(args.exported, module)
    loss, grads = load_results(args.results, module)
    # Buffers the step updates (batch norm in training mode) make each rank's
    # loss depend on its own micro-batch as a whole: compare with the mean of
    # the ranks' references.
    from .. import model as M

    exported = M.load_model(args.exported)
    per_rank = any(b.get("updated") for b in exported.get("buffers", []))
    world = exported["world"] if per_rank else None
    ref_loss, ref_grads = reference(module, built["loss_fn"], batch, world=world)
    ok = True
    rows = [("loss", loss.double(), ref_loss)] + [
        (f"grad.{n}", grads[n].double(), ref_grads[n]) for n in ref_grads
    ]
    width = max(len(r[0]) for r in rows)
    for name, got, ref in rows:
        scale = float(ref.abs().max()) if ref.numel() else 0.0
        err = float((got - ref).abs().max()) if ref.numel() else 0.0
        rel = err / scale if scale > 0 else err
        good = bool(got.isfinite().all()) and rel <= args.rtol
        ok &= good
        print(f"{name:<{width}}  rel err {rel:9.2e}  {'ok' if good else 'MISMATCH'}")
    print(f"{'PASS' if ok else 'FAIL'}: {len(rows)} results vs torch autograd (float64)")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.torch", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="write step.mlir, model.json and the global .npy inputs")
    ex.add_argument("spec", help="FILE.py:FUNCTION or package.module:FUNCTION")
    ex.add_argument("-o", "--output", required=True, help="output directory")
    ex.add_argument(
        "--mesh",
        help="N, RxS (HSDP) or named axes dp=2,tp=2 / replicate=2,shard=2,tp=2; "
        "default: the spec's, else 8",
    )
    ex.add_argument(
        "--tp-plan",
        help="with a tp axis: auto (the model's own plan: base_model_tp_plan, LM head, "
        "embeddings) or PATTERN=STYLE,... (e.g. 'mlp.up=colwise,mlp.down=rowwise')",
    )
    ex.add_argument(
        "--sequence-parallel",
        action="store_true",
        help="with a tp axis: split activations over their tokens between tensor-parallel products",
    )
    ex.add_argument(
        "--unit",
        action="append",
        help="regex of the module paths that are FSDP units (repeatable), e.g. 'blocks\\.\\d+'",
    )
    ex.add_argument(
        "--placement",
        action="append",
        help="PLACEMENT for every parameter, or REGEX=PLACEMENT (repeatable; first match wins)",
    )
    ex.add_argument("--policy", choices=("ceil", "balanced"))
    ex.add_argument("--param-dtype", help="gather dtype (fsdp-opt param-dtype), e.g. bf16")
    ex.add_argument("--reduce-dtype", help="reduction dtype (fsdp-opt reduce-dtype)")
    ex.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the imported step unsharded and compare it with torch eager "
        "(default: when fsdp-opt/fsdp-run are found; on one sample for large models)",
    )
    ex.add_argument(
        "--experts",
        choices=("sparse", "dense"),
        default="sparse",
        help="a sparse MoE's grouped products: one per expert on its rows (sparse, default) "
        "or every expert on every row (dense)",
    )
    ex.set_defaults(fn=cmd_export)
    ch = sub.add_parser("check", help="compare fsdp-run's results with torch autograd (float64)")
    ch.add_argument("spec")
    ch.add_argument("exported", help="the export directory (parameters and batch are read there)")
    ch.add_argument("results", help="fsdp-run --outputs directory")
    ch.add_argument("--rtol", type=float, default=1e-5, help="max |err| / max |ref| (1e-5)")
    ch.set_defaults(fn=cmd_check)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except ExportError as err:
        msg = str(err)
        if args.fn is cmd_export and "reproduce with:" not in msg:
            # Errors that keep no intermediate file (the trace, the model's
            # own checks) are reproduced by this command itself.
            command = shlex.join([sys.executable, "-m", "fsdp_mlir.torch", *argv])
            msg += f"\n  reproduce with: {command}"
        print(f"fsdp_mlir.torch: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

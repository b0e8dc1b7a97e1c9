"""Generate one rank's FSDP training step as MLIR, plus its global inputs.

    python -m fsdp_mlir.dev.gen mlp --layers 4 --hidden 256 --mesh 2x4 -o model.mlir --data data/
    python -m fsdp_mlir.dev.gen transformer --blocks 2 --dim 32 --ffn 64 --seq 8 -o t.mlir

The function `@step` takes every parameter at its global shape (with an
`fsdp.layout`) and this rank's micro-batch, and returns this rank's mean loss
and, for every parameter, d(loss)/d(param) from a hand-derived backward pass
written in upstream linalg/tensor/arith/math ops.
"""

from __future__ import annotations

import argparse
import math
import sys

from .. import model as M
from .mlir_builder import IDENTITY, FuncBuilder, Value, tensor_type

GELU_C0 = math.sqrt(2.0 / math.pi)
GELU_C1 = 0.044715


class StepEmitter:
    """Holds the builder and the function arguments (as Values)."""

    def __init__(self, model: dict):
        self.model = model
        self.b = FuncBuilder()
        self.args = {}
        for name in model["args"]:
            entry = self._entry(name)
            shape = entry["shape"] if "local_shape" not in entry else entry["local_shape"]
            ssa = "%" + "".join(c if c.isalnum() else "_" for c in name)
            self.args[name] = Value(ssa, tuple(shape), entry["dtype"])
        self.grads = {}

    def _entry(self, name):
        for e in self.model["params"] + self.model["data"]:
            if e["name"] == name:
                return e
        raise KeyError(name)

    def load(self, name: str) -> Value:
        """An argument as f32. Called at every use, so a bf16 parameter read in
        the backward pass is a fresh read of the argument, not a forward value."""
        return self.b.cast(self.args[name], "f32")

    # ------------------------------------------------------------- pieces

    def scale(self, x: Value, c: float) -> Value:
        b = self.b
        return b.map([x], lambda r, a, o: r.mul(a, b.const(c)), hint="scaled")

    def mse(self, pred: Value, target: Value):
        """Returns (loss tensor<f32>, dloss/dpred); mean over all elements."""
        b = self.b
        count = math.prod(pred.shape)
        diff = b.map([pred, target], lambda r, p, t, o: r.sub(p, t), hint="diff")
        b.comment(f"loss = sum((pred - target)^2) / N, N = {count}")
        total = b.reduce_sum(diff, keep=(), body=lambda r, d: r.mul(d, d))
        loss = b.map([total], lambda r, s, o: r.mul(s, b.const(1.0 / count)), hint="loss")
        b.comment("backward: d(loss)/d(pred) = 2 (pred - target) / N")
        dpred = self.scale(diff, 2.0 / count)
        return loss, dpred

    def finish(self, loss: Value) -> str:
        results = [loss]
        types = []
        for p in self.model["params"]:
            results.append(self.b.cast(self.grads[p["name"]], p["dtype"]))
        for r in self.model["results"]:
            if r["kind"] == "loss":
                attrs = M.port_attrs(r["name"], loss=True)
            else:
                attrs = M.port_attrs(r["name"], grad_of=r["grad_of"])
            types.append(f"{tensor_type(r['shape'], r['dtype'])} {attrs}")
        names = ", ".join(v.name for v in results)
        rtypes = ", ".join(v.type for v in results)
        self.b.emit(f"return {names} : {rtypes}")

        arg_lines = []
        for p in self.model["params"]:
            v = self.args[p["name"]]
            attrs = M.port_attrs(p["name"], layout=p["layout_attr"], unit=p["unit"])
            arg_lines.append(f"{v.name}: {v.type} {attrs}")
        for d in self.model["data"]:
            v = self.args[d["name"]]
            arg_lines.append(f"{v.name}: {v.type} {M.port_attrs(d['name'])}")
        out = ["module {", "  " + M.mesh_text(self.model["mesh"])]
        out.append(f"  func.func @{self.model['function']}(")
        out.append(",\n".join("      " + a for a in arg_lines) + ")")
        out.append("      -> (" + ",\n          ".join(types) + ") {")
        out.extend("    " + line for line in self.b.prelude + self.b.lines)
        out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"


# ------------------------------------------------------------------ MLP


def gelu_fwd(r, z):
    """0.5 z (1 + tanh(c0 (z + c1 z^3))); returns (value, tanh)."""
    z3 = r.mul(r.mul(z, z), z)
    u = r.mul(r.const(GELU_C0), r.add(z, r.mul(r.const(GELU_C1), z3)))
    t = r.math("tanh", u)
    return r.mul(r.mul(r.const(0.5), z), r.add(r.const(1.0), t)), t


def gelu_grad(r, z):
    """d gelu / dz = 0.5 (1 + t) + 0.5 z (1 - t^2) c0 (1 + 3 c1 z^2)."""
    _, t = gelu_fwd(r, z)
    one = r.const(1.0)
    left = r.mul(r.const(0.5), r.add(one, t))
    du = r.mul(r.const(GELU_C0), r.add(one, r.mul(r.const(3.0 * GELU_C1), r.mul(z, z))))
    right = r.mul(r.mul(r.const(0.5), z), r.mul(r.sub(one, r.mul(t, t)), du))
    return r.add(left, right)


def emit_mlp(model: dict) -> str:
    e = StepEmitter(model)
    b = e.b
    widths = model["config"]["widths"]
    act = model["config"]["act"]
    nl = len(widths) - 1
    batch = model["local_batch"]

    h = e.load("x")
    inputs, preacts = [], []
    for i in range(nl):
        w, bias = f"l{i}.weight", f"l{i}.bias"
        bias_rows = b.generic(
            [(e.load(bias), (1,))],
            (batch, widths[i + 1]),
            lambda r, a, o: a,
            hint="bias",
        )
        z = b.matmul(h, e.load(w), tb=True, init=bias_rows)
        inputs.append(h)
        preacts.append(z)
        if i == nl - 1:
            h = z
        elif act == "gelu":
            h = b.map([z], lambda r, a, o: gelu_fwd(r, a)[0], hint="gelu")
        else:
            h = b.map(
                [z],
                lambda r, a, o: r.let("arith.maximumf {0}, {1} : f32", a, r.const(0.0)),
                hint="relu",
            )
    loss, grad = e.mse(h, e.load("y"))

    for i in reversed(range(nl)):
        if i < nl - 1:
            if act == "gelu":
                grad = b.map(
                    [grad, preacts[i]],
                    lambda r, g, z, o: r.mul(g, gelu_grad(r, z)),
                    hint="dz",
                )
            else:

                def relu_bwd(r, g, z, o):
                    pos = r.let("arith.cmpf ogt, {0}, {1} : f32", z, r.const(0.0))
                    return r.let("arith.select {0}, {1}, {2} : f32", pos, g, r.const(0.0))

                grad = b.map([grad, preacts[i]], relu_bwd, hint="dz")
        e.grads[f"l{i}.weight"] = b.matmul(grad, inputs[i], ta=True)
        e.grads[f"l{i}.bias"] = b.reduce_sum(grad, keep=(1,), hint="dbias")
        if i > 0:
            grad = b.matmul(grad, e.load(f"l{i}.weight"))
    return e.finish(loss)


# ------------------------------------------------------------ transformer


def rmsnorm_fwd(e: StepEmitter, h: Value, weight: str, eps: float):
    """n = h * rsqrt(mean(h^2) + eps) * g; returns (n, normalized h, rsqrt)."""
    b = e.b
    dim = h.shape[1]
    ss = b.reduce_sum(h, keep=(0,), body=lambda r, a: r.mul(a, a), hint="sumsq")
    rs = b.map(
        [ss],
        lambda r, s, o: r.math("rsqrt", r.add(r.mul(s, r.const(1.0 / dim)), r.const(eps))),
        hint="rstd",
    )
    nh = b.map([h, (rs, (0,))], lambda r, a, s, o: r.mul(a, s), hint="nhat")
    n = b.map([nh, (e.load(weight), (1,))], lambda r, a, g, o: r.mul(a, g), hint="norm")
    return n, nh, rs


def rmsnorm_bwd(e: StepEmitter, dh: Value, dn: Value, nh: Value, rs: Value, weight: str):
    """Adds d(loss)/dh through the norm to dh; records the weight gradient.
    With dnh = dn * g: dh += rs * (dnh - nh * mean(dnh * nh))."""
    b = e.b
    dim = dn.shape[1]
    e.grads[weight] = b.reduce_sum(
        dn,
        keep=(1,),
        body=lambda r, a, x: r.mul(a, x),
        extra=[(nh, (0, 1))],
        hint="dnormw",
    )
    g = e.load(weight)
    dot = b.reduce_sum(
        dn,
        keep=(0,),
        body=lambda r, a, gg, x: r.mul(r.mul(a, gg), x),
        extra=[(g, (1,)), (nh, (0, 1))],
        hint="dot",
    )

    def body(r, d, a, gg, x, dt, s, o):
        inner = r.sub(r.mul(a, gg), r.mul(x, r.mul(dt, r.const(1.0 / dim))))
        return r.add(d, r.mul(s, inner))

    return b.map([dh, dn, (g, (1,)), nh, (dot, (0,)), (rs, (0,))], body, hint="dh")


def sigmoid(r, a):
    one = r.const(1.0)
    return r.div(one, r.add(one, r.math("exp", r.neg(a))))


def mlp_block_fwd(e: StepEmitter, h: Value, unit: str, eps: float):
    b = e.b
    n, nh, rs = rmsnorm_fwd(e, h, f"{unit}.mlp_norm.weight", eps)
    a = b.matmul(n, e.load(f"{unit}.w1.weight"), tb=True)
    c = b.matmul(n, e.load(f"{unit}.w3.weight"), tb=True)
    m = b.map([a, c], lambda r, x, y, o: r.mul(r.mul(x, sigmoid(r, x)), y), hint="swiglu")
    out = b.matmul(m, e.load(f"{unit}.w2.weight"), tb=True, init=h)
    return out, dict(n=n, nh=nh, rs=rs, a=a, c=c, m=m)


def mlp_block_bwd(e: StepEmitter, dh: Value, unit: str, s: dict) -> Value:
    b = e.b
    e.grads[f"{unit}.w2.weight"] = b.matmul(dh, s["m"], ta=True)
    dm = b.matmul(dh, e.load(f"{unit}.w2.weight"))

    def da_body(r, g, x, y, o):
        sg = sigmoid(r, x)
        dsilu = r.mul(sg, r.add(r.const(1.0), r.mul(x, r.sub(r.const(1.0), sg))))
        return r.mul(r.mul(g, y), dsilu)

    da = b.map([dm, s["a"], s["c"]], da_body, hint="da")
    dc = b.map([dm, s["a"]], lambda r, g, x, o: r.mul(g, r.mul(x, sigmoid(r, x))), hint="dc")
    e.grads[f"{unit}.w1.weight"] = b.matmul(da, s["n"], ta=True)
    e.grads[f"{unit}.w3.weight"] = b.matmul(dc, s["n"], ta=True)
    dn = b.matmul(da, e.load(f"{unit}.w1.weight"))
    dn = b.matmul(dc, e.load(f"{unit}.w3.weight"), init=dn)
    return rmsnorm_bwd(e, dh, dn, s["nh"], s["rs"], f"{unit}.mlp_norm.weight")


NEG_INF = "0xFF800000"


def attn_block_fwd(e: StepEmitter, h: Value, unit: str, eps: float, bsz: int, seq: int):
    """Single-head causal attention, head dim = model dim."""
    b = e.b
    dim = h.shape[1]
    scale = 1.0 / math.sqrt(dim)
    n, nh, rs = rmsnorm_fwd(e, h, f"{unit}.attn_norm.weight", eps)
    to3 = lambda v: b.expand(v, "[[0, 1], [2]]", (bsz, seq, dim))  # noqa: E731
    q, k, v = (to3(b.matmul(n, e.load(f"{unit}.{w}.weight"), tb=True)) for w in ("wq", "wk", "wv"))
    par3 = ["parallel"] * 3
    scores = b.contract(
        q,
        (0, 1, 3),
        k,
        (0, 2, 3),
        (bsz, seq, seq),
        (0, 1, 2),
        par3 + ["reduction"],
        hint="scores",
    )

    def masked(r, x, if_future):
        # Causal mask: key position j > query position i is not attended.
        i = r.let("linalg.index 1 : index")
        j = r.let("linalg.index 2 : index")
        future = r.let("arith.cmpi ugt, {0}, {1} : index", j, i)
        return r.let("arith.select {0}, {1}, {2} : f32", future, if_future, x)

    row_max = b.generic(
        [(scores, IDENTITY)],
        (bsz, seq),
        lambda r, x, o: masked(r, r.let("arith.maximumf {0}, {1} : f32", x, o), o),
        iterators=par3[:2] + ["reduction"],
        out_map=(0, 1),
        init=b.fill(b.const_bits(NEG_INF), (bsz, seq)),
        hint="rowmax",
    )
    expd = b.map(
        [scores, (row_max, (0, 1))],
        lambda r, x, mx, o: masked(
            r, r.math("exp", r.mul(r.sub(x, mx), r.const(scale))), r.const(0.0)
        ),
        hint="expd",
    )
    denom = b.reduce_sum(expd, keep=(0, 1), hint="denom")
    probs = b.map([expd, (denom, (0, 1))], lambda r, x, d, o: r.div(x, d), hint="probs")
    o3 = b.contract(
        probs,
        (0, 1, 3),
        v,
        (0, 3, 2),
        (bsz, seq, dim),
        (0, 1, 2),
        par3 + ["reduction"],
        hint="attn",
    )
    o = b.collapse(o3, "[[0, 1], [2]]", (bsz * seq, dim))
    out = b.matmul(o, e.load(f"{unit}.wo.weight"), tb=True, init=h)
    return out, dict(n=n, nh=nh, rs=rs, q=q, k=k, v=v, probs=probs, o=o, scale=scale)


def attn_block_bwd(e: StepEmitter, dh: Value, unit: str, s: dict) -> Value:
    b = e.b
    bsz, seq, dim = s["q"].shape
    par3 = ["parallel"] * 3
    red = par3 + ["reduction"]
    e.grads[f"{unit}.wo.weight"] = b.matmul(dh, s["o"], ta=True)
    do = b.expand(b.matmul(dh, e.load(f"{unit}.wo.weight")), "[[0, 1], [2]]", (bsz, seq, dim))
    probs = s["probs"]
    dprobs = b.contract(
        do, (0, 1, 3), s["v"], (0, 2, 3), (bsz, seq, seq), (0, 1, 2), red, hint="dprobs"
    )
    dv = b.contract(probs, (0, 3, 1), do, (0, 3, 2), (bsz, seq, dim), (0, 1, 2), red, hint="dv")
    rowdot = b.reduce_sum(
        dprobs,
        keep=(0, 1),
        body=lambda r, a, p: r.mul(a, p),
        extra=[(probs, (0, 1, 2))],
        hint="rowdot",
    )
    dscores = b.map(
        [probs, dprobs, (rowdot, (0, 1))],
        lambda r, p, dp, rd, o: r.mul(r.mul(p, r.sub(dp, rd)), r.const(s["scale"])),
        hint="dscores",
    )
    dq = b.contract(
        dscores, (0, 1, 3), s["k"], (0, 3, 2), (bsz, seq, dim), (0, 1, 2), red, hint="dq"
    )
    dk = b.contract(
        dscores, (0, 3, 1), s["q"], (0, 3, 2), (bsz, seq, dim), (0, 1, 2), red, hint="dk"
    )
    dn = None
    for w, d3 in (("wq", dq), ("wk", dk), ("wv", dv)):
        d2 = b.collapse(d3, "[[0, 1], [2]]", (bsz * seq, dim))
        e.grads[f"{unit}.{w}.weight"] = b.matmul(d2, s["n"], ta=True)
        dn = b.matmul(d2, e.load(f"{unit}.{w}.weight"), init=dn)
    return rmsnorm_bwd(e, dh, dn, s["nh"], s["rs"], f"{unit}.attn_norm.weight")


def emit_transformer(model: dict) -> str:
    e = StepEmitter(model)
    b = e.b
    cfg = model["config"]
    bsz, seq, dim = model["local_batch"], cfg["seq"], cfg["dim"]
    flat = (bsz * seq, dim)
    h = b.collapse(e.load("x"), "[[0, 1], [2]]", flat)
    saved = []
    for i in range(cfg["blocks"]):
        unit = f"blocks.{i}"
        if cfg["attention"]:
            h, st = attn_block_fwd(e, h, unit, cfg["eps"], bsz, seq)
            saved.append(("attn", unit, st))
        h, st = mlp_block_fwd(e, h, unit, cfg["eps"])
        saved.append(("mlp", unit, st))
    loss, dh = e.mse(h, b.collapse(e.load("y"), "[[0, 1], [2]]", flat))
    for kind, unit, st in reversed(saved):
        if kind == "mlp":
            dh = mlp_block_bwd(e, dh, unit, st)
        else:
            dh = attn_block_bwd(e, dh, unit, st)
    return e.finish(loss)


def emit_step(model: dict) -> str:
    if model["kind"] == "mlp":
        return emit_mlp(model)
    return emit_transformer(model)


# -------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.dev.gen",
        description="Write one rank's FSDP training step (MLIR) and its global inputs.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", default="-", help="MLIR file ('-': stdout)")
    common.add_argument("--data", help="directory for model.json and the global .npy inputs")
    common.add_argument("--batch", type=int, default=4, help="LOCAL batch per rank (default 4)")
    common.add_argument(
        "--mesh", default="8", help="N (1-D [shard = N]) or RxS (HSDP [replicate = R, shard = S])"
    )
    common.add_argument(
        "--placement",
        choices=M.PLACEMENTS,
        default="dim0",
        help="placement of 2-D parameters on the shard axis",
    )
    common.add_argument("--policy", choices=M.POLICIES, default="ceil", help="uneven shard policy")
    common.add_argument(
        "--strided-sf", type=int, default=2, help="split factor of --placement strided (default 2)"
    )
    common.add_argument("--dtype", choices=M.DTYPES, default="f32")
    common.add_argument("--seed", type=int, default=0)
    sub = ap.add_subparsers(dest="kind", required=True)

    mlp = sub.add_parser("mlp", parents=[common], help="Linear(+bias) stack, MSE loss")
    mlp.add_argument("--layers", type=int, default=2, help="number of Linear layers")
    mlp.add_argument("--hidden", type=int, default=32, help="hidden width")
    mlp.add_argument("--in", dest="d_in", type=int, default=16, help="input width")
    mlp.add_argument("--out", dest="d_out", type=int, default=10, help="output width")
    mlp.add_argument("--widths", help="explicit widths, e.g. 16,37,10 (overrides the above)")
    mlp.add_argument(
        "--act",
        choices=M.ACTIVATIONS,
        default="gelu",
        help="activation between layers (gelu: tanh approximation)",
    )

    tr = sub.add_parser(
        "transformer",
        parents=[common],
        help="pre-RMSNorm SwiGLU blocks (+ optional attention), MSE loss",
    )
    tr.add_argument("--blocks", type=int, default=2)
    tr.add_argument("--dim", type=int, default=16)
    tr.add_argument("--ffn", type=int, default=32)
    tr.add_argument("--seq", type=int, default=8)
    tr.add_argument(
        "--attention",
        action="store_true",
        help="add single-head causal attention (wq/wk/wv/wo) to every block",
    )
    tr.add_argument("--eps", type=float, default=1e-6, help="RMSNorm epsilon")
    return ap


def model_from_args(args) -> dict:
    mesh = M.parse_mesh(args.mesh)
    if args.kind == "mlp":
        if args.widths:
            widths = M.parse_widths(args.widths)
        else:
            widths = M.mlp_widths(args.layers, args.hidden, args.d_in, args.d_out)
        config = {"widths": widths, "act": args.act}
    else:
        config = {
            "blocks": args.blocks,
            "dim": args.dim,
            "ffn": args.ffn,
            "seq": args.seq,
            "attention": bool(args.attention),
            "eps": args.eps,
        }
    return M.build_model(
        args.kind,
        config,
        batch=args.batch,
        mesh=mesh,
        placement=args.placement,
        policy=args.policy,
        strided_sf=args.strided_sf,
        dtype=args.dtype,
        seed=args.seed,
    )


def generate(model: dict, output: str | None = None, data_dir: str | None = None) -> str:
    """Emit the step for `model`; optionally write it and the inputs."""
    text = emit_step(model)
    if output and output != "-":
        with open(output, "w") as f:
            f.write(text)
    if data_dir:
        M.save_inputs(model, M.init_values(model), data_dir)
    return text


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        model = model_from_args(args)
        text = generate(model, args.output, args.data)
    except M.ModelError as err:
        print(f"fsdp_mlir.dev.gen: error: {err}", file=sys.stderr)
        return 2
    if args.output == "-":
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

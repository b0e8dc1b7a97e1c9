"""Model description shared by the generator, the reference and the checker.

A model is described by a plain dict that is written as `model.json` next to the
global inputs. It lists, in argument order, every parameter (global shape, FSDP
unit, layout) and every data argument (local and global shape), and, in result
order, the loss and the gradients. See docs/PYTHON.md for the format.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

FORMAT_VERSION = 1
MODEL_JSON = "model.json"
DTYPES = ("f32", "bf16")
PLACEMENTS = ("dim0", "dim1", "strided", "replicate")
POLICIES = ("ceil", "balanced")
ACTIVATIONS = ("gelu", "relu")


class ModelError(ValueError):
    """A model option or input file that cannot be used (message says why)."""


# --------------------------------------------------------------------------
# Mesh and layouts


# Axis names of a named mesh ("dp=2,tp=2") and the role each plays.
MESH_ROLES = {"dp": "shard", "shard": "shard", "replicate": "replicate", "tp": "tp"}


def parse_mesh(spec: str) -> dict:
    """`8` -> 1-D [shard = 8]; `2x4` -> HSDP [replicate = 2, shard = 4];
    named axes `dp=2,tp=2` or `replicate=2,shard=2,tp=2`: `dp` / `shard`
    shard parameters (FSDP), `replicate` replicates them (HSDP), `tp` is the
    tensor-parallel axis."""
    if "=" in spec:
        axes, shape = [], []
        for part in spec.split(","):
            name, _, size = part.partition("=")
            name = name.strip().lower()
            if name not in MESH_ROLES:
                raise ModelError(
                    f"mesh '{spec}': axis '{name}': expected dp, shard, replicate or tp"
                )
            if any(MESH_ROLES[a] == MESH_ROLES[name] for a in axes):
                raise ModelError(f"mesh '{spec}': two axes with the role of '{name}'")
            try:
                n = int(size)
            except ValueError:
                raise ModelError(f"mesh '{spec}': axis '{name}' needs an integer size") from None
            if n < 1:
                raise ModelError(f"mesh '{spec}': axis '{name}' needs a positive size")
            axes.append(name)
            shape.append(n)
        return {"name": "mesh", "axes": axes, "shape": shape}
    parts = spec.lower().split("x")
    try:
        shape = [int(p) for p in parts]
    except ValueError:
        raise ModelError(
            f"mesh '{spec}': expected N, RxS or named axes (e.g. 8, 2x4 or dp=2,tp=2)"
        ) from None
    if len(shape) not in (1, 2) or any(s < 1 for s in shape):
        raise ModelError(f"mesh '{spec}': expected N or RxS with positive sizes (e.g. 8 or 2x4)")
    axes = ["shard"] if len(shape) == 1 else ["replicate", "shard"]
    return {"name": "mesh", "axes": axes, "shape": shape}


def axis_roles(mesh: dict) -> list:
    """The role of each mesh axis: shard, replicate or tp."""
    return [MESH_ROLES.get(a, a) for a in mesh["axes"]]


def tp_axis(mesh: dict):
    """The index of the tensor-parallel axis, or None."""
    roles = axis_roles(mesh)
    return roles.index("tp") if "tp" in roles else None


def data_parallel_world(mesh: dict) -> int:
    """Ranks that read different batches: every axis but the tensor-parallel one."""
    return math.prod(s for s, r in zip(mesh["shape"], axis_roles(mesh)) if r != "tp")


def mesh_world(mesh: dict) -> int:
    return math.prod(mesh["shape"])


def mesh_text(mesh: dict) -> str:
    axes = ", ".join(f"{a} = {s}" for a, s in zip(mesh["axes"], mesh["shape"]))
    return f"fsdp.mesh @{mesh['name']} [{axes}]"


def placement_text(p: dict) -> str:
    if p["kind"] == "replicate":
        return "replicate"
    if p["kind"] == "shard":
        return f"shard<{p['dim']}>"
    if p["kind"] == "strided_shard":
        return f"strided_shard<{p['dim']}, {p['sf']}>"
    if p["kind"] == "tp_shard":
        return f"tp_shard<{p['dim']}>"
    if p["kind"] == "tp_replicate":
        return "tp_replicate"
    raise ModelError(f"unknown placement kind {p['kind']!r}")


def layout_text(mesh: dict, layout: dict) -> str:
    places = ", ".join(placement_text(p) for p in layout["placements"])
    policy = ", policy = balanced" if layout["policy"] == "balanced" else ""
    return f"#fsdp.layout<@{mesh['name']}, [{places}]{policy}>"


def port_attrs(
    name: str,
    *,
    layout: str | None = None,
    unit: str | None = None,
    loss: bool = False,
    grad_of: int | None = None,
    update_of: int | None = None,
) -> str:
    """The fsdp attribute dictionary of a step argument or result, as the
    dialect reads it (docs/SEMANTICS.md): a parameter's
    `{fsdp.layout = #fsdp.layout<...>, fsdp.name = "w", fsdp.unit = "l0"}`,
    an input's `{fsdp.name = "x"}`, the loss's `{fsdp.loss, fsdp.name =
    "loss"}`, a gradient's `{fsdp.grad_of = 0 : i64, fsdp.name = "grad.w"}`,
    an updated buffer's `{fsdp.name = "b", fsdp.update_of = 3 : i64}`.
    The attribute names are those of FSDPConstants.h."""
    fields = []
    if loss:
        fields.append("fsdp.loss")
    if grad_of is not None:
        fields.append(f"fsdp.grad_of = {grad_of} : i64")
    if layout is not None:
        fields.append(f"fsdp.layout = {layout}")
    fields.append(f'fsdp.name = "{name}"')
    if unit is not None:
        fields.append(f'fsdp.unit = "{unit}"')
    if update_of is not None:
        fields.append(f"fsdp.update_of = {update_of} : i64")
    return "{" + ", ".join(fields) + "}"


def make_layout(
    name: str,
    shape: list,
    mesh: dict,
    placement: str,
    policy: str,
    strided_sf: int,
    tp: dict | None = None,
) -> dict:
    """Layout of one parameter: `replicate` on the replicate axis (HSDP), and
    the requested placement on the shard axis. 1-D tensors use shard<0>."""
    if placement not in PLACEMENTS:
        raise ModelError(f"placement '{placement}': expected one of {PLACEMENTS}")
    if policy not in POLICIES:
        raise ModelError(f"policy '{policy}': expected one of {POLICIES}")
    k = mesh["shape"][-1]
    if placement == "replicate":
        on_shard_axis = {"kind": "replicate"}
    elif len(shape) == 1 or placement == "dim0":
        on_shard_axis = {"kind": "shard", "dim": 0}
    elif placement == "dim1":
        on_shard_axis = {"kind": "shard", "dim": 1}
    else:  # strided along dim 0
        if strided_sf < 1:
            raise ModelError(f"--strided-sf must be >= 1, got {strided_sf}")
        n = shape[0]
        if n % (strided_sf * k) != 0:
            dims = "x".join(map(str, shape))
            raise ModelError(
                f"strided_shard<0, {strided_sf}> on '{name}' ({dims}) needs dim 0 "
                f"divisible by sf*k = {strided_sf}*{k} = {strided_sf * k}; got {n}"
            )
        on_shard_axis = {"kind": "strided_shard", "dim": 0, "sf": strided_sf}
    placements = [{"kind": "replicate"}] * (len(mesh["shape"]) - 1) + [on_shard_axis]
    if tp_axis(mesh) is not None:
        # Named axes: FSDP on the shard axis, the plan's placement on tp.
        placements = [
            on_shard_axis if r == "shard" else tp if r == "tp" else {"kind": "replicate"}
            for r in axis_roles(mesh)
        ]
    used_policy = "ceil" if placement == "replicate" else policy
    return {"placements": placements, "policy": used_policy}


def megatron_plan(kind: str, config: dict) -> dict:
    """Tensor-parallel placements of the generated models (Megatron's plan):
    an MLP alternates column- and row-parallel layers (an unpaired last layer
    is replicated); a transformer block splits wq/wk/wv and w1/w3 by their
    output features and wo/w2 by their input features; norms are
    replicated."""
    col = {"kind": "tp_shard", "dim": 0}
    row = {"kind": "tp_shard", "dim": 1}
    rep = {"kind": "tp_replicate"}
    plan = {}
    if kind == "mlp":
        n = len(config["widths"]) - 1
        for i in range(n):
            if i % 2 == 1:
                plan[f"l{i}.weight"], plan[f"l{i}.bias"] = row, rep
            elif i + 1 < n:
                plan[f"l{i}.weight"], plan[f"l{i}.bias"] = col, col
    else:
        for i in range(config["blocks"]):
            u = f"blocks.{i}"
            for w in ("wq", "wk", "wv", "w1", "w3"):
                plan[f"{u}.{w}.weight"] = col
            for w in ("wo", "w2"):
                plan[f"{u}.{w}.weight"] = row
    return plan | {"*": rep}


# --------------------------------------------------------------------------
# Model construction


def mlp_widths(layers: int, hidden: int, d_in: int, d_out: int) -> list:
    if layers < 1:
        raise ModelError(f"--layers must be >= 1, got {layers}")
    return [d_in] + [hidden] * (layers - 1) + [d_out]


def parse_widths(text: str) -> list:
    try:
        widths = [int(w) for w in text.split(",")]
    except ValueError:
        raise ModelError(f"--widths '{text}': expected a list like 16,37,10") from None
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise ModelError(f"--widths '{text}': need >= 2 positive widths")
    return widths


def _param(name, shape, unit, init):
    return {"name": name, "shape": list(shape), "unit": unit, "init": init}


def mlp_params(widths: list) -> list:
    params = []
    for i in range(len(widths) - 1):
        unit = f"l{i}"
        fan_in = widths[i]
        params.append(_param(f"{unit}.weight", [widths[i + 1], fan_in], unit, ["normal", fan_in]))
        params.append(_param(f"{unit}.bias", [widths[i + 1]], unit, ["normal", fan_in]))
    return params


def transformer_params(blocks: int, dim: int, ffn: int, attention: bool) -> list:
    params = []
    for i in range(blocks):
        unit = f"blocks.{i}"
        if attention:
            params.append(_param(f"{unit}.attn_norm.weight", [dim], unit, ["norm"]))
            for w in ("wq", "wk", "wv", "wo"):
                params.append(_param(f"{unit}.{w}.weight", [dim, dim], unit, ["normal", dim]))
        params.append(_param(f"{unit}.mlp_norm.weight", [dim], unit, ["norm"]))
        params.append(_param(f"{unit}.w1.weight", [ffn, dim], unit, ["normal", dim]))
        params.append(_param(f"{unit}.w3.weight", [ffn, dim], unit, ["normal", dim]))
        params.append(_param(f"{unit}.w2.weight", [dim, ffn], unit, ["normal", ffn]))
    return params


def build_model(
    kind: str,
    config: dict,
    *,
    batch: int,
    mesh: dict,
    placement: str = "dim0",
    policy: str = "ceil",
    strided_sf: int = 2,
    dtype: str = "f32",
    seed: int = 0,
) -> dict:
    """Full model description (the content of model.json)."""
    if dtype not in DTYPES:
        raise ModelError(f"dtype '{dtype}': expected one of {DTYPES}")
    if batch < 1:
        raise ModelError(f"--batch must be >= 1, got {batch}")
    world = mesh_world(mesh)
    batch_world = data_parallel_world(mesh)
    if kind == "mlp":
        widths = config["widths"]
        if config["act"] not in ACTIVATIONS:
            raise ModelError(f"act '{config['act']}': expected one of {ACTIVATIONS}")
        params = mlp_params(widths)
        data_shapes = {"x": [widths[0]], "y": [widths[-1]]}
    elif kind == "transformer":
        for key in ("blocks", "dim", "ffn", "seq"):
            if config[key] < 1:
                raise ModelError(f"--{key} must be >= 1, got {config[key]}")
        params = transformer_params(
            config["blocks"], config["dim"], config["ffn"], config["attention"]
        )
        data_shapes = {
            "x": [config["seq"], config["dim"]],
            "y": [config["seq"], config["dim"]],
        }
    else:
        raise ModelError(f"unknown model kind '{kind}'")

    plan = megatron_plan(kind, config) if tp_axis(mesh) is not None else {}
    for p in params:
        p["dtype"] = dtype
        tp = plan.get(p["name"], plan.get("*"))
        p["layout"] = make_layout(p["name"], p["shape"], mesh, placement, policy, strided_sf, tp)
        p["layout_attr"] = layout_text(mesh, p["layout"])
    data = [
        {
            "name": name,
            "dtype": dtype,
            "local_shape": [batch] + rest,
            "shape": [batch * batch_world] + rest,
        }
        for name, rest in data_shapes.items()
    ]
    args = [p["name"] for p in params] + [d["name"] for d in data]
    results = [{"name": "loss", "kind": "loss", "dtype": "f32", "shape": []}]
    for i, p in enumerate(params):
        results.append(
            {
                "name": f"grad.{p['name']}",
                "kind": "grad",
                "grad_of": i,
                "param": p["name"],
                "dtype": dtype,
                "shape": list(p["shape"]),
            }
        )
    return {
        "format": FORMAT_VERSION,
        "kind": kind,
        "config": config,
        "function": "step",
        "dtype": dtype,
        "seed": seed,
        "mesh": mesh,
        "world": world,
        "local_batch": batch,
        "global_batch": batch * batch_world,
        "placement": placement,
        "policy": policy,
        "strided_sf": strided_sf,
        "args": args,
        "params": params,
        "data": data,
        "results": results,
    }


# --------------------------------------------------------------------------
# Values


def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """Array as stored in .npy: f32 as float32, bf16 as uint16 bit patterns
    (.npy has no bfloat16 type; ml_dtypes' own encoding is an untyped `|V2`)."""
    if dtype == "f32":
        # asarray, not ascontiguousarray, which turns 0-d arrays into 1-d.
        return np.asarray(x, dtype=np.float32, order="C")
    if dtype == "bf16":
        import ml_dtypes

        return np.asarray(x).astype(ml_dtypes.bfloat16, order="C").view(np.uint16)
    raise ModelError(f"dtype '{dtype}': expected one of {DTYPES}")


def from_storage(a: np.ndarray, dtype: str) -> np.ndarray:
    """Stored array -> float64 values. Accepts float arrays of any width, and for
    bf16 also uint16 bit patterns and ml_dtypes' `|V2` encoding."""
    if dtype == "bf16" and a.dtype.kind in "uV" and a.dtype.itemsize == 2:
        import ml_dtypes

        return a.view(np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    if a.dtype.kind not in "fiu" and a.dtype.name != "bfloat16":
        raise ModelError(f"cannot read values of numpy dtype {a.dtype}")
    return a.astype(np.float64)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to `dtype` and back (what storage keeps)."""
    return from_storage(to_storage(x, dtype), dtype)


def init_values(model: dict) -> dict:
    """Deterministic global inputs (float64 values already rounded to dtype)."""
    rng = np.random.default_rng(model["seed"])
    values = {}
    for p in model["params"]:
        shape = p["shape"]
        if p["init"][0] == "normal":
            v = rng.standard_normal(shape) / math.sqrt(p["init"][1])
        else:  # norm weights near one so they matter without dominating
            v = 1.0 + 0.1 * rng.standard_normal(shape)
        values[p["name"]] = round_to(v, p["dtype"])
    for d in model["data"]:
        values[d["name"]] = round_to(rng.standard_normal(d["shape"]), d["dtype"])
    return values


def save_inputs(model: dict, values: dict, data_dir: str) -> None:
    os.makedirs(data_dir, exist_ok=True)
    for entry in model["params"] + model["data"]:
        np.save(
            os.path.join(data_dir, entry["name"] + ".npy"),
            to_storage(values[entry["name"]], entry["dtype"]),
        )
    with open(os.path.join(data_dir, MODEL_JSON), "w") as f:
        json.dump(model, f, indent=1)
        f.write("\n")


def load_model(data_dir: str) -> dict:
    path = os.path.join(data_dir, MODEL_JSON)
    if not os.path.isfile(path):
        raise ModelError(f"{path}: not found (generate with python -m fsdp_mlir.dev.gen)")
    with open(path) as f:
        model = json.load(f)
    if model.get("format") != FORMAT_VERSION:
        raise ModelError(f"{path}: unsupported format {model.get('format')}")
    return model


def load_inputs(model: dict, data_dir: str) -> dict:
    """Global inputs as float64 arrays keyed by name; checks shapes."""
    values = {}
    for entry in model["params"] + model["data"]:
        path = os.path.join(data_dir, entry["name"] + ".npy")
        if not os.path.isfile(path):
            raise ModelError(f"{path}: not found")
        v = from_storage(np.load(path), entry["dtype"])
        if list(v.shape) != list(entry["shape"]):
            raise ModelError(f"{path}: shape {list(v.shape)}, expected {list(entry['shape'])}")
        values[entry["name"]] = v
    return values


def rank_slice(model: dict, values: dict, rank: int) -> dict:
    """Inputs as rank `rank` sees them: full parameters and its own rows
    [rank*b, (rank+1)*b) of every data argument."""
    b = model["local_batch"]
    out = {p["name"]: values[p["name"]] for p in model["params"]}
    for d in model["data"]:
        out[d["name"]] = values[d["name"]][rank * b : (rank + 1) * b]
    return out

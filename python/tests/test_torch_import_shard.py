"""Upstream `shard` interop end to end: an exported PyTorch step rewritten with
`shard.grid` / `shard.sharding` / `shard.shard` instead of fsdp layouts,
imported by `fsdp-opt --fsdp-import-shard`, compiled and run by `fsdp-run`."""

import re
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step, load_results, reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

LAYOUT = re.compile(r"fsdp\.layout = #fsdp\.layout<@mesh, \[([^\]]*)\]>, ")


def split_axes(placements: str, rank: int) -> str:
    """`replicate, shard<1>` on a rank-2 tensor -> `[[], [1]]`."""
    dims = [[] for _ in range(rank)]
    for axis, p in enumerate(x.strip() for x in placements.split(",")):
        m = re.fullmatch(r"shard<(\d+)>", p)
        if m:
            dims[int(m.group(1))].append(axis)
    while len(dims) > 1 and not dims[-1]:
        dims.pop()
    return "[" + ", ".join("[" + ", ".join(map(str, d)) + "]" for d in dims) + "]"


def to_shard_form(text: str, mesh_shape, frozen=()) -> str:
    """fsdp layouts -> one shard.sharding + shard.shard per parameter; the
    arguments in `frozen` (indices) are marked fsdp.frozen."""
    text = re.sub(
        r"fsdp\.mesh @mesh \[[^\]]*\]",
        f"shard.grid @mesh(shape = {'x'.join(map(str, mesh_shape))})",
        text,
    )
    annotations = []
    for m in re.finditer(r"%arg(\d+): (tensor<([^>]*)>) \{" + LAYOUT.pattern, text):
        arg, ty, shape = m.group(1), m.group(2), m.group(3)
        rank = len(shape.split("x")) - 1
        annotations.append(
            f"    %s{arg} = shard.sharding @mesh split_axes = {split_axes(m.group(4), rank)}"
            f" : !shard.sharding\n"
            f"    %sh{arg} = shard.shard %arg{arg} to %s{arg} annotate_for_users : {ty}\n"
        )
    text = LAYOUT.sub("", text)
    for arg in frozen:
        text = re.sub(rf"(%arg{arg}: tensor<[^>]*> )\{{", r"\1{fsdp.frozen, ", text, count=1)
    head, body = text.split(") {\n", 1)
    return head + ") {\n" + "".join(annotations) + body


@pytest.mark.parametrize(
    "mesh,placement,frozen",
    [("2x2", None, False), ("4", {r".*\.weight": "shard<1>"}, False), ("2x2", None, True)],
)
def test_shard_annotations_round_trip(tmp_path, mesh, placement, frozen):
    """With `frozen`, the first layer's weight is frozen (requires_grad=False)
    and marked fsdp.frozen in the shard form: it gets its layout and no
    gradient."""
    torch.manual_seed(8)
    module = T.MLP((6, 8, 3))
    if frozen:
        module.layers[0].weight.requires_grad_(False)
    g = torch.Generator().manual_seed(9)
    batch = (torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g))
    out = tmp_path / "mlp"
    model = export_step(
        module, T.mse_loss, batch, str(out), mesh=mesh, placement=placement, units=[torch.nn.Linear]
    )
    # fsdp-opt prints the exported step's mesh in the fsdp dialect's own form.
    printed = subprocess.run(
        [T.tool("fsdp-opt"), str(out / "step.mlir")], check=True, capture_output=True, text=True
    ).stdout
    frozen_args = [i for i, p in enumerate(model["params"]) if p["frozen"]]
    assert len(frozen_args) == int(frozen)
    upstream = to_shard_form(printed, model["mesh"]["shape"], frozen_args)
    assert "fsdp.layout" not in upstream and "fsdp.mesh" not in upstream
    (out / "step.mlir").write_text(upstream)
    names = ",".join(model["mesh"]["axes"])
    imported = subprocess.run(
        [T.tool("fsdp-opt"), str(out / "step.mlir"), f"--fsdp-import-shard=axis-names={names}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # The imported step carries the layouts the exporter wrote.
    for p in model["params"]:
        assert f'fsdp.layout = {p["layout_attr"]}, fsdp.name = "{p["name"]}"' in imported
    assert "shard." not in imported
    (out / "step.mlir").write_text(imported)
    loss, grads = load_results(T.compile_and_run(str(out), model["config"]["pipeline"]), module)
    ref_loss, ref_grads = reference(module, T.mse_loss, batch)
    errors = T.max_rel_errors(loss, grads, ref_loss, ref_grads)
    assert max(errors.values()) <= 1e-5, errors

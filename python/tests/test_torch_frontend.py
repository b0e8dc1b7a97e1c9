"""PyTorch frontend without the project's tools: options, units, placements,
bad input, and the decompositions that replace torch-mlir's scatters."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_models as T  # noqa: E402

from fsdp_mlir.torch import (  # noqa: E402
    ExportError,
    assign_units,
    export_step,
    load_results,
    parse_placement,
)
from fsdp_mlir.torch import decompositions as D  # noqa: E402
from fsdp_mlir.torch.__main__ import main as cli  # noqa: E402

aten = torch.ops.aten


def close(a, b, tol=1e-12):
    a, b = a.double(), b.double()
    return float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


# ------------------------------------------------------------------ units


def test_units_by_class_regex_and_callable():
    gpt = T.GPT(blocks=2)
    by_class = assign_units(gpt, [T.Block])
    assert by_class["blocks.0.attn.qkv.weight"] == "blocks.0"
    assert by_class["blocks.1.out.bias"] == "blocks.1"
    assert by_class["tok.weight"] == by_class["ln_f.bias"] == "root"
    assert assign_units(gpt, r"blocks\.\d+") == by_class
    # Nested units: the innermost one holds a parameter (FSDP2 applies
    # fully_shard bottom-up).
    nested = assign_units(gpt, [T.Block, T.CausalSelfAttention])
    assert nested["blocks.0.attn.proj.weight"] == "blocks.0.attn"
    assert nested["blocks.0.fc.weight"] == "blocks.0"
    by_fn = assign_units(gpt, lambda path, mod: isinstance(mod, nn.LayerNorm))
    assert by_fn["blocks.1.ln2.weight"] == "blocks.1.ln2"
    assert by_fn["head.weight"] == "root"
    assert set(assign_units(gpt, None).values()) == {"root"}
    with pytest.raises(ExportError, match="units: expected module classes or path regexes"):
        assign_units(gpt, [3])


def test_placement_parsing():
    assert parse_placement("replicate") == {"kind": "replicate"}
    assert parse_placement("shard<1>") == {"kind": "shard", "dim": 1}
    assert parse_placement("Shard(0)") == {"kind": "shard", "dim": 0}
    assert parse_placement("strided_shard<0, 2>") == {"kind": "strided_shard", "dim": 0, "sf": 2}
    with pytest.raises(ExportError, match="expected replicate, shard<d> or strided_shard"):
        parse_placement("shard", "w")
    with pytest.raises(ExportError, match="'w': the parameter has 1 dim"):
        parse_placement("shard<1>", "w", 1)


def small_mlp():
    torch.manual_seed(0)
    return T.MLP((4, 6, 3)), (torch.randn(8, 4), torch.randn(8, 3))


def test_layouts_in_model_json_and_step(tmp_path):
    module, batch = small_mlp()
    placement = {r"layers\.0\.weight": "shard<1>", r"layers\.1\..*": "replicate"}
    model = export_step(
        module, T.mse_loss, batch, str(tmp_path), mesh="2x2", placement=placement, policy="balanced"
    )
    attrs = {p["name"]: p["layout_attr"] for p in model["params"]}
    assert attrs == {
        "layers.0.weight": "#fsdp.layout<@mesh, [replicate, shard<1>], policy = balanced>",
        "layers.0.bias": "#fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>",
        "layers.1.weight": "#fsdp.layout<@mesh, [replicate, replicate]>",
        "layers.1.bias": "#fsdp.layout<@mesh, [replicate, replicate]>",
    }
    text = (tmp_path / "step.mlir").read_text()
    for name, attr in attrs.items():
        assert f'fsdp.layout = {attr}, fsdp.name = "{name}", fsdp.unit = "root"' in text
    assert '%arg4: tensor<2x4xf32> {fsdp.name = "x"}' in text
    assert 'tensor<6x4xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.layers.0.weight"}' in text
    saved = json.loads((tmp_path / "model.json").read_text())
    assert saved["kind"] == "torch" and saved["args"][-2:] == ["x", "y"]
    assert np.array_equal(np.load(tmp_path / "x.npy"), batch[0].numpy())
    assert np.array_equal(
        np.load(tmp_path / "layers.0.weight.npy"), module.layers[0].weight.detach().numpy()
    )
    # The numpy checker of fsdp_mlir.dev.gen models refuses it with a pointer.
    from fsdp_mlir.dev import check

    assert check.main([str(tmp_path), str(tmp_path)]) == 2


def test_mixed_precision_options_go_to_the_pipeline(tmp_path):
    module, batch = small_mlp()
    model = export_step(
        module, T.mse_loss, batch, None, mesh="2", param_dtype="bf16", reduce_dtype="f32"
    )
    assert model["config"]["pipeline"] == (
        "lower=true all-reduce-loss=true param-dtype=bf16 reduce-dtype=f32"
    )
    with pytest.raises(ExportError, match="param_dtype 'i8'"):
        export_step(module, T.mse_loss, batch, None, mesh="2", param_dtype="i8")


# -------------------------------------------------------------- bad input


def test_batch_that_does_not_split_is_refused():
    module, _ = small_mlp()
    batch = (torch.randn(6, 4), torch.randn(6, 3))
    with pytest.raises(ExportError) as err:
        export_step(module, T.mse_loss, batch, None, mesh="2x4")
    assert str(err.value) == (
        "example_batch: batch size 6 does not split over 8 ranks (mesh 2x4): 6 % 8 = 6; "
        "use a multiple of 8"
    )
    with pytest.raises(ExportError, match="same batch size"):
        export_step(module, T.mse_loss, (torch.randn(8, 4), torch.randn(4, 3)), None, mesh="2")


def test_other_bad_options():
    module, batch = small_mlp()
    with pytest.raises(ExportError, match="mesh '3x'"):
        export_step(module, T.mse_loss, batch, None, mesh="3x")
    with pytest.raises(ExportError, match="policy 'floor'"):
        export_step(module, T.mse_loss, batch, None, policy="floor")
    with pytest.raises(ExportError, match=r"'layers.0.weight' \(6x4\) needs dim 0 divisible"):
        export_step(module, T.mse_loss, batch, None, mesh="4", placement="strided_shard<0, 2>")
    with pytest.raises(ExportError, match="only float32"):
        export_step(module.double(), T.mse_loss, batch, None, mesh="2")


class ErfinvAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(torch.erfinv(torch.tanh(x)))


def test_unsupported_op_names_op_and_submodule(tmp_path, capsys, monkeypatch):
    import shlex
    import subprocess
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    torch.manual_seed(0)
    gpt = T.GPT(blocks=1)
    gpt.blocks[0].attn = ErfinvAttention(16)
    with pytest.raises(ExportError) as err:
        export_step(gpt, T.lm_loss, T.gpt_batch(2), None, mesh="2", units=[T.Block])
    msg = str(err.value)
    first, *rest = msg.splitlines()
    assert first == (
        "unsupported op 'aten.erfinv' in blocks.0.attn: torch-mlir cannot lower it to linalg"
    )
    # The failing stage's input is kept and the printed command reproduces
    # the failure (torch-mlir-opt's own diagnostic).
    assert rest[0].strip() == "the input of this stage is kept; reproduce with:"
    cmd = shlex.split(rest[1])
    assert cmd[0].endswith("torch-mlir-opt") and cmd[1].startswith(str(tmp_path))
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode != 0
    assert "failed to legalize" in rerun.stderr and "erfinv" in rerun.stderr
    # The CLI: one error line, status 2, no stack dump.
    spec = tmp_path / "spec.py"
    spec.write_text(
        "import torch, torch_models as T, test_torch_frontend as F\n"
        "def build():\n"
        "    gpt = T.GPT(blocks=1)\n"
        "    gpt.blocks[0].attn = F.ErfinvAttention(16)\n"
        "    return {'module': gpt, 'loss_fn': T.lm_loss, 'batch': T.gpt_batch(2),\n"
        "            'units': [T.Block]}\n"
    )
    capsys.readouterr()
    assert cli(["export", f"{spec}:build", "--mesh", "2", "-o", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"fsdp_mlir.torch: error: {first}\n")
    assert "reproduce with:" in captured.err and captured.err.count("\n") == len(rest) + 1
    assert not (tmp_path / "o" / "step.mlir").exists()


class Sorter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.sort(self.lin(x), dim=-1).values


def test_sort_and_its_backward_export():
    """sort (torch-mlir: tm_tensor.sort) and its backward, a scatter (which
    crashed torch-mlir's lowering) are decomposed; the step matches eager."""
    if not (T.tool("fsdp-opt") and T.tool("fsdp-run")):
        pytest.skip("fsdp-opt / fsdp-run not built")
    torch.manual_seed(0)
    model = export_step(
        Sorter(), lambda m, x: m(x).pow(2).mean(), (torch.randn(2, 4),), None, mesh=2, verify=True
    )
    assert model["verify"]["rel_err"] <= 1e-5


def test_crashed_lowering_names_the_op(tmp_path, monkeypatch):
    """A torch-mlir-opt that dies on a signal in one of its conversion
    patterns: the error names the op the pattern converts, no crash here."""
    from fsdp_mlir.torch import importer

    # The pipeline query (asked when the step has fsdp operators, as sort's
    # indices are) goes to the real tool; the lowering itself crashes.
    real = importer.torch_mlir_opt()
    fake = tmp_path / "torch-mlir-opt"
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *dump-pass-pipeline*) exec "{real}" "$@";; esac\n'
        'case "$*" in *linalg-on-tensors*|*convert-torch-to-linalg*) '
        "echo 'Stack dump: #3 (anonymous namespace)::ConvertAtenScatterSrcOp' >&2; "
        "kill -SEGV $$;; esac\n"
        'cat "$1"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(importer, "torch_mlir_opt", lambda: str(fake))
    with pytest.raises(ExportError, match=r"unsupported op 'aten\.scatter_src'.*crashed"):
        export_step(Sorter(), lambda m, x: m(x).pow(2).mean(), (torch.randn(2, 4),), None, mesh=2)


def test_load_results_checks_files_and_shapes(tmp_path):
    module, _ = small_mlp()
    np.save(tmp_path / "loss.npy", np.float32(1.5))
    for name, p in module.named_parameters():
        np.save(tmp_path / f"grad.{name}.npy", np.ones(tuple(p.shape), np.float32))
    loss, grads = load_results(str(tmp_path), module)
    assert float(loss) == 1.5 and set(grads) == {n for n, _ in module.named_parameters()}
    assert grads["layers.0.weight"].shape == (6, 4)
    np.save(tmp_path / "grad.layers.1.bias.npy", np.ones((2,), np.float32))
    with pytest.raises(ExportError, match=r"shape \(2,\), but parameter 'layers.1.bias' is \(3,\)"):
        load_results(str(tmp_path), module)
    os.remove(tmp_path / "grad.layers.1.bias.npy")
    with pytest.raises(ExportError, match="no gradient for 'layers.1.bias'"):
        load_results(str(tmp_path), module)


# --------------------------------------------------------- decompositions


def test_embedding_backward_matches_aten():
    g = torch.Generator().manual_seed(0)
    grad = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 7, (3, 5), generator=g)
    for pad in (-1, 2):
        want = aten.embedding_dense_backward(grad, idx, 7, pad, False)
        assert close(D.embedding_dense_backward(grad, idx, 7, pad, False), want)
    with pytest.raises(D.UnsupportedInModel, match="scale_grad_by_freq"):
        D.embedding_dense_backward(grad, idx, 7, -1, True)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss_backward_matches_aten(reduction):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, generator=g, dtype=torch.float64).log_softmax(-1)
    target = torch.tensor([0, 4, 2, -100, 1, 4])
    weight = torch.rand(5, generator=g, dtype=torch.float64)
    for w in (None, weight):
        _, total = aten.nll_loss_forward(x, target, w, reduction, -100)
        grad_out = torch.randn(6) if reduction == 0 else torch.tensor(0.7)
        grad_out = grad_out.double()
        want = aten.nll_loss_backward(grad_out, x, target, w, reduction, -100, total)
        got = D.nll_loss_backward(grad_out, x, target, w, reduction, -100, total)
        assert close(got, want)
    x4 = torch.randn(2, 5, 3, 3, generator=g, dtype=torch.float64)
    t4 = torch.randint(0, 5, (2, 3, 3), generator=g)
    _, total = aten.nll_loss2d_forward(x4, t4, None, reduction, -100)
    grad_out = (torch.randn(2, 3, 3) if reduction == 0 else torch.tensor(0.3)).double()
    want = aten.nll_loss2d_backward(grad_out, x4, t4, None, reduction, -100, total)
    assert close(D.nll_loss2d_backward(grad_out, x4, t4, None, reduction, -100, total), want)


@pytest.mark.parametrize(
    "kernel,stride,padding,ceil_mode,include_pad,divisor",
    [
        (2, 2, 0, False, True, None),
        (3, 2, 1, False, True, None),
        (3, 2, 1, False, False, None),
        (3, 2, 1, True, False, None),
        (2, 1, 0, False, True, 3),
    ],
)
def test_avg_pool2d_backward_matches_aten(kernel, stride, padding, ceil_mode, include_pad, divisor):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 7, 6, generator=g, dtype=torch.float64)
    args = ([kernel] * 2, [stride] * 2, [padding] * 2, ceil_mode, include_pad, divisor)
    out = aten.avg_pool2d(x, *args)
    grad = torch.randn(out.shape, generator=g, dtype=torch.float64)
    want = aten.avg_pool2d_backward(grad, x, *args)
    assert close(D.avg_pool2d_backward(grad, x, *args), want)


def test_max_pool2d_backward_matches_aten():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 7, 6, generator=g, dtype=torch.float64)
    args = ([3, 3], [2, 2], [1, 1], [1, 1], False)
    out, idx = aten.max_pool2d_with_indices(x, *args)
    grad = torch.randn(out.shape, generator=g, dtype=torch.float64)
    want = aten.max_pool2d_with_indices_backward(grad, x, *args, idx)
    assert close(D.max_pool2d_with_indices_backward(grad, x, *args, idx), want)


def test_sdpa_decomposition_matches_torch():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(5, 5, generator=g) > 0.3
    mask.fill_diagonal_(True)
    for kwargs in ({"is_causal": True}, {"attn_mask": mask}, {"scale": 0.3}):
        want = F.scaled_dot_product_attention(q, k, v, **kwargs)
        assert close(D.scaled_dot_product_attention(q, k, v, **kwargs), want, 1e-10)
    with pytest.raises(D.UnsupportedInModel, match="dropout_p"):
        D.scaled_dot_product_attention(q, k, v, dropout_p=0.1)


def test_gelu_decomposition_matches_aten():
    x = torch.linspace(-8, 8, 1001, dtype=torch.float64)
    for approximate in ("tanh", "none"):
        assert close(D.gelu(x, approximate), F.gelu(x, approximate=approximate))
    assert D.GELU_TANH_BETA == pytest.approx((2 / np.pi) ** 0.5, rel=1e-15)


def test_cumsum_decomposition_matches_aten():
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    for dim in (0, 1, -1):
        assert close(D.cumsum(x, dim), torch.cumsum(x, dim))
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]])
    out = D.cumsum(mask, 1)
    assert out.dtype == torch.int64 and torch.equal(out, torch.cumsum(mask, 1))


def test_constant_pad_nd_decomposition_matches_aten():
    x = torch.randn(2, 3, 6, 7, dtype=torch.float64)
    for pad in ([-1, -2, -3, 0], [2, -1, -2, 1], [-1, 3]):
        assert close(D.constant_pad_nd(x, pad, 0.5), aten.constant_pad_nd(x, pad, 0.5))
    assert D.constant_pad_nd(x, [1, 1]) is NotImplemented


@pytest.mark.parametrize(
    "cin, cout, groups, stride, padding, dilation",
    [(4, 4, 4, 1, 1, 1), (4, 8, 4, 2, 2, 1), (6, 6, 6, 1, "same", 2), (4, 6, 2, 1, 0, 1)],
)
def test_grouped_conv2d_matches_torch(cin, cout, groups, stride, padding, dilation):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, cin, 7, 8, dtype=torch.float64, generator=g)
    w = torch.randn(cout, cin // groups, 3, 3, dtype=torch.float64, generator=g)
    b = torch.randn(cout, dtype=torch.float64, generator=g)
    ref = F.conv2d(x, w, b, stride, padding, dilation, groups)
    assert close(D.grouped_conv2d(x, w, b, stride, padding, dilation, groups), ref)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_decomposition_matches_torch(training):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 5, dtype=torch.float64, generator=g)
    w, b = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)
    rm, rv = torch.randn(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64) + 0.5
    out, new_mean, new_var = D.batch_norm_functional(x, rm, rv, w, b, training, 0.1, 1e-5)
    rm2, rv2 = rm.clone(), rv.clone()
    ref = F.batch_norm(x, rm2, rv2, w, b, training, 0.1, 1e-5)
    assert close(out, ref)
    if training:
        assert close(new_mean, rm2) and close(new_var, rv2)
    else:
        assert new_mean is None and new_var is None


def test_as_strided_and_index_put_decompositions_match_aten():
    x = torch.randn(2, 16, dtype=torch.float64)
    assert close(D.as_strided(x, [2, 16, 1, 1], [16, 1, 16, 16]), x.reshape(2, 16, 1, 1))
    assert D.as_strided(x, [2, 8], [16, 2]) is NotImplemented
    src = torch.randn(2, 16, 1, 1, dtype=torch.float64)
    ref = aten.as_strided_scatter(x, src, [2, 16, 1, 1], [16, 1, 1, 1], 0)
    assert close(D.as_strided_scatter(x, src, [2, 16, 1, 1], [16, 1, 1, 1], 0), ref)
    table = torch.randn(9, 3, dtype=torch.float64)
    idx = torch.tensor([[0, 4, 4], [8, -1, 2]])
    vals = torch.randn(2, 3, 3, dtype=torch.float64)
    ref = aten.index_put(table, [idx], vals, True)
    assert close(D.index_put(table, [idx], vals, True), ref)


def test_index_put_without_accumulation_matches_aten():
    """The last write wins for a repeated index, as aten's CPU loop leaves it."""
    g = torch.Generator().manual_seed(0)
    table = torch.randn(6, 3, dtype=torch.float64, generator=g)
    idx = torch.tensor([4, 1, -1, 4])
    vals = torch.randn(4, 3, dtype=torch.float64, generator=g)
    assert torch.equal(D.index_put(table, [idx], vals), aten.index_put(table, [idx], vals))
    perm = torch.randperm(7, generator=g)
    inv = D.index_put(torch.empty_like(perm), [perm], torch.arange(7))
    assert torch.equal(inv[perm], torch.arange(7))
    # Many writers: the last writer of each slot from a sort of the slots.
    idx = torch.randint(-6, 6, (3 * D.PAIRWISE_LAST_WRITER,), generator=g)
    vals = torch.randn(idx.shape[0], 3, dtype=torch.float64, generator=g)
    assert torch.equal(D.index_put(table, [idx], vals), aten.index_put(table, [idx], vals))


# Index forms of advanced indexing: index tensors on leading, inner, trailing
# and separated dims (separated ones put the indexed dims first), broadcast
# index tensors, a 0-d index, repeated and negative indices.
INDEX_PUT_FORMS = [
    ([torch.tensor([1, -1, 1, 0])], (4, 5, 6)),
    ([None, torch.tensor([[0, 2], [2, 4]])], (4, 2, 2, 6)),
    ([None, None, torch.tensor([5, 0, 5])], (4, 5, 3)),
    ([torch.tensor([0, 3, 0]), torch.tensor([1, 1, 1])], (3, 6)),
    ([torch.tensor([0, 3, 0]), None, torch.tensor([1, 1, 1])], (3, 5)),
    ([None, torch.tensor([[1], [1]]), torch.tensor([2, 2, 3])], (4, 2, 3)),
    ([torch.tensor(2)], (5, 6)),
    ([None, torch.tensor([1, 1])], ()),
]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("form", range(len(INDEX_PUT_FORMS)))
def test_index_put_forms_match_aten(form, accumulate):
    """Every form against aten: writes exactly (the last write wins),
    accumulation in float64 (the one-hot product's order is fsdp-opt's loop's,
    checked end to end in test_torch_indexing.py)."""
    g = torch.Generator().manual_seed(form)
    indices, shape = INDEX_PUT_FORMS[form]
    x = torch.randn(4, 5, 6, dtype=torch.float64, generator=g)
    values = torch.randn(shape, dtype=torch.float64, generator=g)
    got = D.index_put(x, indices, values, accumulate)
    ref = aten.index_put(x, indices, values, accumulate)
    assert torch.equal(got, ref) if not accumulate else close(got, ref)


def test_index_put_integer_and_mask_forms_match_aten():
    x = torch.arange(20).reshape(4, 5)
    idx = [torch.tensor([1, 1, 2])]
    for acc, v in ((True, torch.tensor([7])), (False, torch.tensor([[7], [8], [9]]))):
        assert torch.equal(D.index_put(x, idx, v, acc), aten.index_put(x, idx, v, acc))
    y = torch.randn(4, 5, 6, dtype=torch.float64)
    mask = torch.randn(4, 5) > 0
    for acc in (False, True):
        ref = aten.index_put(y, [mask], torch.tensor(2.0, dtype=torch.float64), acc)
        assert close(D.index_put(y, [mask], torch.tensor(2.0, dtype=torch.float64), acc), ref)
    with pytest.raises(D.UnsupportedInModel, match="boolean mask"):
        D.index_put(y, [mask], torch.randn(int(mask.sum()), 6, dtype=torch.float64))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_decompositions_match_aten(dim):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, 6, dtype=torch.float64, generator=g)
    size = list(x.shape)
    size[dim] = 3
    idx = torch.randint(0, x.shape[dim], size, generator=g)
    src = torch.randn(size, dtype=torch.float64, generator=g)
    # aten's CPU scatter writes in order: the last of repeated indices wins.
    assert torch.equal(D.scatter(x, dim, idx, src), aten.scatter(x, dim, idx, src))
    assert torch.equal(D.scatter_value(x, dim, idx, 2.5), aten.scatter(x, dim, idx, 2.5))
    assert close(D.scatter_add(x, dim, idx, src), aten.scatter_add(x, dim, idx, src))
    index = torch.tensor([2, 0, 2])
    source = torch.randn(
        [3 if d == dim % 3 else n for d, n in enumerate(x.shape)], dtype=torch.float64, generator=g
    )
    assert close(
        D.index_add(x, dim, index, source, alpha=0.5), x.index_add(dim, index, source, alpha=0.5)
    )
    assert torch.equal(D.index_copy(x, dim, index, source), x.index_copy(dim, index, source))
    add = D.scatter(x, dim, idx, src, "add")
    assert close(add, aten.scatter(x, dim, idx, src, reduce="add"))
    for reduce in ("sum", "mean"):
        for include_self in (True, False):
            got = D.scatter_reduce(x, dim, idx, src, reduce, include_self)
            ref = aten.scatter_reduce(x, dim, idx, src, reduce, include_self=include_self)
            assert close(got, ref), (reduce, include_self)
    with pytest.raises(D.UnsupportedInModel, match="amax"):
        D.scatter_reduce(x, dim, idx, src, "amax")


def test_histc_matches_aten():
    """Bins as aten's CPU kernel computes them: the maximum in the last bin,
    values outside [min, max] dropped, min == max the data's range."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 4, (37,), generator=g).float()
    assert torch.equal(D.histc(ids, 4, 0, 3), torch.histc(ids, 4, 0, 3))
    x = torch.randn(200, generator=g)
    for bins, lo, hi in ((7, -1.0, 1.3), (10, 0, 0), (3, 0.1, 0.1000001)):
        assert torch.equal(D.histc(x, bins, lo, hi), torch.histc(x, bins, lo, hi)), (bins, lo, hi)
    assert torch.equal(D.histc(torch.ones(5), 3), torch.histc(torch.ones(5), 3))


def test_sort_and_topk_match_aten():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 4, (3, 16), generator=g)
    values, indices = D.sort(ids, -1)
    ref = torch.sort(ids, stable=True, dim=-1)
    assert torch.equal(values, ref.values) and torch.equal(indices, ref.indices)
    x = torch.randn(5, 9, dtype=torch.float64, generator=g)
    x[1, 3] = float("nan")
    for dim, descending in ((0, False), (1, True), (-1, False)):
        values, indices = D.sort(x, dim, descending)
        ref = torch.sort(x, stable=True, dim=dim, descending=descending)
        assert torch.equal(indices, ref.indices), (dim, descending)
        assert torch.allclose(values, ref.values, equal_nan=True)
    probs = torch.randn(6, 8, dtype=torch.float64, generator=g).softmax(-1)
    for k, dim, largest in ((2, -1, True), (3, 0, False)):
        values, indices = D.topk(probs, k, dim, largest)
        ref = torch.topk(probs, k, dim, largest)
        assert torch.equal(values, ref.values) and torch.equal(indices, ref.indices)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 33, 100])
def test_sort_topk_cumsum_sizes_and_ties_match_aten(n):
    """The bitonic sort on sizes that are and are not powers of two, with
    and without ties: stable sort's indices exactly, topk's values exactly
    and its indices where the values are distinct (aten's std::nth_element
    picks among ties in its own order); the scan's cumsum bitwise (float32
    summed in float64 as aten's CPU kernel does)."""
    g = torch.Generator().manual_seed(n)
    for x in (
        torch.randn(3, n, generator=g),
        torch.randint(0, 4, (3, n), generator=g).float(),
        torch.randint(0, 3, (2, n), generator=g),
    ):
        for descending in (False, True):
            for dim, t in ((-1, x), (0, x.t())):
                for stable in (True, False):
                    values, indices = D.sort(t, dim, descending, stable)
                    ref = torch.sort(t, dim=dim, descending=descending, stable=stable)
                    assert torch.equal(values, ref.values) and torch.equal(indices, ref.indices)
        distinct = x.unique().numel() == x.numel()
        for k in {1, min(3, n), n}:
            for largest in (True, False):
                values, indices = D.topk(x, k, -1, largest)
                ref = torch.topk(x, k, -1, largest)
                assert torch.equal(values, ref.values)
                assert not distinct or torch.equal(indices, ref.indices)
        assert torch.equal(D.cumsum(x, -1), torch.cumsum(x, -1))
        assert torch.equal(D.cumsum(x, 0), torch.cumsum(x, 0))
    offset = torch.randn(2, 4096, generator=g) + 3
    assert torch.equal(D.cumsum(offset, 1), torch.cumsum(offset, 1))


class TiedSorter(nn.Module):
    """A loss whose gradient depends on which position of a tie goes where:
    each output of the layer weighted by its rank in torch.sort(stable=False)
    of its rounded copy (40 columns, 5 distinct values: many ties)."""

    def __init__(self, descending):
        super().__init__()
        self.lin = nn.Linear(4, 40)
        self.descending = descending

    def forward(self, x):
        y = self.lin(x)
        keys = torch.floor(y.detach()).clamp(-2, 2)
        order = torch.sort(keys, dim=-1, descending=self.descending).indices
        return y * order.to(y.dtype)


def test_unstable_sort_orders_ties_by_position():
    """aten.sort with stable=False (the default) gets aten's values and
    indices, ties included: torch's CPU kernel is std::sort (insertion sort
    up to 16 elements, introsort above, whose partitions reorder ties), and
    the step runs the runtime's copy of it (`fsdp.topk_indices {sort}`,
    docs/SEMANTICS.md 5.8); the stable order differs above 16 elements.
    Eagerly for every dtype, then in a compiled step whose gradient depends
    on the order of ties."""
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.int16):
        for n in (5, 16, 17, 100):
            x = torch.randint(0, 3, (4, n), generator=g).to(dtype)
            for descending in (False, True):
                values, indices = D.sort(x, -1, descending)
                ref = torch.sort(x, dim=-1, descending=descending, stable=False)
                stable = torch.sort(x, dim=-1, descending=descending, stable=True)
                assert torch.equal(values, ref.values), (dtype, n, descending)
                assert torch.equal(indices, ref.indices), (dtype, n, descending)
                if n <= 16:
                    assert torch.equal(indices, stable.indices), (dtype, n, descending)
                if n == 100:
                    assert not torch.equal(ref.indices, stable.indices), (dtype, descending)
    # A long 1-D integer tensor sorted ascending: aten's fbgemm radix sort,
    # which is stable (the frontend's stable sort, not std::sort).
    ids = torch.randint(0, 5, (D.RADIX_SORT_MIN,), generator=g)
    _, indices = D.sort(ids)
    assert torch.equal(indices, torch.sort(ids, stable=False).indices)
    assert torch.equal(indices, torch.sort(ids, stable=True).indices)
    # torch.sort(stable=False) traces to aten.sort.stable too: the same.
    assert D.OVERRIDES[torch.ops.aten.sort.stable] is D.sort_stable
    for stable in (False, True, None):
        got = D.sort_stable(x, stable=stable, dim=0, descending=True)
        want = torch.sort(x, stable=bool(stable), dim=0, descending=True)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    if not (T.tool("fsdp-opt") and T.tool("fsdp-run")):
        pytest.skip("fsdp-opt / fsdp-run not built")
    for descending in (False, True):
        torch.manual_seed(1)
        model = export_step(
            TiedSorter(descending),
            lambda m, x: m(x).pow(2).mean(),
            (torch.randn(6, 4) * 3,),
            None,
            mesh=2,
            verify=True,
        )
        flags = "{largest, sort}" if descending else "{sort}"
        assert model["mlir"].count('"fsdp.topk_indices"(') == 1
        assert f") {flags} :" in model["mlir"]
        assert model["verify"]["rel_err"] <= 1e-5, descending


def test_grouped_mm_matches_aten():
    """Rows of `a` in groups (the MoE forward) and the jagged-K form (the
    weight gradient), against aten's CPU grouped matrix product."""
    g = torch.Generator().manual_seed(4)
    a = torch.randn(12, 8, generator=g)  # aten's kernel wants 16-byte strides
    b = torch.randn(3, 8, 4, generator=g)
    offs = torch.tensor([4, 4, 8], dtype=torch.int32)  # group 1 empty, rows 8.. past the end
    ref = torch._grouped_mm(a, b, offs=offs)
    got = D.grouped_mm(a, b, offs=offs)
    assert torch.allclose(got[:8], ref[:8], rtol=1e-6, atol=1e-6)
    assert torch.equal(got[8:], torch.zeros(4, 4))
    c = torch.randn(12, 4, generator=g)
    at = a.t().contiguous()
    ref = torch._grouped_mm(at, c, offs=offs)
    assert torch.allclose(D.grouped_mm(at, c, offs=offs), ref, rtol=1e-6, atol=1e-6)
    assert torch.allclose(D.grouped_mm(b, b.transpose(1, 2)), torch.bmm(b, b.transpose(1, 2)))
    with pytest.raises(D.UnsupportedInModel, match="bias"):
        D.grouped_mm(a, b, offs=offs, bias=torch.zeros(3, 4))


def test_cumsum_keeps_an_integer_dtype():
    """cumsum(..., dtype=int32) is int32 (grouped_mm's offsets must be)."""
    counts = torch.tensor([2.0, 0.0, 5.0])
    out = D.cumsum(counts, 0, dtype=torch.int32)
    assert out.dtype == torch.int32 and torch.equal(out, torch.cumsum(counts, 0, dtype=torch.int32))


def test_value_dependent_shape_names_op_and_submodule():
    """A forward whose shapes depend on values (nonzero) is refused with the
    op and the submodule."""

    class Route(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            return y[y > 0]

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.route = Route()

        def forward(self, x):
            return self.route(x).sum()

    with pytest.raises(ExportError, match=r"aten\.index. in route \([\w.<>]*Route\)"):
        export_step(Net(), lambda m, x: m(x), (torch.randn(2, 4),), None, mesh="1", verify=False)


class ReadsValues(torch.nn.Module):
    """Reads two values from tensors: an int that sizes a slice and a bool
    that picks a branch."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n):
        y = self.lin(x)
        k = int(n[0].sum())
        return y[:, :k].sum() * 2 if bool(y.sum() > 0) else y.sum()


def test_values_read_from_tensors_are_guarded():
    """.item() / bool(t): the step is specialized on the example batch's
    values, and each read becomes a guard (cf.assert with a message naming
    the op, the module, the source line and the value); model.json lists
    them."""
    torch.manual_seed(0)
    x, n = torch.randn(4, 4), torch.tensor([[1, 2]] * 4)
    model = export_step(
        ReadsValues(), lambda m, x, n: m(x, n), (x, n), None, mesh="2", verify=False
    )
    guards = model["guards"]
    assert [g["value"] for g in guards][0] == 3 and len(guards) == 2
    assert guards[0]["module"] == "the root module (ReadsValues)"
    assert "k = int(n[0].sum())" in guards[0]["source"]
    asserts = [ln.strip() for ln in model["mlir"].splitlines() if "cf.assert" in ln]
    assert len(asserts) == 2
    assert asserts[0].startswith("cf.assert %")
    assert (
        asserts[0]
        .split(", ", 1)[1]
        .startswith(
            '"guard failed: aten._local_scalar_dense in the root module '
            "(ReadsValues) (test_torch_frontend.py:"
        )
    )
    assert "read 3 on the example batch" in asserts[0]
    # The guards are not results of the step.
    assert len(model["results"]) == 1 + len(model["params"])


def test_library_reads_are_written_without_them():
    """transformers' check whether the padding mask is all ones (to drop the
    causal mask) is answered without reading it: no guard."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    tokens = torch.randint(0, 32, (2, 8))
    mask = torch.ones_like(tokens)

    def loss_fn(m, tokens, mask):
        return m(input_ids=tokens, attention_mask=mask, labels=tokens).loss

    out = export_step(model, loss_fn, (tokens, mask), None, mesh="2", verify=False)
    assert out["guards"] == []


class MaskSelect(nn.Module):
    """Its forward sizes a tensor by the values of another (y[y > 0])."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y[y > 0].sum()


def test_cli_error_names_op_module_and_command(tmp_path, capsys):
    """An error that keeps no intermediate file (here the trace's) ends with
    the command that reproduces it: the CLI's own, which fails the same way."""
    import shlex
    import subprocess
    import sys

    spec = tmp_path / "spec.py"
    spec.write_text(
        "import torch, test_torch_frontend as F\n"
        "def build():\n"
        "    return {'module': F.MaskSelect(), 'loss_fn': lambda m, x: m(x),\n"
        "            'batch': (torch.randn(2, 4),)}\n"
    )
    argv = ["export", f"{spec}:build", "--mesh", "1", "-o", str(tmp_path / "o"), "--no-verify"]
    assert cli(argv) == 2
    err = capsys.readouterr().err
    first, command = err.strip().split("\n  reproduce with: ")
    assert first.startswith("fsdp_mlir.torch: error: unsupported op 'aten.index")
    assert "in the root module (MaskSelect)" in first
    cmd = shlex.split(command)
    assert cmd[:3] == [sys.executable, "-m", "fsdp_mlir.torch"] and cmd[3:] == argv
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.path.dirname(here)]))
    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=here)
    assert rerun.returncode == 2 and first in rerun.stderr


def test_backward_ops_name_the_module_they_differentiate():
    """The ops of a module's backward carry its path (the autograd nodes its
    forward created), which errors and the step's locations name."""
    from fsdp_mlir.torch import importer
    from fsdp_mlir.torch.export import trace_step

    module = Sorter()
    names = [n for n, _ in module.named_parameters()]
    gm, _ = trace_step(module, lambda m, x: m(x).pow(2).mean(), names, (torch.randn(2, 4),))
    # An op of the forward is named by the forward's modules; one of the
    # backward only, by the modules whose forward it differentiates: the
    # bias gradient's sum (lin), the sort's (a sorting network in the root
    # module's own forward).
    assert importer._where_ops(gm, "aten.mm") == ["lin"]
    assert importer._where_ops(gm, "aten.sum") == ["the backward of lin"]
    assert importer._where_ops(gm, "aten.any") == ["the backward of the root module"]
    # The loss function's own ops and their backward belong to no module.
    assert importer._where_ops(gm, "aten.pow") == ["the loss function or the backward pass"]

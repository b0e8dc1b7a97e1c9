"""Checker: passes exact reference outputs, catches every kind of mismatch."""

import os

import ml_dtypes
import numpy as np
import pytest
from conftest import generate

from fsdp_mlir import model as M
from fsdp_mlir.dev import check
from fsdp_mlir.dev import reference as R

ARGV = ["mlp", "--widths", "8,10,6", "--batch", "2", "--mesh", "2x2"]


@pytest.fixture
def case(tmp_path):
    """(data dir, out dir holding the exact reference outputs, model)."""
    _, data, model = generate(tmp_path, ARGV)
    out = str(tmp_path / "out")
    write_outputs(model, R.reference_from_dir(data), out)
    return data, out, model


def write_outputs(model, results, out):
    os.makedirs(out, exist_ok=True)
    for r in model["results"]:
        np.save(os.path.join(out, r["name"] + ".npy"), M.to_storage(results[r["name"]], r["dtype"]))


def run(data, out, *extra):
    return check.main([data, out, *extra])


def test_exact_outputs_pass(case, capsys):
    data, out, model = case
    assert run(data, out) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "loss: got" in text
    for r in model["results"]:
        assert r["name"] in text


def test_perturbed_gradient_fails(case, capsys):
    data, out, _ = case
    path = os.path.join(out, "grad.l1.weight.npy")
    g = np.load(path)
    g[3, 4] += 1e-3 * np.max(np.abs(g))
    np.save(path, g)
    assert run(data, out) == 1
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("grad.l1.weight"))
    assert "MISMATCH" in line
    assert "FAIL" in text
    other = next(ln for ln in text.splitlines() if ln.startswith("grad.l0.weight"))
    assert other.endswith("ok")


def test_tolerance_is_relative_to_max_abs_reference(case):
    """Error of 0.5 * rtol * max|ref| passes, 2 * rtol * max|ref| fails."""
    data, out, _ = case
    path = os.path.join(out, "grad.l0.bias.npy")
    ref = np.load(path).astype(np.float64)
    scale = np.max(np.abs(ref))
    tiny = int(np.argmin(np.abs(ref)))  # the error lands on the smallest entry
    for factor, rc in ((0.5, 0), (2.0, 1)):
        g = ref.copy()
        g[tiny] += factor * 1e-3 * scale
        np.save(path, g)  # float64 file: accepted, compared as is
        assert run(data, out, "--rtol", "1e-3") == rc, factor
    g = ref.copy()
    g[tiny] += 2e-3 * scale
    np.save(path, g)
    assert run(data, out, "--rtol", "1e-3", "--atol", str(2e-3 * scale)) == 0


def test_missing_file_fails(case, capsys):
    data, out, _ = case
    os.remove(os.path.join(out, "grad.l0.bias.npy"))
    assert run(data, out) == 1
    assert "MISSING" in capsys.readouterr().out


def test_missing_loss_fails_unless_skipped(case):
    data, out, _ = case
    os.remove(os.path.join(out, "loss.npy"))
    assert run(data, out) == 1
    assert run(data, out, "--skip-loss") == 0


def test_wrong_shape_fails(case, capsys):
    data, out, _ = case
    path = os.path.join(out, "grad.l0.weight.npy")
    # The local shard (ceil(10/2) = 5 rows) instead of the gathered gradient.
    np.save(path, np.load(path)[:5])
    assert run(data, out) == 1
    assert "SHAPE 5x8" in capsys.readouterr().out


def test_non_finite_fails(case):
    data, out, _ = case
    path = os.path.join(out, "grad.l1.bias.npy")
    g = np.load(path)
    g[0] = np.nan
    np.save(path, g)
    assert run(data, out, "--rtol", "1e9") == 1


def test_loss_of_one_rank(case):
    data, out, model = case
    values = M.load_inputs(model, data)
    rank1 = R.reference_results(model, values, rank=1)["loss"]
    np.save(os.path.join(out, "loss.npy"), np.float32(rank1))
    assert run(data, out) == 1
    assert run(data, out, "--loss-rank", "1") == 0
    assert run(data, out, "--loss-rank", "4") == 2


def test_unreadable_data_dir(tmp_path, capsys):
    assert run(str(tmp_path / "nope"), str(tmp_path)) == 2
    assert "model.json" in capsys.readouterr().err


def test_bf16_outputs_in_both_encodings(tmp_path):
    _, data, model = generate(tmp_path, ARGV + ["--dtype", "bf16"])
    ref = R.reference_from_dir(data)
    out = str(tmp_path / "out")
    write_outputs(model, ref, out)  # uint16 bit patterns
    assert run(data, out) == 0
    # ml_dtypes' own .npy encoding (|V2) is accepted too.
    path = os.path.join(out, "grad.l0.weight.npy")
    np.save(path, ref["grad.l0.weight"].astype(ml_dtypes.bfloat16))
    assert np.load(path).dtype.kind == "V"
    assert run(data, out) == 0
    # One bf16 step is within the bf16 default tolerance; 10% of max is not.
    g = ref["grad.l0.weight"].copy()
    g[0, 0] += 0.1 * np.max(np.abs(g))
    np.save(path, M.to_storage(g, "bf16"))
    assert run(data, out) == 1


def test_compare_norm():
    ref = np.array([[1.0, -4.0], [0.5, 0.0]])
    got = ref + np.array([[0.0, 0.0], [0.0, 2e-5]])
    res = check.compare(ref, got, rtol=1e-5, atol=0.0)
    assert res["ref_max"] == 4.0 and res["abs_err"] == pytest.approx(2e-5)
    assert res["rel_err"] == pytest.approx(5e-6) and res["ok"]
    assert not check.compare(ref, got, rtol=4e-6, atol=0.0)["ok"]
    zero = np.zeros(3)
    assert check.compare(zero, zero, 1e-5, 0.0)["ok"]
    assert not check.compare(zero, zero + 1e-9, 1e-5, 0.0)["ok"]

"""The mutation fuzzer's own parts: mutations, .npy encodings, verdicts."""

import io
import random
import subprocess

import numpy as np
import pytest

from fsdp_mlir.dev import fuzz


def test_equivalent_npy_encodings_load_as_the_same_array():
    arr = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
    kinds = set()
    for seed in range(60):
        kind, raw = fuzz.equivalent_npy(random.Random(seed), arr)
        kinds.add(kind)
        got = np.load(io.BytesIO(raw))
        assert got.shape == arr.shape, kind
        assert np.array_equal(got, arr), kind
    assert kinds == {"keyorder", "nocomma", "v2", "v3", "fortran", "bigendian", "spaces"}


def test_hostile_npy_changes_the_file():
    buf = io.BytesIO()
    np.save(buf, np.ones((3, 4), np.float32))
    raw = buf.getvalue()
    kinds = set()
    for seed in range(200):
        kind, bad = fuzz.hostile_npy(random.Random(seed), raw)
        kinds.add(kind)
        assert isinstance(bad, bytes)
        if kind not in ("fortran", "headerlen"):
            assert bad != raw, kind
    assert len(kinds) == 10


def test_cases_depend_only_on_the_seed():
    corpus = fuzz.load_corpus([fuzz.ROOT / "test" / "Transforms"])
    assert corpus

    def texts(seed):
        cases = fuzz.opt_cases(random.Random(seed), corpus, 20, fuzz.MODES, 0)
        return [(c.mode, c.argv, c.files["in.mlir"]) for c in cases]

    assert texts(3) == texts(3)
    assert texts(3) != texts(4)


def test_mutations_change_mlir_text():
    text = (
        "fsdp.mesh @mesh [replicate = 2, shard = 4]\n"
        "func.func @f(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, "
        '[replicate, shard<0>]>, fsdp.name = "w"}) -> tensor<8x4xf32> {\n'
        "  return %w : tensor<8x4xf32>\n}\n"
    )
    rng = random.Random(0)
    for mutate in (
        fuzz.mutate_int,
        fuzz.mutate_type,
        fuzz.mutate_placement,
        fuzz.mutate_mesh,
        fuzz.mutate_name,
        fuzz.mutate_lines,
        fuzz.mutate_bytes,
    ):
        assert any(mutate(rng, text) not in (None, text) for _ in range(20)), mutate.__name__


def done(rc, out="", err=""):
    return subprocess.CompletedProcess([], rc, out, err)


@pytest.mark.parametrize(
    "proc, timed_out, kind",
    [
        (done(0), False, None),
        (done(1, err="x.mlir:1:1: error: bad"), False, None),
        (done(1, err="something went wrong"), False, "exit 1 without error:"),
        (done(1, err="fsdp-opt: for the --reduce-dtype option: 'i1' is not one of"), False, None),
        (done(-11), False, "signal SIGSEGV"),
        (done(134, err="LLVM ERROR: out of memory"), False, "exit 134"),
        (done(1, err="error: x\nLLVM ERROR: boom"), False, "exit 1"),
        (done(0), True, "timeout"),
    ],
)
def test_verdicts(tmp_path, proc, timed_out, kind):
    case = fuzz.Case(0, "fsdp-opt", "parse", "")
    verdict = fuzz.judge(case, proc, tmp_path, timed_out, "")
    assert (verdict[0] if verdict else None) == kind


def test_crash_location_is_the_first_project_frame():
    stderr = (
        "Stack dump:\n"
        " #0 0x1 llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) (libLLVM.so+0x1)\n"
        " #3 0x2 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)\n"
        " #4 0x3 void std::vector<fsdp::layout::DimShard>::_M_realloc_insert<>(x) (a+0x1)\n"
        " #5 0x4 fsdp::layout::validate[abi:cxx11](fsdp::layout::Layout const&) (b+0x2)\n"
    )
    assert fuzz.first_frame(stderr) == "fsdp::layout::validate"
    anonymous = (
        " #4 0x1 mlir::Type::getIntOrFloatBitWidth() const (/usr/lib/llvm-22/lib/libMLIR.so+0x1)\n"
        " #5 0x2 (anonymous namespace)::BucketCollectivesPass::runOnOperation() "
        "BucketCollectives.cpp:0:0\n"
        " #6 0x3 main (build/bin/fsdp-opt+0x216bb)\n"
    )
    assert (
        fuzz.first_frame(anonymous)
        == "(anonymous namespace)::BucketCollectivesPass::runOnOperation"
    )
    assert fuzz.first_frame("LLVM ERROR: out of memory\n") == "LLVM ERROR: out of memory"
    assert (
        fuzz.first_frame("terminate called after throwing an instance of 'std::length_error'")
        == "uncaught std::length_error"
    )

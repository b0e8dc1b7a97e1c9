"""NVFP4 (E2M1 data, E4M3 block scales, fp32 global amax) against the model."""

import numpy as np
import pytest

import quant_lib
import quant_ref as ref
from quant_data import (SPECIALS, assert_bytes_equal, assert_values_equal, cast,
                        out_dtype_of, random_values, with_specials)


def block_scaled(rows, cols, seed):
    """16-blocks of very different magnitudes (2^-30 .. 2^0 of the global max),
    so the E4M3 block scales cover normals, denormals and zero."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    exps = rng.integers(-30, 1, rows * cols // 16)
    mult = np.repeat(np.ldexp(np.float32(1.0), exps), 16).astype(np.float32)
    return (x.ravel() * mult).reshape(rows, cols).astype(np.float32)


def cases():
    yield "random", random_values(32 * 64, 1.0, 1).reshape(32, 64), None
    yield "logwide", random_values(16 * 64, 1.0, 2, "logwide").reshape(16, 64), None
    yield "tiny", random_values(8 * 32, 1e-35, 3).reshape(8, 32), None
    yield "huge", random_values(8 * 32, 1e35, 4).reshape(8, 32), None
    yield "specials", with_specials(random_values(16 * 48, 2.0, 5), 6, 5).reshape(16, 48), None
    yield "only_specials", np.resize(SPECIALS, (4, 32)), None
    yield "block_boundaries", block_scaled(16, 128, 7), None
    yield "zeros", np.zeros((4, 32), np.float32), None
    yield "3d", random_values(2 * 3 * 32, 1.0, 8).reshape(2, 3, 32), None
    yield "one_block", random_values(16, 1.0, 9).reshape(1, 16), None
    yield "amax_pow2", random_values(8 * 32, 1.0, 10).clip(-3.9, 3.9).reshape(8, 32), 4.0
    # Caller-supplied global amax values (the all-reduced max of a group).
    for a in (0.0, np.inf, np.nan, 1e-40, 2688.0, 1e30, -1.0):
        yield f"global_amax_{a!r}", random_values(4 * 32, 1.0, 11).reshape(4, 32), a


CASES = list(cases())


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name,values,gamax", CASES, ids=[c[0] for c in CASES])
def test_matches_reference(qlib, dtype, name, values, gamax):
    x = cast(values, dtype)
    rows, cols = ref.rows_cols(x.shape)
    a = qlib.amax(x) if gamax is None else np.float32(gamax)
    q, s = qlib.nvfp4_quantize(x, a)
    q_ref, s_ref = ref.nvfp4_quantize(x, a)
    assert_bytes_equal(s_ref, s, f"{name} block scales")
    assert_bytes_equal(q_ref, q, f"{name} data")
    for out_name in ("f32", "bf16"):
        code, np_dtype = out_dtype_of(out_name)
        y = qlib.nvfp4_dequantize(q, s, rows, cols, a, code)
        y_ref = ref.nvfp4_dequantize(q_ref, s_ref, rows, cols, a)
        assert_values_equal(y_ref.astype(np_dtype), y, f"{name} dequant {out_name}")


def test_packing_by_hand(qlib):
    """amax 2688 gives S_enc = 1; a block with max 6 gets s_b = 1.0 (0x38),
    so codes are the E2M1 values themselves, even element in the low nibble."""
    x = np.zeros((1, 32), np.float32)
    x[0, :8] = [6.0, -6.0, 0.5, 1.0, -1.5, 2.0, 3.0, -4.0]
    x[0, 16] = 0.25  # alone in the second block
    q, s = qlib.nvfp4_quantize(x, 2688.0)
    assert s[0] == 0x38
    assert list(q[:4]) == [0xF7, 0x21, 0x4B, 0xE5]
    assert list(q[4:8]) == [0, 0, 0, 0]
    # 0.25 / 6 = 0.041666 rounds to the E4M3 value 1.375 * 2^-5 = 0.04296875
    # (code 0x13); its encode multiplier 23.27 maps 0.25 to 5.82 -> code 7.
    assert s[1] == 0x13
    assert q[8] == 0x07


def test_not_divisible_is_an_error(qlib):
    with pytest.raises(quant_lib.QuantError) as err:
        qlib.nvfp4_quantize(np.ones((4, 24), np.float32), 1.0)
    assert err.value.status == quant_lib.ERR_SHAPE
    assert "multiple of 16" in err.value.message


def test_global_scale_rules(qlib):
    f = qlib.lib.fsdprt_quant_nvfp4_global_scale
    assert f(2688.0) == 1.0
    assert f(0.0) == 1.0
    assert f(np.inf) == 1.0
    assert f(np.nan) == np.finfo(np.float32).max
    assert f(1e-44) == np.finfo(np.float32).max


def test_transposed_shards_gather_with_swap(qlib):
    """Columnwise (transposed) NVFP4 data gathered along dim 0 and fixed with
    swap_first_dims equals the columnwise quantization of the full tensor
    (same global amax), for the data and the block scales."""
    world, m, n = 4, 32, 48
    full = random_values(world * m * n, 1.0, 12, "logwide").reshape(world * m, n)
    a = qlib.amax(full)
    q_full, s_full = qlib.nvfp4_quantize(np.ascontiguousarray(full.T), a)
    shards = np.split(full, world)
    qs = [qlib.nvfp4_quantize(np.ascontiguousarray(sh.T), a) for sh in shards]
    gathered_q = np.concatenate([p[0] for p in qs])  # [world * n, m/2]
    gathered_s = np.concatenate([p[1] for p in qs])  # [world * n, m/16]
    fixed_q = qlib.swap_first_dims(gathered_q, world, n)
    fixed_s = qlib.swap_first_dims(gathered_s, world, n)
    assert_bytes_equal(q_full, fixed_q, "data")
    assert_bytes_equal(s_full, fixed_s, "scales")


def test_block_scale_follows_te_operation_order(qlib):
    """s_b = e4m3(block_amax * (S_enc * fl(1/6))) (TE) rounds differently from
    the algebraically equal (block_amax * S_enc) / 6 or block_amax * (S_enc / 6)
    when the fp32 value lands next to an E4M3 midpoint. Build blocks whose
    maxima sit there and check the library's scales are TE's."""
    f32 = np.float32
    g = f32(512.309814453125)  # global amax; S_enc = 2688 / g
    s_enc = ref.nvfp4_global_scale(g)
    vals = ref.fp8_decode(np.arange(0x7E, dtype=np.uint8), ref.E4M3).astype(np.float64)
    mids = (vals[:-1] + vals[1:]) / 2
    a0 = (6.0 * mids / float(s_enc)).astype(f32)
    cands = np.concatenate([(a0.view(np.uint32) + np.uint32(d)).view(f32)
                            for d in range(0, 4)] +
                           [(a0.view(np.uint32) - np.uint32(d)).view(f32)
                            for d in range(1, 4)])
    cands = cands[(cands > 0) & (cands < g)]
    with np.errstate(all="ignore"):
        te = ref.fp8_satfinite(cands * (s_enc * (f32(1.0) / f32(6.0))), ref.E4M3)
        other1 = ref.fp8_satfinite((cands * s_enc) / f32(6.0), ref.E4M3)
        other2 = ref.fp8_satfinite(cands * (s_enc / f32(6.0)), ref.E4M3)
    pick = (te != other1) | (te != other2)
    assert np.count_nonzero(pick) >= 8, "no distinguishing block maxima found"
    x = np.zeros((np.count_nonzero(pick) + 1, 16), np.float32)
    x[0, 0] = g
    x[1:, 3] = cands[pick]
    x[1:, 5] = -cands[pick] / 3
    q, s = qlib.nvfp4_quantize(x, g)
    assert_bytes_equal(te[pick], s[1:], "block scales are TE's")
    q_ref, s_ref = ref.nvfp4_quantize(x, g)
    assert_bytes_equal(s_ref, s, "block scales")
    assert_bytes_equal(q_ref, q, "data")


def test_dequantize_uses_te_order(qlib):
    """y = e2m1(q) * ((float(s_b) * amax) * fl(1/2688)), by hand: amax 1,
    s_b = 0x7D (416), code 3 (1.5) -> 1.5 * (416 * fl(1/2688)), which is not
    the correctly rounded (1.5 * 416) / 2688 of the other order."""
    f32 = np.float32
    q = np.array([0x03] + [0] * 7, np.uint8)
    s = np.array([0x7D], np.uint8)
    y = qlib.nvfp4_dequantize(q, s, 1, 16, 1.0)
    c = f32(1.0) / f32(2688.0)
    assert y[0] == f32(1.5) * ((f32(416.0) * f32(1.0)) * c)
    assert y[0] != (f32(1.5) * f32(416.0)) / f32(2688.0)  # the other order

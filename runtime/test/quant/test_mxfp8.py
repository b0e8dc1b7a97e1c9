"""MXFP8 (E4M3 data, E8M0 block exponents) against the numpy model."""

import numpy as np
import pytest

import quant_lib
import quant_ref as ref
from quant_data import (FLT_MAX, SPECIALS, assert_bytes_equal, assert_values_equal,
                        cast, out_dtype_of, random_values, with_specials)


def block_scaled(shape, seed, axis):
    """Data whose consecutive 32-blocks along `axis` differ in magnitude by up
    to 2^±60, so a scale taken from the wrong block shows up."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    nblocks = shape[axis] // 32
    exps = rng.integers(-60, 60, nblocks)
    mult = np.repeat(np.ldexp(np.float32(1.0), exps).astype(np.float32), 32)
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    return (x * mult.reshape(bshape)).astype(np.float32)


def edge_blocks(columnwise):
    """One 32-block per edge case: amax exactly 448*2^k (no rounding up),
    just above it (rounds up), exactly a power of two, e = 0 territory
    (amax <= 448*2^-127), the e = 0xFE end (Inf or FLT_MAX), all zeros,
    NaN inside, a lone denormal."""
    base = np.linspace(-1, 1, 32, dtype=np.float32)
    blocks = []
    for amax in (448.0, 448.0 * 2.0 ** -20, 448.0 * 2.0 ** 30, 1.0, 2.0 ** -100,
                 np.float32(448.0 * 2.0 ** -127), np.float32(1e-37), 3e38,
                 float(FLT_MAX)):
        b = (base * np.float32(amax)).astype(np.float32)
        b[7] = np.float32(amax)
        blocks.append(b)
    b = (base * np.float32(448.0)).astype(np.float32)
    b[3] = np.nextafter(np.float32(448.0), np.float32(np.inf))
    blocks.append(b)
    blocks.append(np.zeros(32, np.float32))
    blocks.append(-np.zeros(32, np.float32))
    b = base.copy()
    b[5] = np.nan
    blocks.append(b)
    b = base.copy()
    b[9] = np.inf
    blocks.append(b)
    b = np.zeros(32, np.float32)
    b[0] = np.float32(1e-45)
    blocks.append(b)
    blocks.append(np.resize(SPECIALS, 32))
    blocks.append(np.full(32, np.nan, np.float32))
    x = np.stack(blocks)  # [nblocks, 32]
    if columnwise:
        return np.ascontiguousarray(x.T)  # blocks run down the columns
    return x.reshape(1, -1)  # one row of consecutive blocks


def cases():
    yield "random_2d", lambda cw: random_values(64 * 96, 1.0, 1).reshape(64, 96)
    yield "logwide", lambda cw: random_values(96 * 64, 1.0, 2, "logwide").reshape(96, 64)
    yield "specials", lambda cw: with_specials(random_values(64 * 64, 5.0, 3), 4,
                                               every=7).reshape(64, 64)
    yield "block_boundaries", lambda cw: block_scaled((64, 128), 5, 0 if cw else 1)
    yield "edges", edge_blocks
    yield "3d", lambda cw: random_values(2 * 32 * 64, 3.0, 6).reshape(2, 32, 64)
    yield "one_block", lambda cw: random_values(32, 1.0, 7).reshape(
        (32, 1) if cw else (1, 32))
    yield "col_odd_width", lambda cw: random_values(32 * 17, 1.0, 8).reshape(
        (32, 17) if cw else (17, 32))


CASES = list(cases())


@pytest.mark.parametrize("columnwise", [False, True], ids=["rowwise", "colwise"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_matches_reference(qlib, columnwise, dtype, name, make):
    x = cast(make(columnwise), dtype)
    rows, cols = ref.rows_cols(x.shape)
    q, e = qlib.mxfp8_quantize(x, columnwise)
    q_ref, e_ref = ref.mxfp8_quantize(x, columnwise)
    assert_bytes_equal(e_ref, e, f"{name} scales")
    assert_bytes_equal(q_ref, q, f"{name} data")
    for out_name in ("f32", "bf16"):
        code, np_dtype = out_dtype_of(out_name)
        y = qlib.mxfp8_dequantize(q, e, rows, cols, columnwise, code)
        y_ref = ref.mxfp8_dequantize(q_ref, e_ref, rows, cols, columnwise)
        assert_values_equal(y_ref.astype(np_dtype), y, f"{name} dequant {out_name}")


def test_edge_exponents_are_as_derived(qlib):
    """Hand-derived exponents for a few blocks (independent of both models)."""
    x = np.zeros((1, 5 * 32), np.float32)
    x[0, 0] = 448.0  # 448/448 = 1 = 2^0 -> 127, no rounding up
    x[0, 32] = np.nextafter(np.float32(448.0), np.float32(np.inf))  # -> 128
    x[0, 64] = 1.0  # 1/448 in (2^-9, 2^-8] -> 127 - 8 = 119
    x[0, 96] = np.inf  # -> 0xFE
    # 160..191 stays zero -> 0
    _, e = qlib.mxfp8_quantize(x, False)
    assert list(e) == [127, 128, 119, 254, 0]


@pytest.mark.parametrize("columnwise", [False, True])
def test_not_divisible_is_an_error(qlib, columnwise):
    x = np.ones((40, 48), np.float32)
    with pytest.raises(quant_lib.QuantError) as err:
        qlib.mxfp8_quantize(x, columnwise)
    assert err.value.status == quant_lib.ERR_SHAPE
    assert "multiple of 32" in err.value.message
    with pytest.raises(quant_lib.QuantError):
        qlib.layout("mxfp8_colwise" if columnwise else "mxfp8_rowwise", (40, 48))


def test_columnwise_shards_concatenate(qlib):
    """Columnwise MXFP8 blocks run along dim 0, so quantizing row shards whose
    size is a multiple of 32 and concatenating equals quantizing the whole."""
    x = random_values(4 * 64 * 48, 1.0, 9, "logwide").reshape(4 * 64, 48)
    q_full, e_full = qlib.mxfp8_quantize(x, True)
    parts = [qlib.mxfp8_quantize(s, True) for s in np.split(x, 4)]
    assert_bytes_equal(q_full, np.concatenate([p[0] for p in parts]), "data")
    assert_bytes_equal(e_full, np.concatenate([p[1] for p in parts]), "scales")

"""Element conversions of the C reference against ml_dtypes.

The fp8 casts are checked through the per-tensor quantizer with the amax that
makes the scale exactly 1 (448 for E4M3, 57344 for E5M2), so whole arrays of
bit patterns go through one call.
"""

import ml_dtypes as mld
import numpy as np
import pytest

import quant_ref as ref
from quant_data import SPECIALS, assert_bytes_equal


def structured_patterns():
    """Every sign/exponent/top-12-mantissa prefix with low bits that make exact
    ties, just-above ties and sticky cases for every rounding position, plus
    random patterns."""
    hi = np.arange(1 << 21, dtype=np.uint32) << np.uint32(11)
    lows = np.array([0x000, 0x001, 0x3FF, 0x400, 0x401, 0x7FF], dtype=np.uint32)
    pats = (hi[:, None] | lows[None, :]).ravel()
    rnd = np.random.default_rng(0).integers(0, 1 << 32, 1 << 20, dtype=np.uint64)
    return np.concatenate([pats, rnd.astype(np.uint32)]).view(np.float32)


@pytest.mark.parametrize("kind", [ref.E4M3, ref.E5M2], ids=["e4m3", "e5m2"])
def test_fp8_cast_all_patterns(qlib, kind):
    x = np.concatenate([structured_patterns(), SPECIALS])
    q, scale_inv = qlib.fp8_tensor_quantize(x, ref.FP8_MAX[kind], kind)
    assert scale_inv == 1.0
    assert_bytes_equal(ref.fp8_satfinite(x, kind), q, f"fp8 kind {kind}")


@pytest.mark.parametrize("kind", [ref.E4M3, ref.E5M2], ids=["e4m3", "e5m2"])
def test_fp8_cast_every_bf16_value(qlib, kind):
    x = np.arange(1 << 16, dtype=np.uint16).view(mld.bfloat16)
    q, _ = qlib.fp8_tensor_quantize(x, ref.FP8_MAX[kind], kind)
    assert_bytes_equal(ref.fp8_satfinite(x.astype(np.float32), kind), q, "bf16 -> fp8")


@pytest.mark.parametrize("kind", [ref.E4M3, ref.E5M2], ids=["e4m3", "e5m2"])
def test_fp8_decode_every_code(qlib, kind):
    codes = np.arange(256, dtype=np.uint8)
    got = np.array([qlib.lib.fsdprt_quant_fp8_to_float(int(c), kind) for c in codes],
                   dtype=np.float32)
    want = ref.fp8_decode(codes, kind)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert_bytes_equal(want[~nan], got[~nan], "fp8 decode")


def test_e2m1_cast(qlib):
    rng = np.random.default_rng(1)
    grid = np.arange(-7.0, 7.0, 0.125, dtype=np.float32)  # every midpoint
    x = np.concatenate([grid, np.nextafter(grid, np.float32(np.inf)),
                        np.nextafter(grid, np.float32(-np.inf)),
                        rng.standard_normal(20000).astype(np.float32) * 4,
                        structured_patterns()[::997], SPECIALS])
    got = np.array([qlib.lib.fsdprt_quant_float_to_e2m1(float(v)) for v in x],
                   dtype=np.uint8)
    assert_bytes_equal(ref.e2m1_satfinite(x), got, "e2m1")
    codes = np.arange(16, dtype=np.uint8)
    dec = np.array([qlib.lib.fsdprt_quant_e2m1_to_float(int(c)) for c in codes],
                   dtype=np.float32)
    assert_bytes_equal(ref.e2m1_decode(codes), dec, "e2m1 decode")


def test_e8m0_round_up(qlib):
    pats = structured_patterns()[::251]
    pats = pats[~np.isnan(pats)]
    # Powers of two, their neighbours, the denormal boundary 2^-127.
    p2 = np.ldexp(np.float32(1.0), np.arange(-149, 128)).astype(np.float32)
    edge = np.array([np.uint32(0x00400000), np.uint32(0x00400001),
                     np.uint32(0x003FFFFF), np.uint32(0x7F7FFFFF)],
                    dtype=np.uint32).view(np.float32)
    x = np.abs(np.concatenate([pats, p2, np.nextafter(p2, np.float32(np.inf)),
                               np.nextafter(p2, np.float32(0)), edge,
                               np.array([0.0, np.inf, np.nan], dtype=np.float32)]))
    got = np.array([qlib.lib.fsdprt_quant_float_to_e8m0(float(v)) for v in x],
                   dtype=np.uint8)
    assert_bytes_equal(ref.e8m0_round_up(x), got, "e8m0")


def test_bf16_cast(qlib):
    x = structured_patterns()[::101]
    got = np.array([qlib.lib.fsdprt_quant_float_to_bf16(float(v)) for v in x],
                   dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        want = x.astype(mld.bfloat16).view(np.uint16)
    nan = np.isnan(x)
    assert np.all((got[nan] & 0x7FFF) > 0x7F80)
    assert_bytes_equal(want[~nan], got[~nan], "bf16")

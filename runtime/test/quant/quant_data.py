"""Test inputs and exact comparisons shared by the quantization tests."""

import ml_dtypes as mld
import numpy as np

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max
FLT_TRUE_MIN = np.float32(np.finfo(np.float32).smallest_subnormal)
BF16_TRUE_MIN = np.uint16(1).view(mld.bfloat16).astype(np.float32)

# Values every format must handle: zeros of both signs, fp32 and bf16
# denormals, NaN of both signs, infinities, values at and around the fp8
# saturation points, the extremes of fp32.
SPECIALS = np.array([
    0.0, -0.0, FLT_TRUE_MIN, -FLT_TRUE_MIN, BF16_TRUE_MIN, -BF16_TRUE_MIN,
    np.float32(1e-39), np.float32(-1.1754942e-38), np.nan, -np.nan, np.inf, -np.inf,
    448.0, -448.0, 449.0, 464.0, -464.0, 465.0, 480.0, 57344.0, 61440.0, -61441.0,
    6.0, 5.0, 7.0, 1e30, -1e30, FLT_MAX, -FLT_MAX, 1.0, -1.0, 0.5,
], dtype=np.float32)


def random_values(n, scale, seed, kind="normal"):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        v = rng.standard_normal(n) * scale
    elif kind == "logwide":  # magnitudes spread over 2^-40 .. 2^40
        v = np.exp2(rng.uniform(-40, 40, n)) * rng.choice([-1.0, 1.0], n) * scale
    elif kind == "uniform":
        v = rng.uniform(-1, 1, n) * scale
    else:
        raise ValueError(kind)
    return v.astype(np.float32)


def with_specials(v, seed, every=11):
    """Copy of v with SPECIALS written at spread-out positions."""
    v = v.copy()
    rng = np.random.default_rng(seed)
    pos = np.arange(0, v.size, every)
    v[pos] = rng.choice(SPECIALS, pos.size)
    return v


def cast(v, dtype):
    """float32 -> the test's input dtype ('f32' or 'bf16', RNE)."""
    return v.astype(np.float32) if dtype == "f32" else v.astype(mld.bfloat16)


def assert_bytes_equal(ref, got, what):
    ref = np.ascontiguousarray(ref).view(np.uint8).ravel()
    got = np.ascontiguousarray(got).view(np.uint8).ravel()
    assert ref.size == got.size, f"{what}: size {got.size} != {ref.size}"
    bad = np.nonzero(ref != got)[0]
    if bad.size:
        first = ", ".join(f"[{i}] ref 0x{ref[i]:02x} got 0x{got[i]:02x}" for i in bad[:8])
        raise AssertionError(f"{what}: {bad.size} of {ref.size} bytes differ: {first}")


def assert_values_equal(ref, got, what):
    """Bit-exact except that NaN only has to be NaN (payloads may differ)."""
    ref = np.asarray(ref).ravel()
    got = np.asarray(got).ravel()
    assert ref.dtype == got.dtype and ref.size == got.size, what
    rf, gf = ref.astype(np.float32), got.astype(np.float32)
    nan_ok = np.isnan(rf) & np.isnan(gf)
    word = np.uint32 if ref.dtype == np.float32 else np.uint16
    same = (ref.view(word) == got.view(word)) | nan_ok
    bad = np.nonzero(~same)[0]
    if bad.size:
        first = ", ".join(f"[{i}] ref {rf[i]!r} got {gf[i]!r}" for i in bad[:8])
        raise AssertionError(f"{what}: {bad.size} of {ref.size} values differ: {first}")


def out_dtype_of(name):
    # fsdprt_dtype values (fsdprt_types.h)
    return {"f32": (0, np.float32), "bf16": (3, mld.bfloat16)}[name]

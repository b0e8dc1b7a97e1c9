"""FP8 per-tensor current scaling (E4M3 / E5M2) against the numpy model."""

import numpy as np
import pytest

import quant_ref as ref
from quant_data import (FLT_MAX, SPECIALS, assert_bytes_equal, assert_values_equal,
                        cast, out_dtype_of, random_values, with_specials)

KINDS = [pytest.param(ref.E4M3, id="e4m3"), pytest.param(ref.E5M2, id="e5m2")]
DTYPES = ["f32", "bf16"]


def datasets():
    n = 4099
    yield "normal_1", random_values(n, 1.0, 1)
    for s in (1e-30, 1e-6, 1e4, 1e30):
        yield f"normal_{s:g}", random_values(n, s, 2)
    yield "logwide", random_values(n, 1.0, 3, "logwide")
    yield "specials", with_specials(random_values(n, 3.0, 4), 5)
    yield "only_specials", SPECIALS.copy()
    yield "zeros", np.zeros(100, np.float32)
    yield "neg_zeros", -np.zeros(100, np.float32)
    yield "denormals", (np.arange(1, 200, dtype=np.uint32) * 12345).view(np.float32)
    yield "amax_pow2", np.concatenate([random_values(500, 1.0, 6).clip(-7.9, 7.9),
                                       np.float32([8.0, -8.0])])
    yield "amax_pow2_tiny", np.ldexp(random_values(300, 1.0, 7).clip(-1, 1),
                                     -100).astype(np.float32)
    yield "saturating", np.linspace(-70000, 70000, 1001, dtype=np.float32)
    yield "empty", np.zeros(0, np.float32)


DATA = list(datasets())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,values", DATA, ids=[d[0] for d in DATA])
def test_quantize_matches_reference(qlib, kind, dtype, name, values):
    x = cast(values, dtype)
    amax = qlib.amax(x)
    assert amax.tobytes() == ref.amax(x).tobytes(), "local amax"
    q, scale_inv = qlib.fp8_tensor_quantize(x, amax, kind)
    q_ref, si_ref = ref.fp8_tensor_quantize(x, amax, kind)
    assert_bytes_equal(q_ref, q, f"{name} q")
    assert np.float32(scale_inv).tobytes() == si_ref.tobytes(), (scale_inv, si_ref)
    for out_name in ("f32", "bf16"):
        code, np_dtype = out_dtype_of(out_name)
        y = qlib.fp8_tensor_dequantize(q, kind, scale_inv, code)
        y_ref = ref.fp8_tensor_dequantize(q_ref, kind, si_ref).astype(np_dtype)
        assert_values_equal(y_ref, y, f"{name} dequant {out_name}")


# Caller-supplied (all-reduced) amax values, including the special ones.
AMAXES = [0.0, -0.0, np.inf, np.nan, -1.0, 1e-45, 1e-40, 1.0, 3.0, 448.0, 2.0 ** 40,
          float(FLT_MAX)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("amax", AMAXES, ids=[repr(a) for a in AMAXES])
def test_supplied_amax(qlib, kind, amax):
    x = with_specials(random_values(1024, 2.0, 8), 9)
    q, scale_inv = qlib.fp8_tensor_quantize(x, amax, kind)
    q_ref, si_ref = ref.fp8_tensor_quantize(x, np.float32(amax), kind)
    assert_bytes_equal(q_ref, q, f"amax {amax}")
    assert np.float32(scale_inv).tobytes() == si_ref.tobytes()


def test_scale_rules(qlib):
    f = qlib.lib.fsdprt_quant_fp8_scale_from_amax
    for a in (0.0, -0.0, np.inf, np.nan, -5.0):
        assert f(a, ref.E4M3) == 1.0
    assert f(1e-45, ref.E4M3) == FLT_MAX
    assert f(2.0, ref.E4M3) == 224.0
    assert f(2.0, ref.E5M2) == 28672.0


def test_amax_ignores_nan(qlib):
    x = np.array([np.nan, -5.0, 3.0, -np.nan], np.float32)
    assert qlib.amax(x) == 5.0
    assert qlib.amax(np.array([np.nan, np.nan], np.float32)) == 0.0
    assert qlib.amax(np.array([1.0, -np.inf], np.float32)) == np.inf

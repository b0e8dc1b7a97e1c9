"""FP8 blockwise (1x128 and 128x128, power-of-two scales by default)."""

import numpy as np
import pytest

import quant_ref as ref
from quant_data import (assert_bytes_equal, assert_values_equal, cast, out_dtype_of,
                        random_values, with_specials)


def tile_scaled(rows, cols, seed):
    """Every 128-column block of every row (and so every tile) gets its own
    magnitude, 2^-50 .. 2^50."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    e = rng.integers(-50, 50, (rows, -(-cols // 128)))
    mult = np.repeat(np.ldexp(np.float32(1.0), e), 128, axis=1)[:, :cols]
    return (x * mult).astype(np.float32)


SHAPES = [(1, 1), (3, 130), (4, 256), (129, 300), (256, 256), (129, 16), (2, 3, 200)]


def cases():
    for shape in SHAPES:
        n = int(np.prod(shape))
        yield f"random_{shape}", random_values(n, 2.0, n).reshape(shape)
    yield "logwide", random_values(130 * 260, 1.0, 1, "logwide").reshape(130, 260)
    yield "specials", with_specials(random_values(130 * 200, 1.0, 2), 3, 13).reshape(130, 200)
    yield "block_boundaries", tile_scaled(260, 384, 4)
    yield "zeros", np.zeros((130, 130), np.float32)
    yield "amax_pow2", np.concatenate([random_values(127, 1.0, 5).clip(-1.9, 1.9),
                                       [np.float32(2.0)]]).astype(np.float32).reshape(1, 128)
    yield "tiny_block", np.full((1, 128), np.float32(1e-44))


CASES = list(cases())


@pytest.mark.parametrize("block_rows", [1, 128], ids=["1x128", "128x128"])
@pytest.mark.parametrize("pow2", [True, False], ids=["pow2", "exact"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name,values", CASES, ids=[c[0] for c in CASES])
def test_matches_reference(qlib, block_rows, pow2, dtype, name, values):
    x = cast(values, dtype)
    rows, cols = ref.rows_cols(x.shape)
    q, s = qlib.fp8_block_quantize(x, block_rows, pow2)
    q_ref, s_ref = ref.fp8_block_quantize(x, block_rows, pow2)
    assert_bytes_equal(s_ref, s, f"{name} scale_inv")
    assert_bytes_equal(q_ref, q, f"{name} data")
    if pow2:
        assert np.all(np.frexp(s)[0] == 0.5), "scale_inv not a power of two"
    for out_name in ("f32", "bf16"):
        code, np_dtype = out_dtype_of(out_name)
        y = qlib.fp8_block_dequantize(q, s, rows, cols, block_rows, code)
        y_ref = ref.fp8_block_dequantize(q_ref.reshape(rows, cols), s_ref, rows, cols,
                                         block_rows)
        assert_values_equal(y_ref.astype(np_dtype), y, f"{name} dequant {out_name}")


def test_pow2_scale_by_hand(qlib):
    # amax 3: 448/3 = 149.33 -> 128; scale_inv 1/128.
    x = np.zeros((1, 128), np.float32)
    x[0, 0] = 3.0
    q, s = qlib.fp8_block_quantize(x, 1, True)
    assert s[0] == np.float32(1.0 / 128)
    assert q[0] == ref.fp8_satfinite(np.float32([384.0]), ref.E4M3)[0]  # 3 * 128
    q, s = qlib.fp8_block_quantize(x, 1, False)
    assert s[0] == np.float32(1.0) / (np.float32(448.0) / np.float32(3.0))
    assert q[0] == 0x7E  # 3 * 149.33 = 448


def test_rowwise_shards_concatenate(qlib):
    """1x128 blocks and 128x128 tiles stay inside a shard when the shard's rows
    are a multiple of the block rows: gathering shards = quantizing the whole."""
    x = random_values(4 * 128 * 200, 1.0, 6, "logwide").reshape(4 * 128, 200)
    for block_rows in (1, 128):
        q_full, s_full = qlib.fp8_block_quantize(x, block_rows)
        parts = [qlib.fp8_block_quantize(sh, block_rows) for sh in np.split(x, 4)]
        assert_bytes_equal(q_full, np.concatenate([p[0] for p in parts]), "data")
        assert_bytes_equal(s_full, np.concatenate([p[1] for p in parts]), "scales")

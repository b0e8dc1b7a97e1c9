"""swap_first_dims, wire bytes / layouts and argument errors."""

import numpy as np
import pytest

import quant_lib
import quant_ref as ref
from quant_data import assert_bytes_equal


@pytest.mark.parametrize("d0,d1,inner", [(1, 1, 1), (2, 3, 1), (4, 3, 16), (8, 5, 6),
                                         (3, 7, 40), (16, 9, 2)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_swap_first_dims(qlib, d0, d1, inner, dtype):
    rng = np.random.default_rng(d0 * 100 + d1)
    a = rng.integers(0, 255, d0 * d1 * inner).astype(dtype)
    got = qlib.swap_first_dims(a, d0, d1)
    assert_bytes_equal(ref.swap_first_dims(a, d0, d1), got, "swap")
    # out[x][y] = in[y][x], checked element by element on one case.
    if (d0, d1) == (4, 3):
        v = a.reshape(d0, d1, inner)
        w = got.reshape(d1, d0, inner)
        for x in range(d1):
            for y in range(d0):
                assert np.array_equal(w[x, y], v[y, x])


def test_swap_rejects_overlap(qlib):
    buf = np.zeros(64, np.uint8)
    status = qlib.lib.fsdprt_quant_swap_first_dims(
        buf.ctypes.data, buf.ctypes.data + 8, 2, 2, 8)
    assert status == quant_lib.ERR_INVALID_ARGUMENT
    assert "overlap" in qlib.last_error()


SHAPES = [(4096, 4096), (128, 32), (3, 64, 96), (1024,), (), (5, 4, 160), (0, 64)]


@pytest.mark.parametrize("fmt", list(quant_lib.FORMATS))
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_wire_bytes(qlib, fmt, shape):
    rows, cols = ref.rows_cols(shape)
    blocked_ok = {
        "mxfp8_rowwise": cols % 32 == 0,
        "mxfp8_colwise": rows % 32 == 0,
        "nvfp4": cols % 16 == 0,
        "nvfp4_2d": cols % 16 == 0,
    }.get(fmt, True)
    if not blocked_ok:
        with pytest.raises(quant_lib.QuantError) as err:
            qlib.wire_bytes(fmt, shape)
        assert err.value.status == quant_lib.ERR_SHAPE
        return
    assert qlib.wire_bytes(fmt, shape) == ref.wire_bytes(fmt, shape)
    lay = qlib.layout(fmt, shape)
    assert (lay.rows, lay.cols) == (rows, cols)
    assert lay.data_bytes + lay.scale_bytes + lay.tensor_bytes == ref.wire_bytes(fmt, shape)


def test_layout_names_and_errors(qlib):
    assert qlib.lib.fsdprt_quant_format_name(4) == b"nvfp4"
    assert qlib.lib.fsdprt_quant_format_name(42) is None
    with pytest.raises(quant_lib.QuantError) as err:
        qlib.layout("nvfp4", (-1, 16))
    assert err.value.status == quant_lib.ERR_INVALID_ARGUMENT
    assert qlib.lib.fsdprt_quant_status_string(quant_lib.ERR_SHAPE) == b"shape not divisible by the block"


def test_bad_arguments(qlib):
    x = np.ones(64, np.float32)
    q = np.zeros(64, np.uint8)
    si = np.zeros(1, np.float32)
    L = qlib.lib
    assert L.fsdprt_quant_fp8_tensor_quantize(x.ctypes.data, 9, 64, 1.0, 0,
                                              q.ctypes.data, si.ctypes.data) == 1
    assert "dtype" in qlib.last_error()
    assert L.fsdprt_quant_fp8_tensor_quantize(x.ctypes.data, 0, 64, 1.0, 3,
                                              q.ctypes.data, si.ctypes.data) == 1
    assert L.fsdprt_quant_fp8_tensor_quantize(None, 0, 64, 1.0, 0, q.ctypes.data,
                                              si.ctypes.data) == 1
    assert L.fsdprt_quant_fp8_block_quantize(x.ctypes.data, 0, 1, 64, 7, 1,
                                             q.ctypes.data, si.ctypes.data) == 1
    assert "block_rows" in qlib.last_error()

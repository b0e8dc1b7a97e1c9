"""ctypes binding of libfsdprt_quant's CPU API for the tests.

The library is found through $FSDPRT_QUANT_LIB (or pytest's --quant-lib);
see docs/QUANTIZATION.md.
"""

import ctypes
import os
from pathlib import Path

import ml_dtypes as mld
import numpy as np

F32, BF16 = 0, 3  # fsdprt_dtype values (fsdprt_types.h)
E4M3, E5M2 = 0, 1
# fsdprt_status_t (runtime/include/fsdprt_types.h).
OK, ERR_INVALID_ARGUMENT, ERR_UNSUPPORTED, ERR_BACKEND, ERR_SHAPE = 0, 1, 6, 4, 11
FORMATS = {
    "fp8_e4m3_tensor": 0,
    "fp8_e5m2_tensor": 1,
    "mxfp8_rowwise": 2,
    "mxfp8_colwise": 3,
    "nvfp4": 4,
    "fp8_block_1x128": 5,
    "fp8_block_128x128": 6,
    "nvfp4_2d": 7,
    "fp8_block_1x128_t": 8,
}

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = [
    REPO / "build-quant" / "libfsdprt_quant.so",
    REPO / "build" / "runtime" / "quant" / "libfsdprt_quant.so",
    REPO / "build" / "lib" / "libfsdprt_quant.so",
]


class QuantError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"status {status}: {message}")
        self.status = status
        self.message = message


class Layout(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "rows", "cols", "data_bytes", "scale_rows", "scale_cols", "scale_bytes",
        "tensor_bytes")]


def find_library(explicit=None):
    path = explicit or os.environ.get("FSDPRT_QUANT_LIB")
    if path:
        return Path(path)
    for c in CANDIDATES:
        if c.exists():
            return c
    return None


P = ctypes.c_void_p
SZ = ctypes.c_size_t
I = ctypes.c_int
FL = ctypes.c_float
U8 = ctypes.c_uint8

_SIGNATURES = {
    "fsdprt_quant_status_string": (ctypes.c_char_p, [I]),
    "fsdprt_quant_last_error": (ctypes.c_char_p, []),
    "fsdprt_quant_format_name": (ctypes.c_char_p, [I]),
    "fsdprt_quant_get_layout": (I, [I, P, I, P]),
    "fsdprt_quant_wire_bytes": (I, [I, P, I, P]),
    "fsdprt_quant_float_to_fp8": (U8, [FL, I]),
    "fsdprt_quant_fp8_to_float": (FL, [U8, I]),
    "fsdprt_quant_float_to_e2m1": (U8, [FL]),
    "fsdprt_quant_e2m1_to_float": (FL, [U8]),
    "fsdprt_quant_float_to_e8m0": (U8, [FL]),
    "fsdprt_quant_float_to_bf16": (ctypes.c_uint16, [FL]),
    "fsdprt_quant_bf16_to_float": (FL, [ctypes.c_uint16]),
    "fsdprt_quant_fp8_scale_from_amax": (FL, [FL, I]),
    "fsdprt_quant_block_scale_from_amax": (FL, [FL, I, I]),
    "fsdprt_quant_nvfp4_global_scale": (FL, [FL]),
    "fsdprt_quant_amax": (I, [P, I, SZ, P]),
    "fsdprt_quant_fp8_tensor_quantize": (I, [P, I, SZ, FL, I, P, P]),
    "fsdprt_quant_fp8_tensor_dequantize": (I, [P, SZ, I, FL, P, I]),
    "fsdprt_quant_mxfp8_quantize": (I, [P, I, SZ, SZ, I, P, P]),
    "fsdprt_quant_mxfp8_dequantize": (I, [P, P, SZ, SZ, I, P, I]),
    "fsdprt_quant_nvfp4_quantize": (I, [P, I, SZ, SZ, FL, P, P]),
    "fsdprt_quant_nvfp4_2d_quantize": (I, [P, I, SZ, SZ, FL, P, P]),
    "fsdprt_quant_nvfp4_dequantize": (I, [P, P, SZ, SZ, FL, P, I]),
    "fsdprt_quant_fp8_block_1x128_t_quantize": (I, [P, I, SZ, SZ, I, P, P]),
    "fsdprt_quant_fp8_block_1x128_t_dequantize": (I, [P, P, SZ, SZ, P, I]),
    "fsdprt_quant_fp8_block_quantize": (I, [P, I, SZ, SZ, I, I, P, P]),
    "fsdprt_quant_fp8_block_dequantize": (I, [P, P, SZ, SZ, I, P, I]),
    "fsdprt_quant_swap_first_dims": (I, [P, P, SZ, SZ, SZ]),
    "fsdprt_quant_quantize": (I, [I, P, I, SZ, SZ, FL, P, P, P]),
    "fsdprt_quant_dequantize": (I, [I, P, P, FL, SZ, SZ, P, I]),
    "fsdprt_quant_cuda_available": (I, []),
}


def _ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _dtype_code(x):
    if x.dtype == np.float32:
        return F32
    if x.dtype == mld.bfloat16:
        return BF16
    raise TypeError(f"unsupported dtype {x.dtype}")


def _out_array(n, out_dtype):
    return np.empty(n, dtype=np.float32 if out_dtype == F32 else mld.bfloat16)


def rows_cols(shape):
    shape = tuple(shape)
    if not shape:
        return 1, 1
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


class QuantLib:
    def __init__(self, path):
        self.path = str(path)
        self.lib = ctypes.CDLL(self.path)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype = res
            fn.argtypes = args

    def __getattr__(self, name):
        return getattr(self.lib, "fsdprt_quant_" + name)

    def last_error(self):
        return self.lib.fsdprt_quant_last_error().decode()

    def _check(self, status):
        if status != OK:
            raise QuantError(status, self.last_error())

    # -- metadata
    def layout(self, fmt, shape):
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        out = Layout()
        self._check(self.lib.fsdprt_quant_get_layout(
            FORMATS[fmt], dims, len(shape), ctypes.byref(out)))
        return out

    def wire_bytes(self, fmt, shape):
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        out = ctypes.c_uint64()
        self._check(self.lib.fsdprt_quant_wire_bytes(
            FORMATS[fmt], dims, len(shape), ctypes.byref(out)))
        return out.value

    # -- array operations (inputs: float32 or ml_dtypes.bfloat16 arrays)
    def amax(self, x):
        x = np.ascontiguousarray(x)
        out = FL()
        self._check(self.lib.fsdprt_quant_amax(
            _ptr(x), _dtype_code(x), x.size, ctypes.byref(out)))
        return np.float32(out.value)

    def fp8_tensor_quantize(self, x, amax, kind):
        x = np.ascontiguousarray(x)
        q = np.empty(x.size, dtype=np.uint8)
        si = FL()
        self._check(self.lib.fsdprt_quant_fp8_tensor_quantize(
            _ptr(x), _dtype_code(x), x.size, FL(amax), kind, _ptr(q),
            ctypes.byref(si)))
        return q, np.float32(si.value)

    def fp8_tensor_dequantize(self, q, kind, scale_inv, out_dtype=F32):
        q = np.ascontiguousarray(q, dtype=np.uint8)
        y = _out_array(q.size, out_dtype)
        self._check(self.lib.fsdprt_quant_fp8_tensor_dequantize(
            _ptr(q), q.size, kind, FL(scale_inv), _ptr(y), out_dtype))
        return y

    def mxfp8_quantize(self, x, columnwise, rows=None, cols=None):
        x = np.ascontiguousarray(x)
        if rows is None:
            rows, cols = rows_cols(x.shape)
        q = np.empty(max(rows * cols, 1), dtype=np.uint8)
        s = np.empty(max(rows * cols // 32, 1), dtype=np.uint8)
        self._check(self.lib.fsdprt_quant_mxfp8_quantize(
            _ptr(x), _dtype_code(x), rows, cols, int(columnwise), _ptr(q), _ptr(s)))
        return q[:rows * cols], s[:rows * cols // 32]

    def mxfp8_dequantize(self, q, s, rows, cols, columnwise, out_dtype=F32):
        q = np.ascontiguousarray(q, dtype=np.uint8)
        s = np.ascontiguousarray(s, dtype=np.uint8)
        y = _out_array(rows * cols, out_dtype)
        self._check(self.lib.fsdprt_quant_mxfp8_dequantize(
            _ptr(q), _ptr(s), rows, cols, int(columnwise), _ptr(y), out_dtype))
        return y

    def nvfp4_quantize(self, x, global_amax, rows=None, cols=None, two_d=False):
        x = np.ascontiguousarray(x)
        if rows is None:
            rows, cols = rows_cols(x.shape)
        q = np.empty(max(rows * cols // 2, 1), dtype=np.uint8)
        s = np.empty(max(rows * cols // 16, 1), dtype=np.uint8)
        fn = (self.lib.fsdprt_quant_nvfp4_2d_quantize if two_d
              else self.lib.fsdprt_quant_nvfp4_quantize)
        self._check(fn(
            _ptr(x), _dtype_code(x), rows, cols, FL(global_amax), _ptr(q), _ptr(s)))
        return q[:rows * cols // 2], s[:rows * cols // 16]

    def nvfp4_dequantize(self, q, s, rows, cols, global_amax, out_dtype=F32):
        q = np.ascontiguousarray(q, dtype=np.uint8)
        s = np.ascontiguousarray(s, dtype=np.uint8)
        y = _out_array(rows * cols, out_dtype)
        self._check(self.lib.fsdprt_quant_nvfp4_dequantize(
            _ptr(q), _ptr(s), rows, cols, FL(global_amax), _ptr(y), out_dtype))
        return y

    def fp8_block_quantize(self, x, block_rows, pow2=True, transposed_scales=False):
        """transposed_scales: fp8_block_1x128_t (block_rows must be 1)."""
        x = np.ascontiguousarray(x)
        rows, cols = rows_cols(x.shape)
        nbr, nbc = -(-rows // block_rows), -(-cols // 128)
        q = np.empty(max(rows * cols, 1), dtype=np.uint8)
        s = np.empty(max(nbr * nbc, 1), dtype=np.float32)
        if transposed_scales:
            assert block_rows == 1
            self._check(self.lib.fsdprt_quant_fp8_block_1x128_t_quantize(
                _ptr(x), _dtype_code(x), rows, cols, int(pow2), _ptr(q), _ptr(s)))
        else:
            self._check(self.lib.fsdprt_quant_fp8_block_quantize(
                _ptr(x), _dtype_code(x), rows, cols, block_rows, int(pow2), _ptr(q),
                _ptr(s)))
        return q[:rows * cols], s[:nbr * nbc]

    def fp8_block_dequantize(self, q, s, rows, cols, block_rows, out_dtype=F32,
                             transposed_scales=False):
        q = np.ascontiguousarray(q, dtype=np.uint8)
        s = np.ascontiguousarray(s, dtype=np.float32)
        y = _out_array(rows * cols, out_dtype)
        if transposed_scales:
            assert block_rows == 1
            self._check(self.lib.fsdprt_quant_fp8_block_1x128_t_dequantize(
                _ptr(q), _ptr(s), rows, cols, _ptr(y), out_dtype))
        else:
            self._check(self.lib.fsdprt_quant_fp8_block_dequantize(
                _ptr(q), _ptr(s), rows, cols, block_rows, _ptr(y), out_dtype))
        return y

    def quantize_any(self, fmt, x, amax):
        """fsdprt_quant_quantize: (data, scale bytes, per-tensor value)."""
        x = np.ascontiguousarray(x)
        rows, cols = rows_cols(x.shape)
        lay = self.layout(fmt, (rows, cols))
        q = np.empty(max(lay.data_bytes, 1), np.uint8)
        s = np.empty(max(lay.scale_bytes, 1), np.uint8)
        v = FL()
        self._check(self.lib.fsdprt_quant_quantize(
            FORMATS[fmt], _ptr(x), _dtype_code(x), rows, cols, FL(amax), _ptr(q),
            _ptr(s), ctypes.byref(v)))
        return q[:lay.data_bytes], s[:lay.scale_bytes], np.float32(v.value)

    def dequantize_any(self, fmt, q, s, value, rows, cols, out_dtype=F32):
        q = np.ascontiguousarray(q, dtype=np.uint8)
        s = np.ascontiguousarray(s, dtype=np.uint8)
        y = _out_array(rows * cols, out_dtype)
        self._check(self.lib.fsdprt_quant_dequantize(
            FORMATS[fmt], _ptr(q), _ptr(s), FL(value), rows, cols, _ptr(y),
            out_dtype))
        return y

    def swap_first_dims(self, a, d0, d1):
        a = np.ascontiguousarray(a)
        out = np.empty_like(a)
        inner = a.nbytes // (d0 * d1) if d0 * d1 else 0
        self._check(self.lib.fsdprt_quant_swap_first_dims(
            _ptr(a), _ptr(out), d0, d1, inner))
        return out

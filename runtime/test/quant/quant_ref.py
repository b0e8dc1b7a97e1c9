"""Independent numpy + ml_dtypes model of the quantization formats.

Written from the formulas in docs/QUANTIZATION.md (and docs/SEMANTICS.md §8),
which are TransformerEngine's (TE) formulas in TE's fp32 operation order,
not from the C++ code: element casts are ml_dtypes' round-to-nearest-even
conversions (float8_e4m3fn, float8_e5m2, float4_e2m1fn) applied after
clipping to the largest finite value; the E8M0 exponent is the smallest power
of two not below the value, computed with frexp; all other arithmetic is
numpy float32, in the order the formulas state.
"""

import ml_dtypes as mld
import numpy as np

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max
E4M3, E5M2 = 0, 1
FP8_MAX = {E4M3: F32(448.0), E5M2: F32(57344.0)}
FP8_DTYPE = {E4M3: mld.float8_e4m3fn, E5M2: mld.float8_e5m2}
BF16_MAX = F32(mld.finfo(mld.bfloat16).max)


def as_f32(x):
    """float32 view of an input array (bf16 is widened exactly)."""
    x = np.asarray(x)
    if x.dtype == mld.bfloat16:
        return x.astype(np.float32)
    assert x.dtype == np.float32, x.dtype
    return x


def amax(x):
    """max |x| ignoring NaN; 0 for an empty or all-NaN tensor."""
    a = np.abs(as_f32(x)).ravel()
    return F32(np.fmax.reduce(a, initial=F32(0)))


# ---- element conversions ----------------------------------------------------

def fp8_satfinite(v, kind):
    """Saturating RNE cast to fp8 bytes; NaN -> 0x7F."""
    v = np.asarray(v, dtype=np.float32)
    mx = FP8_MAX[kind]
    with np.errstate(invalid="ignore"):  # NaN casts; fixed up below
        out = np.clip(v, -mx, mx).astype(FP8_DTYPE[kind]).view(np.uint8).copy()
    out[np.isnan(v)] = 0x7F
    return out


def fp8_decode(b, kind):
    return np.asarray(b, dtype=np.uint8).view(FP8_DTYPE[kind]).astype(np.float32)


def e2m1_satfinite(v):
    """Saturating RNE cast to E2M1 codes (low nibble); NaN -> 0x7 (+6)."""
    v = np.asarray(v, dtype=np.float32)
    six = F32(6.0)
    with np.errstate(invalid="ignore"):  # NaN casts; fixed up below
        codes = np.clip(v, -six, six).astype(mld.float4_e2m1fn).view(np.uint8) & 0xF
    codes = codes.copy()
    codes[np.isnan(v)] = 0x7
    return codes


def e2m1_decode(codes):
    return (np.asarray(codes, dtype=np.uint8) & 0xF).view(mld.float4_e2m1fn).astype(
        np.float32)


def e8m0_round_up(v):
    """Smallest e in [0, 254] with 2^(e-127) >= |v|; NaN -> 255, 0 -> 0."""
    v64 = np.abs(np.asarray(v, dtype=np.float32).astype(np.float64))
    out = np.zeros(v64.shape, dtype=np.uint8)
    nan, inf, zero = np.isnan(v64), np.isinf(v64), v64 == 0
    finite = ~(nan | inf | zero)
    m, e = np.frexp(v64[finite])  # v = m * 2^e, m in [0.5, 1)
    k = np.where(m == 0.5, e - 1, e)  # exact powers of two need no rounding
    out[finite] = np.clip(k + 127, 0, 254)
    out[nan] = 255
    out[inf] = 254
    return out


def e8m0_decode(e):
    return np.asarray(e, dtype=np.uint8).view(mld.float8_e8m0fnu).astype(np.float32)


def pow2_floor(s):
    """Largest power of two <= s (s positive, normal)."""
    s = np.asarray(s, dtype=np.float32)
    _, e = np.frexp(s)
    return np.ldexp(F32(1.0), e - 1).astype(np.float32)


# ---- scales ---------------------------------------------------------------------

def scale_from_amax(a, fp8_max, value_for_inf=FLT_MAX):
    """fp8_max / amax; 1 for amax 0, negative, Inf or NaN; Inf -> value_for_inf
    (TE: FLT_MAX per tensor, the input type's max for blockwise scales)."""
    a = np.asarray(a, dtype=np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = F32(fp8_max) / a
    s = np.where(np.isinf(s), F32(value_for_inf), s)
    s = np.where((a > 0) & ~np.isinf(a), s, F32(1.0))
    return s.astype(np.float32)


def nvfp4_global_scale(a):
    a = F32(a)
    if a < 0:
        a = F32(0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = np.fmin(F32(448.0 * 6.0) / a, FLT_MAX)
    if a == 0 or s == 0:
        return F32(1.0)
    return F32(s)


# ---- formats --------------------------------------------------------------------

def rows_cols(shape):
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def fp8_tensor_quantize(x, amax_value, kind):
    x = as_f32(x).ravel()
    s = scale_from_amax(amax_value, FP8_MAX[kind])
    with np.errstate(over="ignore", invalid="ignore"):
        q = fp8_satfinite(x * s, kind)
    return q, (F32(1.0) / s).astype(np.float32)


def fp8_tensor_dequantize(q, kind, scale_inv):
    with np.errstate(over="ignore", invalid="ignore"):
        return fp8_decode(q, kind) * F32(scale_inv)


def mxfp8_quantize(x, columnwise):
    x = as_f32(x)
    rows, cols = rows_cols(x.shape)
    x = x.reshape(rows, cols)
    if not columnwise:
        blocks = x.reshape(rows, cols // 32, 32)
        axis = 2
    else:
        blocks = x.reshape(rows // 32, 32, cols)
        axis = 1
    bamax = np.fmax.reduce(np.abs(blocks), axis=axis, initial=F32(0))
    e = e8m0_round_up(bamax / F32(448.0))
    mult = np.ldexp(F32(1.0), 127 - e.astype(np.int32)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        q = fp8_satfinite(blocks * np.expand_dims(mult, axis), E4M3)
    return q.reshape(rows, cols), e


def mxfp8_dequantize(q, e, rows, cols, columnwise):
    vals = fp8_decode(q, E4M3).reshape(rows, cols)
    dec = e8m0_decode(e)
    if not columnwise:
        dec = np.repeat(dec.reshape(rows, cols // 32), 32, axis=1)
    else:
        dec = np.repeat(dec.reshape(rows // 32, cols), 32, axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        return vals * dec


def nvfp4_quantize(x, global_amax, tile_rows=1):
    """TE's order: c = S_enc * fl(1/6); s_b = e4m3(block_amax * c);
    S_dec = 1 / S_enc; inv = fminf(1 / (float(s_b) * S_dec), FLT_MAX).
    tile_rows 16 gives nvfp4_2d: 16x16 blocks, the scale repeated per row."""
    x = as_f32(x)
    rows, cols = rows_cols(x.shape)
    x = x.reshape(rows, cols)
    s_enc = nvfp4_global_scale(global_amax)
    s_dec = F32(1.0) / s_enc
    c = s_enc * (F32(1.0) / F32(6.0))
    tiles = -(-rows // tile_rows)
    padded = np.zeros((tiles * tile_rows, cols), np.float32)
    padded[:rows] = x
    t = np.abs(padded).reshape(tiles, tile_rows, cols // 16, 16)
    bamax = np.fmax.reduce(np.fmax.reduce(t, axis=3, initial=F32(0)), axis=1,
                           initial=F32(0))  # [tiles, cols/16]
    bamax = np.repeat(bamax, tile_rows, axis=0)[:rows].reshape(-1)
    blocks = x.reshape(-1, 16)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        sb = fp8_satfinite(bamax * c, E4M3)
        inv = np.fmin(F32(1.0) / (fp8_decode(sb, E4M3) * s_dec), FLT_MAX)
        codes = e2m1_satfinite(blocks * inv[:, None])
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed.reshape(rows, cols // 2), sb.reshape(rows, cols // 16)


def nvfp4_dequantize(packed, sb, rows, cols, global_amax):
    """TE's dequantize_nvfp4: factor = (float(s_b) * amax) * fl(1/2688) per
    block, then e2m1(q) * factor (a negative amax counts as 0)."""
    packed = np.asarray(packed, dtype=np.uint8).reshape(-1)
    codes = np.empty(packed.size * 2, dtype=np.uint8)
    codes[0::2] = packed & 0xF
    codes[1::2] = packed >> 4
    a = max(F32(global_amax), F32(0)) if not np.isnan(global_amax) else F32(global_amax)
    with np.errstate(over="ignore", invalid="ignore"):
        factor = (fp8_decode(sb, E4M3).reshape(-1) * a) * (F32(1.0) / F32(2688.0))
        return (e2m1_decode(codes) * np.repeat(factor, 16)).reshape(rows, cols)


def fp8_block_quantize(x, block_rows, pow2=True, transposed_scales=False):
    """transposed_scales (1x128 only): scale_inv as [ceil(cols/128), rows]."""
    value_for_inf = BF16_MAX if np.asarray(x).dtype == mld.bfloat16 else FLT_MAX
    x = as_f32(x)
    rows, cols = rows_cols(x.shape)
    x = x.reshape(rows, cols)
    nbr = -(-rows // block_rows)
    nbc = -(-cols // 128)
    q = np.empty((rows, cols), dtype=np.uint8)
    scale_inv = np.empty((nbr, nbc), dtype=np.float32)
    for bi in range(nbr):
        r0, r1 = bi * block_rows, min(rows, (bi + 1) * block_rows)
        for bj in range(nbc):
            c0, c1 = bj * 128, min(cols, (bj + 1) * 128)
            blk = x[r0:r1, c0:c1]
            s = scale_from_amax(amax(blk), FP8_MAX[E4M3], value_for_inf)
            if pow2:
                s = pow2_floor(s)
            scale_inv[bi, bj] = F32(1.0) / s
            with np.errstate(over="ignore", invalid="ignore"):
                q[r0:r1, c0:c1] = fp8_satfinite(blk * s, E4M3)
    if transposed_scales:
        return q, np.ascontiguousarray(scale_inv.T)
    return q, scale_inv


def fp8_block_dequantize(q, scale_inv, rows, cols, block_rows, transposed_scales=False):
    if transposed_scales:
        scale_inv = np.asarray(scale_inv).reshape(-(-cols // 128), rows).T
    vals = fp8_decode(q, E4M3).reshape(rows, cols)
    s = np.repeat(np.repeat(scale_inv, block_rows, axis=0)[:rows], 128, axis=1)[:, :cols]
    with np.errstate(over="ignore", invalid="ignore"):
        return vals * s


def swap_first_dims(a, d0, d1):
    """out[a][b] = in[b][a] for `a` viewed as [d0, d1, rest]."""
    a = np.asarray(a)
    return np.ascontiguousarray(a.reshape(d0, d1, -1).transpose(1, 0, 2))


# ---- wire bytes -------------------------------------------------------------------

def wire_bytes(fmt, shape):
    rows, cols = rows_cols(shape)
    n = rows * cols
    if fmt in ("fp8_e4m3_tensor", "fp8_e5m2_tensor"):
        return n + 4
    if fmt in ("mxfp8_rowwise", "mxfp8_colwise"):
        return n + n // 32
    if fmt in ("nvfp4", "nvfp4_2d"):
        return n // 2 + n // 16 + 4
    if fmt in ("fp8_block_1x128", "fp8_block_1x128_t"):
        return n + 4 * rows * -(-cols // 128)
    if fmt == "fp8_block_128x128":
        return n + 4 * -(-rows // 128) * -(-cols // 128)
    raise ValueError(fmt)

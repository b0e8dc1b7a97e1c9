/*
 * fsdprt_quant.h - quantization formats for compressed parameter all-gathers.
 *
 * Pure C API. The CPU functions are the reference implementation (the
 * specification the CUDA kernels are tested against); docs/QUANTIZATION.md
 * describes every format, its memory layout and the handling of special
 * values (zeros, -0, denormals, NaN, +-Inf, saturation).
 *
 * Conventions shared by all functions:
 *  - Every function that can fail returns fsdprt_status_t, the runtime's
 *    status (fsdprt_types.h): FSDPRT_OK on success; FSDPRT_ERR_INVALID_ARGUMENT
 *    for a null pointer, an unknown enum value or a size that overflows;
 *    FSDPRT_ERR_SHAPE for a blocked dimension that is not a multiple of the
 *    block size; FSDPRT_ERR_UNSUPPORTED for an entry point that is not
 *    available in this build (CUDA kernels without the CUDA toolkit) or on
 *    this machine (no GPU); FSDPRT_ERR_BACKEND when the CUDA runtime reports
 *    an error. The message of the last failure in the calling thread is
 *    fsdprt_quant_last_error().
 *  - A tensor is viewed as a row-major 2-D matrix [rows, cols] with
 *    cols = shape[ndim-1] and rows = product of the other dims (a 1-D tensor
 *    is one row, a scalar is [1, 1]).
 *  - Inputs are fp32 (float) or bf16 (uint16_t bit patterns), selected by a
 *    fsdprt_quant_dtype value; dequantized outputs likewise.
 *  - Quantized data and per-block scales are byte arrays laid out exactly as
 *    they travel on the wire (no padding): see fsdprt_quant_get_layout().
 */
#ifndef FSDPRT_QUANT_H
#define FSDPRT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "fsdprt_types.h"

#if defined(_WIN32)
#define FSDPRT_QUANT_API
#else
#define FSDPRT_QUANT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status -------------------------------------------------------------- */

/* Static name of a status code ("ok", "invalid argument", "shape", ...; the
   runtime's fsdprt_status_string). Never NULL. */
FSDPRT_QUANT_API const char *fsdprt_quant_status_string(fsdprt_status_t status);
/* Message describing the last failed call made by this thread ("" if none). */
FSDPRT_QUANT_API const char *fsdprt_quant_last_error(void);

/* ---- enums --------------------------------------------------------------- */

/* The input and output element types: fsdprt_dtype values. */
typedef enum fsdprt_quant_dtype {
  FSDPRT_QUANT_F32 = FSDPRT_F32,  /* float */
  FSDPRT_QUANT_BF16 = FSDPRT_BF16 /* uint16_t bfloat16 bit pattern */
} fsdprt_quant_dtype;

typedef enum fsdprt_quant_fp8_kind {
  FSDPRT_QUANT_E4M3 = 0, /* OCP float8_e4m3fn, max finite 448 */
  FSDPRT_QUANT_E5M2 = 1  /* OCP float8_e5m2, max finite 57344 */
} fsdprt_quant_fp8_kind;

/* fsdprt_quant_format: fsdprt_types.h. */

/* Sizes of the buffers of one quantized tensor. */
typedef struct fsdprt_quant_layout {
  uint64_t rows, cols;   /* the 2-D view of the shape */
  uint64_t data_bytes;   /* quantized elements */
  uint64_t scale_rows;   /* shape of the per-block scale array (0 x 0 if */
  uint64_t scale_cols;   /* the format has none) */
  uint64_t scale_bytes;  /* scale_rows * scale_cols * element size */
  uint64_t tensor_bytes; /* per-tensor metadata: fp32 scale_inv or amax */
} fsdprt_quant_layout;

/* Layout of `format` for a tensor of `shape` (ndim >= 0 entries, each >= 0).
   Fails with FSDPRT_ERR_SHAPE if the shape cannot be blocked. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_get_layout(
    int format, const int64_t *shape, int ndim, fsdprt_quant_layout *layout);
/* Bytes on the wire for one tensor: data + scales + per-tensor metadata. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_wire_bytes(int format,
                                                         const int64_t *shape,
                                                         int ndim,
                                                         uint64_t *bytes);
/* Short name of a format ("fp8_e4m3_tensor", "mxfp8_rowwise", ...); NULL if
   unknown. */
FSDPRT_QUANT_API const char *fsdprt_quant_format_name(int format);

/* ---- scalar conversions (exposed for tests and callers) ------------------ */

/* Round-to-nearest-even with saturation to the largest finite value (Inf
   saturates too); NaN becomes the canonical NaN 0x7F; the sign of zero and of
   values that underflow to zero is kept. kind: fsdprt_quant_fp8_kind. */
FSDPRT_QUANT_API uint8_t fsdprt_quant_float_to_fp8(float x, int kind);
FSDPRT_QUANT_API float fsdprt_quant_fp8_to_float(uint8_t bits, int kind);
/* E2M1 code (low 4 bits), RNE with saturation to +-6; NaN -> +6 (0x7). */
FSDPRT_QUANT_API uint8_t fsdprt_quant_float_to_e2m1(float x);
FSDPRT_QUANT_API float fsdprt_quant_e2m1_to_float(uint8_t code);
/* E8M0 exponent of v rounded up (TransformerEngine's float_to_e8m0):
   NaN -> 0xFF, +-Inf -> 0xFE, 0 -> 0x00. */
FSDPRT_QUANT_API uint8_t fsdprt_quant_float_to_e8m0(float v);
FSDPRT_QUANT_API uint16_t
fsdprt_quant_float_to_bf16(float x); /* RNE, NaN stays NaN */
FSDPRT_QUANT_API float fsdprt_quant_bf16_to_float(uint16_t bits);

/* Per-tensor FP8 scale: fp8_max / amax; amax 0, Inf or NaN (or negative) ->
   1; an infinite quotient -> FLT_MAX. */
FSDPRT_QUANT_API float fsdprt_quant_fp8_scale_from_amax(float amax, int kind);
/* Blockwise FP8 scale of an input of `dtype`: 448 / amax with the rules
   above, except that an infinite quotient becomes the input type's largest
   finite value (bf16: 0x7F7F = 3.3895e38, fp32: FLT_MAX), as TE does; then
   (if pow2 != 0) the mantissa bits are cleared, rounding the scale down to a
   power of two. */
FSDPRT_QUANT_API float fsdprt_quant_block_scale_from_amax(float amax, int pow2,
                                                          int dtype);
/* NVFP4 global encode scale S_enc = 448*6 / amax clamped to FLT_MAX (fminf:
   a NaN amax gives FLT_MAX); 1 if amax is 0 or S_enc is 0 (amax Inf). */
FSDPRT_QUANT_API float fsdprt_quant_nvfp4_global_scale(float amax);

/* ---- CPU reference ------------------------------------------------------- */

/* Largest |x| over n elements; NaN elements are ignored (fmaxf), so the
   result is in [0, +Inf]. n == 0 gives 0. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_amax(const void *x, int dtype,
                                                   size_t n, float *amax);

/* FP8 per-tensor current scaling. `amax` is the already all-reduced amax.
   q[i] = fp8(x[i] * scale); *scale_inv = 1 / scale. */
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_fp8_tensor_quantize(const void *x, int dtype, size_t n, float amax,
                                 int kind, uint8_t *q, float *scale_inv);
/* y[i] = float(q[i]) * scale_inv, written as out_dtype. */
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_fp8_tensor_dequantize(const uint8_t *q, size_t n, int kind,
                                   float scale_inv, void *y, int out_dtype);

/* MXFP8. columnwise = 0: blocks of 32 along cols; 1: blocks of 32 rows.
   scales: one E8M0 byte per block (layout in fsdprt_quant_format). */
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_mxfp8_quantize(const void *x, int dtype, size_t rows, size_t cols,
                            int columnwise, uint8_t *q, uint8_t *scales);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_mxfp8_dequantize(
    const uint8_t *q, const uint8_t *scales, size_t rows, size_t cols,
    int columnwise, void *y, int out_dtype);

/* NVFP4 with the all-reduced global amax. q: rows*cols/2 bytes, scales:
   rows*cols/16 E4M3 bytes. Dequantization uses the global amax too:
   y = e2m1(q) * ((float(s_b) * amax) * fl(1/2688)). */
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_nvfp4_quantize(const void *x, int dtype, size_t rows, size_t cols,
                            float global_amax, uint8_t *q, uint8_t *scales);
/* NVFP4 with 16x16 blocks (FSDPRT_QUANT_NVFP4_2D); same buffers as above,
   dequantized with fsdprt_quant_nvfp4_dequantize. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_nvfp4_2d_quantize(
    const void *x, int dtype, size_t rows, size_t cols, float global_amax,
    uint8_t *q, uint8_t *scales);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_nvfp4_dequantize(
    const uint8_t *q, const uint8_t *scales, size_t rows, size_t cols,
    float global_amax, void *y, int out_dtype);

/* FP8 (E4M3) blockwise. block_rows: 1 (1x128 blocks) or 128 (128x128).
   pow2: non-zero rounds scales down to powers of two (the default). */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_fp8_block_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int block_rows,
    int pow2, uint8_t *q, float *scale_inv);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_fp8_block_dequantize(
    const uint8_t *q, const float *scale_inv, size_t rows, size_t cols,
    int block_rows, void *y, int out_dtype);

/* FP8 1x128 blocks with TE's scale layout (FSDPRT_QUANT_FP8_BLOCK_1X128_T):
   scale_inv_t is [ceil(cols/128), rows]. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_fp8_block_1x128_t_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int pow2, uint8_t *q,
    float *scale_inv_t);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_fp8_block_1x128_t_dequantize(
    const uint8_t *q, const float *scale_inv_t, size_t rows, size_t cols,
    void *y, int out_dtype);

/* Any format through one entry point, on host buffers of the sizes of
   fsdprt_quant_get_layout for [rows, cols]: `scales` (scale_bytes, any
   alignment) and `tensor_value` (the fp32 per-tensor value: scale_inv of the
   per-tensor FP8 formats, the global amax of NVFP4; ignored by the others).
   `amax` is the all-reduced amax (used by the per-tensor FP8 and NVFP4
   formats). Power-of-two blockwise scales. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_quantize(
    int format, const void *x, int dtype, size_t rows, size_t cols, float amax,
    uint8_t *data, void *scales, float *tensor_value);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_dequantize(
    int format, const uint8_t *data, const void *scales, float tensor_value,
    size_t rows, size_t cols, void *y, int out_dtype);

/* out[a][b][:] = in[b][a][:] for `in` viewed as [d0, d1, inner_bytes] bytes
   and `out` as [d1, d0, inner_bytes]. `in` and `out` must not overlap. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_swap_first_dims(
    const void *in, void *out, size_t d0, size_t d1, size_t inner_bytes);

/* ---- CUDA kernels -------------------------------------------------------- */
/* Same semantics as the CPU functions, bit-for-bit. All pointers are device
   pointers (amax / scale_inv scalars included, so no host synchronization is
   needed); `stream` is a cudaStream_t (NULL: the default stream). Calls are
   asynchronous; launch errors are reported. Defined in the fsdprt_quant_cuda
   library; a build without the CUDA toolkit provides stubs that return
   FSDPRT_ERR_UNSUPPORTED. */

/* 1 if the CUDA kernels are built and a GPU is visible, else 0. */
FSDPRT_QUANT_API int fsdprt_quant_cuda_available(void);
/* fsdprt_quant_quantize / fsdprt_quant_dequantize on host buffers, computed
   by the kernels: the inputs are copied to the current device, the outputs
   back (synchronously). Bit-identical to the CPU functions;
   FSDPRT_ERR_UNSUPPORTED without kernels or GPU. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_quantize_host(
    int format, const void *x, int dtype, size_t rows, size_t cols, float amax,
    uint8_t *data, void *scales, float *tensor_value);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_dequantize_host(
    int format, const uint8_t *data, const void *scales, float tensor_value,
    size_t rows, size_t cols, void *y, int out_dtype);
/* Writes the local amax (NaN ignored) to *amax_dev. */
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_amax(const void *x,
                                                        int dtype, size_t n,
                                                        float *amax_dev,
                                                        void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_tensor_quantize(
    const void *x, int dtype, size_t n, const float *amax_dev, int kind,
    uint8_t *q, float *scale_inv_dev, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_tensor_dequantize(
    const uint8_t *q, size_t n, int kind, const float *scale_inv_dev, void *y,
    int out_dtype, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_mxfp8_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int columnwise,
    uint8_t *q, uint8_t *scales, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_mxfp8_dequantize(
    const uint8_t *q, const uint8_t *scales, size_t rows, size_t cols,
    int columnwise, void *y, int out_dtype, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_nvfp4_quantize(
    const void *x, int dtype, size_t rows, size_t cols,
    const float *global_amax_dev, uint8_t *q, uint8_t *scales, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_nvfp4_dequantize(
    const uint8_t *q, const uint8_t *scales, size_t rows, size_t cols,
    const float *global_amax_dev, void *y, int out_dtype, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_block_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int block_rows,
    int pow2, uint8_t *q, float *scale_inv, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_block_dequantize(
    const uint8_t *q, const float *scale_inv, size_t rows, size_t cols,
    int block_rows, void *y, int out_dtype, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_nvfp4_2d_quantize(
    const void *x, int dtype, size_t rows, size_t cols,
    const float *global_amax_dev, uint8_t *q, uint8_t *scales, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_quantize(
    const void *x, int dtype, size_t rows, size_t cols, int pow2, uint8_t *q,
    float *scale_inv_t, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(
    const uint8_t *q, const float *scale_inv_t, size_t rows, size_t cols,
    void *y, int out_dtype, void *stream);
/* Any format through one entry point on device buffers (the device forms of
   fsdprt_quant_quantize / fsdprt_quant_dequantize): `scales` aligned for the
   format's scale type, `amax_dev` the group's amax (per-tensor FP8 and
   NVFP4), `tensor_dev` the per-tensor fp32 value (written by quantize: the
   scale_inv of per-tensor FP8, a copy of the amax for NVFP4; read by
   dequantize; unused by the other formats). Asynchronous on `stream`. */
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_cuda_quantize(int format, const void *x, int dtype, size_t rows,
                           size_t cols, const float *amax_dev, uint8_t *q,
                           void *scales, float *tensor_dev, void *stream);
FSDPRT_QUANT_API fsdprt_status_t fsdprt_quant_cuda_dequantize(
    int format, const uint8_t *q, const void *scales, const float *tensor_dev,
    size_t rows, size_t cols, void *y, int out_dtype, void *stream);
FSDPRT_QUANT_API fsdprt_status_t
fsdprt_quant_cuda_swap_first_dims(const void *in, void *out, size_t d0,
                                  size_t d1, size_t inner_bytes, void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDPRT_QUANT_H */

//===- quant_reference.cpp - CPU reference of the quantization formats ----===//
//
// The specification the CUDA kernels are tested against: straightforward
// loops over the formulas of docs/QUANTIZATION.md, one element at a time, in
// IEEE fp32 arithmetic.
//
//===----------------------------------------------------------------------===//

#include "fsdprt_quant.h"
#include "quant_internal.h"
#include "quant_math.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace fsdprt {
namespace quant {

namespace {
thread_local std::string lastError;
} // namespace

fsdprt_status_t fail(fsdprt_status_t status, const char *fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  lastError = buf;
  return status;
}

fsdprt_status_t checkDtype(const char *fn, int dtype) {
  if (dtype != FSDPRT_QUANT_F32 && dtype != FSDPRT_QUANT_BF16)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: unknown dtype %d (expected FSDPRT_QUANT_F32 or "
                "FSDPRT_QUANT_BF16)",
                fn, dtype);
  return FSDPRT_OK;
}

fsdprt_status_t checkKind(const char *fn, int kind) {
  if (kind != FSDPRT_QUANT_E4M3 && kind != FSDPRT_QUANT_E5M2)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: unknown fp8 kind %d (expected FSDPRT_QUANT_E4M3 or "
                "FSDPRT_QUANT_E5M2)",
                fn, kind);
  return FSDPRT_OK;
}

fsdprt_status_t checkPtr(const char *fn, const char *name, const void *p,
                         size_t count) {
  if (!p && count != 0)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
  return FSDPRT_OK;
}

fsdprt_status_t checkCount(const char *fn, size_t rows, size_t cols,
                           size_t *n) {
  if (cols != 0 && rows > std::numeric_limits<size_t>::max() / cols)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: rows * cols overflows (%zu x %zu)", fn, rows, cols);
  *n = rows * cols;
  return FSDPRT_OK;
}

fsdprt_status_t checkMxfp8Shape(const char *fn, size_t rows, size_t cols,
                                int columnwise) {
  if (columnwise != 0 && columnwise != 1)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: columnwise must be 0 or 1, got %d", fn, columnwise);
  if (!columnwise && cols % kMxBlock != 0)
    return fail(FSDPRT_ERR_SHAPE,
                "%s: MXFP8 rowwise needs the last dim to be a multiple of "
                "32, got %zu",
                fn, cols);
  if (columnwise && rows % kMxBlock != 0)
    return fail(FSDPRT_ERR_SHAPE,
                "%s: MXFP8 columnwise needs the row count (product of the "
                "leading dims) to be a multiple of 32, got %zu",
                fn, rows);
  return FSDPRT_OK;
}

fsdprt_status_t checkNvfp4Shape(const char *fn, size_t rows, size_t cols) {
  (void)rows;
  if (cols % kNvfp4Block != 0)
    return fail(FSDPRT_ERR_SHAPE,
                "%s: NVFP4 needs the last dim to be a multiple of 16, got %zu",
                fn, cols);
  return FSDPRT_OK;
}

fsdprt_status_t checkBlockShape(const char *fn, size_t rows, size_t cols,
                                int blockRows) {
  (void)rows;
  (void)cols;
  if (blockRows != 1 && blockRows != kFp8Block)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: block_rows must be 1 (1x128 blocks) or 128 (128x128 "
                "blocks), got %d",
                fn, blockRows);
  return FSDPRT_OK;
}

namespace {
// The formats whose quantize reads the group's amax.
bool readsAmax(int format) {
  return format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         format == FSDPRT_QUANT_FP8_E5M2_TENSOR ||
         format == FSDPRT_QUANT_NVFP4 || format == FSDPRT_QUANT_NVFP4_2D;
}

fsdprt_status_t checkFormatAndShape(const char *fn, int format, int dtype,
                                    size_t rows, size_t cols, size_t *n,
                                    fsdprt_quant_layout *layout) {
  if (!fsdprt_quant_format_name(format))
    return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: unknown format %d", fn,
                format);
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, n));
  if (rows > size_t(INT64_MAX) || cols > size_t(INT64_MAX))
    return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: %zu x %zu is too large", fn,
                rows, cols);
  const int64_t shape[2] = {int64_t(rows), int64_t(cols)};
  return fsdprt_quant_get_layout(format, shape, 2, layout);
}
} // namespace

fsdprt_status_t checkQuantize(const char *fn, int format, const void *x,
                              int dtype, size_t rows, size_t cols,
                              const void *amax, const void *data,
                              const void *scales, const void *tensor,
                              fsdprt_quant_layout *layout) {
  size_t n = 0;
  FSDPRT_CHECK(checkFormatAndShape(fn, format, dtype, rows, cols, &n, layout));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  if (readsAmax(format))
    FSDPRT_CHECK(checkPtr(fn, "amax", amax, n ? 1 : 0));
  FSDPRT_CHECK(checkPtr(fn, "data", data, layout->data_bytes));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, layout->scale_bytes));
  return checkPtr(fn, "tensor_value", tensor, layout->tensor_bytes);
}

fsdprt_status_t checkDequantize(const char *fn, int format, const void *data,
                                const void *scales, const void *tensor,
                                size_t rows, size_t cols, const void *y,
                                int outDtype, fsdprt_quant_layout *layout) {
  size_t n = 0;
  FSDPRT_CHECK(
      checkFormatAndShape(fn, format, outDtype, rows, cols, &n, layout));
  FSDPRT_CHECK(checkPtr(fn, "data", data, layout->data_bytes));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, layout->scale_bytes));
  FSDPRT_CHECK(checkPtr(fn, "tensor_value", tensor, layout->tensor_bytes));
  return checkPtr(fn, "y", y, n);
}

} // namespace quant
} // namespace fsdprt

using namespace fsdprt::quant;

namespace {

// Element access for the two input / output dtypes.
struct F32 {
  using Storage = float;
  static float load(const Storage *p, size_t i) { return p[i]; }
  static void store(Storage *p, size_t i, float v) { p[i] = v; }
};
struct BF16 {
  using Storage = uint16_t;
  static float load(const Storage *p, size_t i) { return bf16ToFloat(p[i]); }
  static void store(Storage *p, size_t i, float v) { p[i] = floatToBf16(v); }
};

// Calls fn(Type{}) for the dtype of a type-erased buffer.
template <typename Fn> void dispatchDtype(int dtype, Fn &&fn) {
  if (dtype == FSDPRT_QUANT_F32)
    fn(F32{});
  else
    fn(BF16{});
}

template <typename T>
float rangeAmax(const typename T::Storage *x, size_t begin, size_t end) {
  float amax = 0.0f;
  for (size_t i = begin; i < end; ++i)
    amax = maxIgnoringNan(amax, absf(T::load(x, i)));
  return amax;
}

// Largest finite value of the input type: TE's blockwise scaling replaces
// an infinite scale by it (compute_scale_from_types).
float inputMax(int dtype) {
  return dtype == FSDPRT_QUANT_BF16 ? kBf16Max : kFltMax;
}

// NVFP4 quantization with blocks of tileRows x 16 (1: the 1-D format; 16:
// nvfp4_2d, where a trailing partial tile covers the rows present). Scales
// are [rows, cols/16] either way; every row of a 2-D tile repeats its scale.
void nvfp4Quantize(const void *x, int dtype, size_t rows, size_t cols,
                   float globalAmax, size_t tileRows, uint8_t *q,
                   uint8_t *scales) {
  const float sEnc = nvfp4GlobalScale(globalAmax);
  const float sDec = nvfp4GlobalDecodeScale(sEnc);
  const size_t blocksPerRow = cols / kNvfp4Block;
  dispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const typename T::Storage *>(x);
    for (size_t r0 = 0; r0 < rows; r0 += tileRows) {
      const size_t r1 = std::min(rows, r0 + tileRows);
      for (size_t bj = 0; bj < blocksPerRow; ++bj) {
        const size_t c0 = bj * kNvfp4Block;
        float amax = 0.0f;
        for (size_t r = r0; r < r1; ++r)
          amax =
              maxIgnoringNan(amax, rangeAmax<T>(in, r * cols + c0,
                                                r * cols + c0 + kNvfp4Block));
        const uint8_t sb = nvfp4BlockScale(amax, sEnc);
        const float mult = nvfp4EncodeMultiplier(sb, sDec);
        for (size_t r = r0; r < r1; ++r) {
          scales[r * blocksPerRow + bj] = sb;
          for (size_t i = r * cols + c0; i < r * cols + c0 + kNvfp4Block;
               i += 2) {
            const uint8_t lo = floatToE2m1(T::load(in, i) * mult);
            const uint8_t hi = floatToE2m1(T::load(in, i + 1) * mult);
            q[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
      }
    }
  });
}

// Index of block (bi, bj) in a scale array of scaleRows x scaleCols blocks,
// stored row-major or (transposedScales) as its transpose.
inline size_t scaleIndex(size_t bi, size_t bj, size_t scaleRows,
                         size_t scaleCols, bool transposedScales) {
  return transposedScales ? bj * scaleRows + bi : bi * scaleCols + bj;
}

void blockQuantize(const void *x, int dtype, size_t rows, size_t cols,
                   size_t br, bool pow2, bool transposedScales, uint8_t *q,
                   float *scale_inv) {
  const size_t scaleRows = ceilDiv(rows, br);
  const size_t scaleCols = ceilDiv(cols, kFp8Block);
  const float valueForInf = inputMax(dtype);
  dispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const typename T::Storage *>(x);
    for (size_t bi = 0; bi < scaleRows; ++bi) {
      const size_t r0 = bi * br, r1 = std::min(rows, r0 + br);
      for (size_t bj = 0; bj < scaleCols; ++bj) {
        const size_t c0 = bj * kFp8Block;
        const size_t c1 = std::min(cols, c0 + kFp8Block);
        float amax = 0.0f;
        for (size_t r = r0; r < r1; ++r)
          amax = maxIgnoringNan(amax,
                                rangeAmax<T>(in, r * cols + c0, r * cols + c1));
        const float scale = blockScaleFromAmax(amax, pow2, valueForInf);
        scale_inv[scaleIndex(bi, bj, scaleRows, scaleCols, transposedScales)] =
            1.0f / scale;
        for (size_t r = r0; r < r1; ++r)
          for (size_t c = c0; c < c1; ++c)
            q[r * cols + c] = floatToFp8(T::load(in, r * cols + c) * scale, 0);
      }
    }
  });
}

void blockDequantize(const uint8_t *q, const float *scale_inv, size_t rows,
                     size_t cols, size_t br, bool transposedScales, void *y,
                     int out_dtype) {
  const size_t scaleRows = ceilDiv(rows, br);
  const size_t scaleCols = ceilDiv(cols, kFp8Block);
  dispatchDtype(out_dtype, [&](auto t) {
    using T = decltype(t);
    auto *out = static_cast<typename T::Storage *>(y);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) {
        const float s = scale_inv[scaleIndex(r / br, c / kFp8Block, scaleRows,
                                             scaleCols, transposedScales)];
        T::store(out, r * cols + c, fp8ToFloat(q[r * cols + c], 0) * s);
      }
  });
}

} // namespace

extern "C" {

const char *fsdprt_quant_status_string(fsdprt_status_t status) {
  return fsdprt_status_name(status);
}

const char *fsdprt_quant_last_error(void) {
  return fsdprt::quant::lastError.c_str();
}

const char *fsdprt_quant_format_name(int format) {
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
    return "fp8_e4m3_tensor";
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return "fp8_e5m2_tensor";
  case FSDPRT_QUANT_MXFP8_ROWWISE:
    return "mxfp8_rowwise";
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return "mxfp8_colwise";
  case FSDPRT_QUANT_NVFP4:
    return "nvfp4";
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
    return "fp8_block_1x128";
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    return "fp8_block_128x128";
  case FSDPRT_QUANT_NVFP4_2D:
    return "nvfp4_2d";
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return "fp8_block_1x128_t";
  default:
    return nullptr;
  }
}

// The [rows, cols] view of a shape: cols is the last dim, rows the product
// of the others.
static fsdprt_status_t viewAs2D(const char *fn, const int64_t *shape, int ndim,
                                size_t *rows, size_t *cols) {
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                  "%s: negative dim %lld at index %d", fn,
                  static_cast<long long>(shape[i]), i);
    const size_t d = static_cast<size_t>(shape[i]);
    if (i == ndim - 1) {
      *cols = d;
    } else {
      if (d != 0 && *rows > std::numeric_limits<size_t>::max() / d)
        return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: shape overflows", fn);
      *rows *= d;
    }
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_get_layout(int format, const int64_t *shape,
                                        int ndim, fsdprt_quant_layout *layout) {
  static const char *fn = "fsdprt_quant_get_layout";
  if (!layout)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: layout is NULL", fn);
  if (ndim < 0 || (ndim > 0 && !shape))
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: bad shape (ndim %d, shape %p)", fn, ndim,
                static_cast<const void *>(shape));
  if (!fsdprt_quant_format_name(format))
    return fail(FSDPRT_ERR_INVALID_ARGUMENT, "%s: unknown format %d", fn,
                format);
  size_t rows = 1, cols = 1, n = 0;
  FSDPRT_CHECK(viewAs2D(fn, shape, ndim, &rows, &cols));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  fsdprt_quant_layout out{};
  out.rows = rows;
  out.cols = cols;
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    out.data_bytes = n;
    out.tensor_bytes = sizeof(float);
    break;
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE: {
    const int columnwise = format == FSDPRT_QUANT_MXFP8_COLWISE;
    FSDPRT_CHECK(checkMxfp8Shape(fn, rows, cols, columnwise));
    out.data_bytes = n;
    out.scale_rows = columnwise ? rows / kMxBlock : rows;
    out.scale_cols = columnwise ? cols : cols / kMxBlock;
    out.scale_bytes = out.scale_rows * out.scale_cols;
    break;
  }
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
    out.data_bytes = n / 2;
    out.scale_rows = rows;
    out.scale_cols = cols / kNvfp4Block;
    out.scale_bytes = out.scale_rows * out.scale_cols;
    out.tensor_bytes = sizeof(float);
    break;
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128: {
    const bool square = format == FSDPRT_QUANT_FP8_BLOCK_128X128;
    out.data_bytes = n;
    out.scale_rows = square ? ceilDiv(rows, kFp8Block) : rows;
    out.scale_cols = ceilDiv(cols, kFp8Block);
    out.scale_bytes = out.scale_rows * out.scale_cols * sizeof(float);
    break;
  }
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    out.data_bytes = n;
    out.scale_rows = ceilDiv(cols, kFp8Block);
    out.scale_cols = rows;
    out.scale_bytes = out.scale_rows * out.scale_cols * sizeof(float);
    break;
  }
  *layout = out;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_wire_bytes(int format, const int64_t *shape,
                                        int ndim, uint64_t *bytes) {
  if (!bytes)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "fsdprt_quant_wire_bytes: bytes is NULL");
  fsdprt_quant_layout layout;
  FSDPRT_CHECK(fsdprt_quant_get_layout(format, shape, ndim, &layout));
  *bytes = layout.data_bytes + layout.scale_bytes + layout.tensor_bytes;
  return FSDPRT_OK;
}

// ---- scalar conversions ---------------------------------------------------

uint8_t fsdprt_quant_float_to_fp8(float x, int kind) {
  return floatToFp8(x, kind == FSDPRT_QUANT_E5M2 ? 1 : 0);
}

float fsdprt_quant_fp8_to_float(uint8_t bits, int kind) {
  return fp8ToFloat(bits, kind == FSDPRT_QUANT_E5M2 ? 1 : 0);
}

uint8_t fsdprt_quant_float_to_e2m1(float x) { return floatToE2m1(x); }

float fsdprt_quant_e2m1_to_float(uint8_t code) { return e2m1ToFloat(code); }

uint8_t fsdprt_quant_float_to_e8m0(float v) { return floatToE8m0(v); }

uint16_t fsdprt_quant_float_to_bf16(float x) { return floatToBf16(x); }

float fsdprt_quant_bf16_to_float(uint16_t bits) { return bf16ToFloat(bits); }

float fsdprt_quant_fp8_scale_from_amax(float amax, int kind) {
  return scaleFromAmax(amax, fp8MaxValue(kind == FSDPRT_QUANT_E5M2 ? 1 : 0));
}

float fsdprt_quant_block_scale_from_amax(float amax, int pow2, int dtype) {
  return blockScaleFromAmax(amax, pow2 != 0, inputMax(dtype));
}

float fsdprt_quant_nvfp4_global_scale(float amax) {
  return nvfp4GlobalScale(amax);
}

// ---- amax -----------------------------------------------------------------

fsdprt_status_t fsdprt_quant_amax(const void *x, int dtype, size_t n,
                                  float *amax) {
  static const char *fn = "fsdprt_quant_amax";
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "amax", amax, 1));
  dispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    *amax = rangeAmax<T>(static_cast<const typename T::Storage *>(x), 0, n);
  });
  return FSDPRT_OK;
}

// ---- FP8 per-tensor -------------------------------------------------------

fsdprt_status_t fsdprt_quant_fp8_tensor_quantize(const void *x, int dtype,
                                                 size_t n, float amax, int kind,
                                                 uint8_t *q, float *scale_inv) {
  static const char *fn = "fsdprt_quant_fp8_tensor_quantize";
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkKind(fn, kind));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv", scale_inv, 1));
  const float scale = scaleFromAmax(amax, fp8MaxValue(kind));
  dispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const typename T::Storage *>(x);
    for (size_t i = 0; i < n; ++i)
      q[i] = floatToFp8(T::load(in, i) * scale, kind);
  });
  *scale_inv = 1.0f / scale;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_fp8_tensor_dequantize(const uint8_t *q, size_t n,
                                                   int kind, float scale_inv,
                                                   void *y, int out_dtype) {
  static const char *fn = "fsdprt_quant_fp8_tensor_dequantize";
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkKind(fn, kind));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  dispatchDtype(out_dtype, [&](auto t) {
    using T = decltype(t);
    auto *out = static_cast<typename T::Storage *>(y);
    for (size_t i = 0; i < n; ++i)
      T::store(out, i, fp8ToFloat(q[i], kind) * scale_inv);
  });
  return FSDPRT_OK;
}

// ---- MXFP8 ----------------------------------------------------------------

fsdprt_status_t fsdprt_quant_mxfp8_quantize(const void *x, int dtype,
                                            size_t rows, size_t cols,
                                            int columnwise, uint8_t *q,
                                            uint8_t *scales) {
  static const char *fn = "fsdprt_quant_mxfp8_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkMxfp8Shape(fn, rows, cols, columnwise));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kMxBlock));
  dispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    const auto *in = static_cast<const typename T::Storage *>(x);
    if (!columnwise) {
      // Flat order: block b covers elements [32 b, 32 b + 32) of one row.
      for (size_t b = 0; b < n / kMxBlock; ++b) {
        const size_t begin = b * kMxBlock;
        const float amax = rangeAmax<T>(in, begin, begin + kMxBlock);
        const uint8_t e = floatToE8m0(amax / kE4M3Max);
        scales[b] = e;
        const float s = e8m0QuantScale(e);
        for (size_t i = begin; i < begin + kMxBlock; ++i)
          q[i] = floatToFp8(T::load(in, i) * s, 0);
      }
      return;
    }
    std::vector<float> amax(cols);
    for (size_t rb = 0; rb < rows / kMxBlock; ++rb) {
      const size_t r0 = rb * kMxBlock;
      std::fill(amax.begin(), amax.end(), 0.0f);
      for (size_t r = r0; r < r0 + kMxBlock; ++r)
        for (size_t c = 0; c < cols; ++c)
          amax[c] = maxIgnoringNan(amax[c], absf(T::load(in, r * cols + c)));
      for (size_t c = 0; c < cols; ++c) {
        const uint8_t e = floatToE8m0(amax[c] / kE4M3Max);
        scales[rb * cols + c] = e;
        amax[c] = e8m0QuantScale(e); // reuse the buffer for the multiplier
      }
      for (size_t r = r0; r < r0 + kMxBlock; ++r)
        for (size_t c = 0; c < cols; ++c)
          q[r * cols + c] = floatToFp8(T::load(in, r * cols + c) * amax[c], 0);
    }
  });
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_mxfp8_dequantize(const uint8_t *q,
                                              const uint8_t *scales,
                                              size_t rows, size_t cols,
                                              int columnwise, void *y,
                                              int out_dtype) {
  static const char *fn = "fsdprt_quant_mxfp8_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkMxfp8Shape(fn, rows, cols, columnwise));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kMxBlock));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  dispatchDtype(out_dtype, [&](auto t) {
    using T = decltype(t);
    auto *out = static_cast<typename T::Storage *>(y);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) {
        const size_t i = r * cols + c;
        const uint8_t e = columnwise ? scales[(r / kMxBlock) * cols + c]
                                     : scales[i / kMxBlock];
        T::store(out, i, fp8ToFloat(q[i], 0) * e8m0DequantScale(e));
      }
  });
  return FSDPRT_OK;
}

// ---- NVFP4 ----------------------------------------------------------------

// Both NVFP4 layouts take the same arguments; they differ only in how many
// rows share one block scale (1 for 1x16 blocks, 16 for 16x16 blocks).
static fsdprt_status_t nvfp4QuantizeChecked(const char *fn, const void *x,
                                            int dtype, size_t rows, size_t cols,
                                            float global_amax, size_t tileRows,
                                            uint8_t *q, uint8_t *scales) {
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n / 2));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kNvfp4Block));
  nvfp4Quantize(x, dtype, rows, cols, global_amax, tileRows, q, scales);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_nvfp4_quantize(const void *x, int dtype,
                                            size_t rows, size_t cols,
                                            float global_amax, uint8_t *q,
                                            uint8_t *scales) {
  return nvfp4QuantizeChecked("fsdprt_quant_nvfp4_quantize", x, dtype, rows,
                              cols, global_amax, /*tileRows=*/1, q, scales);
}

fsdprt_status_t fsdprt_quant_nvfp4_2d_quantize(const void *x, int dtype,
                                               size_t rows, size_t cols,
                                               float global_amax, uint8_t *q,
                                               uint8_t *scales) {
  return nvfp4QuantizeChecked("fsdprt_quant_nvfp4_2d_quantize", x, dtype, rows,
                              cols, global_amax, kNvfp4Block, q, scales);
}

fsdprt_status_t fsdprt_quant_nvfp4_dequantize(const uint8_t *q,
                                              const uint8_t *scales,
                                              size_t rows, size_t cols,
                                              float global_amax, void *y,
                                              int out_dtype) {
  static const char *fn = "fsdprt_quant_nvfp4_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkNvfp4Shape(fn, rows, cols));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n / 2));
  FSDPRT_CHECK(checkPtr(fn, "scales", scales, n / kNvfp4Block));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  dispatchDtype(out_dtype, [&](auto t) {
    using T = decltype(t);
    auto *out = static_cast<typename T::Storage *>(y);
    for (size_t b = 0; b < n / kNvfp4Block; ++b) {
      const float factor = nvfp4DecodeFactor(scales[b], global_amax);
      for (size_t i = b * kNvfp4Block; i < (b + 1) * kNvfp4Block; i += 2) {
        const uint8_t byte = q[i / 2];
        T::store(out, i, nvfp4Decode(byte & 0xF, factor));
        T::store(out, i + 1, nvfp4Decode(byte >> 4, factor));
      }
    }
  });
  return FSDPRT_OK;
}

// ---- FP8 blockwise --------------------------------------------------------

fsdprt_status_t fsdprt_quant_fp8_block_quantize(const void *x, int dtype,
                                                size_t rows, size_t cols,
                                                int block_rows, int pow2,
                                                uint8_t *q, float *scale_inv) {
  static const char *fn = "fsdprt_quant_fp8_block_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkBlockShape(fn, rows, cols, block_rows));
  const size_t br = static_cast<size_t>(block_rows);
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv", scale_inv,
                        ceilDiv(rows, br) * ceilDiv(cols, kFp8Block)));
  blockQuantize(x, dtype, rows, cols, br, pow2 != 0, false, q, scale_inv);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_fp8_block_dequantize(const uint8_t *q,
                                                  const float *scale_inv,
                                                  size_t rows, size_t cols,
                                                  int block_rows, void *y,
                                                  int out_dtype) {
  static const char *fn = "fsdprt_quant_fp8_block_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkBlockShape(fn, rows, cols, block_rows));
  const size_t br = static_cast<size_t>(block_rows);
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv", scale_inv,
                        ceilDiv(rows, br) * ceilDiv(cols, kFp8Block)));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  blockDequantize(q, scale_inv, rows, cols, br, false, y, out_dtype);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_quant_fp8_block_1x128_t_quantize(const void *x,
                                                        int dtype, size_t rows,
                                                        size_t cols, int pow2,
                                                        uint8_t *q,
                                                        float *scale_inv_t) {
  static const char *fn = "fsdprt_quant_fp8_block_1x128_t_quantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkPtr(fn, "x", x, n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv_t", scale_inv_t,
                        rows * ceilDiv(cols, kFp8Block)));
  blockQuantize(x, dtype, rows, cols, 1, pow2 != 0, true, q, scale_inv_t);
  return FSDPRT_OK;
}

fsdprt_status_t
fsdprt_quant_fp8_block_1x128_t_dequantize(const uint8_t *q,
                                          const float *scale_inv_t, size_t rows,
                                          size_t cols, void *y, int out_dtype) {
  static const char *fn = "fsdprt_quant_fp8_block_1x128_t_dequantize";
  size_t n = 0;
  FSDPRT_CHECK(checkDtype(fn, out_dtype));
  FSDPRT_CHECK(checkCount(fn, rows, cols, &n));
  FSDPRT_CHECK(checkPtr(fn, "q", q, n));
  FSDPRT_CHECK(checkPtr(fn, "scale_inv_t", scale_inv_t,
                        rows * ceilDiv(cols, kFp8Block)));
  FSDPRT_CHECK(checkPtr(fn, "y", y, n));
  blockDequantize(q, scale_inv_t, rows, cols, 1, true, y, out_dtype);
  return FSDPRT_OK;
}

// ---- any format -----------------------------------------------------------

fsdprt_status_t fsdprt_quant_quantize(int format, const void *x, int dtype,
                                      size_t rows, size_t cols, float amax,
                                      uint8_t *data, void *scales,
                                      float *tensor_value) {
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkQuantize("fsdprt_quant_quantize", format, x, dtype, rows,
                             cols, &amax, data, scales, tensor_value, &l));
  auto *s8 = static_cast<uint8_t *>(scales);
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_fp8_tensor_quantize(
        x, dtype, rows * cols, amax,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        data, tensor_value);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_mxfp8_quantize(
        x, dtype, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, data, s8);
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    *tensor_value = amax;
    return format == FSDPRT_QUANT_NVFP4
               ? fsdprt_quant_nvfp4_quantize(x, dtype, rows, cols, amax, data,
                                             s8)
               : fsdprt_quant_nvfp4_2d_quantize(x, dtype, rows, cols, amax,
                                                data, s8);
  default: {
    // Blockwise: fp32 scales, staged for alignment.
    std::vector<float> s(l.scale_rows * l.scale_cols);
    const fsdprt_status_t st =
        format == FSDPRT_QUANT_FP8_BLOCK_1X128_T
            ? fsdprt_quant_fp8_block_1x128_t_quantize(x, dtype, rows, cols, 1,
                                                      data, s.data())
            : fsdprt_quant_fp8_block_quantize(
                  x, dtype, rows, cols,
                  format == FSDPRT_QUANT_FP8_BLOCK_128X128 ? 128 : 1, 1, data,
                  s.data());
    if (st == FSDPRT_OK && !s.empty())
      std::memcpy(scales, s.data(), l.scale_bytes);
    return st;
  }
  }
}

fsdprt_status_t fsdprt_quant_dequantize(int format, const uint8_t *data,
                                        const void *scales, float tensor_value,
                                        size_t rows, size_t cols, void *y,
                                        int out_dtype) {
  fsdprt_quant_layout l;
  FSDPRT_CHECK(checkDequantize("fsdprt_quant_dequantize", format, data, scales,
                               &tensor_value, rows, cols, y, out_dtype, &l));
  const auto *s8 = static_cast<const uint8_t *>(scales);
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_fp8_tensor_dequantize(
        data, rows * cols,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        tensor_value, y, out_dtype);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_mxfp8_dequantize(data, s8, rows, cols,
                                         format == FSDPRT_QUANT_MXFP8_COLWISE,
                                         y, out_dtype);
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    return fsdprt_quant_nvfp4_dequantize(data, s8, rows, cols, tensor_value, y,
                                         out_dtype);
  default: {
    std::vector<float> s(l.scale_rows * l.scale_cols);
    if (!s.empty())
      std::memcpy(s.data(), scales, l.scale_bytes);
    return format == FSDPRT_QUANT_FP8_BLOCK_1X128_T
               ? fsdprt_quant_fp8_block_1x128_t_dequantize(data, s.data(), rows,
                                                           cols, y, out_dtype)
               : fsdprt_quant_fp8_block_dequantize(
                     data, s.data(), rows, cols,
                     format == FSDPRT_QUANT_FP8_BLOCK_128X128 ? 128 : 1, y,
                     out_dtype);
  }
  }
}

// ---- swap_first_dims ------------------------------------------------------

fsdprt_status_t fsdprt_quant_swap_first_dims(const void *in, void *out,
                                             size_t d0, size_t d1,
                                             size_t inner_bytes) {
  static const char *fn = "fsdprt_quant_swap_first_dims";
  size_t rowsTotal = 0, n = 0;
  FSDPRT_CHECK(checkCount(fn, d0, d1, &rowsTotal));
  FSDPRT_CHECK(checkCount(fn, rowsTotal, inner_bytes, &n));
  FSDPRT_CHECK(checkPtr(fn, "in", in, n));
  FSDPRT_CHECK(checkPtr(fn, "out", out, n));
  const auto *src = static_cast<const unsigned char *>(in);
  auto *dst = static_cast<unsigned char *>(out);
  if (n != 0 && src < dst + n && dst < src + n)
    return fail(FSDPRT_ERR_INVALID_ARGUMENT,
                "%s: in and out overlap (the swap is not in place)", fn);
  // out[a][b] = in[b][a], a < d1, b < d0.
  for (size_t a = 0; a < d1; ++a)
    for (size_t b = 0; b < d0; ++b)
      std::memcpy(dst + (a * d0 + b) * inner_bytes,
                  src + (b * d1 + a) * inner_bytes, inner_bytes);
  return FSDPRT_OK;
}

} // extern "C"

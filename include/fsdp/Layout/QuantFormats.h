//===- QuantFormats.h - quantized all-gather formats without MLIR -*- C++
//-*-===//
//
// Names, blocking rules and bytes on the wire of the formats of the
// quantized parameter all-gather (docs/SEMANTICS.md §8, docs/QUANTIZATION.md).
// The codes equal `fsdprt_quant_format` and the byte counts equal
// `fsdprt_quant_wire_bytes` for a tensor viewed as [rows, cols], so the
// compiler can report them without linking the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LAYOUT_QUANTFORMATS_H
#define FSDP_LAYOUT_QUANTFORMATS_H

#include "fsdprt_types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fsdp {
namespace quant {

/// Same values as fsdprt_quant_format.
enum class Format : int32_t {
  Fp8E4m3Tensor = 0,
  Fp8E5m2Tensor = 1,
  Mxfp8Rowwise = 2,
  Mxfp8Colwise = 3,
  Nvfp4 = 4,
  Fp8Block1x128 = 5,
  Fp8Block128x128 = 6,
  Nvfp4_2d = 7,
  Fp8Block1x128T = 8,
};

constexpr int32_t kNumFormats = 9;
static_assert(
    kNumFormats == FSDPRT_QUANT_NUM_FORMATS &&
        int32_t(Format::Fp8E4m3Tensor) == FSDPRT_QUANT_FP8_E4M3_TENSOR &&
        int32_t(Format::Fp8E5m2Tensor) == FSDPRT_QUANT_FP8_E5M2_TENSOR &&
        int32_t(Format::Mxfp8Rowwise) == FSDPRT_QUANT_MXFP8_ROWWISE &&
        int32_t(Format::Mxfp8Colwise) == FSDPRT_QUANT_MXFP8_COLWISE &&
        int32_t(Format::Nvfp4) == FSDPRT_QUANT_NVFP4 &&
        int32_t(Format::Fp8Block1x128) == FSDPRT_QUANT_FP8_BLOCK_1X128 &&
        int32_t(Format::Fp8Block128x128) == FSDPRT_QUANT_FP8_BLOCK_128X128 &&
        int32_t(Format::Nvfp4_2d) == FSDPRT_QUANT_NVFP4_2D &&
        int32_t(Format::Fp8Block1x128T) == FSDPRT_QUANT_FP8_BLOCK_1X128_T,
    "quant::Format must match fsdprt_quant_format");
constexpr int64_t kMxfp8Block = 32;
constexpr int64_t kNvfp4Block = 16;
constexpr int64_t kFp8Block = 128;

inline const char *formatName(Format f) {
  switch (f) {
  case Format::Fp8E4m3Tensor:
    return "fp8_e4m3_tensor";
  case Format::Fp8E5m2Tensor:
    return "fp8_e5m2_tensor";
  case Format::Mxfp8Rowwise:
    return "mxfp8_rowwise";
  case Format::Mxfp8Colwise:
    return "mxfp8_colwise";
  case Format::Nvfp4:
    return "nvfp4";
  case Format::Fp8Block1x128:
    return "fp8_block_1x128";
  case Format::Fp8Block128x128:
    return "fp8_block_128x128";
  case Format::Nvfp4_2d:
    return "nvfp4_2d";
  case Format::Fp8Block1x128T:
    return "fp8_block_1x128_t";
  }
  return "?";
}

inline std::optional<Format> parseFormat(std::string_view name) {
  for (int32_t i = 0; i < kNumFormats; ++i)
    if (name == formatName(Format(i)))
      return Format(i);
  return std::nullopt;
}

/// Whether every rank must use one scale derived from the group's amax (the
/// amax is all-reduced with max before quantizing).
inline bool needsGroupAmax(Format f) {
  return f == Format::Fp8E4m3Tensor || f == Format::Fp8E5m2Tensor ||
         f == Format::Nvfp4 || f == Format::Nvfp4_2d;
}

/// Why [rows, cols] cannot be blocked in `f`, or nullopt when it can.
inline std::optional<std::string> shapeError(Format f, int64_t rows,
                                             int64_t cols) {
  auto need = [&](const char *dim, int64_t v, int64_t block) {
    return std::string(formatName(f)) + " needs " + dim + " (" +
           std::to_string(v) + ") to be a multiple of " + std::to_string(block);
  };
  if (rows < 0 || cols < 0)
    return std::string("negative dimension");
  switch (f) {
  case Format::Mxfp8Rowwise:
    if (cols % kMxfp8Block)
      return need("cols", cols, kMxfp8Block);
    break;
  case Format::Mxfp8Colwise:
    if (rows % kMxfp8Block)
      return need("rows", rows, kMxfp8Block);
    break;
  case Format::Nvfp4:
  case Format::Nvfp4_2d:
    if (cols % kNvfp4Block)
      return need("cols", cols, kNvfp4Block);
    break;
  default:
    break;
  }
  return std::nullopt;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Bytes of one quantized [rows, cols] tensor on the wire: data, per-block
/// scales and per-tensor metadata (fsdprt_quant_wire_bytes). The shape must
/// block (see shapeError).
inline int64_t wireBytes(Format f, int64_t rows, int64_t cols) {
  int64_t n = rows * cols;
  switch (f) {
  case Format::Fp8E4m3Tensor:
  case Format::Fp8E5m2Tensor:
    return n + 4; // fp32 scale_inv
  case Format::Mxfp8Rowwise:
  case Format::Mxfp8Colwise:
    return n + n / kMxfp8Block; // one E8M0 byte per 32 elements
  case Format::Nvfp4:
  case Format::Nvfp4_2d:
    return n / 2 + n / kNvfp4Block + 4; // E2M1 pairs, E4M3 scales, amax
  case Format::Fp8Block1x128:
  case Format::Fp8Block1x128T:
    return n + 4 * rows * ceilDiv(cols, kFp8Block);
  case Format::Fp8Block128x128:
    return n + 4 * ceilDiv(rows, kFp8Block) * ceilDiv(cols, kFp8Block);
  }
  return 0;
}

} // namespace quant
} // namespace fsdp

#endif

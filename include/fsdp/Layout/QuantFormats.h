//===- QuantFormats.h - quantized all-gather formats without MLIR -*- C++
//-*-===//
//
// Blocking rules and bytes on the wire of the formats of the quantized
// parameter all-gather (docs/SEMANTICS.md §8, docs/QUANTIZATION.md), by the
// runtime's codes (`fsdprt_quant_format`). The byte counts equal
// `fsdprt_quant_wire_bytes` for a tensor viewed as [rows, cols], so the
// compiler can report them without linking the runtime. The list of formats
// is the dialect's QuantFormat enum (FSDPBase.td), tied to these codes in
// fsdp/Dialect/FSDP/IR/QuantFormat.h; the switches below name every format
// (-Wswitch reports a new one).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LAYOUT_QUANTFORMATS_H
#define FSDP_LAYOUT_QUANTFORMATS_H

#include "fsdprt_types.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp {
namespace quant {

using Format = fsdprt_quant_format;

constexpr int64_t kMxfp8Block = 32;
constexpr int64_t kNvfp4Block = 16;
constexpr int64_t kFp8Block = 128;

/// Whether every rank must use one scale derived from the group's amax (the
/// amax is all-reduced with max before quantizing).
inline bool needsGroupAmax(Format f) {
  return f == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         f == FSDPRT_QUANT_FP8_E5M2_TENSOR || f == FSDPRT_QUANT_NVFP4 ||
         f == FSDPRT_QUANT_NVFP4_2D;
}

/// Why [rows, cols] cannot be blocked in `f` (named `name` in the message),
/// or nullopt when it can.
inline std::optional<std::string> shapeError(Format f, const std::string &name,
                                             int64_t rows, int64_t cols) {
  auto need = [&](const char *dim, int64_t v, int64_t block) {
    return name + " needs " + dim + " (" + std::to_string(v) +
           ") to be a multiple of " + std::to_string(block);
  };
  if (rows < 0 || cols < 0)
    return std::string("negative dimension");
  switch (f) {
  case FSDPRT_QUANT_MXFP8_ROWWISE:
    if (cols % kMxfp8Block)
      return need("cols", cols, kMxfp8Block);
    break;
  case FSDPRT_QUANT_MXFP8_COLWISE:
    if (rows % kMxfp8Block)
      return need("rows", rows, kMxfp8Block);
    break;
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
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
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return n + 4; // fp32 scale_inv
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return n + n / kMxfp8Block; // one E8M0 byte per 32 elements
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    return n / 2 + n / kNvfp4Block + 4; // E2M1 pairs, E4M3 scales, amax
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return n + 4 * rows * ceilDiv(cols, kFp8Block);
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    return n + 4 * ceilDiv(rows, kFp8Block) * ceilDiv(cols, kFp8Block);
  }
  return 0;
}

} // namespace quant
} // namespace fsdp

#endif

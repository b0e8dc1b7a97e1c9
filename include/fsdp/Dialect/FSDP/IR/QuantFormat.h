//===- QuantFormat.h - formats of the quantized all-gather ------*- C++ -*-===//
//
// The QuantFormat enum of FSDPBase.td is the one list of formats: the IR
// spells them with its generated stringify/symbolize, and so do the pass
// options (PassOptions.h). Its codes are the runtime's fsdprt_quant_format
// (fsdprt_types.h, the C header the runtime and compiled code share),
// checked below; the blocking rules and wire sizes are FSDPLayout's
// (fsdp/Layout/QuantFormats.h), which works on those codes.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_QUANTFORMAT_H
#define FSDP_DIALECT_FSDP_IR_QUANTFORMAT_H

#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Layout/QuantFormats.h"
#include "fsdprt_types.h"

namespace mlir::fsdp {

static_assert(getMaxEnumValForQuantFormat() + 1 == FSDPRT_QUANT_NUM_FORMATS,
              "QuantFormat (FSDPBase.td) and fsdprt_quant_format "
              "(fsdprt_types.h) must list the same formats");
#define FSDP_CHECK_QUANT_CODE(format, code)                                    \
  static_assert(static_cast<int32_t>(QuantFormat::format) == code,             \
                "QuantFormat::" #format " must equal " #code);
FSDP_CHECK_QUANT_CODE(fp8_e4m3_tensor, FSDPRT_QUANT_FP8_E4M3_TENSOR)
FSDP_CHECK_QUANT_CODE(fp8_e5m2_tensor, FSDPRT_QUANT_FP8_E5M2_TENSOR)
FSDP_CHECK_QUANT_CODE(mxfp8_rowwise, FSDPRT_QUANT_MXFP8_ROWWISE)
FSDP_CHECK_QUANT_CODE(mxfp8_colwise, FSDPRT_QUANT_MXFP8_COLWISE)
FSDP_CHECK_QUANT_CODE(nvfp4, FSDPRT_QUANT_NVFP4)
FSDP_CHECK_QUANT_CODE(fp8_block_1x128, FSDPRT_QUANT_FP8_BLOCK_1X128)
FSDP_CHECK_QUANT_CODE(fp8_block_128x128, FSDPRT_QUANT_FP8_BLOCK_128X128)
FSDP_CHECK_QUANT_CODE(nvfp4_2d, FSDPRT_QUANT_NVFP4_2D)
FSDP_CHECK_QUANT_CODE(fp8_block_1x128_t, FSDPRT_QUANT_FP8_BLOCK_1X128_T)
#undef FSDP_CHECK_QUANT_CODE

/// The runtime's code of `format` (what compiled code passes).
inline fsdprt_quant_format runtimeCode(QuantFormat format) {
  return static_cast<fsdprt_quant_format>(format);
}

/// Every format, in code order.
inline SmallVector<QuantFormat> allQuantFormats() {
  SmallVector<QuantFormat> formats;
  for (uint32_t code = 0; code <= getMaxEnumValForQuantFormat(); ++code)
    formats.push_back(*symbolizeQuantFormat(code));
  return formats;
}

/// Whether every rank quantizes with one scale from the group's amax.
inline bool needsGroupAmax(QuantFormat format) {
  return ::fsdp::quant::needsGroupAmax(runtimeCode(format));
}

/// Why [rows, cols] cannot be blocked in `format`, or nullopt when it can.
inline std::optional<std::string> quantShapeError(QuantFormat format,
                                                  int64_t rows, int64_t cols) {
  return ::fsdp::quant::shapeError(
      runtimeCode(format), stringifyQuantFormat(format).str(), rows, cols);
}

/// Bytes of one quantized [rows, cols] tensor on the wire.
inline int64_t quantWireBytes(QuantFormat format, int64_t rows, int64_t cols) {
  return ::fsdp::quant::wireBytes(runtimeCode(format), rows, cols);
}

} // namespace mlir::fsdp

#endif

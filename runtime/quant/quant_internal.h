//===- quant_internal.h - argument checks shared by CPU and CUDA -*- C++
//-*-===//
//
// Error reporting and the shape rules of each format, used by the CPU
// reference and the CUDA entry points so both reject the same inputs with the
// same messages.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_QUANT_QUANT_INTERNAL_H
#define FSDPRT_QUANT_QUANT_INTERNAL_H

#include "fsdprt_quant.h"

#include <cstddef>
#include <cstdint>

namespace fsdprt {
namespace quant {

// Records a formatted message as this thread's last error; returns status.
fsdprt_status_t fail(fsdprt_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Argument checks; each returns FSDPRT_OK or records the failure.
fsdprt_status_t checkDtype(const char *fn, int dtype);
fsdprt_status_t checkKind(const char *fn, int kind);
// A pointer may be null only when it addresses zero elements.
fsdprt_status_t checkPtr(const char *fn, const char *name, const void *p,
                         size_t count);
// rows * cols without overflow.
fsdprt_status_t checkCount(const char *fn, size_t rows, size_t cols, size_t *n);
fsdprt_status_t checkMxfp8Shape(const char *fn, size_t rows, size_t cols,
                                int columnwise);
fsdprt_status_t checkNvfp4Shape(const char *fn, size_t rows, size_t cols);
fsdprt_status_t checkBlockShape(const char *fn, size_t rows, size_t cols,
                                int blockRows);

// The front door of the any-format entry points, CPU and CUDA
// (fsdprt_quant_quantize / _dequantize, fsdprt_quant_cuda_quantize /
// _dequantize and their _host forms): the format, the dtype, the [rows, cols]
// shape against the format's blocks, then every buffer the call reads or
// writes, which may be null only when it holds zero bytes: x, data, y (the
// elements), scales (layout->scale_bytes), tensor (the per-tensor fp32 value,
// layout->tensor_bytes) and amax (one float for the formats that read it).
// Fills *layout. Host or device pointers alike: only their nullness is read.
fsdprt_status_t checkQuantize(const char *fn, int format, const void *x,
                              int dtype, size_t rows, size_t cols,
                              const void *amax, const void *data,
                              const void *scales, const void *tensor,
                              fsdprt_quant_layout *layout);
fsdprt_status_t checkDequantize(const char *fn, int format, const void *data,
                                const void *scales, const void *tensor,
                                size_t rows, size_t cols, const void *y,
                                int outDtype, fsdprt_quant_layout *layout);

// Returns the status of `expr` from the calling function unless it is
// FSDPRT_OK.
#define FSDPRT_CHECK(expr)                                                     \
  do {                                                                         \
    const fsdprt_status_t status_ = (expr);                                    \
    if (status_ != FSDPRT_OK)                                                  \
      return status_;                                                          \
  } while (0)

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

inline size_t dtypeSize(int dtype) { return dtype == FSDPRT_QUANT_F32 ? 4 : 2; }

} // namespace quant
} // namespace fsdprt

#endif // FSDPRT_QUANT_QUANT_INTERNAL_H

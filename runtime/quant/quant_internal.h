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
int fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Argument checks; each returns FSDPRT_QUANT_OK or records the failure.
int checkDtype(const char *fn, int dtype);
int checkKind(const char *fn, int kind);
// A pointer may be null only when it addresses zero elements.
int checkPtr(const char *fn, const char *name, const void *p, size_t count);
// rows * cols without overflow.
int checkCount(const char *fn, size_t rows, size_t cols, size_t *n);
int checkMxfp8Shape(const char *fn, size_t rows, size_t cols, int columnwise);
int checkNvfp4Shape(const char *fn, size_t rows, size_t cols);
int checkBlockShape(const char *fn, size_t rows, size_t cols, int blockRows);

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

inline size_t dtypeSize(int dtype) { return dtype == FSDPRT_QUANT_F32 ? 4 : 2; }

} // namespace quant
} // namespace fsdprt

#endif // FSDPRT_QUANT_QUANT_INTERNAL_H

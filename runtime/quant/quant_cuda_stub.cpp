//===- quant_cuda_stub.cpp - CUDA entry points of a build without CUDA ----===//
//
// Keeps the C API complete when the CUDA toolkit is absent: every kernel
// entry point reports FSDPRT_ERR_UNSUPPORTED.
//
//===----------------------------------------------------------------------===//

#include "fsdprt_quant.h"
#include "quant_internal.h"

using fsdprt::quant::fail;

namespace {
fsdprt_status_t unsupported(const char *fn) {
  return fail(FSDPRT_ERR_UNSUPPORTED,
              "%s: this build of fsdprt_quant has no CUDA kernels (the CUDA "
              "toolkit was not found at configure time)",
              fn);
}
} // namespace

extern "C" {

int fsdprt_quant_cuda_available(void) { return 0; }

fsdprt_status_t fsdprt_quant_cuda_quantize_host(int, const void *, int, size_t,
                                                size_t, float, uint8_t *,
                                                void *, float *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_dequantize_host(int, const uint8_t *,
                                                  const void *, float, size_t,
                                                  size_t, void *, int) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_amax(const void *, int, size_t, float *,
                                       void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_tensor_quantize(const void *, int, size_t,
                                                      const float *, int,
                                                      uint8_t *, float *,
                                                      void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_tensor_dequantize(const uint8_t *, size_t,
                                                        int, const float *,
                                                        void *, int, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_mxfp8_quantize(const void *, int, size_t,
                                                 size_t, int, uint8_t *,
                                                 uint8_t *, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_mxfp8_dequantize(const uint8_t *,
                                                   const uint8_t *, size_t,
                                                   size_t, int, void *, int,
                                                   void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_nvfp4_quantize(const void *, int, size_t,
                                                 size_t, const float *,
                                                 uint8_t *, uint8_t *, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_nvfp4_dequantize(const uint8_t *,
                                                   const uint8_t *, size_t,
                                                   size_t, const float *,
                                                   void *, int, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_quantize(const void *, int, size_t,
                                                     size_t, int, int,
                                                     uint8_t *, float *,
                                                     void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_dequantize(const uint8_t *,
                                                       const float *, size_t,
                                                       size_t, int, void *, int,
                                                       void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_nvfp4_2d_quantize(const void *, int, size_t,
                                                    size_t, const float *,
                                                    uint8_t *, uint8_t *,
                                                    void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_quantize(const void *, int,
                                                             size_t, size_t,
                                                             int, uint8_t *,
                                                             float *, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(
    const uint8_t *, const float *, size_t, size_t, void *, int, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_swap_first_dims(const void *, void *, size_t,
                                                  size_t, size_t, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_quantize(int, const void *, int, size_t,
                                           size_t, const float *, uint8_t *,
                                           void *, float *, void *) {
  return unsupported(__func__);
}

fsdprt_status_t fsdprt_quant_cuda_dequantize(int, const uint8_t *, const void *,
                                             const float *, size_t, size_t,
                                             void *, int, void *) {
  return unsupported(__func__);
}

} // extern "C"

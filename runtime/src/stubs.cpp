// Entry points of backends that were not built into this library.
#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include <cstring>

extern "C" {

#ifndef FSDPRT_WITH_MPI
fsdprt_status_t fsdprt_mpi_comm_create(int32_t, const int64_t *,
                                       const fsdprt_options_t *,
                                       fsdprt_comm_t **comm) {
  if (comm)
    *comm = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}
#endif

#ifndef FSDPRT_WITH_NCCL
fsdprt_status_t fsdprt_nccl_get_unique_id(fsdprt_nccl_id_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_status_t fsdprt_nccl_comm_create(int32_t, const int64_t *, int64_t,
                                        const fsdprt_nccl_id_t *, int32_t,
                                        const fsdprt_options_t *,
                                        fsdprt_comm_t **comm) {
  if (comm)
    *comm = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_status_t fsdprt_nccl_comm_set_stream(fsdprt_comm_t *, void *) {
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_status_t fsdprt_nccl_comm_set_desync_checks(fsdprt_comm_t *, int64_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_gpu_context_t *fsdprt_nccl_comm_context(fsdprt_comm_t *) {
  return nullptr;
}
#endif

#ifndef FSDPRT_WITH_GPU
// The GPU runtime (runtime/cuda) was not built: every call reports it.
static const char kNoGpu[] = "this fsdprt was built without the CUDA toolkit "
                             "(no GPU runtime)";
#endif
#if !defined(FSDPRT_WITH_GPU) || !defined(FSDPRT_WITH_GPU_QUANT)
// Entry points of compiled code record the error on the thread's comm.
static void no_gpu() {
  fsdprt_comm_record_error(fsdprt_get_thread_comm(), FSDPRT_ERR_UNSUPPORTED,
                           "this fsdprt was built without the GPU runtime or "
                           "its quantization kernels");
}
#endif
#ifndef FSDPRT_WITH_GPU

int32_t fsdprt_gpu_built(void) { return 0; }
int32_t fsdprt_gpu_emulated(void) { return 0; }
fsdprt_status_t
fsdprt_gpu_register_host_kernels(const char *, const fsdprt_gpu_host_kernel_t *,
                                 int32_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}
void fsdprt_gpu_unregister_host_kernels(const char *) {}
int32_t fsdprt_gpu_emu_index(int32_t) { return 0; }
int32_t fsdprt_gpu_emu_shuffle_xor(int32_t value, int32_t, int32_t) {
  return value;
}
void fsdprt_gpu_emu_barrier(void) {}
fsdprt_status_t fsdprt_gpu_device_count(int32_t *count) {
  if (count)
    *count = 0;
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_require_devices(int32_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}
const char *fsdprt_gpu_last_error_message(void) { return kNoGpu; }
fsdprt_status_t fsdprt_gpu_context_create(int32_t, fsdprt_gpu_context_t **ctx) {
  if (ctx)
    *ctx = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}
void fsdprt_gpu_context_destroy(fsdprt_gpu_context_t *) {}
void fsdprt_gpu_set_thread_context(fsdprt_gpu_context_t *) {}
fsdprt_gpu_context_t *fsdprt_gpu_get_thread_context(void) { return nullptr; }
int32_t fsdprt_gpu_context_device(const fsdprt_gpu_context_t *) { return -1; }
void *fsdprt_gpu_compute_stream(const fsdprt_gpu_context_t *) {
  return nullptr;
}
void *fsdprt_gpu_comm_stream(const fsdprt_gpu_context_t *) { return nullptr; }
fsdprt_status_t fsdprt_gpu_synchronize(fsdprt_gpu_context_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_context_error(const fsdprt_gpu_context_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}
const char *fsdprt_gpu_context_error_message(const fsdprt_gpu_context_t *) {
  return kNoGpu;
}
fsdprt_status_t fsdprt_gpu_context_stats(const fsdprt_gpu_context_t *,
                                         fsdprt_gpu_stats_t *stats) {
  if (stats)
    std::memset(stats, 0, sizeof(*stats));
  return FSDPRT_ERR_UNSUPPORTED;
}
void *fsdprt_gpu_alloc(int64_t) { return nullptr; }
void *fsdprt_gpu_arena(int64_t) { return nullptr; }
void *fsdprt_gpu_scratch(int64_t) { return nullptr; }
int32_t fsdprt_gpu_owned_by_context(const void *) { return 0; }
void fsdprt_gpu_free(void *) {}
fsdprt_status_t fsdprt_gpu_copy_on_device(void *, const void *, int64_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_capture_begin(fsdprt_gpu_context_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_capture_end(fsdprt_gpu_context_t *,
                                       fsdprt_gpu_graph_t **graph) {
  if (graph)
    *graph = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_graph_launch(fsdprt_gpu_graph_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}
void fsdprt_gpu_graph_destroy(fsdprt_gpu_graph_t *) {}
fsdprt_status_t fsdprt_gpu_copy_to_device(void *, const void *, int64_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}
fsdprt_status_t fsdprt_gpu_copy_to_host(void *, const void *, int64_t) {
  return FSDPRT_ERR_UNSUPPORTED;
}
void fsdprt_gpu_gemm_f32(int32_t, int32_t, int64_t, int64_t, int64_t, float,
                         const float *, int64_t, int64_t, const float *,
                         int64_t, int64_t, float, float *, int64_t, int64_t,
                         int64_t) {
  no_gpu();
}
void fsdprt_gpu_gemm_bf16(int32_t, int32_t, int64_t, int64_t, int64_t, float,
                          const uint16_t *, int64_t, int64_t, const uint16_t *,
                          int64_t, int64_t, float, uint16_t *, int64_t, int64_t,
                          int64_t) {
  no_gpu();
}
void fsdprt_gpu_gemm_bf16_f32(int32_t, int32_t, int64_t, int64_t, int64_t,
                              float, const uint16_t *, int64_t, int64_t,
                              const uint16_t *, int64_t, int64_t, float,
                              float *, int64_t, int64_t, int64_t) {
  no_gpu();
}
void fsdprt_gpu_set_tf32(int32_t) {}
int32_t fsdprt_gpu_attention_head_dim_supported(int64_t) { return 0; }
void fsdprt_gpu_attention_fwd_f32(const float *, const float *, const float *,
                                  const float *, int64_t, int64_t, int64_t,
                                  int64_t, float *, float *, int64_t, int64_t,
                                  int64_t, int64_t, int64_t, float, int32_t) {
  no_gpu();
}
void fsdprt_gpu_attention_fwd_bf16(const uint16_t *, const uint16_t *,
                                   const uint16_t *, const uint16_t *, int64_t,
                                   int64_t, int64_t, int64_t, uint16_t *,
                                   float *, int64_t, int64_t, int64_t, int64_t,
                                   int64_t, float, int32_t) {
  no_gpu();
}
void fsdprt_gpu_attention_bwd_f32(const float *, const float *, const float *,
                                  const float *, int64_t, int64_t, int64_t,
                                  int64_t, const float *, const float *,
                                  const float *, float *, float *, float *,
                                  int64_t, int64_t, int64_t, int64_t, int64_t,
                                  float, int32_t) {
  no_gpu();
}
void fsdprt_gpu_attention_bwd_bf16(const uint16_t *, const uint16_t *,
                                   const uint16_t *, const uint16_t *, int64_t,
                                   int64_t, int64_t, int64_t, const uint16_t *,
                                   const uint16_t *, const float *, uint16_t *,
                                   uint16_t *, uint16_t *, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, float, int32_t) {
  no_gpu();
}
#endif

#if !defined(FSDPRT_WITH_GPU) || !defined(FSDPRT_WITH_GPU_QUANT)
void fsdprt_gpu_quant_amax(const void *, void *, int64_t, int32_t) { no_gpu(); }
void fsdprt_gpu_quantize(const void *, const void *, void *, int64_t, int32_t,
                         int32_t, int64_t, int64_t) {
  no_gpu();
}
void fsdprt_gpu_dequantize(const void *, void *, int64_t, int32_t, int32_t,
                           int64_t, int64_t) {
  no_gpu();
}
#endif

} // extern "C"

/*
 * fsdprt_gpu.h - the GPU runtime of fsdprt: per-rank device contexts, the
 * device allocator, cuBLAS GEMMs and the quantization kernels on device
 * buffers, plus the mgpu* entry points that MLIR's gpu-to-llvm host code
 * calls. Plain C, no CUDA types: streams and events are void pointers.
 *
 * A rank thread works on one GPU through its context: the device, its
 * primary CUDA context, a compute stream (kernels, GEMMs, copies), a
 * communication stream (NCCL), a cuBLAS handle and a pool of events. The
 * runtime makes a context current on the thread that creates it, and
 * fsdprt_set_thread_comm() with an nccl communicator makes that
 * communicator's context current; threads that work without one call
 * fsdprt_gpu_set_thread_context().
 *
 * Entry points that return void (the ones compiled code calls) record their
 * first error on the thread's context (fsdprt_gpu_context_error) and, when
 * the thread has a communicator, on it too (fsdprt_comm_error), and do
 * nothing after an error, so that a failing step runs to its end and the
 * runner reports what failed. See docs/GPU.md, "Runtime".
 */
#ifndef FSDPRT_GPU_H
#define FSDPRT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "fsdprt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsdprt_gpu_context fsdprt_gpu_context_t;

/* ---- devices ------------------------------------------------------------ */

/* 1 if this library was built with the CUDA runtime, else 0 (then every
 * other function fails with FSDPRT_ERR_UNSUPPORTED). */
FSDPRT_API int32_t fsdprt_gpu_built(void);
/* 1 in the build of this library over the host emulation of CUDA (its GPUs
 * are threads of this process; it runs steps compiled with
 * gpu-emulation=true), 0 in a build over the real CUDA runtime. */
FSDPRT_API int32_t fsdprt_gpu_emulated(void);
/* Number of usable GPUs. FSDPRT_ERR_NO_DEVICE when there is no driver, no
 * GPU or a driver older than the CUDA runtime this library was built with;
 * the reason is in fsdprt_gpu_last_error_message(). */
FSDPRT_API fsdprt_status_t fsdprt_gpu_device_count(int32_t *count);
/* OK when at least `devices` GPUs are usable, else FSDPRT_ERR_NO_DEVICE
 * with a message naming what is missing ("2 GPUs needed for 2 ranks, 1
 * found"). */
FSDPRT_API fsdprt_status_t fsdprt_gpu_require_devices(int32_t devices);
/* Why the last failing call of this thread failed ("" when none). The
 * string is thread-local, valid until the next call on this thread. */
FSDPRT_API const char *fsdprt_gpu_last_error_message(void);

/* ---- rank contexts ------------------------------------------------------ */

/* A context on `device` (its primary CUDA context, two non-blocking streams,
 * an event pool; cuBLAS is created on the first GEMM). Makes it current on
 * the calling thread. */
FSDPRT_API fsdprt_status_t
fsdprt_gpu_context_create(int32_t device, fsdprt_gpu_context_t **ctx);
/* Synchronizes and frees the context's streams, events and handles. No
 * thread may be using it; it stops being current on the calling thread. */
FSDPRT_API void fsdprt_gpu_context_destroy(fsdprt_gpu_context_t *ctx);
/* The context that this thread's GPU calls use (NULL: none); also selects
 * the context's device for the CUDA runtime. */
FSDPRT_API void fsdprt_gpu_set_thread_context(fsdprt_gpu_context_t *ctx);
FSDPRT_API fsdprt_gpu_context_t *fsdprt_gpu_get_thread_context(void);

FSDPRT_API int32_t fsdprt_gpu_context_device(const fsdprt_gpu_context_t *ctx);
/* The context's cudaStream_t values. */
FSDPRT_API void *fsdprt_gpu_compute_stream(const fsdprt_gpu_context_t *ctx);
FSDPRT_API void *fsdprt_gpu_comm_stream(const fsdprt_gpu_context_t *ctx);
/* Waits for both streams; returns the context's first error if any. */
FSDPRT_API fsdprt_status_t fsdprt_gpu_synchronize(fsdprt_gpu_context_t *ctx);
/* First error recorded on the context (sticky) and its message. */
FSDPRT_API fsdprt_status_t
fsdprt_gpu_context_error(const fsdprt_gpu_context_t *ctx);
FSDPRT_API const char *
fsdprt_gpu_context_error_message(const fsdprt_gpu_context_t *ctx);

/* The context of an nccl communicator (NULL for other backends). */
FSDPRT_API fsdprt_gpu_context_t *fsdprt_nccl_comm_context(fsdprt_comm_t *comm);

/* Counters of a context, for tests and profiles. */
typedef struct fsdprt_gpu_stats {
  uint64_t events_created; /* cudaEventCreate calls (pool misses) */
  uint64_t events_free;    /* events in the pool now */
  uint64_t launches;       /* kernels launched through mgpuLaunchKernel */
  uint64_t module_loads;   /* module loads this context triggered (one per
                              module and device, by its first launch) */
  uint64_t gemms;
  uint64_t bytes_allocated; /* bytes handed out by fsdprt_gpu_alloc (total) */
  uint64_t bytes_live;      /* of those, not yet freed */
  uint64_t bytes_peak;      /* the most live at once, in stream order */
  uint64_t allocations;     /* device allocations made (arena included) */
  uint64_t arena_bytes;     /* the size of the step's device arena */
  uint64_t scratch_bytes;   /* the size of the context's scratch buffer */
  uint64_t host_waits;      /* host synchronizations inside entry points a
                               step calls (a host read of a device value, a
                               blocking collective, a descriptor check) */
  uint64_t graph_launches;  /* CUDA graph launches (fsdprt_gpu_graph_launch) */
  uint64_t split_gemms;     /* of the gemms, those split along K
                               (fsdprt_gpu_split_k.h) */
} fsdprt_gpu_stats_t;
FSDPRT_API fsdprt_status_t fsdprt_gpu_context_stats(
    const fsdprt_gpu_context_t *ctx, fsdprt_gpu_stats_t *stats);

/* ---- memory ------------------------------------------------------------- */

/* Device memory on the thread context's device, stream-ordered on its
 * compute stream (cudaMallocAsync): usable by work enqueued after the call.
 * NULL on failure (FSDPRT_ERR_OUT_OF_MEMORY recorded with the sizes).
 * Zero bytes gives a unique non-NULL pointer. */
FSDPRT_API void *fsdprt_gpu_alloc(int64_t bytes);
/* Frees after the work already enqueued on the compute stream. NULL, or a
 * pointer into the context's arena or scratch buffer (a step's result in
 * the arena): no-op. */
FSDPRT_API void fsdprt_gpu_free(void *ptr);
/* The thread context's device arena, at least `bytes` bytes, for the
 * buffers a compute=gpu step plans into one arena (fsdp-assign-buffers
 * calls it at the start of every step in place of fsdprt_jit_arena): the
 * first call allocates it, later calls return the same base, so a step
 * allocates nothing. A larger request replaces it after the work already
 * enqueued on both of the context's streams. 256-byte aligned; NULL on
 * failure (FSDPRT_ERR_OUT_OF_MEMORY recorded with the sizes). Freed with
 * the context. */
FSDPRT_API void *fsdprt_gpu_arena(int64_t bytes);
/* The thread context's device scratch buffer, at least `bytes` bytes: the
 * split reductions' partials of a compute=gpu step (fsdp-gpu-kernels), the
 * fused attention backward's row terms, the quantization's misaligned parts,
 * the split-K gemms' partials; its users run in stream order on the compute
 * stream and reuse it from its start. Allocated on the first request, reused by
 * later ones, replaced (after the work already enqueued) by a larger one;
 * 256-byte aligned; NULL on failure. Freed with the context. */
FSDPRT_API void *fsdprt_gpu_scratch(int64_t bytes);
/* 1 when `ptr` points into the context's arena or scratch buffer (memory the
 * context owns: fsdprt_gpu_free leaves it alone), else 0. */
FSDPRT_API int32_t fsdprt_gpu_owned_by_context(const void *ptr);
/* A device-to-device copy on the compute stream, asynchronous for the host
 * (no allocation, no wait). */
FSDPRT_API fsdprt_status_t fsdprt_gpu_copy_on_device(void *dst, const void *src,
                                                     int64_t bytes);
/* ---- CUDA graphs ----------------------------------------------------------
 */

/* A step's device work captured once and replayed (cudaGraphExec_t). */
typedef struct fsdprt_gpu_graph fsdprt_gpu_graph_t;
/* Starts capturing the context's compute stream (thread-local capture
 * mode): the device work enqueued from here -- kernels, copies, cuBLAS,
 * collectives, whose communication stream joins the capture -- is recorded,
 * not run. While capturing, an entry point that would allocate device memory
 * or wait on the host records an FSDPRT_ERR_UNSUPPORTED error on the
 * context instead; collectives are neither followed by the watchdog nor
 * timed. The context must be the calling thread's. */
FSDPRT_API fsdprt_status_t fsdprt_gpu_capture_begin(fsdprt_gpu_context_t *ctx);
/* Ends the capture and instantiates the graph (`*graph`; NULL and the error
 * when the capture failed). */
FSDPRT_API fsdprt_status_t fsdprt_gpu_capture_end(fsdprt_gpu_context_t *ctx,
                                                  fsdprt_gpu_graph_t **graph);
/* Enqueues one replay of the graph on its context's compute stream
 * (asynchronous for the host, like the step it replaces). */
FSDPRT_API fsdprt_status_t fsdprt_gpu_graph_launch(fsdprt_gpu_graph_t *graph);
FSDPRT_API void fsdprt_gpu_graph_destroy(fsdprt_gpu_graph_t *graph);

/* Host <-> device copies ordered on the compute stream. to_device returns
 * once `src` may be reused; to_host once `dst` holds the data. */
FSDPRT_API fsdprt_status_t fsdprt_gpu_copy_to_device(void *dst, const void *src,
                                                     int64_t bytes);
FSDPRT_API fsdprt_status_t fsdprt_gpu_copy_to_host(void *dst, const void *src,
                                                   int64_t bytes);

/* ---- cuBLAS ------------------------------------------------------------- */
/*
 * Row-major, strided-batched: for b in [0, batch)
 *   C_b = alpha * op(A_b) * op(B_b) + beta * C_b
 * with op(A_b) [m, k], op(B_b) [k, n], C_b [m, n]; trans_a / trans_b are 0 or
 * 1 (A stored [k, m] when 1); lda / ldb / ldc are row strides and
 * stride_* the distances between batch entries, all in elements. Enqueued
 * on the thread context's compute stream. bf16 inputs and outputs
 * accumulate in f32. f32 uses TF32 tensor cores only after
 * fsdprt_gpu_set_tf32(1).
 *
 * A bf16 gemm whose output tiles under-fill the device's last wave is split
 * along K as fsdprt_gpu_split_k_plan says (fsdprt_gpu_split_k.h): f32
 * partials in the context's scratch buffer (no allocation after the first
 * call of a size; CUDA-graph capturable), summed in slice order by one
 * reduction kernel, which applies alpha, beta and the output's dtype. The
 * environment variable FSDPRT_GPU_SPLIT_K overrides the policy, for tests:
 * 0 never splits, N >= 2 splits every bf16 gemm into N slices where K
 * allows. f32 gemms are never split.
 */
FSDPRT_API void fsdprt_gpu_gemm_f32(int32_t trans_a, int32_t trans_b, int64_t m,
                                    int64_t n, int64_t k, float alpha,
                                    const float *a, int64_t lda,
                                    int64_t stride_a, const float *b,
                                    int64_t ldb, int64_t stride_b, float beta,
                                    float *c, int64_t ldc, int64_t stride_c,
                                    int64_t batch);
FSDPRT_API void
fsdprt_gpu_gemm_bf16(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                     int64_t k, float alpha, const uint16_t *a, int64_t lda,
                     int64_t stride_a, const uint16_t *b, int64_t ldb,
                     int64_t stride_b, float beta, uint16_t *c, int64_t ldc,
                     int64_t stride_c, int64_t batch);
/* bf16 A and B, f32 C (fsdp-autocast's contractions: the f32 accumulator
 * is the result, rounded to bf16 by the next kernel). */
FSDPRT_API void
fsdprt_gpu_gemm_bf16_f32(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const uint16_t *a, int64_t lda,
                         int64_t stride_a, const uint16_t *b, int64_t ldb,
                         int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int64_t batch);
/* Process-wide; off by default (f32 GEMMs are exact fp32 products). */
FSDPRT_API void fsdprt_gpu_set_tf32(int32_t enable);

/* ---- fused attention ----------------------------------------------------- */
/*
 * softmax(Q K^T * scale + mask) V in one pass over K and V (FlashAttention-2:
 * online softmax with f32 accumulation, no [tq, tk] buffer), and its
 * backward, on the thread context's compute stream. Q, O, dO and dQ are
 * contiguous [batch, heads, tq, head_dim]; K, V, dK and dV contiguous
 * [batch, heads, tk, head_dim]; bf16 tensors (bit patterns) compute in f32.
 * head_dim is 16, 32, 64, 96 or 128 (fsdprt_gpu_attention_head_dim_supported);
 * any tq and tk.
 *
 * causal = 1 hides key j from query i when j > i (torch's is_causal: the
 * top-left-aligned lower triangle). mask (NULL: none) is additive, of the
 * inputs' dtype, element (b, h, i, j) at mask[b * mask_stride_b + h *
 * mask_stride_h + i * mask_stride_q + j * mask_stride_k] (strides in
 * elements; 0 broadcasts, e.g. a [tq, tk] mask has strides 0, 0, tk, 1).
 *
 * The forward writes O and lse [batch, heads, tq] (f32, natural log of the
 * row's sum of exp(score)), which the backward takes with O and dO to
 * recompute the probabilities. A row whose scores are all -inf (fully
 * masked) has O = 0 and lse = -inf, and contributes nothing to dQ, dK, dV
 * (as torch's scaled_dot_product_attention; a plain softmax of the scores
 * gives NaN there). The backward is deterministic
 * (no atomics: bit-identical results from run to run) and allocates
 * batch * heads * tq floats of stream-ordered scratch.
 */
FSDPRT_API int32_t fsdprt_gpu_attention_head_dim_supported(int64_t head_dim);
FSDPRT_API void fsdprt_gpu_attention_fwd_f32(
    const float *q, const float *k, const float *v, const float *mask,
    int64_t mask_stride_b, int64_t mask_stride_h, int64_t mask_stride_q,
    int64_t mask_stride_k, float *o, float *lse, int64_t batch, int64_t heads,
    int64_t tq, int64_t tk, int64_t head_dim, float scale, int32_t causal);
FSDPRT_API void fsdprt_gpu_attention_fwd_bf16(
    const uint16_t *q, const uint16_t *k, const uint16_t *v,
    const uint16_t *mask, int64_t mask_stride_b, int64_t mask_stride_h,
    int64_t mask_stride_q, int64_t mask_stride_k, uint16_t *o, float *lse,
    int64_t batch, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim,
    float scale, int32_t causal);
FSDPRT_API void fsdprt_gpu_attention_bwd_f32(
    const float *q, const float *k, const float *v, const float *mask,
    int64_t mask_stride_b, int64_t mask_stride_h, int64_t mask_stride_q,
    int64_t mask_stride_k, const float *o, const float *dout, const float *lse,
    float *dq, float *dk, float *dv, int64_t batch, int64_t heads, int64_t tq,
    int64_t tk, int64_t head_dim, float scale, int32_t causal);
FSDPRT_API void fsdprt_gpu_attention_bwd_bf16(
    const uint16_t *q, const uint16_t *k, const uint16_t *v,
    const uint16_t *mask, int64_t mask_stride_b, int64_t mask_stride_h,
    int64_t mask_stride_q, int64_t mask_stride_k, const uint16_t *o,
    const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk,
    uint16_t *dv, int64_t batch, int64_t heads, int64_t tq, int64_t tk,
    int64_t head_dim, float scale, int32_t causal);

/* ---- scatter-add of rows (the embedding backward) ----------------------- */
/*
 * output[indices[t], :] += source[t, :] for t = 0 .. tokens - 1, on the
 * thread context's compute stream: the embedding backward of a compute=gpu
 * step (fsdp-gpu-scatter-add). Element (t, n) of source is at
 * source[t * source_token_stride + n * source_col_stride], element (s, n) of
 * output at output[s * output_slot_stride + n * output_col_stride], index t
 * at indices[t * index_stride] (index_bits 32: int32_t, 64: int64_t); all
 * strides in elements. An index outside [0, slots) adds nothing.
 *
 * Deterministic, without float atomics: the tokens are sorted by (index,
 * position) on the device, and each output element is its value plus its
 * tokens' elements added in token order -- the host loop's sum, bit for bit,
 * the same from run to run (bf16: rounded to bf16 after each addition).
 * Its next_pow2(tokens) 64-bit sort keys live in the context's scratch
 * buffer (fsdprt_gpu_scratch): no allocation after the first call of a
 * size. Tokens below 2^31, slots below 2^32 - 1, width at most 2^23.
 */
FSDPRT_API void fsdprt_gpu_scatter_add_rows_f32(
    const void *indices, int32_t index_bits, int64_t index_stride,
    int64_t tokens, const float *source, int64_t source_token_stride,
    int64_t source_col_stride, float *output, int64_t output_slot_stride,
    int64_t output_col_stride, int64_t slots, int64_t width);
FSDPRT_API void fsdprt_gpu_scatter_add_rows_bf16(
    const void *indices, int32_t index_bits, int64_t index_stride,
    int64_t tokens, const uint16_t *source, int64_t source_token_stride,
    int64_t source_col_stride, uint16_t *output, int64_t output_slot_stride,
    int64_t output_col_stride, int64_t slots, int64_t width);

/* ---- grouped matrix products (sparse mixture of experts) --------------- */
/*
 * The grouped products of a sparse mixture of experts on the thread
 * context's compute stream (fsdp-gpu-grouped-matmul). The rows
 * 0 .. rows - 1 of lhs [rows, k] are in `groups` groups: group g ends
 * (exclusively) at offsets[g * offset_stride] (offset_bits 32: int32_t, 64:
 * int64_t), at least where group g - 1 ends and at most `rows`; group 0
 * starts at row 0. The offsets are read on the device: the call never waits
 * for the stream.
 *
 * transpose_lhs 0, rhs [groups, k, n], out [rows, n]:
 *   out[r, :] = lhs[r, :] @ rhs[g]   for r in group g; rows after the last
 *                                   group are zero.
 * transpose_lhs 1, rhs [rows, n], out [groups, k, n]:
 *   out[g] = sum over r in group g of lhs[r, :]^T rhs[r, :] (zero if empty).
 *
 * Element (i, j) of lhs is at lhs[i * lhs_row + j * lhs_col], element
 * (g, i, j) of rhs at rhs[g * rhs_group + i * rhs_row + j * rhs_col] and of
 * out likewise; rhs_group is unused with transpose_lhs 1, out_group with 0.
 * Strides in elements. Every element of out is written. f32, or bf16
 * operands and result with f32 accumulation (rounded once, to nearest
 * even); deterministic (no atomics).
 */
FSDPRT_API void fsdprt_gpu_grouped_matmul_f32(
    int32_t transpose_lhs, const void *offsets, int32_t offset_bits,
    int64_t offset_stride, int64_t groups, const float *lhs, int64_t lhs_row,
    int64_t lhs_col, const float *rhs, int64_t rhs_group, int64_t rhs_row,
    int64_t rhs_col, float *out, int64_t out_group, int64_t out_row,
    int64_t out_col, int64_t rows, int64_t k, int64_t n);
FSDPRT_API void fsdprt_gpu_grouped_matmul_bf16(
    int32_t transpose_lhs, const void *offsets, int32_t offset_bits,
    int64_t offset_stride, int64_t groups, const uint16_t *lhs, int64_t lhs_row,
    int64_t lhs_col, const uint16_t *rhs, int64_t rhs_group, int64_t rhs_row,
    int64_t rhs_col, uint16_t *out, int64_t out_group, int64_t out_row,
    int64_t out_col, int64_t rows, int64_t k, int64_t n);

/* ---- quantization on device buffers ---------------------------------------
 */
/*
 * The device forms of fsdprt_jit_quant_amax / fsdprt_jit_quantize /
 * fsdprt_jit_dequantize (fsdprt.h, docs/QUANTIZATION.md): every pointer is a
 * device pointer (amax too), the kernels run on the compute stream, packets
 * have the same bytes as the host path's ([data | scales | per-tensor fp32]),
 * results are bit-identical to the CPU reference. Between quantize and
 * dequantize the packets travel with a U8 all-gather on device buffers.
 */
FSDPRT_API void fsdprt_gpu_quant_amax(const void *x, void *amax, int64_t count,
                                      int32_t dtype);
FSDPRT_API void fsdprt_gpu_quantize(const void *x, const void *amax,
                                    void *packet, int64_t count, int32_t dtype,
                                    int32_t format, int64_t rows, int64_t cols);
FSDPRT_API void fsdprt_gpu_dequantize(const void *packets, void *y, int64_t k,
                                      int32_t dtype, int32_t format,
                                      int64_t rows, int64_t cols);

/* ---- MLIR gpu-to-llvm ABI (LLVM 22) ---------------------------------------
 */
/*
 * What the host code of a lowered GPU module calls. Module loads run from
 * global constructors, before any rank exists, so they only register the
 * image; each device loads it on its first launch there. Launches, copies
 * and allocations use the calling thread's context: mgpuStreamCreate
 * returns its compute stream (destroying it is a no-op; synchronizing it
 * waits only when host-visible work is pending), events come from its pool.
 */
FSDPRT_API void *mgpuModuleLoad(void *data, int64_t size);
/* A module of PTX text (a step lowered with gpu-format=isa): NUL-terminated,
 * registered like mgpuModuleLoad's images; the driver compiles it at its
 * first launch on each device (the optimization level is the driver's). */
FSDPRT_API void *mgpuModuleLoadJIT(void *data, int32_t opt_level);
FSDPRT_API void mgpuModuleUnload(void *module);
FSDPRT_API void *mgpuModuleGetFunction(void *module, const char *name);
FSDPRT_API void mgpuLaunchKernel(void *function, int64_t grid_x, int64_t grid_y,
                                 int64_t grid_z, int64_t block_x,
                                 int64_t block_y, int64_t block_z, int32_t smem,
                                 void *stream, void **params, void **extra,
                                 int64_t nparams);
FSDPRT_API void *mgpuStreamCreate(void);
FSDPRT_API void mgpuStreamDestroy(void *stream);
FSDPRT_API void mgpuStreamSynchronize(void *stream);
FSDPRT_API void mgpuStreamWaitEvent(void *stream, void *event);
FSDPRT_API void *mgpuEventCreate(void);
FSDPRT_API void mgpuEventDestroy(void *event);
FSDPRT_API void mgpuEventSynchronize(void *event);
FSDPRT_API void mgpuEventRecord(void *event, void *stream);
FSDPRT_API void *mgpuMemAlloc(int64_t bytes, void *stream, int8_t host_shared);
FSDPRT_API void mgpuMemFree(void *ptr, void *stream);
FSDPRT_API void mgpuMemcpy(void *dst, void *src, int64_t bytes, void *stream);
FSDPRT_API void mgpuMemset32(void *dst, uint32_t value, int64_t count,
                             void *stream);
FSDPRT_API void mgpuMemset16(void *dst, uint16_t value, int64_t count,
                             void *stream);
/* Upstream's device selector; a no-op here (the thread's context decides). */
FSDPRT_API void mgpuSetDefaultDevice(int32_t device);

/* ---- kernels compiled for the host emulation (gpu-emulation=true) --------
 */
/*
 * A step lowered with `compute=gpu gpu-emulation=true` (docs/GPU.md,
 * "Emulation") runs its kernels as host functions on the emulated runtime
 * (build/lib/cuda-emulation/libfsdprt.so): its global constructor
 * registers the step's kernel table under an id, which its gpu.binary
 * image ({FSDPRT_GPU_HOST_KERNELS_MAGIC, version 1, id, NUL}) names. This
 * library loads such an image only when fsdprt_gpu_emulated() is 1;
 * elsewhere registration returns FSDPRT_ERR_UNSUPPORTED and a launch of
 * the step's kernels fails with a message naming the kernel.
 */
#define FSDPRT_GPU_HOST_KERNELS_MAGIC 0x4b485346u /* "FSHK" */
#define FSDPRT_GPU_HOST_KERNEL_LOCKSTEP 1         /* shuffles or barriers */
typedef struct fsdprt_gpu_host_kernel {
  const char *name;                /* the gpu.func's name */
  void (*fn)(void *const *params); /* one CUDA thread; params[i] -> arg i */
  const int64_t *param_sizes;      /* bytes of each argument */
  int32_t nparams;
  int32_t flags; /* FSDPRT_GPU_HOST_KERNEL_LOCKSTEP */
} fsdprt_gpu_host_kernel_t;
FSDPRT_API fsdprt_status_t fsdprt_gpu_register_host_kernels(
    const char *id, const fsdprt_gpu_host_kernel_t *kernels, int32_t count);
/* Removes the registration made with this `id` pointer. */
FSDPRT_API void fsdprt_gpu_unregister_host_kernels(const char *id);
/* What the kernels call: which = 3 * kind + dimension with kinds thread
 * index, block index, block size, grid size; a warp shuffle (xor) of a
 * 32-bit word; a block barrier. */
FSDPRT_API int32_t fsdprt_gpu_emu_index(int32_t which);
FSDPRT_API int32_t fsdprt_gpu_emu_shuffle_xor(int32_t value, int32_t offset,
                                              int32_t width);
FSDPRT_API void fsdprt_gpu_emu_barrier(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDPRT_GPU_H */

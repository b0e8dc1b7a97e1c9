// Fused attention on the rank's compute stream
// (fsdprt_gpu_attention_fwd_* / _bwd_*): argument checks, the backward's
// stream-ordered scratch for rowsum(dO * O), and the kernels of
// attention_kernels.cu. Without a CUDA compiler at build time the entry
// points record FSDPRT_ERR_UNSUPPORTED.
#include "gpu_internal.h"

#ifdef FSDPRT_WITH_GPU_ATTENTION
#include "attention_kernels.h"
#endif

#include <cstdint>
#include <string>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

struct Call {
  bool bf16;
  const void *q, *k, *v, *mask;
  int64_t ms[4];
  const void *o, *dout;
  void *out;
  float *lse;
  void *dq, *dk, *dv;
  int64_t batch, heads, tq, tk, d;
  float scale;
  int32_t causal;
};

std::string describe(const Call &c) {
  return format("batch=%lld, heads=%lld, tq=%lld, tk=%lld, head_dim=%lld",
                (long long)c.batch, (long long)c.heads, (long long)c.tq,
                (long long)c.tk, (long long)c.d);
}

// "" when the call is valid.
std::string bad_call(const Call &c, bool backward) {
  if (c.batch < 0 || c.heads < 0 || c.tq < 0 || c.tk < 0 || c.d < 0)
    return "negative size";
  if (c.causal != 0 && c.causal != 1)
    return "causal must be 0 or 1";
#ifdef FSDPRT_WITH_GPU_ATTENTION
  if (!attention::head_dim_supported(c.d))
    return "head_dim must be 16, 32, 64, 96 or 128";
#endif
  if (c.batch * c.heads == 0)
    return "";
  const bool rows = c.tq > 0, keys = c.tk > 0;
  if ((rows && !c.q) || (rows && keys && (!c.k || !c.v)))
    return "null q, k or v";
  if (!backward && rows && (!c.out || !c.lse))
    return "null o or lse";
  if (backward && rows && (!c.o || !c.dout || !c.lse || !c.dq))
    return "null o, dout, lse or dq";
  if (backward && keys && (!c.dk || !c.dv))
    return "null dk or dv";
#ifdef FSDPRT_WITH_GPU_ATTENTION
  attention::Args a;
  a.batch = c.batch;
  a.heads = c.heads;
  a.tq = c.tq;
  a.tk = c.tk;
  a.d = c.d;
  const std::string size = attention::bad_size(a);
  if (!size.empty())
    return size;
#endif
  return "";
}

#ifdef FSDPRT_WITH_GPU_ATTENTION
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

void run(const char *fn, const Call &c, bool backward) {
  fsdprt_gpu_context *ctx =
      kernel_entry(fn, describe(c), bad_call(c, backward), kBuilt, "attention");
  if (!ctx)
    return;
#ifdef FSDPRT_WITH_GPU_ATTENTION
  attention::Args a;
  a.bf16 = c.bf16;
  a.q = c.q;
  a.k = c.k;
  a.v = c.v;
  a.mask = c.mask;
  for (int i = 0; i < 4; ++i)
    a.mask_stride[i] = c.ms[i];
  a.o = c.o;
  a.dout = c.dout;
  a.out = c.out;
  a.lse = c.lse;
  a.dq = c.dq;
  a.dk = c.dk;
  a.dv = c.dv;
  a.batch = c.batch;
  a.heads = c.heads;
  a.tq = c.tq;
  a.tk = c.tk;
  a.d = c.d;
  a.scale = c.scale;
  a.causal = c.causal != 0;
  // The backward's row terms live in the context's scratch buffer (kept
  // from step to step: no allocation per call).
  if (backward && c.batch * c.heads * c.tq > 0) {
    void *scratch =
        scratch_named(c.batch * c.heads * c.tq * int64_t(sizeof(float)), fn);
    if (!scratch)
      return;
    a.delta = static_cast<float *>(scratch);
  }
  const cudaError_t rc = backward ? attention::backward(a, ctx->compute)
                                  : attention::forward(a, ctx->compute);
  failed(ctx, rc, fn, "launching the attention kernels");
#endif
}

} // namespace

extern "C" {

int32_t fsdprt_gpu_attention_head_dim_supported(int64_t head_dim) {
#ifdef FSDPRT_WITH_GPU_ATTENTION
  return attention::head_dim_supported(head_dim) ? 1 : 0;
#else
  (void)head_dim;
  return 0;
#endif
}

void fsdprt_gpu_attention_fwd_f32(
    const float *q, const float *k, const float *v, const float *mask,
    int64_t mask_stride_b, int64_t mask_stride_h, int64_t mask_stride_q,
    int64_t mask_stride_k, float *o, float *lse, int64_t batch, int64_t heads,
    int64_t tq, int64_t tk, int64_t head_dim, float scale, int32_t causal) {
  run("fsdprt_gpu_attention_fwd_f32",
      Call{
          false,   q,
          k,       v,
          mask,    {mask_stride_b, mask_stride_h, mask_stride_q, mask_stride_k},
          nullptr, nullptr,
          o,       lse,
          nullptr, nullptr,
          nullptr, batch,
          heads,   tq,
          tk,      head_dim,
          scale,   causal},
      false);
}

void fsdprt_gpu_attention_fwd_bf16(const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const uint16_t *mask,
                                   int64_t mask_stride_b, int64_t mask_stride_h,
                                   int64_t mask_stride_q, int64_t mask_stride_k,
                                   uint16_t *o, float *lse, int64_t batch,
                                   int64_t heads, int64_t tq, int64_t tk,
                                   int64_t head_dim, float scale,
                                   int32_t causal) {
  run("fsdprt_gpu_attention_fwd_bf16",
      Call{
          true,    q,
          k,       v,
          mask,    {mask_stride_b, mask_stride_h, mask_stride_q, mask_stride_k},
          nullptr, nullptr,
          o,       lse,
          nullptr, nullptr,
          nullptr, batch,
          heads,   tq,
          tk,      head_dim,
          scale,   causal},
      false);
}

void fsdprt_gpu_attention_bwd_f32(
    const float *q, const float *k, const float *v, const float *mask,
    int64_t mask_stride_b, int64_t mask_stride_h, int64_t mask_stride_q,
    int64_t mask_stride_k, const float *o, const float *dout, const float *lse,
    float *dq, float *dk, float *dv, int64_t batch, int64_t heads, int64_t tq,
    int64_t tk, int64_t head_dim, float scale, int32_t causal) {
  run("fsdprt_gpu_attention_bwd_f32",
      Call{
          false,   q,
          k,       v,
          mask,    {mask_stride_b, mask_stride_h, mask_stride_q, mask_stride_k},
          o,       dout,
          nullptr, const_cast<float *>(lse),
          dq,      dk,
          dv,      batch,
          heads,   tq,
          tk,      head_dim,
          scale,   causal},
      true);
}

void fsdprt_gpu_attention_bwd_bf16(const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const uint16_t *mask,
                                   int64_t mask_stride_b, int64_t mask_stride_h,
                                   int64_t mask_stride_q, int64_t mask_stride_k,
                                   const uint16_t *o, const uint16_t *dout,
                                   const float *lse, uint16_t *dq, uint16_t *dk,
                                   uint16_t *dv, int64_t batch, int64_t heads,
                                   int64_t tq, int64_t tk, int64_t head_dim,
                                   float scale, int32_t causal) {
  run("fsdprt_gpu_attention_bwd_bf16",
      Call{
          true,    q,
          k,       v,
          mask,    {mask_stride_b, mask_stride_h, mask_stride_q, mask_stride_k},
          o,       dout,
          nullptr, const_cast<float *>(lse),
          dq,      dk,
          dv,      batch,
          heads,   tq,
          tk,      head_dim,
          scale,   causal},
      true);
}

} // extern "C"

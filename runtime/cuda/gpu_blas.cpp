// Row-major strided-batched GEMMs over cuBLAS on the rank's compute stream.
//
// cuBLAS is column-major; a row-major [m, n] C is the column-major [n, m]
// C^T = op(B)^T op(A)^T, so every call swaps the operands (and m with n)
// and keeps the transpose flags: a row-major matrix stored with row stride
// ld is, read column-major with the same ld, its own transpose.
//
// A bf16 gemm that under-fills the device's last wave is split along K
// (fsdprt_gpu_split_k.h, docs/GPU.md "Split-K gemms"): strided-batched
// gemms over the slices write f32 partials into the context's scratch
// buffer, and split_k_kernels.cu sums them in slice order. Without a CUDA
// compiler at build time (no reduction kernel) nothing is split.
#include "cuda_libraries.h"
#include "fsdprt_gpu_split_k.h"
#include "gpu_internal.h"

#ifdef FSDPRT_WITH_GPU_SPLIT_K
#include "split_k_kernels.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

std::atomic<bool> tf32_enabled{false};

Status blas_status(fsdprt_gpu_context *ctx, cublasStatus_t rc,
                   const char *what) {
  return Status(rc == CUBLAS_STATUS_ALLOC_FAILED ? FSDPRT_ERR_OUT_OF_MEMORY
                                                 : FSDPRT_ERR_BACKEND,
                format("%s: %s failed: %s", who(ctx).c_str(), what,
                       cublas_library().cublasGetStatusString(rc)));
}

// The context's handle, created with the context (blas_create) and bound
// to its compute stream (cuBLAS then orders every GEMM after the kernels
// before it); created here only if that failed.
cublasHandle_t handle(fsdprt_gpu_context *ctx) {
  if (ctx->blas)
    return static_cast<cublasHandle_t>(ctx->blas);
  Status st = blas_create(ctx);
  if (!st.ok()) {
    fail(ctx, st);
    return nullptr;
  }
  return static_cast<cublasHandle_t>(ctx->blas);
}

struct Gemm {
  int32_t trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const void *a, *b;
  void *c;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
};

// The shape rules of the row-major API; "" when the call is valid.
std::string bad_shape(const Gemm &g) {
  const int64_t a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_cols = g.trans_b ? g.k : g.n;
  if ((g.trans_a | g.trans_b) & ~1)
    return "trans_a and trans_b must be 0 or 1";
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0)
    return "negative m, n, k or batch";
  if (g.lda < std::max<int64_t>(1, a_cols) ||
      g.ldb < std::max<int64_t>(1, b_cols) || g.ldc < std::max<int64_t>(1, g.n))
    return "a leading dimension is smaller than its row";
  const int64_t lim = INT32_MAX;
  if (g.m > lim || g.n > lim || g.k > lim || g.lda > lim || g.ldb > lim ||
      g.ldc > lim || g.batch > lim)
    return "a size beyond cuBLAS's 32-bit range";
  return "";
}

#ifdef FSDPRT_WITH_GPU_SPLIT_K
// The split of a gemm: the policy on the context's device, or
// FSDPRT_GPU_SPLIT_K's override (0: never; N >= 2: N slices). bf16 operands
// only: f32 gemms keep cuBLAS's results.
fsdprt_gpu_split_k_t split_of(fsdprt_gpu_context *ctx, const Gemm &g,
                              cudaDataType_t type) {
  const fsdprt_gpu_split_k_t none = fsdprt_gpu_split_k_slices(g.k, g.batch, 1);
  if (type != CUDA_R_16BF)
    return none;
  if (const char *env = std::getenv("FSDPRT_GPU_SPLIT_K")) {
    if (*env && std::string(env) != "auto")
      return fsdprt_gpu_split_k_slices(g.k, g.batch, std::atoll(env));
  }
  if (ctx->sms == 0) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                               ctx->device) != cudaSuccess) {
      cudaGetLastError();
      sms = -1; // unknown: never split
    }
    ctx->sms = sms;
  }
  return fsdprt_gpu_split_k_plan(g.m, g.n, g.k, g.batch, ctx->sms);
}

// The split gemm: the slices' products (alpha 1, beta 0) into f32 partials
// [partials][batch][m][n] in the scratch buffer, then the reduction. A
// slice of K is a column offset of a row-major A (a row offset when A is
// stored transposed) and a row offset of B (a column offset transposed).
bool split_gemm(fsdprt_gpu_context *ctx, cublasHandle_t h, const char *fn,
                const Gemm &g, const fsdprt_gpu_split_k_t &plan,
                cudaDataType_t type, cudaDataType_t c_type,
                cublasComputeType_t compute) {
  const int64_t mn = g.m * g.n, total = g.batch * mn;
  auto *partials = static_cast<float *>(
      scratch_named(plan.partials * total * int64_t(sizeof(float)), fn));
  if (!partials)
    return false;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t eb = 2; // bf16 operands
  const int64_t slice_a = g.trans_a ? plan.slice_k * g.lda : plan.slice_k;
  const int64_t slice_b = g.trans_b ? plan.slice_k : plan.slice_k * g.ldb;
  const float one = 1.0f, zero = 0.0f;
  auto product = [&](int64_t first, int64_t k, int64_t count, int64_t sa,
                     int64_t sb, int64_t sc, float *c) {
    const char *a = static_cast<const char *>(g.a) + first * slice_a * eb;
    const char *b = static_cast<const char *>(g.b) + first * slice_b * eb;
    cublasStatus_t rc = cublas_library().cublasGemmStridedBatchedEx(
        h, op_b, op_a, int(g.n), int(g.m), int(k), &one, b, type, int(g.ldb),
        sb, a, type, int(g.lda), sa, &zero, c, CUDA_R_32F, int(g.n), sc,
        int(count), compute, CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS)
      fail(ctx, blas_status(ctx, rc, "cublasGemmStridedBatchedEx"));
    return rc == CUBLAS_STATUS_SUCCESS;
  };
  const int64_t s = plan.slices;
  if (g.batch == 1) {
    // One call over the slices: they are the batch.
    if (!product(0, plan.slice_k, s, slice_a, slice_b, mn, partials))
      return false;
  } else {
    for (int64_t i = 0; i < s; ++i)
      if (!product(i, plan.slice_k, g.batch, g.stride_a, g.stride_b, mn,
                   partials + i * total))
        return false;
  }
  if (plan.rest_k > 0 && !product(s, plan.rest_k, g.batch, g.stride_a,
                                  g.stride_b, mn, partials + s * total))
    return false;
  split_k::Args r;
  r.partials = partials;
  r.parts = plan.partials;
  r.batch = g.batch;
  r.m = g.m;
  r.n = g.n;
  r.alpha = g.alpha;
  r.beta = g.beta;
  r.c = g.c;
  r.bf16 = c_type == CUDA_R_16BF;
  r.ldc = g.ldc;
  r.stride_c = g.stride_c;
  return !failed(ctx, split_k::reduce(r, ctx->compute), fn,
                 "the split-K reduction kernel");
}
#endif

void gemm(const char *fn, const Gemm &g, cudaDataType_t type,
          cudaDataType_t c_type) {
  fsdprt_gpu_context *ctx = entry(fn);
  if (!ctx)
    return;
  std::string bad = bad_shape(g);
  if (!bad.empty()) {
    fail(ctx,
         Status(FSDPRT_ERR_INVALID_ARGUMENT,
                format("%s: %s(m=%lld, n=%lld, k=%lld, batch=%lld): %s",
                       who(ctx).c_str(), fn, (long long)g.m, (long long)g.n,
                       (long long)g.k, (long long)g.batch, bad.c_str())));
    return;
  }
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return;
  cublasHandle_t h = handle(ctx);
  if (!h)
    return;
  const cublasComputeType_t compute =
      type == CUDA_R_32F && tf32_enabled.load(std::memory_order_relaxed)
          ? CUBLAS_COMPUTE_32F_FAST_TF32
          : CUBLAS_COMPUTE_32F;
#ifdef FSDPRT_WITH_GPU_SPLIT_K
  const fsdprt_gpu_split_k_t plan = split_of(ctx, g, type);
  if (plan.slices > 1) {
    if (split_gemm(ctx, h, fn, g, plan, type, c_type, compute)) {
      ctx->gemms++;
      ctx->split_gemms++;
    }
    return;
  }
#endif
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t rc = cublas_library().cublasGemmStridedBatchedEx(
      h, op_b, op_a, int(g.n), int(g.m), int(g.k), &g.alpha, g.b, type,
      int(g.ldb), g.stride_b, g.a, type, int(g.lda), g.stride_a, &g.beta, g.c,
      c_type, int(g.ldc), g.stride_c, int(g.batch), compute,
      CUBLAS_GEMM_DEFAULT);
  if (rc != CUBLAS_STATUS_SUCCESS) {
    fail(ctx, blas_status(ctx, rc, "cublasGemmStridedBatchedEx"));
    return;
  }
  ctx->gemms++;
}

} // namespace

// cuBLAS's recommended workspace for Hopper (4 MiB suffices before it).
// A workspace of the handle's own keeps cuBLAS from allocating one on the
// stream inside a step (and inside a captured CUDA graph).
constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;

Status fsdprt::gpu::blas_create(fsdprt_gpu_context *ctx) {
  // cuBLAS is opened here, by the first GPU context (cuda_libraries.h).
  const CublasLibrary *lib = nullptr;
  Status loaded = load_cublas(&lib);
  if (!loaded.ok())
    return Status(loaded.code, who(ctx) + ": " + loaded.message);
  cublasHandle_t h = nullptr;
  cublasStatus_t rc = lib->cublasCreate(&h);
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = lib->cublasSetStream(h, ctx->compute);
  if (rc != CUBLAS_STATUS_SUCCESS) {
    if (h)
      lib->cublasDestroy(h);
    return blas_status(ctx, rc, "cublasCreate");
  }
#ifndef FSDPRT_CUDA_EMULATION
  // The emulated cuBLAS needs no workspace.
  void *workspace = nullptr;
  cudaError_t err = cudaMalloc(&workspace, kBlasWorkspaceBytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    lib->cublasDestroy(h);
    return cuda_status(err, who(ctx) + ": allocating the cuBLAS workspace");
  }
  rc = lib->cublasSetWorkspace(h, workspace, kBlasWorkspaceBytes);
  if (rc != CUBLAS_STATUS_SUCCESS) {
    cudaFree(workspace);
    lib->cublasDestroy(h);
    return blas_status(ctx, rc, "cublasSetWorkspace");
  }
  ctx->blas_workspace = workspace;
#else
  (void)kBlasWorkspaceBytes;
#endif
  ctx->blas = h;
  return Status::Ok();
}

void fsdprt::gpu::blas_destroy(fsdprt_gpu_context *ctx) {
  if (ctx->blas)
    cublas_library().cublasDestroy(static_cast<cublasHandle_t>(ctx->blas));
  ctx->blas = nullptr;
  if (ctx->blas_workspace)
    cudaFree(ctx->blas_workspace);
  ctx->blas_workspace = nullptr;
}

extern "C" {

void fsdprt_gpu_gemm_f32(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda,
                         int64_t stride_a, const float *b, int64_t ldb,
                         int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int64_t batch) {
  gemm("fsdprt_gpu_gemm_f32",
       Gemm{trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
            stride_a, stride_b, stride_c, batch},
       CUDA_R_32F, CUDA_R_32F);
}

void fsdprt_gpu_gemm_bf16(int32_t trans_a, int32_t trans_b, int64_t m,
                          int64_t n, int64_t k, float alpha, const uint16_t *a,
                          int64_t lda, int64_t stride_a, const uint16_t *b,
                          int64_t ldb, int64_t stride_b, float beta,
                          uint16_t *c, int64_t ldc, int64_t stride_c,
                          int64_t batch) {
  gemm("fsdprt_gpu_gemm_bf16",
       Gemm{trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
            stride_a, stride_b, stride_c, batch},
       CUDA_R_16BF, CUDA_R_16BF);
}

void fsdprt_gpu_gemm_bf16_f32(int32_t trans_a, int32_t trans_b, int64_t m,
                              int64_t n, int64_t k, float alpha,
                              const uint16_t *a, int64_t lda, int64_t stride_a,
                              const uint16_t *b, int64_t ldb, int64_t stride_b,
                              float beta, float *c, int64_t ldc,
                              int64_t stride_c, int64_t batch) {
  gemm("fsdprt_gpu_gemm_bf16_f32",
       Gemm{trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
            stride_a, stride_b, stride_c, batch},
       CUDA_R_16BF, CUDA_R_32F);
}

void fsdprt_gpu_set_tf32(int32_t enable) { tf32_enabled = enable != 0; }

} // extern "C"

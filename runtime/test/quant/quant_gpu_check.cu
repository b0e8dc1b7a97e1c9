// quant_gpu_check: the quantization kernels on a real GPU, in one program
// (ctest quant.gpu_check, label gpu, runs the checks; bench/gpu/check.sh
// runs --bench-only for the bandwidth table).
//
//  1. conversions: the device fp8 conversions (cvt.rn.satfinite e4m3x2 /
//     e5m2x2), the kernels' E2M1 conversion and the fp32 -> bf16 cvt against
//     the CPU rules of quant_math.h for all 2^32 fp32 bit patterns, and the
//     fp8 -> f16x2 decode for all 256 codes of both kinds;
//  2. exactness: every quantize / dequantize kernel against the CPU reference,
//     bit for bit, on shapes where grid-stride loops and 128x128 tiles repeat
//     (4096 x 4096) and on uneven edges, bf16 and fp32 input;
//  3. bandwidth: every kernel over batches of launches on a 256 MiB input
//     (bf16 and fp32) next to a device-to-device copy of the same buffer;
// then prints one summary table. Exit status 1 if anything differs.
//
//   quant_gpu_check [--quick] [--no-bench | --bench-only] [--bench-mib N]
//
// --quick: small shapes and a strided subset of the 2^32 patterns.
// Exits 77 (ctest: skipped) when no GPU is visible.

#include "fsdprt_quant.h"
#include "quant_math.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace fsdprt::quant;

namespace {

struct Row {
  std::string section, what, result, detail;
  bool failed = false;
};
std::vector<Row> rows;

void report(const std::string &section, const std::string &what, bool ok,
            const std::string &detail, const std::string &result = "") {
  rows.push_back({section, what, result.empty() ? (ok ? "ok" : "FAIL") : result,
                  detail, !ok});
  std::printf("%-11s %-40s %-8s %s\n", section.c_str(), what.c_str(),
              rows.back().result.c_str(), detail.c_str());
  std::fflush(stdout);
}

bool cudaOk(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return true;
  std::fprintf(stderr, "quant_gpu_check: %s: %s\n", what,
               cudaGetErrorString(e));
  return false;
}

#define DIE_IF(cond, ...)                                                      \
  do {                                                                         \
    if (cond) {                                                                \
      std::fprintf(stderr, "quant_gpu_check: " __VA_ARGS__);                   \
      std::fprintf(stderr, "\n");                                              \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

#define Q(expr)                                                                \
  do {                                                                         \
    int st_ = (expr);                                                          \
    DIE_IF(st_ != FSDPRT_OK, "%s: %s", #expr, fsdprt_quant_last_error());      \
  } while (0)

// ===========================================================================
// 1. conversions
// ===========================================================================

struct ConvResult {
  unsigned long long mismatches[4]; // e4m3, e5m2, e2m1, bf16
  unsigned int first[4];            // smallest mismatching bit pattern
};

__device__ __forceinline__ uint8_t deviceFp8(float f, int kind) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint8_t>(
      __nv_cvt_float2_to_fp8x2(make_float2(f, 0.0f), __NV_SATFINITE,
                               kind == 0 ? __NV_E4M3 : __NV_E5M2) &
      0xFF);
#else
  return floatToFp8(f, kind); // host emulation: the software rule itself
#endif
}

__device__ __forceinline__ uint16_t deviceBf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return floatToBf16(f);
#endif
}

__device__ __forceinline__ void noteMismatch(ConvResult *r, int which,
                                             uint32_t u) {
  atomicAdd(&r->mismatches[which], 1ull);
  atomicMin(&r->first[which], u);
}

// Patterns u = start + i * step for i < count.
__global__ void conversionKernel(uint64_t start, uint64_t step, uint64_t count,
                                 ConvResult *r) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const uint32_t u = static_cast<uint32_t>(start + i * step);
    const float f = bitsFloat(u);
    if (deviceFp8(f, 0) != floatToFp8(f, 0))
      noteMismatch(r, 0, u);
    if (deviceFp8(f, 1) != floatToFp8(f, 1))
      noteMismatch(r, 1, u);
    if (floatToE2m1Fast(f) != floatToE2m1(f))
      noteMismatch(r, 2, u);
    const uint16_t b = deviceBf16(f), ref = floatToBf16(f);
    const bool bothNan = isNan(f) && (b & 0x7FFF) > 0x7F80;
    if (b != ref && !bothNan)
      noteMismatch(r, 3, u);
  }
}

// fp8 code -> float through the f16x2 conversion the dequantize kernels use.
__global__ void decodeKernel(float *out) {
  const int code = threadIdx.x, kind = blockIdx.x;
#if defined(__CUDA_ARCH__)
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(code),
                                 kind == 0 ? __NV_E4M3 : __NV_E5M2);
  out[kind * 256 + code] = __half22float2(__half2(h)).x;
#else
  out[kind * 256 + code] = fp8ToFloat(static_cast<uint8_t>(code), kind);
#endif
}

void checkConversions(bool quick) {
  ConvResult *d = nullptr;
  DIE_IF(!cudaOk(cudaMalloc(&d, sizeof(ConvResult)), "cudaMalloc"),
         "no memory");
  ConvResult h{};
  for (auto &f : h.first)
    f = 0xFFFFFFFFu;
  cudaMemcpy(d, &h, sizeof(h), cudaMemcpyHostToDevice);
  // quick: every 65537th pattern (65537 is odd, so all residues mod 2^k).
  const uint64_t step = quick ? 65537 : 1;
  const uint64_t count =
      quick ? (uint64_t{1} << 32) / 65537 : uint64_t{1} << 32;
  const auto t0 = std::chrono::steady_clock::now();
  conversionKernel<<<quick ? 8 : 4096, 256>>>(0, step, count, d);
  cudaOk(cudaDeviceSynchronize(), "conversion kernel");
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
  cudaFree(d);
  const char *names[4] = {
      "fp32 -> e4m3 (cvt.rn.satfinite)", "fp32 -> e5m2 (cvt.rn.satfinite)",
      "fp32 -> e2m1 (floatToE2m1Fast)", "fp32 -> bf16 (cvt.rn.bf16)"};
  char detail[160];
  for (int i = 0; i < 4; ++i) {
    if (h.mismatches[i])
      std::snprintf(detail, sizeof(detail),
                    "%llu of %llu patterns differ, first 0x%08x",
                    h.mismatches[i], (unsigned long long)count, h.first[i]);
    else
      std::snprintf(detail, sizeof(detail), "%llu patterns%s, %.1f s",
                    (unsigned long long)count, quick ? " (strided)" : "", secs);
    report("conversion", names[i], h.mismatches[i] == 0, detail);
  }
  float *dd = nullptr;
  cudaMalloc(&dd, 512 * sizeof(float));
  decodeKernel<<<2, 256>>>(dd);
  std::vector<float> got(512);
  cudaMemcpy(got.data(), dd, 512 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dd);
  int bad = 0;
  for (int kind = 0; kind < 2; ++kind)
    for (int c = 0; c < 256; ++c) {
      const float ref = fp8ToFloat(static_cast<uint8_t>(c), kind);
      const float g = got[kind * 256 + c];
      if (!(std::isnan(ref) && std::isnan(g)) && std::memcmp(&ref, &g, 4) != 0)
        ++bad;
    }
  std::snprintf(detail, sizeof(detail), "%d of 512 codes differ", bad);
  report("conversion", "e4m3 / e5m2 -> f16x2 -> fp32 decode", bad == 0, detail);
}

// ===========================================================================
// 2. exactness against the CPU reference
// ===========================================================================

template <typename T> struct DevBuf {
  T *p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    DIE_IF(!cudaOk(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)),
                   "cudaMalloc"),
           "cannot allocate %zu bytes", count * sizeof(T));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf &) = delete;
  void up(const T *h) {
    cudaMemcpy(p, h, n * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> down() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// Rows of random magnitude 2^-40 .. 2^40, every 16-block with its own
// spread, and the special values sprinkled in.
std::vector<uint8_t> makeInput(size_t rows, size_t cols, int dtype,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> rowExp(-40, 40), blockExp(-12, 0);
  const float specials[] = {0.0f,      -0.0f,  NAN,     -NAN,   INFINITY,
                            -INFINITY, 1e-45f, -1e-40f, 448.0f, 3e38f};
  const size_t n = rows * cols;
  std::vector<float> v(n);
  for (size_t r = 0; r < rows; ++r) {
    const float rs = std::ldexp(1.0f, rowExp(rng));
    float bs = 1.0f;
    for (size_t c = 0; c < cols; ++c) {
      if (c % 16 == 0)
        bs = std::ldexp(1.0f, blockExp(rng));
      v[r * cols + c] = normal(rng) * rs * bs;
    }
  }
  for (size_t i = 7; i < n; i += 9973)
    v[i] = specials[(i / 9973) % 10];
  std::vector<uint8_t> out(n * (dtype == FSDPRT_QUANT_F32 ? 4 : 2));
  if (dtype == FSDPRT_QUANT_F32) {
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t b = floatToBf16(v[i]);
      std::memcpy(&out[2 * i], &b, 2);
    }
  }
  return out;
}

size_t countDiff(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  size_t bad = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    bad += a[i] != b[i];
  return bad;
}

// Dequantized values: equal bits, or NaN on both sides.
size_t countValueDiff(const std::vector<uint8_t> &a,
                      const std::vector<uint8_t> &b, int dtype) {
  const size_t es = dtype == FSDPRT_QUANT_F32 ? 4 : 2;
  size_t bad = 0;
  for (size_t i = 0; i < a.size() / es; ++i) {
    if (std::memcmp(&a[i * es], &b[i * es], es) == 0)
      continue;
    float x, y;
    if (es == 4) {
      std::memcpy(&x, &a[i * 4], 4);
      std::memcpy(&y, &b[i * 4], 4);
    } else {
      uint16_t u, w;
      std::memcpy(&u, &a[i * 2], 2);
      std::memcpy(&w, &b[i * 2], 2);
      x = bf16ToFloat(u);
      y = bf16ToFloat(w);
    }
    bad += !(std::isnan(x) && std::isnan(y));
  }
  return bad;
}

// One format's quantize + dequantize, on the CPU and the GPU.
struct FormatOps {
  const char *name;
  int format;
  // Shapes that block in this format: large (grid-stride loops repeat) and
  // uneven edges.
  std::vector<std::pair<size_t, size_t>> shapes;
};

std::vector<FormatOps> formats(bool quick) {
  const size_t L = quick ? 160 : 4096;
  auto s = [&](std::vector<std::pair<size_t, size_t>> extra) {
    std::vector<std::pair<size_t, size_t>> v = {{L, L}};
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  };
  const size_t E = quick ? 37 : 4099;
  return {
      {"fp8_e4m3_tensor", FSDPRT_QUANT_FP8_E4M3_TENSOR, s({{E, E + 34}})},
      {"fp8_e5m2_tensor", FSDPRT_QUANT_FP8_E5M2_TENSOR, s({{E, E + 34}})},
      {"mxfp8_rowwise", FSDPRT_QUANT_MXFP8_ROWWISE,
       s({{E, 32 * (E / 32 + 1)}})},
      {"mxfp8_colwise", FSDPRT_QUANT_MXFP8_COLWISE,
       s({{32 * (E / 32 + 1), E}})},
      {"nvfp4", FSDPRT_QUANT_NVFP4, s({{E, 16 * (E / 16 + 1)}})},
      {"nvfp4_2d", FSDPRT_QUANT_NVFP4_2D, s({{E, 16 * (E / 16 + 1)}})},
      {"fp8_block_1x128", FSDPRT_QUANT_FP8_BLOCK_1X128, s({{E, E + 34}})},
      {"fp8_block_1x128_t", FSDPRT_QUANT_FP8_BLOCK_1X128_T, s({{E, E + 34}})},
      {"fp8_block_128x128", FSDPRT_QUANT_FP8_BLOCK_128X128, s({{E, E + 34}})},
  };
}

// Quantizes x (host bytes) on the CPU: data, scales, per-tensor value.
void cpuQuantize(int format, const uint8_t *x, int dtype, size_t rows,
                 size_t cols, float amax, std::vector<uint8_t> &q,
                 std::vector<uint8_t> &s, float &tensorValue) {
  int64_t shape[2] = {int64_t(rows), int64_t(cols)};
  fsdprt_quant_layout l;
  Q(fsdprt_quant_get_layout(format, shape, 2, &l));
  q.assign(l.data_bytes, 0);
  s.assign(l.scale_bytes, 0);
  const size_t n = rows * cols;
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    Q(fsdprt_quant_fp8_tensor_quantize(x, dtype, n, amax,
                                       format == FSDPRT_QUANT_FP8_E5M2_TENSOR
                                           ? FSDPRT_QUANT_E5M2
                                           : FSDPRT_QUANT_E4M3,
                                       q.data(), &tensorValue));
    break;
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    Q(fsdprt_quant_mxfp8_quantize(x, dtype, rows, cols,
                                  format == FSDPRT_QUANT_MXFP8_COLWISE,
                                  q.data(), s.data()));
    break;
  case FSDPRT_QUANT_NVFP4:
    Q(fsdprt_quant_nvfp4_quantize(x, dtype, rows, cols, amax, q.data(),
                                  s.data()));
    tensorValue = amax;
    break;
  case FSDPRT_QUANT_NVFP4_2D:
    Q(fsdprt_quant_nvfp4_2d_quantize(x, dtype, rows, cols, amax, q.data(),
                                     s.data()));
    tensorValue = amax;
    break;
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    Q(fsdprt_quant_fp8_block_quantize(
        x, dtype, rows, cols, format == FSDPRT_QUANT_FP8_BLOCK_1X128 ? 1 : 128,
        1, q.data(), reinterpret_cast<float *>(s.data())));
    break;
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    Q(fsdprt_quant_fp8_block_1x128_t_quantize(
        x, dtype, rows, cols, 1, q.data(),
        reinterpret_cast<float *>(s.data())));
    break;
  }
}

void cpuDequantize(int format, const uint8_t *q, const uint8_t *s,
                   float tensorValue, size_t rows, size_t cols, void *y,
                   int outDtype) {
  const size_t n = rows * cols;
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    Q(fsdprt_quant_fp8_tensor_dequantize(q, n,
                                         format == FSDPRT_QUANT_FP8_E5M2_TENSOR
                                             ? FSDPRT_QUANT_E5M2
                                             : FSDPRT_QUANT_E4M3,
                                         tensorValue, y, outDtype));
    break;
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    Q(fsdprt_quant_mxfp8_dequantize(
        q, s, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, y, outDtype));
    break;
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    Q(fsdprt_quant_nvfp4_dequantize(q, s, rows, cols, tensorValue, y,
                                    outDtype));
    break;
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    Q(fsdprt_quant_fp8_block_dequantize(
        q, reinterpret_cast<const float *>(s), rows, cols,
        format == FSDPRT_QUANT_FP8_BLOCK_1X128 ? 1 : 128, y, outDtype));
    break;
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    Q(fsdprt_quant_fp8_block_1x128_t_dequantize(
        q, reinterpret_cast<const float *>(s), rows, cols, y, outDtype));
    break;
  }
}

// GPU versions; dev pointers. `tensor` holds amax (in) for quantize of the
// per-tensor formats' scale or NVFP4's amax, and receives scale_inv for
// fp8 tensor quantize (second pointer).
int gpuQuantize(int format, const void *x, int dtype, size_t rows, size_t cols,
                const float *amax, uint8_t *q, uint8_t *s, float *scaleInv,
                cudaStream_t st) {
  const size_t n = rows * cols;
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_cuda_fp8_tensor_quantize(
        x, dtype, n, amax,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        q, scaleInv, st);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_cuda_mxfp8_quantize(
        x, dtype, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, q, s, st);
  case FSDPRT_QUANT_NVFP4:
    return fsdprt_quant_cuda_nvfp4_quantize(x, dtype, rows, cols, amax, q, s,
                                            st);
  case FSDPRT_QUANT_NVFP4_2D:
    return fsdprt_quant_cuda_nvfp4_2d_quantize(x, dtype, rows, cols, amax, q, s,
                                               st);
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    return fsdprt_quant_cuda_fp8_block_quantize(
        x, dtype, rows, cols, format == FSDPRT_QUANT_FP8_BLOCK_1X128 ? 1 : 128,
        1, q, reinterpret_cast<float *>(s), st);
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return fsdprt_quant_cuda_fp8_block_1x128_t_quantize(
        x, dtype, rows, cols, 1, q, reinterpret_cast<float *>(s), st);
  }
  return FSDPRT_ERR_INVALID_ARGUMENT;
}

int gpuDequantize(int format, const uint8_t *q, const uint8_t *s,
                  const float *tensor, size_t rows, size_t cols, void *y,
                  int outDtype, cudaStream_t st) {
  const size_t n = rows * cols;
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_cuda_fp8_tensor_dequantize(
        q, n,
        format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                               : FSDPRT_QUANT_E4M3,
        tensor, y, outDtype, st);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_cuda_mxfp8_dequantize(
        q, s, rows, cols, format == FSDPRT_QUANT_MXFP8_COLWISE, y, outDtype,
        st);
  case FSDPRT_QUANT_NVFP4:
  case FSDPRT_QUANT_NVFP4_2D:
    return fsdprt_quant_cuda_nvfp4_dequantize(q, s, rows, cols, tensor, y,
                                              outDtype, st);
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128:
    return fsdprt_quant_cuda_fp8_block_dequantize(
        q, reinterpret_cast<const float *>(s), rows, cols,
        format == FSDPRT_QUANT_FP8_BLOCK_1X128 ? 1 : 128, y, outDtype, st);
  case FSDPRT_QUANT_FP8_BLOCK_1X128_T:
    return fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(
        q, reinterpret_cast<const float *>(s), rows, cols, y, outDtype, st);
  }
  return FSDPRT_ERR_INVALID_ARGUMENT;
}

bool usesAmax(int format) {
  return format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         format == FSDPRT_QUANT_FP8_E5M2_TENSOR ||
         format == FSDPRT_QUANT_NVFP4 || format == FSDPRT_QUANT_NVFP4_2D;
}

bool perTensorScale(int format) {
  return format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         format == FSDPRT_QUANT_FP8_E5M2_TENSOR;
}

void checkExactness(bool quick) {
  uint32_t seed = 1;
  for (const FormatOps &f : formats(quick))
    for (int dtype : {FSDPRT_QUANT_BF16, FSDPRT_QUANT_F32})
      for (auto [rows, cols] : f.shapes) {
        const size_t n = rows * cols;
        const auto x = makeInput(rows, cols, dtype, seed++);
        float amax = 0;
        Q(fsdprt_quant_amax(x.data(), dtype, n, &amax));
        std::vector<uint8_t> q, s;
        float tensorValue = 0;
        cpuQuantize(f.format, x.data(), dtype, rows, cols, amax, q, s,
                    tensorValue);
        DevBuf<uint8_t> dx(x.size()), dq(q.size()), ds(s.size());
        DevBuf<float> dAmax(1), dTensor(1);
        dx.up(x.data());
        // The GPU amax must equal the CPU's; it feeds the quantizer.
        Q(fsdprt_quant_cuda_amax(dx.p, dtype, n, dAmax.p, nullptr));
        cudaOk(cudaDeviceSynchronize(), "amax");
        const float gpuAmax = dAmax.down()[0];
        size_t bad = std::memcmp(&gpuAmax, &amax, 4) != 0;
        Q(gpuQuantize(f.format, dx.p, dtype, rows, cols, dAmax.p, dq.p, ds.p,
                      dTensor.p, nullptr));
        cudaOk(cudaDeviceSynchronize(), "quantize");
        bad += countDiff(q, dq.down()) + countDiff(s, ds.down());
        if (perTensorScale(f.format)) {
          const float gv = dTensor.down()[0];
          bad += std::memcmp(&gv, &tensorValue, 4) != 0;
        }
        // Dequantize the reference bytes on both sides, both output types.
        dq.up(q.data());
        ds.up(s.data());
        cudaMemcpy(dTensor.p, &tensorValue, 4, cudaMemcpyHostToDevice);
        size_t badValues = 0;
        for (int outDtype : {FSDPRT_QUANT_BF16, FSDPRT_QUANT_F32}) {
          const size_t oes = outDtype == FSDPRT_QUANT_F32 ? 4 : 2;
          std::vector<uint8_t> y(n * oes);
          cpuDequantize(f.format, q.data(), s.data(), tensorValue, rows, cols,
                        y.data(), outDtype);
          DevBuf<uint8_t> dy(y.size());
          Q(gpuDequantize(f.format, dq.p, ds.p, dTensor.p, rows, cols, dy.p,
                          outDtype, nullptr));
          cudaOk(cudaDeviceSynchronize(), "dequantize");
          badValues += countValueDiff(y, dy.down(), outDtype);
        }
        // The host-buffer entry points the runtime uses: the same bytes.
        {
          std::vector<uint8_t> hq(q.size()), hs(s.size()), gq(q.size()),
              gs(s.size());
          float hv = 0, gv = 0;
          Q(fsdprt_quant_quantize(f.format, x.data(), dtype, rows, cols, amax,
                                  hq.data(), hs.data(), &hv));
          Q(fsdprt_quant_cuda_quantize_host(f.format, x.data(), dtype, rows,
                                            cols, amax, gq.data(), gs.data(),
                                            &gv));
          bad += countDiff(q, hq) + countDiff(s, hs) + countDiff(q, gq) +
                 countDiff(s, gs) + (std::memcmp(&hv, &gv, 4) != 0);
          std::vector<uint8_t> y(n * 2), gy(n * 2);
          Q(fsdprt_quant_dequantize(f.format, q.data(), s.data(), hv, rows,
                                    cols, y.data(), FSDPRT_QUANT_BF16));
          Q(fsdprt_quant_cuda_dequantize_host(f.format, q.data(), s.data(), hv,
                                              rows, cols, gy.data(),
                                              FSDPRT_QUANT_BF16));
          badValues += countValueDiff(y, gy, FSDPRT_QUANT_BF16);
        }
        char what[96], detail[128];
        std::snprintf(what, sizeof(what), "%s %s [%zu x %zu]", f.name,
                      dtype == FSDPRT_QUANT_F32 ? "f32" : "bf16", rows, cols);
        std::snprintf(detail, sizeof(detail),
                      "%zu differing bytes, %zu differing dequantized values",
                      bad, badValues);
        report("exact", what, bad == 0 && badValues == 0, detail);
      }
}

// ===========================================================================
// 3. bandwidth
// ===========================================================================

// Best seconds per launch over `batches` batches of `launches` launches.
double timeLaunches(const std::function<void()> &launch, int launches,
                    int batches) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  launch(); // warm-up
  double best = 1e30;
  for (int i = 0; i < batches; ++i) {
    cudaEventRecord(a);
    for (int k = 0; k < launches; ++k)
      launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    best = std::min(best, ms * 1e-3 / launches);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

constexpr double kGoalTBs = 3.8;

void bandwidth(bool quick, size_t mib) {
  const int launches = quick ? 2 : 20, batches = quick ? 1 : 5;
  for (int dtype : {FSDPRT_QUANT_BF16, FSDPRT_QUANT_F32}) {
    const size_t es = dtype == FSDPRT_QUANT_F32 ? 4 : 2;
    const size_t cols = 4096;
    const size_t rows = (mib << 20) / es / cols;
    const size_t n = rows * cols;
    const char *dn = dtype == FSDPRT_QUANT_F32 ? "f32" : "bf16";
    DevBuf<uint8_t> x(n * es), y(n * es), q(n), s(n / 16 * 4 + 64);
    DevBuf<float> amax(1), tensor(1);
    // Moderate values so no kernel takes an unusual path.
    {
      const auto h = makeInput(rows > 64 ? 64 : rows, cols, dtype, 99);
      for (size_t off = 0; off < n * es; off += h.size())
        cudaMemcpy(x.p + off, h.data(), std::min(h.size(), n * es - off),
                   cudaMemcpyHostToDevice);
    }
    Q(fsdprt_quant_cuda_amax(x.p, dtype, n, amax.p, nullptr));
    cudaMemcpy(tensor.p, amax.p, 4, cudaMemcpyDeviceToDevice);
    const double copy = timeLaunches(
        [&] { cudaMemcpyAsync(y.p, x.p, n * es, cudaMemcpyDeviceToDevice); },
        launches, batches);
    const double copyTBs = 2.0 * n * es / copy / 1e12;
    char what[96], detail[160], result[32];
    std::snprintf(what, sizeof(what), "device copy %s %zu MiB", dn, mib);
    std::snprintf(detail, sizeof(detail), "%.3f ms, read + written",
                  copy * 1e3);
    std::snprintf(result, sizeof(result), "%.2f TB/s", copyTBs);
    report("bandwidth", what, true, detail, result);
    auto run = [&](const char *name, double bytes,
                   const std::function<int()> &fn) {
      int status = FSDPRT_OK;
      const double t = timeLaunches(
          [&] {
            if (status == FSDPRT_OK)
              status = fn();
          },
          launches, batches);
      DIE_IF(status != FSDPRT_OK, "%s: %s", name, fsdprt_quant_last_error());
      const double tbs = bytes / t / 1e12;
      std::snprintf(what, sizeof(what), "%s %s", name, dn);
      std::snprintf(detail, sizeof(detail),
                    "%.3f ms, %.0f%% of the copy, goal %.1f TB/s%s", t * 1e3,
                    100.0 * tbs / copyTBs, kGoalTBs,
                    tbs >= kGoalTBs ? "" : " (below)");
      std::snprintf(result, sizeof(result), "%.2f TB/s", tbs);
      report("bandwidth", what, true, detail, result);
    };
    const double in = double(n * es);
    run("amax", in,
        [&] { return fsdprt_quant_cuda_amax(x.p, dtype, n, amax.p, nullptr); });
    for (const FormatOps &f : formats(true)) {
      int64_t shape[2] = {int64_t(rows), int64_t(cols)};
      fsdprt_quant_layout l;
      Q(fsdprt_quant_get_layout(f.format, shape, 2, &l));
      const double wire = double(l.data_bytes + l.scale_bytes);
      std::string qn = std::string(f.name) + " quantize";
      std::string dqn = std::string(f.name) + " dequantize";
      run(qn.c_str(), in + wire, [&] {
        return gpuQuantize(f.format, x.p, dtype, rows, cols, amax.p, q.p, s.p,
                           tensor.p, nullptr);
      });
      // Dequantize reads scale_inv (written by the fp8 tensor quantize just
      // now) or NVFP4's global amax.
      if (usesAmax(f.format) && !perTensorScale(f.format))
        cudaMemcpy(tensor.p, amax.p, 4, cudaMemcpyDeviceToDevice);
      run(dqn.c_str(), wire + in, [&] {
        return gpuDequantize(f.format, q.p, s.p, tensor.p, rows, cols, y.p,
                             dtype, nullptr);
      });
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  bool quick = false, bench = true, checks = true;
  size_t mib = 256;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--no-bench"))
      bench = false;
    else if (!std::strcmp(argv[i], "--bench-only"))
      checks = false;
    else if (!std::strcmp(argv[i], "--bench-mib") && i + 1 < argc)
      mib = std::strtoul(argv[++i], nullptr, 10);
    else {
      std::fprintf(
          stderr,
          "usage: quant_gpu_check [--quick] [--no-bench | --bench-only] "
          "[--bench-mib N]\n");
      return 2;
    }
  }
  if (!fsdprt_quant_cuda_available()) {
    std::printf("quant_gpu_check: no GPU visible (or kernels not built): "
                "skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount);
  if (checks) {
    checkConversions(quick);
    checkExactness(quick);
  }
  if (bench)
    bandwidth(quick, quick ? 4 : mib);
  int failed = 0;
  std::printf("\n%-11s %-40s %-10s %s\n", "section", "check", "result",
              "detail");
  for (const Row &r : rows) {
    std::printf("%-11s %-40s %-10s %s\n", r.section.c_str(), r.what.c_str(),
                r.result.c_str(), r.detail.c_str());
    failed += r.failed;
  }
  std::printf("%d of %zu checks failed\n", failed, rows.size());
  return failed ? 1 : 0;
}

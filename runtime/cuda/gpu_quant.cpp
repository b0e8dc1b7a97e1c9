// The quantized all-gather's local steps on device buffers
// (fsdprt_gpu_quant_amax / fsdprt_gpu_quantize / fsdprt_gpu_dequantize): the
// kernels of quant_kernels.cu on the rank's compute stream, over packets
// with the host path's byte layout [data | scales | per-tensor fp32].
//
// Inside a packet the scales and the per-tensor value are not aligned (the
// data part has any length), while the kernels store fp32 scales with
// aligned accesses; misaligned parts go through a stream-ordered scratch
// buffer and a device-to-device copy.
#include "fsdprt_quant.h"
#include "gpu_internal.h"

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

bool aligned4(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 3) == 0;
}

struct Step {
  fsdprt_gpu_context *ctx;
  const char *fn;

  void fail_with(fsdprt_status_t code, const std::string &why) const {
    fail(ctx,
         Status(code, format("%s: %s: %s", who(ctx).c_str(), fn, why.c_str())));
  }
  // The quantization library reports the runtime's status: passed on.
  bool quant(fsdprt_status_t rc) const {
    if (rc == FSDPRT_OK)
      return true;
    fail_with(rc, fsdprt_quant_last_error());
    return false;
  }
  bool cuda(cudaError_t rc, const char *what) const {
    return !failed(ctx, rc, fn, what);
  }
  bool copy(void *dst, const void *src, size_t bytes) const {
    return bytes == 0 ||
           cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                ctx->compute),
                "cudaMemcpyAsync");
  }
};

// Scratch space for one call: parts of the context's scratch buffer (kept
// from call to call: no allocation per call), 256-byte aligned, valid for
// the work the call enqueues on the compute stream.
struct Scratch {
  void *p = nullptr;
  Scratch(int64_t bytes, const char *fn) : p(scratch_named(bytes, fn)) {}
  // `n` parts of the given sizes: part i at `at(i)`.
  Scratch(std::initializer_list<int64_t> sizes, const char *fn) {
    int64_t total = 0;
    for (int64_t b : sizes) {
      offsets.push_back(total);
      total += (b + 255) / 256 * 256;
    }
    p = scratch_named(total, fn);
  }
  uint8_t *bytes() const { return static_cast<uint8_t *>(p); }
  uint8_t *at(size_t i) const { return bytes() + offsets[i]; }
  std::vector<int64_t> offsets;
};

int64_t wire_bytes(const fsdprt_quant_layout &l) {
  return int64_t(l.data_bytes + l.scale_bytes + l.tensor_bytes);
}

void quantize(const Step &s, const void *x, const float *amax, uint8_t *packet,
              int32_t dtype, int32_t fmt, const fsdprt_quant_layout &l) {
  uint8_t *scales = packet + l.data_bytes;
  uint8_t *tensor = scales + l.scale_bytes;
  if (aligned4(scales) && aligned4(tensor)) {
    s.quant(fsdprt_quant_cuda_quantize(
        fmt, x, dtype, l.rows, l.cols, amax, packet, scales,
        reinterpret_cast<float *>(tensor), s.ctx->compute));
    return;
  }
  // Scales at offset 0 of the scratch, the per-tensor value after them.
  const size_t tail = (l.scale_bytes + 3) / 4 * 4;
  Scratch tmp(int64_t(tail + sizeof(float)), s.fn);
  if (!tmp.p ||
      !s.quant(fsdprt_quant_cuda_quantize(
          fmt, x, dtype, l.rows, l.cols, amax, packet, tmp.bytes(),
          reinterpret_cast<float *>(tmp.bytes() + tail), s.ctx->compute)))
    return;
  if (s.copy(scales, tmp.bytes(), l.scale_bytes))
    s.copy(tensor, tmp.bytes() + tail, l.tensor_bytes);
}

// One packet into `y`; misaligned scales and value are copied out first.
bool dequantize_slot(const Step &s, const uint8_t *packet, void *y,
                     int32_t dtype, int32_t fmt, const fsdprt_quant_layout &l) {
  const uint8_t *scales = packet + l.data_bytes;
  const uint8_t *tensor = scales + l.scale_bytes;
  if (aligned4(scales) && aligned4(tensor))
    return s.quant(fsdprt_quant_cuda_dequantize(
        fmt, packet, scales, reinterpret_cast<const float *>(tensor), l.rows,
        l.cols, y, dtype, s.ctx->compute));
  const size_t tail = (l.scale_bytes + 3) / 4 * 4;
  Scratch tmp(int64_t(tail + sizeof(float)), s.fn);
  return tmp.p && s.copy(tmp.bytes(), scales, l.scale_bytes) &&
         s.copy(tmp.bytes() + tail, tensor, l.tensor_bytes) &&
         s.quant(fsdprt_quant_cuda_dequantize(
             fmt, packet, tmp.bytes(),
             reinterpret_cast<const float *>(tmp.bytes() + tail), l.rows,
             l.cols, y, dtype, s.ctx->compute));
}

// TE's transposed blockwise format: the k gathered scale arrays [nb, rows]
// are swapped into the whole tensor's [nb, k * rows] (as on the host).
void dequantize_transposed(const Step &s, const uint8_t *packets, void *y,
                           int64_t k, int32_t dtype, int32_t fmt,
                           const fsdprt_quant_layout &l) {
  const size_t db = l.data_bytes, sb = l.scale_bytes;
  const int64_t wire = wire_bytes(l);
  // The packets' data, their gathered scales, the swapped scales.
  Scratch tmp({int64_t(db) * k, int64_t(sb) * k, int64_t(sb) * k}, s.fn);
  if (!tmp.p)
    return;
  uint8_t *data = tmp.at(0), *gathered = tmp.at(1), *scales = tmp.at(2);
  for (int64_t j = 0; j < k; ++j)
    if (!s.copy(data + j * db, packets + j * wire, db) ||
        !s.copy(gathered + j * sb, packets + j * wire + db, sb))
      return;
  if (s.quant(fsdprt_quant_cuda_swap_first_dims(
          gathered, scales, size_t(k), size_t(l.scale_rows),
          size_t(l.scale_cols) * sizeof(float), s.ctx->compute)))
    s.quant(fsdprt_quant_cuda_dequantize(
        fmt, data, scales, nullptr, size_t(l.rows) * size_t(k), size_t(l.cols),
        y, dtype, s.ctx->compute));
}

} // namespace

extern "C" {

void fsdprt_gpu_quant_amax(const void *x, void *amax, int64_t count,
                           int32_t dtype) {
  Step s{entry("fsdprt_gpu_quant_amax"), "fsdprt_gpu_quant_amax"};
  if (!s.ctx)
    return;
  if (dtype != FSDPRT_F32 && dtype != FSDPRT_BF16)
    return s.fail_with(FSDPRT_ERR_INVALID_ARGUMENT,
                       format("dtype %s: only f32 and bf16 quantize",
                              fsdprt_dtype_name(dtype)));
  if (count < 0 || (count > 0 && !x) || !amax || !aligned4(amax))
    return s.fail_with(FSDPRT_ERR_INVALID_ARGUMENT,
                       "bad buffer, count or amax alignment");
  s.quant(fsdprt_quant_cuda_amax(x, dtype, size_t(count),
                                 static_cast<float *>(amax), s.ctx->compute));
}

void fsdprt_gpu_quantize(const void *x, const void *amax, void *packet,
                         int64_t count, int32_t dtype, int32_t fmt,
                         int64_t rows, int64_t cols) {
  Step s{entry("fsdprt_gpu_quantize"), "fsdprt_gpu_quantize"};
  if (!s.ctx)
    return;
  fsdprt_quant_layout l;
  std::string bad = quant_local_layout(dtype, fmt, rows, cols, &l);
  if (bad.empty() && (rows * cols != count || !x || !packet))
    bad = "bad buffer or count";
  if (bad.empty() && amax && !aligned4(amax))
    bad = "amax is not 4-byte aligned";
  if (!bad.empty())
    return s.fail_with(FSDPRT_ERR_INVALID_ARGUMENT, bad);
  quantize(s, x, static_cast<const float *>(amax),
           static_cast<uint8_t *>(packet), dtype, fmt, l);
}

void fsdprt_gpu_dequantize(const void *packets, void *y, int64_t k,
                           int32_t dtype, int32_t fmt, int64_t rows,
                           int64_t cols) {
  Step s{entry("fsdprt_gpu_dequantize"), "fsdprt_gpu_dequantize"};
  if (!s.ctx)
    return;
  fsdprt_quant_layout l;
  std::string bad = quant_local_layout(dtype, fmt, rows, cols, &l);
  if (bad.empty() && (k < 1 || !packets || !y))
    bad = "bad buffer or packet count";
  if (!bad.empty())
    return s.fail_with(FSDPRT_ERR_INVALID_ARGUMENT, bad);
  const auto *in = static_cast<const uint8_t *>(packets);
  if (fmt == FSDPRT_QUANT_FP8_BLOCK_1X128_T)
    return dequantize_transposed(s, in, y, k, dtype, fmt, l);
  const size_t slot = size_t(rows * cols) * fsdprt_dtype_size(dtype);
  for (int64_t j = 0; j < k; ++j)
    if (!dequantize_slot(s, in + j * wire_bytes(l),
                         static_cast<char *>(y) + size_t(j) * slot, dtype, fmt,
                         l))
      return;
}

} // extern "C"

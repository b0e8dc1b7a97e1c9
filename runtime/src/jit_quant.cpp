// fsdprt_jit_quantized_all_gather: the quantized parameter all-gather called
// by compiled code (fsdp.buffer.quantized_all_gather). Built on the public
// collectives, so statistics count the bytes that really travel: the amax
// all-reduce (4 bytes, per-tensor formats and NVFP4) and the all-gather of
// the packed quantized shards (U8).
#include "common.h"
#include "fsdprt_quant.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

using namespace fsdprt;

namespace {

bool usesGroupAmax(int32_t format) {
  return format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         format == FSDPRT_QUANT_FP8_E5M2_TENSOR ||
         format == FSDPRT_QUANT_NVFP4 || format == FSDPRT_QUANT_NVFP4_2D;
}

// One rank's packed shard: [data | scales | per-tensor fp32], the sizes of
// fsdprt_quant_get_layout. Scales and the per-tensor value are not aligned
// inside the packet, so they pass through aligned copies.
struct Packet {
  const fsdprt_quant_layout &layout;
  uint8_t *base;
  uint8_t *data() const { return base; }
  uint8_t *scales() const { return base + layout.data_bytes; }
  uint8_t *tensor() const {
    return base + layout.data_bytes + layout.scale_bytes;
  }
};

// With the CUDA kernels built and a GPU visible, quantization and
// dequantization run on the GPU (bit-identical to the CPU reference, which
// stays the fallback); FSDPRT_QUANT_DEVICE=0 in the environment forces the
// CPU reference.
bool useDevice() {
  static const bool use = [] {
    const char *env = std::getenv("FSDPRT_QUANT_DEVICE");
    if (env && std::strcmp(env, "0") == 0)
      return false;
    return fsdprt_quant_cuda_available() != 0;
  }();
  return use;
}

int quantize(int32_t format, const void *x, int dtype,
             const fsdprt_quant_layout &l, float amax, const Packet &out) {
  float tensorValue = 0;
  int st = FSDPRT_ERR_UNSUPPORTED;
  if (useDevice())
    st =
        fsdprt_quant_cuda_quantize_host(format, x, dtype, l.rows, l.cols, amax,
                                        out.data(), out.scales(), &tensorValue);
  if (st == FSDPRT_ERR_UNSUPPORTED)
    st = fsdprt_quant_quantize(format, x, dtype, l.rows, l.cols, amax,
                               out.data(), out.scales(), &tensorValue);
  if (l.tensor_bytes)
    std::memcpy(out.tensor(), &tensorValue, sizeof(float));
  return st;
}

int dequantize(int32_t format, const uint8_t *data, const void *scales,
               float tensorValue, size_t rows, size_t cols, void *y,
               int dtype) {
  int st = FSDPRT_ERR_UNSUPPORTED;
  if (useDevice())
    st = fsdprt_quant_cuda_dequantize_host(format, data, scales, tensorValue,
                                           rows, cols, y, dtype);
  if (st == FSDPRT_ERR_UNSUPPORTED)
    st = fsdprt_quant_dequantize(format, data, scales, tensorValue, rows, cols,
                                 y, dtype);
  return st;
}

int dequantize(int32_t format, const Packet &in, const fsdprt_quant_layout &l,
               void *y, int dtype) {
  float tensorValue = 0;
  if (l.tensor_bytes)
    std::memcpy(&tensorValue, in.tensor(), sizeof(float));
  return dequantize(format, in.data(), in.scales(), tensorValue, l.rows, l.cols,
                    y, dtype);
}

// Records a local failure and aborts the world, as the collectives do for a
// bad argument, so the other ranks of the group do not wait for this one.
void failLocal(fsdprt_comm *c, fsdprt_status_t code, const std::string &what) {
  Status st(code, format("rank %lld: %s: quantized_all_gather: %s",
                         (long long)c->rank, fsdprt_status_string(code),
                         what.c_str()));
  c->abort(st);
  c->record_error(st);
}

// The arguments the compiler never emits wrong; the reason when they are.
std::string badArguments(fsdprt_comm *c, const void *send, const void *recv,
                         int64_t count, int32_t dtype, int32_t fmt,
                         int64_t rows, int64_t cols, int64_t group_mask) {
  if (dtype != FSDPRT_F32 && dtype != FSDPRT_BF16)
    return format("dtype %s: only f32 and bf16 quantize",
                  fsdprt_dtype_name(dtype));
  if (!fsdprt_quant_format_name(fmt))
    return format("unknown format %d", (int)fmt);
  if (group_mask < 0 || group_mask >= c->mesh.num_masks())
    return format("group mask %lld selects axes outside the %d-axis mesh",
                  (long long)group_mask, (int)c->mesh.ndims);
  if (count < 0 || rows < 0 || cols < 0 || (cols != 0 && rows > count / cols) ||
      rows * cols != count)
    return format("shape [%lld, %lld] does not view %lld elements",
                  (long long)rows, (long long)cols, (long long)count);
  if (count > 0 && (!send || !recv))
    return "NULL buffer";
  return "";
}

void dequantizeAll(fsdprt_comm *c, const uint8_t *all, void *recv, int64_t k,
                   int64_t count, int32_t dtype, int32_t fmt,
                   const fsdprt_quant_layout &layout);

// Quantizes this rank's shard with the group's scale, all-gathers the
// packets and dequantizes every slot into `recv`.
void exchange(fsdprt_comm *c, void *send, void *recv, int64_t count,
              int32_t dtype, int32_t fmt, const fsdprt_quant_layout &layout,
              int64_t group_mask) {
  const char *fmtName = fsdprt_quant_format_name(fmt);
  const int qdtype = dtype; // fsdprt_quant_dtype uses fsdprt_dtype values
  // Every rank must scale with the group's amax.
  float amax = 0;
  if (usesGroupAmax(fmt)) {
    float local = 0;
    if (fsdprt_quant_amax(send, qdtype, size_t(count), &local) != FSDPRT_OK)
      return failLocal(c, FSDPRT_ERR_INTERNAL,
                       format("%s: %s", fmtName, fsdprt_quant_last_error()));
    if (fsdprt_all_reduce(c, group_mask, &local, &amax, 1, FSDPRT_F32,
                          FSDPRT_MAX) != FSDPRT_OK)
      return; // recorded by the collective
  }
  const int64_t wire =
      int64_t(layout.data_bytes + layout.scale_bytes + layout.tensor_bytes);
  const int64_t k = c->mesh.group_size(group_mask);
  std::vector<uint8_t> mine(static_cast<size_t>(wire));
  std::vector<uint8_t> all(static_cast<size_t>(wire * k));
  if (quantize(fmt, send, qdtype, layout, amax, Packet{layout, mine.data()}) !=
      FSDPRT_OK)
    return failLocal(c, FSDPRT_ERR_INTERNAL,
                     format("%s: %s", fmtName, fsdprt_quant_last_error()));
  if (fsdprt_all_gather(c, group_mask, mine.data(), all.data(), wire,
                        FSDPRT_U8) != FSDPRT_OK)
    return; // recorded by the collective
  dequantizeAll(c, all.data(), recv, k, count, dtype, fmt, layout);
}

// Dequantizes `k` gathered packets into `recv`, slot after slot.
void dequantizeAll(fsdprt_comm *c, const uint8_t *all, void *recv, int64_t k,
                   int64_t count, int32_t dtype, int32_t fmt,
                   const fsdprt_quant_layout &layout) {
  const char *fmtName = fsdprt_quant_format_name(fmt);
  const int qdtype = dtype;
  const int64_t wire =
      int64_t(layout.data_bytes + layout.scale_bytes + layout.tensor_bytes);
  const size_t slotBytes = size_t(count) * fsdprt_dtype_size(dtype);
  if (fmt == FSDPRT_QUANT_FP8_BLOCK_1X128_T) {
    // TE's scale layout: the k gathered [nb, rows] arrays, swapped into the
    // full tensor's [nb, k * rows], dequantize the [k * rows, cols] whole.
    const size_t sb = size_t(layout.scale_bytes),
                 db = size_t(layout.data_bytes);
    std::vector<uint8_t> data(db * size_t(k)), gathered(sb * size_t(k));
    std::vector<float> scales(gathered.size() / sizeof(float));
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(data.data() + size_t(j) * db, all + j * wire, db);
      std::memcpy(gathered.data() + size_t(j) * sb, all + j * wire + db, sb);
    }
    if (fsdprt_quant_swap_first_dims(gathered.data(), scales.data(), size_t(k),
                                     size_t(layout.scale_rows),
                                     size_t(layout.scale_cols) *
                                         sizeof(float)) != FSDPRT_OK ||
        dequantize(fmt, data.data(), scales.data(), 0.0f,
                   size_t(layout.rows) * size_t(k), size_t(layout.cols), recv,
                   qdtype) != FSDPRT_OK)
      return failLocal(c, FSDPRT_ERR_INTERNAL,
                       format("%s: %s", fmtName, fsdprt_quant_last_error()));
    return;
  }
  for (int64_t j = 0; j < k; ++j) {
    Packet slot{layout, const_cast<uint8_t *>(all) + j * wire};
    if (dequantize(fmt, slot, layout,
                   static_cast<char *>(recv) + size_t(j) * slotBytes,
                   qdtype) != FSDPRT_OK)
      return failLocal(c, FSDPRT_ERR_INTERNAL,
                       format("%s: slot %lld: %s", fmtName, (long long)j,
                              fsdprt_quant_last_error()));
  }
}

void run(fsdprt_comm *c, void *send, void *recv, int64_t count, int32_t dtype,
         int32_t fmt, int64_t rows, int64_t cols, int64_t group_mask) {
  if (c->backend == FSDPRT_BACKEND_NCCL)
    return failLocal(c, FSDPRT_ERR_UNSUPPORTED,
                     "the quantized all-gather of compiled code works on host "
                     "buffers (threads and mpi backends), not on nccl");
  std::string bad =
      badArguments(c, send, recv, count, dtype, fmt, rows, cols, group_mask);
  if (!bad.empty())
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT, bad);
  int64_t shape[2] = {rows, cols};
  fsdprt_quant_layout layout;
  if (fsdprt_quant_get_layout(fmt, shape, 2, &layout) != FSDPRT_OK)
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("%s: %s", fsdprt_quant_format_name(fmt),
                            fsdprt_quant_last_error()));
  exchange(c, send, recv, count, dtype, fmt, layout, group_mask);
}

// Runs a local step on the thread's comm: nothing after an earlier error,
// the error recorded (and the job ended on mpi) after a failing one.
template <typename F> void localStep(const char *entry, F &&step) {
  fsdprt_comm *c = fsdprt_get_thread_comm();
  if (!c) {
    // The process-level "no communicator" error of the other entry points.
    fsdprt_jit_all_gather(nullptr, nullptr, 0, FSDPRT_U8, 0);
    return;
  }
  if (c->first_error() != FSDPRT_OK)
    return;
  std::string bad;
  try {
    bad = step();
  } catch (const std::bad_alloc &) {
    bad = "out of memory";
  }
  if (!bad.empty()) {
    Status st(
        FSDPRT_ERR_INVALID_ARGUMENT,
        format("rank %lld: %s: %s", (long long)c->rank, entry, bad.c_str()));
    c->abort(st);
    c->record_error(st);
  }
  if (c->first_error() != FSDPRT_OK)
    c->jit_failed();
}

} // namespace

std::string fsdprt::quant_local_layout(int32_t dtype, int32_t fmt, int64_t rows,
                                       int64_t cols,
                                       fsdprt_quant_layout *layout) {
  if (dtype != FSDPRT_F32 && dtype != FSDPRT_BF16)
    return format("dtype %s: only f32 and bf16 quantize",
                  fsdprt_dtype_name(dtype));
  if (!fsdprt_quant_format_name(fmt))
    return format("unknown format %d", (int)fmt);
  int64_t shape[2] = {rows, cols};
  if (rows <= 0 || cols <= 0 ||
      fsdprt_quant_get_layout(fmt, shape, 2, layout) != FSDPRT_OK)
    return format("%s: shape [%lld, %lld]: %s", fsdprt_quant_format_name(fmt),
                  (long long)rows, (long long)cols,
                  rows <= 0 || cols <= 0 ? "not positive"
                                         : fsdprt_quant_last_error());
  return "";
}

extern "C" {

void fsdprt_jit_quant_amax(const void *x, void *amax, int64_t count,
                           int32_t dtype) {
  localStep("quant_amax", [&]() -> std::string {
    if (dtype != FSDPRT_F32 && dtype != FSDPRT_BF16)
      return format("dtype %s: only f32 and bf16 quantize",
                    fsdprt_dtype_name(dtype));
    if (count < 0 || (count > 0 && !x) || !amax)
      return "bad buffer or count";
    float value = 0;
    if (fsdprt_quant_amax(x, dtype, size_t(count), &value) != FSDPRT_OK)
      return fsdprt_quant_last_error();
    std::memcpy(amax, &value, sizeof(float));
    return "";
  });
}

void fsdprt_jit_quantize(const void *x, const void *amax, void *packet,
                         int64_t count, int32_t dtype, int32_t fmt,
                         int64_t rows, int64_t cols) {
  localStep("quantize", [&]() -> std::string {
    fsdprt_quant_layout layout;
    std::string bad = quant_local_layout(dtype, fmt, rows, cols, &layout);
    if (!bad.empty())
      return bad;
    if (rows * cols != count || !x || !packet)
      return "bad buffer or count";
    float groupAmax = 0;
    if (usesGroupAmax(fmt)) {
      if (!amax)
        return "the format needs the group's amax";
      std::memcpy(&groupAmax, amax, sizeof(float));
    }
    if (quantize(fmt, x, dtype, layout, groupAmax,
                 Packet{layout, static_cast<uint8_t *>(packet)}) != FSDPRT_OK)
      return std::string(fsdprt_quant_format_name(fmt)) + ": " +
             fsdprt_quant_last_error();
    return "";
  });
}

void fsdprt_jit_dequantize(const void *packets, void *y, int64_t k,
                           int32_t dtype, int32_t fmt, int64_t rows,
                           int64_t cols) {
  localStep("dequantize", [&]() -> std::string {
    fsdprt_quant_layout layout;
    std::string bad = quant_local_layout(dtype, fmt, rows, cols, &layout);
    if (!bad.empty())
      return bad;
    if (k < 1 || !packets || !y)
      return "bad buffer or packet count";
    fsdprt_comm *c = fsdprt_get_thread_comm();
    dequantizeAll(c, static_cast<const uint8_t *>(packets), y, k, rows * cols,
                  dtype, fmt, layout);
    return "";
  });
}

void fsdprt_jit_quantized_all_gather(void *send, void *recv, int64_t count,
                                     int32_t dtype, int32_t format,
                                     int64_t rows, int64_t cols,
                                     int64_t group_mask) {
  fsdprt_comm *c = fsdprt_get_thread_comm();
  if (!c) {
    // Records the process-level "no communicator" error the other entry
    // points record.
    fsdprt_jit_all_gather(send, recv, count, FSDPRT_U8, group_mask);
    return;
  }
  if (c->first_error() != FSDPRT_OK)
    return;
  try {
    run(c, send, recv, count, dtype, format, rows, cols, group_mask);
  } catch (const std::bad_alloc &) {
    failLocal(c, FSDPRT_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (c->first_error() != FSDPRT_OK)
    c->jit_failed();
}

} // extern "C"

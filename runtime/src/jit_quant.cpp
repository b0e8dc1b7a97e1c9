// fsdprt_jit_quantized_all_gather: the quantized parameter all-gather called
// by compiled code (fsdp.buffer.quantized_all_gather). Built on the public
// collectives, so statistics count the bytes that really travel: the amax
// all-reduce (4 bytes, per-tensor formats and NVFP4) and the all-gather of
// the packed quantized shards (U8).
#include "common.h"
#include "fsdprt_quant.h"

#include <cstring>
#include <new>
#include <vector>

using namespace fsdprt;

namespace {

bool usesGroupAmax(int32_t format) {
  return format == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         format == FSDPRT_QUANT_FP8_E5M2_TENSOR || format == FSDPRT_QUANT_NVFP4;
}

int fp8Kind(int32_t format) {
  return format == FSDPRT_QUANT_FP8_E5M2_TENSOR ? FSDPRT_QUANT_E5M2
                                                : FSDPRT_QUANT_E4M3;
}

int blockRows(int32_t format) {
  return format == FSDPRT_QUANT_FP8_BLOCK_128X128 ? 128 : 1;
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

int quantize(int32_t format, const void *x, int dtype,
             const fsdprt_quant_layout &l, float amax, const Packet &out) {
  size_t n = size_t(l.rows * l.cols);
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR: {
    float scale_inv = 0;
    int st = fsdprt_quant_fp8_tensor_quantize(
        x, dtype, n, amax, fp8Kind(format), out.data(), &scale_inv);
    std::memcpy(out.tensor(), &scale_inv, sizeof(float));
    return st;
  }
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_mxfp8_quantize(x, dtype, l.rows, l.cols,
                                       format == FSDPRT_QUANT_MXFP8_COLWISE,
                                       out.data(), out.scales());
  case FSDPRT_QUANT_NVFP4: {
    std::memcpy(out.tensor(), &amax, sizeof(float));
    return fsdprt_quant_nvfp4_quantize(x, dtype, l.rows, l.cols, amax,
                                       out.data(), out.scales());
  }
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128: {
    std::vector<float> scale_inv(l.scale_rows * l.scale_cols);
    int st = fsdprt_quant_fp8_block_quantize(x, dtype, l.rows, l.cols,
                                             blockRows(format), /*pow2=*/1,
                                             out.data(), scale_inv.data());
    std::memcpy(out.scales(), scale_inv.data(), l.scale_bytes);
    return st;
  }
  }
  return FSDPRT_QUANT_ERR_INVALID_ARGUMENT;
}

int dequantize(int32_t format, const Packet &in, const fsdprt_quant_layout &l,
               void *y, int dtype) {
  size_t n = size_t(l.rows * l.cols);
  float tensor_value = 0;
  if (l.tensor_bytes)
    std::memcpy(&tensor_value, in.tensor(), sizeof(float));
  switch (format) {
  case FSDPRT_QUANT_FP8_E4M3_TENSOR:
  case FSDPRT_QUANT_FP8_E5M2_TENSOR:
    return fsdprt_quant_fp8_tensor_dequantize(in.data(), n, fp8Kind(format),
                                              tensor_value, y, dtype);
  case FSDPRT_QUANT_MXFP8_ROWWISE:
  case FSDPRT_QUANT_MXFP8_COLWISE:
    return fsdprt_quant_mxfp8_dequantize(in.data(), in.scales(), l.rows, l.cols,
                                         format == FSDPRT_QUANT_MXFP8_COLWISE,
                                         y, dtype);
  case FSDPRT_QUANT_NVFP4:
    return fsdprt_quant_nvfp4_dequantize(in.data(), in.scales(), l.rows, l.cols,
                                         tensor_value, y, dtype);
  case FSDPRT_QUANT_FP8_BLOCK_1X128:
  case FSDPRT_QUANT_FP8_BLOCK_128X128: {
    std::vector<float> scale_inv(l.scale_rows * l.scale_cols);
    std::memcpy(scale_inv.data(), in.scales(), l.scale_bytes);
    return fsdprt_quant_fp8_block_dequantize(in.data(), scale_inv.data(),
                                             l.rows, l.cols, blockRows(format),
                                             y, dtype);
  }
  }
  return FSDPRT_QUANT_ERR_INVALID_ARGUMENT;
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

void run(fsdprt_comm *c, void *send, void *recv, int64_t count, int32_t dtype,
         int32_t fmt, int64_t rows, int64_t cols, int64_t group_mask) {
  if (c->backend == FSDPRT_BACKEND_NCCL)
    return failLocal(c, FSDPRT_ERR_UNSUPPORTED,
                     "the quantized all-gather of compiled code works on host "
                     "buffers (threads and mpi backends), not on nccl");
  if (dtype != FSDPRT_F32 && dtype != FSDPRT_BF16)
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("dtype %s: only f32 and bf16 quantize",
                            fsdprt_dtype_name(dtype)));
  if (!fsdprt_quant_format_name(fmt))
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("unknown format %d", (int)fmt));
  if (group_mask < 0 || group_mask >= c->mesh.num_masks())
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("group mask %lld selects axes outside the %d-axis "
                            "mesh",
                            (long long)group_mask, (int)c->mesh.ndims));
  if (count < 0 || rows < 0 || cols < 0 || (cols != 0 && rows > count / cols) ||
      rows * cols != count)
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("shape [%lld, %lld] does not view %lld elements",
                            (long long)rows, (long long)cols,
                            (long long)count));
  if (count > 0 && (!send || !recv))
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT, "NULL buffer");
  const char *fmtName = fsdprt_quant_format_name(fmt);
  int64_t shape[2] = {rows, cols};
  fsdprt_quant_layout layout;
  if (fsdprt_quant_get_layout(fmt, shape, 2, &layout) != FSDPRT_QUANT_OK)
    return failLocal(c, FSDPRT_ERR_INVALID_ARGUMENT,
                     format("%s: %s", fmtName, fsdprt_quant_last_error()));
  const int qdtype = dtype; // fsdprt_quant_dtype uses fsdprt_dtype values

  // Every rank must scale with the group's amax.
  float amax = 0;
  if (usesGroupAmax(fmt)) {
    float local = 0;
    if (fsdprt_quant_amax(send, qdtype, size_t(count), &local) !=
        FSDPRT_QUANT_OK)
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
      FSDPRT_QUANT_OK)
    return failLocal(c, FSDPRT_ERR_INTERNAL,
                     format("%s: %s", fmtName, fsdprt_quant_last_error()));
  if (fsdprt_all_gather(c, group_mask, mine.data(), all.data(), wire,
                        FSDPRT_U8) != FSDPRT_OK)
    return; // recorded by the collective
  const size_t slotBytes = size_t(count) * fsdprt_dtype_size(dtype);
  for (int64_t j = 0; j < k; ++j) {
    Packet slot{layout, all.data() + j * wire};
    if (dequantize(fmt, slot, layout,
                   static_cast<char *>(recv) + size_t(j) * slotBytes,
                   qdtype) != FSDPRT_QUANT_OK)
      return failLocal(c, FSDPRT_ERR_INTERNAL,
                       format("%s: slot %lld: %s", fmtName, (long long)j,
                              fsdprt_quant_last_error()));
  }
}

} // namespace

extern "C" {

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

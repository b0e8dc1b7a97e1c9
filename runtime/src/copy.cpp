// Shard / unshard copy kernels on tensors viewed as [outer, rows, inner].
#include "fsdprt.h"

#include <cstring>

namespace {

bool bad_sizes(int64_t outer, int64_t inner, int64_t elem_size) {
  return outer < 0 || inner < 0 || elem_size <= 0;
}

// Copies `rows` rows of every outer index; contiguous blocks collapse
// into one memcpy.
void copy_block(char *dst, int64_t dst_rows, int64_t dst_row, const char *src,
                int64_t src_rows, int64_t src_row, int64_t rows, int64_t outer,
                int64_t row_bytes) {
  if (rows == 0 || outer == 0 || row_bytes == 0)
    return;
  size_t block = size_t(rows * row_bytes);
  if (outer == 1 || (rows == dst_rows && rows == src_rows)) {
    std::memcpy(dst + dst_row * row_bytes, src + src_row * row_bytes,
                block * size_t(outer == 1 ? 1 : outer));
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + (o * dst_rows + dst_row) * row_bytes,
                src + (o * src_rows + src_row) * row_bytes, block);
}

void zero_block(char *dst, int64_t dst_rows, int64_t row, int64_t rows,
                int64_t outer, int64_t row_bytes) {
  if (rows == 0 || outer == 0 || row_bytes == 0)
    return;
  if (outer == 1 || rows == dst_rows) {
    std::memset(dst + row * row_bytes, 0, size_t(rows * row_bytes * outer));
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    std::memset(dst + (o * dst_rows + row) * row_bytes, 0,
                size_t(rows * row_bytes));
}

} // namespace

extern "C" {

int64_t fsdprt_shard_slot_rows(int64_t n, int64_t k) {
  if (n <= 0 || k <= 0)
    return 0;
  return (n + k - 1) / k;
}

fsdprt_status_t fsdprt_shard_extent(int64_t n, int64_t k, int64_t i,
                                    int32_t policy, int64_t *offset,
                                    int64_t *size) {
  if (n < 0 || k <= 0 || i < 0 || i >= k || !offset || !size)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (policy == FSDPRT_SHARD_CEIL) {
    int64_t c = fsdprt_shard_slot_rows(n, k);
    int64_t lo = i * c < n ? i * c : n;
    int64_t hi = (i + 1) * c < n ? (i + 1) * c : n;
    *offset = lo;
    *size = hi - lo;
    return FSDPRT_OK;
  }
  if (policy == FSDPRT_SHARD_BALANCED) {
    int64_t b = n / k, r = n % k;
    *offset = i * b + (i < r ? i : r);
    *size = b + (i < r ? 1 : 0);
    return FSDPRT_OK;
  }
  return FSDPRT_ERR_INVALID_ARGUMENT;
}

fsdprt_status_t fsdprt_copy_rows(void *dst, int64_t dst_rows, int64_t dst_row,
                                 const void *src, int64_t src_rows,
                                 int64_t src_row, int64_t rows, int64_t outer,
                                 int64_t inner, int64_t elem_size) {
  if (bad_sizes(outer, inner, elem_size) || rows < 0 || dst_row < 0 ||
      src_row < 0 || dst_row + rows > dst_rows || src_row + rows > src_rows)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (rows && outer && inner && (!dst || !src))
    return FSDPRT_ERR_INVALID_ARGUMENT;
  copy_block(static_cast<char *>(dst), dst_rows, dst_row,
             static_cast<const char *>(src), src_rows, src_row, rows, outer,
             inner * elem_size);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_zero_rows(void *dst, int64_t dst_rows, int64_t row,
                                 int64_t rows, int64_t outer, int64_t inner,
                                 int64_t elem_size) {
  if (bad_sizes(outer, inner, elem_size) || rows < 0 || row < 0 ||
      row + rows > dst_rows)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (rows && outer && inner && !dst)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  zero_block(static_cast<char *>(dst), dst_rows, row, rows, outer,
             inner * elem_size);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_resize_rows(void *dst, int64_t dst_rows, const void *src,
                                   int64_t src_rows, int64_t outer,
                                   int64_t inner, int64_t elem_size) {
  if (bad_sizes(outer, inner, elem_size) || dst_rows < 0 || src_rows < 0)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  int64_t rows = dst_rows < src_rows ? dst_rows : src_rows;
  fsdprt_status_t st = fsdprt_copy_rows(dst, dst_rows, 0, src, src_rows, 0,
                                        rows, outer, inner, elem_size);
  if (st != FSDPRT_OK)
    return st;
  return fsdprt_zero_rows(dst, dst_rows, rows, dst_rows - rows, outer, inner,
                          elem_size);
}

static fsdprt_status_t chunk_cat(bool pack, void *packed, int64_t slot_stride,
                                 void *full, int64_t outer, int64_t n,
                                 int64_t inner, int64_t k, int32_t policy,
                                 int64_t elem_size) {
  if (bad_sizes(outer, inner, elem_size) || n < 0 || k <= 0 ||
      slot_stride < 0 ||
      (policy != FSDPRT_SHARD_CEIL && policy != FSDPRT_SHARD_BALANCED))
    return FSDPRT_ERR_INVALID_ARGUMENT;
  int64_t c = fsdprt_shard_slot_rows(n, k);
  int64_t slot_elems = outer * c * inner;
  if (slot_stride == 0)
    slot_stride = slot_elems;
  if (slot_stride < slot_elems)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (slot_elems && (!packed || !full))
    return FSDPRT_ERR_INVALID_ARGUMENT;
  int64_t row_bytes = inner * elem_size;
  for (int64_t j = 0; j < k; ++j) {
    int64_t off = 0, size = 0;
    fsdprt_shard_extent(n, k, j, policy, &off, &size);
    char *slot = static_cast<char *>(packed) + j * slot_stride * elem_size;
    if (pack) {
      copy_block(slot, c, 0, static_cast<const char *>(full), n, off, size,
                 outer, row_bytes);
      zero_block(slot, c, size, c - size, outer, row_bytes);
    } else {
      copy_block(static_cast<char *>(full), n, off, slot, c, 0, size, outer,
                 row_bytes);
    }
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_chunk_cat_pack(void *packed, int64_t slot_stride,
                                      const void *full, int64_t outer,
                                      int64_t n, int64_t inner, int64_t k,
                                      int32_t policy, int64_t elem_size) {
  return chunk_cat(true, packed, slot_stride, const_cast<void *>(full), outer,
                   n, inner, k, policy, elem_size);
}

fsdprt_status_t fsdprt_chunk_cat_unpack(void *full, const void *packed,
                                        int64_t slot_stride, int64_t outer,
                                        int64_t n, int64_t inner, int64_t k,
                                        int32_t policy, int64_t elem_size) {
  return chunk_cat(false, const_cast<void *>(packed), slot_stride, full, outer,
                   n, inner, k, policy, elem_size);
}

fsdprt_status_t fsdprt_swap_first_dims(void *out, const void *in, int64_t d0,
                                       int64_t d1, int64_t inner,
                                       int64_t elem_size) {
  if (d0 < 0 || d1 < 0 || inner < 0 || elem_size <= 0)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (d0 * d1 * inner == 0)
    return FSDPRT_OK;
  if (!out || !in || out == in)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  size_t block = size_t(inner * elem_size);
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  for (int64_t a = 0; a < d1; ++a)
    for (int64_t b = 0; b < d0; ++b)
      std::memcpy(dst + (a * d0 + b) * int64_t(block),
                  src + (b * d1 + a) * int64_t(block), block);
  return FSDPRT_OK;
}

} // extern "C"

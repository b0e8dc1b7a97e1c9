//===- memref.cpp - strided memref copies for compiled steps --------------===//
//
// The copy that MLIR's `memref.copy` lowers to when neither side is
// contiguous (upstream: `memrefCopy` in libmlir_c_runner_utils). A step
// compiled ahead of time calls this one instead (fsdp-compile renames the
// call), so that it needs nothing of LLVM or MLIR where it runs.
//
//===----------------------------------------------------------------------===//

#include "fsdprt.h"

#include <cstring>
#include <vector>

namespace {

/// A ranked descriptor's fields: base, data, offset, sizes, strides.
struct View {
  char *data;
  const int64_t *sizes, *strides;
};

View viewOf(const fsdprt_unranked_memref_t *m, int64_t elementBytes) {
  const int64_t *words = static_cast<const int64_t *>(m->descriptor);
  char *aligned = reinterpret_cast<char *>(words[1]);
  return {aligned + words[2] * elementBytes, words + 3, words + 3 + m->rank};
}

bool isContiguous(const View &v, int64_t rank) {
  int64_t expect = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (v.sizes[d] != 1 && v.strides[d] != expect)
      return false;
    expect *= v.sizes[d];
  }
  return true;
}

} // namespace

void fsdprt_memref_copy(int64_t element_bytes,
                        const fsdprt_unranked_memref_t *src,
                        const fsdprt_unranked_memref_t *dst) {
  int64_t rank = src->rank;
  View s = viewOf(src, element_bytes), d = viewOf(dst, element_bytes);
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i)
    count *= s.sizes[i];
  if (count == 0)
    return;
  if (isContiguous(s, rank) && isContiguous(d, rank)) {
    std::memmove(d.data, s.data, size_t(count * element_bytes));
    return;
  }
  // Element by element in row-major order, as upstream's copy.
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t so = 0, dof = 0;
  for (int64_t e = 0; e < count; ++e) {
    std::memcpy(d.data + dof * element_bytes, s.data + so * element_bytes,
                size_t(element_bytes));
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      so += s.strides[axis];
      dof += d.strides[axis];
      if (++index[size_t(axis)] < s.sizes[axis])
        break;
      so -= s.strides[axis] * s.sizes[axis];
      dof -= d.strides[axis] * d.sizes[axis];
      index[size_t(axis)] = 0;
    }
  }
}

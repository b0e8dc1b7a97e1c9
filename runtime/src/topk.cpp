// fsdprt_jit_topk_indices: the indices aten's CPU topk kernel picks
// (aten/src/ATen/native/TopKImpl.h, topk_impl_loop), with the same
// algorithm, so that ties (and NaN) resolve as they do in torch: each row is
// a vector of (value, position) pairs; with k * 64 <= n std::partial_sort of
// its first k entries, otherwise std::nth_element of entry k - 1 and, when
// `sorted`, std::sort of the first k - 1 entries. The comparator compares
// values only, with NaN above every number (largest: NaN first; smallest:
// NaN last). bf16 and f16 compare as float, as aten's accumulator type (a
// 16-bit float converts to float exactly, so every comparison agrees).
//
// fsdprt_jit_sort_indices: the indices aten's unstable CPU sort gives
// (aten/src/ATen/native/cpu/SortingKernel.cpp, sort_kernel with
// stable=false): std::sort, libstdc++'s introsort, of each row's (value,
// position) pairs with aten's KeyValueCompAsc / KeyValueCompDesc, the same
// comparator as topk's (values only, NaN above every number). std::sort's
// comparisons and moves depend only on the comparator's answers, so a vector
// of pairs ends in the order aten's composite (values, indices) iterator
// does: ties come out as in torch.
#include "fsdprt.h"

#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

template <typename T> bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

/// aten's comparator: `x` strictly before `y` (largest / descending: the
/// greater first, NaN first; else the smaller first, NaN last).
template <typename Acc> struct Before {
  bool largest;
  bool operator()(const std::pair<Acc, int64_t> &x,
                  const std::pair<Acc, int64_t> &y) const {
    if (largest)
      return (isNan(x.first) && !isNan(y.first)) || (x.first > y.first);
    return (!isNan(x.first) && isNan(y.first)) || (x.first < y.first);
  }
};

template <typename Acc, typename Load>
void topkRows(Load load, int64_t rows, int64_t n, int64_t k, bool largest,
              bool sorted, int64_t *indices) {
  using Elem = std::pair<Acc, int64_t>;
  Before<Acc> before{largest};
  std::vector<Elem> queue(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      queue[j] = Elem(load(r * n + j), j);
    if (k * 64 <= n) {
      std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
    } else {
      std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(),
                       before);
      if (sorted)
        std::sort(queue.begin(), queue.begin() + k - 1, before);
    }
    for (int64_t j = 0; j < k; ++j)
      indices[r * k + j] = queue[j].second;
  }
}

template <typename Acc, typename Load>
void sortRows(Load load, int64_t rows, int64_t n, bool descending,
              int64_t *indices) {
  using Elem = std::pair<Acc, int64_t>;
  std::vector<Elem> row(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      row[j] = Elem(load(r * n + j), j);
    std::sort(row.begin(), row.end(), Before<Acc>{descending});
    for (int64_t j = 0; j < n; ++j)
      indices[r * n + j] = row[j].second;
  }
}

/// Calls `f(load, Acc())` with the loader of `dtype`'s elements of `x` and
/// their accumulator type; false for another dtype.
template <typename F> bool withRows(const void *x, int32_t dtype, F &&f) {
  switch (dtype) {
  case FSDPRT_F32: {
    auto *p = static_cast<const float *>(x);
    f([p](int64_t i) { return p[i]; }, float());
    return true;
  }
  case FSDPRT_F64: {
    auto *p = static_cast<const double *>(x);
    f([p](int64_t i) { return p[i]; }, double());
    return true;
  }
  case FSDPRT_BF16: {
    auto *p = static_cast<const uint16_t *>(x);
    f([p](int64_t i) { return fsdprt::bf16_to_f32(p[i]); }, float());
    return true;
  }
  case FSDPRT_F16: {
    auto *p = static_cast<const uint16_t *>(x);
    f([p](int64_t i) { return fsdprt::f16_to_f32(p[i]); }, float());
    return true;
  }
  case FSDPRT_I32: {
    auto *p = static_cast<const int32_t *>(x);
    f([p](int64_t i) { return p[i]; }, int32_t());
    return true;
  }
  case FSDPRT_I64: {
    auto *p = static_cast<const int64_t *>(x);
    f([p](int64_t i) { return p[i]; }, int64_t());
    return true;
  }
  default:
    return false;
  }
}

} // namespace

extern "C" {

void fsdprt_jit_topk_indices(const void *x, int32_t dtype, int64_t rows,
                             int64_t n, int64_t k, int32_t largest,
                             int32_t sorted, int64_t *indices) {
  if (k <= 0 || rows <= 0)
    return;
  if (k > n || !x || !indices) {
    fsdprt_jit_guard(0, "fsdprt_jit_topk_indices: k is larger than the row, "
                        "or a buffer is missing");
    return;
  }
  bool big = largest != 0, keep = sorted != 0;
  if (!withRows(x, dtype, [&](auto load, auto acc) {
        topkRows<decltype(acc)>(load, rows, n, k, big, keep, indices);
      }))
    fsdprt_jit_guard(0, "fsdprt_jit_topk_indices: unsupported element type");
}

void fsdprt_jit_sort_indices(const void *x, int32_t dtype, int64_t rows,
                             int64_t n, int32_t descending, int64_t *indices) {
  if (n <= 0 || rows <= 0)
    return;
  if (!x || !indices) {
    fsdprt_jit_guard(0, "fsdprt_jit_sort_indices: a buffer is missing");
    return;
  }
  bool desc = descending != 0;
  if (!withRows(x, dtype, [&](auto load, auto acc) {
        sortRows<decltype(acc)>(load, rows, n, desc, indices);
      }))
    fsdprt_jit_guard(0, "fsdprt_jit_sort_indices: unsupported element type");
}

} // extern "C"

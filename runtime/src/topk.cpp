// fsdprt_jit_topk_indices: the indices aten's CPU topk kernel picks
// (aten/src/ATen/native/TopKImpl.h, topk_impl_loop), with the same
// algorithm, so that ties (and NaN) resolve as they do in torch: each row is
// a vector of (value, position) pairs; with k * 64 <= n std::partial_sort of
// its first k entries, otherwise std::nth_element of entry k - 1 and, when
// `sorted`, std::sort of the first k - 1 entries. The comparator compares
// values only, with NaN above every number (largest: NaN first; smallest:
// NaN last). bf16 and f16 compare as float, as aten's accumulator type (a
// 16-bit float converts to float exactly, so every comparison agrees).
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

template <typename Acc, typename Load>
void topkRows(Load load, int64_t rows, int64_t n, int64_t k, bool largest,
              bool sorted, int64_t *indices) {
  using Elem = std::pair<Acc, int64_t>;
  auto before = [largest](const Elem &x, const Elem &y) {
    if (largest)
      return (isNan(x.first) && !isNan(y.first)) || (x.first > y.first);
    return (!isNan(x.first) && isNan(y.first)) || (x.first < y.first);
  };
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
  switch (dtype) {
  case FSDPRT_F32: {
    auto *p = static_cast<const float *>(x);
    topkRows<float>([p](int64_t i) { return p[i]; }, rows, n, k, big, keep,
                    indices);
    return;
  }
  case FSDPRT_F64: {
    auto *p = static_cast<const double *>(x);
    topkRows<double>([p](int64_t i) { return p[i]; }, rows, n, k, big, keep,
                     indices);
    return;
  }
  case FSDPRT_BF16: {
    auto *p = static_cast<const uint16_t *>(x);
    topkRows<float>([p](int64_t i) { return fsdprt::bf16_to_f32(p[i]); }, rows,
                    n, k, big, keep, indices);
    return;
  }
  case FSDPRT_F16: {
    auto *p = static_cast<const uint16_t *>(x);
    topkRows<float>([p](int64_t i) { return fsdprt::f16_to_f32(p[i]); }, rows,
                    n, k, big, keep, indices);
    return;
  }
  case FSDPRT_I32: {
    auto *p = static_cast<const int32_t *>(x);
    topkRows<int32_t>([p](int64_t i) { return p[i]; }, rows, n, k, big, keep,
                      indices);
    return;
  }
  case FSDPRT_I64: {
    auto *p = static_cast<const int64_t *>(x);
    topkRows<int64_t>([p](int64_t i) { return p[i]; }, rows, n, k, big, keep,
                      indices);
    return;
  }
  default:
    fsdprt_jit_guard(0, "fsdprt_jit_topk_indices: unsupported element type");
  }
}

} // extern "C"

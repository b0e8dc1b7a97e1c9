// fsdprt_jit_sort_indices against torch.sort(stable=False)'s CPU indices on
// rows longer than 16 elements (where std::sort's partitions reorder ties)
// with many ties and NaN. The expected lists are what torch 2.15's CPU
// kernel returns for these inputs; the stable order differs in each.
#include "fsdprt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using Idx = std::vector<int64_t>;

template <typename T>
Idx sortIndices(const std::vector<T> &x, int32_t dtype, bool descending,
                int64_t rows = 1) {
  std::vector<int64_t> out(x.size(), -1);
  fsdprt_jit_sort_indices(x.data(), dtype, rows, int64_t(x.size()) / rows,
                          descending, out.data());
  return out;
}

/// Element i of the rows below: NaN where i % 11 == 5, else (7 i) % 3, as
/// `code` 0, 1, 2 or 3 (NaN), which `as` maps to an element.
template <typename T, typename F> std::vector<T> pattern(int n, F as) {
  std::vector<T> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = as(i % 11 == 5 ? 3 : (i * 7) % 3);
  return x;
}

// torch.sort(x) and torch.sort(x, descending=True) for pattern(40).
const Idx kAscending = {0,  21, 18, 24, 15, 12, 30, 9,  33, 6,  36, 3, 39, 34,
                        31, 28, 25, 37, 22, 1,  19, 4,  7,  13, 10, 2, 20, 35,
                        8,  32, 11, 29, 26, 14, 23, 17, 27, 16, 5,  38};
const Idx kDescending = {38, 5, 16, 27, 11, 20, 23, 17, 26, 14, 29, 8, 32, 35,
                         2,  1, 28, 31, 34, 25, 37, 22, 19, 13, 10, 4, 7,  39,
                         21, 0, 3,  36, 6,  33, 9,  30, 12, 15, 18, 24};

TEST(Sort, FloatTiesAndNanAsAten) {
  auto x = pattern<float>(
      40, [](int c) { return c == 3 ? std::nanf("") : float(c); });
  EXPECT_EQ(sortIndices(x, FSDPRT_F32, false), kAscending);
  EXPECT_EQ(sortIndices(x, FSDPRT_F32, true), kDescending);
  auto d = pattern<double>(
      40, [](int c) { return c == 3 ? std::nan("") : double(c); });
  EXPECT_EQ(sortIndices(d, FSDPRT_F64, false), kAscending);
  EXPECT_EQ(sortIndices(d, FSDPRT_F64, true), kDescending);
}

TEST(Sort, HalfTypesAsAten) {
  // bf16 and f16 bits of 0, 1, 2 and NaN.
  const uint16_t bf16[] = {0x0000, 0x3f80, 0x4000, 0x7fc0};
  const uint16_t f16[] = {0x0000, 0x3c00, 0x4000, 0x7e00};
  auto b = pattern<uint16_t>(40, [&](int c) { return bf16[c]; });
  EXPECT_EQ(sortIndices(b, FSDPRT_BF16, true), kDescending);
  auto h = pattern<uint16_t>(40, [&](int c) { return f16[c]; });
  EXPECT_EQ(sortIndices(h, FSDPRT_F16, false), kAscending);
}

TEST(Sort, IntegersAsAten) {
  // (5 i) % 4 for i < 33.
  std::vector<int64_t> l(33);
  for (int i = 0; i < 33; ++i)
    l[size_t(i)] = (i * 5) % 4;
  EXPECT_EQ(
      sortIndices(l, FSDPRT_I64, false),
      (Idx{16, 32, 28, 24, 20, 0,  12, 8, 4, 1,  29, 25, 21, 17, 5,  13, 9,
           14, 18, 6,  22, 30, 10, 26, 2, 7, 15, 31, 27, 3,  23, 11, 19}));
  Idx down = {19, 15, 3,  27, 7, 31, 23, 11, 18, 14, 22, 30, 10, 6,  2, 26, 25,
              21, 13, 17, 29, 9, 5,  1,  28, 32, 0,  24, 20, 16, 12, 8, 4};
  EXPECT_EQ(sortIndices(l, FSDPRT_I64, true), down);
  std::vector<int32_t> i(l.begin(), l.end());
  EXPECT_EQ(sortIndices(i, FSDPRT_I32, true), down);
}

TEST(Sort, RowsAreIndependent) {
  // Row 0: (3 j) % 2; row 1: 18 equal values (all ties).
  std::vector<float> x(36, 0.5f);
  for (int j = 0; j < 18; ++j)
    x[size_t(j)] = float((j * 3) % 2);
  EXPECT_EQ(
      sortIndices(x, FSDPRT_F32, false, /*rows=*/2),
      (Idx{2, 16, 4,  6,  14, 8,  0,  10, 12, 9, 17, 15, 13, 11, 7, 5, 3, 1, //
           9, 17, 16, 15, 14, 13, 12, 11, 10, 0, 8,  7,  6,  5,  4, 3, 2, 1}));
}

TEST(Sort, ShortRowsKeepPositions) {
  // Up to 16 elements std::sort is an insertion sort: ties stay in order.
  std::vector<float> x = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  EXPECT_EQ(sortIndices(x, FSDPRT_F32, false),
            (Idx{1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14}));
}

} // namespace

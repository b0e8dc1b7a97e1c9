// fsdprt_jit_topk_indices against torch.topk's CPU indices on ties and NaN
// (the expected lists are what torch 2.15's CPU kernel returns for these
// inputs; a stable sort would give another order in most of them).
#include "fsdprt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

const float kNan = std::nanf("");

template <typename T>
std::vector<int64_t> topk(const std::vector<T> &x, int32_t dtype, int64_t k,
                          bool largest = true, bool sorted = true,
                          int64_t rows = 1) {
  std::vector<int64_t> out(size_t(rows * k), -1);
  fsdprt_jit_topk_indices(x.data(), dtype, rows, int64_t(x.size()) / rows, k,
                          largest, sorted, out.data());
  return out;
}

using Idx = std::vector<int64_t>;

TEST(TopK, TiesAsAtenNthElementPath) {
  // k * 64 > n: nth_element, then a sort of the first k - 1.
  std::vector<float> x = {1, 3, 3, 2, 3, 0, 3, 1};
  EXPECT_EQ(topk(x, FSDPRT_F32, 2), (Idx{1, 6}));
  EXPECT_EQ(topk(x, FSDPRT_F32, 3, true, /*sorted=*/false), (Idx{1, 6, 4}));
  EXPECT_EQ(topk(x, FSDPRT_F32, 4, /*largest=*/false), (Idx{5, 7, 0, 3}));
  std::vector<float> same(8, 0.25f);
  EXPECT_EQ(topk(same, FSDPRT_F32, 4), (Idx{6, 5, 4, 7}));
}

TEST(TopK, TiesAsAtenPartialSortPath) {
  // k * 64 <= n: partial_sort.
  std::vector<float> x(130);
  for (int i = 0; i < 130; ++i)
    x[size_t(i)] = float((i * 7) % 5);
  EXPECT_EQ(topk(x, FSDPRT_F32, 2), (Idx{7, 2}));
  EXPECT_EQ(topk(x, FSDPRT_F32, 2, false), (Idx{5, 0}));
  std::vector<float> same(200, 0.25f);
  EXPECT_EQ(topk(same, FSDPRT_F32, 3), (Idx{0, 1, 2}));
}

TEST(TopK, NanIsAboveEveryNumber) {
  std::vector<float> x = {1, kNan, 2, kNan, 2};
  EXPECT_EQ(topk(x, FSDPRT_F32, 3), (Idx{1, 3, 4}));
  std::vector<float> y = {1, kNan, 2, kNan, 2, 1};
  EXPECT_EQ(topk(y, FSDPRT_F32, 2, false), (Idx{5, 0}));
  EXPECT_EQ(topk(y, FSDPRT_F32, 5, false), (Idx{5, 0, 4, 2, 3}));
}

TEST(TopK, OtherElementTypes) {
  // bf16 1.0, 1.0, 1.0, 0.5, 1.0 (1.001 .. 1.003 round to 1.0).
  std::vector<uint16_t> b = {0x3f80, 0x3f80, 0x3f80, 0x3f00, 0x3f80};
  EXPECT_EQ(topk(b, FSDPRT_BF16, 2), (Idx{2, 4}));
  std::vector<int64_t> l = {5, 1, 5, 5, 2, 5};
  EXPECT_EQ(topk(l, FSDPRT_I64, 3), (Idx{3, 5, 0}));
  std::vector<int32_t> i = {5, 1, 5, 5, 2, 5};
  EXPECT_EQ(topk(i, FSDPRT_I32, 3, false), (Idx{1, 4, 0}));
  std::vector<double> d = {1, 3, 3, 2, 3, 0, 3, 1};
  EXPECT_EQ(topk(d, FSDPRT_F64, 2), (Idx{1, 6}));
}

TEST(TopK, RowsAreIndependent) {
  std::vector<float> x = {
      1,     3,     3,     2,     3,     0,     3,     1, //
      0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
  EXPECT_EQ(topk(x, FSDPRT_F32, 2, true, true, /*rows=*/2), (Idx{1, 6, 6, 5}));
}

} // namespace

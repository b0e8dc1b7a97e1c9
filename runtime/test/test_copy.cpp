// Copy kernels against element-by-element index arithmetic.
#include "fsdprt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

// Distinct value for every (tensor, o, r, i).
int32_t val(int tensor, int64_t o, int64_t r, int64_t i) {
  return int32_t(tensor * 1000000 + o * 10000 + r * 100 + i + 1);
}

std::vector<int32_t> make_tensor(int tensor, int64_t outer, int64_t rows,
                                 int64_t inner) {
  std::vector<int32_t> t(static_cast<size_t>(outer * rows * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inner; ++i)
        t[size_t((o * rows + r) * inner + i)] = val(tensor, o, r, i);
  return t;
}

TEST(CopyKernels, ShardExtentCeilAndBalanced) {
  // n = 10 over k = 4: ceil slots of 3 -> 3,3,3,1; balanced -> 3,3,2,2.
  const int64_t ceil_sizes[] = {3, 3, 3, 1}, bal_sizes[] = {3, 3, 2, 2};
  int64_t ceil_off = 0, bal_off = 0;
  for (int64_t i = 0; i < 4; ++i) {
    int64_t off = -1, size = -1;
    ASSERT_EQ(fsdprt_shard_extent(10, 4, i, FSDPRT_SHARD_CEIL, &off, &size),
              FSDPRT_OK);
    EXPECT_EQ(off, ceil_off);
    EXPECT_EQ(size, ceil_sizes[i]);
    ceil_off += size;
    ASSERT_EQ(fsdprt_shard_extent(10, 4, i, FSDPRT_SHARD_BALANCED, &off, &size),
              FSDPRT_OK);
    EXPECT_EQ(off, bal_off);
    EXPECT_EQ(size, bal_sizes[i]);
    bal_off += size;
  }
  EXPECT_EQ(fsdprt_shard_slot_rows(10, 4), 3);
  // n = 5 over k = 4 with ceil: slot 2 -> 2,2,1,0 (the last rank is empty).
  int64_t off = 0, size = 0;
  ASSERT_EQ(fsdprt_shard_extent(5, 4, 3, FSDPRT_SHARD_CEIL, &off, &size),
            FSDPRT_OK);
  EXPECT_EQ(size, 0);
  EXPECT_EQ(off, 5);
  EXPECT_EQ(fsdprt_shard_extent(5, 4, 4, FSDPRT_SHARD_CEIL, &off, &size),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_shard_extent(5, 4, 0, 7, &off, &size),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST(CopyKernels, CopyRowsAndZeroRows) {
  const int64_t outer = 3, src_rows = 7, dst_rows = 5, inner = 4;
  auto src = make_tensor(1, outer, src_rows, inner);
  std::vector<int32_t> dst(size_t(outer * dst_rows * inner), -1);
  ASSERT_EQ(fsdprt_copy_rows(dst.data(), dst_rows, 1, src.data(), src_rows, 2,
                             3, outer, inner, 4),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_zero_rows(dst.data(), dst_rows, 4, 1, outer, inner, 4),
            FSDPRT_OK);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < dst_rows; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        int32_t got = dst[size_t((o * dst_rows + r) * inner + i)];
        int32_t want = r == 0 ? -1 : r == 4 ? 0 : val(1, o, r - 1 + 2, i);
        ASSERT_EQ(got, want) << o << " " << r << " " << i;
      }
  EXPECT_EQ(fsdprt_copy_rows(dst.data(), dst_rows, 3, src.data(), src_rows, 0,
                             3, outer, inner, 4),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST(CopyKernels, ResizePadsAndNarrows) {
  const int64_t outer = 2, inner = 3;
  auto src = make_tensor(2, outer, 3, inner);
  std::vector<int32_t> padded(size_t(outer * 5 * inner), -1);
  ASSERT_EQ(
      fsdprt_resize_rows(padded.data(), 5, src.data(), 3, outer, inner, 4),
      FSDPRT_OK);
  std::vector<int32_t> narrowed(size_t(outer * 2 * inner), -1);
  ASSERT_EQ(
      fsdprt_resize_rows(narrowed.data(), 2, src.data(), 3, outer, inner, 4),
      FSDPRT_OK);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t r = 0; r < 5; ++r)
        EXPECT_EQ(padded[size_t((o * 5 + r) * inner + i)],
                  r < 3 ? val(2, o, r, i) : 0);
      for (int64_t r = 0; r < 2; ++r)
        EXPECT_EQ(narrowed[size_t((o * 2 + r) * inner + i)], val(2, o, r, i));
    }
}

void check_chunk_cat(int64_t outer, int64_t n, int64_t inner, int64_t k,
                     int32_t policy, int64_t extra_stride) {
  SCOPED_TRACE(testing::Message()
               << "outer " << outer << " n " << n << " inner " << inner << " k "
               << k << " policy " << policy << " extra " << extra_stride);
  const int64_t c = (n + k - 1) / k;
  const int64_t slot = outer * c * inner;
  const int64_t stride = extra_stride ? slot + extra_stride : 0;
  const int64_t step = stride ? stride : slot;
  auto full = make_tensor(3, outer, n, inner);
  std::vector<int32_t> packed(size_t(k * step), -7);
  ASSERT_EQ(fsdprt_chunk_cat_pack(packed.data(), stride, full.data(), outer, n,
                                  inner, k, policy, 4),
            FSDPRT_OK);
  // Reference: slot j holds rows [off_j, off_j + size_j) padded with zeros.
  for (int64_t j = 0; j < k; ++j) {
    int64_t b = n / k, rem = n % k;
    int64_t off = policy == FSDPRT_SHARD_CEIL ? std::min(n, j * c)
                                              : j * b + std::min(j, rem);
    int64_t size = policy == FSDPRT_SHARD_CEIL ? std::min(n, (j + 1) * c) - off
                                               : b + (j < rem ? 1 : 0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < c; ++r)
        for (int64_t i = 0; i < inner; ++i) {
          int32_t got = packed[size_t(j * step + (o * c + r) * inner + i)];
          int32_t want = r < size ? val(3, o, off + r, i) : 0;
          ASSERT_EQ(got, want) << "slot " << j << " o " << o << " r " << r;
        }
    // Bytes between slots (bucket neighbours) are untouched.
    for (int64_t e = slot; e < step; ++e)
      ASSERT_EQ(packed[size_t(j * step + e)], -7);
  }
  std::vector<int32_t> back(full.size(), -1);
  ASSERT_EQ(fsdprt_chunk_cat_unpack(back.data(), packed.data(), stride, outer,
                                    n, inner, k, policy, 4),
            FSDPRT_OK);
  EXPECT_EQ(back, full);
}

TEST(CopyKernels, ChunkCatPackUnpack) {
  for (int32_t policy : {FSDPRT_SHARD_CEIL, FSDPRT_SHARD_BALANCED})
    for (int64_t k : {1, 2, 3, 4})
      for (int64_t n : {1, 5, 8, 10})
        for (int64_t extra : {0, 5}) {
          check_chunk_cat(1, n, 3, k, policy, extra); // dim 0 sharding
          check_chunk_cat(4, n, 2, k, policy, extra); // dim > 0
          check_chunk_cat(3, n, 1, k, policy, extra); // last dim
        }
}

TEST(CopyKernels, SwapFirstDims) {
  const int64_t d0 = 3, d1 = 4, inner = 5;
  auto in = make_tensor(4, d0, d1, inner);
  std::vector<int32_t> out(in.size(), -1), back(in.size(), -1);
  ASSERT_EQ(fsdprt_swap_first_dims(out.data(), in.data(), d0, d1, inner, 4),
            FSDPRT_OK);
  for (int64_t a = 0; a < d1; ++a)
    for (int64_t b = 0; b < d0; ++b)
      for (int64_t c = 0; c < inner; ++c)
        ASSERT_EQ(out[size_t((a * d0 + b) * inner + c)], val(4, b, a, c));
  ASSERT_EQ(fsdprt_swap_first_dims(back.data(), out.data(), d1, d0, inner, 4),
            FSDPRT_OK);
  EXPECT_EQ(back, in);
  EXPECT_EQ(fsdprt_swap_first_dims(in.data(), in.data(), d0, d1, inner, 4),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST(CopyKernels, OddElementSizes) {
  // 3-byte elements: pack/unpack only moves bytes.
  const int64_t outer = 2, n = 5, inner = 2, k = 2, es = 3;
  std::vector<uint8_t> full(size_t(outer * n * inner * es));
  for (size_t i = 0; i < full.size(); ++i)
    full[i] = uint8_t(i * 7 + 1);
  std::vector<uint8_t> packed(size_t(k * outer * 3 * inner * es), 0xee);
  ASSERT_EQ(fsdprt_chunk_cat_pack(packed.data(), 0, full.data(), outer, n,
                                  inner, k, FSDPRT_SHARD_CEIL, es),
            FSDPRT_OK);
  std::vector<uint8_t> back(full.size(), 0);
  ASSERT_EQ(fsdprt_chunk_cat_unpack(back.data(), packed.data(), 0, outer, n,
                                    inner, k, FSDPRT_SHARD_CEIL, es),
            FSDPRT_OK);
  EXPECT_EQ(back, full);
}

} // namespace

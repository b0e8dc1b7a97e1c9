// The deterministic scatter-add of rows (fsdprt_gpu_scatter_add_rows_*,
// runtime/cuda/scatter_kernels.cu) against the host loop it replaces
// (fsdp-one-hot-scatter's: output[idx[t], :] += source[t, :] in token
// order), bit for bit: token counts below a tile, at one tile and across
// several (the global sort steps), repeated and out-of-range indices, i32
// and i64 indices, strided and column forms, f32 and bf16, two runs
// bit-identical. Runs in the host emulation of CUDA here; bench/gpu/check.sh
// can build it against a GPU.
#include "gpu_kernel_test.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace gpu_kernel_test;

void *upload(const void *data, size_t bytes) {
  void *p = fsdprt_gpu_alloc(int64_t(bytes));
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(fsdprt_gpu_copy_to_device(p, data, int64_t(bytes)), FSDPRT_OK);
  return p;
}

struct Case {
  int64_t tokens, slots, width;
  bool columns = false; // source [width, tokens], output [width, slots]
  bool bf16 = false;
  int index_bits = 64;
  int64_t index_stride = 1;
  int64_t source_pad = 0; // extra elements per source row (a strided view)
  std::string name() const {
    return "tokens " + std::to_string(tokens) + " slots " +
           std::to_string(slots) + " width " + std::to_string(width) +
           (columns ? " columns" : "") + (bf16 ? " bf16" : " f32") + " i" +
           std::to_string(index_bits);
  }
};

// The output's bytes after the device scatter-add, and the host loop's.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> run(const Case &c,
                                                          uint32_t seed) {
  std::mt19937 rng(seed);
  // Indices: mostly a few hot slots (long segments), some spread, some out
  // of range (negative, == slots, far beyond).
  std::vector<int64_t> idx(size_t(c.tokens));
  for (int64_t t = 0; t < c.tokens; ++t) {
    const uint32_t r = rng() % 16;
    if (r < 6)
      idx[size_t(t)] = int64_t(rng() % 3);
    else if (r < 14)
      idx[size_t(t)] = int64_t(rng() % uint32_t(c.slots));
    else if (r == 14)
      idx[size_t(t)] = -1 - int64_t(rng() % 5);
    else
      idx[size_t(t)] = c.slots + int64_t(rng() % 7);
  }
  // Values with many bits set, so that the order of the sums shows.
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t src_token_stride = c.columns ? 1 : c.width + c.source_pad;
  const int64_t src_col_stride = c.columns ? c.tokens + c.source_pad : 1;
  const int64_t src_count = c.columns ? c.width * (c.tokens + c.source_pad)
                                      : c.tokens * (c.width + c.source_pad);
  std::vector<float> src(static_cast<size_t>(src_count));
  std::vector<float> out(static_cast<size_t>(c.slots * c.width));
  for (float &x : src)
    x = value(rng) * (1.0f + float(rng() % 1000));
  for (float &x : out)
    x = value(rng);
  const int64_t out_slot_stride = c.columns ? 1 : c.width;
  const int64_t out_col_stride = c.columns ? c.slots : 1;
  auto round = [&](float x) { return c.bf16 ? from_bf16(to_bf16(x)) : x; };
  for (float &x : src)
    x = round(x);
  for (float &x : out)
    x = round(x);

  // The host loop (fsdp-one-hot-scatter): token after token.
  std::vector<float> want = out;
  for (int64_t t = 0; t < c.tokens; ++t) {
    const int64_t s = idx[size_t(t)];
    if (s < 0 || s >= c.slots)
      continue;
    for (int64_t n = 0; n < c.width; ++n) {
      float &o = want[size_t(s * out_slot_stride + n * out_col_stride)];
      o = round(o + src[size_t(t * src_token_stride + n * src_col_stride)]);
    }
  }

  // Device buffers of the element type and the index width.
  std::vector<uint8_t> idx_bytes(size_t(c.tokens * c.index_stride) *
                                 (c.index_bits / 8));
  for (int64_t t = 0; t < c.tokens; ++t) {
    uint8_t *at = &idx_bytes[size_t(t * c.index_stride) * (c.index_bits / 8)];
    if (c.index_bits == 32) {
      const int32_t v = int32_t(idx[size_t(t)]);
      std::memcpy(at, &v, 4);
    } else {
      std::memcpy(at, &idx[size_t(t)], 8);
    }
  }
  auto encode = [&](const std::vector<float> &x) {
    std::vector<uint8_t> b(x.size() * (c.bf16 ? 2 : 4));
    for (size_t i = 0; i < x.size(); ++i) {
      if (c.bf16) {
        const uint16_t h = to_bf16(x[i]);
        std::memcpy(&b[2 * i], &h, 2);
      } else {
        std::memcpy(&b[4 * i], &x[i], 4);
      }
    }
    return b;
  };
  const std::vector<uint8_t> src_bytes = encode(src), out_bytes = encode(out);
  void *d_idx = upload(idx_bytes.data(), idx_bytes.size());
  void *d_src = upload(src_bytes.data(), src_bytes.size());
  void *d_out = upload(out_bytes.data(), out_bytes.size());
  if (c.bf16)
    fsdprt_gpu_scatter_add_rows_bf16(
        d_idx, c.index_bits, c.index_stride, c.tokens,
        static_cast<const uint16_t *>(d_src), src_token_stride, src_col_stride,
        static_cast<uint16_t *>(d_out), out_slot_stride, out_col_stride,
        c.slots, c.width);
  else
    fsdprt_gpu_scatter_add_rows_f32(
        d_idx, c.index_bits, c.index_stride, c.tokens,
        static_cast<const float *>(d_src), src_token_stride, src_col_stride,
        static_cast<float *>(d_out), out_slot_stride, out_col_stride, c.slots,
        c.width);
  fsdprt_gpu_context_t *ctx = fsdprt_gpu_get_thread_context();
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK)
      << c.name() << ": " << fsdprt_gpu_context_error_message(ctx);
  std::vector<uint8_t> got(out_bytes.size());
  EXPECT_EQ(fsdprt_gpu_copy_to_host(got.data(), d_out, int64_t(got.size())),
            FSDPRT_OK);
  fsdprt_gpu_free(d_idx);
  fsdprt_gpu_free(d_src);
  fsdprt_gpu_free(d_out);
  return {got, encode(want)};
}

void check(const Case &c, uint32_t seed = 1) {
  const auto [got, want] = run(c, seed);
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ++differ;
      first = std::min(first, i);
    }
  EXPECT_EQ(differ, 0u) << c.name() << ": " << differ
                        << " bytes differ from the host loop's, the first at "
                        << first;
}

TEST(ScatterAddRows, BitwiseTheHostLoopBelowOneTile) {
  REQUIRE_GPU();
  Context device;
  check({1, 4, 3});
  check({17, 10, 5});
  check({300, 50, 33});
}

TEST(ScatterAddRows, BitwiseTheHostLoopAcrossTiles) {
  REQUIRE_GPU();
  Context device;
  check({1024, 40, 8});  // exactly one tile
  check({1500, 97, 20}); // two tiles, one global step
  check({4100, 300, 3}); // 8 tiles: global steps of 4096, 2048 and 1024
}

TEST(ScatterAddRows, ColumnsStridedIndicesAndViews) {
  REQUIRE_GPU();
  Context device;
  Case columns{200, 31, 6};
  columns.columns = true;
  columns.source_pad = 3;
  check(columns);
  Case strided{129, 12, 9};
  strided.index_bits = 32;
  strided.index_stride = 3;
  strided.source_pad = 5;
  check(strided);
}

TEST(ScatterAddRows, Bf16RoundsAfterEachAdditionAsTheLoopDoes) {
  REQUIRE_GPU();
  Context device;
  Case bf16{700, 20, 12};
  bf16.bf16 = true;
  check(bf16);
  bf16.tokens = 2100;
  bf16.index_bits = 32;
  check(bf16, 7);
}

TEST(ScatterAddRows, ResultsAreBitIdenticalFromRunToRun) {
  REQUIRE_GPU();
  Context device;
  const Case c{2500, 64, 16};
  const auto first = run(c, 3), second = run(c, 3);
  EXPECT_EQ(first.first == second.first, true);
}

TEST(ScatterAddRows, BadArgumentsAreLocatedErrors) {
  REQUIRE_GPU();
  Context device;
  float dummy[4] = {0, 0, 0, 0};
  int64_t idx[1] = {0};
  fsdprt_gpu_scatter_add_rows_f32(idx, 16, 1, 1, dummy, 1, 1, dummy, 1, 1, 1,
                                  1);
  fsdprt_gpu_context_t *&ctx = device.ctx;
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  const std::string msg = fsdprt_gpu_context_error_message(ctx);
  EXPECT_NE(msg.find("fsdprt_gpu_scatter_add_rows_f32"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("index_bits must be 32 or 64"), std::string::npos) << msg;
  fsdprt_gpu_context_destroy(ctx);
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  fsdprt_gpu_scatter_add_rows_bf16(idx, 64, 1, 1, nullptr, 1, 1, nullptr, 1, 1,
                                   1, 1);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_gpu_context_error_message(ctx))
                .find("null source or output"),
            std::string::npos);
}

} // namespace

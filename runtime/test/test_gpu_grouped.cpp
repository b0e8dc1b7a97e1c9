// The grouped gemm of a sparse mixture of experts
// (fsdprt_gpu_grouped_matmul_*, runtime/cuda/grouped_kernels.cu) against a
// float64 reference: both forms, f32 and bf16 (f32 accumulation), empty
// groups, groups that are not a multiple of the tile, offsets that decrease
// or pass the rows (clamped), rows after the last group, i32 and i64
// offsets, strided and transposed operands, and every output element
// written. Runs in the host emulation of CUDA here; bench/gpu/check.sh can
// build it against a GPU.
#include "gpu_kernel_test.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using gpu_kernel_test::Context;
using gpu_kernel_test::from_bf16;
using gpu_kernel_test::to_bf16;

void *upload(const void *data, size_t bytes) {
  void *p = fsdprt_gpu_alloc(int64_t(std::max<size_t>(bytes, 4)));
  EXPECT_NE(p, nullptr);
  if (bytes)
    EXPECT_EQ(fsdprt_gpu_copy_to_device(p, data, int64_t(bytes)), FSDPRT_OK);
  return p;
}

struct Case {
  bool transpose_lhs = false;
  int64_t rows = 0, k = 0, n = 0;
  std::vector<int64_t> offsets; // one per group, as given (not clamped)
  bool bf16 = false;
  int offset_bits = 32;
  bool lhs_transposed = false; // lhs stored [k, rows] (column strides)
  int64_t pad = 0;             // extra elements per row of rhs and out
  std::string name() const {
    std::string s = std::string(transpose_lhs ? "transpose_lhs" : "rows") +
                    " rows " + std::to_string(rows) + " k " +
                    std::to_string(k) + " n " + std::to_string(n) + " offsets";
    for (int64_t o : offsets)
      s += " " + std::to_string(o);
    return s + (bf16 ? " bf16" : " f32");
  }
};

// Group g's rows [start, end): the clamped offsets.
std::vector<std::pair<int64_t, int64_t>> bounds(const Case &c) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int64_t o : c.offsets) {
    const int64_t end = std::min(std::max(o, start), c.rows);
    out.push_back({start, end});
    start = end;
  }
  return out;
}

// Encodes x as the case's element type.
std::vector<uint8_t> encode(const Case &c, const std::vector<float> &x) {
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
}

float decode(const Case &c, const std::vector<uint8_t> &b, size_t i) {
  if (c.bf16) {
    uint16_t h;
    std::memcpy(&h, &b[2 * i], 2);
    return from_bf16(h);
  }
  float f;
  std::memcpy(&f, &b[4 * i], 4);
  return f;
}

// Runs the case and compares with the float64 reference: each element
// within tol * (the sum of |products| of its dot product), plus bf16's
// final rounding. Output elements start as NaN: every one must be written.
void check(const Case &c, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t groups = int64_t(c.offsets.size());
  auto round = [&](float x) { return c.bf16 ? from_bf16(to_bf16(x)) : x; };
  // lhs [rows, k]: row-major, or stored transposed.
  const int64_t lhs_row = c.lhs_transposed ? 1 : c.k;
  const int64_t lhs_col = c.lhs_transposed ? c.rows : 1;
  std::vector<float> lhs(static_cast<size_t>(c.rows * c.k));
  for (float &x : lhs)
    x = round(value(rng));
  // rhs: [groups, k, n] or [rows, n], rows padded.
  const int64_t rhs_rows = c.transpose_lhs ? c.rows : c.k;
  const int64_t rhs_row = c.n + c.pad;
  const int64_t rhs_group = c.transpose_lhs ? 0 : rhs_rows * rhs_row;
  const int64_t rhs_count = (c.transpose_lhs ? 1 : groups) * rhs_rows * rhs_row;
  std::vector<float> rhs(static_cast<size_t>(rhs_count));
  for (float &x : rhs)
    x = round(value(rng));
  // out: [rows, n] or [groups, k, n], rows padded.
  const int64_t out_rows = c.transpose_lhs ? c.k : c.rows;
  const int64_t out_row = c.n + c.pad;
  const int64_t out_group = c.transpose_lhs ? out_rows * out_row : 0;
  const int64_t out_count = (c.transpose_lhs ? groups : 1) * out_rows * out_row;

  // The float64 reference and each element's scale.
  std::vector<double> want(static_cast<size_t>(out_count), 0.0),
      scale(static_cast<size_t>(out_count), 0.0);
  auto L = [&](int64_t r, int64_t kk) {
    return double(lhs[size_t(r * lhs_row + kk * lhs_col)]);
  };
  const auto b = bounds(c);
  for (int64_t g = 0; g < groups; ++g) {
    const auto [start, end] = b[size_t(g)];
    if (!c.transpose_lhs) {
      for (int64_t r = start; r < end; ++r)
        for (int64_t j = 0; j < c.n; ++j)
          for (int64_t kk = 0; kk < c.k; ++kk) {
            const double p =
                L(r, kk) * rhs[size_t(g * rhs_group + kk * rhs_row + j)];
            want[size_t(r * out_row + j)] += p;
            scale[size_t(r * out_row + j)] += std::fabs(p);
          }
    } else {
      for (int64_t i = 0; i < c.k; ++i)
        for (int64_t j = 0; j < c.n; ++j)
          for (int64_t r = start; r < end; ++r) {
            const double p = L(r, i) * rhs[size_t(r * rhs_row + j)];
            want[size_t(g * out_group + i * out_row + j)] += p;
            scale[size_t(g * out_group + i * out_row + j)] += std::fabs(p);
          }
    }
  }

  std::vector<uint8_t> off_bytes(size_t(groups) * (c.offset_bits / 8));
  for (int64_t g = 0; g < groups; ++g) {
    if (c.offset_bits == 32) {
      const int32_t v = int32_t(c.offsets[size_t(g)]);
      std::memcpy(&off_bytes[size_t(4 * g)], &v, 4);
    } else {
      std::memcpy(&off_bytes[size_t(8 * g)], &c.offsets[size_t(g)], 8);
    }
  }
  // The lhs in its storage order.
  std::vector<float> lhs_stored(lhs.size());
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t kk = 0; kk < c.k; ++kk)
      lhs_stored[size_t(r * lhs_row + kk * lhs_col)] =
          lhs[size_t(r * lhs_row + kk * lhs_col)];
  const std::vector<uint8_t> lhs_bytes = encode(c, lhs_stored);
  const std::vector<uint8_t> rhs_bytes = encode(c, rhs);
  std::vector<uint8_t> out_bytes =
      encode(c, std::vector<float>(size_t(out_count), NAN));
  void *d_off = upload(off_bytes.data(), off_bytes.size());
  void *d_lhs = upload(lhs_bytes.data(), lhs_bytes.size());
  void *d_rhs = upload(rhs_bytes.data(), rhs_bytes.size());
  void *d_out = upload(out_bytes.data(), out_bytes.size());
  const int32_t form = c.transpose_lhs ? 1 : 0;
  if (c.bf16)
    fsdprt_gpu_grouped_matmul_bf16(
        form, d_off, c.offset_bits, 1, groups,
        static_cast<const uint16_t *>(d_lhs), lhs_row, lhs_col,
        static_cast<const uint16_t *>(d_rhs), rhs_group, rhs_row, 1,
        static_cast<uint16_t *>(d_out), out_group, out_row, 1, c.rows, c.k,
        c.n);
  else
    fsdprt_gpu_grouped_matmul_f32(
        form, d_off, c.offset_bits, 1, groups,
        static_cast<const float *>(d_lhs), lhs_row, lhs_col,
        static_cast<const float *>(d_rhs), rhs_group, rhs_row, 1,
        static_cast<float *>(d_out), out_group, out_row, 1, c.rows, c.k, c.n);
  fsdprt_gpu_context_t *ctx = fsdprt_gpu_get_thread_context();
  ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK)
      << c.name() << ": " << fsdprt_gpu_context_error_message(ctx);
  ASSERT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << c.name() << ": " << fsdprt_gpu_context_error_message(ctx);
  std::vector<uint8_t> got(out_bytes.size());
  ASSERT_EQ(fsdprt_gpu_copy_to_host(got.data(), d_out, int64_t(got.size())),
            FSDPRT_OK);
  fsdprt_gpu_free(d_off);
  fsdprt_gpu_free(d_lhs);
  fsdprt_gpu_free(d_rhs);
  fsdprt_gpu_free(d_out);

  // f32: products exact in double, sums of at most k (or group) terms.
  const int64_t terms = c.transpose_lhs ? c.rows : c.k;
  const double tol = 2.0 * double(terms + 2) * std::ldexp(1.0, -24);
  size_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < out_count; ++i) {
    if (i % out_row >= c.n)
      continue; // padding, not part of the output
    const double got_i = decode(c, got, size_t(i));
    const double w = want[size_t(i)];
    double allowed = tol * scale[size_t(i)];
    if (c.bf16)
      allowed += std::fabs(w) * std::ldexp(1.0, -8) + 1e-30;
    if (!(std::fabs(got_i - w) <= allowed)) {
      if (!bad++)
        first = "element " + std::to_string(i) + ": " + std::to_string(got_i) +
                ", want " + std::to_string(w);
    }
  }
  EXPECT_EQ(bad, 0u) << c.name() << ": " << bad << " elements off, " << first;
}

TEST(GroupedMatmul, RowsFormAgainstFloat64) {
  REQUIRE_GPU();
  Context device;
  // Groups of 0, 1, 63, 64, 65 and 130 rows, then rows after the last.
  check({false, 330, 40, 70, {0, 1, 64, 128, 193, 323}});
  // One group covering every row; sizes below one tile.
  check({false, 5, 3, 2, {5}});
  // Offsets that decrease and pass the rows are clamped; i64 offsets.
  Case clamped{false, 100, 17, 33, {30, 10, 80, 500, 90}};
  clamped.offset_bits = 64;
  check(clamped);
  // No groups: every row is zero.
  check({false, 20, 8, 8, {}});
}

TEST(GroupedMatmul, TransposedFormAgainstFloat64) {
  REQUIRE_GPU();
  Context device;
  // Empty groups give zeros; reductions not a multiple of the k slice.
  check({true, 330, 70, 40, {0, 1, 64, 128, 193, 323}});
  Case clamped{true, 100, 65, 3, {30, 10, 80, 500, 90}};
  clamped.offset_bits = 64;
  check(clamped);
  check({true, 0, 4, 4, {0, 0}}); // no rows: every group's zeros
}

TEST(GroupedMatmul, StridedAndTransposedOperands) {
  REQUIRE_GPU();
  Context device;
  Case rows{false, 150, 33, 20, {40, 40, 149}};
  rows.lhs_transposed = true;
  rows.pad = 3;
  check(rows);
  Case t{true, 150, 33, 20, {40, 40, 149}};
  t.lhs_transposed = true;
  t.pad = 5;
  check(t);
}

TEST(GroupedMatmul, Bf16AccumulatesInF32) {
  REQUIRE_GPU();
  Context device;
  Case rows{false, 200, 96, 40, {0, 70, 71, 200}};
  rows.bf16 = true;
  check(rows, 3);
  Case t{true, 200, 40, 66, {0, 70, 71, 200}};
  t.bf16 = true;
  check(t, 4);
}

TEST(GroupedMatmul, BadArgumentsAreLocatedErrors) {
  REQUIRE_GPU();
  Context device;
  float dummy[4] = {0, 0, 0, 0};
  int32_t off[1] = {1};
  fsdprt_gpu_grouped_matmul_f32(0, off, 16, 1, 1, dummy, 1, 1, dummy, 1, 1, 1,
                                dummy, 0, 1, 1, 1, 1, 1);
  fsdprt_gpu_context_t *&ctx = device.ctx;
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  const std::string msg = fsdprt_gpu_context_error_message(ctx);
  EXPECT_NE(msg.find("fsdprt_gpu_grouped_matmul_f32"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("offset_bits must be 32 or 64"), std::string::npos) << msg;
  fsdprt_gpu_context_destroy(ctx);
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  fsdprt_gpu_grouped_matmul_bf16(1, off, 32, 1, 1, nullptr, 1, 1, nullptr, 0, 1,
                                 1, nullptr, 1, 1, 1, 4, 4, 4);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(fsdprt_gpu_context_error_message(ctx)).find("null output"),
      std::string::npos);
}

} // namespace

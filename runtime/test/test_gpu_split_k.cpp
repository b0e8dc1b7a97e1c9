// The split-K gemms (fsdprt_gpu_gemm_bf16 / _bf16_f32 split along K as
// fsdprt_gpu_split_k.h says, runtime/cuda/gpu_blas.cpp and
// split_k_kernels.cu): the split result against the unsplit one and a
// float64 reference on odd shapes (K not a multiple of the slices, so a
// rest; batch > 1; beta != 0; every transpose; padded leading dimensions),
// two runs bit-identical, and the policy's choices for GPT-2 small's
// weight-gradient gemms on an H200. Runs in the host emulation of CUDA
// here; bench/gpu/check.sh can build it against a GPU.
#include "gpu_kernel_test.h"

#include "fsdprt_gpu_split_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace gpu_kernel_test;

struct Shape {
  int32_t ta, tb;
  int64_t m, n, k, batch;
  float beta;
};

std::string name(const Shape &s) {
  return "ta " + std::to_string(s.ta) + " tb " + std::to_string(s.tb) + " m " +
         std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
         std::to_string(s.k) + " batch " + std::to_string(s.batch) + " beta " +
         std::to_string(s.beta);
}

// FSDPRT_GPU_SPLIT_K for the scope of a test.
struct SplitK {
  explicit SplitK(const char *value) { setenv("FSDPRT_GPU_SPLIT_K", value, 1); }
  ~SplitK() { unsetenv("FSDPRT_GPU_SPLIT_K"); }
};

// One problem's operands (bf16, padded rows, batch strides with a gap) and
// its C before the call.
struct Problem {
  Shape s;
  int64_t lda, ldb, ldc, sa, sb, sc;
  std::vector<uint16_t> a, b;
  std::vector<float> c; // f32 C; the bf16 C is its rounding
  Problem(const Shape &shape, uint32_t seed) : s(shape) {
    const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;
    const int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
    lda = ac + 3;
    ldb = bc + 1;
    ldc = s.n + 2;
    sa = ar * lda + 5;
    sb = br * ldb + 2;
    sc = s.m * ldc + 1;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    a.resize(size_t(sa * s.batch));
    b.resize(size_t(sb * s.batch));
    c.resize(size_t(sc * s.batch));
    for (uint16_t &x : a)
      x = to_bf16(dist(rng));
    for (uint16_t &x : b)
      x = to_bf16(dist(rng));
    for (float &x : c)
      x = from_bf16(to_bf16(dist(rng)));
  }
  double at(int64_t p, int64_t i, int64_t l) const {
    return from_bf16(s.ta ? a[size_t(p * sa + l * lda + i)]
                          : a[size_t(p * sa + i * lda + l)]);
  }
  double bt(int64_t p, int64_t l, int64_t j) const {
    return from_bf16(s.tb ? b[size_t(p * sb + j * ldb + l)]
                          : b[size_t(p * sb + l * ldb + j)]);
  }
  // alpha A B + beta C in float64, at C's layout.
  double want(int64_t p, int64_t i, int64_t j, float alpha) const {
    double acc = 0;
    for (int64_t l = 0; l < s.k; ++l)
      acc += at(p, i, l) * bt(p, l, j);
    return alpha * acc + double(s.beta) * c[size_t(p * sc + i * ldc + j)];
  }
};

void *upload(const void *data, size_t bytes) {
  void *p = fsdprt_gpu_alloc(int64_t(bytes));
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(fsdprt_gpu_copy_to_device(p, data, int64_t(bytes)), FSDPRT_OK);
  return p;
}

// C after fsdprt_gpu_gemm_bf16_f32 (f32 C) or fsdprt_gpu_gemm_bf16 (bf16
// C, widened), alpha 1.25.
std::vector<float> run(const Problem &q, bool f32Out) {
  const Shape &s = q.s;
  auto *da = static_cast<uint16_t *>(upload(q.a.data(), q.a.size() * 2));
  auto *db = static_cast<uint16_t *>(upload(q.b.data(), q.b.size() * 2));
  std::vector<float> out(q.c.size());
  if (f32Out) {
    auto *dc = static_cast<float *>(upload(q.c.data(), q.c.size() * 4));
    fsdprt_gpu_gemm_bf16_f32(s.ta, s.tb, s.m, s.n, s.k, 1.25f, da, q.lda, q.sa,
                             db, q.ldb, q.sb, s.beta, dc, q.ldc, q.sc, s.batch);
    EXPECT_EQ(fsdprt_gpu_copy_to_host(out.data(), dc, int64_t(out.size() * 4)),
              FSDPRT_OK);
    fsdprt_gpu_free(dc);
  } else {
    std::vector<uint16_t> c16(q.c.size()), got(q.c.size());
    for (size_t i = 0; i < c16.size(); ++i)
      c16[i] = to_bf16(q.c[i]);
    auto *dc = static_cast<uint16_t *>(upload(c16.data(), c16.size() * 2));
    fsdprt_gpu_gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.25f, da, q.lda, q.sa, db,
                         q.ldb, q.sb, s.beta, dc, q.ldc, q.sc, s.batch);
    EXPECT_EQ(fsdprt_gpu_copy_to_host(got.data(), dc, int64_t(got.size() * 2)),
              FSDPRT_OK);
    for (size_t i = 0; i < got.size(); ++i)
      out[i] = from_bf16(got[i]);
    fsdprt_gpu_free(dc);
  }
  fsdprt_gpu_free(da);
  fsdprt_gpu_free(db);
  return out;
}

uint64_t splitGemms(fsdprt_gpu_context_t *ctx) {
  fsdprt_gpu_stats_t st;
  EXPECT_EQ(fsdprt_gpu_context_stats(ctx, &st), FSDPRT_OK);
  return st.split_gemms;
}

const Shape kShapes[] = {
    {0, 0, 37, 29, 203, 1, 0.0f},  // 3 slices of 64, a rest of 11
    {1, 0, 16, 40, 96, 3, 0.5f},   // batch 3, one call per slice
    {0, 1, 9, 130, 150, 2, -1.0f}, // a rest with batch 2
    {1, 1, 33, 7, 48, 1, 2.0f},    // K a multiple of the slices
};

TEST(SplitKGemm, AgreesWithTheUnsplitGemmAndFloat64) {
  REQUIRE_GPU();
  Context c;
  for (const Shape &s : kShapes) {
    for (bool f32Out : {true, false}) {
      SCOPED_TRACE(name(s) + (f32Out ? " f32 C" : " bf16 C"));
      const Problem q(s, uint32_t(s.m * 7 + s.k));
      std::vector<float> whole, split;
      {
        SplitK off("0");
        whole = run(q, f32Out);
      }
      const uint64_t before = splitGemms(c.ctx);
      {
        SplitK three("3");
        split = run(q, f32Out);
      }
      EXPECT_EQ(splitGemms(c.ctx), before + 1);
      for (int64_t p = 0; p < s.batch; ++p)
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < q.ldc; ++j) {
            const size_t idx = size_t(p * q.sc + i * q.ldc + j);
            if (j >= s.n) { // padding: never written
              EXPECT_EQ(split[idx], whole[idx]) << p << " " << i << " " << j;
              continue;
            }
            const double want = q.want(p, i, j, 1.25f);
            // f32: the sums' order alone; bf16: one rounding of a sum that
            // may land on either side.
            const double tol = f32Out ? 1e-5 * (1 + std::fabs(want))
                                      : 1e-2 * std::max(1.0, std::fabs(want));
            EXPECT_NEAR(split[idx], whole[idx], tol)
                << p << " " << i << " " << j;
            EXPECT_NEAR(split[idx], want, tol) << p << " " << i << " " << j;
          }
    }
  }
  EXPECT_EQ(fsdprt_gpu_context_error(c.ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(c.ctx);
}

TEST(SplitKGemm, ResultsAreBitIdenticalFromRunToRun) {
  REQUIRE_GPU();
  Context c;
  SplitK five("5");
  const Problem q(kShapes[0], 11);
  const std::vector<float> first = run(q, false), second = run(q, false);
  EXPECT_EQ(first, second);
  EXPECT_EQ(splitGemms(c.ctx), 2u);
}

TEST(SplitKGemm, F32GemmsAndShortKAreNotSplit) {
  REQUIRE_GPU();
  Context c;
  SplitK four("4");
  // K 24 cannot make 4 slices of a multiple of 8: the whole gemm.
  const Problem q({0, 0, 5, 6, 24, 1, 0.0f}, 3);
  run(q, true);
  std::vector<float> a(16, 1.0f);
  auto *d = static_cast<float *>(upload(a.data(), a.size() * 4));
  fsdprt_gpu_gemm_f32(0, 0, 2, 2, 4, 1.0f, d, 4, 0, d + 8, 2, 0, 0.0f, d + 12,
                      2, 0, 1);
  fsdprt_gpu_free(d);
  fsdprt_gpu_stats_t st;
  ASSERT_EQ(fsdprt_gpu_context_stats(c.ctx, &st), FSDPRT_OK);
  EXPECT_EQ(st.gemms, 2u);
  EXPECT_EQ(st.split_gemms, 0u);
}

// The policy itself (the cost model reads the same function): GPT-2
// small's weight gradients on an H200 (132 SMs), 8 x 1024 tokens.
TEST(SplitKPolicy, SplitsTheUnderFilledGemmsOfGpt2) {
  // 6 x 24 = 144 tiles: 2 waves at 55%; 4 slices of 2048: 5 waves at 87%.
  fsdprt_gpu_split_k_t p = fsdprt_gpu_split_k_plan(768, 3072, 8192, 1, 132);
  EXPECT_EQ(p.slices, 4);
  EXPECT_EQ(p.slice_k, 2048);
  EXPECT_EQ(p.rest_k, 0);
  EXPECT_EQ(p.partials, 4);
  EXPECT_EQ(p.gemms, 1);
  // 36 tiles (27%): 3 slices of 2728 (108 tiles, 82%) and a rest of 8.
  p = fsdprt_gpu_split_k_plan(768, 768, 8192, 1, 132);
  EXPECT_EQ(p.slices, 3);
  EXPECT_EQ(p.slice_k, 2728);
  EXPECT_EQ(p.rest_k, 8);
  EXPECT_EQ(p.partials, 4);
  EXPECT_EQ(p.gemms, 2);
  // 108 tiles fill 82% of a wave; the logits' gemms fill theirs; K 768 is
  // short.
  EXPECT_EQ(fsdprt_gpu_split_k_plan(768, 2304, 8192, 1, 132).slices, 1);
  EXPECT_EQ(fsdprt_gpu_split_k_plan(50257, 768, 8192, 1, 132).slices, 1);
  EXPECT_EQ(fsdprt_gpu_split_k_plan(8192, 3072, 768, 1, 132).slices, 1);
  // Batch > 1: one call per slice, each as filled as the whole gemm.
  EXPECT_EQ(fsdprt_gpu_split_k_plan(768, 768, 8192, 2, 132).slices, 1);
  p = fsdprt_gpu_split_k_slices(150, 2, 3);
  EXPECT_EQ(p.gemms, 4);
  // A forced split: slices a multiple of 8, the rest after them.
  p = fsdprt_gpu_split_k_slices(203, 1, 3);
  EXPECT_EQ(p.slice_k, 64);
  EXPECT_EQ(p.rest_k, 11);
  EXPECT_EQ(fsdprt_gpu_split_k_slices(24, 1, 4).slices, 1);
}

} // namespace

// The fused attention entry points (fsdprt_gpu_attention_*) against a
// float64 reference of softmax(Q K^T * scale + mask) V and its gradients:
// causal and not, an additive mask with a fully masked row, lengths that are
// not a multiple of the tiles (1, 17, 130), tq != tk, head dims 64 and 128
// (16, 32 and 96 in fewer cases), f32 and bf16 (inputs rounded to bf16
// before the reference sees them; bf16 at head dims 64 and 128 runs on the
// tensor cores), batch x heads > 1, and bit-identical results from two runs.
// In the emulation, also the emulated mma.sync instruction against a plain
// matrix product.
//
// Built twice: against the host emulation of CUDA (fsdprt_gpu_attention_tests,
// ctest gpu_attention.*) and against the real runtime
// (fsdprt_gpu_attention_device_tests, ctest runtime_gpu_attention, label gpu,
// built with FSDPRT_GPU_TESTS=ON), where every test skips without a GPU and
// a GPT-2-sized case prints a "row:" line for bench/gpu/check.sh.
#include "gpu_kernel_test.h"
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
#include "mma_sync.h" // runtime/cuda
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace gpu_kernel_test;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  int64_t batch, heads, tq, tk, d;
  bool causal;
  bool mask;        // an additive [tq, tk] mask (strides 0, 0, tk, 1)
  int64_t full_row; // a row the mask hides entirely (-1: none)
  bool bf16;
  std::string name() const {
    return "b" + std::to_string(batch) + "h" + std::to_string(heads) + "tq" +
           std::to_string(tq) + "tk" + std::to_string(tk) + "d" +
           std::to_string(d) + (causal ? " causal" : "") +
           (mask ? " mask" : "") +
           (full_row >= 0 ? " masked-row " + std::to_string(full_row) : "") +
           (bf16 ? " bf16" : " f32");
  }
};

// Inputs (already representable in the case's dtype) and the float64
// reference of every output.
struct Problem {
  std::vector<float> q, k, v, mask, dout;
  std::vector<double> o, lse, dq, dk, dv;
};

float representable(float x, bool bf16) {
  return bf16 ? from_bf16(to_bf16(x)) : x;
}

Problem make(const Case &c, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t bh = c.batch * c.heads, d = c.d;
  Problem p;
  auto fill = [&](std::vector<float> &x, int64_t n) {
    x.resize(size_t(n));
    for (float &e : x)
      e = representable(dist(rng), c.bf16);
  };
  fill(p.q, bh * c.tq * d);
  fill(p.k, bh * c.tk * d);
  fill(p.v, bh * c.tk * d);
  fill(p.dout, bh * c.tq * d);
  if (c.mask) {
    p.mask.resize(size_t(c.tq * c.tk));
    for (int64_t i = 0; i < c.tq; ++i)
      for (int64_t j = 0; j < c.tk; ++j) {
        // Some -inf entries (every 7th), a fully masked row, else small
        // offsets.
        float m = representable(0.5f * dist(rng), c.bf16);
        if ((i + 3 * j) % 7 == 0 && j != 0)
          m = -std::numeric_limits<float>::infinity();
        if (i == c.full_row)
          m = -std::numeric_limits<float>::infinity();
        p.mask[size_t(i * c.tk + j)] = m;
      }
  }
  p.o.assign(p.q.size(), 0);
  p.dq.assign(p.q.size(), 0);
  p.dk.assign(p.k.size(), 0);
  p.dv.assign(p.v.size(), 0);
  p.lse.assign(size_t(bh * c.tq), -kInf);
  std::vector<double> s(size_t(c.tk)), pr(size_t(c.tk)), dp(size_t(c.tk));
  for (int64_t g = 0; g < bh; ++g) {
    const float *q = &p.q[size_t(g * c.tq * d)];
    const float *k = &p.k[size_t(g * c.tk * d)];
    const float *v = &p.v[size_t(g * c.tk * d)];
    const float *go = &p.dout[size_t(g * c.tq * d)];
    for (int64_t i = 0; i < c.tq; ++i) {
      double mx = -kInf;
      for (int64_t j = 0; j < c.tk; ++j) {
        double x = 0;
        for (int64_t e = 0; e < d; ++e)
          x += double(q[i * d + e]) * double(k[j * d + e]);
        x *= double(scale);
        if (c.mask)
          x += double(p.mask[size_t(i * c.tk + j)]);
        if (c.causal && j > i)
          x = -kInf;
        s[size_t(j)] = x;
        mx = std::max(mx, x);
      }
      if (mx == -kInf)
        continue; // fully masked: O = 0, lse = -inf, no gradient
      double sum = 0;
      for (int64_t j = 0; j < c.tk; ++j)
        sum += pr[size_t(j)] = std::exp(s[size_t(j)] - mx);
      for (int64_t j = 0; j < c.tk; ++j)
        pr[size_t(j)] /= sum;
      p.lse[size_t(g * c.tq + i)] = mx + std::log(sum);
      double *o = &p.o[size_t((g * c.tq + i) * d)];
      for (int64_t j = 0; j < c.tk; ++j)
        for (int64_t e = 0; e < d; ++e)
          o[e] += pr[size_t(j)] * double(v[j * d + e]);
      // Backward of this row.
      double delta = 0;
      for (int64_t j = 0; j < c.tk; ++j) {
        double x = 0;
        for (int64_t e = 0; e < d; ++e)
          x += double(go[i * d + e]) * double(v[j * d + e]);
        dp[size_t(j)] = x;
        delta += pr[size_t(j)] * x;
      }
      for (int64_t j = 0; j < c.tk; ++j) {
        const double ds = pr[size_t(j)] * (dp[size_t(j)] - delta);
        for (int64_t e = 0; e < d; ++e) {
          p.dv[size_t((g * c.tk + j) * d + e)] +=
              pr[size_t(j)] * double(go[i * d + e]);
          p.dq[size_t((g * c.tq + i) * d + e)] +=
              double(scale) * ds * double(k[j * d + e]);
          p.dk[size_t((g * c.tk + j) * d + e)] +=
              double(scale) * ds * double(q[i * d + e]);
        }
      }
    }
  }
  return p;
}

// Device buffers of one dtype, copied from / to float vectors.
struct Buffer {
  void *ptr = nullptr;
  size_t count = 0;
  bool bf16 = false;
  Buffer(size_t n, bool b) : count(n), bf16(b) {
    ptr = fsdprt_gpu_alloc(int64_t(n * (b ? 2 : 4)));
  }
  Buffer(const std::vector<float> &x, bool b) : Buffer(x.size(), b) {
    upload(x);
  }
  ~Buffer() { fsdprt_gpu_free(ptr); }
  void upload(const std::vector<float> &x) {
    if (bf16) {
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        h[i] = to_bf16(x[i]);
      EXPECT_EQ(fsdprt_gpu_copy_to_device(ptr, h.data(), int64_t(2 * count)),
                FSDPRT_OK);
    } else {
      EXPECT_EQ(fsdprt_gpu_copy_to_device(ptr, x.data(), int64_t(4 * count)),
                FSDPRT_OK);
    }
  }
  // Raw bytes (for bit-identity) and values.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> h(count * (bf16 ? 2 : 4));
    EXPECT_EQ(fsdprt_gpu_copy_to_host(h.data(), ptr, int64_t(h.size())),
              FSDPRT_OK);
    return h;
  }
  std::vector<float> values() const {
    const std::vector<uint8_t> h = bytes();
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) {
      if (bf16) {
        uint16_t b;
        std::memcpy(&b, &h[2 * i], 2);
        x[i] = from_bf16(b);
      } else {
        std::memcpy(&x[i], &h[4 * i], 4);
      }
    }
    return x;
  }
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
};

struct Outputs {
  std::vector<uint8_t> o, lse, dq, dk, dv;
};

// Runs forward and backward on the device; compares with the reference.
Outputs run_and_check(const Case &c, const Problem &p, float scale,
                      double *seconds = nullptr) {
  const std::string name = c.name();
  const bool b = c.bf16;
  Buffer q(p.q, b), k(p.k, b), v(p.v, b), dout(p.dout, b);
  Buffer mask(c.mask ? p.mask : std::vector<float>{0.0f}, b);
  Buffer o(p.q.size(), b), dq(p.q.size(), b), dk(p.k.size(), b),
      dv(p.v.size(), b);
  Buffer lse(size_t(c.batch * c.heads * c.tq), false);
  const int64_t ms_q = c.mask ? c.tk : 0, ms_k = c.mask ? 1 : 0;
  const void *m = c.mask ? mask.ptr : nullptr;
  fsdprt_gpu_context_t *ctx = fsdprt_gpu_get_thread_context();
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
  const auto t0 = std::chrono::steady_clock::now();
  if (b) {
    fsdprt_gpu_attention_fwd_bf16(
        q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
        static_cast<const uint16_t *>(m), 0, 0, ms_q, ms_k, o.as<uint16_t>(),
        lse.as<float>(), c.batch, c.heads, c.tq, c.tk, c.d, scale, c.causal);
    fsdprt_gpu_attention_bwd_bf16(
        q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
        static_cast<const uint16_t *>(m), 0, 0, ms_q, ms_k, o.as<uint16_t>(),
        dout.as<uint16_t>(), lse.as<float>(), dq.as<uint16_t>(),
        dk.as<uint16_t>(), dv.as<uint16_t>(), c.batch, c.heads, c.tq, c.tk, c.d,
        scale, c.causal);
  } else {
    fsdprt_gpu_attention_fwd_f32(q.as<float>(), k.as<float>(), v.as<float>(),
                                 static_cast<const float *>(m), 0, 0, ms_q,
                                 ms_k, o.as<float>(), lse.as<float>(), c.batch,
                                 c.heads, c.tq, c.tk, c.d, scale, c.causal);
    fsdprt_gpu_attention_bwd_f32(
        q.as<float>(), k.as<float>(), v.as<float>(),
        static_cast<const float *>(m), 0, 0, ms_q, ms_k, o.as<float>(),
        dout.as<float>(), lse.as<float>(), dq.as<float>(), dk.as<float>(),
        dv.as<float>(), c.batch, c.heads, c.tq, c.tk, c.d, scale, c.causal);
  }
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK)
      << name << ": " << fsdprt_gpu_context_error_message(ctx);
  if (seconds)
    *seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();

  // f32: a few ulps of the largest value; bf16: the output's rounding
  // (2^-8 relative) plus the bf16 rounding of O inside the backward. The
  // absolute part is at least that of values of size 1 (the inputs' size):
  // gradients that vanish exactly (tq = tk = 1) come out as rounding noise.
  const double rel = b ? 1.0 / 128 : 1e-5, abs_frac = b ? 4e-3 : 1e-5;
  auto compare = [&](const char *what, const std::vector<float> &got,
                     const std::vector<double> &want) {
    ASSERT_EQ(got.size(), want.size());
    double scale_of = 0;
    for (double w : want)
      if (std::isfinite(w))
        scale_of = std::max(scale_of, std::fabs(w));
    double worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isinf(want[i])) {
        EXPECT_EQ(double(got[i]), want[i])
            << name << ": " << what << "[" << i << "]";
        continue;
      }
      const double err = std::fabs(double(got[i]) - want[i]);
      const double tol =
          rel * std::fabs(want[i]) + abs_frac * std::max(scale_of, 1.0);
      if (!(err <= tol) && (err - tol > worst || worst == 0)) {
        worst = err - tol + 1e-300;
        worst_at = i;
      }
    }
    EXPECT_EQ(worst, 0.0) << name << ": " << what << "[" << worst_at
                          << "]: got " << got[worst_at] << ", want "
                          << want[worst_at] << " (largest |want| " << scale_of
                          << ")";
  };
  if (c.full_row >= 0 && c.full_row < c.tq) {
    // A fully masked row: exactly 0 (not NaN) in O and dQ, LSE -inf.
    const std::vector<float> ov = o.values(), dqv = dq.values();
    for (int64_t g = 0; g < c.batch * c.heads; ++g)
      for (int64_t e = 0; e < c.d; ++e) {
        const size_t at = size_t((g * c.tq + c.full_row) * c.d + e);
        EXPECT_EQ(ov[at], 0.0f) << name << ": o of the masked row";
        EXPECT_EQ(dqv[at], 0.0f) << name << ": dq of the masked row";
      }
  }
  compare("o", o.values(), p.o);
  compare("lse", lse.values(), p.lse);
  compare("dq", dq.values(), p.dq);
  compare("dk", dk.values(), p.dk);
  compare("dv", dv.values(), p.dv);
  return Outputs{o.bytes(), lse.bytes(), dq.bytes(), dk.bytes(), dv.bytes()};
}

void check(const Case &c, bool twice = false) {
  const float scale = float(1.0 / std::sqrt(double(c.d)));
  const Problem p = make(c, scale, uint32_t(c.tq * 131 + c.d));
  const Outputs first = run_and_check(c, p, scale);
  if (twice) {
    const Outputs second = run_and_check(c, p, scale);
    EXPECT_EQ(first.o == second.o, true) << c.name() << ": o differs";
    EXPECT_EQ(first.lse == second.lse, true) << c.name() << ": lse differs";
    EXPECT_EQ(first.dq == second.dq, true) << c.name() << ": dq differs";
    EXPECT_EQ(first.dk == second.dk, true) << c.name() << ": dk differs";
    EXPECT_EQ(first.dv == second.dv, true) << c.name() << ": dv differs";
  }
}

TEST(Attention, F32MatchesFloat64AtLengthsThatAreNotAMultipleOfTheTile) {
  REQUIRE_GPU();
  Context device;
  for (int64_t t : {1, 17, 130})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        check({2, 2, t, t, d, causal, false, -1, false});
}

TEST(Attention, F32WithAnAdditiveMaskAndAFullyMaskedRow) {
  REQUIRE_GPU();
  Context device;
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      check({1, 3, 70, 70, d, causal, true, 5, false});
  check({2, 1, 1, 1, 64, false, true, 0, false}); // the only row masked
}

TEST(Attention, QueriesAndKeysOfDifferentLengths) {
  REQUIRE_GPU();
  Context device;
  check({1, 2, 17, 130, 64, false, false, -1, false});
  check({1, 2, 130, 17, 128, true, true, -1, false});
  check({1, 2, 40, 75, 32, true, false, -1, false});
  check({1, 1, 33, 20, 96, false, true, 3, false});
}

TEST(Attention, HeadDim16AsTheGeneratorsTransformerUsesIt) {
  REQUIRE_GPU();
  Context device;
  check({2, 1, 8, 8, 16, true, false, -1, false});
  check({2, 3, 70, 70, 16, false, true, 4, false});
  check({2, 3, 70, 70, 16, true, false, -1, true});
}

TEST(Attention, Bf16MatchesFloat64WithinBf16Rounding) {
  REQUIRE_GPU();
  Context device;
  for (int64_t t : {1, 17, 130})
    for (int64_t d : {64, 128})
      check({2, 2, t, t, d, t != 17, t == 130, t == 130 ? 64 : -1, true});
}

// bf16 at head dims 64 and 128 runs on the tensor cores
// (attention_mma_kernels.cu): masks, fully masked rows, uneven and unequal
// lengths through those kernels.
TEST(Attention, Bf16TensorCoreKernelsWithMasksAndUnevenLengths) {
  REQUIRE_GPU();
  Context device;
  for (int64_t d : {64, 128}) {
    for (bool causal : {false, true})
      check({1, 3, 70, 70, d, causal, true, 5, true});
    check({1, 2, 17, 130, d, false, false, -1, true});
    check({1, 2, 130, 17, d, true, true, -1, true});
    check({2, 1, 100, 65, d, true, false, -1, true});
    check({2, 1, 1, 1, d, false, true, 0, true}); // the only row masked
  }
}

TEST(Attention, ResultsAreBitIdenticalFromRunToRun) {
  REQUIRE_GPU();
  Context device;
  check({2, 2, 130, 130, 64, true, true, 9, false}, /*twice=*/true);
  check({1, 2, 100, 100, 128, false, false, -1, true}, /*twice=*/true);
  check({1, 2, 130, 130, 64, true, true, 9, true}, /*twice=*/true);
}

TEST(Attention, UnsupportedHeadDimAndBadArgumentsAreErrors) {
  REQUIRE_GPU();
  Context device;
  EXPECT_EQ(fsdprt_gpu_attention_head_dim_supported(64), 1);
  EXPECT_EQ(fsdprt_gpu_attention_head_dim_supported(128), 1);
  EXPECT_EQ(fsdprt_gpu_attention_head_dim_supported(80), 0);
  // Refused before anything runs: the pointers are never read.
  float dummy[4] = {0, 0, 0, 0};
  float *x = dummy;
  fsdprt_gpu_attention_fwd_f32(x, x, x, nullptr, 0, 0, 0, 0, x, x, 1, 1, 4, 4,
                               80, 1.0f, 0);
  fsdprt_gpu_context_t *&ctx = device.ctx;
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  const std::string msg = fsdprt_gpu_context_error_message(ctx);
  EXPECT_NE(msg.find("fsdprt_gpu_attention_fwd_f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("head_dim must be 16, 32, 64, 96 or 128"),
            std::string::npos)
      << msg;
  fsdprt_gpu_context_destroy(ctx);
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  fsdprt_gpu_attention_bwd_f32(x, x, x, nullptr, 0, 0, 0, 0, x, nullptr, x, x,
                               x, x, 1, 1, 4, 4, 64, 1.0f, 0);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_gpu_context_error_message(ctx))
                .find("null o, dout, lse or dq"),
            std::string::npos);
}

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
// The emulated mma.sync.m16n8k16 (bf16 in, f32 accumulators) and the
// fragment loaders of mma_sync.h against a plain matrix product: one warp
// loads A (16 x 16, row-major) and B^T (8 x 16, row-major) into fragments,
// multiplies onto C and writes D from the accumulator layout.
void mmaKernel(const uint16_t *a, const uint16_t *bt, const float *c,
               float *d) {
  const int lane = int(threadIdx.x);
  uint32_t fa[4], fb[2];
  fsdprt::gpu::mma::loadA<16>(fa, a, 0, 0, lane);
  fsdprt::gpu::mma::loadB<16>(fb, bt, 0, 0, lane);
  const int g = lane / 4, t = lane % 4;
  float acc[4];
  for (int e = 0; e < 4; ++e)
    acc[e] = c[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2];
  fsdprt::gpu::mma::bf16m16n8k16(acc, fa, fb);
  for (int e = 0; e < 4; ++e)
    d[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = acc[e];
}

// D = A B + C on one emulated warp; small integers make every sum exact.
void checkMma(bool integers, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-8, 8);
  std::uniform_real_distribution<float> real(-1, 1);
  auto value = [&] {
    return integers ? float(small(rng)) : from_bf16(to_bf16(real(rng)));
  };
  std::vector<float> a(256), b(128), c(128);
  for (float &x : a)
    x = value();
  for (float &x : b)
    x = value();
  for (float &x : c)
    x = integers ? float(small(rng)) : real(rng);
  std::vector<uint16_t> ha(256), hbt(128);
  for (int i = 0; i < 256; ++i)
    ha[size_t(i)] = to_bf16(a[size_t(i)]);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n)
      hbt[size_t(n * 16 + k)] = to_bf16(b[size_t(k * 8 + n)]);
  std::vector<float> d(128, std::nanf(""));
  cuda_emulation::launch(true, cuda_emulation::LaunchConfig(1, 32), mmaKernel,
                         static_cast<const uint16_t *>(ha.data()),
                         static_cast<const uint16_t *>(hbt.data()),
                         static_cast<const float *>(c.data()), d.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double want = c[size_t(m * 8 + n)];
      for (int k = 0; k < 16; ++k)
        want += double(a[size_t(m * 16 + k)]) * double(b[size_t(k * 8 + n)]);
      const double got = d[size_t(m * 8 + n)];
      if (integers)
        EXPECT_EQ(got, want) << "D[" << m << "][" << n << "]";
      else
        EXPECT_NEAR(got, want, 1e-5) << "D[" << m << "][" << n << "]";
    }
}

TEST(Mma, EmulatedBf16M16N8K16IsAMatrixProduct) {
  for (uint32_t seed : {1u, 2u, 3u})
    checkMma(/*integers=*/true, seed);
  for (uint32_t seed : {4u, 5u})
    checkMma(/*integers=*/false, seed);
}
#endif

#ifndef FSDPRT_CUDA_EMULATION_STREAMS
// On a GPU only: the attention of one GPT-2 small layer (2 x 12 heads, 1024
// tokens, d = 64, causal, bf16) against float64, and the time of forward +
// backward (second run; the float64 reference takes a while on the CPU).
TEST(Attention, Gpt2SmallLayerOnTheDevice) {
  REQUIRE_GPU();
  Context device;
  const Case c{2, 12, 1024, 1024, 64, true, false, -1, true};
  const float scale = 0.125f;
  const Problem p = make(c, scale, 1);
  run_and_check(c, p, scale);
  double seconds = 0;
  run_and_check(c, p, scale, &seconds);
  std::printf("row: fused attention vs float64 | ok | 2x12x1024x64 causal "
              "bf16 fwd+bwd %.2f ms\n",
              seconds * 1e3);
}
#endif

} // namespace

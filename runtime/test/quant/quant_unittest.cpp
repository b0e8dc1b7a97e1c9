// Unit tests of the CPU reference: scalar conversions against hand-derived
// values, round-trip error bounds per format, swap_first_dims against the
// index formula, layouts / wire bytes, and every error path.

#include "fsdprt_quant.h"
#include "quant_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using fsdprt::quant::FastDiv;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kFltMax = std::numeric_limits<float>::max();

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Values spread over many binades, with both signs and some exact zeros.
std::vector<float> randomValues(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logMag(-6.0f, 6.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float sign = normal(rng) < 0 ? -1.0f : 1.0f;
    v[i] = (i % 97 == 0) ? 0.0f : sign * scale * std::exp2(logMag(rng));
  }
  return v;
}

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = fsdprt_quant_float_to_bf16(v[i]);
  return out;
}

// ---- scalar conversions ---------------------------------------------------

TEST(Fp8Conversion, E4M3KnownValues) {
  const int k = FSDPRT_QUANT_E4M3;
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1.0f, k), 0x38);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-1.0f, k), 0xB8);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(448.0f, k), 0x7E);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(449.0f, k), 0x7E); // saturates
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1e30f, k), 0x7E);  // saturates
  EXPECT_EQ(fsdprt_quant_float_to_fp8(kInf, k), 0x7E);   // satfinite
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-kInf, k), 0xFE);  // satfinite
  EXPECT_EQ(fsdprt_quant_float_to_fp8(kNan, k), 0x7F);   // canonical NaN
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-kNan, k), 0x7F);  // sign dropped
  EXPECT_EQ(fsdprt_quant_float_to_fp8(0.0f, k), 0x00);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-0.0f, k), 0x80);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.0f, -9), k), 0x01);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.0f, -10), k), 0x00); // tie
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.5f, -9), k), 0x02);  // tie
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-std::ldexp(1.0f, -12), k), 0x80);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.0f, -6), k), 0x08);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1e-40f, k), 0x00); // fp32 denormal
  // 1 + 1/16 is halfway between 1 and 1.125: ties to even (1.0).
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1.0625f, k), 0x38);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1.1875f, k), 0x3A); // to 1.25 (even)
}

TEST(Fp8Conversion, E5M2KnownValues) {
  const int k = FSDPRT_QUANT_E5M2;
  EXPECT_EQ(fsdprt_quant_float_to_fp8(1.0f, k), 0x3C);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(57344.0f, k), 0x7B);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(70000.0f, k), 0x7B);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(kInf, k), 0x7B);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-kInf, k), 0xFB);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(kNan, k), 0x7F);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(-0.0f, k), 0x80);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.0f, -16), k), 0x01);
  EXPECT_EQ(fsdprt_quant_float_to_fp8(std::ldexp(1.0f, -17), k), 0x00);
}

// Every finite code decodes to a value that encodes back to the same code.
TEST(Fp8Conversion, AllCodesRoundTrip) {
  for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2}) {
    for (int c = 0; c < 256; ++c) {
      const float v = fsdprt_quant_fp8_to_float(static_cast<uint8_t>(c), kind);
      if (std::isnan(v) || std::isinf(v))
        continue;
      EXPECT_EQ(fsdprt_quant_float_to_fp8(v, kind), c)
          << "kind " << kind << " code " << c << " value " << v;
    }
  }
  // NaN and Inf codes.
  EXPECT_TRUE(std::isnan(fsdprt_quant_fp8_to_float(0x7F, FSDPRT_QUANT_E4M3)));
  EXPECT_TRUE(std::isnan(fsdprt_quant_fp8_to_float(0xFF, FSDPRT_QUANT_E4M3)));
  EXPECT_EQ(fsdprt_quant_fp8_to_float(0x7C, FSDPRT_QUANT_E5M2), kInf);
  EXPECT_EQ(fsdprt_quant_fp8_to_float(0xFC, FSDPRT_QUANT_E5M2), -kInf);
  EXPECT_EQ(fsdprt_quant_fp8_to_float(0x7E, FSDPRT_QUANT_E4M3), 448.0f);
  EXPECT_EQ(fsdprt_quant_fp8_to_float(0x01, FSDPRT_QUANT_E4M3),
            std::ldexp(1.0f, -9));
}

// Encoding is monotone: between two neighbouring codes the midpoint decides.
TEST(Fp8Conversion, RoundsToNearestNeighbour) {
  for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2}) {
    const int maxCode = kind == FSDPRT_QUANT_E4M3 ? 0x7E : 0x7B;
    for (int c = 0; c < maxCode; ++c) {
      const float lo = fsdprt_quant_fp8_to_float(static_cast<uint8_t>(c), kind);
      const float hi =
          fsdprt_quant_fp8_to_float(static_cast<uint8_t>(c + 1), kind);
      const float mid = 0.5f * (lo + hi); // exact in fp32
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(fsdprt_quant_float_to_fp8(mid, kind), even);
      EXPECT_EQ(fsdprt_quant_float_to_fp8(std::nextafter(mid, 0.0f), kind), c);
      EXPECT_EQ(fsdprt_quant_float_to_fp8(std::nextafter(mid, kInf), kind),
                c + 1);
    }
  }
}

TEST(E2m1Conversion, ValuesAndTies) {
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float v = fsdprt_quant_e2m1_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(std::fabs(v), values[c & 7]);
    EXPECT_EQ(std::signbit(v), (c & 8) != 0);
    EXPECT_EQ(fsdprt_quant_float_to_e2m1(v), c);
  }
  // Midpoints go to the even code.
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(0.25f), 0);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(0.75f), 2);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(1.25f), 2);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(1.75f), 4);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(2.5f), 4);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(3.5f), 6);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(5.0f), 6);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(5.0001f), 7);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(100.0f), 7);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(-kInf), 0xF);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(kNan), 0x7);
  EXPECT_EQ(fsdprt_quant_float_to_e2m1(-0.1f), 0x8);
}

// The kernels' E2M1 conversion equals the reference: every fp32 exponent
// and leading mantissa bits (all 2^19 of bits 31..13), each with low bits
// 0, 1 and 0x1FFF, so both neighbours of every tie point are hit, plus
// random patterns. quant_gpu_check repeats this for all 2^32 patterns on a GPU.
TEST(E2m1Conversion, FastPathMatchesReference) {
  uint64_t checked = 0;
  for (uint32_t hi = 0; hi < (1u << 19); ++hi)
    for (uint32_t lo : {0u, 1u, 0x1FFFu, 0x1000u}) {
      const uint32_t u = (hi << 13) | lo;
      float f;
      std::memcpy(&f, &u, 4);
      ASSERT_EQ(fsdprt::quant::floatToE2m1Fast(f),
                fsdprt::quant::floatToE2m1(f))
          << std::hex << "bits 0x" << u;
      ++checked;
    }
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(fsdprt::quant::floatToE2m1Fast(f), fsdprt::quant::floatToE2m1(f))
        << std::hex << "bits 0x" << u;
  }
  EXPECT_EQ(checked, 4u << 19);
}

TEST(E8m0Conversion, RoundsUp) {
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(1.0f), 127);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(1.5f), 128);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(std::nextafter(2.0f, 0.0f)), 128);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(2.0f), 128);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(0.0f), 0);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(kNan), 0xFF);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(kInf), 0xFE);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(kFltMax), 0xFE); // never past 0xFE
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(std::ldexp(1.0f, 127)), 0xFE);
  // Denormals: <= 2^-127 rounds up to 2^-127 (code 0), above to 2^-126.
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(bitsToFloat(0x00400000)), 0);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(bitsToFloat(0x00000001)), 0);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(bitsToFloat(0x00400001)), 1);
  EXPECT_EQ(fsdprt_quant_float_to_e8m0(bitsToFloat(0x00800000)), 1);
  // The result is the smallest e with 2^(e-127) >= v, for normal v.
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t bits = (rng() % (0x7F000000u - 0x00800000u)) + 0x00800000u;
    const float v = bitsToFloat(bits);
    const int e = fsdprt_quant_float_to_e8m0(v);
    ASSERT_GE(std::ldexp(1.0, e - 127), static_cast<double>(v));
    ASSERT_LT(std::ldexp(1.0, e - 128), static_cast<double>(v));
  }
}

TEST(E8m0Conversion, ScaleMultipliers) {
  using fsdprt::quant::e8m0DequantScale;
  using fsdprt::quant::e8m0QuantScale;
  EXPECT_EQ(e8m0QuantScale(127), 1.0f);
  EXPECT_EQ(e8m0QuantScale(0), std::ldexp(1.0f, 127));
  EXPECT_EQ(e8m0QuantScale(1), std::ldexp(1.0f, 126));
  EXPECT_EQ(e8m0QuantScale(253), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0QuantScale(254), std::ldexp(1.0f, -127)); // fp32 denormal
  EXPECT_EQ(e8m0QuantScale(255), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0DequantScale(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0DequantScale(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0DequantScale(255)));
  for (int e = 0; e < 255; ++e)
    EXPECT_EQ(e8m0QuantScale(static_cast<uint8_t>(e)) *
                  e8m0DequantScale(static_cast<uint8_t>(e)),
              1.0f)
        << e;
}

TEST(Bf16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(fsdprt_quant_float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fsdprt_quant_float_to_bf16(bitsToFloat(0x3F808000)), 0x3F80);
  EXPECT_EQ(fsdprt_quant_float_to_bf16(bitsToFloat(0x3F818000)), 0x3F82);
  EXPECT_EQ(fsdprt_quant_float_to_bf16(bitsToFloat(0x3F808001)), 0x3F81);
  EXPECT_EQ(fsdprt_quant_float_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(fsdprt_quant_float_to_bf16(kFltMax), 0x7F80); // overflows to Inf
  EXPECT_TRUE(
      std::isnan(fsdprt_quant_bf16_to_float(fsdprt_quant_float_to_bf16(kNan))));
  EXPECT_TRUE(std::isnan(fsdprt_quant_bf16_to_float(
      fsdprt_quant_float_to_bf16(bitsToFloat(0x7F800001)))));
}

TEST(Scales, PerTensorRules) {
  const int k = FSDPRT_QUANT_E4M3;
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(448.0f, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(2.0f, k), 224.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(2.0f, FSDPRT_QUANT_E5M2),
            28672.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(0.0f, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(-0.0f, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(kInf, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(kNan, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(-3.0f, k), 1.0f);
  EXPECT_EQ(fsdprt_quant_fp8_scale_from_amax(1e-45f, k), kFltMax);
  const int f32 = FSDPRT_QUANT_F32, bf16 = FSDPRT_QUANT_BF16;
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(3.0f, 1, f32), 128.0f); // 149.3
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(3.0f, 0, f32), 448.0f / 3.0f);
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(1e-45f, 1, f32),
            std::ldexp(1.0f, 127));
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(0.0f, 1, f32), 1.0f);
  // An infinite scale becomes the input type's max (TE), then pow2 floors
  // both to 2^127.
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(1e-45f, 0, f32), kFltMax);
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(1e-45f, 0, bf16),
            std::ldexp(255.0f / 128.0f, 127)); // bf16 0x7F7F
  EXPECT_EQ(fsdprt_quant_block_scale_from_amax(1e-45f, 1, bf16),
            std::ldexp(1.0f, 127));
}

TEST(Scales, Nvfp4Global) {
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(2688.0f), 1.0f);
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(1.0f), 2688.0f);
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(0.0f), 1.0f);
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(kInf), 1.0f);
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(kNan), kFltMax);
  EXPECT_EQ(fsdprt_quant_nvfp4_global_scale(1e-44f), kFltMax);
}

TEST(FastDivTest, MatchesDivision) {
  std::mt19937 rng(11);
  std::vector<uint32_t> divisors = {
      1,    2,     3,     5,          7,          8,          32,        100,
      1000, 65535, 65536, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF};
  for (int i = 0; i < 200; ++i)
    divisors.push_back(1 + rng() % (i < 100 ? 5000u : 0xFFFFFFFEu));
  for (uint32_t d : divisors) {
    const FastDiv fd(d);
    const uint32_t edge[] = {0,     1,           d - 1,       d,
                             d + 1, 0xFFFFFFFFu, 0xFFFFFFFEu, 0x80000000u};
    for (uint32_t n : edge)
      ASSERT_EQ(fd.div(n), n / d) << n << " / " << d;
    for (int j = 0; j < 2000; ++j) {
      const uint32_t n = rng();
      ASSERT_EQ(fd.div(n), n / d) << n << " / " << d;
      ASSERT_EQ(fd.mod(n), n % d) << n << " % " << d;
    }
  }
}

// ---- round trips ----------------------------------------------------------

// Half an fp8 ulp relative (2^-4 for E4M3, 2^-3 for E5M2) plus half the
// smallest denormal, both in the scaled domain.
void expectFp8Close(float x, float y, int kind, float scaleInv, size_t i) {
  const float rel = kind == FSDPRT_QUANT_E4M3 ? 0.0625f : 0.125f;
  const float denormHalf =
      kind == FSDPRT_QUANT_E4M3 ? std::ldexp(1.0f, -10) : std::ldexp(1.0f, -17);
  const double bound =
      rel * std::fabs(double(x)) + denormHalf * double(scaleInv) + 1e-45;
  ASSERT_LE(std::fabs(double(y) - double(x)), bound * (1 + 1e-6))
      << "element " << i << " x=" << x << " y=" << y;
}

TEST(RoundTrip, Fp8Tensor) {
  for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2}) {
    for (float scale : {1e-30f, 1e-3f, 1.0f, 1e4f, 1e30f}) {
      const auto x = randomValues(4099, scale, 3);
      float amax = -1;
      ASSERT_EQ(fsdprt_quant_amax(x.data(), FSDPRT_QUANT_F32, x.size(), &amax),
                FSDPRT_OK);
      std::vector<uint8_t> q(x.size());
      float scaleInv = 0;
      ASSERT_EQ(fsdprt_quant_fp8_tensor_quantize(x.data(), FSDPRT_QUANT_F32,
                                                 x.size(), amax, kind, q.data(),
                                                 &scaleInv),
                FSDPRT_OK);
      std::vector<float> y(x.size());
      ASSERT_EQ(fsdprt_quant_fp8_tensor_dequantize(q.data(), q.size(), kind,
                                                   scaleInv, y.data(),
                                                   FSDPRT_QUANT_F32),
                FSDPRT_OK);
      for (size_t i = 0; i < x.size(); ++i)
        expectFp8Close(x[i], y[i], kind, scaleInv, i);
    }
  }
}

TEST(RoundTrip, Fp8TensorBf16InputAndOutput) {
  const auto xf = randomValues(1000, 3.0f, 5);
  const auto xb = toBf16(xf);
  float amax = 0;
  ASSERT_EQ(fsdprt_quant_amax(xb.data(), FSDPRT_QUANT_BF16, xb.size(), &amax),
            FSDPRT_OK);
  std::vector<uint8_t> q(xb.size());
  float scaleInv = 0;
  ASSERT_EQ(fsdprt_quant_fp8_tensor_quantize(xb.data(), FSDPRT_QUANT_BF16,
                                             xb.size(), amax, FSDPRT_QUANT_E4M3,
                                             q.data(), &scaleInv),
            FSDPRT_OK);
  std::vector<uint16_t> y(xb.size());
  ASSERT_EQ(fsdprt_quant_fp8_tensor_dequantize(q.data(), q.size(),
                                               FSDPRT_QUANT_E4M3, scaleInv,
                                               y.data(), FSDPRT_QUANT_BF16),
            FSDPRT_OK);
  for (size_t i = 0; i < xb.size(); ++i) {
    const float x = fsdprt_quant_bf16_to_float(xb[i]);
    const float v = fsdprt_quant_bf16_to_float(y[i]);
    // fp8 error plus the bf16 rounding of the output (2^-9 relative).
    ASSERT_LE(std::fabs(v - x), 0.0625f * 1.01f * std::fabs(x) +
                                    std::fabs(x) / 256.0f +
                                    std::ldexp(1.0f, -10) * scaleInv);
  }
}

TEST(RoundTrip, Mxfp8RowAndColumn) {
  const size_t rows = 64, cols = 96;
  auto x = randomValues(rows * cols, 1.0f, 9);
  // One block spanning ~2^40 of dynamic range: small elements lose precision
  // only relative to the block's scale.
  x[5] = 1e6f;
  for (int columnwise : {0, 1}) {
    std::vector<uint8_t> q(rows * cols), s(rows * cols / 32);
    ASSERT_EQ(fsdprt_quant_mxfp8_quantize(x.data(), FSDPRT_QUANT_F32, rows,
                                          cols, columnwise, q.data(), s.data()),
              FSDPRT_OK);
    std::vector<float> y(rows * cols);
    ASSERT_EQ(fsdprt_quant_mxfp8_dequantize(q.data(), s.data(), rows, cols,
                                            columnwise, y.data(),
                                            FSDPRT_QUANT_F32),
              FSDPRT_OK);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) {
        const size_t i = r * cols + c;
        const uint8_t e = columnwise ? s[(r / 32) * cols + c] : s[i / 32];
        // Block max maps into (224, 448]: no saturation, E4M3 accuracy.
        expectFp8Close(x[i], y[i], FSDPRT_QUANT_E4M3,
                       std::ldexp(1.0f, int(e) - 127), i);
      }
  }
}

TEST(RoundTrip, Nvfp4) {
  const size_t rows = 8, cols = 64;
  for (float scale : {1e-20f, 1.0f, 1e20f}) {
    const auto x = randomValues(rows * cols, scale, 13);
    float amax = 0;
    ASSERT_EQ(fsdprt_quant_amax(x.data(), FSDPRT_QUANT_F32, x.size(), &amax),
              FSDPRT_OK);
    std::vector<uint8_t> q(rows * cols / 2), s(rows * cols / 16);
    ASSERT_EQ(fsdprt_quant_nvfp4_quantize(x.data(), FSDPRT_QUANT_F32, rows,
                                          cols, amax, q.data(), s.data()),
              FSDPRT_OK);
    std::vector<float> y(rows * cols);
    ASSERT_EQ(fsdprt_quant_nvfp4_dequantize(q.data(), s.data(), rows, cols,
                                            amax, y.data(), FSDPRT_QUANT_F32),
              FSDPRT_OK);
    for (size_t i = 0; i < x.size(); ++i) {
      // E2M1 error is at most a quarter of |v| (or 0.25 below 1) in the
      // block's scaled domain, d = float(s_b) * amax / 2688.
      const double d = fsdprt_quant_fp8_to_float(s[i / 16], FSDPRT_QUANT_E4M3) *
                       double(amax) / 2688.0;
      const double bound = 0.25 * std::fabs(double(x[i])) + 0.25 * d;
      // E4M3 rounding of s_b can leave the block max up to 1/16 beyond 6;
      // it saturates, which the bound above covers. The block scale's own
      // relative E4M3 error adds up to 1/16 of d for tiny blocks.
      ASSERT_LE(std::fabs(double(y[i]) - double(x[i])), bound * 1.07 + 1e-44)
          << "element " << i << " x=" << x[i] << " y=" << y[i];
    }
  }
}

TEST(RoundTrip, Fp8BlockwiseBothShapes) {
  const size_t rows = 130, cols = 300; // partial blocks on both dims
  const auto x = randomValues(rows * cols, 2.0f, 17);
  for (int blockRows : {1, 128}) {
    for (int pow2 : {0, 1}) {
      const size_t sr = (rows + blockRows - 1) / blockRows, sc = 3;
      std::vector<uint8_t> q(rows * cols);
      std::vector<float> s(sr * sc);
      ASSERT_EQ(fsdprt_quant_fp8_block_quantize(x.data(), FSDPRT_QUANT_F32,
                                                rows, cols, blockRows, pow2,
                                                q.data(), s.data()),
                FSDPRT_OK);
      std::vector<float> y(rows * cols);
      ASSERT_EQ(fsdprt_quant_fp8_block_dequantize(q.data(), s.data(), rows,
                                                  cols, blockRows, y.data(),
                                                  FSDPRT_QUANT_F32),
                FSDPRT_OK);
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
          const float si = s[(r / blockRows) * sc + c / 128];
          if (pow2) {
            uint32_t b = floatToBits(si);
            ASSERT_EQ(b & 0x7FFFFF, 0u) << "scale_inv not a power of two";
          }
          expectFp8Close(x[r * cols + c], y[r * cols + c], FSDPRT_QUANT_E4M3,
                         si, r * cols + c);
        }
    }
  }
}

TEST(Amax, IgnoresNanAndKeepsInf) {
  std::vector<float> x = {1.0f, -3.0f, kNan, 2.0f};
  float amax = 0;
  ASSERT_EQ(fsdprt_quant_amax(x.data(), FSDPRT_QUANT_F32, x.size(), &amax),
            FSDPRT_OK);
  EXPECT_EQ(amax, 3.0f);
  x.push_back(-kInf);
  ASSERT_EQ(fsdprt_quant_amax(x.data(), FSDPRT_QUANT_F32, x.size(), &amax),
            FSDPRT_OK);
  EXPECT_EQ(amax, kInf);
  std::vector<float> nans = {kNan, -kNan};
  ASSERT_EQ(fsdprt_quant_amax(nans.data(), FSDPRT_QUANT_F32, 2, &amax),
            FSDPRT_OK);
  EXPECT_EQ(amax, 0.0f);
  ASSERT_EQ(fsdprt_quant_amax(nullptr, FSDPRT_QUANT_F32, 0, &amax), FSDPRT_OK);
  EXPECT_EQ(amax, 0.0f);
}

// ---- swap_first_dims ------------------------------------------------------

TEST(SwapFirstDims, MatchesIndexFormula) {
  std::mt19937 rng(19);
  for (size_t d0 : {1, 2, 3, 8})
    for (size_t d1 : {1, 4, 5})
      for (size_t inner : {1, 3, 16, 40}) {
        std::vector<uint8_t> in(d0 * d1 * inner), out(in.size());
        for (auto &b : in)
          b = static_cast<uint8_t>(rng());
        ASSERT_EQ(
            fsdprt_quant_swap_first_dims(in.data(), out.data(), d0, d1, inner),
            FSDPRT_OK);
        for (size_t a = 0; a < d1; ++a)
          for (size_t b = 0; b < d0; ++b)
            for (size_t c = 0; c < inner; ++c)
              ASSERT_EQ(out[(a * d0 + b) * inner + c],
                        in[(b * d1 + a) * inner + c]);
        // Swapping back restores the input.
        std::vector<uint8_t> back(in.size());
        ASSERT_EQ(fsdprt_quant_swap_first_dims(out.data(), back.data(), d1, d0,
                                               inner),
                  FSDPRT_OK);
        ASSERT_EQ(back, in);
      }
}

// Gathering columnwise (transposed) shards along dim 0 interleaves them;
// the swap turns the gathered buffer into the transpose of the full tensor.
TEST(SwapFirstDims, FixesGatheredColumnwiseData) {
  const size_t world = 4, localRows = 3, cols = 5; // full tensor [12, 5]
  std::vector<float> full(world * localRows * cols);
  for (size_t i = 0; i < full.size(); ++i)
    full[i] = static_cast<float>(i);
  // Rank k holds rows [3k, 3k+3); its columnwise copy is the [5, 3] transpose.
  std::vector<float> gathered; // [world, cols, localRows]
  for (size_t k = 0; k < world; ++k)
    for (size_t c = 0; c < cols; ++c)
      for (size_t r = 0; r < localRows; ++r)
        gathered.push_back(full[(k * localRows + r) * cols + c]);
  std::vector<float> fixed(gathered.size()); // [cols, world, localRows]
  ASSERT_EQ(fsdprt_quant_swap_first_dims(gathered.data(), fixed.data(), world,
                                         cols, localRows * sizeof(float)),
            FSDPRT_OK);
  for (size_t c = 0; c < cols; ++c)
    for (size_t r = 0; r < world * localRows; ++r)
      ASSERT_EQ(fixed[c * world * localRows + r], full[r * cols + c]);
}

// ---- layouts and errors ---------------------------------------------------

TEST(Layout, WireBytes) {
  const int64_t shape[] = {4096, 4096};
  const uint64_t n = 4096ull * 4096ull;
  uint64_t bytes = 0;
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_FP8_E4M3_TENSOR, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + 4);
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_MXFP8_ROWWISE, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + n / 32);
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_MXFP8_COLWISE, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + n / 32);
  ASSERT_EQ(fsdprt_quant_wire_bytes(FSDPRT_QUANT_NVFP4, shape, 2, &bytes),
            FSDPRT_OK);
  EXPECT_EQ(bytes, n / 2 + n / 16 + 4);
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_FP8_BLOCK_1X128, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + 4 * 4096 * 32);
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_FP8_BLOCK_128X128, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + 4 * 32 * 32);
  ASSERT_EQ(fsdprt_quant_wire_bytes(FSDPRT_QUANT_NVFP4_2D, shape, 2, &bytes),
            FSDPRT_OK);
  EXPECT_EQ(bytes, n / 2 + n / 16 + 4);
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_FP8_BLOCK_1X128_T, shape, 2, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, n + 4 * 4096 * 32);
  {
    const int64_t s2[] = {300, 200};
    fsdprt_quant_layout l;
    ASSERT_EQ(
        fsdprt_quant_get_layout(FSDPRT_QUANT_FP8_BLOCK_1X128_T, s2, 2, &l),
        FSDPRT_OK);
    EXPECT_EQ(l.scale_rows, 2u); // ceil(200 / 128)
    EXPECT_EQ(l.scale_cols, 300u);
    EXPECT_STREQ(fsdprt_quant_format_name(FSDPRT_QUANT_FP8_BLOCK_1X128_T),
                 "fp8_block_1x128_t");
    EXPECT_STREQ(fsdprt_quant_format_name(FSDPRT_QUANT_NVFP4_2D), "nvfp4_2d");
  }

  // 3-D: leading dims fold into rows; partial 128-blocks round up.
  const int64_t shape3[] = {2, 3, 200};
  fsdprt_quant_layout layout;
  ASSERT_EQ(fsdprt_quant_get_layout(FSDPRT_QUANT_FP8_BLOCK_128X128, shape3, 3,
                                    &layout),
            FSDPRT_OK);
  EXPECT_EQ(layout.rows, 6u);
  EXPECT_EQ(layout.cols, 200u);
  EXPECT_EQ(layout.scale_rows, 1u);
  EXPECT_EQ(layout.scale_cols, 2u);
  EXPECT_EQ(layout.scale_bytes, 8u);
  // A scalar is one element.
  ASSERT_EQ(
      fsdprt_quant_wire_bytes(FSDPRT_QUANT_FP8_E5M2_TENSOR, nullptr, 0, &bytes),
      FSDPRT_OK);
  EXPECT_EQ(bytes, 5u);
}

TEST(Errors, ShapesNotDivisibleByTheBlock) {
  std::vector<float> x(48 * 40, 1.0f);
  std::vector<uint8_t> q(x.size()), s(x.size());
  EXPECT_EQ(fsdprt_quant_mxfp8_quantize(x.data(), FSDPRT_QUANT_F32, 40, 48, 0,
                                        q.data(), s.data()),
            FSDPRT_ERR_SHAPE);
  EXPECT_NE(std::string(fsdprt_quant_last_error()).find("multiple of 32"),
            std::string::npos);
  EXPECT_EQ(fsdprt_quant_mxfp8_quantize(x.data(), FSDPRT_QUANT_F32, 40, 48, 1,
                                        q.data(), s.data()),
            FSDPRT_ERR_SHAPE);
  EXPECT_EQ(fsdprt_quant_mxfp8_dequantize(q.data(), s.data(), 40, 48, 0,
                                          x.data(), FSDPRT_QUANT_F32),
            FSDPRT_ERR_SHAPE);
  EXPECT_EQ(fsdprt_quant_nvfp4_quantize(x.data(), FSDPRT_QUANT_F32, 80, 24,
                                        1.0f, q.data(), s.data()),
            FSDPRT_ERR_SHAPE);
  EXPECT_NE(std::string(fsdprt_quant_last_error()).find("multiple of 16"),
            std::string::npos);
  const int64_t bad[] = {7, 33};
  fsdprt_quant_layout layout;
  EXPECT_EQ(
      fsdprt_quant_get_layout(FSDPRT_QUANT_MXFP8_ROWWISE, bad, 2, &layout),
      FSDPRT_ERR_SHAPE);
  EXPECT_EQ(
      fsdprt_quant_get_layout(FSDPRT_QUANT_MXFP8_COLWISE, bad, 2, &layout),
      FSDPRT_ERR_SHAPE);
  EXPECT_EQ(fsdprt_quant_get_layout(FSDPRT_QUANT_NVFP4, bad, 2, &layout),
            FSDPRT_ERR_SHAPE);
}

TEST(Errors, InvalidArguments) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> q(64), s(64);
  float si = 0;
  EXPECT_EQ(fsdprt_quant_fp8_tensor_quantize(x.data(), 7, 64, 1.0f,
                                             FSDPRT_QUANT_E4M3, q.data(), &si),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_quant_last_error()).find("dtype"),
            std::string::npos);
  EXPECT_EQ(fsdprt_quant_fp8_tensor_quantize(x.data(), FSDPRT_QUANT_F32, 64,
                                             1.0f, 5, q.data(), &si),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_fp8_tensor_quantize(nullptr, FSDPRT_QUANT_F32, 64,
                                             1.0f, FSDPRT_QUANT_E4M3, q.data(),
                                             &si),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_fp8_tensor_quantize(x.data(), FSDPRT_QUANT_F32, 64,
                                             1.0f, FSDPRT_QUANT_E4M3, q.data(),
                                             nullptr),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_mxfp8_quantize(x.data(), FSDPRT_QUANT_F32, 2, 32, 2,
                                        q.data(), s.data()),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_fp8_block_quantize(
                x.data(), FSDPRT_QUANT_F32, 1, 64, 64, 1, q.data(),
                reinterpret_cast<float *>(s.data())),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_swap_first_dims(q.data(), q.data() + 8, 2, 2, 8),
            FSDPRT_ERR_INVALID_ARGUMENT); // overlapping
  EXPECT_NE(std::string(fsdprt_quant_last_error()).find("overlap"),
            std::string::npos);
  const int64_t neg[] = {-1, 4};
  fsdprt_quant_layout layout;
  uint64_t bytes;
  EXPECT_EQ(fsdprt_quant_get_layout(FSDPRT_QUANT_NVFP4, neg, 2, &layout),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_wire_bytes(99, neg, 2, &bytes),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_quant_format_name(99), nullptr);
  EXPECT_STREQ(fsdprt_quant_status_string(FSDPRT_ERR_SHAPE),
               "shape not divisible by the block");
  // Overflowing rows * cols.
  EXPECT_EQ(fsdprt_quant_nvfp4_quantize(x.data(), FSDPRT_QUANT_F32,
                                        size_t(1) << 40, size_t(1) << 40, 1.0f,
                                        q.data(), s.data()),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST(Errors, CudaEntryPointsFailCleanlyWithoutAGpu) {
  if (fsdprt_quant_cuda_available())
    GTEST_SKIP() << "a GPU is present; the gpu-labelled test covers it";
  std::vector<float> x(32, 1.0f);
  float amax = 0;
  const int status =
      fsdprt_quant_cuda_amax(x.data(), FSDPRT_QUANT_F32, 32, &amax, nullptr);
  EXPECT_TRUE(status == FSDPRT_ERR_UNSUPPORTED || status == FSDPRT_ERR_BACKEND)
      << status;
  EXPECT_STRNE(fsdprt_quant_last_error(), "");
}

} // namespace

//===- quant_math.h - scalar pieces of the quantization formats -*- C++ -*-===//
//
// Scalar conversions and scale computations shared by the CPU reference and
// the CUDA kernels, so both follow one definition. Everything is plain IEEE
// fp32 arithmetic (no fused multiply-add, no flush-to-zero) on bit patterns;
// docs/QUANTIZATION.md states the rules.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_QUANT_QUANT_MATH_H
#define FSDPRT_QUANT_QUANT_MATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FSDPRT_QHD __host__ __device__ __forceinline__
#else
#define FSDPRT_QHD inline
#endif

namespace fsdprt {
namespace quant {

constexpr float kFltMax = 3.40282346638528859812e+38f;
constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
constexpr float kE2M1Max = 6.0f;
constexpr int kMxBlock = 32;
constexpr int kNvfp4Block = 16;
constexpr int kFp8Block = 128;

FSDPRT_QHD uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

FSDPRT_QHD float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

FSDPRT_QHD bool isNan(float f) {
  return (floatBits(f) & 0x7FFFFFFFu) > 0x7F800000u;
}

FSDPRT_QHD bool isInf(float f) {
  return (floatBits(f) & 0x7FFFFFFFu) == 0x7F800000u;
}

FSDPRT_QHD float absf(float f) { return bitsFloat(floatBits(f) & 0x7FFFFFFFu); }

// fmaxf semantics: a NaN operand is ignored.
FSDPRT_QHD float maxIgnoringNan(float a, float b) {
  if (isNan(a))
    return b;
  if (isNan(b))
    return a;
  return a > b ? a : b;
}

FSDPRT_QHD float minIgnoringNan(float a, float b) {
  if (isNan(a))
    return b;
  if (isNan(b))
    return a;
  return a < b ? a : b;
}

// ---- bf16 ------------------------------------------------------------------

FSDPRT_QHD float bf16ToFloat(uint16_t b) {
  return bitsFloat(static_cast<uint32_t>(b) << 16);
}

// Round to nearest even; NaN stays NaN (quieted, sign kept).
FSDPRT_QHD uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ---- FP8 (E4M3 / E5M2) ---------------------------------------------------

// Format parameters: kind 0 = E4M3 (bias 7, 3 mantissa bits, max 0x7E),
// kind 1 = E5M2 (bias 15, 2 mantissa bits, max 0x7B).
FSDPRT_QHD int fp8MantBits(int kind) { return kind == 0 ? 3 : 2; }
FSDPRT_QHD int fp8Bias(int kind) { return kind == 0 ? 7 : 15; }
FSDPRT_QHD uint32_t fp8MaxCode(int kind) { return kind == 0 ? 0x7Eu : 0x7Bu; }
FSDPRT_QHD float fp8MaxValue(int kind) {
  return kind == 0 ? kE4M3Max : kE5M2Max;
}

// Saturating round-to-nearest-even fp32 -> fp8 (the behaviour of CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...)): |x| beyond the largest
// finite value (Inf included) becomes +-max, NaN becomes 0x7F, the sign of
// zero and of underflowing values is kept.
FSDPRT_QHD uint8_t floatToFp8(float x, int kind) {
  const uint32_t u = floatBits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u)
    return 0x7Fu;
  if (a > floatBits(fp8MaxValue(kind)))
    return static_cast<uint8_t>(sign | fp8MaxCode(kind));
  if (a < 0x00800000u) // fp32 denormals are far below half the fp8 minimum
    return static_cast<uint8_t>(sign);
  const int mbits = fp8MantBits(kind);
  const int bias = fp8Bias(kind);
  const int exp = static_cast<int>(a >> 23) - 127;
  const int emin = 1 - bias;
  uint32_t v;
  if (exp >= emin) {
    // Round to nearest even on the dropped mantissa bits with one add (a
    // carry into the exponent field is the correct encoding), then rebias.
    const int drop = 23 - mbits;
    const uint32_t rounded = a + ((1u << (drop - 1)) - 1u) + ((a >> drop) & 1u);
    v = (rounded >> drop) - (static_cast<uint32_t>(127 - bias) << mbits);
  } else {
    // Denormal: count units of 2^(emin - mbits) and round that integer.
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 23 - mbits + emin - exp; // >= 24 - mbits
    if (shift > 25)
      return static_cast<uint8_t>(sign); // below a quarter unit
    v = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1u)))
      ++v;
  }
  return static_cast<uint8_t>(sign | v);
}

FSDPRT_QHD float fp8ToFloat(uint8_t b, int kind) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const int mbits = fp8MantBits(kind);
  const int bias = fp8Bias(kind);
  const uint32_t e = (b & 0x7Fu) >> mbits;
  const uint32_t m = b & ((1u << mbits) - 1u);
  if (kind == 0) {
    if (e == 15 && m == 7)
      return bitsFloat(sign | 0x7FC00000u);
  } else if (e == 31) {
    return bitsFloat(sign | (m == 0 ? 0x7F800000u : 0x7FC00000u));
  }
  if (e == 0) {
    // m * 2^(1 - bias - mbits): exact, built from the bits of 2^k.
    const int k = 1 - bias - mbits;
    const float unit = bitsFloat(static_cast<uint32_t>(k + 127) << 23);
    return bitsFloat(sign | floatBits(static_cast<float>(m) * unit));
  }
  return bitsFloat(sign | ((e - static_cast<uint32_t>(bias) + 127u) << 23) |
                   (m << (23 - mbits)));
}

// ---- E2M1 -----------------------------------------------------------------

// RNE onto {0, 0.5, 1, 1.5, 2, 3, 4, 6}; ties go to the even code. Beyond 6
// (Inf included) saturates to 6; NaN gives +6 (CUDA's conversion does the
// same); the sign of zero is kept.
FSDPRT_QHD uint8_t floatToE2m1(float x) {
  if (isNan(x))
    return 0x7u;
  const uint8_t sign = (floatBits(x) >> 28) & 0x8u;
  const float a = absf(x);
  // The code is the number of decision points at or below |x|; '>' at a
  // midpoint whose lower neighbour is even, '>=' where the upper one is.
  const uint8_t code = static_cast<uint8_t>(
      (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
      (a >= 3.5f) + (a > 5.0f));
  return static_cast<uint8_t>(sign | code);
}

// The same conversion in about a dozen instructions (for the kernels; the
// unit tests check it against floatToE2m1): codes 0..4 are the multiples of
// 0.5 up to 2, so below 2 the code is rne(2|x|); in [2, 4) it is
// 2 + rne(|x|); from 4 on 4 + rne(|x| / 2), capped at 7. Round-half-even on
// these integers picks the even code at every tie. fminf(NaN, 8) is 8: NaN
// gives +6, like floatToE2m1.
FSDPRT_QHD uint8_t floatToE2m1Fast(float x) {
  const uint32_t sign = isNan(x) ? 0u : (floatBits(x) >> 28) & 0x8u;
  const float a = minIgnoringNan(absf(x), 8.0f);
  const bool low = a < 2.0f, mid = a < 4.0f;
  const float scaled = low ? a * 2.0f : (mid ? a : a * 0.5f);
  const uint32_t base = low ? 0u : (mid ? 2u : 4u);
#if defined(__CUDA_ARCH__)
  const uint32_t k = __float2uint_rn(scaled);
#else
  const uint32_t k = static_cast<uint32_t>(std::nearbyint(scaled));
#endif
  const uint32_t code = base + k < 7u ? base + k : 7u;
  return static_cast<uint8_t>(sign | code);
}

FSDPRT_QHD float e2m1ToFloat(uint8_t code) {
  // Magnitudes of codes 0..7 in units of 0.5: 0 1 2 3 4 6 8 12.
  const uint32_t c = code & 0x7u;
  const uint32_t halves = c < 5 ? c : (c == 5 ? 6u : (c == 6 ? 8u : 12u));
  const float mag = static_cast<float>(halves) * 0.5f;
  return bitsFloat(floatBits(mag) | (static_cast<uint32_t>(code & 0x8u) << 28));
}

// ---- E8M0 -----------------------------------------------------------------

// Biased exponent of v rounded up (TransformerEngine's float_to_e8m0 rule).
FSDPRT_QHD uint8_t floatToE8m0(float v) {
  if (isNan(v))
    return 0xFFu;
  if (isInf(v))
    return 0xFEu;
  if (v == 0.0f)
    return 0x00u;
  const uint32_t u = floatBits(v);
  uint32_t exponent = (u >> 23) & 0xFFu;
  const uint32_t mantissa = u & 0x7FFFFFu;
  if ((mantissa > 0 && exponent != 0xFEu) &&
      !(exponent == 0 && mantissa <= 0x400000u))
    ++exponent;
  return static_cast<uint8_t>(exponent);
}

// 2^(127 - e): the multiplier that maps a block into the E4M3 range.
// e = 254 and e = 255 give the fp32 denormals 2^-127 and 2^-128.
FSDPRT_QHD float e8m0QuantScale(uint8_t e) {
  const int field = 254 - static_cast<int>(e);
  if (field >= 1)
    return bitsFloat(static_cast<uint32_t>(field) << 23);
  return bitsFloat(0x00400000u >> -field);
}

// 2^(e - 127); 0xFF is NaN (the OCP MX "no scale" code).
FSDPRT_QHD float e8m0DequantScale(uint8_t e) {
  if (e == 0xFFu)
    return bitsFloat(0x7FC00000u);
  if (e == 0)
    return bitsFloat(0x00400000u);
  return bitsFloat(static_cast<uint32_t>(e) << 23);
}

// ---- scales ---------------------------------------------------------------

// fp8_max / amax; amax 0, negative, Inf or NaN -> 1; an infinite quotient
// -> valueForInf (FLT_MAX for per-tensor scaling; the input type's largest
// finite value for blockwise scaling, as TransformerEngine's
// compute_scale_from_types).
FSDPRT_QHD float scaleFromAmax(float amax, float fp8Max,
                               float valueForInf = kFltMax) {
  if (!(amax > 0.0f) || isInf(amax))
    return 1.0f;
  float scale = fp8Max / amax;
  if (isInf(scale))
    scale = valueForInf;
  return scale;
}

FSDPRT_QHD float pow2Floor(float scale) {
  return bitsFloat(floatBits(scale) & 0xFF800000u);
}

// Largest finite bf16 (0x7F7F), 2^127 * (2 - 2^-7).
constexpr float kBf16Max = 3.38953138925153547590e+38f;

// Blockwise FP8 (E4M3) scale of a block of an input whose largest finite
// value is inputMax (FLT_MAX for fp32 input, kBf16Max for bf16).
FSDPRT_QHD float blockScaleFromAmax(float amax, bool pow2, float inputMax) {
  const float scale = scaleFromAmax(amax, kE4M3Max, inputMax);
  return pow2 ? pow2Floor(scale) : scale;
}

// ---- NVFP4 (TransformerEngine's operation order, SEMANTICS.md §8) -------

// S_enc = 448 * 6 / amax, clamped with fminf to FLT_MAX; 1 for amax 0 (or
// negative) and for amax Inf (S_enc 0).
FSDPRT_QHD float nvfp4GlobalScale(float amax) {
  if (amax < 0.0f)
    amax = 0.0f;
  float s = (kE4M3Max * kE2M1Max) / amax;
  s = minIgnoringNan(s, kFltMax);
  if (amax == 0.0f || s == 0.0f)
    return 1.0f;
  return s;
}

// fl(1/6), the constant TE multiplies S_enc by.
constexpr float kInvE2M1Max = 1.0f / 6.0f;
// fl(1/2688), TE's dequantization factor 1 / (6 * 448).
constexpr float kInvNvfp4Range = 1.0f / (6.0f * 448.0f);

// S_dec = 1 / S_enc (correctly rounded; a denormal for S_enc near FLT_MAX).
FSDPRT_QHD float nvfp4GlobalDecodeScale(float sEnc) { return 1.0f / sEnc; }

// Per-block decode scale s_b = e4m3_rne(block_amax * (S_enc * fl(1/6))).
FSDPRT_QHD uint8_t nvfp4BlockScale(float blockAmax, float sEnc) {
  return floatToFp8(blockAmax * (sEnc * kInvE2M1Max), 0);
}

// Encode multiplier fminf(1 / (float(s_b) * S_dec), FLT_MAX).
FSDPRT_QHD float nvfp4EncodeMultiplier(uint8_t sb, float sDec) {
  return minIgnoringNan(1.0f / (fp8ToFloat(sb, 0) * sDec), kFltMax);
}

// Dequantization (TE's dequantize_nvfp4.cuh): one factor per block,
// (float(s_b) * amax) * fl(1/2688), from the global amax (not S_enc); then
// x' = e2m1_value(q) * factor. A negative amax counts as 0.
FSDPRT_QHD float nvfp4DecodeFactor(uint8_t sb, float globalAmax) {
  if (globalAmax < 0.0f)
    globalAmax = 0.0f;
  return (fp8ToFloat(sb, 0) * globalAmax) * kInvNvfp4Range;
}

FSDPRT_QHD float nvfp4Decode(uint8_t code, float factor) {
  return e2m1ToFloat(code) * factor;
}

// ---- index arithmetic
// ---------------------------------------------------------

// Unsigned 32-bit division by a fixed divisor as a multiply-high and shifts
// (Granlund-Montgomery), for kernel index math; d >= 1.
struct FastDiv {
  uint32_t d = 1, mul = 0, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    if (d > 1) {
      uint32_t l = 0;
      while (l < 32 && (uint64_t{1} << l) < d)
        ++l; // l = ceil(log2 d)
      shift = l;
      mul = static_cast<uint32_t>(
          ((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1);
    }
  }
  FSDPRT_QHD uint32_t div(uint32_t n) const {
    if (d == 1)
      return n;
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, mul);
#else
    const uint32_t t =
        static_cast<uint32_t>((static_cast<uint64_t>(n) * mul) >> 32);
#endif
    return (t + ((n - t) >> 1)) >> (shift - 1);
  }
  FSDPRT_QHD uint32_t mod(uint32_t n) const { return n - div(n) * d; }
};

} // namespace quant
} // namespace fsdprt

#endif // FSDPRT_QUANT_QUANT_MATH_H

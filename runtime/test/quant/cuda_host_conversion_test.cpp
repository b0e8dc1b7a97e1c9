// Cross-checks the scalar conversions against CUDA's own host-side
// implementations in cuda_fp8.h / cuda_fp4.h (the software path of the
// conversions the kernels run in hardware). Needs only the toolkit headers.

#include "fsdprt_quant.h"

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Bit patterns covering every sign / exponent / top-of-mantissa prefix with
// low bits chosen to hit exact ties, just-above-tie and sticky cases, plus
// random patterns.
std::vector<uint32_t> patterns() {
  std::vector<uint32_t> out;
  const uint32_t lows[] = {0x000, 0x001, 0x7FF, 0x800, 0x801, 0xFFF};
  for (uint32_t hi = 0; hi < (1u << 20); ++hi)
    for (uint32_t lo : lows)
      out.push_back((hi << 12) | lo);
  std::mt19937 rng(23);
  for (int i = 0; i < 2000000; ++i)
    out.push_back(rng());
  return out;
}

TEST(CudaHostConversions, Fp8MatchesCuda) {
  for (uint32_t bits : patterns()) {
    const float x = bitsToFloat(bits);
    const uint8_t e4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const uint8_t e5 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    ASSERT_EQ(fsdprt_quant_float_to_fp8(x, FSDPRT_QUANT_E4M3), e4)
        << std::hex << "bits 0x" << bits;
    ASSERT_EQ(fsdprt_quant_float_to_fp8(x, FSDPRT_QUANT_E5M2), e5)
        << std::hex << "bits 0x" << bits;
  }
}

TEST(CudaHostConversions, E2m1MatchesCuda) {
  for (uint32_t bits : patterns()) {
    const float x = bitsToFloat(bits);
    const uint8_t c = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    ASSERT_EQ(fsdprt_quant_float_to_e2m1(x), c & 0xF)
        << std::hex << "bits 0x" << bits;
  }
}

// TE's float_to_e8m0 is the software form of cvt.rp.satfinite.ue8m0x2.f32;
// they agree on non-negative, non-NaN inputs.
TEST(CudaHostConversions, E8m0MatchesCudaRoundUp) {
  for (uint32_t bits : patterns()) {
    bits &= 0x7FFFFFFFu;
    const float x = bitsToFloat(bits);
    if (std::isnan(x) || x == 0.0f)
      continue;
    const uint8_t e =
        __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    ASSERT_EQ(fsdprt_quant_float_to_e8m0(x), e)
        << std::hex << "bits 0x" << bits;
  }
}

TEST(CudaHostConversions, Fp8DecodeMatchesCuda) {
  for (int c = 0; c < 256; ++c) {
    for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2}) {
      const __half_raw h = __nv_cvt_fp8_to_halfraw(
          static_cast<__nv_fp8_storage_t>(c),
          kind == FSDPRT_QUANT_E4M3 ? __NV_E4M3 : __NV_E5M2);
      __half hv(h);
      const float ref = __half2float(hv);
      const float got =
          fsdprt_quant_fp8_to_float(static_cast<uint8_t>(c), kind);
      if (std::isnan(ref)) {
        ASSERT_TRUE(std::isnan(got)) << c;
      } else {
        ASSERT_EQ(got, ref) << "kind " << kind << " code " << c;
        ASSERT_EQ(std::signbit(got), std::signbit(ref)) << c;
      }
    }
  }
}

} // namespace

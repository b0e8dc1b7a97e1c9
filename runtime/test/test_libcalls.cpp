// The compiler library calls libfsdprt defines for compiled steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__aarch64__)
extern "C" float __truncsfbf2(float);

namespace {

uint16_t truncBits(uint32_t in) {
  float x, r;
  std::memcpy(&x, &in, sizeof x);
  r = __truncsfbf2(x);
  uint32_t out;
  std::memcpy(&out, &r, sizeof out);
  return uint16_t(out & 0xffffu);
}

TEST(Libcalls, TruncSfBf2RoundsToNearestEven) {
  EXPECT_EQ(truncBits(0x3f800000u), 0x3f80u); // 1.0 exactly
  EXPECT_EQ(truncBits(0x3f807fffu), 0x3f80u); // below the tie
  EXPECT_EQ(truncBits(0x3f808000u), 0x3f80u); // tie, even stays
  EXPECT_EQ(truncBits(0x3f818000u), 0x3f82u); // tie, odd goes up
  EXPECT_EQ(truncBits(0x3f808001u), 0x3f81u); // above the tie
  EXPECT_EQ(truncBits(0xbf808001u), 0xbf81u); // the sign is kept
  EXPECT_EQ(truncBits(0x80000000u), 0x8000u); // -0
  EXPECT_EQ(truncBits(0x00018000u), 0x0002u); // subnormal, tie to even
  EXPECT_EQ(truncBits(0x7f800000u), 0x7f80u); // inf
  EXPECT_EQ(truncBits(0x7f7fffffu), 0x7f80u); // FLT_MAX rounds to inf
}

TEST(Libcalls, TruncSfBf2NaNIsCanonical) {
  EXPECT_EQ(truncBits(0x7fc00000u), 0x7fc0u);
  EXPECT_EQ(truncBits(0xffffffffu), 0x7fc0u);
  EXPECT_EQ(truncBits(0x7f800001u), 0x7fc0u); // signalling, low payload
}

} // namespace
#endif

//===- libcalls.cpp - compiler library calls a step may need --------------===//
//
// LLVM lowers a bf16 value that lives in a register, on a CPU without
// AVX512-BF16, through f32 and back with a call of `__truncsfbf2`
// (compiler-rt's name). GCC's libgcc before GCC 13 has no such function, so
// a step compiled for a generic x86-64 (fsdp-compile's default) would not
// link, and a JIT on such a CPU would not resolve it. Compiled steps link
// this library, so it defines it, rounding as the step's own conversions do
// (arith-expand's expansion of `arith.truncf`: to nearest even, every NaN
// to 0x7fc0).
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__aarch64__)
// The result is a bf16 in the low 16 bits of the first floating-point
// return register (xmm0 / v0), where a float's bits are returned too.
extern "C" __attribute__((visibility("default"))) float __truncsfbf2(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  uint32_t half;
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    half = 0x7fc0u;
  else
    half = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  float out;
  std::memcpy(&out, &half, sizeof out);
  return out;
}
#endif

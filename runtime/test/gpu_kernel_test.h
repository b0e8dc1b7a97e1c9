// What the tests of the runtime's own kernels (test_gpu_attention.cpp,
// test_gpu_scatter.cpp) share: built against the host emulation of CUDA
// (FSDPRT_CUDA_EMULATION_STREAMS, where a device is always present) or
// against the real runtime (where every test skips without a GPU), a GPU
// context on device 0 per test, and bf16 conversions.
#ifndef FSDPRT_TEST_GPU_KERNEL_TEST_H
#define FSDPRT_TEST_GPU_KERNEL_TEST_H

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
#include "cuda_runtime.h" // the emulation (include order set by CMake)
#endif
#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace gpu_kernel_test {

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
inline void configure_devices() { cuda_emulation::configure({}); }
inline bool have_gpu() { return true; }
#else
inline void configure_devices() {}
inline bool have_gpu() {
  int32_t n = 0;
  return fsdprt_gpu_device_count(&n) == FSDPRT_OK && n > 0;
}
#endif

// Round to nearest even, as arith.truncf (NaN stays NaN).
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A GPU context on device 0, current on this thread for the test.
struct Context {
  fsdprt_gpu_context_t *ctx = nullptr;
  Context() {
    configure_devices();
    EXPECT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  }
  ~Context() {
    if (ctx)
      fsdprt_gpu_context_destroy(ctx);
  }
};

} // namespace gpu_kernel_test

// Skips the test without a GPU, with the runtime's reason.
#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!gpu_kernel_test::have_gpu())                                          \
      GTEST_SKIP() << "no GPU: " << fsdprt_gpu_last_error_message();           \
  } while (0)

#endif // FSDPRT_TEST_GPU_KERNEL_TEST_H

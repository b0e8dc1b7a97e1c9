//===- BlasTest.cpp - the OpenBLAS kernels the runner loads ---------------===//

#include "Blas.h"

#include <gtest/gtest.h>

using fsdp::run::blas::betterCore;

namespace {

TEST(Blas, KeepsAVectorCore) {
  for (const char *core : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    EXPECT_EQ(betterCore(core, /*avx2Fma=*/true, /*avx512=*/true), nullptr)
        << core;
  for (const char *core : {"Haswell", "Zen", "Excavator", "SkylakeX"})
    EXPECT_EQ(betterCore(core, /*avx2Fma=*/true, /*avx512=*/false), nullptr)
        << core;
}

TEST(Blas, ReplacesAnSseFallback) {
  // What an OpenBLAS older than the CPU picks (0.3.21 on Emerald Rapids).
  EXPECT_STREQ(betterCore("Prescott", true, true), "SkylakeX");
  EXPECT_STREQ(betterCore("Prescott", true, false), "Haswell");
  EXPECT_STREQ(betterCore("Nehalem", true, false), "Haswell");
  EXPECT_STREQ(betterCore("Sandybridge", true, true), "SkylakeX");
}

TEST(Blas, ReplacesAvx2KernelsOnAnAvx512Cpu) {
  // An OpenBLAS that knows Zen but not its AVX-512 units.
  EXPECT_STREQ(betterCore("Haswell", true, true), "SkylakeX");
  EXPECT_STREQ(betterCore("Zen", true, true), "SkylakeX");
}

TEST(Blas, LeavesACpuWithoutAvx2) {
  EXPECT_EQ(betterCore("Prescott", false, false), nullptr);
  EXPECT_EQ(betterCore("Sandybridge", false, false), nullptr);
}

#if defined(__x86_64__)
// The library the runner opened uses this CPU's vector units.
TEST(Blas, OpensKernelsForThisCpu) {
  const fsdp::run::blas::Library *lib = fsdp::run::blas::library();
  if (!lib)
    GTEST_SKIP() << "built without OpenBLAS";
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (!avx2 || std::getenv("OPENBLAS_CORETYPE"))
    GTEST_SKIP() << "no AVX2, or OPENBLAS_CORETYPE set";
  EXPECT_EQ(betterCore(lib->core, true, avx512), nullptr)
      << "OpenBLAS runs its " << lib->core << " kernels on this CPU"
      << (avx512 ? " (AVX-512)" : " (AVX2)");
}
#endif

} // namespace

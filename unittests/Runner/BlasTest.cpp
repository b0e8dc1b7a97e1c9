//===- BlasTest.cpp - the BLAS and the kernels the runner loads -----------===//

#include "Blas.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <vector>

using fsdp::run::blas::betterCore;
using fsdp::run::blas::mklBranchName;
using fsdp::run::blas::wantMkl;

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

TEST(Blas, MklOnIntelUnlessChosenOtherwise) {
  EXPECT_TRUE(wantMkl(nullptr, /*intel=*/true));
  EXPECT_FALSE(wantMkl(nullptr, /*intel=*/false));
  EXPECT_TRUE(wantMkl("mkl", false));
  EXPECT_FALSE(wantMkl("openblas", true));
  EXPECT_TRUE(wantMkl("", true));
}

TEST(Blas, NamesMklBranches) {
  EXPECT_STREQ(mklBranchName(10), "AVX2");
  EXPECT_STREQ(mklBranchName(12), "AVX512");
  EXPECT_STREQ(mklBranchName(14), "AVX512_E1");
  EXPECT_STREQ(mklBranchName(99), "");
}

// With MKL the runner sets strict conditional numerical reproducibility:
// a product's bits do not depend on where its operands start, which the
// arena / malloc and recompute comparisons rely on.
TEST(Blas, MklProductsDoNotDependOnAlignment) {
  const fsdp::run::blas::Library *lib = fsdp::run::blas::library();
  if (!lib || lib->name != "MKL")
    GTEST_SKIP() << "the runner's BLAS is not MKL";
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float *,
                         int, const float *, int, float, float *, int);
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib->handle, "cblas_sgemm"));
  ASSERT_NE(sgemm, nullptr);
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  // Shapes whose rows are not a multiple of the vector length, and one that
  // fills MKL's blocking.
  const int shapes[][3] = {{37, 53, 301}, {128, 96, 257}, {515, 260, 129}};
  for (const auto &shape : shapes) {
    const int m = shape[0], n = shape[1], k = shape[2];
    std::vector<float> a(size_t(m) * k), b(size_t(k) * n);
    unsigned state = 7;
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return float(state >> 8) / float(1u << 24) - 0.5f;
    };
    for (float &x : a)
      x = next();
    for (float &x : b)
      x = next();
    for (int transA = 0; transA < 2; ++transA) {
      std::vector<float> first;
      for (int offset = 0; offset < 16; offset += 3) {
        // Each operand at another offset from a 64-byte boundary.
        std::vector<float> abuf(a.size() + 32), bbuf(b.size() + 32),
            cbuf(size_t(m) * n + 32);
        float *pa = abuf.data() + offset, *pb = bbuf.data() + (offset * 5) % 16,
              *pc = cbuf.data() + (offset * 7) % 16;
        std::memcpy(pa, a.data(), a.size() * sizeof(float));
        std::memcpy(pb, b.data(), b.size() * sizeof(float));
        // transA reads `a` as the k x m matrix it also is.
        sgemm(kRowMajor, transA ? kTrans : kNoTrans, kNoTrans, m, n, k, 1.0f,
              pa, transA ? m : k, pb, n, 0.0f, pc, n);
        if (first.empty()) {
          first.assign(pc, pc + size_t(m) * n);
          continue;
        }
        EXPECT_EQ(std::memcmp(first.data(), pc, first.size() * sizeof(float)),
                  0)
            << m << "x" << n << "x" << k << (transA ? " (A transposed)" : "")
            << ", offset " << offset;
      }
    }
  }
}

#if defined(__x86_64__)
// The library the runner opened uses this CPU's vector units.
TEST(Blas, OpensKernelsForThisCpu) {
  const fsdp::run::blas::Library *lib = fsdp::run::blas::openblas();
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

//===- HostCpuTest.cpp - the runner's CPU features against LLVM's ---------===//
//
// The runner checks a step library's CPU features without LLVM
// (HostCpu.h); fsdp-compile records them with LLVM. Both must agree on this
// host for every feature LLVM reports (x86-64: CPUID; AArch64 Linux: the
// kernel's HWCAP bits against LLVM's reading of /proc/cpuinfo).
//
//===----------------------------------------------------------------------===//

#include "HostCpu.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

namespace {

TEST(HostCpuTest, AgreesWithLLVM) {
  std::map<std::string, bool> ours = fsdp::run::hostCpuFeatures();
  llvm::StringMap<bool> llvmFeatures = llvm::sys::getHostCPUFeatures();
#if defined(__x86_64__) || (defined(__aarch64__) && defined(__linux__))
  ASSERT_FALSE(ours.empty());
#endif
  for (const auto &kv : llvmFeatures) {
    std::string name = kv.first().str();
    auto it = ours.find(name);
    if (it == ours.end()) {
      // A feature this runner does not know is missing to it: refusing a
      // library is safe, running one the host cannot is not.
      EXPECT_FALSE(kv.second) << name << " is on this host but unknown here";
      continue;
    }
    EXPECT_EQ(it->second, kv.second) << name;
  }
}

} // namespace

//===- HostCpu.h - the ISA features of the host CPU --------------*- C++
//-*-===//
//
// A step library records the CPU features its code may use, under LLVM's
// names (fsdp-compile asks LLVM for them). The runner, which links no LLVM,
// checks them against this host, following the rules of
// llvm::sys::getHostCPUFeatures (a unit test compares the two where LLVM is
// present): on x86-64 with CPUID and XGETBV, on AArch64 Linux with the
// kernel's HWCAP bits (getauxval), the names LLVM gives /proc/cpuinfo's.
// Elsewhere the list is empty: a library built with features is refused.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_HOSTCPU_H
#define FSDP_RUNNER_HOSTCPU_H

#include <map>
#include <string>

namespace fsdp::run {

/// Every feature name known here, and whether this host has it.
std::map<std::string, bool> hostCpuFeatures();

/// The CPU whose code runs on every host of this architecture
/// (fsdp-compile's default --mcpu): "x86-64", or "generic" on AArch64.
inline const char *portableCpu() {
#if defined(__aarch64__)
  return "generic";
#else
  return "x86-64";
#endif
}

} // namespace fsdp::run

#endif

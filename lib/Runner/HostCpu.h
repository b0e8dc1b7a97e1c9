//===- HostCpu.h - the ISA features of the host CPU --------------*- C++
//-*-===//
//
// A step library records the CPU features its code may use, under LLVM's
// names (fsdp-compile asks LLVM for them). The runner, which links no LLVM,
// checks them against this host with CPUID and XGETBV, following the rules of
// llvm::sys::getHostCPUFeatures (a unit test compares the two where LLVM is
// present). x86-64 only: elsewhere the list is empty.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_HOSTCPU_H
#define FSDP_RUNNER_HOSTCPU_H

#include <map>
#include <string>

namespace fsdp::run {

/// Every feature name known here, and whether this host has it.
std::map<std::string, bool> hostCpuFeatures();

} // namespace fsdp::run

#endif

//===- JitSeam.h - where a step's code comes from: the one seam --*- C++
//-*-===//
//
// The runner links no compiler. A step's code is either a step library
// built ahead of time by fsdp-compile (StepLibrary.h, loaded with dlopen and
// no LLVM present), or a lowered module compiled by the JIT library
// (libfsdpjit: Jit.h, the only library that links MLIR and LLVM), which the
// runner loads with dlopen the first time it opens a lowered module. This
// header is all the two libraries share: one C entry point taking one call
// record of plain C++ values, and StepCode, the object it hands back.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_JITSEAM_H
#define FSDP_RUNNER_JITSEAM_H

#include "StepCode.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace fsdp::run {

inline constexpr char kJitLibrary[] = "libfsdpjit.so";
inline constexpr char kJitOpenSymbol[] = "fsdp_jit_open";
/// Changes whenever JitOpenCall or StepCode does: a JIT library of another
/// build is refused instead of misread.
inline constexpr int kJitSeamVersion = 1;

/// What the compiled code needs from the runner: the allocator that counts
/// the step's allocations per rank (Memory.h), and the BLAS library
/// compute=fast steps call (Blas.h; null without one).
struct JitHost {
  void *(*malloc)(size_t) = nullptr;
  void (*free)(void *) = nullptr;
  void *blasHandle = nullptr;
};

/// One call of fsdp_jit_open: the lowered module `bytes` (`name` for
/// messages) to run `entry` (empty: its only entry) with the JIT cache in
/// `cacheDir` (empty: none). On success, `code` (not compiled yet: its
/// compile() does that) and the step's `manifest` (Manifest.h); otherwise
/// `error`.
struct JitOpenCall {
  int version = kJitSeamVersion;
  size_t size = sizeof(JitOpenCall);
  std::string_view bytes;
  std::string name, entry, cacheDir;
  JitHost host;
  std::unique_ptr<StepCode> code;
  std::string manifest;
  std::string error;
};

/// fsdp_jit_open: 0 on success.
using JitOpenFunction = int (*)(JitOpenCall *);

/// The runner's side (JitLoader.cpp): opens `bytes` with the JIT library,
/// loaded once from $FSDP_JIT_LIBRARY when set, else libfsdpjit.so beside
/// the runner (or in ../lib from it), else the build's. An error says when
/// there is none: such a runner runs step libraries only.
struct JitOpened {
  std::unique_ptr<StepCode> code;
  std::string manifest;
};
Expected<JitOpened> openWithJit(std::string_view bytes, const std::string &name,
                                const std::string &entry,
                                const std::string &cacheDir);

} // namespace fsdp::run

#endif

//===- StepCode.h - the compiled code of a lowered step ---------*- C++ -*-===//
//
// The runner calls a step through its packed C interface wrapper
// `_mlir__mlir_ciface_<entry>(void **args)` (the manifest's `symbol`):
// args[0] points at the pointer to the results' descriptors (consecutive,
// 3 + 2 x rank words each), args[1 + i] at the descriptor of argument i.
// Where that code comes from is this interface: the JIT (Jit.h, in its own
// library, reached through JitSeam.h) compiles the lowered module
// in-process; an ahead-of-time build of the same module is a shared library
// holding the same wrappers, loaded without LLVM (StepLibrary.h). Either
// comes with its manifest (Manifest.h).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_STEPCODE_H
#define FSDP_RUNNER_STEPCODE_H

#include "fsdp/Runner/Support.h"

#include <string>
#include <utility>
#include <vector>

namespace fsdp::run {

class StepCode {
public:
  virtual ~StepCode() = default;
  /// Calls the packed wrapper `symbol` (`_mlir__mlir_ciface_<entry>`).
  virtual Error invokePacked(std::string_view symbol, Span<void *> args) = 0;
  /// Compiles the code when that was left for later (the JIT, once the
  /// runner has checked the manifest); loaded code has nothing to do.
  virtual Error compile() { return Error::success(); }

  /// Seconds spent parsing and compiling (or loading).
  double parseSeconds = 0, compileSeconds = 0;
  /// compileSeconds by phase, in order (empty when loaded).
  std::vector<std::pair<std::string, double>> compilePhases;
  /// Loaded from a cache or a prebuilt library rather than compiled now.
  bool cacheHit = false;
  /// Loaded from a library built by fsdp-compile (StepLibrary.h).
  bool precompiled = false;
};

/// Process-wide setup of the runner, once: the allocator and the BLAS
/// threading the compiled steps want.
void initializeProcess();

} // namespace fsdp::run

#endif

//===- StepCompiler.h - a lowered step compiled ahead of time ----*- C++
//-*-===//
//
// `fsdp-compile` turns a lowered step into a shared library: the same two
// objects the JIT links (Jit.h: kernels at -O2, glue at -O0), for a chosen
// CPU, and a third object holding the step's manifest (Manifest.h: entries,
// ports with dtypes, shapes, layouts and every rank's owned ranges, memory
// plans, meshes, target CPU and features, runtime ABI version) in the
// section `.fsdp.manifest`, the ABI version and the allocator hooks.
// StepLibrary.h loads it. Part of the JIT library.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_STEPCOMPILER_H
#define FSDP_RUNNER_STEPCOMPILER_H

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <string>
#include <utility>
#include <vector>

namespace fsdp::run {

/// How fsdp-compile builds a step library.
struct CompileOptions {
  /// LLVM CPU name; "native": this host's CPU and features.
  std::string cpu = "x86-64";
  /// Extra subtarget features ("+avx2,+fma").
  std::string features;
  /// libfsdprt.so to link against (empty: the one this build made).
  std::string runtimeLibrary;
  /// More libraries (paths or -l names), e.g. the CUDA runtime of a GPU step.
  std::vector<std::string> libraries;
  /// The compiler driver that links (empty: $CC, else cc).
  std::string linker;
  /// Leave symbols that no linked library defines for the loader.
  bool allowUndefined = false;
};

/// What compileStepLibrary did.
struct CompileReport {
  double parseSeconds = 0, compileSeconds = 0, linkSeconds = 0;
  std::vector<std::pair<std::string, double>> phases;
  std::vector<std::string> entries;
  std::string cpu;
  std::vector<std::string> features;
  std::vector<std::string> needed; // the libraries linked
};

/// Compiles the lowered module `bytes` (`name` for messages) into the step
/// library `output`.
llvm::Expected<CompileReport> compileStepLibrary(llvm::MemoryBufferRef bytes,
                                                 const std::string &name,
                                                 const std::string &output,
                                                 const CompileOptions &options,
                                                 mlir::MLIRContext &context);

} // namespace fsdp::run

#endif

//===- Jit.h - compile a lowered module, or load it from the cache -*- C++
//-*-===//
//
// The JIT implementation of StepCode. A module is translated to LLVM IR and
// compiled into two objects: the kernels (`fsdp.kernel` functions)
// optimized at -O2 for the host CPU, and the rest (the step, its segments
// and the entry wrappers: calls and argument shuffling) at -O0, whose code
// generation is linear in the size of the step (JitRewrites.h). Both
// objects are kept in a cache directory, keyed by a hash of the input, the
// host CPU and the LLVM version, together with a small "stub" module that
// holds only what the runner reads (signatures, meshes, entry
// declarations). A second run of the same input loads both and skips
// parsing the full module, the translation to LLVM IR, optimization and
// code generation.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_JIT_H
#define FSDP_RUNNER_JIT_H

#include "StepCode.h"
#include "fsdp/Runner/Runner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace fsdp::run {

class Jit : public StepCode {
public:
  ~Jit() override;
  llvm::Error invokePacked(llvm::StringRef name,
                           llvm::MutableArrayRef<void *> args) override;

  /// The code and the module the runner reads its program from (the stub
  /// on a cache hit).
  struct Opened {
    std::unique_ptr<Jit> jit;
    mlir::OwningOpRef<mlir::ModuleOp> module;
  };
  /// Opens a lowered module (`name` for messages): from the cache in
  /// `cacheDir` when it holds these bytes (empty dir: no cache), else by
  /// parsing them.
  static llvm::Expected<Opened> open(std::unique_ptr<llvm::MemoryBuffer> bytes,
                                     const std::string &name,
                                     const std::string &cacheDir,
                                     mlir::MLIRContext &context);

  /// Compiles `module` (stripped of fsdp attributes) unless the code came
  /// from the cache, and fills the cache.
  llvm::Error compile(mlir::ModuleOp module);

private:
  Jit();
  bool openFromCache(mlir::MLIRContext &context,
                     mlir::OwningOpRef<mlir::ModuleOp> &module);
  llvm::Error
  link(mlir::ModuleOp module,
       llvm::MutableArrayRef<std::unique_ptr<llvm::MemoryBuffer>> objects,
       std::chrono::steady_clock::time_point start,
       const std::function<void(const char *)> &phase);
  void writeCache(llvm::StringRef kernels, llvm::StringRef glue);

  std::unique_ptr<llvm::orc::LLJIT> lljit;
  mlir::OwningOpRef<mlir::ModuleOp> stub;
  std::string cacheDir, cacheBase;
  /// The `fsdp.kernel` functions, recorded when the module is parsed (the
  /// runner strips fsdp attributes before compile()).
  llvm::StringSet<> kernelNames;
};

} // namespace fsdp::run

#endif

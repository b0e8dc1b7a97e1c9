//===- Jit.h - compile a lowered module, or load it from the cache -*- C++
//-*-===//
//
// The JIT of fsdp-run. A module is translated to LLVM IR and compiled into
// two objects: the kernels (`fsdp.kernel` functions) optimized at -O2 for
// the host CPU, and the rest (the step, its segments and the entry
// wrappers: calls and argument shuffling) at -O0, whose code generation is
// linear in the size of the step. Both objects are kept in a cache
// directory, keyed by a hash of the input file, the host CPU and the LLVM
// version, together with a small "stub" module that holds only what the
// runner reads (signatures, meshes, entry declarations). A second run of
// the same file loads both and skips parsing the full module, the
// translation to LLVM IR, optimization and code generation.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_JIT_H
#define FSDP_RUN_JIT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace fsdp::run {

/// Compiled code of one module, compiled now or loaded from the cache.
class Jit {
public:
  ~Jit();
  /// Calls the packed wrapper `_mlir_<name>(void **args)` of `name` (the
  /// convention of ExecutionEngine::invokePacked).
  llvm::Error invokePacked(llvm::StringRef name,
                           llvm::MutableArrayRef<void *> args);

  /// Opens `inputFile`: from the cache in `cacheDir` when it holds this
  /// file (empty dir: no cache), else by parsing it. `module` receives the
  /// module the runner reads its program from (the stub on a hit). Fails
  /// the run on errors.
  static std::unique_ptr<Jit> open(const std::string &inputFile,
                                   const std::string &cacheDir,
                                   mlir::MLIRContext &context,
                                   mlir::OwningOpRef<mlir::ModuleOp> &module);

  /// Compiles `module` (stripped of fsdp attributes) unless the code came
  /// from the cache, and fills the cache.
  void compile(mlir::ModuleOp module);

  /// Seconds spent parsing and compiling (or loading from the cache).
  double parseSeconds = 0, compileSeconds = 0;
  /// compileSeconds by phase, in order (empty on a cache hit).
  std::vector<std::pair<std::string, double>> compilePhases;
  bool cacheHit = false;

private:
  Jit();
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  mlir::OwningOpRef<mlir::ModuleOp> stub;
  std::string cacheDir, cacheBase;
  /// The `fsdp.kernel` functions, recorded when the module is parsed (the
  /// runner strips fsdp attributes before compile()).
  llvm::StringSet<> kernelNames;
};

/// The default cache directory: $FSDP_JIT_CACHE_DIR, else
/// $XDG_CACHE_HOME/fsdp-run, else ~/.cache/fsdp-run.
std::string defaultCacheDir();

} // namespace fsdp::run

#endif

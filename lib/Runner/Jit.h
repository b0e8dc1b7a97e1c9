//===- Jit.h - compile a lowered module, or load it from the cache -*- C++
//-*-===//
//
// The JIT implementation of StepCode, in the JIT library (libfsdpjit, the
// only one that links MLIR and LLVM; JitSeam.h is how the runner reaches it). A
// module is translated to LLVM IR and compiled into two objects: the kernels
// (`fsdp.kernel` functions) optimized at -O2 for the host CPU, and the rest
// (the step, its segments and the entry wrappers: calls and argument shuffling)
// at -O0, whose code generation is linear in the size of the step
// (JitRewrites.h). Before compiling, it writes the step's manifest
// (ManifestWriter.h), the whole of what the runner learns about the code. Both
// objects are kept in a cache directory, keyed by a hash of the input, the
// entry, the host CPU and the LLVM version, together with the manifest. A
// second run of the same input loads them and skips parsing the module, the
// translation to LLVM IR, optimization and code generation.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_JIT_H
#define FSDP_RUNNER_JIT_H

#include "JitSeam.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class Module;
namespace orc {
class LLJIT;
} // namespace orc
} // namespace llvm

namespace fsdp::run {

/// Process-wide setup, once: the native target for code generation.
void initializeJit();

/// The dialects and translations a lowered module needs.
mlir::DialectRegistry runnerRegistry();

/// The CPU that code is generated for.
struct CodeTarget {
  /// An LLVM CPU name ("x86-64", "skylake-avx512"); empty: the host's CPU
  /// with the host's features.
  std::string cpu;
  /// Subtarget features ("+avx2,+fma"), for a named CPU.
  std::string features;
  /// Code for a shared library (the JIT links at fixed addresses).
  bool positionIndependent = false;
  static CodeTarget host() { return {}; }
  bool isHost() const { return cpu.empty(); }
};

/// The compiled code of a lowered module: the kernels optimized at -O2,
/// the glue at -O0, and the seconds of each phase.
struct StepObjects {
  std::unique_ptr<llvm::MemoryBuffer> kernels, glue;
  std::vector<std::pair<std::string, double>> phases;
};

/// Translates `module` (stripped of fsdp attributes) to LLVM IR, applies
/// `rewrite` (may be empty) to the whole module, and compiles it for
/// `target` into the two objects the JIT links and fsdp-compile puts into a
/// shared library.
llvm::Expected<StepObjects>
compileStep(mlir::ModuleOp module, const llvm::StringSet<> &kernelNames,
            const CodeTarget &target,
            const std::function<void(llvm::Module &)> &rewrite);

/// The names of the functions of `module` marked `fsdp.kernel` (read before
/// the runner strips fsdp attributes).
llvm::StringSet<> kernelNamesOf(mlir::ModuleOp module);

/// Parses a lowered module (`name` for messages), refusing first the inputs
/// that crash upstream parsers (InputGuard.h).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
parseLoweredModule(llvm::MemoryBufferRef bytes, const std::string &name,
                   mlir::MLIRContext &context);

class Jit : public StepCode {
public:
  ~Jit() override;
  Error invokePacked(std::string_view symbol, Span<void *> args) override;

  /// The code, not compiled yet, and its manifest (JSON text).
  struct Opened {
    std::unique_ptr<Jit> jit;
    std::string manifest;
  };
  /// Opens a lowered module (`name` for messages) to run `entry` (empty:
  /// its only entry): from the cache in `cacheDir` when it holds these bytes
  /// (empty dir: no cache), else by parsing them and writing the manifest.
  /// The code allocates with `host`'s allocator and calls its BLAS.
  static llvm::Expected<Opened>
  open(llvm::StringRef bytes, const std::string &name, const std::string &entry,
       const std::string &cacheDir, const JitHost &host);

  /// Compiles the module unless the code came from the cache, and fills
  /// the cache.
  Error compile() override;

private:
  explicit Jit(const JitHost &host);
  bool openFromCache();
  llvm::Error
  link(mlir::ModuleOp module,
       llvm::MutableArrayRef<std::unique_ptr<llvm::MemoryBuffer>> objects,
       std::chrono::steady_clock::time_point start,
       const std::function<void(const char *)> &phase);
  void writeCache(llvm::StringRef kernels, llvm::StringRef glue);
  /// Calls the function `name` of the linked code when it defines one.
  void callIfDefined(llvm::StringRef name);

  JitHost host;
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module; // until compiled
  std::string manifest;
  std::string cacheDir, cacheBase;
  /// The `fsdp.kernel` functions, recorded when the module is parsed
  /// (writing the manifest strips fsdp attributes).
  llvm::StringSet<> kernelNames;
};

} // namespace fsdp::run

#endif

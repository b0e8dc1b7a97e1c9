//===- StepLibrary.h - a lowered step compiled ahead of time -----*- C++
//-*-===//
//
// `fsdp-compile` turns a lowered step into a shared library: the same two
// objects the JIT links (Jit.h: kernels at -O2, glue at -O0), for a chosen
// CPU, and a third object holding what a runner needs to know without
// MLIR: a JSON manifest (entries, ports with dtypes, shapes, layouts and
// every rank's owned ranges, meshes, target CPU and features, runtime ABI
// version) in the section `.fsdp.manifest` and the stub module the runner
// library reads (Jit.h's makeStub) in `.fsdp.stub`. Both sections are read
// from the file before it is loaded, so that a library built for another
// CPU or runtime is refused before any of its code runs.
//
// The library needs libfsdprt (by soname, found through its rpath or
// already loaded) and BLAS for compute=fast steps; its strided copies call
// the runtime's fsdprt_memref_copy instead of MLIR's memrefCopy, so that
// nothing of LLVM or MLIR is needed where it runs. Its allocations go
// through `fsdp_step_malloc` / `fsdp_step_free`, which call libc's unless
// `fsdp_step_set_allocator` installs others (the runner's counting ones).
// SharedLibraryStepCode is the second implementation of StepCode: it loads
// such a library with dlopen (RTLD_LOCAL), which runs its constructors.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_STEPLIBRARY_H
#define FSDP_RUNNER_STEPLIBRARY_H

#include "StepCode.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdp::run {

inline constexpr char kManifestSection[] = ".fsdp.manifest";
inline constexpr char kStubSection[] = ".fsdp.stub";
/// The version of the manifest's JSON layout. Keys are added without a new
/// version when a reader may ignore them: a compute=gpu step's manifest has
/// `gpu` ({"tf32": bool, "emulation": bool}), which its stub's module
/// attributes (fsdp.gpu, fsdp.gpu_tf32, fsdp.gpu_emulation) also say.
inline constexpr int kManifestVersion = 1;

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

/// Whether `bytes` start like an ELF shared object.
bool isSharedObject(llvm::StringRef bytes);

/// The sections of a step library, read without loading it.
struct StepManifest {
  llvm::json::Value json = nullptr;
  std::string stub; // bytecode of the stub module
  int64_t abiVersion = 0;
  std::string cpu;
  std::vector<std::string> features;
};

/// Reads and checks the manifest of the step library `path`: an error says
/// what is wrong (not a step library, a missing or corrupt manifest).
llvm::Expected<StepManifest> readStepManifest(const std::string &path);

/// Whether this process can run the library: the runtime's ABI version and
/// the host CPU's features.
llvm::Error checkLoadable(const StepManifest &manifest,
                          const std::string &path);

/// A step library loaded with dlopen.
class SharedLibraryStepCode : public StepCode {
public:
  ~SharedLibraryStepCode() override;
  llvm::Error invokePacked(llvm::StringRef name,
                           llvm::MutableArrayRef<void *> args) override;

  struct Opened {
    std::unique_ptr<SharedLibraryStepCode> code;
    mlir::OwningOpRef<mlir::ModuleOp> module; // the stub
  };
  /// Checks and loads the library `path`; its allocations are counted by
  /// the runner's allocator (Memory.h).
  static llvm::Expected<Opened> open(const std::string &path,
                                     mlir::MLIRContext &context);

private:
  SharedLibraryStepCode() = default;
  void *handle = nullptr;
  llvm::StringMap<void (*)(void **)> wrappers;
};

} // namespace fsdp::run

#endif

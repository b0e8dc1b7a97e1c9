//===- StepLibrary.h - load a step compiled ahead of time --------*- C++
//-*-===//
//
// A step library (fsdp-compile, StepCompiler.h) holds the same two objects
// the JIT links and a third with its manifest (Manifest.h) in the section
// `.fsdp.manifest`. The manifest is read from the file before the library
// is loaded, so that a library built for another CPU or runtime is refused
// before any of its code runs.
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

#include "Manifest.h"
#include "StepCode.h"

#include <map>
#include <memory>
#include <string>

namespace fsdp::run {

/// Whether `bytes` start like an ELF shared object.
bool isSharedObject(std::string_view bytes);

/// Reads and checks the manifest of the step library `path`: an error says
/// what is wrong (not a step library, a missing or corrupt manifest).
Expected<StepManifest> readStepManifest(const std::string &path);

/// Whether this process can run the library: the runtime's ABI version and
/// the host CPU's features.
Error checkLoadable(const StepManifest &manifest, const std::string &path);

/// A step library loaded with dlopen.
class SharedLibraryStepCode : public StepCode {
public:
  ~SharedLibraryStepCode() override;
  Error invokePacked(std::string_view symbol, Span<void *> args) override;

  struct Opened {
    std::unique_ptr<SharedLibraryStepCode> code;
    StepManifest manifest;
  };
  /// Checks and loads the library `path`; its allocations are counted by
  /// the runner's allocator (Memory.h).
  static Expected<Opened> open(const std::string &path);

private:
  SharedLibraryStepCode() = default;
  void *handle = nullptr;
  std::map<std::string, void (*)(void **), std::less<>> wrappers;
};

} // namespace fsdp::run

#endif

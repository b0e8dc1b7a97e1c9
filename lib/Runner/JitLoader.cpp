//===- JitLoader.cpp - the JIT library, loaded for a lowered module -------===//

#include "Blas.h"
#include "JitSeam.h"
#include "Memory.h"
#include "fsdp/Runner/Runner.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <vector>

namespace fsdp::run {

namespace {

/// The directory of the object that holds this code (libfsdprun.so, or the
/// executable it is linked into).
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<const void *>(&openWithJit), &info) ||
      !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// fsdp_jit_open of the JIT library, loaded once; null with `error` set
/// when no candidate loads.
JitOpenFunction loadJit(std::string &error) {
  static std::once_flag once;
  static JitOpenFunction open = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    // $FSDP_JIT_LIBRARY, when set, is the only candidate.
    std::vector<std::string> candidates;
    if (const char *env = std::getenv("FSDP_JIT_LIBRARY"); env && *env) {
      candidates.push_back(env);
    } else {
      std::string dir = ownDirectory();
      if (!dir.empty()) {
        candidates.push_back(dir + "/" + kJitLibrary);
        candidates.push_back(dir + "/../lib/" + kJitLibrary);
      }
#ifdef FSDP_JIT_LIBRARY_PATH
      candidates.push_back(FSDP_JIT_LIBRARY_PATH);
#endif
    }
    for (const std::string &path : candidates) {
      // RTLD_LOCAL: the LLVM it links stays out of the process's global
      // scope (another LLVM loaded later, torch's triton, keeps its own).
      void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        if (const char *why = dlerror(); why && failure.empty())
          failure = why;
        continue;
      }
      open = reinterpret_cast<JitOpenFunction>(dlsym(handle, kJitOpenSymbol));
      if (open)
        return;
      failure = path + " has no " + kJitOpenSymbol;
    }
  });
  if (!open)
    error = failure.empty() ? std::string("no ") + kJitLibrary : failure;
  return open;
}

} // namespace

Expected<JitOpened> openWithJit(std::string_view bytes, const std::string &name,
                                const std::string &entry,
                                const std::string &cacheDir) {
  std::string why;
  JitOpenFunction open = loadJit(why);
  if (!open)
    return makeError("cannot run " + name +
                     ": the JIT library cannot be loaded (" + why +
                     "); this runner runs step libraries built by "
                     "fsdp-compile only");
  JitOpenCall call;
  call.bytes = bytes;
  call.name = name;
  call.entry = entry;
  call.cacheDir = cacheDir;
  call.host.malloc = &memory::fsdp_run_jit_malloc;
  call.host.free = &memory::fsdp_run_jit_free;
  if (const blas::Library *lib = blas::library())
    call.host.blasHandle = lib->handle;
  if (open(&call) != 0)
    return makeError(call.error);
  return JitOpened{std::move(call.code), std::move(call.manifest)};
}

} // namespace fsdp::run

namespace fsdp::run {

std::string defaultCacheDir() {
  if (const char *d = std::getenv("FSDP_JIT_CACHE_DIR"))
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/fsdp-run";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/fsdp-run";
  return "";
}

} // namespace fsdp::run

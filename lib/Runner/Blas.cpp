//===- Blas.cpp - The BLAS library compute=fast steps call ----------------===//

#include "Blas.h"

#include <cstdlib>
#include <dlfcn.h>

namespace fsdp::run::blas {

const char *betterCore(const std::string &detected, bool avx2Fma, bool avx512) {
  if (!avx2Fma)
    return nullptr;
  // OpenBLAS's x86-64 cores with AVX-512 kernels, and those with AVX2 + FMA
  // ones. An OpenBLAS older than an AVX-512 CPU may pick an AVX2 core for
  // it; on Zen 5 the AVX-512 kernels make a GPT-2 step 27-35% faster than
  // Haswell's.
  static const char *const kAvx512Cores[] = {"SkylakeX", "Cooperlake",
                                             "SapphireRapids"};
  static const char *const kAvx2Cores[] = {"Haswell", "Zen", "Excavator"};
  for (const char *core : kAvx512Cores)
    if (detected == core)
      return nullptr;
  if (avx512)
    return "SkylakeX";
  for (const char *core : kAvx2Cores)
    if (detected == core)
      return nullptr;
  return "Haswell";
}

namespace {

std::string coreName(void *handle) {
  using CoreName = char *(*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(handle, "openblas_get_corename"));
  const char *name = fn ? fn() : nullptr;
  return name ? name : "";
}

bool hostAvx2Fma() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool hostAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

Library *open() {
#ifndef FSDP_OPENBLAS_PATH
  return nullptr;
#else
  auto *lib = new Library;
  lib->path = FSDP_OPENBLAS_PATH;
  lib->handle = dlopen(lib->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    delete lib;
    return nullptr;
  }
  lib->core = coreName(lib->handle);
  const char *better = std::getenv("OPENBLAS_CORETYPE")
                           ? nullptr
                           : betterCore(lib->core, hostAvx2Fma(), hostAvx512());
  // Nothing else holds the library yet, so closing it unloads it and the
  // second open runs its CPU detection again, reading OPENBLAS_CORETYPE.
  if (better && dlclose(lib->handle) == 0) {
    setenv("OPENBLAS_CORETYPE", better, 1);
    void *again = dlopen(lib->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    unsetenv("OPENBLAS_CORETYPE");
    if (!again) {
      delete lib;
      return nullptr;
    }
    lib->handle = again;
    lib->detectedCore = lib->core;
    lib->core = coreName(again);
  }
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(
          dlsym(lib->handle, "openblas_set_num_threads")))
    set(1);
  return lib;
#endif
}

} // namespace

const Library *library() {
  // Opened once and kept: the JIT'd code and step libraries hold its
  // functions until the process exits.
  static Library *lib = open();
  return lib;
}

} // namespace fsdp::run::blas

//===- Blas.cpp - The BLAS library compute=fast steps call ----------------===//

#include "Blas.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace fsdp::run::blas {

bool wantMkl(const char *choice, bool intel) {
  if (choice && std::strcmp(choice, "mkl") == 0)
    return true;
  if (choice && std::strcmp(choice, "openblas") == 0)
    return false;
  return intel;
}

const char *mklBranchName(int branch) {
  // MKL_CBWR_* of mkl_types.h.
  switch (branch) {
  case 3:
    return "COMPATIBLE";
  case 4:
    return "SSE2";
  case 8:
    return "SSE4_2";
  case 10:
    return "AVX2";
  case 12:
    return "AVX512";
  case 14:
    return "AVX512_E1";
  case 15:
    return "AVX10";
  default:
    return "";
  }
}

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

Library *openOpenBlas() {
#ifndef FSDP_OPENBLAS_PATH
  return nullptr;
#else
  auto *lib = new Library;
  lib->path = FSDP_OPENBLAS_PATH;
  lib->name = "OpenBLAS";
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

bool hostIntel() {
#if defined(__x86_64__)
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

/// The file `handle` was loaded from.
std::string loadedPath(void *handle) {
  struct link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name)
    return "";
  return map->l_name;
}

/// libmkl_rt loads its interface, threading and core layers from its own
/// folder when first called, and ends the process when one is missing:
/// check that they are there before calling it.
bool mklComplete(const std::string &rt) {
  size_t at = rt.rfind("libmkl_rt");
  if (at == std::string::npos)
    return false;
  std::string dir = rt.substr(0, at);
  std::string suffix = rt.substr(at + std::strlen("libmkl_rt"));
  for (const char *layer :
       {"libmkl_intel_lp64", "libmkl_sequential", "libmkl_core"})
    if (access((dir + layer + suffix).c_str(), R_OK) != 0)
      return false;
  return true;
}

/// Where libmkl_rt may be: FSDP_MKL_LIBRARY, else the venv the build was
/// configured with (the `mkl` wheel's lib/), else the loader's search path.
std::vector<std::string> mklCandidates() {
  if (const char *path = std::getenv("FSDP_MKL_LIBRARY"); path && *path)
    return {path};
  std::vector<std::string> paths;
  for (const char *version : {"3", "2"}) {
#ifdef FSDP_MKL_SEARCH_DIR
    paths.push_back(std::string(FSDP_MKL_SEARCH_DIR) + "/libmkl_rt.so." +
                    version);
#endif
    paths.push_back(std::string("libmkl_rt.so.") + version);
  }
  return paths;
}

/// MKL with one thread per caller and strict conditional numerical
/// reproducibility on the CPU's own branch, or null when no complete MKL
/// is found or it refuses that mode.
Library *openMkl() {
  for (const std::string &candidate : mklCandidates()) {
    void *handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      continue;
    std::string path = loadedPath(handle);
    using IntOfInt = int (*)(int);
    using IntOfVoid = int (*)();
    auto setLayer =
        reinterpret_cast<IntOfInt>(dlsym(handle, "MKL_Set_Threading_Layer"));
    auto autoBranch =
        reinterpret_cast<IntOfVoid>(dlsym(handle, "MKL_CBWR_Get_Auto_Branch"));
    auto setCbwr = reinterpret_cast<IntOfInt>(dlsym(handle, "MKL_CBWR_Set"));
    if (!mklComplete(path) || !setLayer || !autoBranch || !setCbwr ||
        !dlsym(handle, "cblas_sgemm") || !dlsym(handle, "cblas_dgemm")) {
      dlclose(handle);
      continue;
    }
    // Before any other MKL call: MKL_THREADING_SEQUENTIAL (the ranks are
    // the parallelism), then the CPU's branch | MKL_CBWR_STRICT, under which
    // a gemm's result does not depend on its operands' alignment.
    constexpr int kSequential = 1, kStrict = 0x10000, kSuccess = 0;
    setLayer(kSequential);
    int branch = autoBranch();
    if (setCbwr(branch | kStrict) != kSuccess) {
      std::fprintf(stderr,
                   "fsdp-run: %s refuses strict reproducibility on branch "
                   "%d; using OpenBLAS\n",
                   path.c_str(), branch);
      dlclose(handle);
      return nullptr;
    }
    auto *lib = new Library;
    lib->handle = handle;
    lib->path = path;
    lib->name = "MKL";
    lib->core = mklBranchName(branch);
    if (lib->core.empty())
      lib->core = "branch " + std::to_string(branch);
    return lib;
  }
  return nullptr;
}

Library *open() {
  const char *choice = std::getenv("FSDP_BLAS");
  if (wantMkl(choice, hostIntel())) {
    if (Library *mkl = openMkl())
      return mkl;
    if (choice && std::strcmp(choice, "mkl") == 0)
      std::fprintf(stderr,
                   "fsdp-run: FSDP_BLAS=%s but no complete MKL "
                   "(libmkl_rt) was found; using OpenBLAS\n",
                   choice);
  }
  return const_cast<Library *>(openblas());
}

} // namespace

const Library *openblas() {
  // Opened once and kept: step libraries hold its functions until the
  // process exits.
  static Library *lib = openOpenBlas();
  return lib;
}

const Library *library() {
  // Opened once and kept: the JIT'd code holds its functions until the
  // process exits.
  static Library *lib = open();
  return lib;
}

} // namespace fsdp::run::blas

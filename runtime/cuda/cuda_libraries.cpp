// cuBLAS and NCCL opened on first use (cuda_libraries.h).
#include "cuda_libraries.h"

#include <cstdlib>
#include <string>
#include <vector>

#ifndef FSDPRT_CUDA_EMULATION
#include <dlfcn.h>
#endif

using namespace fsdprt;
using namespace fsdprt::gpu;

#define FSDPRT_STRINGIFY_(x) #x
#define FSDPRT_STRINGIFY(x) FSDPRT_STRINGIFY_(x)

namespace {

template <typename Table> struct Loaded {
  Table table;
  Status status;
};

#ifndef FSDPRT_CUDA_EMULATION
// The files to try, in order: $env alone when set, else the configured
// path (when the build knew one), else the versioned name.
std::vector<std::string> candidates(const char *env, const char *configured,
                                    const char *soname) {
  const char *chosen = std::getenv(env);
  if (chosen && *chosen)
    return {chosen};
  std::vector<std::string> out;
  if (configured && *configured)
    out.push_back(configured);
  out.push_back(soname);
  return out;
}

// Opens the first candidate that loads (its name in `opened`); null and why
// none did otherwise.
void *open_first(const std::vector<std::string> &files, std::string *opened,
                 std::string *why) {
  for (const std::string &f : files) {
    void *h = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *opened = f;
      return h;
    }
    const char *err = dlerror();
    if (!why->empty())
      *why += "; ";
    *why += err ? err : f + ": cannot be opened";
  }
  return nullptr;
}

// Fills `slot` with `name` from `handle`; records a missing one.
template <typename F>
void resolve(void *handle, const char *name, F &slot,
             std::vector<std::string> *missing) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (!slot)
    missing->push_back(name);
}

template <typename Table, typename Fill>
Loaded<Table> load(const char *what, const char *env, const char *configured,
                   const char *soname, const char *needed_by, Fill fill) {
  Loaded<Table> out;
  std::vector<std::string> files = candidates(env, configured, soname);
  std::string opened, why;
  void *h = open_first(files, &opened, &why);
  if (!h) {
    out.status = Status(
        FSDPRT_ERR_UNSUPPORTED,
        format("%s cannot be loaded (%s); %s needs it: install it, add its "
               "directory to LD_LIBRARY_PATH or name the file in $%s",
               what, why.c_str(), needed_by, env));
    return out;
  }
  std::vector<std::string> missing;
  fill(h, out.table, &missing);
  if (!missing.empty()) {
    std::string names;
    for (const std::string &m : missing)
      names += (names.empty() ? "" : ", ") + m;
    out.status = Status(FSDPRT_ERR_UNSUPPORTED,
                        format("%s (%s) lacks %s: not %s, or older than the "
                               "version the runtime was built against",
                               what, opened.c_str(), names.c_str(), what));
    out.table = Table();
  }
  return out;
}
#endif

#ifndef FSDPRT_CUBLAS_LIBRARY_PATH
#define FSDPRT_CUBLAS_LIBRARY_PATH ""
#endif
#ifndef FSDPRT_NCCL_LIBRARY_PATH
#define FSDPRT_NCCL_LIBRARY_PATH ""
#endif

const Loaded<CublasLibrary> &cublas_loaded() {
  static const Loaded<CublasLibrary> loaded = [] {
#ifdef FSDPRT_CUDA_EMULATION
    Loaded<CublasLibrary> out;
#define FSDPRT_BIND(name) out.table.name = &::name;
#define FSDPRT_BIND_TYPED(name, type)                                          \
  out.table.name = static_cast<type>(&::name);
    FSDPRT_CUBLAS_FUNCTIONS(FSDPRT_BIND, FSDPRT_BIND_TYPED)
#undef FSDPRT_BIND_TYPED
    FSDPRT_CUBLAS_DEVICE_FUNCTIONS(FSDPRT_BIND)
#undef FSDPRT_BIND
    return out;
#else
    return load<CublasLibrary>(
        "cuBLAS", "FSDPRT_CUBLAS_LIBRARY", FSDPRT_CUBLAS_LIBRARY_PATH,
        "libcublas.so." FSDPRT_STRINGIFY(CUBLAS_VER_MAJOR),
        "a GPU context (compute=gpu)",
        [](void *h, CublasLibrary &t, std::vector<std::string> *missing) {
#define FSDPRT_RESOLVE(name)                                                   \
  resolve(h, FSDPRT_STRINGIFY(name), t.name, missing);
#define FSDPRT_RESOLVE_TYPED(name, type) FSDPRT_RESOLVE(name)
          FSDPRT_CUBLAS_FUNCTIONS(FSDPRT_RESOLVE, FSDPRT_RESOLVE_TYPED)
#undef FSDPRT_RESOLVE_TYPED
          FSDPRT_CUBLAS_DEVICE_FUNCTIONS(FSDPRT_RESOLVE)
#undef FSDPRT_RESOLVE
        });
#endif
  }();
  return loaded;
}

#ifdef FSDPRT_WITH_NCCL
const Loaded<NcclLibrary> &nccl_loaded() {
  static const Loaded<NcclLibrary> loaded = [] {
#ifdef FSDPRT_CUDA_EMULATION
    Loaded<NcclLibrary> out;
#define FSDPRT_BIND(name) out.table.name = &::name;
    FSDPRT_NCCL_FUNCTIONS(FSDPRT_BIND)
#undef FSDPRT_BIND
    return out;
#else
    return load<NcclLibrary>(
        "NCCL", "FSDPRT_NCCL_LIBRARY", FSDPRT_NCCL_LIBRARY_PATH,
        "libnccl.so." FSDPRT_STRINGIFY(NCCL_MAJOR), "the nccl backend",
        [](void *h, NcclLibrary &t, std::vector<std::string> *missing) {
#define FSDPRT_RESOLVE(name)                                                   \
  resolve(h, FSDPRT_STRINGIFY(name), t.name, missing);
          FSDPRT_NCCL_FUNCTIONS(FSDPRT_RESOLVE)
#undef FSDPRT_RESOLVE
        });
#endif
  }();
  return loaded;
}
#endif

} // namespace

Status fsdprt::gpu::load_cublas(const CublasLibrary **table) {
  const Loaded<CublasLibrary> &l = cublas_loaded();
  *table = l.status.ok() ? &l.table : nullptr;
  return l.status;
}

const CublasLibrary &fsdprt::gpu::cublas_library() {
  return cublas_loaded().table;
}

#ifdef FSDPRT_WITH_NCCL
Status fsdprt::gpu::load_nccl(const NcclLibrary **table) {
  const Loaded<NcclLibrary> &l = nccl_loaded();
  *table = l.status.ok() ? &l.table : nullptr;
  return l.status;
}

const NcclLibrary &fsdprt::gpu::nccl_library() { return nccl_loaded().table; }
#endif

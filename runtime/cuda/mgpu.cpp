// The mgpu* entry points that MLIR's gpu-to-llvm host code calls (LLVM 22
// signatures, checked against the declarations mlir-opt emits), per rank
// instead of upstream's one process-wide context.
//
// Module loads run from the lowered module's global constructor, on
// whatever thread loads the code and before any rank context exists, so
// mgpuModuleLoad only registers the image (one record per data pointer).
// A function handle names a kernel of a module; the first launch on a
// device loads the module into that device's primary context (shared by
// every rank thread on the device) and resolves the kernel, later launches
// read the resolved handle without a lock.
#include "gpu_internal.h"

#include <climits>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

constexpr int kMaxDevices = 64;

struct Module;

struct Function {
  Module *module = nullptr;
  std::string name;
  std::atomic<CUfunction> per_device[kMaxDevices] = {};
};

struct Module {
  const void *data = nullptr;
  int64_t size = 0;
  int refs = 0;
  std::mutex mu; // guards the per-device loads and `functions`
  CUmodule per_device[kMaxDevices] = {};
  std::unordered_map<const char *, std::unique_ptr<Function>> functions;
};

std::mutex registry_mu;
std::unordered_map<const void *, Module *> &registry() {
  static auto *modules = new std::unordered_map<const void *, Module *>();
  return *modules;
}

// Host-shared (managed) allocations, which cudaFreeAsync must not free.
std::mutex managed_mu;
std::unordered_set<void *> &managed() {
  static auto *set = new std::unordered_set<void *>();
  return *set;
}

bool driver_ready(fsdprt_gpu_context *ctx, const char *fn) {
  if (driver().error.empty())
    return true;
  fail(ctx, Status(FSDPRT_ERR_NO_DEVICE, format("%s: %s: %s", who(ctx).c_str(),
                                                fn, driver().error.c_str())));
  return false;
}

// The table id of a gpu-emulation=true step's image, or null for any other
// image.
const char *host_kernels_id(const Module *m) {
  uint32_t magic = 0;
  if (!m->data || (m->size > 0 && m->size < 9))
    return nullptr;
  std::memcpy(&magic, m->data, sizeof(magic));
  if (magic != FSDPRT_GPU_HOST_KERNELS_MAGIC)
    return nullptr;
  return static_cast<const char *>(m->data) + 8;
}

// The kernel on the context's device, loading the module there first.
CUfunction resolve(fsdprt_gpu_context *ctx, Function *f) {
  const int dev = ctx->device;
  if (dev < 0 || dev >= kMaxDevices) {
    fail(ctx, Status(FSDPRT_ERR_UNSUPPORTED,
                     format("%s: devices beyond %d are not supported",
                            who(ctx).c_str(), kMaxDevices)));
    return nullptr;
  }
  if (CUfunction fn = f->per_device[dev].load(std::memory_order_acquire))
    return fn;
  if (!driver_ready(ctx, "mgpuLaunchKernel"))
    return nullptr;
  Module *m = f->module;
  const char *host_id = host_kernels_id(m);
  if (host_id && !fsdprt_gpu_emulated()) {
    fail(ctx, Status(FSDPRT_ERR_UNSUPPORTED,
                     format("%s: kernel %s: the step was compiled with "
                            "gpu-emulation=true (its kernels are host code "
                            "for the emulated runtime, "
                            "build/lib/cuda-emulation/libfsdprt.so); lower it "
                            "without gpu-emulation to run on a GPU",
                            who(ctx).c_str(), f->name.c_str())));
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(m->mu);
  if (CUfunction fn = f->per_device[dev].load(std::memory_order_relaxed))
    return fn;
  if (!m->per_device[dev]) {
    CUresult rc = driver().moduleLoadData(&m->per_device[dev], m->data);
    if (rc != CUDA_SUCCESS) {
      if (host_id)
        fail(ctx, Status(FSDPRT_ERR_BACKEND,
                         format("%s: kernel %s: the step's host kernel table "
                                "%s is not registered (%s)",
                                who(ctx).c_str(), f->name.c_str(), host_id,
                                driver_error(rc, "cuModuleLoadData").c_str())));
      else
        fail(ctx, Status(FSDPRT_ERR_BACKEND,
                         format("%s: loading the kernels (%lld-byte image): %s",
                                who(ctx).c_str(), (long long)m->size,
                                driver_error(rc, "cuModuleLoadData").c_str())));
      return nullptr;
    }
    ctx->module_loads++;
  }
  CUfunction fn = nullptr;
  CUresult rc =
      driver().moduleGetFunction(&fn, m->per_device[dev], f->name.c_str());
  if (rc != CUDA_SUCCESS) {
    fail(ctx,
         Status(FSDPRT_ERR_BACKEND,
                format("%s: kernel %s: %s", who(ctx).c_str(), f->name.c_str(),
                       driver_error(rc, "cuModuleGetFunction").c_str())));
    return nullptr;
  }
  f->per_device[dev].store(fn, std::memory_order_release);
  return fn;
}

cudaStream_t stream_of(fsdprt_gpu_context *ctx, void *stream) {
  return stream ? static_cast<cudaStream_t>(stream) : ctx->compute;
}

// Whether the host may read `p` once the stream is done (so that a later
// mgpuStreamSynchronize must really wait).
bool host_visible(const void *p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return attr.type != cudaMemoryTypeDevice;
}

bool fits_uint(int64_t v) { return v >= 0 && v <= int64_t(UINT_MAX); }

} // namespace

extern "C" {

void *mgpuModuleLoad(void *data, int64_t size) {
  std::lock_guard<std::mutex> lock(registry_mu);
  Module *&m = registry()[data];
  if (!m) {
    m = new Module();
    m->data = data;
    m->size = size;
  }
  m->refs++;
  return m;
}

void *mgpuModuleLoadJIT(void *data, int32_t) {
  // cuModuleLoadData takes PTX text as it takes a cubin or a fatbin.
  return mgpuModuleLoad(
      data, int64_t(std::strlen(static_cast<const char *>(data))) + 1);
}

void mgpuModuleUnload(void *module) {
  auto *m = static_cast<Module *>(module);
  if (!m)
    return;
  std::lock_guard<std::mutex> lock(registry_mu);
  if (--m->refs > 0)
    return;
  registry().erase(m->data);
  // Runs from the module's destructor at exit, when the driver may already
  // be shutting down: failures are ignored.
  if (driver().moduleUnload)
    for (CUmodule cu : m->per_device)
      if (cu)
        driver().moduleUnload(cu);
  delete m;
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  auto *m = static_cast<Module *>(module);
  if (!m || !name)
    return nullptr;
  std::lock_guard<std::mutex> lock(m->mu);
  std::unique_ptr<Function> &f = m->functions[name];
  if (!f) {
    f = std::make_unique<Function>();
    f->module = m;
    f->name = name;
  }
  return f.get();
}

void mgpuLaunchKernel(void *function, int64_t gx, int64_t gy, int64_t gz,
                      int64_t bx, int64_t by, int64_t bz, int32_t smem,
                      void *stream, void **params, void **extra,
                      int64_t /*nparams: the kernel's own signature counts*/) {
  fsdprt_gpu_context *ctx = entry("mgpuLaunchKernel");
  if (!ctx)
    return;
  auto *f = static_cast<Function *>(function);
  if (!f || !fits_uint(gx) || !fits_uint(gy) || !fits_uint(gz) ||
      !fits_uint(bx) || !fits_uint(by) || !fits_uint(bz) || smem < 0) {
    fail(ctx,
         Status(FSDPRT_ERR_INVALID_ARGUMENT,
                format("%s: mgpuLaunchKernel %s: bad function or launch "
                       "shape grid (%lld, %lld, %lld) block (%lld, %lld, %lld)",
                       who(ctx).c_str(), f ? f->name.c_str() : "(null)",
                       (long long)gx, (long long)gy, (long long)gz,
                       (long long)bx, (long long)by, (long long)bz)));
    return;
  }
  CUfunction fn = resolve(ctx, f);
  if (!fn)
    return;
  CUresult rc = driver().launchKernel(
      fn, unsigned(gx), unsigned(gy), unsigned(gz), unsigned(bx), unsigned(by),
      unsigned(bz), unsigned(smem),
      reinterpret_cast<CUstream>(stream_of(ctx, stream)), params, extra);
  if (rc != CUDA_SUCCESS) {
    fail(ctx,
         Status(FSDPRT_ERR_BACKEND,
                format("%s: kernel %s: %s", who(ctx).c_str(), f->name.c_str(),
                       driver_error(rc, "cuLaunchKernel").c_str())));
    return;
  }
  ctx->launches++;
}

void *mgpuStreamCreate(void) {
  fsdprt_gpu_context *ctx = entry("mgpuStreamCreate");
  return ctx ? ctx->compute : nullptr;
}

void mgpuStreamDestroy(void *) {} // the rank's compute stream lives on

void mgpuStreamSynchronize(void *stream) {
  fsdprt_gpu_context *ctx = entry("mgpuStreamSynchronize");
  if (!ctx)
    return;
  cudaStream_t s = stream_of(ctx, stream);
  // Device results stay on the device and every host read goes through
  // the runtime, which synchronizes; so the lowered code's per-function
  // synchronization waits only when it enqueued something the host reads.
  if (s == ctx->compute && !ctx->host_visible_pending.exchange(false))
    return;
  if (!host_wait(ctx, "mgpuStreamSynchronize"))
    return;
  failed(ctx, cudaStreamSynchronize(s), "mgpuStreamSynchronize",
         "cudaStreamSynchronize");
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  fsdprt_gpu_context *ctx = entry("mgpuStreamWaitEvent");
  if (!ctx)
    return;
  failed(ctx,
         cudaStreamWaitEvent(stream_of(ctx, stream),
                             static_cast<cudaEvent_t>(event), 0),
         "mgpuStreamWaitEvent", "cudaStreamWaitEvent");
}

void *mgpuEventCreate(void) {
  fsdprt_gpu_context *ctx = entry("mgpuEventCreate");
  if (!ctx)
    return nullptr;
  cudaEvent_t e = nullptr;
  if (failed(ctx, ctx->events.acquire(&e), "mgpuEventCreate",
             "cudaEventCreate"))
    return nullptr;
  return e;
}

void mgpuEventDestroy(void *event) {
  fsdprt_gpu_context *ctx = current();
  if (!event)
    return;
  if (ctx)
    ctx->events.release(static_cast<cudaEvent_t>(event));
  else
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void mgpuEventSynchronize(void *event) {
  fsdprt_gpu_context *ctx = entry("mgpuEventSynchronize");
  if (ctx)
    failed(ctx, cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
           "mgpuEventSynchronize", "cudaEventSynchronize");
}

void mgpuEventRecord(void *event, void *stream) {
  fsdprt_gpu_context *ctx = entry("mgpuEventRecord");
  if (ctx)
    failed(ctx,
           cudaEventRecord(static_cast<cudaEvent_t>(event),
                           stream_of(ctx, stream)),
           "mgpuEventRecord", "cudaEventRecord");
}

void *mgpuMemAlloc(int64_t bytes, void *, int8_t host_shared) {
  if (!host_shared)
    return alloc_named(bytes, "mgpuMemAlloc");
  fsdprt_gpu_context *ctx = entry("mgpuMemAlloc");
  if (!ctx)
    return nullptr;
  void *p = nullptr;
  if (failed(ctx, cudaMallocManaged(&p, size_t(bytes > 0 ? bytes : 1)),
             "mgpuMemAlloc", "cudaMallocManaged (host_shared)"))
    return nullptr;
  std::lock_guard<std::mutex> lock(managed_mu);
  managed().insert(p);
  return p;
}

void mgpuMemFree(void *ptr, void *) {
  if (!ptr)
    return;
  {
    std::lock_guard<std::mutex> lock(managed_mu);
    if (managed().erase(ptr)) {
      cudaFree(ptr); // synchronizes the device, as host-shared memory needs
      return;
    }
  }
  fsdprt_gpu_free(ptr);
}

void mgpuMemcpy(void *dst, void *src, int64_t bytes, void *stream) {
  fsdprt_gpu_context *ctx = entry("mgpuMemcpy");
  if (!ctx || bytes <= 0)
    return;
  if (failed(ctx,
             cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDefault,
                             stream_of(ctx, stream)),
             "mgpuMemcpy", "cudaMemcpyAsync"))
    return;
  if (host_visible(dst))
    ctx->host_visible_pending = true;
}

void mgpuMemset32(void *dst, uint32_t value, int64_t count, void *stream) {
  fsdprt_gpu_context *ctx = entry("mgpuMemset32");
  if (!ctx || count <= 0 || !driver_ready(ctx, "mgpuMemset32"))
    return;
  CUresult rc = driver().memsetD32Async(
      reinterpret_cast<CUdeviceptr>(dst), value, size_t(count),
      reinterpret_cast<CUstream>(stream_of(ctx, stream)));
  if (rc != CUDA_SUCCESS)
    fail(ctx, Status(FSDPRT_ERR_BACKEND,
                     format("%s: %s", who(ctx).c_str(),
                            driver_error(rc, "cuMemsetD32Async").c_str())));
}

void mgpuMemset16(void *dst, uint16_t value, int64_t count, void *stream) {
  fsdprt_gpu_context *ctx = entry("mgpuMemset16");
  if (!ctx || count <= 0 || !driver_ready(ctx, "mgpuMemset16"))
    return;
  CUresult rc = driver().memsetD16Async(
      reinterpret_cast<CUdeviceptr>(dst), value, size_t(count),
      reinterpret_cast<CUstream>(stream_of(ctx, stream)));
  if (rc != CUDA_SUCCESS)
    fail(ctx, Status(FSDPRT_ERR_BACKEND,
                     format("%s: %s", who(ctx).c_str(),
                            driver_error(rc, "cuMemsetD16Async").c_str())));
}

void mgpuSetDefaultDevice(int32_t) {}

} // extern "C"

// ---- kernels compiled for the host emulation --------------------------------

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
static_assert(sizeof(fsdprt_gpu_host_kernel_t) ==
                  sizeof(cuda_emulation::HostKernel),
              "the emulation's kernel table has the C API's layout");
#endif

extern "C" {

fsdprt_status_t fsdprt_gpu_register_host_kernels(
    const char *id, const fsdprt_gpu_host_kernel_t *kernels, int32_t count) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  if (cuda_emulation::registerHostKernels(
          id, reinterpret_cast<const cuda_emulation::HostKernel *>(kernels),
          count))
    return FSDPRT_OK;
  set_last_message(format("fsdprt_gpu_register_host_kernels: invalid table "
                          "%s (%d kernels)",
                          id ? id : "(null)", int(count)));
  return FSDPRT_ERR_INVALID_ARGUMENT;
#else
  (void)kernels;
  (void)count;
  set_last_message(format("fsdprt_gpu_register_host_kernels: the step (kernel "
                          "table %s) was compiled with gpu-emulation=true and "
                          "runs only on the emulated runtime "
                          "(build/lib/cuda-emulation/libfsdprt.so)",
                          id ? id : "(null)"));
  return FSDPRT_ERR_UNSUPPORTED;
#endif
}

void fsdprt_gpu_unregister_host_kernels(const char *id) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  cuda_emulation::unregisterHostKernels(id);
#else
  (void)id;
#endif
}

int32_t fsdprt_gpu_emu_index(int32_t which) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  return cuda_emulation::hostIndex(which);
#else
  (void)which;
  return 0;
#endif
}

int32_t fsdprt_gpu_emu_shuffle_xor(int32_t value, int32_t offset,
                                   int32_t width) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  return cuda_emulation::hostShuffleXor(value, offset, width);
#else
  (void)offset;
  (void)width;
  return value;
#endif
}

void fsdprt_gpu_emu_barrier(void) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  cuda_emulation::hostBarrier();
#endif
}

} // extern "C"

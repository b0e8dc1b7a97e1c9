// Per-rank GPU contexts, device checks, the device allocator and host <->
// device copies (fsdprt_gpu.h).
#include "gpu_internal.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

using namespace fsdprt;
using namespace fsdprt::gpu;

namespace {

thread_local fsdprt_gpu_context *tls_ctx = nullptr;
thread_local std::string tls_message;

// Where to look when the driver is missing or too old.
std::string driver_problem(cudaError_t rc) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto ver = [](int v) { return format("%d.%d", v / 1000, (v % 1000) / 10); };
  if (driver == 0)
    return "no NVIDIA driver (libcuda.so.1 not found or not loadable)";
  if (driver < runtime || rc == cudaErrorInsufficientDriver)
    return format("the NVIDIA driver supports CUDA %s but this runtime was "
                  "built with CUDA %s: install a newer driver",
                  ver(driver).c_str(), ver(runtime).c_str());
  if (rc == cudaErrorNoDevice)
    return format("no CUDA GPU found (driver for CUDA %s present; check "
                  "CUDA_VISIBLE_DEVICES and /dev/nvidia*)",
                  ver(driver).c_str());
  return format("the CUDA runtime cannot use the GPUs: %s",
                cudaGetErrorString(rc));
}

// Device count and, on failure, the reason.
Status count_devices(int *count) {
  *count = 0;
  cudaError_t rc = cudaGetDeviceCount(count);
  if (rc != cudaSuccess) {
    cudaGetLastError(); // not sticky: clear it
    *count = 0;
    return Status(FSDPRT_ERR_NO_DEVICE, driver_problem(rc));
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (driver < runtime)
    return Status(FSDPRT_ERR_NO_DEVICE,
                  driver_problem(cudaErrorInsufficientDriver));
  if (*count == 0)
    return Status(FSDPRT_ERR_NO_DEVICE, driver_problem(cudaErrorNoDevice));
  return Status::Ok();
}

fsdprt_status_t report(const Status &st) {
  set_last_message(st.message, st.code);
  return st.code;
}

} // namespace

// ---- event pool ---------------------------------------------------------

namespace fsdprt {
namespace gpu {

EventPool::~EventPool() {
  for (cudaEvent_t e : free_)
    cudaEventDestroy(e);
}

cudaError_t EventPool::acquire(cudaEvent_t *event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      *event = free_.back();
      free_.pop_back();
      return cudaSuccess;
    }
  }
  created_++;
  return cudaEventCreateWithFlags(event, timing_ ? cudaEventDefault
                                                 : cudaEventDisableTiming);
}

void EventPool::release(cudaEvent_t event) {
  if (!event)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(event);
}

size_t EventPool::free_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

// ---- driver entry points -------------------------------------------------

namespace {
template <typename F> void resolve(Driver &d, F *fn, const char *name) {
  void *p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  // 12000: the ABI of these functions since CUDA 12.0.
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault,
                                       &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !p) {
    if (d.error.empty())
      d.error = format("the CUDA driver has no %s", name);
    return;
  }
  *fn = reinterpret_cast<F>(p);
}
} // namespace

const Driver &driver() {
  // Never destroyed: module unloads run from destructors at exit.
  static const Driver *table = [] {
    auto *t = new Driver();
    Driver &d = *t;
    resolve(d, &d.moduleLoadData, "cuModuleLoadData");
    resolve(d, &d.moduleUnload, "cuModuleUnload");
    resolve(d, &d.moduleGetFunction, "cuModuleGetFunction");
    resolve(d, &d.launchKernel, "cuLaunchKernel");
    resolve(d, &d.memsetD32Async, "cuMemsetD32Async");
    resolve(d, &d.memsetD16Async, "cuMemsetD16Async");
    resolve(d, &d.getErrorName, "cuGetErrorName");
    return t;
  }();
  return *table;
}

std::string driver_error(CUresult rc, const char *what) {
  const char *name = nullptr;
  if (driver().getErrorName)
    driver().getErrorName(rc, &name);
  return format("%s failed: %s", what, name ? name : "unknown CUDA error");
}

// ---- errors ----------------------------------------------------------------

fsdprt_gpu_context *current() { return tls_ctx; }

void set_last_message(const std::string &msg, fsdprt_status_t code) {
  tls_message = msg;
  fsdprt::set_last_error(code, msg);
}

Status cuda_status(cudaError_t rc, const std::string &what) {
  fsdprt_status_t code = FSDPRT_ERR_BACKEND;
  if (rc == cudaErrorMemoryAllocation)
    code = FSDPRT_ERR_OUT_OF_MEMORY;
  else if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ||
           rc == cudaErrorInvalidDevice)
    code = FSDPRT_ERR_NO_DEVICE;
  return Status(code, format("%s: %s (%s)", what.c_str(),
                             cudaGetErrorString(rc), cudaGetErrorName(rc)));
}

std::string who(const fsdprt_gpu_context *ctx) {
  const fsdprt_comm *c = fsdprt_get_thread_comm();
  if (c && ctx)
    return format("rank %lld (GPU %d)", (long long)c->rank, ctx->device);
  if (ctx)
    return format("GPU %d", ctx->device);
  return c ? format("rank %lld", (long long)c->rank) : std::string("gpu");
}

void fail(fsdprt_gpu_context *ctx, const Status &st) {
  set_last_message(st.message, st.code);
  if (ctx)
    ctx->record_error(st);
  if (fsdprt_comm *c = fsdprt_get_thread_comm()) {
    // Stops the rank's later collectives; peers see their own timeout.
    if (c->first_error() == FSDPRT_OK)
      c->abort(st);
    c->record_error(st);
  }
}

fsdprt_gpu_context *entry(const char *fn) {
  fsdprt_gpu_context *ctx = tls_ctx;
  if (!ctx) {
    Status st(FSDPRT_ERR_NO_COMM,
              format("%s: no GPU context on this thread (the runner sets "
                     "one per rank: fsdprt_gpu_set_thread_context or an nccl "
                     "communicator in fsdprt_set_thread_comm)",
                     fn));
    set_last_message(st.message, st.code);
    if (fsdprt_comm *c = fsdprt_get_thread_comm())
      c->record_error(st);
    return nullptr;
  }
  if (ctx->first_error() != FSDPRT_OK)
    return nullptr;
  return ctx;
}

fsdprt_gpu_context *kernel_entry(const char *fn, const std::string &call,
                                 const std::string &bad, bool built,
                                 const char *kernels) {
  fsdprt_gpu_context *ctx = entry(fn);
  if (!ctx)
    return nullptr;
  if (!bad.empty()) {
    fail(ctx, Status(FSDPRT_ERR_INVALID_ARGUMENT,
                     format("%s: %s(%s): %s", who(ctx).c_str(), fn,
                            call.c_str(), bad.c_str())));
    return nullptr;
  }
  if (!built) {
    fail(ctx, Status(FSDPRT_ERR_UNSUPPORTED,
                     format("%s: %s: this libfsdprt was built without the CUDA "
                            "compiler, so without the %s kernels",
                            who(ctx).c_str(), fn, kernels)));
    return nullptr;
  }
  return ctx;
}

bool failed(fsdprt_gpu_context *ctx, cudaError_t rc, const char *fn,
            const char *what) {
  if (rc == cudaSuccess)
    return false;
  fail(ctx, cuda_status(rc, format("%s: %s: %s", who(ctx).c_str(), fn, what)));
  return true;
}

bool host_wait(fsdprt_gpu_context *ctx, const char *what) {
  ctx->host_waits++;
  if (!ctx->capturing)
    return true;
  fail(ctx, Status(FSDPRT_ERR_UNSUPPORTED,
                   format("%s: %s waits on the host while the compute stream "
                          "is captured into a CUDA graph (a captured step "
                          "must not synchronize)",
                          who(ctx).c_str(), what)));
  return false;
}

Status check_device(int device) {
  int count = 0;
  Status st = count_devices(&count);
  if (!st.ok())
    return st;
  if (device < 0 || device >= count)
    return Status(FSDPRT_ERR_NO_DEVICE,
                  format("GPU %d requested but %d GPU%s visible (a rank per "
                         "GPU needs one GPU per rank; check "
                         "CUDA_VISIBLE_DEVICES)",
                         device, count, count == 1 ? " is" : "s are"));
  return Status::Ok();
}

} // namespace gpu
} // namespace fsdprt

// ---- context ---------------------------------------------------------------

void fsdprt_gpu_context::record_error(const Status &st) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_code_ == FSDPRT_OK) {
    first_code_ = st.code;
    first_msg_ = st.message;
  }
}

fsdprt_status_t fsdprt_gpu_context::first_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return first_code_;
}

std::string fsdprt_gpu_context::first_error_message() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return first_msg_;
}

namespace {

// The default pool gives freed memory back to the driver at every
// synchronization; steps allocate the same sizes again, so it keeps it.
cudaError_t keep_pool_memory(int device) {
  cudaMemPool_t pool = nullptr;
  cudaError_t rc = cudaDeviceGetDefaultMemPool(&pool, device);
  uint64_t keep = UINT64_MAX;
  if (rc == cudaSuccess)
    rc = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  return rc;
}

Status create_context(int device, std::unique_ptr<fsdprt_gpu_context> *out) {
  Status st = check_device(device);
  if (!st.ok())
    return st;
  auto ctx = std::make_unique<fsdprt_gpu_context>();
  ctx->device = device;
  const std::string where = format("GPU %d", device);
  cudaError_t rc = cudaSetDevice(device); // retains the primary context
  if (rc == cudaSuccess)
    rc = keep_pool_memory(device);
  if (rc == cudaSuccess)
    rc = cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking);
  if (rc == cudaSuccess)
    rc = cudaStreamCreateWithFlags(&ctx->comm, cudaStreamNonBlocking);
  if (rc != cudaSuccess) {
    st = cuda_status(rc, where + ": creating the rank's streams");
    fsdprt_gpu_context_destroy(ctx.release());
    return st;
  }
  // cuBLAS's handle and workspace at load, not inside the first step.
  st = blas_create(ctx.get());
  if (!st.ok()) {
    fsdprt_gpu_context_destroy(ctx.release());
    return st;
  }
  *out = std::move(ctx);
  return Status::Ok();
}

void *alloc(fsdprt_gpu_context *ctx, int64_t bytes, const char *fn) {
  if (bytes < 0) {
    fail(ctx, Status(FSDPRT_ERR_INVALID_ARGUMENT,
                     format("%s: %s: negative size %lld", who(ctx).c_str(), fn,
                            (long long)bytes)));
    return nullptr;
  }
  if (ctx->capturing) {
    fail(ctx, Status(FSDPRT_ERR_UNSUPPORTED,
                     format("%s: %s of %lld bytes while the compute stream is "
                            "captured into a CUDA graph (a captured step must "
                            "allocate nothing)",
                            who(ctx).c_str(), fn, (long long)bytes)));
    return nullptr;
  }
  // 256-byte granules keep zero-byte allocations unique and non-NULL.
  const size_t size = bytes == 0 ? 256 : size_t(bytes);
  void *p = nullptr;
  cudaError_t rc = cudaMallocAsync(&p, size, ctx->compute);
  if (rc == cudaSuccess) {
    ctx->bytes_allocated += int64_t(size);
    ctx->allocations++;
    std::lock_guard<std::mutex> lock(ctx->alloc_mu);
    ctx->alloc_sizes[p] = int64_t(size);
    ctx->bytes_live += int64_t(size);
    ctx->bytes_peak = std::max(ctx->bytes_peak, ctx->bytes_live);
    return p;
  }
  cudaGetLastError();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  const std::string what =
      format("%s of %lld bytes (%.1f MiB free of %.1f MiB on the device)", fn,
             (long long)bytes, double(free_b) / (1 << 20),
             double(total_b) / (1 << 20));
  Status st = cuda_status(
      rc,
      format("%s: %s%s", who(ctx).c_str(),
             rc == cudaErrorMemoryAllocation ? "out of device memory: " : "",
             what.c_str()));
  fail(ctx, st);
  return nullptr;
}

// Frees `ptr` after the work already enqueued on the compute stream.
void free_on(fsdprt_gpu_context *ctx, void *ptr) {
  {
    std::lock_guard<std::mutex> lock(ctx->alloc_mu);
    auto it = ctx->alloc_sizes.find(ptr);
    if (it != ctx->alloc_sizes.end()) {
      ctx->bytes_live -= it->second;
      ctx->alloc_sizes.erase(it);
    }
  }
  // Freed after the work already enqueued; errors are not worth a failure.
  if (cudaFreeAsync(ptr, ctx->compute) != cudaSuccess)
    cudaGetLastError();
}

// Whether `ptr` points into the context's arena or scratch buffer.
bool owned_by(const fsdprt_gpu_context *ctx, const void *ptr) {
  auto in = [&](const void *base, int64_t bytes) {
    const char *p = static_cast<const char *>(ptr);
    const char *b = static_cast<const char *>(base);
    return base && p >= b && p < b + bytes;
  };
  return in(ctx->arena, ctx->arena_bytes) ||
         in(ctx->scratch, ctx->scratch_bytes);
}

// A buffer the context keeps (the arena, the scratch buffer): at least
// `bytes`, allocated on the first request and reused; a larger request
// replaces it after the work already enqueued on both streams.
void *context_buffer(fsdprt_gpu_context *ctx, void *&buffer, int64_t &size,
                     int64_t bytes, const char *fn) {
  if (buffer && bytes <= size)
    return buffer;
  if (buffer) {
    // Collectives on the communication stream may still read the old
    // buffer: its free waits for them too.
    cudaEvent_t ev = nullptr;
    bool bad =
        failed(ctx, ctx->events.acquire(&ev), fn, "cudaEventCreate") ||
        failed(ctx, cudaEventRecord(ev, ctx->comm), fn, "cudaEventRecord") ||
        failed(ctx, cudaStreamWaitEvent(ctx->compute, ev, 0), fn,
               "cudaStreamWaitEvent");
    if (ev)
      ctx->events.release(ev);
    if (bad)
      return nullptr;
    free_on(ctx, buffer);
    buffer = nullptr;
    size = 0;
  }
  void *p = alloc(ctx, bytes, fn);
  if (p) {
    buffer = p;
    size = bytes;
  }
  return p;
}

} // namespace

extern "C" {

int32_t fsdprt_gpu_built(void) { return 1; }

// 1 in the build over the host emulation of CUDA (build/lib/cuda-emulation).
int32_t fsdprt_gpu_emulated(void) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  return 1;
#else
  return 0;
#endif
}

fsdprt_status_t fsdprt_gpu_device_count(int32_t *count) {
  if (!count)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  int n = 0;
  Status st = count_devices(&n);
  *count = n;
  return st.ok() ? FSDPRT_OK : report(st);
}

fsdprt_status_t fsdprt_gpu_require_devices(int32_t devices) {
  int n = 0;
  Status st = count_devices(&n);
  if (!st.ok())
    return report(
        Status(st.code, format("%d GPU%s needed: %s", (int)devices,
                               devices == 1 ? "" : "s", st.message.c_str())));
  if (n < devices)
    return report(
        Status(FSDPRT_ERR_NO_DEVICE,
               format("%d GPUs needed (one per rank) but %d %s visible (check "
                      "CUDA_VISIBLE_DEVICES, or run fewer ranks)",
                      (int)devices, n, n == 1 ? "is" : "are")));
  return FSDPRT_OK;
}

const char *fsdprt_gpu_last_error_message(void) { return tls_message.c_str(); }

fsdprt_status_t fsdprt_gpu_context_create(int32_t device,
                                          fsdprt_gpu_context_t **ctx) {
  if (!ctx)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *ctx = nullptr;
  std::unique_ptr<fsdprt_gpu_context> c;
  Status st = create_context(device, &c);
  if (!st.ok())
    return report(st);
  *ctx = c.release();
  fsdprt_gpu_set_thread_context(*ctx);
  return FSDPRT_OK;
}

void fsdprt_gpu_context_destroy(fsdprt_gpu_context_t *ctx) {
  if (!ctx)
    return;
  cudaSetDevice(ctx->device);
  if (ctx->compute)
    cudaStreamSynchronize(ctx->compute);
  if (ctx->comm)
    cudaStreamSynchronize(ctx->comm);
  if ((ctx->arena || ctx->scratch) && ctx->compute) {
    if (ctx->arena)
      cudaFreeAsync(ctx->arena, ctx->compute);
    if (ctx->scratch)
      cudaFreeAsync(ctx->scratch, ctx->compute);
    cudaStreamSynchronize(ctx->compute);
  }
  if (tls_ctx == ctx)
    tls_ctx = nullptr;
  blas_destroy(ctx);
  if (ctx->compute)
    cudaStreamDestroy(ctx->compute);
  if (ctx->comm)
    cudaStreamDestroy(ctx->comm);
  delete ctx;
}

void fsdprt_gpu_set_thread_context(fsdprt_gpu_context_t *ctx) {
  tls_ctx = ctx;
  if (ctx)
    cudaSetDevice(ctx->device);
}

fsdprt_gpu_context_t *fsdprt_gpu_get_thread_context(void) { return tls_ctx; }

int32_t fsdprt_gpu_context_device(const fsdprt_gpu_context_t *ctx) {
  return ctx ? ctx->device : -1;
}

void *fsdprt_gpu_compute_stream(const fsdprt_gpu_context_t *ctx) {
  return ctx ? ctx->compute : nullptr;
}

void *fsdprt_gpu_comm_stream(const fsdprt_gpu_context_t *ctx) {
  return ctx ? ctx->comm : nullptr;
}

fsdprt_status_t fsdprt_gpu_synchronize(fsdprt_gpu_context_t *ctx) {
  if (!ctx)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  cudaSetDevice(ctx->device);
  cudaError_t rc = cudaStreamSynchronize(ctx->compute);
  if (rc == cudaSuccess)
    rc = cudaStreamSynchronize(ctx->comm);
  if (rc == cudaSuccess)
    ctx->host_visible_pending = false;
  else
    failed(ctx, rc, "fsdprt_gpu_synchronize", "cudaStreamSynchronize");
  fsdprt_status_t code = ctx->first_error();
  if (code != FSDPRT_OK)
    set_last_message(ctx->first_error_message(), code);
  return code;
}

fsdprt_status_t fsdprt_gpu_context_error(const fsdprt_gpu_context_t *ctx) {
  return ctx ? ctx->first_error() : FSDPRT_ERR_INVALID_ARGUMENT;
}

const char *fsdprt_gpu_context_error_message(const fsdprt_gpu_context_t *ctx) {
  tls_message = ctx ? ctx->first_error_message() : std::string();
  return tls_message.c_str();
}

fsdprt_status_t fsdprt_gpu_context_stats(const fsdprt_gpu_context_t *ctx,
                                         fsdprt_gpu_stats_t *stats) {
  if (!ctx || !stats)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  std::memset(stats, 0, sizeof(*stats));
  stats->events_created = ctx->events.created() + ctx->timed_events.created();
  stats->events_free =
      ctx->events.free_count() + ctx->timed_events.free_count();
  stats->launches = ctx->launches.load();
  stats->module_loads = ctx->module_loads.load();
  stats->gemms = ctx->gemms.load();
  stats->bytes_allocated = uint64_t(ctx->bytes_allocated.load());
  std::lock_guard<std::mutex> lock(ctx->alloc_mu);
  stats->bytes_live = uint64_t(ctx->bytes_live);
  stats->bytes_peak = uint64_t(ctx->bytes_peak);
  stats->allocations = ctx->allocations.load();
  stats->arena_bytes = uint64_t(ctx->arena_bytes);
  stats->scratch_bytes = uint64_t(ctx->scratch_bytes);
  stats->host_waits = ctx->host_waits.load();
  stats->graph_launches = ctx->graph_launches.load();
  stats->split_gemms = ctx->split_gemms.load();
  return FSDPRT_OK;
}

void *fsdprt_gpu_alloc(int64_t bytes) {
  fsdprt_gpu_context *ctx = entry("fsdprt_gpu_alloc");
  return ctx ? alloc(ctx, bytes, "fsdprt_gpu_alloc") : nullptr;
}

void fsdprt_gpu_free(void *ptr) {
  fsdprt_gpu_context *ctx = tls_ctx;
  if (!ptr || !ctx || owned_by(ctx, ptr))
    return;
  free_on(ctx, ptr);
}

int32_t fsdprt_gpu_owned_by_context(const void *ptr) {
  return tls_ctx && owned_by(tls_ctx, ptr) ? 1 : 0;
}

void *fsdprt_gpu_arena(int64_t bytes) {
  fsdprt_gpu_context *ctx = entry("fsdprt_gpu_arena");
  return ctx ? context_buffer(ctx, ctx->arena, ctx->arena_bytes, bytes,
                              "fsdprt_gpu_arena")
             : nullptr;
}

void *fsdprt_gpu_scratch(int64_t bytes) {
  fsdprt_gpu_context *ctx = entry("fsdprt_gpu_scratch");
  return ctx ? context_buffer(ctx, ctx->scratch, ctx->scratch_bytes, bytes,
                              "fsdprt_gpu_scratch")
             : nullptr;
}

// A copy on the compute stream that has finished when it returns: pageable
// sources are staged before the call returns, pinned ones are read later,
// so waiting keeps "src may be reused" true for both (and dst readable).
static fsdprt_status_t copy_and_wait(void *dst, const void *src, int64_t bytes,
                                     const char *api) {
  fsdprt_gpu_context *ctx = entry(api);
  if (!ctx)
    return tls_ctx ? tls_ctx->first_error() : FSDPRT_ERR_NO_COMM;
  if (bytes <= 0)
    return FSDPRT_OK;
  if (!host_wait(ctx, api))
    return ctx->first_error();
  cudaError_t rc =
      cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDefault, ctx->compute);
  if (rc == cudaSuccess)
    rc = cudaStreamSynchronize(ctx->compute);
  if (failed(ctx, rc, api, "cudaMemcpyAsync"))
    return ctx->first_error();
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_gpu_copy_to_device(void *dst, const void *src,
                                          int64_t bytes) {
  return copy_and_wait(dst, src, bytes, "fsdprt_gpu_copy_to_device");
}

fsdprt_status_t fsdprt_gpu_copy_to_host(void *dst, const void *src,
                                        int64_t bytes) {
  return copy_and_wait(dst, src, bytes, "fsdprt_gpu_copy_to_host");
}

fsdprt_status_t fsdprt_gpu_copy_on_device(void *dst, const void *src,
                                          int64_t bytes) {
  fsdprt_gpu_context *ctx = entry("fsdprt_gpu_copy_on_device");
  if (!ctx)
    return tls_ctx ? tls_ctx->first_error() : FSDPRT_ERR_NO_COMM;
  if (bytes <= 0 || dst == src)
    return FSDPRT_OK;
  if (failed(ctx,
             cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                             ctx->compute),
             "fsdprt_gpu_copy_on_device", "cudaMemcpyAsync"))
    return ctx->first_error();
  return FSDPRT_OK;
}

// ---- CUDA graphs -----------------------------------------------------------

fsdprt_status_t fsdprt_gpu_capture_begin(fsdprt_gpu_context_t *ctx) {
  if (!ctx)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  if (ctx->capturing)
    return report(Status(FSDPRT_ERR_INVALID_ARGUMENT,
                         format("%s: fsdprt_gpu_capture_begin: already "
                                "capturing",
                                who(ctx).c_str())));
  cudaSetDevice(ctx->device);
  // Thread-local: the other ranks' threads (their own captures) and the
  // watchdogs' event queries stay legal.
  if (failed(ctx,
             cudaStreamBeginCapture(ctx->compute,
                                    cudaStreamCaptureModeThreadLocal),
             "fsdprt_gpu_capture_begin", "cudaStreamBeginCapture"))
    return ctx->first_error();
  ctx->capturing = true;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_gpu_capture_end(fsdprt_gpu_context_t *ctx,
                                       fsdprt_gpu_graph_t **graph) {
  if (!ctx || !graph)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  *graph = nullptr;
  if (!ctx->capturing)
    return report(Status(FSDPRT_ERR_INVALID_ARGUMENT,
                         format("%s: fsdprt_gpu_capture_end without "
                                "fsdprt_gpu_capture_begin",
                                who(ctx).c_str())));
  cudaGraph_t g = nullptr;
  cudaError_t rc = cudaStreamEndCapture(ctx->compute, &g);
  ctx->capturing = false;
  if (failed(ctx, rc, "fsdprt_gpu_capture_end", "cudaStreamEndCapture"))
    return ctx->first_error();
  if (ctx->first_error() != FSDPRT_OK) {
    cudaGraphDestroy(g);
    return ctx->first_error();
  }
  cudaGraphExec_t exec = nullptr;
  rc = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (failed(ctx, rc, "fsdprt_gpu_capture_end", "cudaGraphInstantiate"))
    return ctx->first_error();
  *graph = new fsdprt_gpu_graph{ctx, exec};
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_gpu_graph_launch(fsdprt_gpu_graph_t *graph) {
  if (!graph)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  fsdprt_gpu_context *ctx = graph->ctx;
  if (ctx->first_error() != FSDPRT_OK)
    return ctx->first_error();
  if (failed(ctx, cudaGraphLaunch(graph->exec, ctx->compute),
             "fsdprt_gpu_graph_launch", "cudaGraphLaunch"))
    return ctx->first_error();
  ctx->graph_launches++;
  return FSDPRT_OK;
}

void fsdprt_gpu_graph_destroy(fsdprt_gpu_graph_t *graph) {
  if (!graph)
    return;
  cudaGraphExecDestroy(graph->exec);
  delete graph;
}

} // extern "C"

void *fsdprt::gpu::scratch_named(int64_t bytes, const char *fn) {
  fsdprt_gpu_context *ctx = entry(fn);
  return ctx ? context_buffer(ctx, ctx->scratch, ctx->scratch_bytes, bytes, fn)
             : nullptr;
}

void *fsdprt::gpu::alloc_named(int64_t bytes, const char *fn) {
  fsdprt_gpu_context *ctx = entry(fn);
  return ctx ? alloc(ctx, bytes, fn) : nullptr;
}

// Host emulation of the stream-ordered CUDA runtime, the driver entry points,
// cuBLAS and NCCL that the GPU runtime uses (see cuda_streams.h, cublas_v2.h,
// nccl.h next to this file).
#include "cublas_v2.h"
#include "cuda.h"
#include "cuda_runtime.h"
#include "nccl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cstdio>
#include <cstdlib>
#include <ucontext.h>

namespace {

using Work = std::function<void()>;

// One lock and one condition for all streams and events: tests are small,
// and a single order makes the waits easy to reason about.
std::mutex mu;
std::condition_variable cv;

cuda_emulation::Config cfg;
thread_local int tls_device = 0;
thread_local cudaError_t tls_last = cudaSuccess;
thread_local cuda_emulation::Launch tls_launch{};

struct Stream;

// One stream capture: the work of its origin stream and of the streams
// that joined it (through an event recorded in the capture), in the order
// it was enqueued.
struct Capture {
  Stream *origin = nullptr;
  std::vector<Work> work;
  // Per joined stream: how much of `work` was enqueued when it last
  // captured something, and how far the origin has waited for it.
  std::map<Stream *, size_t> tail, joined;
  cudaError_t error = cudaSuccess; // what invalidated it
  bool ended = false;
};

struct Stream {
  std::shared_ptr<Capture> capture; // while capturing
  int device = 0;
  uint64_t id = 0; // unique: a later stream may reuse the address
  std::deque<Work> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  // Sticky, as in CUDA: a kernel fault fails every later synchronization.
  cudaError_t error = cudaSuccess;
  std::thread worker;
};
std::set<Stream *> streams; // alive, for cudaFree's device synchronization
uint64_t stream_ids = 0;
thread_local Stream *tls_stream = nullptr; // the stream this thread runs

struct Event {
  Stream *stream = nullptr; // last record; null: complete
  uint64_t position = 0;
  bool timing = true; // created without cudaEventDisableTiming
  // When the stream reached the last record (written by the stream's
  // thread before the position completes; a cell per record, so that a
  // destroyed or re-recorded event leaves the pending stamp valid).
  std::shared_ptr<double> stamp;
  // Recorded in a capture: the capture, the stream and how much of the
  // capture's work came before the record.
  std::shared_ptr<Capture> capture;
  Stream *capture_stream = nullptr;
  size_t capture_pos = 0;
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Allocation {
  size_t bytes;
  int device;
  cudaMemoryType type;
};

std::map<const char *, Allocation, std::less<>> allocations; // by base
std::vector<size_t> used;                                    // per device
std::vector<int> module_loads;
int live_events = 0, live_streams = 0, tf32_gemms = 0, nccl_aborts = 0;
int live_graphs = 0, graph_launches = 0;
int kernel_faults = 0;
std::string last_kernel_fault;

// An event whose last record is in a capture still going on (one recorded
// in a capture that ended has nothing pending: complete).
bool in_capture(const Event *e) { return e->capture && !e->capture->ended; }

bool complete(const Stream *s, uint64_t position) {
  return !s || s->completed >= position;
}

void run_stream(Stream *s) {
  tls_device = s->device;
  tls_stream = s;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty())
      return;
    Work w = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    w();
    lock.lock();
    s->completed++;
    cv.notify_all();
  }
}

void enqueue(cudaStream_t stream, Work w) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s) {
    w();
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (s->capture) {
    Capture &c = *s->capture;
    if (c.error == cudaSuccess) {
      c.work.push_back(std::move(w));
      c.tail[s] = c.work.size();
    }
    return;
  }
  s->queue.push_back(std::move(w));
  s->enqueued++;
  cv.notify_all();
}

cudaError_t fail(cudaError_t e) {
  tls_last = e;
  return e;
}

// A call a capturing stream cannot take: the capture is invalidated (mu
// held).
cudaError_t refuse_in_capture(Stream *s) {
  if (s->capture->error == cudaSuccess)
    s->capture->error = cudaErrorStreamCaptureUnsupported;
  return fail(cudaErrorStreamCaptureUnsupported);
}

bool capturing(cudaStream_t stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  return s && s->capture;
}

bool valid_device() { return tls_device >= 0 && tls_device < cfg.devices; }

cudaError_t device_alloc(void **p, size_t bytes, cudaMemoryType type) {
  if (!p)
    return fail(cudaErrorInvalidValue);
  *p = nullptr;
  if (cfg.devices == 0 || cfg.driver_version == 0)
    return fail(cudaErrorNoDevice);
  std::lock_guard<std::mutex> lock(mu);
  if (type != cudaMemoryTypeHost &&
      used[size_t(tls_device)] + bytes > cfg.memory_per_device)
    return fail(cudaErrorMemoryAllocation);
  // Aligned like cudaMalloc, so alignment-dependent paths are exercised.
  void *mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!mem)
    return fail(cudaErrorMemoryAllocation);
  allocations[static_cast<char *>(mem)] = {bytes, tls_device, type};
  if (type != cudaMemoryTypeHost)
    used[size_t(tls_device)] += bytes;
  *p = mem;
  return cudaSuccess;
}

cudaError_t device_free(void *p) {
  if (!p)
    return cudaSuccess;
  std::lock_guard<std::mutex> lock(mu);
  auto it = allocations.find(static_cast<char *>(p));
  if (it == allocations.end())
    return fail(cudaErrorInvalidValue);
  if (it->second.type != cudaMemoryTypeHost)
    used[size_t(it->second.device)] -= it->second.bytes;
  allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}

// cudaFree and cudaFreeHost synchronize the device in CUDA: the work
// enqueued on the current device's streams before the call finishes before
// the memory goes (freeing at once let the queued copies of an aborted
// descriptor check write into freed memory). Work running on a stream does
// not wait for its own stream; cudaFreeAsync stays stream-ordered.
cudaError_t device_free_synchronized(void *p) {
  if (!p)
    return cudaSuccess;
  {
    std::unique_lock<std::mutex> lock(mu);
    struct Pending {
      Stream *s;
      uint64_t id, position;
    };
    std::vector<Pending> pending;
    for (Stream *s : streams)
      if (s->device == tls_device && s != tls_stream)
        pending.push_back({s, s->id, s->enqueued});
    // cudaStreamDestroy drains a stream before it leaves `streams`.
    cv.wait(lock, [&] {
      for (const Pending &p : pending)
        if (streams.count(p.s) && p.s->id == p.id &&
            p.s->completed < p.position)
          return false;
      return true;
    });
  }
  return device_free(p);
}

} // namespace

namespace cuda_emulation {

void enqueueWork(void *stream, std::function<void()> work) {
  enqueue(static_cast<cudaStream_t>(stream), std::move(work));
}

void configure(const Config &c) {
  std::lock_guard<std::mutex> lock(mu);
  cfg = c;
  used.assign(size_t(std::max(c.devices, 1)), 0);
  module_loads.assign(size_t(std::max(c.devices, 1)), 0);
  tf32_gemms = 0;
  nccl_aborts = 0;
  kernel_faults = 0;
  last_kernel_fault.clear();
}

int kernelFaults() {
  std::lock_guard<std::mutex> lock(mu);
  return kernel_faults;
}
std::string lastKernelFault() {
  std::lock_guard<std::mutex> lock(mu);
  return last_kernel_fault;
}

Config config() { return cfg; }

int moduleLoads(int device) {
  std::lock_guard<std::mutex> lock(mu);
  return module_loads[size_t(device)];
}
int liveEvents() {
  std::lock_guard<std::mutex> lock(mu);
  return live_events;
}
int liveStreams() {
  std::lock_guard<std::mutex> lock(mu);
  return live_streams;
}
int tf32Gemms() {
  std::lock_guard<std::mutex> lock(mu);
  return tf32_gemms;
}
int liveGraphs() {
  std::lock_guard<std::mutex> lock(mu);
  return live_graphs;
}

int graphLaunches() {
  std::lock_guard<std::mutex> lock(mu);
  return graph_launches;
}

int ncclAborts() {
  std::lock_guard<std::mutex> lock(mu);
  return nccl_aborts;
}
Launch currentLaunch() { return tls_launch; }

} // namespace cuda_emulation

namespace {
// The configuration before any configure() call: the emulated libfsdprt
// (build/lib/cuda-emulation) has 8 devices of 80 GiB unless
// FSDPRT_EMULATED_GPUS / FSDPRT_EMULATED_GPU_MEMORY (MiB) say otherwise;
// tests configure() their own.
const bool initial_config = [] {
  cuda_emulation::Config c;
#ifdef FSDPRT_CUDA_EMULATION_LIBRARY
  c.devices = 8;
  c.memory_per_device = size_t(80) << 30;
#endif
  if (const char *n = std::getenv("FSDPRT_EMULATED_GPUS"))
    c.devices = std::max(0, std::atoi(n));
  if (const char *m = std::getenv("FSDPRT_EMULATED_GPU_MEMORY"))
    c.memory_per_device = size_t(std::max(0LL, std::atoll(m))) << 20;
  cuda_emulation::configure(c);
  return true;
}();
} // namespace

// ---- runtime API
// --------------------------------------------------------------

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInsufficientDriver:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  default:
    return "emulated error";
  }
}

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInsufficientDriver:
    return "cudaErrorInsufficientDriver";
  case cudaErrorNoDevice:
    return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  default:
    return "cudaErrorUnknown";
  }
}

cudaError_t cudaGetLastError() {
  cudaError_t e = tls_last;
  tls_last = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int *n) {
  *n = 0;
  if (cfg.driver_version == 0 || cfg.driver_version < CUDART_VERSION)
    return fail(cudaErrorInsufficientDriver);
  if (cfg.devices == 0)
    return fail(cudaErrorNoDevice);
  *n = cfg.devices;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  *v = cfg.driver_version;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= cfg.devices)
    return fail(cudaErrorInvalidDevice);
  tls_device = d;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d) {
  *d = tls_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) {
  const char *env = std::getenv("FSDPRT_EMU_SMS");
  *v = env ? std::atoi(env) : 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  std::lock_guard<std::mutex> lock(mu);
  *total_bytes = cfg.memory_per_device;
  *free_bytes = cfg.memory_per_device - used[size_t(tls_device)];
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned) {
  if (!valid_device())
    return fail(cudaErrorInvalidDevice);
  auto *s = new Stream();
  s->device = tls_device;
  s->worker = std::thread(run_stream, s);
  {
    std::lock_guard<std::mutex> lock(mu);
    live_streams++;
    s->id = ++stream_ids;
    streams.insert(s);
  }
  *out = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return cudaSuccess;
  std::unique_lock<std::mutex> lock(mu);
  if (s->capture)
    return refuse_in_capture(s);
  const uint64_t target = s->enqueued;
  cv.wait(lock, [&] { return s->completed >= target; });
  return s->error;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  std::lock_guard<std::mutex> lock(mu);
  if (s && s->capture)
    return refuse_in_capture(s);
  if (s && s->error != cudaSuccess)
    return s->error;
  return !s || s->completed == s->enqueued ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  cudaStreamSynchronize(stream);
  {
    std::lock_guard<std::mutex> lock(mu);
    s->stop = true;
    live_streams--;
    streams.erase(s);
    cv.notify_all();
  }
  s->worker.join();
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  auto *e = reinterpret_cast<Event *>(event);
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!e)
    return fail(cudaErrorInvalidResourceHandle);
  Stream *on;
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (in_capture(e)) {
      // A dependency inside the capture (the replay runs the captured work
      // in order: nothing to enqueue), or a stream joining it.
      if (!s)
        return fail(cudaErrorStreamCaptureIsolation);
      if (s->capture && s->capture != e->capture) {
        refuse_in_capture(s);
        return fail(cudaErrorStreamCaptureMerge);
      }
      Capture &c = *e->capture;
      if (!s->capture) {
        s->capture = e->capture;
        c.tail.emplace(s, c.work.size());
      }
      if (s == c.origin && e->capture_stream != s) {
        size_t &joined = c.joined[e->capture_stream];
        joined = std::max(joined, e->capture_pos);
      }
      return cudaSuccess;
    }
    // A capture depends only on work captured in it.
    if (s && s->capture) {
      refuse_in_capture(s);
      return fail(cudaErrorStreamCaptureIsolation);
    }
    on = e->stream;
    position = e->position;
  }
  enqueue(stream, [on, position] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return complete(on, position); });
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags) {
  auto *e = new Event();
  e->timing = !(flags & cudaEventDisableTiming);
  *out = reinterpret_cast<cudaEvent_t>(e);
  std::lock_guard<std::mutex> lock(mu);
  live_events++;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) {
  return cudaEventCreateWithFlags(out, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  delete reinterpret_cast<Event *>(event);
  std::lock_guard<std::mutex> lock(mu);
  live_events--;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto *e = reinterpret_cast<Event *>(event);
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!e)
    return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(mu);
  if (s && s->capture) {
    e->capture = s->capture;
    e->capture_stream = s;
    e->capture_pos = s->capture->work.size();
    e->stamp.reset();
    e->stream = nullptr;
    e->position = 0;
    return cudaSuccess;
  }
  e->capture.reset();
  if (e->timing) {
    auto stamp = std::make_shared<double>(0);
    if (s) {
      // Under the same lock as the position: nothing comes between them.
      s->queue.push_back([stamp] { *stamp = now_ms(); });
      s->enqueued++;
      cv.notify_all();
    } else {
      *stamp = now_ms();
    }
    e->stamp = std::move(stamp);
  }
  e->stream = s;
  e->position = s ? s->enqueued : 0;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  auto *a = reinterpret_cast<Event *>(start);
  auto *b = reinterpret_cast<Event *>(end);
  if (!ms || !a || !b)
    return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(mu);
  if (in_capture(a) || in_capture(b))
    return fail(cudaErrorCapturedEvent);
  if (!a->timing || !b->timing || !a->stamp || !b->stamp)
    return fail(cudaErrorInvalidResourceHandle);
  if (!complete(a->stream, a->position) || !complete(b->stream, b->position))
    return fail(cudaErrorNotReady);
  *ms = float(*b->stamp - *a->stamp);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  auto *e = reinterpret_cast<Event *>(event);
  std::lock_guard<std::mutex> lock(mu);
  if (in_capture(e))
    return fail(cudaErrorCapturedEvent);
  return complete(e->stream, e->position) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto *e = reinterpret_cast<Event *>(event);
  std::unique_lock<std::mutex> lock(mu);
  if (in_capture(e))
    return fail(cudaErrorCapturedEvent);
  cv.wait(lock, [&] { return complete(e->stream, e->position); });
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
  return device_alloc(p, bytes, cudaMemoryTypeDevice);
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream) {
  if (capturing(stream)) {
    std::lock_guard<std::mutex> lock(mu);
    return refuse_in_capture(reinterpret_cast<Stream *>(stream));
  }
  return device_alloc(p, bytes, cudaMemoryTypeDevice);
}

cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned) {
  return device_alloc(p, bytes, cudaMemoryTypeManaged);
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
  return device_alloc(p, bytes, cudaMemoryTypeHost);
}

cudaError_t cudaFree(void *p) { return device_free_synchronized(p); }
cudaError_t cudaFreeHost(void *p) { return device_free_synchronized(p); }

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  if (capturing(stream)) {
    std::lock_guard<std::mutex> lock(mu);
    return refuse_in_capture(reinterpret_cast<Stream *>(stream));
  }
  enqueue(stream, [p] { device_free(p); });
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
  std::lock_guard<std::mutex> lock(mu);
  *a = {cudaMemoryTypeUnregistered, -1, nullptr, const_cast<void *>(p)};
  auto it = allocations.upper_bound(static_cast<const char *>(p));
  if (it == allocations.begin())
    return cudaSuccess;
  --it;
  if (static_cast<const char *>(p) < it->first + it->second.bytes + 256) {
    a->type = it->second.type;
    a->device = it->second.device;
    a->devicePointer = const_cast<void *>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind) {
  std::memcpy(d, s, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes,
                            cudaMemcpyKind, cudaStream_t stream) {
  // From pageable host memory CUDA stages the source before returning, so
  // the caller may reuse it at once (a lowered step copies a host scalar
  // from its stack): so does the emulation.
  cudaPointerAttributes attr{};
  cudaPointerGetAttributes(&attr, s);
  if (capturing(stream)) {
    cudaPointerAttributes to{};
    cudaPointerGetAttributes(&to, d);
    if (attr.type == cudaMemoryTypeUnregistered ||
        to.type == cudaMemoryTypeUnregistered) {
      std::lock_guard<std::mutex> lock(mu);
      return refuse_in_capture(reinterpret_cast<Stream *>(stream));
    }
  }
  if (stream && attr.type == cudaMemoryTypeUnregistered) {
    auto staged = std::make_shared<std::vector<char>>(
        static_cast<const char *>(s), static_cast<const char *>(s) + bytes);
    enqueue(stream, [=] { std::memmove(d, staged->data(), bytes); });
    return cudaSuccess;
  }
  enqueue(stream, [=] { std::memmove(d, s, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t bytes) {
  std::memset(p, v, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t stream) {
  enqueue(stream, [=] { std::memset(p, v, bytes); });
  return cudaSuccess;
}

// ---- stream capture and graphs ----------------------------------------------

struct CUgraph_st {
  std::vector<Work> work;
};
struct CUgraphExec_st {
  std::shared_ptr<const std::vector<Work>> work;
};

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return fail(cudaErrorStreamCaptureUnsupported); // the legacy stream
  std::lock_guard<std::mutex> lock(mu);
  if (s->capture)
    return fail(cudaErrorInvalidValue);
  s->capture = std::make_shared<Capture>();
  s->capture->origin = s;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s || !graph)
    return fail(cudaErrorInvalidValue);
  *graph = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Capture> c = s->capture;
  if (!c || c->origin != s)
    return fail(cudaErrorInvalidValue);
  cudaError_t rc =
      c->error != cudaSuccess ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
  for (auto [joined, tail] : c->tail)
    if (joined != s && rc == cudaSuccess &&
        (!c->joined.count(joined) || c->joined[joined] < tail))
      rc = cudaErrorStreamCaptureUnjoined;
  c->ended = true;
  // Every stream of the capture leaves it, as in CUDA.
  for (Stream *other : streams)
    if (other->capture == c)
      other->capture.reset();
  if (rc != cudaSuccess)
    return fail(rc);
  *graph = new CUgraph_st{std::move(c->work)};
  live_graphs++;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  cudaStreamCaptureStatus *status) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!status)
    return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(mu);
  *status = !s || !s->capture ? cudaStreamCaptureStatusNone
            : s->capture->error != cudaSuccess
                ? cudaStreamCaptureStatusInvalidated
                : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long) {
  if (!exec || !graph)
    return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{
      std::make_shared<const std::vector<Work>>(graph->work)};
  std::lock_guard<std::mutex> lock(mu);
  live_graphs++;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec)
    return fail(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(mu);
    graph_launches++;
  }
  std::shared_ptr<const std::vector<Work>> work = exec->work;
  enqueue(stream, [work] {
    for (const Work &w : *work)
      w();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec)
    return fail(cudaErrorInvalidResourceHandle);
  delete exec;
  std::lock_guard<std::mutex> lock(mu);
  live_graphs--;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph)
    return fail(cudaErrorInvalidResourceHandle);
  delete graph;
  std::lock_guard<std::mutex> lock(mu);
  live_graphs--;
  return cudaSuccess;
}

// One pool per device; the emulation frees at once whatever its threshold.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
  if (device < 0 || device >= cfg.devices)
    return fail(cudaErrorInvalidDevice);
  *pool = reinterpret_cast<cudaMemPool_t>(intptr_t(device) + 1);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr,
                                    void *value) {
  return pool && value ? cudaSuccess : fail(cudaErrorInvalidValue);
}

// ---- driver entry points
// ------------------------------------------------------

namespace {

// A kernel of a loaded module: a ModuleImage entry (one call runs the whole
// launch) or a host kernel (one call per CUDA thread).
struct Kernel {
  std::string name;
  void (*fn)(void *const *) = nullptr;
  std::vector<size_t> param_sizes;
  bool per_thread = false;
  bool lockstep = false;
};
struct Module;
struct Function {
  const Kernel *kernel;
  Module *module;
};
struct Module {
  std::vector<std::unique_ptr<Kernel>> kernels;
  int device;
  std::vector<std::unique_ptr<Function>> functions;
};

struct HostTable {
  const char *id_ptr; // the registration's key
  std::vector<cuda_emulation::HostKernel> kernels;
};
std::mutex tables_mu;
std::vector<HostTable> &host_tables() {
  static auto *tables = new std::vector<HostTable>();
  return *tables;
}

CUresult cuModuleLoadData(CUmodule *out, const void *data) {
  if (!data)
    return CUDA_ERROR_INVALID_IMAGE;
  uint32_t magic = 0;
  std::memcpy(&magic, data, sizeof(magic));
  auto m = std::make_unique<Module>();
  m->device = tls_device;
  if (magic == cuda_emulation::kModuleMagic) {
    const auto *image = static_cast<const cuda_emulation::ModuleImage *>(data);
    for (int i = 0; i < image->count; ++i) {
      const cuda_emulation::KernelEntry &e = image->kernels[i];
      auto k = std::make_unique<Kernel>();
      k->name = e.name;
      k->fn = e.fn;
      k->param_sizes.assign(e.param_sizes, e.param_sizes + e.nparams);
      m->kernels.push_back(std::move(k));
    }
  } else if (magic == cuda_emulation::kHostKernelsMagic) {
    uint32_t version = 0;
    std::memcpy(&version, static_cast<const char *>(data) + 4, 4);
    if (version != 1)
      return CUDA_ERROR_INVALID_IMAGE;
    const char *id = static_cast<const char *>(data) + 8;
    std::lock_guard<std::mutex> lock(tables_mu);
    const HostTable *table = nullptr;
    for (const HostTable &t : host_tables())
      if (std::strcmp(t.id_ptr, id) == 0)
        table = &t; // the newest
    if (!table)
      return CUDA_ERROR_NOT_FOUND;
    for (const cuda_emulation::HostKernel &e : table->kernels) {
      auto k = std::make_unique<Kernel>();
      k->name = e.name;
      k->fn = e.fn;
      for (int32_t i = 0; i < e.nparams; ++i)
        k->param_sizes.push_back(size_t(e.param_sizes[i]));
      k->per_thread = true;
      k->lockstep = (e.flags & cuda_emulation::kHostKernelLockstep) != 0;
      m->kernels.push_back(std::move(k));
    }
  } else {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    module_loads[size_t(tls_device)]++;
  }
  *out = reinterpret_cast<CUmodule>(m.release());
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  delete reinterpret_cast<Module *>(module);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *out, CUmodule module,
                             const char *name) {
  auto *m = reinterpret_cast<Module *>(module);
  for (const std::unique_ptr<Kernel> &k : m->kernels)
    if (k->name == name) {
      m->functions.push_back(std::make_unique<Function>(Function{k.get(), m}));
      *out = reinterpret_cast<CUfunction>(m->functions.back().get());
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

// ---- host kernels: threads, warps, fibers -----------------------------------

constexpr unsigned kWarp = 32;

// The CUDA thread that the calling host code runs as.
struct ThreadIds {
  unsigned tid[3], bid[3];
};
thread_local ThreadIds tls_ids{};

struct Fiber {
  ucontext_t ctx;
  ThreadIds ids;
  unsigned warp = 0, lane = 0;
  enum { Ready, AtShuffle, AtBarrier, Done } state = Ready;
  uint64_t generation = 0; // of the shuffle or barrier it waits at
};
struct WarpState {
  unsigned lanes = 0, live = 0, arrived = 0;
  uint64_t generation = 0;
  int32_t values[2][kWarp];
};
// One block of a lock-step kernel on the stream's thread.
struct BlockRun {
  void (*fn)(void *const *) = nullptr;
  void *const *args = nullptr;
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  unsigned live = 0, barrier_arrived = 0;
  uint64_t barrier_generation = 0;
  Fiber *current = nullptr;
  ucontext_t scheduler;
  std::string fault;
};
thread_local BlockRun *tls_block = nullptr;
// Fiber stacks, reused by every launch of the stream's thread.
constexpr size_t kFiberStack = 256 << 10;
thread_local std::vector<std::unique_ptr<char[]>> tls_stacks;

void fiber_main() {
  BlockRun *r = tls_block;
  r->fn(r->args);
  r->current->state = Fiber::Done;
  // Returns to the scheduler through uc_link.
}

void release_if_complete(BlockRun &r, WarpState &w) {
  if (w.arrived > 0 && w.arrived == w.live) {
    w.arrived = 0;
    w.generation++;
  }
  if (r.barrier_arrived > 0 && r.barrier_arrived == r.live) {
    r.barrier_arrived = 0;
    r.barrier_generation++;
  }
}

bool blocked(const BlockRun &r, const Fiber &f) {
  if (f.state == Fiber::AtShuffle)
    return r.warps[f.warp].generation == f.generation;
  if (f.state == Fiber::AtBarrier)
    return r.barrier_generation == f.generation;
  return f.state == Fiber::Done;
}

// Runs one block's threads as fibers, round robin: each runs until its next
// shuffle or barrier (the last lane to arrive goes on), so a warp's lanes
// exchange values as if in lock step. Returns a fault ("" when none).
std::string run_block_lockstep(void (*fn)(void *const *), void *const *args,
                               const cuda_emulation::Launch &g,
                               const unsigned bid[3]) {
  BlockRun r;
  r.fn = fn;
  r.args = args;
  const unsigned n = g.block[0] * g.block[1] * g.block[2];
  r.fibers.resize(n);
  r.warps.resize((n + kWarp - 1) / kWarp);
  while (tls_stacks.size() < n)
    tls_stacks.push_back(std::unique_ptr<char[]>(new char[kFiberStack]));
  for (unsigned i = 0; i < n; ++i) {
    Fiber &f = r.fibers[i];
    f.ids = {{i % g.block[0], (i / g.block[0]) % g.block[1],
              i / (g.block[0] * g.block[1])},
             {bid[0], bid[1], bid[2]}};
    f.warp = i / kWarp;
    f.lane = i % kWarp;
    r.warps[f.warp].lanes++;
    r.warps[f.warp].live++;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = tls_stacks[i].get();
    f.ctx.uc_stack.ss_size = kFiberStack;
    f.ctx.uc_link = &r.scheduler;
    makecontext(&f.ctx, fiber_main, 0);
  }
  r.live = n;
  tls_block = &r;
  while (r.live > 0 && r.fault.empty()) {
    bool progressed = false;
    for (Fiber &f : r.fibers) {
      if (blocked(r, f))
        continue;
      progressed = true;
      f.state = Fiber::Ready;
      r.current = &f;
      tls_ids = f.ids;
      swapcontext(&r.scheduler, &f.ctx);
      if (f.state == Fiber::Done) {
        WarpState &w = r.warps[f.warp];
        w.live--;
        r.live--;
        if (w.arrived > 0 && r.fault.empty())
          r.fault = "a lane of a warp returned while others waited at a "
                    "shuffle (divergent shuffle)";
        if (r.barrier_arrived > 0 && r.fault.empty())
          r.fault = "a thread returned while others waited at a barrier";
        release_if_complete(r, w);
      }
    }
    if (!progressed && r.fault.empty())
      r.fault = "deadlock: every thread waits at a shuffle or barrier that "
                "the others do not reach";
  }
  // A fault abandons the fibers that still wait (their stacks are reused).
  tls_block = nullptr;
  return r.fault;
}

// The launch fails: the stream's later synchronizations report it, the
// message (which CUDA would not have) goes to stderr.
void record_fault(Stream *s, const std::string &kernel,
                  const std::string &why) {
  std::string msg = "cuda emulation: kernel " + kernel + ": " + why;
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::lock_guard<std::mutex> lock(mu);
  kernel_faults++;
  last_kernel_fault = msg;
  if (s)
    s->error = cudaErrorLaunchFailure;
  else
    tls_last = cudaErrorLaunchFailure;
}

void run_grid(Stream *s, const Kernel &k, void *const *args,
              const cuda_emulation::Launch &g) {
  unsigned bid[3];
  for (bid[2] = 0; bid[2] < g.grid[2]; ++bid[2])
    for (bid[1] = 0; bid[1] < g.grid[1]; ++bid[1])
      for (bid[0] = 0; bid[0] < g.grid[0]; ++bid[0]) {
        if (k.lockstep) {
          std::string fault = run_block_lockstep(k.fn, args, g, bid);
          if (!fault.empty()) {
            record_fault(s, k.name, fault);
            return;
          }
          continue;
        }
        ThreadIds ids{{0, 0, 0}, {bid[0], bid[1], bid[2]}};
        for (ids.tid[2] = 0; ids.tid[2] < g.block[2]; ++ids.tid[2])
          for (ids.tid[1] = 0; ids.tid[1] < g.block[1]; ++ids.tid[1])
            for (ids.tid[0] = 0; ids.tid[0] < g.block[0]; ++ids.tid[0]) {
              tls_ids = ids;
              k.fn(args);
            }
      }
}

CUresult cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy,
                        unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned, CUstream stream, void **params, void **) {
  auto *f = reinterpret_cast<Function *>(function);
  auto *s = reinterpret_cast<Stream *>(stream);
  // A module belongs to the device (context) it was loaded on.
  if (s && s->device != f->module->device)
    return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->device != tls_device)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (f->kernel->per_thread && (bx * by * bz == 0 || bx * by * bz > 1024))
    return CUDA_ERROR_INVALID_VALUE;
  // Parameter values are copied at launch, as CUDA does.
  auto storage = std::make_shared<std::vector<std::vector<char>>>();
  for (size_t size : f->kernel->param_sizes) {
    const char *p = static_cast<const char *>(params[storage->size()]);
    storage->emplace_back(p, p + size);
  }
  cuda_emulation::Launch geometry{{gx, gy, gz}, {bx, by, bz}};
  const Kernel *k = f->kernel;
  enqueue(reinterpret_cast<cudaStream_t>(stream), [storage, geometry, k, s] {
    std::vector<void *> args;
    for (auto &v : *storage)
      args.push_back(v.data());
    tls_launch = geometry;
    if (k->per_thread)
      run_grid(s, *k, args.data(), geometry);
    else
      k->fn(args.data());
  });
  return CUDA_SUCCESS;
}

template <typename T>
CUresult fill(CUdeviceptr dst, T value, size_t count, CUstream stream) {
  T *p = reinterpret_cast<T *>(dst);
  enqueue(reinterpret_cast<cudaStream_t>(stream), [=] {
    for (size_t i = 0; i < count; ++i)
      p[i] = value;
  });
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
  return fill<uint32_t>(dst, v, n, s);
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n,
                          CUstream s) {
  return fill<uint16_t>(dst, v, n, s);
}

CUresult cuGetErrorName(CUresult rc, const char **name) {
  switch (rc) {
  case CUDA_SUCCESS:
    *name = "CUDA_SUCCESS";
    break;
  case CUDA_ERROR_INVALID_IMAGE:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    break;
  case CUDA_ERROR_INVALID_CONTEXT:
    *name = "CUDA_ERROR_INVALID_CONTEXT";
    break;
  case CUDA_ERROR_INVALID_HANDLE:
    *name = "CUDA_ERROR_INVALID_HANDLE";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    break;
  default:
    *name = "CUDA_ERROR_UNKNOWN";
  }
  return CUDA_SUCCESS;
}

} // namespace

cudaError_t
cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned,
                                 unsigned long long,
                                 cudaDriverEntryPointQueryResult *status) {
  static const std::unordered_map<std::string, void *> table = {
      {"cuModuleLoadData", reinterpret_cast<void *>(&cuModuleLoadData)},
      {"cuModuleUnload", reinterpret_cast<void *>(&cuModuleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void *>(&cuModuleGetFunction)},
      {"cuLaunchKernel", reinterpret_cast<void *>(&cuLaunchKernel)},
      {"cuMemsetD32Async", reinterpret_cast<void *>(&cuMemsetD32Async)},
      {"cuMemsetD16Async", reinterpret_cast<void *>(&cuMemsetD16Async)},
      {"cuGetErrorName", reinterpret_cast<void *>(&cuGetErrorName)},
  };
  auto it = table.find(symbol);
  *fn = it == table.end() ? nullptr : it->second;
  if (status)
    *status =
        *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// ---- cuBLAS -----------------------------------------------------------------

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

float bf16_to_float(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return uint16_t(u >> 16);
}

// TF32 keeps 10 mantissa bits (round to nearest even).
float to_tf32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0xfff + ((u >> 13) & 1);
  u &= ~0x1fffu;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Operand {
  const void *p;
  cudaDataType type;
  float at(long long i) const {
    return type == CUDA_R_32F
               ? static_cast<const float *>(p)[i]
               : bf16_to_float(static_cast<const uint16_t *>(p)[i]);
  }
};

} // namespace

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!valid_device() || cfg.devices == 0)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "the resource allocation failed";
  default:
    return "an invalid value was used as an argument";
  }
}

// Column-major, as cuBLAS: C = alpha op(A) op(B) + beta C per batch entry.
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
    int n, int k, const void *alpha, const void *A, cudaDataType at, int lda,
    long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
    const void *beta, void *C, cudaDataType ct, int ldc, long long sc,
    int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  // One input type; C of that type, or f32 for bf16 inputs (cuBLAS's
  // bf16 x bf16 -> f32 with f32 compute).
  if (at != bt || (at != ct && !(at == CUDA_R_16BF && ct == CUDA_R_32F)) ||
      (compute == CUBLAS_COMPUTE_32F_FAST_TF32 && at != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const float al = *static_cast<const float *>(alpha);
  const float be = *static_cast<const float *>(beta);
  const bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (tf32) {
    std::lock_guard<std::mutex> lock(mu);
    tf32_gemms++;
  }
  enqueue(handle->stream, [=] {
    for (int b = 0; b < batch; ++b) {
      Operand a{static_cast<const char *>(A) +
                    b * sa * (at == CUDA_R_32F ? 4 : 2),
                at};
      Operand bb{static_cast<const char *>(B) +
                     b * sb * (bt == CUDA_R_32F ? 4 : 2),
                 bt};
      char *c = static_cast<char *>(C) + b * sc * (ct == CUDA_R_32F ? 4 : 2);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          float acc = 0;
          for (int l = 0; l < k; ++l) {
            float x = a.at(ta == CUBLAS_OP_N ? i + (long long)l * lda
                                             : l + (long long)i * lda);
            float y = bb.at(tb == CUBLAS_OP_N ? l + (long long)j * ldb
                                              : j + (long long)l * ldb);
            acc += tf32 ? to_tf32(x) * to_tf32(y) : x * y;
          }
          const long long idx = i + (long long)j * ldc;
          if (ct == CUDA_R_32F) {
            float *cf = reinterpret_cast<float *>(c);
            cf[idx] = al * acc + (be == 0 ? 0.0f : be * cf[idx]);
          } else {
            uint16_t *ch = reinterpret_cast<uint16_t *>(c);
            ch[idx] = float_to_bf16(
                al * acc + (be == 0 ? 0.0f : be * bf16_to_float(ch[idx])));
          }
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

// ---- NCCL -------------------------------------------------------------------

namespace {

struct Part {
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int kind; // 0 all-gather, 1 reduce-scatter, 2 all-reduce
};

struct Round {
  std::vector<Part> parts;
  int arrived = 0, left = 0;
  bool done = false;
};

struct SplitRound {
  std::vector<std::pair<int, int>> color_key; // per parent rank
  std::vector<std::shared_ptr<struct Clique>> child;
  std::vector<int> child_rank;
  int arrived = 0, left = 0;
  bool done = false;
};

struct Clique {
  int n = 0;
  std::vector<int> devices; // -1 until the rank joined
  bool aborted = false;
  std::map<uint64_t, Round> rounds;
  std::map<uint64_t, SplitRound> splits;
};

struct CommState {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  uint64_t next_seq = 0, next_split = 0;
  std::atomic<int> async{ncclSuccess};
  std::atomic<bool> aborted{false};
};

std::map<std::string, std::weak_ptr<Clique>> cliques; // by unique id
std::atomic<uint64_t> id_counter{1};

} // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
};

namespace {

size_t type_size(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

double load(const void *p, size_t i, ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return static_cast<const int8_t *>(p)[i];
  case ncclUint8:
    return static_cast<const uint8_t *>(p)[i];
  case ncclInt32:
    return static_cast<const int32_t *>(p)[i];
  case ncclUint32:
    return static_cast<const uint32_t *>(p)[i];
  case ncclInt64:
    return double(static_cast<const int64_t *>(p)[i]);
  case ncclUint64:
    return double(static_cast<const uint64_t *>(p)[i]);
  case ncclBfloat16:
    return bf16_to_float(static_cast<const uint16_t *>(p)[i]);
  case ncclFloat32:
    return static_cast<const float *>(p)[i];
  default:
    return static_cast<const double *>(p)[i];
  }
}

void store(void *p, size_t i, ncclDataType_t t, double v) {
  switch (t) {
  case ncclInt8:
    static_cast<int8_t *>(p)[i] = int8_t(v);
    break;
  case ncclUint8:
    static_cast<uint8_t *>(p)[i] = uint8_t(v);
    break;
  case ncclInt32:
    static_cast<int32_t *>(p)[i] = int32_t(v);
    break;
  case ncclUint32:
    static_cast<uint32_t *>(p)[i] = uint32_t(v);
    break;
  case ncclInt64:
    static_cast<int64_t *>(p)[i] = int64_t(v);
    break;
  case ncclUint64:
    static_cast<uint64_t *>(p)[i] = uint64_t(v);
    break;
  case ncclBfloat16:
    static_cast<uint16_t *>(p)[i] = float_to_bf16(float(v));
    break;
  case ncclFloat32:
    static_cast<float *>(p)[i] = float(v);
    break;
  default:
    static_cast<double *>(p)[i] = v;
  }
}

double reduce(const std::vector<Part> &parts, size_t i) {
  double acc = load(parts[0].send, i, parts[0].type);
  for (size_t r = 1; r < parts.size(); ++r) {
    double v = load(parts[r].send, i, parts[r].type);
    switch (parts[0].op) {
    case ncclMax:
      acc = std::max(acc, v);
      break;
    case ncclMin:
      acc = std::min(acc, v);
      break;
    case ncclProd:
      acc *= v;
      break;
    default:
      acc += v;
    }
  }
  return parts[0].op == ncclAvg ? acc / double(parts.size()) : acc;
}

// Moves the data of a complete round; results go through temporaries, so
// in-place calls read their inputs before any rank's output is written.
void move_data(std::vector<Part> &parts) {
  const size_t n = parts.size(), count = parts[0].count;
  const ncclDataType_t t = parts[0].type;
  const size_t es = type_size(t);
  std::vector<std::vector<char>> out(n);
  for (size_t r = 0; r < n; ++r) {
    if (parts[0].kind == 0) {
      out[r].resize(n * count * es);
      for (size_t j = 0; j < n; ++j)
        std::memcpy(out[r].data() + j * count * es, parts[j].send, count * es);
    } else {
      out[r].resize(count * es);
      const size_t base = parts[0].kind == 1 ? r * count : 0;
      for (size_t i = 0; i < count; ++i)
        store(out[r].data(), i, t, reduce(parts, base + i));
    }
  }
  for (size_t r = 0; r < n; ++r)
    std::memcpy(parts[r].recv, out[r].data(), out[r].size());
}

// Stream work of one collective: meets the other ranks' calls.
// The round is numbered when the stream runs the collective (the order of
// the rank's collectives on its stream), so that a graph's replays meet
// their peers' like new calls.
void meet(std::shared_ptr<CommState> st, Part part) {
  std::unique_lock<std::mutex> lock(mu);
  const uint64_t seq = st->next_seq++;
  Clique &c = *st->clique;
  Round &round = c.rounds[seq];
  if (round.parts.empty()) {
    round.parts.resize(size_t(c.n));
    round.left = c.n;
  }
  round.parts[size_t(st->rank)] = part;
  if (++round.arrived == c.n) {
    move_data(round.parts);
    round.done = true;
    cv.notify_all();
  }
  cv.wait(lock, [&] { return round.done || c.aborted || st->aborted; });
  if (!round.done)
    st->async = ncclSystemError;
  // Ranks that never came never leave: an aborted round stays (small).
  if (--round.left == 0)
    c.rounds.erase(seq);
}

// The collectives of an open group (ncclGroupStart .. ncclGroupEnd) of this
// thread: NCCL defers them to ncclGroupEnd, which launches each stream's
// share as one operation; here one stream work item per stream meets the
// peers' calls in the order they were issued (every rank issues a group's
// collectives in the same order, as NCCL requires).
struct Grouped {
  std::shared_ptr<CommState> state;
  cudaStream_t stream;
  Part part;
};
thread_local int group_depth = 0;
thread_local std::vector<Grouped> group_calls;

ncclResult_t collective(ncclComm_t comm, cudaStream_t stream, Part part) {
  if (!comm)
    return ncclInvalidArgument;
  std::shared_ptr<CommState> st = comm->state;
  if (st->aborted)
    return ncclInvalidUsage;
  if (group_depth > 0) {
    group_calls.push_back(Grouped{st, stream, part});
    return ncclSuccess;
  }
  enqueue(stream, [st, part] { meet(st, part); });
  return ncclSuccess;
}

ncclResult_t join(std::shared_ptr<Clique> clique, int rank, ncclComm_t *out) {
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int d : clique->devices)
      if (d == tls_device) {
        // NCCL fails the whole communicator ("Duplicate GPU detected").
        clique->aborted = true;
        cv.notify_all();
        return ncclInvalidUsage;
      }
    clique->devices[size_t(rank)] = tls_device;
  }
  auto st = std::make_shared<CommState>();
  st->clique = std::move(clique);
  st->rank = rank;
  *out = new ncclComm{st};
  return ncclSuccess;
}

} // namespace

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
    return "no error";
  case ncclSystemError:
    return "unhandled system error (emulated: communicator aborted)";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage (emulated: e.g. duplicate GPU in a communicator)";
  default:
    return "emulated NCCL error";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "emulated-%llu",
                (unsigned long long)id_counter++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  if (rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  std::shared_ptr<Clique> c;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::weak_ptr<Clique> &slot = cliques[std::string(id.internal)];
    c = slot.lock();
    if (!c) {
      c = std::make_shared<Clique>();
      c->n = nranks;
      c->devices.assign(size_t(nranks), -1);
      slot = c;
    }
  }
  return join(c, rank, comm);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  std::shared_ptr<CommState> st = comm->state;
  Clique &parent = *st->clique;
  const uint64_t idx = st->next_split++;
  std::unique_lock<std::mutex> lock(mu);
  SplitRound &sr = parent.splits[idx];
  if (sr.color_key.empty()) {
    sr.color_key.resize(size_t(parent.n));
    sr.child.resize(size_t(parent.n));
    sr.child_rank.resize(size_t(parent.n));
    sr.left = parent.n;
  }
  sr.color_key[size_t(st->rank)] = {color, key};
  if (++sr.arrived == parent.n) {
    std::map<int, std::vector<std::pair<int, int>>> members; // key, rank
    for (int r = 0; r < parent.n; ++r)
      members[sr.color_key[size_t(r)].first].push_back(
          {sr.color_key[size_t(r)].second, r});
    for (auto &[col, list] : members) {
      std::sort(list.begin(), list.end());
      auto child = std::make_shared<Clique>();
      child->n = int(list.size());
      child->devices.assign(list.size(), -1);
      for (size_t i = 0; i < list.size(); ++i) {
        sr.child[size_t(list[i].second)] = child;
        sr.child_rank[size_t(list[i].second)] = int(i);
      }
    }
    sr.done = true;
    cv.notify_all();
  }
  cv.wait(lock, [&] { return sr.done || parent.aborted; });
  if (!sr.done)
    return ncclSystemError;
  auto child = sr.child[size_t(st->rank)];
  const int child_rank = sr.child_rank[size_t(st->rank)];
  if (--sr.left == 0)
    parent.splits.erase(idx);
  lock.unlock();
  return join(child, child_rank, newcomm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mu);
    comm->state->aborted = true;
    comm->state->clique->aborted = true;
    nccl_aborts++;
    cv.notify_all();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error) {
  *error = ncclResult_t(comm->state->async.load());
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0)
    return ncclInvalidUsage;
  if (--group_depth > 0) // nested groups launch with the outermost end
    return ncclSuccess;
  std::vector<Grouped> calls = std::move(group_calls);
  group_calls.clear();
  std::vector<cudaStream_t> streams;
  for (const Grouped &g : calls)
    if (g.state->aborted)
      return ncclInvalidUsage;
  for (const Grouped &g : calls)
    if (std::find(streams.begin(), streams.end(), g.stream) == streams.end())
      streams.push_back(g.stream);
  for (cudaStream_t stream : streams) {
    std::vector<Grouped> mine;
    for (const Grouped &g : calls)
      if (g.stream == stream)
        mine.push_back(g);
    enqueue(stream, [mine] {
      for (const Grouped &g : mine)
        meet(g.state, g.part);
    });
  }
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, stream, Part{send, recv, count, type, ncclSum, 0});
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, stream, Part{send, recv, count, type, op, 1});
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, stream, Part{send, recv, count, type, op, 2});
}

// ---- host kernels: registration and what the kernels call -------------------

namespace cuda_emulation {

bool registerHostKernels(const char *id, const HostKernel *table, int count) {
  if (!id || count < 0 || (count > 0 && !table))
    return false;
  HostTable t{id, {}};
  for (int i = 0; i < count; ++i) {
    if (!table[i].name || !table[i].fn || table[i].nparams < 0 ||
        (table[i].nparams > 0 && !table[i].param_sizes))
      return false;
    t.kernels.push_back(table[i]);
  }
  std::lock_guard<std::mutex> lock(tables_mu);
  host_tables().push_back(std::move(t));
  return true;
}

void unregisterHostKernels(const char *id) {
  std::lock_guard<std::mutex> lock(tables_mu);
  auto &tables = host_tables();
  for (auto it = tables.begin(); it != tables.end(); ++it)
    if (it->id_ptr == id) {
      tables.erase(it);
      return;
    }
}

int32_t hostIndex(int32_t which) {
  const unsigned d = unsigned(which) % 3;
  switch (which / 3) {
  case 0:
    return int32_t(tls_ids.tid[d]);
  case 1:
    return int32_t(tls_ids.bid[d]);
  case 2:
    return int32_t(tls_launch.block[d]);
  case 3:
    return int32_t(tls_launch.grid[d]);
  default:
    return 0;
  }
}

int32_t hostShuffleXor(int32_t value, int32_t offset, int32_t width) {
  BlockRun *r = tls_block;
  if (!r) // a kernel not compiled as lock-step: a warp of one lane
    return value;
  Fiber *f = r->current;
  WarpState &w = r->warps[f->warp];
  const uint64_t generation = w.generation;
  w.values[generation & 1][f->lane] = value;
  if (w.live < w.lanes && r->fault.empty())
    r->fault = "a shuffle after a lane of its warp returned (divergent "
               "shuffle)";
  if (++w.arrived == w.live) {
    w.arrived = 0;
    w.generation++;
  } else {
    f->state = Fiber::AtShuffle;
    f->generation = generation;
    swapcontext(&f->ctx, &r->scheduler);
  }
  // xor within segments of `width` lanes; a partner outside the segment or
  // the warp leaves the value as it is (as shfl.sync.bfly does).
  const unsigned segment = width > 0 && width <= int32_t(kWarp) ? width : kWarp;
  const unsigned src = f->lane ^ unsigned(offset);
  if (src >= w.lanes || src / segment != f->lane / segment)
    return value;
  return w.values[generation & 1][src];
}

void hostBarrier() {
  BlockRun *r = tls_block;
  if (!r)
    return;
  Fiber *f = r->current;
  const uint64_t generation = r->barrier_generation;
  if (++r->barrier_arrived == r->live) {
    r->barrier_arrived = 0;
    r->barrier_generation++;
    return;
  }
  f->state = Fiber::AtBarrier;
  f->generation = generation;
  swapcontext(&f->ctx, &r->scheduler);
}

} // namespace cuda_emulation

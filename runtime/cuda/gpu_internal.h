// Internal definitions of the GPU runtime (runtime/cuda): the per-rank
// context, its event pool, error recording and the few driver API entry
// points the runtime needs. Only the CUDA runtime library is linked: the
// driver functions are fetched through cudaGetDriverEntryPointByVersion, so
// that a machine without a driver loads libfsdprt and gets an error status
// instead of a missing libcuda.so.1.
#ifndef FSDPRT_CUDA_GPU_INTERNAL_H
#define FSDPRT_CUDA_GPU_INTERNAL_H

#include "../src/common.h"
#include "fsdprt_gpu.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fsdprt {
namespace gpu {

// Events recycled by one context: a request or an mgpu event takes one and
// gives it back, so steady-state steps create none. CUDA captures an
// event's state when a wait is enqueued, so an event may be re-recorded as
// soon as every wait on its previous record has been enqueued.
class EventPool {
public:
  // `timing`: events that record a time (cudaEventElapsedTime), for the
  // exposed-communication measurement; the others are created without.
  explicit EventPool(bool timing = false) : timing_(timing) {}
  ~EventPool();
  cudaError_t acquire(cudaEvent_t *event);
  void release(cudaEvent_t event);
  uint64_t created() const { return created_.load(); }
  size_t free_count() const;

private:
  const bool timing_;
  mutable std::mutex mu_;
  std::vector<cudaEvent_t> free_;
  std::atomic<uint64_t> created_{0};
};

// The driver functions used through entry points (cuda.h types only).
struct Driver {
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleUnload)(CUmodule) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **) = nullptr;
  CUresult (*memsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*memsetD16Async)(CUdeviceptr, unsigned short, size_t,
                             CUstream) = nullptr;
  CUresult (*getErrorName)(CUresult, const char **) = nullptr;
  std::string error; // why the table is incomplete, "" when complete
};
// Resolved once per process (after the CUDA runtime found a driver).
const Driver &driver();
std::string driver_error(CUresult rc, const char *what);

} // namespace gpu
} // namespace fsdprt

struct fsdprt_gpu_context {
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  // cublasHandle_t and its workspace, created with the context
  // (blas_create): a step's first gemm creates nothing.
  void *blas = nullptr;
  void *blas_workspace = nullptr;
  fsdprt::gpu::EventPool events;
  fsdprt::gpu::EventPool timed_events{/*timing=*/true};
  // Set when work whose result the host reads (a copy into host memory, a
  // host-shared allocation) was enqueued since the last synchronization:
  // mgpuStreamSynchronize waits only then.
  std::atomic<bool> host_visible_pending{false};

  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> module_loads{0};
  std::atomic<uint64_t> gemms{0};
  // Of those, the ones split along K (gpu_blas.cpp), and the device's
  // multiprocessors their policy reads (0 until the first gemm asks).
  std::atomic<uint64_t> split_gemms{0};
  int sms = 0;
  std::atomic<int64_t> bytes_allocated{0};
  // Live allocations by pointer: frees are stream-ordered on the compute
  // stream, so the bytes live at enqueue time are those in stream order.
  mutable std::mutex alloc_mu;
  std::unordered_map<void *, int64_t> alloc_sizes;
  int64_t bytes_live = 0, bytes_peak = 0;
  std::atomic<uint64_t> allocations{0};
  // The step's planned device arena (fsdprt_gpu_arena): allocated on the
  // first request, reused by every later step, grown only for a larger plan.
  void *arena = nullptr;
  int64_t arena_bytes = 0;
  // The split reductions' partials (fsdprt_gpu_scratch): the same rules.
  void *scratch = nullptr;
  int64_t scratch_bytes = 0;
  // Host synchronizations inside entry points a step calls (a captured step
  // may have none) and CUDA graph launches.
  std::atomic<uint64_t> host_waits{0};
  std::atomic<uint64_t> graph_launches{0};
  // Set between fsdprt_gpu_capture_begin and _end: the compute stream is
  // being captured into a CUDA graph. Entry points that would allocate or
  // wait on the host fail instead; collectives are not followed by the
  // watchdog nor timed (their events belong to the capture).
  std::atomic<bool> capturing{false};

  void record_error(const fsdprt::Status &st);
  fsdprt_status_t first_error() const;
  std::string first_error_message() const;

private:
  mutable std::mutex error_mu_;
  fsdprt_status_t first_code_ = FSDPRT_OK;
  std::string first_msg_;
};

// A step captured on a context's compute stream (fsdprt_gpu_capture_end).
struct fsdprt_gpu_graph {
  fsdprt_gpu_context *ctx;
  cudaGraphExec_t exec;
};

namespace fsdprt {
namespace gpu {

// The calling thread's context.
fsdprt_gpu_context *current();
// Status from a CUDA runtime error: OUT_OF_MEMORY for allocation failures,
// NO_DEVICE when the driver or device is missing, else BACKEND.
Status cuda_status(cudaError_t rc, const std::string &what);
// "rank R (GPU D)" of the thread, or "GPU D" without a communicator.
std::string who(const fsdprt_gpu_context *ctx);
// Records `st` on the context, on the thread's communicator (which makes
// later collectives of the rank fail fast) and as the thread's last message.
void fail(fsdprt_gpu_context *ctx, const Status &st);
// Sets the message of fsdprt_gpu_last_error_message and the thread's last
// error (fsdprt_get_last_error).
void set_last_message(const std::string &msg,
                      fsdprt_status_t code = FSDPRT_ERR_BACKEND);
// The thread's context for an entry point that returns nothing: null after
// recording NO_COMM-like errors (no context) or when an error is pending.
fsdprt_gpu_context *entry(const char *fn);
// The preamble of an entry point that enqueues the runtime's own kernels
// (gpu_attention.cpp, gpu_scatter.cpp): the thread's context (entry), then
// INVALID_ARGUMENT "<who>: <fn>(<call>): <bad>" when `bad` is not empty,
// then, when the library was built without nvcc (`built` false),
// UNSUPPORTED naming the missing `kernels`. The context to launch on, or
// null when the call is refused (the error is recorded).
fsdprt_gpu_context *kernel_entry(const char *fn, const std::string &call,
                                 const std::string &bad, bool built,
                                 const char *kernels);
// Records a failing CUDA call of an entry point; true when it failed.
bool failed(fsdprt_gpu_context *ctx, cudaError_t rc, const char *fn,
            const char *what);
// Checks the driver, devices and that `device` exists.
Status check_device(int device);
// Records that an entry point waits on the host (`what`): counted, and an
// error while the compute stream is captured (false then).
bool host_wait(fsdprt_gpu_context *ctx, const char *what);
// The context's scratch buffer (fsdprt_gpu_scratch) with the calling entry
// point's name in its errors: at least `bytes`, valid for the work the
// caller enqueues on the compute stream before it returns (every user of
// the scratch buffer runs in stream order there).
void *scratch_named(int64_t bytes, const char *fn);
// fsdprt_gpu_alloc with the calling entry point's name in its errors.
void *alloc_named(int64_t bytes, const char *fn);
// Creates the context's cuBLAS handle on its compute stream and gives it a
// workspace of its own (gpu_blas.cpp); frees them.
Status blas_create(fsdprt_gpu_context *ctx);
void blas_destroy(fsdprt_gpu_context *ctx);

} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_GPU_INTERNAL_H

// The stream-ordered part of the CUDA runtime API, emulated on the host
// (included by cuda_runtime.h when FSDPRT_CUDA_EMULATION_STREAMS is defined;
// implemented in cuda_streams.cpp). Only what the GPU runtime (runtime/cuda,
// runtime/src/nccl_backend.cpp) and the quantization kernels use.
//
// Model: "device" memory is host memory with an owner device and a
// per-device capacity; every stream is a FIFO of work run in order by its
// own host thread (which has the stream's device current); an event
// remembers the stream position of its last record and is complete when the
// stream has run that far; cudaStreamWaitEvent enqueues a wait for the
// position at the time of the call (so an event may be re-recorded after
// it, as in CUDA). The legacy default stream (NULL) runs work immediately.
// Errors the runtime reacts to (no device, old driver, out of memory,
// invalid device) are reproducible through cuda_emulation::configure.
#ifndef FSDPRT_CUDA_EMULATION_STREAMS_H
#define FSDPRT_CUDA_EMULATION_STREAMS_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

enum : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureMerge = 902,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorCapturedEvent = 907,
};
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
enum { cudaEventDefault = 0, cudaEventDisableTiming = 2 };
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void *devicePointer;
  void *hostPointer;
};
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2
};
enum { cudaEnableDefault = 0 };
#define CUDART_VERSION 13000

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e,
                                unsigned flags = 0);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

// Stream capture and graphs. A capturing stream records its work instead
// of running it; a stream that waits on an event recorded in a capture
// joins that capture, and must be waited on by the capture's origin stream
// before cudaStreamEndCapture (cudaErrorStreamCaptureUnjoined otherwise). A
// graph launch runs the recorded work in the order it was captured (a valid
// order of the graph's dependencies) as one item of the launch stream.
// Stricter than CUDA: a capturing stream refuses allocations and frees
// (CUDA would add memory nodes) as well as synchronization, queries and
// copies from or to pageable host memory; each invalidates the capture.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s,
                                  cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> inline cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s);
cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned flags = 1);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes,
                            cudaMemcpyKind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes,
                            cudaStream_t stream = nullptr);
typedef struct CUmemPoolHandle_st *cudaMemPool_t;
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value);
cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned version, unsigned long long flags,
    cudaDriverEntryPointQueryResult *status = nullptr);

// ---- control and inspection, for tests --------------------------------------
namespace cuda_emulation {

struct Config {
  int devices = 2;
  int driver_version = 13000; // 0: no driver
  size_t memory_per_device = size_t(1) << 30;
};
// Applies `config`; the streams, events and memory of earlier tests must
// have been released.
void configure(const Config &config);
Config config();

// Kernels of an emulated module: a host function that receives the launch's
// argument pointers (copied at launch, as CUDA copies parameter values).
struct KernelEntry {
  const char *name;
  void (*fn)(void *const *args);
  int nparams;
  size_t param_sizes[8];
};
constexpr uint32_t kModuleMagic = 0x454d554d; // "MUME"
struct ModuleImage {
  uint32_t magic;
  int count;
  const KernelEntry *kernels;
};

// Kernels compiled by fsdp-gpu-host-kernels (gpu-emulation=true): one host
// function per CUDA thread, registered as a table by the step's global
// constructor (fsdprt_gpu_register_host_kernels, same layout as
// fsdprt_gpu_host_kernel_t). Their module image is {kHostKernelsMagic,
// version 1, the table's id, NUL}: cuModuleLoadData looks the table up by
// id and cuLaunchKernel runs the grid on the stream's thread, every thread
// of a block in turn; a kernel with kHostKernelLockstep runs each block's
// threads as fibers that switch at every shuffle and barrier.
struct HostKernel {
  const char *name;
  void (*fn)(void *const *params);
  const int64_t *param_sizes;
  int32_t nparams;
  int32_t flags;
};
constexpr uint32_t kHostKernelsMagic = 0x4b485346; // "FSHK"
constexpr int32_t kHostKernelLockstep = 1;
// Registers `table` (copied; the strings and functions must outlive the
// registration) under `id`. The newest registration of an id wins; the
// key of unregisterHostKernels is the id's address, so that two copies of
// one step (equal ids) come and go independently. False if `count` < 0 or
// an entry has no name or function.
bool registerHostKernels(const char *id, const HostKernel *table, int count);
void unregisterHostKernels(const char *id);
// What the kernels call: thread / block index and block / grid size
// (which = 3 * kind + dimension, kinds in that order), a warp shuffle
// (xor, within segments of `width` lanes) and a block barrier.
int32_t hostIndex(int32_t which);
int32_t hostShuffleXor(int32_t value, int32_t offset, int32_t width);
void hostBarrier();
// Errors of emulated kernels (lanes that diverged at a shuffle, a
// deadlock at a barrier) since configure(); the last one's message.
int kernelFaults();
std::string lastKernelFault();

// Module loads (cuModuleLoadData) per device since configure().
int moduleLoads(int device);
// Events alive now (created and not destroyed).
int liveEvents();
// Streams alive now.
int liveStreams();
// Graphs and executable graphs alive now; graph launches since configure().
int liveGraphs();
int graphLaunches();
// GEMMs that ran with TF32 compute (cuBLAS emulation).
int tf32Gemms();
// ncclCommAbort calls since configure().
int ncclAborts();
// Last launch geometry seen by the kernel running on this thread.
struct Launch {
  unsigned grid[3], block[3];
};
Launch currentLaunch();

} // namespace cuda_emulation

#endif

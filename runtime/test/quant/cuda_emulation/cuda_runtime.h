// Host emulation of the small part of CUDA that runtime/cuda/quant_kernels.cu
// and runtime/test/quant/quant_gpu_test.cpp use, so the kernels' indexing,
// vector paths, grid-stride loops, block reductions and launch logic run (and
// get compared with the CPU reference) on machines without a GPU.
//
// With FSDPRT_CUDA_EMULATION_STREAMS defined, the runtime API below is
// replaced by the stream-ordered one of cuda_streams.h (streams as FIFO work
// queues run in order by a host thread each, events, several devices, the
// driver entry points, cuBLAS and NCCL), which the GPU runtime
// (runtime/cuda, the nccl backend) is compiled against for its tests; kernel
// launches on a stream then run in that stream's order.
//
// "Device" memory is host memory. A launch runs its blocks one after another;
// kernels that synchronize (__syncthreads, warp shuffles) run each block's
// CUDA threads as fibers on the launching thread, switching at every
// barrier and shuffle; the others run their threads in a loop. The hardware fp8
// conversion instructions are not emulated: device code takes the software
// path of quant_math.h (the instructions are cross-checked against CUDA's own
// host implementation in cuda_host_conversion_test.cpp).
#ifndef FSDPRT_QUANT_CUDA_EMULATION_RUNTIME_H
#define FSDPRT_QUANT_CUDA_EMULATION_RUNTIME_H

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <math.h>
#include <memory>
#include <mutex>
#include <thread>
#include <ucontext.h>
#include <vector>

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
// Kernels written for both targets test this to reach the emulation's
// dynamic shared memory (cuda_emulation::dynamicShared).
#define FSDPRT_CUDA_EMULATION 1

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned int x_) : x(x_) {}
};
struct uint4 {
  unsigned int x, y, z, w;
};
struct uint2 {
  unsigned int x, y;
};
struct float2 {
  float x, y;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return {a, b, c, d};
}
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float2 make_float2(float a, float b) { return {a, b}; }

namespace cuda_emulation {
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

// One block of a cooperative launch: its CUDA threads are fibers
// (ucontext) on the launching host thread, run round robin, each until its
// next __syncthreads or warp shuffle; the last to arrive goes on, the others
// resume once their barrier or shuffle is complete. Lanes of a warp thus
// exchange values as if in lock step, without a host thread per CUDA
// thread.
struct BlockState {
  struct Fiber {
    ucontext_t ctx;
    unsigned tid = 0;
    enum { Ready, AtShuffle, AtBarrier, Done } state = Ready;
    uint64_t generation = 0; // of the shuffle or barrier it waits at
  };
  std::vector<Fiber> fibers;
  Fiber *current = nullptr;
  ucontext_t scheduler;
  std::function<void()> body; // one CUDA thread of the current block
  unsigned live = 0, barrierArrived = 0;
  uint64_t barrierGeneration = 0;
  std::vector<unsigned> warpLive, warpArrived;
  std::vector<uint64_t> warpGeneration;
  // Shuffle values, two generations (a lane is at most one shuffle ahead
  // of the lanes still reading the previous one).
  std::vector<float> exchange[2];
  // Fragments of warp-collective matrix instructions (mma.sync), kStage
  // words per thread, two generations like the shuffle values.
  static constexpr unsigned kStage = 8;
  std::vector<uint32_t> stage[2];
  // The launch's dynamic shared memory (`extern __shared__` on a GPU),
  // reused by the blocks one after another like static __shared__.
  std::vector<double> dynamicShared;
};
inline BlockState *currentBlock = nullptr;
inline bool cooperative = false;
inline std::mutex atomicMutex;

inline int smCount() {
  const char *env = std::getenv("FSDPRT_EMU_SMS");
  return env ? std::atoi(env) : 2;
}

struct LaunchConfig {
  dim3 grid, block;
  size_t sharedBytes = 0;
  void *stream = nullptr;
  template <typename S = void *>
  LaunchConfig(dim3 g, dim3 b, size_t shared = 0, S s = nullptr)
      : grid(g), block(b), sharedBytes(shared), stream(static_cast<void *>(s)) {
  }
};

// The dynamic shared memory of the running cooperative launch (8-byte
// aligned, zero-filled at launch).
template <typename T> T *dynamicShared() {
  return reinterpret_cast<T *>(currentBlock->dynamicShared.data());
}

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
// Runs `work` in the order of `stream` (cuda_streams.cpp); NULL: now.
void enqueueWork(void *stream, std::function<void()> work);
// Kernels share the block state below, so they run one at a time.
inline std::mutex kernelMutex;
#endif

template <typename Kernel, typename... Args>
void runKernel(bool coop, const LaunchConfig &cfg, Kernel kernel, Args... args);

// Fiber stacks, reused by every cooperative launch of the host thread.
constexpr size_t kFiberStack = 128 << 10;
inline std::vector<std::unique_ptr<char[]>> &fiberStacks() {
  static thread_local std::vector<std::unique_ptr<char[]>> stacks;
  return stacks;
}

inline void fiberMain() {
  currentBlock->body();
  currentBlock->current->state = BlockState::Fiber::Done;
  // Returns to the scheduler through uc_link.
}

inline bool blocked(const BlockState &s, const BlockState::Fiber &f) {
  switch (f.state) {
  case BlockState::Fiber::AtShuffle:
    return s.warpGeneration[f.tid / 32] == f.generation;
  case BlockState::Fiber::AtBarrier:
    return s.barrierGeneration == f.generation;
  case BlockState::Fiber::Done:
    return true;
  default:
    return false;
  }
}

// Runs every thread of every block, blocks one after another. With `coop`
// each CUDA thread of a block is a fiber (BlockState); otherwise threads run
// in a loop.
template <typename Kernel, typename... Args>
void launch(bool coop, const LaunchConfig &cfg, Kernel kernel, Args... args) {
#ifdef FSDPRT_CUDA_EMULATION_STREAMS
  enqueueWork(cfg.stream, [=] {
    std::lock_guard<std::mutex> lock(kernelMutex);
    runKernel(coop, cfg, kernel, args...);
  });
#else
  runKernel(coop, cfg, kernel, args...);
#endif
}

template <typename Kernel, typename... Args>
void runKernel(bool coop, const LaunchConfig &cfg, Kernel kernel,
               Args... args) {
  if (!coop) {
    for (unsigned b = 0; b < cfg.grid.x; ++b)
      for (unsigned t = 0; t < cfg.block.x; ++t) {
        threadIdx = dim3(t);
        blockIdx = dim3(b);
        blockDim = cfg.block;
        gridDim = cfg.grid;
        kernel(args...);
      }
    return;
  }
  const unsigned n = cfg.block.x, warps = (n + 31) / 32;
  BlockState state;
  state.fibers.resize(n);
  state.warpLive.resize(warps);
  state.warpArrived.resize(warps);
  state.warpGeneration.resize(warps);
  state.exchange[0].resize(n);
  state.exchange[1].resize(n);
  state.stage[0].resize(size_t(warps) * 32 * BlockState::kStage);
  state.stage[1].resize(size_t(warps) * 32 * BlockState::kStage);
  state.dynamicShared.resize((cfg.sharedBytes + 7) / 8);
  state.body = [&] { kernel(args...); };
  std::vector<std::unique_ptr<char[]>> &stacks = fiberStacks();
  while (stacks.size() < n)
    stacks.push_back(std::unique_ptr<char[]>(new char[kFiberStack]));
  currentBlock = &state;
  cooperative = true;
  blockDim = cfg.block;
  gridDim = cfg.grid;
  for (unsigned b = 0; b < cfg.grid.x; ++b) {
    blockIdx = dim3(b);
    state.live = n;
    state.barrierArrived = 0;
    for (unsigned w = 0; w < warps; ++w) {
      state.warpLive[w] = std::min(32u, n - 32 * w);
      state.warpArrived[w] = 0;
    }
    for (unsigned t = 0; t < n; ++t) {
      BlockState::Fiber &f = state.fibers[t];
      f.tid = t;
      f.state = BlockState::Fiber::Ready;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks[t].get();
      f.ctx.uc_stack.ss_size = kFiberStack;
      f.ctx.uc_link = &state.scheduler;
      makecontext(&f.ctx, fiberMain, 0);
    }
    while (state.live > 0) {
      bool progressed = false;
      for (BlockState::Fiber &f : state.fibers) {
        if (blocked(state, f))
          continue;
        progressed = true;
        f.state = BlockState::Fiber::Ready;
        state.current = &f;
        threadIdx = dim3(f.tid);
        swapcontext(&state.scheduler, &f.ctx);
        if (f.state == BlockState::Fiber::Done) {
          state.live--;
          // A thread that returns while others wait at a barrier or
          // shuffle would hang a GPU.
          if (state.barrierArrived > 0 || state.warpArrived[f.tid / 32] > 0)
            std::abort();
          state.warpLive[f.tid / 32]--;
        }
      }
      if (!progressed)
        std::abort(); // deadlock: a barrier or shuffle not every thread meets
    }
  }
  cooperative = false;
  currentBlock = nullptr;
}
} // namespace cuda_emulation

using cuda_emulation::blockDim;
using cuda_emulation::blockIdx;
using cuda_emulation::gridDim;
using cuda_emulation::threadIdx;

// ---- device built-ins
// ---------------------------------------------------------
template <typename T> inline T __ldg(const T *p) { return *p; }
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline unsigned int atomicMax(unsigned int *p, unsigned int v) {
  std::lock_guard<std::mutex> lock(cuda_emulation::atomicMutex);
  const unsigned int old = *p;
  if (v > old)
    *p = v;
  return old;
}
inline void __syncthreads() {
  if (!cuda_emulation::cooperative)
    std::abort(); // the launch should have been cooperative
  auto *s = cuda_emulation::currentBlock;
  auto *f = s->current;
  const uint64_t generation = s->barrierGeneration;
  if (++s->barrierArrived == s->live) {
    s->barrierArrived = 0;
    s->barrierGeneration++;
    return;
  }
  f->state = cuda_emulation::BlockState::Fiber::AtBarrier;
  f->generation = generation;
  swapcontext(&f->ctx, &s->scheduler);
}
inline float __shfl_xor_sync(unsigned, float v, int laneMask) {
  if (!cuda_emulation::cooperative)
    std::abort();
  auto *s = cuda_emulation::currentBlock;
  auto *f = s->current;
  const unsigned t = f->tid, warp = t / 32, lane = t % 32;
  const uint64_t generation = s->warpGeneration[warp];
  std::vector<float> &slot = s->exchange[generation & 1];
  slot[t] = v;
  if (++s->warpArrived[warp] == s->warpLive[warp]) {
    s->warpArrived[warp] = 0;
    s->warpGeneration[warp]++;
  } else {
    f->state = cuda_emulation::BlockState::Fiber::AtShuffle;
    f->generation = generation;
    swapcontext(&f->ctx, &s->scheduler);
  }
  const unsigned src = warp * 32 + (lane ^ unsigned(laneMask));
  return src < slot.size() ? slot[src] : v;
}

namespace cuda_emulation {
// A warp-collective step: the calling thread publishes `words` 32-bit
// values (at most BlockState::kStage), waits until every thread of its warp
// has published (the warp must be complete and converged, as mma.sync
// requires), and gets the warp's 32 x kStage staging block: lane L's values
// at [L * kStage, L * kStage + words).
inline const uint32_t *warpStage(const uint32_t *mine, unsigned words) {
  if (!cooperative || words > BlockState::kStage)
    std::abort();
  BlockState *s = currentBlock;
  BlockState::Fiber *f = s->current;
  const unsigned t = f->tid, warp = t / 32;
  if (s->warpLive[warp] != 32)
    std::abort(); // mma.sync needs the whole warp
  const uint64_t generation = s->warpGeneration[warp];
  uint32_t *block =
      s->stage[generation & 1].data() + size_t(warp) * 32 * BlockState::kStage;
  std::memcpy(block + (t % 32) * BlockState::kStage, mine, 4 * words);
  if (++s->warpArrived[warp] == s->warpLive[warp]) {
    s->warpArrived[warp] = 0;
    s->warpGeneration[warp]++;
  } else {
    f->state = BlockState::Fiber::AtShuffle;
    f->generation = generation;
    swapcontext(&f->ctx, &s->scheduler);
  }
  return block;
}

inline float bf16Bits(uint32_t bits16) {
  const uint32_t u = bits16 << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The bits of an IEEE half as a float.
inline float f16Bits(uint32_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
  float x;
  if (exp == 0)
    x = std::ldexp(float(man), -24);
  else if (exp == 31)
    x = man ? NAN : INFINITY;
  else
    x = std::ldexp(float(man | 1024), int(exp) - 25);
  return sign ? -x : x;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 of one
// warp, with the fragment layouts of the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type"); g = lane / 4, t = lane % 4:
//   A (16 x 16, row): a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                     a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, col):  b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C, D (16 x 8):    c[0], c[1] = C[g][2t, 2t+1]  c[2], c[3] = C[g+8][...]
// (the lower element of each pair in the low 16 bits). Products of the
// 16-bit inputs are exact in f32; they are summed in k order, then C added.
inline void mmaM16N8K16(float d[4], const uint32_t a[4], const uint32_t b[2],
                        const float c[4], bool bf16) {
  const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  const uint32_t *w = warpStage(mine, 6);
  auto element = [&](unsigned lane, unsigned reg, unsigned half) {
    const uint32_t bits =
        (w[lane * BlockState::kStage + reg] >> (16 * half)) & 0xffffu;
    return bf16 ? bf16Bits(bits) : f16Bits(bits);
  };
  // A[row][col] and B[k][n] from the lanes that hold them.
  auto aAt = [&](unsigned row, unsigned col) {
    const unsigned reg = (row >= 8 ? 1 : 0) + (col >= 8 ? 2 : 0);
    return element((row % 8) * 4 + (col % 8) / 2, reg, col % 2);
  };
  auto bAt = [&](unsigned k, unsigned n) {
    return element(n * 4 + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0), k % 2);
  };
  const unsigned lane = currentBlock->current->tid % 32;
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i % 2);
    float sum = 0.0f;
    for (unsigned k = 0; k < 16; ++k)
      sum += aAt(row, k) * bAt(k, col);
    d[i] = c[i] + sum;
  }
}
} // namespace cuda_emulation

#ifdef FSDPRT_CUDA_EMULATION_STREAMS
#include "cuda_streams.h"
#else
// ---- runtime API
// ----------------------------------------------------------------
typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated error";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) {
  *v = cuda_emulation::smCount();
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorInvalidValue;
}
template <typename T> inline cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
inline cudaError_t cudaFree(void *p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void *p, int v, size_t bytes) {
  std::memset(p, v, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes,
                                   cudaStream_t = nullptr) {
  return cudaMemset(p, v, bytes);
}
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes,
                              cudaMemcpyKind) {
  std::memcpy(d, s, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes,
                                   cudaMemcpyKind k, cudaStream_t = nullptr) {
  return cudaMemcpy(d, s, bytes, k);
}

// For runtime/test/quant/quant_gpu_check.cu: device properties, 64-bit atomics
// and events (host clock; emulated timings mean nothing).
struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
  std::snprintf(p->name, sizeof(p->name), "host emulation");
  p->major = 0;
  p->minor = 0;
  p->multiProcessorCount = cuda_emulation::smCount();
  return cudaSuccess;
}
inline unsigned long long atomicAdd(unsigned long long *p,
                                    unsigned long long v) {
  std::lock_guard<std::mutex> lock(cuda_emulation::atomicMutex);
  const unsigned long long old = *p;
  *p += v;
  return old;
}
inline unsigned int atomicMin(unsigned int *p, unsigned int v) {
  std::lock_guard<std::mutex> lock(cuda_emulation::atomicMutex);
  const unsigned int old = *p;
  if (v < old)
    *p = v;
  return old;
}
typedef struct CUevent_st *cudaEvent_t;
inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
  *e = reinterpret_cast<cudaEvent_t>(new double(0));
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<double *>(e);
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  *reinterpret_cast<double *>(e) =
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a,
                                        cudaEvent_t b) {
  *ms = static_cast<float>(*reinterpret_cast<double *>(b) -
                           *reinterpret_cast<double *>(a));
  return cudaSuccess;
}

#endif // FSDPRT_CUDA_EMULATION_STREAMS

// Kernels that use more than 48 KiB of dynamic shared memory opt in on a
// GPU; the emulation has no such limit.
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}

#endif

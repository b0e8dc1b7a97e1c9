// The GPU runtime (runtime/cuda) and the nccl backend against the host
// emulation of CUDA, cuBLAS and NCCL (runtime/test/quant/cuda_emulation,
// streams mode): ordering of kernels, collectives and waits across the
// compute and communication streams, event pool reuse, lazy module loads
// per device, per-rank contexts in several rank threads, the watchdog and
// the error paths (no GPU, old driver, too few GPUs, out of memory, two
// ranks on one GPU). Runs without a GPU; the same logic on real hardware is
// bench/gpu/gpu_runtime_test.cpp.
#include "cuda_runtime.h" // the emulation (include order set by CMake)
#include "fsdprt.h"
#include "fsdprt_gpu.h"
#include "fsdprt_quant.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace emu = cuda_emulation;
using namespace std::chrono_literals;

namespace {

// ---- test kernels (host functions behind an emulated module image) --------

std::atomic<bool> gate_open{true};

void k_hold(void *const *) {
  while (!gate_open.load())
    std::this_thread::sleep_for(1ms);
}
void k_fill(void *const *a) { // (float *p, int64_t n, float v)
  float *p = *static_cast<float *const *>(a[0]);
  const int64_t n = *static_cast<const int64_t *>(a[1]);
  const float v = *static_cast<const float *>(a[2]);
  for (int64_t i = 0; i < n; ++i)
    p[i] = v;
}
void k_device(void *const *a) { // (int *out): the device the kernel runs on
  int d = -1;
  cudaGetDevice(&d);
  **static_cast<int *const *>(a[0]) = d;
}
void k_copy(void *const *a) { // (float *dst, const float *src, int64_t n)
  float *dst = *static_cast<float *const *>(a[0]);
  const float *src = *static_cast<const float *const *>(a[1]);
  const int64_t n = *static_cast<const int64_t *>(a[2]);
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

// (float *x, float *count, int64_t n): an optimizer-like update whose
// step count lives on the device: count += 1; x = x / 2 + count.
void k_update(void *const *a) {
  float *x = *static_cast<float *const *>(a[0]);
  float *count = *static_cast<float *const *>(a[1]);
  const int64_t n = *static_cast<const int64_t *>(a[2]);
  count[0] += 1.0f;
  for (int64_t i = 0; i < n; ++i)
    x[i] = x[i] * 0.5f + count[0];
}

const emu::KernelEntry kKernels[] = {
    {"hold", k_hold, 0, {}},
    {"fill", k_fill, 3, {8, 8, 4}},
    {"device", k_device, 1, {8}},
    {"copy", k_copy, 3, {8, 8, 8}},
    {"update", k_update, 3, {8, 8, 8}},
};
const emu::ModuleImage kImage{emu::kModuleMagic, 5, kKernels};

void *module() {
  static void *m =
      mgpuModuleLoad(const_cast<emu::ModuleImage *>(&kImage), sizeof(kImage));
  return m;
}

// Launches `name` on the lowered code's stream (the compute stream).
void launch(const char *name, std::vector<void *> params = {},
            void *mod = module()) {
  void *f = mgpuModuleGetFunction(mod, name);
  void *s = mgpuStreamCreate();
  mgpuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr,
                   int64_t(params.size()));
  mgpuStreamDestroy(s);
}

void fill(float *p, int64_t n, float v) { launch("fill", {&p, &n, &v}); }

struct Emulation : ::testing::Test {
  void SetUp() override { configure({}); }
  void configure(emu::Config c) { emu::configure(c); }
  void TearDown() override {
    gate_open = true;
    EXPECT_EQ(emu::liveStreams(), 0) << "a context leaked its streams";
  }
};

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

std::vector<float> to_host(const float *d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(fsdprt_gpu_copy_to_host(h.data(), d, int64_t(n * sizeof(float))),
            FSDPRT_OK);
  return h;
}

// ---- devices and errors
// -------------------------------------------------------

TEST_F(Emulation, NoGpuNoDriverOldDriverAndTooFewGpusAreClearErrors) {
  int32_t n = -1;
  configure({0, 13000, 1 << 20});
  EXPECT_EQ(fsdprt_gpu_device_count(&n), FSDPRT_ERR_NO_DEVICE);
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(), "no CUDA GPU found"))
      << fsdprt_gpu_last_error_message();

  configure({2, 0, 1 << 20});
  EXPECT_EQ(fsdprt_gpu_device_count(&n), FSDPRT_ERR_NO_DEVICE);
  EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(), "no NVIDIA driver"));

  configure({2, 12040, 1 << 20});
  fsdprt_gpu_context_t *ctx = nullptr;
  EXPECT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_ERR_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr);
  const std::string old = fsdprt_gpu_last_error_message();
  EXPECT_TRUE(contains(old, "supports CUDA 12.4 but this runtime was built "
                            "with CUDA 13.0"))
      << old;

  configure({1, 13000, 1 << 20});
  EXPECT_EQ(fsdprt_gpu_require_devices(2), FSDPRT_ERR_NO_DEVICE);
  EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(),
                       "2 GPUs needed (one per rank) but 1 is visible"))
      << fsdprt_gpu_last_error_message();
  EXPECT_EQ(fsdprt_gpu_require_devices(1), FSDPRT_OK);
  EXPECT_EQ(fsdprt_gpu_context_create(3, &ctx), FSDPRT_ERR_NO_DEVICE);
  EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(),
                       "GPU 3 requested but 1 GPU is visible"));

  fsdprt_nccl_id_t id;
  ASSERT_EQ(fsdprt_nccl_get_unique_id(&id), FSDPRT_OK);
  int64_t shape = 2;
  fsdprt_comm_t *comm = nullptr;
  EXPECT_EQ(fsdprt_nccl_comm_create(1, &shape, 1, &id, 1, nullptr, &comm),
            FSDPRT_ERR_NO_DEVICE);
  EXPECT_EQ(comm, nullptr);
  EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(), "rank 1: GPU 1"))
      << fsdprt_gpu_last_error_message();
}

TEST_F(Emulation, EntryPointsWithoutAContextRecordAnErrorAndDoNothing) {
  std::thread([] {
    EXPECT_EQ(mgpuStreamCreate(), nullptr);
    EXPECT_EQ(fsdprt_gpu_alloc(16), nullptr);
    fsdprt_gpu_gemm_f32(0, 0, 1, 1, 1, 1, nullptr, 1, 0, nullptr, 1, 0, 0,
                        nullptr, 1, 0, 1);
    EXPECT_TRUE(contains(fsdprt_gpu_last_error_message(),
                         "no GPU context on this thread"))
        << fsdprt_gpu_last_error_message();
  }).join();
}

TEST_F(Emulation, OutOfDeviceMemoryIsReportedWithTheSizes) {
  configure({1, 13000, 1 << 20});
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  void *small = fsdprt_gpu_alloc(1024);
  EXPECT_NE(small, nullptr);
  EXPECT_EQ(fsdprt_gpu_alloc(2 << 20), nullptr);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_OUT_OF_MEMORY);
  const std::string msg = fsdprt_gpu_context_error_message(ctx);
  EXPECT_TRUE(contains(msg, "GPU 0: out of device memory")) << msg;
  EXPECT_TRUE(contains(msg, "2097152 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "MiB free of 1.0 MiB")) << msg;
  // After the first error the entry points do nothing.
  EXPECT_EQ(fsdprt_gpu_alloc(16), nullptr);
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_ERR_OUT_OF_MEMORY);
  fsdprt_gpu_free(small);
  fsdprt_gpu_context_destroy(ctx);
}

// ---- contexts, modules, streams, events
// ----------------------------------------

TEST_F(Emulation,
       RankThreadsLaunchOnTheirOwnDeviceAndLoadModulesOncePerDevice) {
  // A module of its own, registered as a "global constructor" would:
  // nothing is loaded yet.
  static const emu::ModuleImage image = kImage;
  void *mod = mgpuModuleLoad(const_cast<emu::ModuleImage *>(&image), 0);
  EXPECT_EQ(emu::moduleLoads(0), 0);
  EXPECT_EQ(mgpuModuleLoad(const_cast<emu::ModuleImage *>(&image), 0), mod);
  mgpuModuleUnload(mod); // the extra reference
  std::vector<int> seen(4, -1);
  std::vector<uint64_t> launches(4, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      fsdprt_gpu_context_t *ctx = nullptr;
      ASSERT_EQ(fsdprt_gpu_context_create(r % 2, &ctx), FSDPRT_OK);
      EXPECT_EQ(fsdprt_gpu_get_thread_context(), ctx);
      int *out = static_cast<int *>(fsdprt_gpu_alloc(sizeof(int)));
      for (int i = 0; i < 3; ++i)
        launch("device", {&out}, mod);
      EXPECT_EQ(fsdprt_gpu_copy_to_host(&seen[size_t(r)], out, sizeof(int)),
                FSDPRT_OK);
      fsdprt_gpu_free(out);
      fsdprt_gpu_stats_t st;
      fsdprt_gpu_context_stats(ctx, &st);
      launches[size_t(r)] = st.launches;
      EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
          << fsdprt_gpu_context_error_message(ctx);
      fsdprt_gpu_context_destroy(ctx);
    });
  for (auto &t : ranks)
    t.join();
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(launches, (std::vector<uint64_t>{3, 3, 3, 3}));
  EXPECT_EQ(emu::moduleLoads(0), 1);
  EXPECT_EQ(emu::moduleLoads(1), 1);
  mgpuModuleUnload(mod);
}

TEST_F(Emulation, UnknownKernelIsAnErrorNamingIt) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  launch("no_such_kernel");
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_BACKEND);
  EXPECT_TRUE(contains(fsdprt_gpu_context_error_message(ctx),
                       "kernel no_such_kernel: cuModuleGetFunction failed: "
                       "CUDA_ERROR_NOT_FOUND"))
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
}

TEST_F(Emulation, StreamSynchronizeWaitsOnlyForHostVisibleWork) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  void *s = mgpuStreamCreate();
  EXPECT_EQ(s, fsdprt_gpu_compute_stream(ctx)); // no stream per function
  const int64_t n = 64;
  float *d = static_cast<float *>(fsdprt_gpu_alloc(n * sizeof(float)));
  gate_open = false;
  launch("hold");
  fill(d, n, 7.0f);
  // Device-only work: the lowered code's synchronization returns at once.
  auto quick = std::async(std::launch::async, [&] {
    fsdprt_gpu_set_thread_context(ctx);
    mgpuStreamSynchronize(s);
  });
  EXPECT_EQ(quick.wait_for(2s), std::future_status::ready);
  // A copy into host memory: now it waits for the stream.
  std::vector<float> host(size_t(n), 0.0f);
  mgpuMemcpy(host.data(), d, n * int64_t(sizeof(float)), s);
  auto slow = std::async(std::launch::async, [&] {
    fsdprt_gpu_set_thread_context(ctx);
    mgpuStreamSynchronize(s);
  });
  EXPECT_EQ(slow.wait_for(50ms), std::future_status::timeout);
  gate_open = true;
  slow.get();
  EXPECT_EQ(host, std::vector<float>(size_t(n), 7.0f));
  fsdprt_gpu_free(d);
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
  fsdprt_gpu_context_destroy(ctx);
}

// As in CUDA, cudaFree and cudaFreeHost wait for the work enqueued before
// them on the current device's streams (the nccl backend frees the
// descriptor check's buffers while an aborted check's copies may still be
// queued); a stream of another device does not hold them up.
TEST_F(Emulation, CudaFreeWaitsForTheEarlierWorkOfTheDevice) {
  cudaStream_t s0 = nullptr, s1 = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
  void *d = nullptr, *h = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  std::promise<void> release1;
  std::shared_future<void> held1 = release1.get_future().share();
  emu::enqueueWork(s1, [held1] { held1.wait(); });
  gate_open = false;
  emu::enqueueWork(s0, [] { k_hold(nullptr); });
  ASSERT_EQ(cudaMemcpyAsync(h, d, 64, cudaMemcpyDeviceToHost, s0), cudaSuccess);
  auto freed = std::async(std::launch::async, [&] {
    cudaSetDevice(0);
    EXPECT_EQ(cudaFree(d), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  });
  EXPECT_EQ(freed.wait_for(50ms), std::future_status::timeout);
  gate_open = true;
  EXPECT_EQ(freed.wait_for(10s), std::future_status::ready);
  release1.set_value();
  freed.get();
  EXPECT_EQ(cudaStreamDestroy(s0), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
}

TEST_F(Emulation, EventsComeFromThePoolAndOrderStreams) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  void *s = mgpuStreamCreate();
  void *other = fsdprt_gpu_comm_stream(ctx);
  const int64_t n = 16;
  float *a = static_cast<float *>(fsdprt_gpu_alloc(n * sizeof(float)));
  float *b = static_cast<float *>(fsdprt_gpu_alloc(n * sizeof(float)));
  for (int i = 0; i < 100; ++i) {
    // a is filled on the compute stream (held), copied on the other
    // stream after an event: the copy must see the fill.
    gate_open = false;
    launch("hold");
    fill(a, n, float(i));
    void *e = mgpuEventCreate();
    mgpuEventRecord(e, s);
    mgpuStreamWaitEvent(other, e);
    mgpuMemcpy(b, a, n * int64_t(sizeof(float)), other);
    mgpuEventDestroy(e); // back to the pool; the wait was captured
    gate_open = true;
    mgpuEventSynchronize(e);
    ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(other)),
              cudaSuccess);
    ASSERT_EQ(b[0], float(i)) << "the copy ran before the event's work";
  }
  fsdprt_gpu_stats_t st;
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.events_created, 1u);
  EXPECT_EQ(st.events_free, 1u);
  fsdprt_gpu_free(a);
  fsdprt_gpu_free(b);
  fsdprt_gpu_context_destroy(ctx);
  EXPECT_EQ(emu::liveEvents(), 0);
}

TEST_F(Emulation, MemsetAndCopiesAreStreamOrdered) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(1, &ctx), FSDPRT_OK);
  void *s = mgpuStreamCreate();
  auto *w = static_cast<uint32_t *>(mgpuMemAlloc(40, s, 0));
  auto *h = static_cast<uint16_t *>(mgpuMemAlloc(20, s, 0));
  auto *shared = static_cast<uint32_t *>(mgpuMemAlloc(40, s, 1));
  gate_open = false;
  launch("hold");
  mgpuMemset32(w, 0xdeadbeefu, 10, s);
  mgpuMemset16(h, 0x3f80, 10, s);
  mgpuMemcpy(shared, w, 40, s);
  EXPECT_NE(shared[0], 0xdeadbeefu); // still held
  gate_open = true;
  mgpuStreamSynchronize(s); // host-shared memory: really waits
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(shared[i], 0xdeadbeefu);
    EXPECT_EQ(h[i], 0x3f80);
  }
  mgpuMemFree(w, s);
  mgpuMemFree(h, s);
  mgpuMemFree(shared, s);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
}

// ---- cuBLAS
// -------------------------------------------------------------------

uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct GemmCase {
  int ta, tb;
  int64_t m, n, k, batch;
};

// Row-major reference over padded, strided storage.
template <typename Get>
std::vector<double> reference(const GemmCase &g, Get a, Get b,
                              const std::vector<double> &c0, int64_t ldc,
                              int64_t sc, double alpha, double beta) {
  std::vector<double> c = c0;
  for (int64_t p = 0; p < g.batch; ++p)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < g.k; ++l)
          acc += a(p, i, l) * b(p, l, j);
        double &out = c[size_t(p * sc + i * ldc + j)];
        out = alpha * acc + beta * out;
      }
  return c;
}

// Every stored element of C (padding columns included: the gemm must leave
// them as they were) within 1e-5 of the reference.
void expectNearStored(const GemmCase &g, const std::vector<float> &got,
                      const std::vector<double> &want, int64_t ldc, int64_t sc,
                      const char *what) {
  for (int64_t p = 0; p < g.batch; ++p)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t idx = size_t(p * sc + i * ldc + j);
        EXPECT_NEAR(got[idx], want[idx], 1e-5)
            << what << "ta=" << g.ta << " tb=" << g.tb << " batch " << p << " ["
            << i << "," << j << "]";
      }
}

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = bf16(v[i]);
  return out;
}

TEST_F(Emulation, GemmsMatchARowMajorReference) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (GemmCase g : {GemmCase{0, 0, 5, 3, 4, 2}, GemmCase{1, 0, 4, 6, 3, 3},
                     GemmCase{0, 1, 7, 2, 5, 1}, GemmCase{1, 1, 3, 3, 8, 2}}) {
    // Stored shapes (rows x cols) with one padding column.
    const int64_t ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k;
    const int64_t br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    const int64_t lda = ac + 1, ldb = bc + 1, ldc = g.n + 1;
    const int64_t sa = ar * lda + 3, sb = br * ldb + 2, sc = g.m * ldc + 1;
    std::vector<float> a(size_t(sa * g.batch)), b(size_t(sb * g.batch)),
        c(size_t(sc * g.batch));
    for (auto *v : {&a, &b, &c})
      for (float &x : *v)
        x = dist(rng);
    auto at = [&](int64_t p, int64_t i, int64_t l) {
      return double(g.ta ? a[size_t(p * sa + l * lda + i)]
                         : a[size_t(p * sa + i * lda + l)]);
    };
    auto bt = [&](int64_t p, int64_t l, int64_t j) {
      return double(g.tb ? b[size_t(p * sb + j * ldb + l)]
                         : b[size_t(p * sb + l * ldb + j)]);
    };
    std::vector<double> c0(c.begin(), c.end());
    auto want =
        reference(g, std::function<double(int64_t, int64_t, int64_t)>(at),
                  std::function<double(int64_t, int64_t, int64_t)>(bt), c0, ldc,
                  sc, 1.5, 0.5);
    auto *da = static_cast<float *>(fsdprt_gpu_alloc(int64_t(a.size() * 4)));
    auto *db = static_cast<float *>(fsdprt_gpu_alloc(int64_t(b.size() * 4)));
    auto *dc = static_cast<float *>(fsdprt_gpu_alloc(int64_t(c.size() * 4)));
    fsdprt_gpu_copy_to_device(da, a.data(), int64_t(a.size() * 4));
    fsdprt_gpu_copy_to_device(db, b.data(), int64_t(b.size() * 4));
    fsdprt_gpu_copy_to_device(dc, c.data(), int64_t(c.size() * 4));
    fsdprt_gpu_gemm_f32(g.ta, g.tb, g.m, g.n, g.k, 1.5f, da, lda, sa, db, ldb,
                        sb, 0.5f, dc, ldc, sc, g.batch);
    expectNearStored(g, to_host(dc, c.size()), want, ldc, sc, "");

    // bf16: the same problem on bf16-rounded inputs, f32 accumulation.
    std::vector<uint16_t> a16 = toBf16(a), b16 = toBf16(b), c16 = toBf16(c);
    auto a16t = [&](int64_t p, int64_t i, int64_t l) {
      return double(from_bf16(g.ta ? a16[size_t(p * sa + l * lda + i)]
                                   : a16[size_t(p * sa + i * lda + l)]));
    };
    auto b16t = [&](int64_t p, int64_t l, int64_t j) {
      return double(from_bf16(g.tb ? b16[size_t(p * sb + j * ldb + l)]
                                   : b16[size_t(p * sb + l * ldb + j)]));
    };
    std::vector<double> c16d(c16.size());
    for (size_t i = 0; i < c16.size(); ++i)
      c16d[i] = from_bf16(c16[i]);
    auto want16 =
        reference(g, std::function<double(int64_t, int64_t, int64_t)>(a16t),
                  std::function<double(int64_t, int64_t, int64_t)>(b16t), c16d,
                  ldc, sc, 1.5, 0.5);
    fsdprt_gpu_copy_to_device(da, a16.data(), int64_t(a16.size() * 2));
    fsdprt_gpu_copy_to_device(db, b16.data(), int64_t(b16.size() * 2));
    fsdprt_gpu_copy_to_device(dc, c16.data(), int64_t(c16.size() * 2));
    fsdprt_gpu_gemm_bf16(g.ta, g.tb, g.m, g.n, g.k, 1.5f,
                         reinterpret_cast<uint16_t *>(da), lda, sa,
                         reinterpret_cast<uint16_t *>(db), ldb, sb, 0.5f,
                         reinterpret_cast<uint16_t *>(dc), ldc, sc, g.batch);
    std::vector<uint16_t> got16(c16.size());
    fsdprt_gpu_copy_to_host(got16.data(), dc, int64_t(got16.size() * 2));
    for (int64_t p = 0; p < g.batch; ++p)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          const size_t idx = size_t(p * sc + i * ldc + j);
          EXPECT_NEAR(from_bf16(got16[idx]), want16[idx],
                      1e-2 * std::max(1.0, std::fabs(want16[idx])));
        }

    // bf16 A and B, f32 C: the products of bf16 values are exact in f32,
    // so only the f32 sum's rounding separates it from the reference.
    auto want32 =
        reference(g, std::function<double(int64_t, int64_t, int64_t)>(a16t),
                  std::function<double(int64_t, int64_t, int64_t)>(b16t), c0,
                  ldc, sc, 1.5, 0.5);
    fsdprt_gpu_copy_to_device(dc, c.data(), int64_t(c.size() * 4));
    fsdprt_gpu_gemm_bf16_f32(g.ta, g.tb, g.m, g.n, g.k, 1.5f,
                             reinterpret_cast<uint16_t *>(da), lda, sa,
                             reinterpret_cast<uint16_t *>(db), ldb, sb, 0.5f,
                             dc, ldc, sc, g.batch);
    expectNearStored(g, to_host(dc, c.size()), want32, ldc, sc,
                     "bf16 x bf16 -> f32, ");
    fsdprt_gpu_free(da);
    fsdprt_gpu_free(db);
    fsdprt_gpu_free(dc);
  }
  fsdprt_gpu_stats_t st;
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.gemms, 12u);
  EXPECT_EQ(emu::tf32Gemms(), 0); // fp32 stays fp32 unless asked
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
}

TEST_F(Emulation, TheDeviceArenaIsAllocatedOnceAndGrowsOnlyForALargerPlan) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  fsdprt_gpu_stats_t st;
  void *a = fsdprt_gpu_arena(1024);
  ASSERT_NE(a, nullptr) << fsdprt_gpu_context_error_message(ctx);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  // Every later step of the same plan (or a smaller one) gets the same
  // base and allocates nothing.
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(fsdprt_gpu_arena(1024), a);
    EXPECT_EQ(fsdprt_gpu_arena(512), a);
  }
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.allocations, 1u);
  EXPECT_EQ(st.arena_bytes, 1024u);
  EXPECT_EQ(st.bytes_live, 1024u);
  // A kernel enqueued on the old arena runs before its stream-ordered free.
  fill(static_cast<float *>(a), 256, 2.0f);
  void *b = fsdprt_gpu_arena(4096);
  ASSERT_NE(b, nullptr);
  fill(static_cast<float *>(b), 1024, 3.0f);
  std::vector<float> got(1024);
  ASSERT_EQ(fsdprt_gpu_copy_to_host(got.data(), b, 4096), FSDPRT_OK);
  EXPECT_EQ(got.front(), 3.0f);
  EXPECT_EQ(got.back(), 3.0f);
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.allocations, 2u);
  EXPECT_EQ(st.arena_bytes, 4096u);
  EXPECT_EQ(st.bytes_live, 4096u); // the old arena is gone
  EXPECT_EQ(fsdprt_gpu_arena(4096), b);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
}

TEST_F(Emulation, Tf32OnlyWhenEnabledAndBadShapesAreErrors) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  auto *d = static_cast<float *>(fsdprt_gpu_alloc(64 * 4));
  fsdprt_gpu_set_tf32(1);
  fsdprt_gpu_gemm_f32(0, 0, 2, 2, 2, 1, d, 2, 0, d + 8, 2, 0, 0, d + 16, 2, 0,
                      1);
  fsdprt_gpu_gemm_bf16(0, 0, 2, 2, 2, 1, reinterpret_cast<uint16_t *>(d), 2, 0,
                       reinterpret_cast<uint16_t *>(d + 8), 2, 0, 0,
                       reinterpret_cast<uint16_t *>(d + 16), 2, 0, 1);
  fsdprt_gpu_set_tf32(0);
  EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
  EXPECT_EQ(emu::tf32Gemms(), 1); // the f32 one only
  fsdprt_gpu_gemm_f32(0, 0, 2, 4, 3, 1, d, 2, 0, d, 4, 0, 0, d, 4, 0, 1);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fsdprt_gpu_context_error_message(ctx),
                       "fsdprt_gpu_gemm_f32(m=2, n=4, k=3, batch=1): a "
                       "leading dimension is smaller than its row"))
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_free(d);
  fsdprt_gpu_context_destroy(ctx);
}

// ---- NCCL on device buffers
// ----------------------------------------------------

// Runs fn(rank, comm) on one thread per rank, rank r on device r % devices.
void run_ranks(int ranks, const std::function<void(int, fsdprt_comm_t *)> &fn,
               double timeout = 20,
               std::vector<fsdprt_status_t> *created = nullptr,
               std::vector<int64_t> mesh = {}) {
  if (mesh.empty())
    mesh = {ranks};
  fsdprt_nccl_id_t id;
  ASSERT_EQ(fsdprt_nccl_get_unique_id(&id), FSDPRT_OK);
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = timeout;
  const int devices = emu::config().devices;
  std::vector<std::thread> threads;
  std::vector<fsdprt_status_t> st(size_t(ranks), FSDPRT_OK);
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      fsdprt_comm_t *comm = nullptr;
      st[size_t(r)] = fsdprt_nccl_comm_create(
          int32_t(mesh.size()), mesh.data(), r, &id, r % devices, &opts, &comm);
      if (st[size_t(r)] != FSDPRT_OK)
        return;
      fsdprt_set_thread_comm(comm);
      fn(r, comm);
      fsdprt_set_thread_comm(nullptr);
      fsdprt_comm_destroy(comm);
    });
  for (auto &t : threads)
    t.join();
  if (created)
    *created = st;
  else
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(st[size_t(r)], FSDPRT_OK) << "rank " << r;
}

// Two ranks meet at a point (the host side of the test only).
struct Meeting {
  std::mutex m;
  std::condition_variable cv;
  int count = 0;
  void arrive(int n) {
    std::unique_lock<std::mutex> lock(m);
    ++count;
    cv.notify_all();
    cv.wait(lock, [&] { return count >= n; });
  }
};

TEST_F(Emulation,
       CollectivesRunAfterTheKernelsBeforeThemAndBeforeTheOnesAfter) {
  const int64_t n = 32;
  Meeting held;
  std::vector<std::vector<float>> out(2);
  gate_open = false;
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(fsdprt_gpu_get_thread_context(), ctx);
    EXPECT_EQ(fsdprt_gpu_context_device(ctx), rank);
    auto *send = static_cast<float *>(fsdprt_gpu_alloc(n * 4));
    auto *recv = static_cast<float *>(fsdprt_gpu_alloc(2 * n * 4));
    auto *snap = static_cast<float *>(fsdprt_gpu_alloc(2 * n * 4));
    std::memset(recv, 0, 2 * n * 4); // emulated device memory is host memory
    launch("hold");                  // the compute stream is busy...
    fill(send, n, float(rank + 1));  // ...and then writes the input
    fsdprt_request_t req = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(fsdprt_all_gather_async(comm, 1, send, recv, n, FSDPRT_F32, &req),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_wait(&req), FSDPRT_OK); // no host block
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    EXPECT_EQ(recv[0], 0.0f) << "the gather ran before its input was written";
    int64_t total = 2 * n;
    launch("copy", {&snap, &recv, &total}); // must see the gathered data
    held.arrive(2);
    if (rank == 0)
      gate_open = true;
    EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK)
        << fsdprt_gpu_context_error_message(ctx);
    out[size_t(rank)] = to_host(snap, size_t(total));
    fsdprt_gpu_free(send);
    fsdprt_gpu_free(recv);
    fsdprt_gpu_free(snap);
  });
  std::vector<float> want(size_t(n), 1.0f);
  want.resize(size_t(2 * n), 2.0f);
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(out[1], want);
}

TEST_F(Emulation, GroupsOfA2x2MeshUseTheirSplitCommunicators) {
  configure({4, 13000, 1 << 30});
  std::vector<std::vector<float>> rows(4), cols(4), all(4);
  run_ranks(
      4,
      [&](int rank, fsdprt_comm_t *comm) {
        auto *x = static_cast<float *>(fsdprt_gpu_alloc(3 * 4));
        auto *g = static_cast<float *>(fsdprt_gpu_alloc(3 * 4 * 2));
        fill(x, 1, float(rank));
        // mask 0b01: axis 0 (ranks r and r ^ 2); 0b10: axis 1 (r and r ^ 1).
        EXPECT_EQ(fsdprt_all_gather(comm, 1, x, g, 1, FSDPRT_F32), FSDPRT_OK);
        rows[size_t(rank)] = to_host(g, 2);
        EXPECT_EQ(fsdprt_all_gather(comm, 2, x, g, 1, FSDPRT_F32), FSDPRT_OK);
        cols[size_t(rank)] = to_host(g, 2);
        EXPECT_EQ(fsdprt_all_reduce(comm, 3, x, x, 1, FSDPRT_F32, FSDPRT_SUM),
                  FSDPRT_OK);
        all[size_t(rank)] = to_host(x, 1);
        fsdprt_gpu_free(x);
        fsdprt_gpu_free(g);
      },
      20, nullptr, {2, 2});
  for (int r = 0; r < 4; ++r) {
    const float lo = float(r & 1), hi = float(r | 2);
    EXPECT_EQ(rows[size_t(r)], (std::vector<float>{lo, hi})) << "rank " << r;
    const float c0 = float(r & 2), c1 = float((r & 2) | 1);
    EXPECT_EQ(cols[size_t(r)], (std::vector<float>{c0, c1})) << "rank " << r;
    EXPECT_EQ(all[size_t(r)], std::vector<float>{6.0f}) << "rank " << r;
  }
}

TEST_F(Emulation, SteadyStateCollectivesCreateNoEvents) {
  std::vector<uint64_t> warm(2), later(2);
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
    auto *x = static_cast<float *>(fsdprt_gpu_alloc(8 * 4));
    fill(x, 8, 1.0f);
    auto step = [&] {
      fsdprt_request_t a = nullptr, b = nullptr;
      ASSERT_EQ(
          fsdprt_all_reduce_async(comm, 1, x, x, 4, FSDPRT_F32, FSDPRT_SUM, &a),
          FSDPRT_OK);
      ASSERT_EQ(fsdprt_all_reduce_async(comm, 1, x + 4, x + 4, 4, FSDPRT_F32,
                                        FSDPRT_MAX, &b),
                FSDPRT_OK);
      ASSERT_EQ(fsdprt_wait(&b), FSDPRT_OK);
      ASSERT_EQ(fsdprt_wait(&a), FSDPRT_OK);
      ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
    };
    fsdprt_gpu_stats_t st;
    for (int i = 0; i < 5; ++i)
      step();
    std::this_thread::sleep_for(50ms); // the watchdog returns the events
    fsdprt_gpu_context_stats(ctx, &st);
    warm[size_t(rank)] = st.events_created;
    for (int i = 0; i < 40; ++i)
      step();
    std::this_thread::sleep_for(50ms);
    fsdprt_gpu_context_stats(ctx, &st);
    later[size_t(rank)] = st.events_created;
    auto h = to_host(x, 8);
    EXPECT_EQ(h[0], std::pow(2.0f, 45.0f)); // summed 45 times over 2 ranks
    EXPECT_EQ(h[4], 1.0f);
    fsdprt_gpu_free(x);
  });
  for (int r = 0; r < 2; ++r) {
    // Two collectives in flight (ready + done each), the two timed events
    // of each wait, and a few more while the pool fills.
    EXPECT_LE(warm[size_t(r)], 12u) << "rank " << r;
    EXPECT_EQ(later[size_t(r)], warm[size_t(r)]) << "rank " << r;
  }
}

// Exposed communication is the compute stream's stall in waits: rank 0
// waits for a peer that starts 300 ms late, rank 1 finds rank 0 there; a
// collective that finished before its wait costs nothing, however long the
// host took before waiting.
TEST_F(Emulation, ExposedCommunicationIsTheComputeStreamsStall) {
  std::vector<uint64_t> late(2), early(2);
  std::vector<fsdprt_gpu_stats_t> device(2);
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    ASSERT_EQ(fsdprt_nccl_comm_set_desync_checks(comm, 0), FSDPRT_OK);
    fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
    auto *x = static_cast<float *>(fsdprt_gpu_alloc(8 * 4));
    fill(x, 8, 1.0f);
    ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
    fsdprt_stats_t stats;
    if (rank == 1)
      std::this_thread::sleep_for(300ms);
    fsdprt_request_t req = nullptr;
    ASSERT_EQ(
        fsdprt_all_reduce_async(comm, 1, x, x, 8, FSDPRT_F32, FSDPRT_SUM, &req),
        FSDPRT_OK);
    ASSERT_EQ(fsdprt_wait(&req), FSDPRT_OK);
    ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &stats), FSDPRT_OK);
    late[size_t(rank)] = stats.exposed_ns;
    ASSERT_EQ(fsdprt_comm_reset_stats(comm), FSDPRT_OK);
    ASSERT_EQ(
        fsdprt_all_reduce_async(comm, 1, x, x, 8, FSDPRT_F32, FSDPRT_SUM, &req),
        FSDPRT_OK);
    std::this_thread::sleep_for(300ms); // the host is busy; it is done
    ASSERT_EQ(fsdprt_wait(&req), FSDPRT_OK);
    ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &stats), FSDPRT_OK);
    early[size_t(rank)] = stats.exposed_ns;
    EXPECT_EQ(to_host(x, 1)[0], 4.0f);
    fsdprt_gpu_free(x);
    fsdprt_gpu_context_stats(ctx, &device[size_t(rank)]);
  });
  EXPECT_GE(late[0], 200'000'000u) << "rank 0 waited for rank 1";
  EXPECT_LT(late[1], 100'000'000u) << "rank 1 found rank 0 waiting";
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(early[size_t(r)], 100'000'000u) << "rank " << r;
    // One 32-byte buffer, freed on the stream: the peak is its size.
    EXPECT_EQ(device[size_t(r)].bytes_peak, 32u) << "rank " << r;
    EXPECT_EQ(device[size_t(r)].bytes_live, 0u) << "rank " << r;
  }
}

TEST_F(Emulation, DesyncOfTheFirstCollectivesIsReported) {
  std::vector<fsdprt_status_t> st(2);
  std::vector<std::string> msg(2);
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    auto *d = static_cast<float *>(fsdprt_gpu_alloc(64 * 4));
    auto *out = static_cast<float *>(fsdprt_gpu_alloc(128 * 4));
    st[size_t(rank)] =
        fsdprt_all_gather(comm, 1, d, out, rank == 1 ? 32 : 16, FSDPRT_F32);
    msg[size_t(rank)] = fsdprt_comm_last_error_message(comm);
    fsdprt_gpu_free(d);
    fsdprt_gpu_free(out);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[size_t(r)], FSDPRT_ERR_DESYNC);
    EXPECT_TRUE(
        contains(msg[size_t(r)], "rank 1 called all_gather(f32, count=32)"))
        << msg[size_t(r)];
  }
}

TEST_F(Emulation, DesyncChecksStopWhenTurnedOff) {
  // Without the check, mismatched counts reach NCCL (which does not check
  // them either): the call returns OK, which shows no check ran.
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    ASSERT_EQ(fsdprt_nccl_comm_set_desync_checks(comm, 0), FSDPRT_OK);
    auto *d = static_cast<float *>(fsdprt_gpu_alloc(64 * 4));
    auto *out = static_cast<float *>(fsdprt_gpu_alloc(128 * 4));
    EXPECT_EQ(
        fsdprt_all_gather(comm, 1, d, out, rank == 1 ? 32 : 16, FSDPRT_F32),
        FSDPRT_OK);
    fsdprt_gpu_free(d);
    fsdprt_gpu_free(out);
  });
}

// Integer-valued floats: sums and averages over 2 or 4 ranks are exact.
std::vector<float> member_data(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e)
    v[size_t(e)] = float((rank * 37 + e * 11) % 64) - 20.0f;
  return v;
}

float *upload(const std::vector<float> &h) {
  auto *d = static_cast<float *>(fsdprt_gpu_alloc(int64_t(h.size() * 4)));
  EXPECT_EQ(fsdprt_gpu_copy_to_device(d, h.data(), int64_t(h.size() * 4)),
            FSDPRT_OK);
  return d;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A member layout on nccl is one NCCL group of per-member collectives; its
// result is the plain collective's, permuted (bit for bit), for 2 and 4
// ranks, an empty member, sum and avg, blocking and asynchronous calls.
TEST_F(Emulation, MemberLayoutsAreThePlainCollectivePermuted) {
  const std::vector<int64_t> counts = {5, 0, 3, 8};
  const int64_t n = int64_t(counts.size()), S = 16;
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i)
    off[i + 1] = off[i] + counts[i];
  for (int k : {2, 4}) {
    emu::Config c;
    c.devices = k;
    configure(c);
    for (bool async : {false, true}) {
      SCOPED_TRACE(testing::Message() << k << " ranks, async " << async);
      std::vector<int> bad(size_t(k), 0);
      run_ranks(k, [&](int rank, fsdprt_comm_t *comm) {
        fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
        auto finish = [&](fsdprt_status_t st, fsdprt_request_t *req) {
          EXPECT_EQ(st, FSDPRT_OK) << fsdprt_comm_last_error_message(comm);
          if (async)
            EXPECT_EQ(fsdprt_wait(req), FSDPRT_OK);
          EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
        };
        // All-gather: the plain one, then member-major on the same data.
        float *send = upload(member_data(rank, S));
        auto *plain = static_cast<float *>(fsdprt_gpu_alloc(k * S * 4));
        auto *members = static_cast<float *>(fsdprt_gpu_alloc(k * S * 4));
        EXPECT_EQ(fsdprt_all_gather(comm, 1, send, plain, S, FSDPRT_F32),
                  FSDPRT_OK);
        fsdprt_request_t req = nullptr;
        finish(async ? fsdprt_all_gather_members_async(comm, 1, send, members,
                                                       S, FSDPRT_F32, n,
                                                       counts.data(), &req)
                     : fsdprt_all_gather_members(comm, 1, send, members, S,
                                                 FSDPRT_F32, n, counts.data()),
               &req);
        std::vector<float> rm = to_host(plain, size_t(k * S));
        std::vector<float> want(size_t(k * S));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            for (int64_t t = 0; t < counts[size_t(i)]; ++t)
              want[size_t(k * off[size_t(i)] + j * counts[size_t(i)] + t)] =
                  rm[size_t(j * S + off[size_t(i)] + t)];
        if (!same_bits(to_host(members, size_t(k * S)), want))
          bad[size_t(rank)] |= 1;
        // Reduce-scatter: the member-major send, and its rank-major
        // permutation through the plain reduce-scatter.
        std::vector<float> mm = member_data(rank, k * S);
        std::vector<float> rmSend(mm.size());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            for (int64_t t = 0; t < counts[size_t(i)]; ++t)
              rmSend[size_t(j * S + off[size_t(i)] + t)] =
                  mm[size_t(k * off[size_t(i)] + j * counts[size_t(i)] + t)];
        float *mmDev = upload(mm), *rmDev = upload(rmSend);
        auto *got = static_cast<float *>(fsdprt_gpu_alloc(S * 4));
        for (int32_t op : {FSDPRT_SUM, FSDPRT_AVG}) {
          EXPECT_EQ(
              fsdprt_reduce_scatter(comm, 1, rmDev, plain, S, FSDPRT_F32, op),
              FSDPRT_OK);
          finish(async ? fsdprt_reduce_scatter_members_async(
                             comm, 1, mmDev, got, S, FSDPRT_F32, op, n,
                             counts.data(), &req)
                       : fsdprt_reduce_scatter_members(comm, 1, mmDev, got, S,
                                                       FSDPRT_F32, op, n,
                                                       counts.data()),
                 &req);
          if (!same_bits(to_host(got, size_t(S)), to_host(plain, size_t(S))))
            bad[size_t(rank)] |= op == FSDPRT_SUM ? 2 : 4;
        }
        for (float *p : {send, plain, members, mmDev, rmDev, got})
          fsdprt_gpu_free(p);
      });
      for (int r = 0; r < k; ++r)
        EXPECT_EQ(bad[size_t(r)], 0)
            << "rank " << r << " (1: all-gather, 2: sum, 4: avg)";
    }
  }
}

TEST_F(Emulation, MemberLayoutsThatDifferAreADesync) {
  std::vector<fsdprt_status_t> st(2);
  std::vector<std::string> msg(2);
  run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
    auto *d = static_cast<float *>(fsdprt_gpu_alloc(16 * 4));
    auto *out = static_cast<float *>(fsdprt_gpu_alloc(32 * 4));
    const int64_t counts[2][2] = {{10, 6}, {6, 10}};
    st[size_t(rank)] = fsdprt_all_gather_members(comm, 1, d, out, 16,
                                                 FSDPRT_F32, 2, counts[rank]);
    msg[size_t(rank)] = fsdprt_comm_last_error_message(comm);
    fsdprt_gpu_free(d);
    fsdprt_gpu_free(out);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[size_t(r)], FSDPRT_ERR_DESYNC);
    EXPECT_TRUE(contains(msg[size_t(r)], "all_gather(f32, count=16, members=2"))
        << msg[size_t(r)];
  }
}

TEST_F(Emulation, WatchdogAbortsACollectiveAPeerNeverJoins) {
  Meeting done;
  fsdprt_status_t code = FSDPRT_OK, later = FSDPRT_OK;
  fsdprt_status_t asyncBefore = FSDPRT_ERR_INTERNAL,
                  asyncAfter = FSDPRT_ERR_INTERNAL;
  std::string msg;
  double waited = 0;
  run_ranks(
      2,
      [&](int rank, fsdprt_comm_t *comm) {
        if (rank == 1) { // never calls the collective
          done.arrive(2);
          return;
        }
        struct Leave { // rank 1 waits for rank 0 whatever happens
          Meeting &m;
          ~Leave() { m.arrive(2); }
        } leave{done};
        // The descriptor check would time out on the host (it is a host
        // synchronization); without it the stream-ordered path is left to
        // the watchdog.
        ASSERT_EQ(fsdprt_nccl_comm_set_desync_checks(comm, 0), FSDPRT_OK);
        fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
        auto *x = static_cast<float *>(fsdprt_gpu_alloc(8 * 4));
        fsdprt_request_t req = nullptr;
        ASSERT_EQ(fsdprt_comm_get_async_error(comm, &asyncBefore), FSDPRT_OK);
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(fsdprt_all_reduce_async(comm, 1, x, x, 8, FSDPRT_F32,
                                          FSDPRT_SUM, &req),
                  FSDPRT_OK);
        EXPECT_EQ(fsdprt_wait(&req), FSDPRT_OK); // stream-ordered: at once
        // The compute stream waits for the stuck collective until the
        // watchdog aborts the communicator: this returns, with the error.
        EXPECT_NE(fsdprt_gpu_synchronize(ctx), FSDPRT_ERR_INVALID_ARGUMENT);
        waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        code = fsdprt_comm_error(comm);
        msg = fsdprt_comm_error_message(comm);
        // The watchdog's error, seen without a failing call of the rank.
        EXPECT_EQ(fsdprt_comm_get_async_error(comm, &asyncAfter), FSDPRT_OK);
        later = fsdprt_all_reduce(comm, 1, x, x, 8, FSDPRT_F32, FSDPRT_SUM);
        fsdprt_gpu_free(x);
      },
      0.3);
  EXPECT_EQ(code, FSDPRT_ERR_TIMEOUT);
  EXPECT_TRUE(contains(msg, "rank 0: timeout after")) << msg;
  EXPECT_TRUE(contains(msg, "collective #1 all_reduce(f32, count=8, op=sum) "
                            "on group {axes: axis0}: NCCL did not complete "
                            "it"))
      << msg;
  EXPECT_TRUE(contains(msg, "the communicator was aborted")) << msg;
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 10.0);
  EXPECT_EQ(later, FSDPRT_ERR_ABORTED);
  EXPECT_EQ(asyncBefore, FSDPRT_OK);
  EXPECT_EQ(asyncAfter, FSDPRT_ERR_TIMEOUT);
  EXPECT_GE(emu::ncclAborts(), 1);
}

TEST_F(Emulation, TheTimeoutCountsFromWhenTheInputsAreReady) {
  // Both ranks queue a collective behind a kernel that runs longer than the
  // timeout: the collective itself is quick, so nothing times out.
  Meeting queued;
  std::vector<fsdprt_status_t> st(2, FSDPRT_OK);
  gate_open = false;
  run_ranks(
      2,
      [&](int rank, fsdprt_comm_t *comm) {
        ASSERT_EQ(fsdprt_nccl_comm_set_desync_checks(comm, 0), FSDPRT_OK);
        fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
        auto *x = static_cast<float *>(fsdprt_gpu_alloc(8 * 4));
        launch("hold");
        fill(x, 8, 1.0f);
        fsdprt_request_t req = nullptr;
        EXPECT_EQ(fsdprt_all_reduce_async(comm, 1, x, x, 8, FSDPRT_F32,
                                          FSDPRT_SUM, &req),
                  FSDPRT_OK);
        EXPECT_EQ(fsdprt_wait(&req), FSDPRT_OK);
        queued.arrive(2);
        if (rank == 0) {
          std::this_thread::sleep_for(600ms); // three timeouts
          gate_open = true;
        }
        EXPECT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
        st[size_t(rank)] = fsdprt_comm_error(comm);
        EXPECT_EQ(to_host(x, 1)[0], 2.0f);
        fsdprt_gpu_free(x);
      },
      0.2);
  EXPECT_EQ(st[0], FSDPRT_OK);
  EXPECT_EQ(st[1], FSDPRT_OK);
}

TEST_F(Emulation, TheFirstStepsDescriptorCheckTimesOutOnTheHost) {
  Meeting done;
  fsdprt_status_t st = FSDPRT_OK;
  std::string msg;
  run_ranks(
      2,
      [&](int rank, fsdprt_comm_t *comm) {
        struct Leave {
          Meeting &m;
          ~Leave() { m.arrive(2); }
        } leave{done};
        if (rank == 1)
          return;
        auto *x = static_cast<float *>(fsdprt_gpu_alloc(8 * 4));
        st = fsdprt_all_reduce(comm, 1, x, x, 8, FSDPRT_F32, FSDPRT_SUM);
        msg = fsdprt_comm_error_message(comm);
        fsdprt_gpu_free(x);
      },
      0.2);
  EXPECT_EQ(st, FSDPRT_ERR_TIMEOUT);
  EXPECT_TRUE(contains(msg, "rank 0: timeout after")) << msg;
  EXPECT_TRUE(contains(msg, "the communicator was aborted")) << msg;
}

TEST_F(Emulation, TwoRanksOnOneGpuFailWithTheReason) {
  configure({1, 13000, 1 << 30});
  std::vector<fsdprt_status_t> st;
  run_ranks(
      2, [](int, fsdprt_comm_t *) {}, 5, &st);
  EXPECT_NE(st[0], FSDPRT_OK);
  EXPECT_NE(st[1], FSDPRT_OK);
}

// ---- quantization on device buffers
// ----------------------------------------------

TEST_F(Emulation, DeviceQuantizationMatchesTheHostPathByteForByte) {
  fsdprt_world_t *world = nullptr;
  int64_t one = 1;
  ASSERT_EQ(fsdprt_threads_world_create(1, &one, nullptr, &world), FSDPRT_OK);
  fsdprt_comm_t *comm = nullptr;
  ASSERT_EQ(fsdprt_threads_comm(world, 0, &comm), FSDPRT_OK);
  fsdprt_set_thread_comm(comm);
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0, 2);
  const int formats[] = {FSDPRT_QUANT_FP8_E4M3_TENSOR,
                         FSDPRT_QUANT_MXFP8_ROWWISE, FSDPRT_QUANT_NVFP4,
                         FSDPRT_QUANT_FP8_BLOCK_1X128,
                         FSDPRT_QUANT_FP8_BLOCK_1X128_T};
  int tested = 0;
  for (int fmt : formats)
    for (int64_t rows : {4, 3})
      for (int64_t cols : {128, 160}) {
        int64_t shape[2] = {rows, cols};
        fsdprt_quant_layout l;
        if (fsdprt_quant_get_layout(fmt, shape, 2, &l) != FSDPRT_OK)
          continue; // a shape the format does not take
        const int64_t count = rows * cols;
        const int64_t wire =
            int64_t(l.data_bytes + l.scale_bytes + l.tensor_bytes);
        std::vector<float> x(static_cast<size_t>(count));
        for (float &v : x)
          v = dist(rng);
        float amax = 0;
        std::vector<uint8_t> packet(size_t(wire) * 2);
        fsdprt_jit_quant_amax(x.data(), &amax, count, FSDPRT_F32);
        fsdprt_jit_quantize(x.data(), &amax, packet.data(), count, FSDPRT_F32,
                            fmt, rows, cols);
        std::memcpy(packet.data() + wire, packet.data(), size_t(wire));
        std::vector<float> y(size_t(2 * count));
        fsdprt_jit_dequantize(packet.data(), y.data(), 2, FSDPRT_F32, fmt, rows,
                              cols);
        ASSERT_EQ(fsdprt_comm_error(comm), FSDPRT_OK)
            << fsdprt_comm_error_message(comm);

        auto *dx = static_cast<float *>(fsdprt_gpu_alloc(count * 4));
        auto *damax = static_cast<float *>(fsdprt_gpu_alloc(4));
        auto *dp = static_cast<uint8_t *>(fsdprt_gpu_alloc(2 * wire));
        auto *dy = static_cast<float *>(fsdprt_gpu_alloc(2 * count * 4));
        fsdprt_gpu_copy_to_device(dx, x.data(), count * 4);
        fsdprt_gpu_quant_amax(dx, damax, count, FSDPRT_F32);
        fsdprt_gpu_quantize(dx, damax, dp, count, FSDPRT_F32, fmt, rows, cols);
        // The second packet starts at an odd offset when `wire` is odd.
        fsdprt_gpu_quantize(dx, damax, dp + wire, count, FSDPRT_F32, fmt, rows,
                            cols);
        fsdprt_gpu_dequantize(dp, dy, 2, FSDPRT_F32, fmt, rows, cols);
        std::vector<uint8_t> gp(size_t(2 * wire));
        std::vector<float> gy(size_t(2 * count));
        ASSERT_EQ(fsdprt_gpu_copy_to_host(gp.data(), dp, 2 * wire), FSDPRT_OK)
            << fsdprt_gpu_context_error_message(ctx);
        fsdprt_gpu_copy_to_host(gy.data(), dy, 2 * count * 4);
        EXPECT_EQ(gp, packet) << fsdprt_quant_format_name(fmt) << " [" << rows
                              << ", " << cols << "]";
        EXPECT_EQ(std::memcmp(gy.data(), y.data(), y.size() * 4), 0)
            << fsdprt_quant_format_name(fmt) << " [" << rows << ", " << cols
            << "]";
        for (void *p : {(void *)dx, (void *)damax, (void *)dp, (void *)dy})
          fsdprt_gpu_free(p);
        ++tested;
      }
  EXPECT_GE(tested, 8);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
  fsdprt_set_thread_comm(nullptr);
  fsdprt_world_destroy(world);
}

// ---- kernels compiled for the host emulation (gpu-emulation=true) ---------
//
// What fsdp-gpu-host-kernels emits, written by hand: one host function per
// CUDA thread that reads its indices from fsdprt_gpu_emu_index and exchanges
// values with fsdprt_gpu_emu_shuffle_xor, registered as a table whose id the
// module image names.

int32_t ids(int kind, int dim) { return fsdprt_gpu_emu_index(3 * kind + dim); }

float shuffle_xor(float v, int32_t offset) {
  int32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = fsdprt_gpu_emu_shuffle_xor(bits, offset, 32);
  std::memcpy(&v, &bits, 4);
  return v;
}

// (const float *x, float *sums, int32_t rows, int32_t cols): one warp per
// row, lanes stride the row, a butterfly of shuffles, lane 0 stores.
void hk_row_sums(void *const *a) {
  const float *x = *static_cast<const float *const *>(a[0]);
  float *sums = *static_cast<float *const *>(a[1]);
  const int32_t rows = *static_cast<const int32_t *>(a[2]);
  const int32_t cols = *static_cast<const int32_t *>(a[3]);
  const int32_t thread = ids(1, 0) * ids(2, 0) + ids(0, 0);
  const int32_t row = thread / 32, lane = thread % 32;
  float acc = 0;
  if (row < rows)
    for (int32_t c = lane; c < cols; c += 32)
      acc += x[row * cols + c];
  for (int32_t offset = 16; offset > 0; offset /= 2)
    acc += shuffle_xor(acc, offset);
  if (row < rows && lane == 0)
    sums[row] = acc;
}

// (int32_t *scratch, int32_t *out): each thread of a block writes its index,
// waits at the barrier, reads its right neighbour's.
void hk_rotate(void *const *a) {
  int32_t *scratch = *static_cast<int32_t *const *>(a[0]);
  int32_t *out = *static_cast<int32_t *const *>(a[1]);
  const int32_t n = ids(2, 0), t = ids(0, 0), base = ids(1, 0) * n;
  scratch[base + t] = 1000 * ids(1, 0) + t;
  fsdprt_gpu_emu_barrier();
  out[base + t] = scratch[base + (t + 1) % n];
}

// (int32_t *out): no lock step; every thread of a 2-D grid of 2-D blocks
// writes its coordinates at its linear index.
void hk_coords(void *const *a) {
  int32_t *out = *static_cast<int32_t *const *>(a[0]);
  const int32_t x = ids(3, 0) * 0 + ids(1, 0) * ids(2, 0) + ids(0, 0);
  const int32_t y = ids(1, 1) * ids(2, 1) + ids(0, 1);
  const int32_t width = ids(3, 0) * ids(2, 0);
  out[y * width + x] = 100 * y + x;
}

// Lane 0 leaves before the shuffle the others wait at.
void hk_divergent(void *const *) {
  if (ids(0, 0) == 0)
    return;
  (void)shuffle_xor(1.0f, 1);
}

const int64_t kRowSumsSizes[] = {8, 8, 4, 4};
const int64_t kPtrPairSizes[] = {8, 8};
const int64_t kPtrSizes[] = {8};
const fsdprt_gpu_host_kernel_t kHostKernels[] = {
    {"row_sums", hk_row_sums, kRowSumsSizes, 4,
     FSDPRT_GPU_HOST_KERNEL_LOCKSTEP},
    {"rotate", hk_rotate, kPtrPairSizes, 2, FSDPRT_GPU_HOST_KERNEL_LOCKSTEP},
    {"coords", hk_coords, kPtrSizes, 1, 0},
    {"divergent", hk_divergent, nullptr, 0, FSDPRT_GPU_HOST_KERNEL_LOCKSTEP},
};

// The image fsdp-gpu-host-kernels puts into the step's gpu.binary.
std::vector<char> host_image(const char *id) {
  const uint32_t header[2] = {FSDPRT_GPU_HOST_KERNELS_MAGIC, 1};
  const size_t n = std::strlen(id) + 1;
  std::vector<char> image(sizeof(header) + n);
  std::memcpy(image.data(), header, sizeof(header));
  std::memcpy(image.data() + sizeof(header), id, n);
  return image;
}

void launch_grid(void *mod, const char *name, std::vector<void *> params,
                 int64_t gx, int64_t gy, int64_t bx, int64_t by) {
  void *f = mgpuModuleGetFunction(mod, name);
  void *s = mgpuStreamCreate();
  mgpuLaunchKernel(f, gx, gy, 1, bx, by, 1, 0, s, params.data(), nullptr,
                   int64_t(params.size()));
}

TEST_F(Emulation, HostKernelsRunTheirGridWithWarpShufflesAndBarriers) {
  ASSERT_EQ(fsdprt_gpu_emulated(), 1);
  static const char kId[] = "__fsdp_kernels.test-table";
  ASSERT_EQ(fsdprt_gpu_register_host_kernels(kId, kHostKernels, 4), FSDPRT_OK);
  static const std::vector<char> image = host_image(kId);
  void *mod =
      mgpuModuleLoad(const_cast<char *>(image.data()), int64_t(image.size()));
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);

  // 5 rows of 100: 3 blocks of 2 warps (the sixth warp has no row).
  int32_t rows = 5, cols = 100;
  std::vector<float> x(size_t(rows * cols)), expected(size_t(rows), 0);
  for (int32_t i = 0; i < rows * cols; ++i) {
    x[size_t(i)] = float((i * 7) % 13 - 6); // small integers: exact sums
    expected[size_t(i / cols)] += x[size_t(i)];
  }
  auto *dx = static_cast<float *>(fsdprt_gpu_alloc(int64_t(x.size() * 4)));
  auto *dsums = static_cast<float *>(fsdprt_gpu_alloc(rows * 4));
  ASSERT_EQ(fsdprt_gpu_copy_to_device(dx, x.data(), int64_t(x.size() * 4)),
            FSDPRT_OK);
  launch_grid(mod, "row_sums", {&dx, &dsums, &rows, &cols}, 3, 1, 64, 1);
  EXPECT_EQ(to_host(dsums, size_t(rows)), expected);

  // Two blocks of 96 threads rotate through a barrier.
  auto *scratch = static_cast<int32_t *>(fsdprt_gpu_alloc(2 * 96 * 4));
  auto *rotated = static_cast<int32_t *>(fsdprt_gpu_alloc(2 * 96 * 4));
  launch_grid(mod, "rotate", {&scratch, &rotated}, 2, 1, 96, 1);
  std::vector<int32_t> got(2 * 96), want(2 * 96);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 96; ++t)
      want[size_t(b * 96 + t)] = 1000 * b + (t + 1) % 96;
  ASSERT_EQ(fsdprt_gpu_copy_to_host(got.data(), rotated, 2 * 96 * 4),
            FSDPRT_OK);
  EXPECT_EQ(got, want);

  // A 3 x 2 grid of 4 x 2 blocks: 12 x 4 threads.
  auto *coords = static_cast<int32_t *>(fsdprt_gpu_alloc(12 * 4 * 4));
  launch_grid(mod, "coords", {&coords}, 3, 2, 4, 2);
  std::vector<int32_t> c(12 * 4), cw(12 * 4);
  for (int y = 0; y < 4; ++y)
    for (int xx = 0; xx < 12; ++xx)
      cw[size_t(y * 12 + xx)] = 100 * y + xx;
  ASSERT_EQ(fsdprt_gpu_copy_to_host(c.data(), coords, 12 * 4 * 4), FSDPRT_OK);
  EXPECT_EQ(c, cw);
  EXPECT_EQ(emu::kernelFaults(), 0);

  fsdprt_gpu_stats_t st;
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.launches, 3u);
  EXPECT_EQ(st.module_loads, 1u);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);

  // A kernel the table lacks is an error naming it.
  launch_grid(mod, "no_such_kernel", {}, 1, 1, 1, 1);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_BACKEND);
  EXPECT_TRUE(
      contains(fsdprt_gpu_context_error_message(ctx), "kernel no_such_kernel"))
      << fsdprt_gpu_context_error_message(ctx);
  for (void *p : {(void *)dx, (void *)dsums, (void *)scratch, (void *)rotated,
                  (void *)coords})
    fsdprt_gpu_free(p);
  fsdprt_gpu_context_destroy(ctx);
  mgpuModuleUnload(mod);
  fsdprt_gpu_unregister_host_kernels(kId);
}

TEST_F(Emulation, AHostKernelFaultFailsTheStreamInsteadOfGivingAValue) {
  static const char kId[] = "__fsdp_kernels.fault-table";
  ASSERT_EQ(fsdprt_gpu_register_host_kernels(kId, kHostKernels, 4), FSDPRT_OK);
  static const std::vector<char> image = host_image(kId);
  void *mod =
      mgpuModuleLoad(const_cast<char *>(image.data()), int64_t(image.size()));
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  // Lane 0 returns while the others wait at a shuffle.
  launch_grid(mod, "divergent", {}, 1, 1, 32, 1);
  EXPECT_NE(fsdprt_gpu_synchronize(ctx), FSDPRT_OK);
  EXPECT_EQ(emu::kernelFaults(), 1);
  EXPECT_TRUE(contains(emu::lastKernelFault(),
                       "kernel divergent: a shuffle after a lane"))
      << emu::lastKernelFault();
  EXPECT_TRUE(contains(fsdprt_gpu_context_error_message(ctx),
                       "unspecified launch failure"))
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
  mgpuModuleUnload(mod);
  fsdprt_gpu_unregister_host_kernels(kId);
}

TEST_F(Emulation, HostKernelsOfAnUnregisteredTableAreAnErrorNamingTheKernel) {
  // Equal ids from two registrations (one step loaded twice): the newest
  // serves loads, and each unregisters its own.
  static const char kFirst[] = "__fsdp_kernels.twice";
  static const char kSecond[] = "__fsdp_kernels.twice";
  ASSERT_NE(static_cast<const void *>(kFirst),
            static_cast<const void *>(kSecond));
  ASSERT_EQ(fsdprt_gpu_register_host_kernels(kFirst, kHostKernels, 4),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_gpu_register_host_kernels(kSecond, kHostKernels, 3),
            FSDPRT_OK);
  fsdprt_gpu_unregister_host_kernels(kSecond);
  fsdprt_gpu_unregister_host_kernels(kFirst);
  EXPECT_EQ(fsdprt_gpu_register_host_kernels(kFirst, kHostKernels, -1),
            FSDPRT_ERR_INVALID_ARGUMENT);

  static const std::vector<char> image = host_image(kFirst);
  void *mod =
      mgpuModuleLoad(const_cast<char *>(image.data()), int64_t(image.size()));
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  launch_grid(mod, "coords", {}, 1, 1, 1, 1);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_ERR_BACKEND);
  EXPECT_TRUE(contains(fsdprt_gpu_context_error_message(ctx),
                       "kernel coords: the step's host kernel table "
                       "__fsdp_kernels.twice is not registered"))
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
  mgpuModuleUnload(mod);
}

} // namespace

// ---- CUDA graphs ------------------------------------------------------------

// The emulation's stream capture: a capturing stream records its work, a
// stream that waits on an event of the capture joins it and must be waited
// on again before the capture ends; a launch replays the work in order.
TEST_F(Emulation, StreamCaptureRecordsWorkAndJoinedStreamsMustRejoin) {
  cudaSetDevice(0);
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork = nullptr, join = nullptr;
  cudaEventCreate(&fork);
  cudaEventCreate(&join);
  void *p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 8), cudaSuccess);
  auto *bytes = static_cast<unsigned char *>(p);
  std::memset(p, 0, 8);
  // b joins and is never waited on: the capture is unjoined.
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaEventRecord(fork, a);
  ASSERT_EQ(cudaStreamWaitEvent(b, fork, 0), cudaSuccess);
  cudaMemsetAsync(p, 1, 4, b);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(a, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  cudaStreamCaptureStatus status;
  cudaStreamIsCapturing(b, &status);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone) << "b left the capture";
  // Joined and rejoined: nothing runs until the graph is launched, then
  // every launch runs a's and b's work in capture order.
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaMemsetAsync(bytes + 4, 2, 4, a);
  cudaEventRecord(fork, a);
  cudaStreamWaitEvent(b, fork, 0);
  cudaMemsetAsync(p, 1, 4, b);
  cudaEventRecord(join, b);
  cudaStreamWaitEvent(a, join, 0);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaErrorStreamCaptureUnsupported)
      << "a capturing stream cannot be waited for";
  EXPECT_EQ(cudaStreamEndCapture(a, &graph), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaMemsetAsync(bytes + 4, 2, 4, a);
  cudaEventRecord(fork, a);
  cudaStreamWaitEvent(b, fork, 0);
  cudaMemsetAsync(p, 1, 4, b);
  cudaEventRecord(join, b);
  cudaStreamWaitEvent(a, join, 0);
  ASSERT_EQ(cudaStreamEndCapture(a, &graph), cudaSuccess);
  EXPECT_EQ(bytes[0], 0) << "captured work does not run";
  EXPECT_EQ(bytes[4], 0);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  for (int i = 0; i < 2; ++i) {
    std::memset(p, 0, 8);
    ASSERT_EQ(cudaGraphLaunch(exec, a), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    EXPECT_EQ(bytes[0], 1);
    EXPECT_EQ(bytes[4], 2);
  }
  EXPECT_EQ(emu::graphLaunches(), 2);
  cudaGraphExecDestroy(exec);
  EXPECT_EQ(emu::liveGraphs(), 0);
  cudaFree(p);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// A training-like step on two ranks: a kernel updates the state with a step
// count that lives on the device, an all-reduce (on the communication
// stream, which joins the capture) sums it, a copy moves it. Run 6 times as
// is, and 2 times as is, then captured once and launched 4 times: the same
// bits, no allocation and no host wait inside the captured steps, and the
// capture itself runs nothing.
TEST_F(Emulation, ACapturedStepReplaysBitIdenticallyToTheStepRunAsIs) {
  constexpr int64_t n = 5;
  std::vector<std::vector<float>> plain(2), replayed(2);
  std::vector<uint64_t> launches(2), allocations(2), waits(2);
  for (bool graphs : {false, true})
    run_ranks(2, [&](int rank, fsdprt_comm_t *comm) {
      fsdprt_gpu_context_t *ctx = fsdprt_nccl_comm_context(comm);
      // A descriptor check waits on the host: a captured step has none.
      fsdprt_nccl_comm_set_desync_checks(comm, 0);
      auto *x = static_cast<float *>(fsdprt_gpu_alloc(n * 4));
      auto *y = static_cast<float *>(fsdprt_gpu_alloc(n * 4));
      auto *count = static_cast<float *>(fsdprt_gpu_alloc(4));
      fill(x, n, 1.0f + float(rank));
      fill(count, 1, 0.0f);
      auto step = [&] {
        int64_t len = n;
        launch("update", {&x, &count, &len});
        fsdprt_request_t r = nullptr;
        ASSERT_EQ(fsdprt_all_reduce_async(comm, 1, x, y, n, FSDPRT_F32,
                                          FSDPRT_SUM, &r),
                  FSDPRT_OK);
        ASSERT_EQ(fsdprt_wait(&r), FSDPRT_OK);
        mgpuMemcpy(x, y, n * 4, mgpuStreamCreate());
      };
      fsdprt_gpu_graph_t *graph = nullptr;
      fsdprt_gpu_stats_t before, after;
      for (int s = 0; s < 6; ++s) {
        if (!graphs || s < 2) {
          step();
        } else {
          if (s == 2) {
            fsdprt_gpu_context_stats(ctx, &before);
            ASSERT_EQ(fsdprt_gpu_capture_begin(ctx), FSDPRT_OK);
            step();
            ASSERT_EQ(fsdprt_gpu_capture_end(ctx, &graph), FSDPRT_OK)
                << fsdprt_gpu_context_error_message(ctx);
            std::vector<float> now = to_host(count, 1);
            EXPECT_EQ(now[0], 2.0f) << "the capture ran nothing";
          }
          ASSERT_EQ(fsdprt_gpu_graph_launch(graph), FSDPRT_OK);
        }
        ASSERT_EQ(fsdprt_gpu_synchronize(ctx), FSDPRT_OK)
            << fsdprt_gpu_context_error_message(ctx);
      }
      if (graphs) {
        fsdprt_gpu_context_stats(ctx, &after);
        launches[size_t(rank)] = after.graph_launches;
        allocations[size_t(rank)] = after.allocations - before.allocations;
        waits[size_t(rank)] = after.host_waits - before.host_waits;
      }
      std::vector<float> got = to_host(x, n);
      got.push_back(to_host(count, 1)[0]);
      (graphs ? replayed : plain)[size_t(rank)] = got;
      fsdprt_gpu_graph_destroy(graph);
      fsdprt_gpu_free(x);
      fsdprt_gpu_free(y);
      fsdprt_gpu_free(count);
    });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(plain[size_t(r)].size(), size_t(n + 1));
    EXPECT_EQ(plain[size_t(r)].back(), 6.0f) << "six updates of the count";
    EXPECT_EQ(std::memcmp(plain[size_t(r)].data(), replayed[size_t(r)].data(),
                          size_t(n + 1) * 4),
              0)
        << "rank " << r;
    EXPECT_EQ(launches[size_t(r)], 4u);
    EXPECT_EQ(allocations[size_t(r)], 0u);
    // The only host wait is the test's own download after the capture.
    EXPECT_EQ(waits[size_t(r)], 1u);
  }
  EXPECT_EQ(emu::liveGraphs(), 0);
}

// What a captured step may not do is an error that names it (and the
// capture), not a graph that silently misses the work.
TEST_F(Emulation, ACapturedStepThatAllocatesOrWaitsOnTheHostIsAnError) {
  for (int which = 0; which < 2; ++which) {
    fsdprt_gpu_context_t *ctx = nullptr;
    ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
    void *p = fsdprt_gpu_alloc(64);
    ASSERT_EQ(fsdprt_gpu_capture_begin(ctx), FSDPRT_OK);
    if (which == 0) {
      EXPECT_EQ(fsdprt_gpu_alloc(64), nullptr);
    } else {
      float host[16];
      EXPECT_NE(fsdprt_gpu_copy_to_host(host, p, 64), FSDPRT_OK);
    }
    fsdprt_gpu_graph_t *graph = nullptr;
    EXPECT_NE(fsdprt_gpu_capture_end(ctx, &graph), FSDPRT_OK);
    EXPECT_EQ(graph, nullptr);
    std::string msg = fsdprt_gpu_context_error_message(ctx);
    EXPECT_TRUE(contains(msg, "captured into a CUDA graph")) << msg;
    EXPECT_TRUE(
        contains(msg, which == 0 ? "allocate nothing" : "must not synchronize"))
        << msg;
    fsdprt_gpu_free(p);
    fsdprt_gpu_context_destroy(ctx);
  }
  EXPECT_EQ(emu::liveGraphs(), 0);
}

// The scratch buffer of the split reductions: allocated once, and a free of
// a pointer into it (or into the arena: a step's result there) does nothing.
TEST_F(Emulation, TheScratchBufferIsAllocatedOnceAndOwnedByTheContext) {
  fsdprt_gpu_context_t *ctx = nullptr;
  ASSERT_EQ(fsdprt_gpu_context_create(0, &ctx), FSDPRT_OK);
  char *arena = static_cast<char *>(fsdprt_gpu_arena(1024));
  char *scratch = static_cast<char *>(fsdprt_gpu_scratch(512));
  ASSERT_NE(scratch, nullptr);
  for (int step = 0; step < 3; ++step)
    EXPECT_EQ(fsdprt_gpu_scratch(256), scratch);
  EXPECT_EQ(fsdprt_gpu_owned_by_context(arena + 100), 1);
  EXPECT_EQ(fsdprt_gpu_owned_by_context(scratch + 511), 1);
  fsdprt_gpu_free(arena + 256); // a result in the arena: left alone
  fsdprt_gpu_free(scratch);
  fsdprt_gpu_stats_t st;
  fsdprt_gpu_context_stats(ctx, &st);
  EXPECT_EQ(st.allocations, 2u);
  EXPECT_EQ(st.scratch_bytes, 512u);
  EXPECT_EQ(st.bytes_live, 1024u + 512u);
  void *other = fsdprt_gpu_alloc(64);
  EXPECT_EQ(fsdprt_gpu_owned_by_context(other), 0);
  fsdprt_gpu_free(other);
  EXPECT_EQ(fsdprt_gpu_context_error(ctx), FSDPRT_OK)
      << fsdprt_gpu_context_error_message(ctx);
  fsdprt_gpu_context_destroy(ctx);
}

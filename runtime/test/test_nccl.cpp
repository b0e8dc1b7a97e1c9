// nccl backend: runs with one rank thread per visible GPU; every test skips
// when no GPU is present (ctest reports runtime_nccl as skipped). The same
// logic runs without a GPU against the host emulation in
// test_gpu_emulation.cpp.
#include "test_util.h"

#include "fsdprt_gpu.h"

#include <cuda_runtime.h>

#include <atomic>
#include <string>

using namespace rt_test;

namespace {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess)
    return 0;
  return n;
}

#define REQUIRE_GPUS(n)                                                        \
  do {                                                                         \
    int have_ = gpu_count();                                                   \
    if (have_ < (n))                                                           \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << have_;   \
  } while (0)

// Runs fn(rank, comm) on `ranks` threads, rank r on device r.
void run_gpus(const std::vector<int64_t> &shape,
              const std::function<void(int64_t, fsdprt_comm_t *)> &fn,
              double timeout = 60) {
  int64_t ranks = 1;
  for (int64_t s : shape)
    ranks *= s;
  fsdprt_nccl_id_t id;
  ASSERT_EQ(fsdprt_nccl_get_unique_id(&id), FSDPRT_OK);
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = timeout;
  std::vector<std::thread> threads;
  std::atomic<int> create_failures{0};
  for (int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(int(r));
      fsdprt_comm_t *comm = nullptr;
      if (fsdprt_nccl_comm_create(int32_t(shape.size()), shape.data(), r, &id,
                                  int32_t(r), &opts, &comm) != FSDPRT_OK) {
        create_failures++;
        return;
      }
      fn(r, comm);
      fsdprt_comm_destroy(comm);
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(create_failures.load(), 0);
}

template <typename T> T *device_copy(const std::vector<T> &host) {
  T *d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, host.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return d;
}

template <typename T> std::vector<T> host_copy(const T *d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return h;
}

TEST(Nccl, SingleRankCopiesAndReduces) {
  REQUIRE_GPUS(1);
  run_gpus({1}, [](int64_t, fsdprt_comm_t *comm) {
    std::vector<float> in = {1, 2, 3, 4};
    float *d_in = device_copy(in);
    float *d_out = device_copy(std::vector<float>(4, 0));
    EXPECT_EQ(fsdprt_all_gather(comm, 1, d_in, d_out, 4, FSDPRT_F32),
              FSDPRT_OK);
    EXPECT_EQ(host_copy(d_out, 4), in);
    EXPECT_EQ(
        fsdprt_all_reduce(comm, 0, d_in, d_out, 4, FSDPRT_F32, FSDPRT_AVG),
        FSDPRT_OK);
    EXPECT_EQ(host_copy(d_out, 4), in);
    fsdprt_backend_t backend;
    EXPECT_EQ(fsdprt_comm_backend(comm, &backend), FSDPRT_OK);
    EXPECT_EQ(backend, FSDPRT_BACKEND_NCCL);
    cudaFree(d_in);
    cudaFree(d_out);
  });
}

TEST(Nccl, CollectivesOnEveryGpu) {
  REQUIRE_GPUS(2);
  const int64_t w = std::min(gpu_count(), 8);
  const int64_t n = 1000;
  std::atomic<int> bad{0};
  run_gpus({w}, [&](int64_t rank, fsdprt_comm_t *comm) {
    // Integer-valued floats: sums are exact in any order.
    std::vector<float> in(size_t(w * n));
    for (int64_t i = 0; i < w * n; ++i)
      in[size_t(i)] = float((rank + 1) * (i % 17));
    float *d_in = device_copy(in);
    float *d_ag = device_copy(std::vector<float>(size_t(w * n), 0));
    float *d_rs = device_copy(std::vector<float>(size_t(n), 0));
    fsdprt_request_t req = nullptr;
    EXPECT_EQ(fsdprt_all_gather(comm, 1, d_in, d_ag, n, FSDPRT_F32), FSDPRT_OK);
    EXPECT_EQ(fsdprt_reduce_scatter_async(comm, 1, d_in, d_rs, n, FSDPRT_F32,
                                          FSDPRT_SUM, &req),
              FSDPRT_OK);
    // wait orders the rank's compute stream after the collective; the host
    // synchronizes before it reads.
    EXPECT_EQ(fsdprt_wait(&req), FSDPRT_OK);
    EXPECT_EQ(fsdprt_gpu_synchronize(fsdprt_nccl_comm_context(comm)),
              FSDPRT_OK);
    EXPECT_EQ(
        fsdprt_all_reduce(comm, 1, d_in, d_in, w * n, FSDPRT_F32, FSDPRT_MAX),
        FSDPRT_OK);
    auto ag = host_copy(d_ag, size_t(w * n));
    auto rs = host_copy(d_rs, size_t(n));
    auto ar = host_copy(d_in, size_t(w * n));
    const float ranks_sum = float(w * (w + 1) / 2);
    for (int64_t j = 0; j < w; ++j)
      for (int64_t i = 0; i < n; ++i)
        if (ag[size_t(j * n + i)] != float((j + 1) * (i % 17)))
          bad++;
    for (int64_t i = 0; i < n; ++i)
      if (rs[size_t(i)] != ranks_sum * float((rank * n + i) % 17))
        bad++;
    for (int64_t i = 0; i < w * n; ++i)
      if (ar[size_t(i)] != float(w * (i % 17)))
        bad++;
    cudaFree(d_in);
    cudaFree(d_ag);
    cudaFree(d_rs);
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(Nccl, DesyncIsReported) {
  REQUIRE_GPUS(2);
  std::vector<fsdprt_status_t> st(2);
  std::vector<std::string> msg(2);
  run_gpus(
      {2},
      [&](int64_t rank, fsdprt_comm_t *comm) {
        float *d = device_copy(std::vector<float>(64, 1));
        float *out = device_copy(std::vector<float>(128, 0));
        st[size_t(rank)] =
            fsdprt_all_gather(comm, 1, d, out, rank == 1 ? 32 : 16, FSDPRT_F32);
        msg[size_t(rank)] = fsdprt_comm_last_error_message(comm);
        cudaFree(d);
        cudaFree(out);
      },
      20);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[size_t(r)], FSDPRT_ERR_DESYNC);
    EXPECT_NE(msg[size_t(r)].find("rank 1 called all_gather(f32, count=32)"),
              std::string::npos)
        << msg[size_t(r)];
  }
}

} // namespace

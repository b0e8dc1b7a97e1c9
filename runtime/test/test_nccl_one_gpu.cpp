// Several NCCL ranks on one GPU (the runtime's NCCL backend, threads as
// ranks, all on device 0): all_gather, reduce_scatter and all_reduce checked
// element by element. NCCL refuses duplicate devices in a communicator before
// 2.30; older builds skip with that reason. Part of fsdprt_nccl_tests
// (ctest runtime_nccl, label gpu).
#include "fsdprt.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kNcclMinVersion = 23000; // 2.30.0

void twoOrMoreRanks(int64_t w) {
  if (NCCL_VERSION_CODE < kNcclMinVersion)
    GTEST_SKIP() << "NCCL " << NCCL_MAJOR << "." << NCCL_MINOR
                 << " refuses several ranks on one GPU (2.30+ allows it, e.g. "
                    "pip's nvidia-nccl-cu13; point NCCL_HOME at it)";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
    GTEST_SKIP() << "no GPU";
  fsdprt_nccl_id_t id;
  ASSERT_EQ(fsdprt_nccl_get_unique_id(&id), FSDPRT_OK);
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = 60;
  const int64_t n = 1000;
  std::atomic<int> bad{0}, createFailures{0};
  std::vector<std::string> errors(static_cast<size_t>(w));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < w; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      fsdprt_comm_t *comm = nullptr;
      const int64_t shape[1] = {w};
      if (fsdprt_nccl_comm_create(1, shape, r, &id, 0, &opts, &comm) !=
          FSDPRT_OK) {
        createFailures++;
        return;
      }
      std::vector<float> in(size_t(w * n));
      for (int64_t i = 0; i < w * n; ++i)
        in[size_t(i)] = float((r + 1) * (i % 17)); // exact sums
      float *dIn = nullptr, *dAg = nullptr, *dRs = nullptr;
      cudaMalloc(&dIn, in.size() * 4);
      cudaMalloc(&dAg, in.size() * 4);
      cudaMalloc(&dRs, size_t(n) * 4);
      cudaMemcpy(dIn, in.data(), in.size() * 4, cudaMemcpyHostToDevice);
      if (fsdprt_all_gather(comm, 1, dIn, dAg, n, FSDPRT_F32) != FSDPRT_OK ||
          fsdprt_reduce_scatter(comm, 1, dIn, dRs, n, FSDPRT_F32, FSDPRT_SUM) !=
              FSDPRT_OK ||
          fsdprt_all_reduce(comm, 1, dIn, dIn, w * n, FSDPRT_F32, FSDPRT_MAX) !=
              FSDPRT_OK) {
        errors[size_t(r)] = fsdprt_comm_last_error_message(comm);
        bad++;
      }
      std::vector<float> ag(static_cast<size_t>(w * n)),
          rs(static_cast<size_t>(n)), ar(static_cast<size_t>(w * n));
      cudaMemcpy(ag.data(), dAg, ag.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(rs.data(), dRs, rs.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(ar.data(), dIn, ar.size() * 4, cudaMemcpyDeviceToHost);
      const float ranksSum = float(w * (w + 1) / 2);
      for (int64_t j = 0; j < w; ++j)
        for (int64_t i = 0; i < n; ++i)
          bad += ag[size_t(j * n + i)] != float((j + 1) * (i % 17));
      for (int64_t i = 0; i < n; ++i)
        bad += rs[size_t(i)] != ranksSum * float((r * n + i) % 17);
      for (int64_t i = 0; i < w * n; ++i)
        bad += ar[size_t(i)] != float(w * (i % 17));
      cudaFree(dIn);
      cudaFree(dAg);
      cudaFree(dRs);
      fsdprt_comm_destroy(comm);
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(createFailures.load(), 0);
  for (const std::string &e : errors)
    EXPECT_EQ(e, std::string());
  EXPECT_EQ(bad.load(), 0);
}

TEST(NcclOneGpu, TwoRanks) { twoOrMoreRanks(2); }
TEST(NcclOneGpu, FourRanks) { twoOrMoreRanks(4); }

} // namespace

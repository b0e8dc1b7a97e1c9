// Entry points called by compiled code (plain C types, thread comm).
#include "fsdprt_gpu.h"
#include "test_util.h"

#include <atomic>
#include <string>

using namespace rt_test;

namespace {

TEST(Jit, CollectivesThroughTheThreadComm) {
  const std::vector<int64_t> shape = {2, 2};
  std::atomic<int> bad{0};
  run_world(shape, [&](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    EXPECT_EQ(fsdprt_get_thread_comm(), comm);
    int64_t gr = 0;
    auto shard = group_members(shape, rank, 2, &gr);
    // all_gather over axis 1 (groups of 2).
    float in[3] = {float(rank), float(rank) + 0.5f, float(rank) + 0.25f};
    float out[6] = {};
    fsdprt_jit_all_gather(in, out, 3, FSDPRT_F32, 2);
    for (int j = 0; j < 2; ++j)
      if (out[j * 3] != float(shard[size_t(j)]))
        bad++;
    // reduce_scatter + all_reduce over the whole mesh, started together.
    int32_t rs_in[8], rs_out[2], ar[3] = {int32_t(rank), 1, -int32_t(rank)};
    for (int i = 0; i < 8; ++i)
      rs_in[i] = int32_t(rank * 10 + i);
    int64_t h1 = fsdprt_jit_reduce_scatter_start(rs_in, rs_out, 2, FSDPRT_I32,
                                                 FSDPRT_SUM, 3);
    int64_t h2 =
        fsdprt_jit_all_reduce_start(ar, ar, 3, FSDPRT_I32, FSDPRT_MAX, 3);
    EXPECT_GT(h1, 0);
    EXPECT_GT(h2, 0);
    EXPECT_NE(h1, h2);
    EXPECT_EQ(fsdprt_jit_pending(comm), 2);
    fsdprt_jit_wait(h2);
    fsdprt_jit_wait(h1);
    EXPECT_EQ(fsdprt_jit_pending(comm), 0);
    // Slot `rank` of every rank: sum over r of (r * 10 + 2 * rank + i).
    for (int i = 0; i < 2; ++i)
      if (rs_out[i] != (0 + 10 + 20 + 30) + 4 * int32_t(2 * rank + i))
        bad++;
    if (ar[0] != 3 || ar[1] != 1 || ar[2] != 0)
      bad++;
    int64_t h3 = fsdprt_jit_all_gather_start(in, out, 3, FSDPRT_F32, 1);
    fsdprt_jit_wait(h3);
    EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_OK)
        << fsdprt_comm_error_message(comm);
    fsdprt_set_thread_comm(nullptr);
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(Jit, FirstErrorIsRecordedAndLaterCallsDoNothing) {
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = 20;
  std::vector<fsdprt_status_t> first(4);
  std::vector<std::string> msg(4);
  std::atomic<int> touched{0};
  run_world(
      {4},
      [&](int64_t rank, fsdprt_comm_t *comm) {
        fsdprt_set_thread_comm(comm);
        float in[8] = {}, out[32];
        // Rank 2 gathers a different count: every rank records the desync.
        fsdprt_jit_all_gather(in, out, rank == 2 ? 8 : 4, FSDPRT_F32, 1);
        first[size_t(rank)] = fsdprt_comm_error(comm);
        msg[size_t(rank)] = fsdprt_comm_error_message(comm);
        // Later jit calls are no-ops: buffers stay untouched, handles are 0.
        for (float &x : out)
          x = -1;
        fsdprt_jit_all_reduce(in, out, 4, FSDPRT_F32, FSDPRT_SUM, 1);
        int64_t h = fsdprt_jit_all_gather_start(in, out, 4, FSDPRT_F32, 1);
        EXPECT_EQ(h, 0);
        fsdprt_jit_wait(h);
        for (float x : out)
          if (x != -1)
            touched++;
        // The recorded error is still the first one.
        EXPECT_EQ(fsdprt_comm_error(comm), first[size_t(rank)]);
        fsdprt_set_thread_comm(nullptr);
      },
      &opts);
  EXPECT_EQ(touched.load(), 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(first[size_t(r)], FSDPRT_ERR_DESYNC) << msg[size_t(r)];
    EXPECT_NE(msg[size_t(r)].find("rank 2 called all_gather(f32, count=8)"),
              std::string::npos)
        << msg[size_t(r)];
  }
}

TEST(Jit, ErrorDuringAsyncIsRecordedAtWait) {
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = 20;
  std::vector<fsdprt_status_t> err(3);
  run_world(
      {3},
      [&](int64_t rank, fsdprt_comm_t *comm) {
        fsdprt_set_thread_comm(comm);
        double in[2] = {1, 2}, out[6];
        int64_t h = fsdprt_jit_all_reduce_start(
            in, out, 2, rank == 1 ? FSDPRT_F32 : FSDPRT_F64, FSDPRT_SUM, 1);
        fsdprt_jit_wait(h);
        EXPECT_EQ(fsdprt_jit_pending(comm), 0);
        err[size_t(rank)] = fsdprt_comm_error(comm);
        fsdprt_set_thread_comm(nullptr);
      },
      &opts);
  for (auto e : err)
    EXPECT_EQ(e, FSDPRT_ERR_DESYNC);
}

TEST(Jit, FailedGuardIsTheRanksErrorAndPeersDoNotWait) {
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = 20;
  std::vector<fsdprt_status_t> err(3);
  std::vector<std::string> msg(3);
  run_world(
      {3},
      [&](int64_t rank, fsdprt_comm_t *comm) {
        fsdprt_set_thread_comm(comm);
        fsdprt_jit_guard(1, "never reported");
        EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_OK);
        // Rank 1's check fails; it skips the collective the others enter.
        fsdprt_jit_guard(rank != 1, "guard failed: value 3");
        fsdprt_jit_guard(rank != 1, "a second failure");
        float in[2] = {1, 2}, out[6] = {};
        fsdprt_jit_all_gather(in, out, 2, FSDPRT_F32, 1);
        err[size_t(rank)] = fsdprt_comm_error(comm);
        msg[size_t(rank)] = fsdprt_comm_error_message(comm);
        fsdprt_set_thread_comm(nullptr);
      },
      &opts);
  EXPECT_EQ(err[1], FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(msg[1], "rank 1: guard failed: value 3");
  for (int r : {0, 2}) {
    EXPECT_NE(err[size_t(r)], FSDPRT_OK);
    EXPECT_NE(msg[size_t(r)].find("guard failed: value 3"), std::string::npos)
        << msg[size_t(r)];
  }
}

TEST(Jit, AxisIndexIsTheGroupRankWithoutCommunication) {
  // Mesh [2, 3]: bit 0 is axis 0 (size 2), bit 1 axis 1 (size 3).
  std::atomic<int> bad{0};
  run_world({2, 3}, [&](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    for (int64_t mask = 0; mask < 4; ++mask) {
      int64_t want = 0;
      EXPECT_EQ(fsdprt_comm_group(comm, mask, nullptr, &want), FSDPRT_OK);
      if (fsdprt_jit_axis_index(mask) != want)
        bad++;
    }
    if (fsdprt_jit_axis_index(1) != rank / 3 ||
        fsdprt_jit_axis_index(2) != rank % 3 ||
        fsdprt_jit_axis_index(3) != rank || fsdprt_jit_axis_index(0) != 0)
      bad++;
    fsdprt_stats_t stats;
    EXPECT_EQ(fsdprt_comm_get_stats(comm, &stats), FSDPRT_OK);
    EXPECT_EQ(stats.total_calls, 0u);
    EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_OK);
    fsdprt_set_thread_comm(nullptr);
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(Jit, AxisIndexOfAnInvalidMaskIsRecorded) {
  run_world({2}, [&](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    EXPECT_EQ(fsdprt_jit_axis_index(rank == 0 ? 2 : 1), rank == 0 ? 0 : 1);
    if (rank == 0) {
      EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(fsdprt_comm_error_message(comm))
                    .find("axis_index: group mask 2 selects axes outside"),
                std::string::npos)
          << fsdprt_comm_error_message(comm);
    }
    fsdprt_set_thread_comm(nullptr);
  });
}

TEST(Jit, ExtensionsRecordErrorsOnTheComm) {
  run_world({2}, [&](int64_t, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    EXPECT_EQ(fsdprt_comm_record_error(comm, FSDPRT_OK, "x"),
              FSDPRT_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(fsdprt_comm_record_error(comm, FSDPRT_ERR_UNSUPPORTED,
                                       "quantized all_gather: bad format 9"),
              FSDPRT_OK);
    EXPECT_EQ(fsdprt_comm_record_error(comm, FSDPRT_ERR_INTERNAL, nullptr),
              FSDPRT_OK);
    EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_UNSUPPORTED);
    EXPECT_STREQ(fsdprt_comm_error_message(comm),
                 "quantized all_gather: bad format 9");
    EXPECT_STREQ(fsdprt_comm_last_error_message(comm), "internal error");
    // Jit collectives are no-ops after the recorded error.
    float a = 1, b[2] = {0, 0};
    fsdprt_jit_all_gather(&a, b, 1, FSDPRT_F32, 1);
    EXPECT_EQ(b[0], 0.0f);
    fsdprt_set_thread_comm(nullptr);
  });
}

TEST(Jit, UnknownHandleIsRecorded) {
  run_world({1}, [&](int64_t, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    fsdprt_jit_wait(12345);
    EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(fsdprt_comm_error_message(comm)).find("12345"),
              std::string::npos);
    fsdprt_set_thread_comm(nullptr);
  });
}

TEST(Jit, NoThreadCommRecordsAProcessError) {
  fsdprt_process_error_clear();
  fsdprt_set_thread_comm(nullptr);
  float a = 1, b = 0;
  fsdprt_jit_all_gather(&a, &b, 1, FSDPRT_F32, 0);
  EXPECT_EQ(b, 0.0f);
  EXPECT_EQ(fsdprt_jit_all_reduce_start(&a, &b, 1, FSDPRT_F32, 0, 0), 0);
  fsdprt_jit_wait(7);
  EXPECT_EQ(fsdprt_process_error(), FSDPRT_ERR_NO_COMM);
  EXPECT_NE(std::string(fsdprt_process_error_message())
                .find("fsdprt_jit_all_gather called on a thread without"),
            std::string::npos);
  fsdprt_process_error_clear();
  EXPECT_EQ(fsdprt_process_error(), FSDPRT_OK);
}

} // namespace

// A step compiled with gpu-emulation=true runs only on the emulated runtime
// (build/lib/cuda-emulation): this library refuses its kernel table.
TEST(Jit, HostKernelTablesNeedTheEmulatedRuntime) {
  EXPECT_EQ(fsdprt_gpu_emulated(), 0);
  static const int64_t sizes[] = {8};
  const fsdprt_gpu_host_kernel_t kernel = {"k", [](void *const *) {}, sizes, 1,
                                           0};
  EXPECT_EQ(fsdprt_gpu_register_host_kernels("__fsdp_kernels.x", &kernel, 1),
            FSDPRT_ERR_UNSUPPORTED);
  if (fsdprt_gpu_built())
    EXPECT_NE(std::string(fsdprt_gpu_last_error_message())
                  .find("compiled with gpu-emulation=true"),
              std::string::npos)
        << fsdprt_gpu_last_error_message();
  fsdprt_gpu_unregister_host_kernels("__fsdp_kernels.x"); // a no-op
}

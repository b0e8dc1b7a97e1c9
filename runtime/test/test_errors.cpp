// The runtime's error model: one status type (fsdprt_status_t, shared with
// the quantization library), the status names, the thread's last error and
// the asynchronous error of a communicator.
#include "fsdprt.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

namespace {

bool contains(const std::string &s, const char *part) {
  return s.find(part) != std::string::npos;
}

TEST(Errors, EveryStatusHasAName) {
  EXPECT_STREQ(fsdprt_status_string(FSDPRT_OK), "ok");
  EXPECT_STREQ(fsdprt_status_string(FSDPRT_ERR_DESYNC), "desync");
  EXPECT_STREQ(fsdprt_status_string(FSDPRT_ERR_SHAPE),
               "shape not divisible by the block");
  for (int s = 1; s < FSDPRT_NUM_STATUS; ++s)
    EXPECT_STRNE(fsdprt_status_string(fsdprt_status_t(s)), "unknown status")
        << s;
  EXPECT_STREQ(fsdprt_status_string(fsdprt_status_t(FSDPRT_NUM_STATUS)),
               "unknown status");
  EXPECT_STREQ(fsdprt_status_string(fsdprt_status_t(-1)), "unknown status");
}

TEST(Errors, AFailingCallSetsTheThreadsLastError) {
  fsdprt_clear_last_error();
  EXPECT_EQ(fsdprt_get_last_error(), FSDPRT_OK);
  EXPECT_STREQ(fsdprt_get_last_error_message(), "");
  int64_t rank = 0;
  EXPECT_EQ(fsdprt_comm_rank(nullptr, &rank), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_get_last_error(), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(fsdprt_get_last_error_message(),
               "fsdprt_comm_rank: invalid argument");
  // Another thread has its own.
  std::thread([] { EXPECT_EQ(fsdprt_get_last_error(), FSDPRT_OK); }).join();
  // A successful call leaves it.
  EXPECT_EQ(fsdprt_dtype_size(FSDPRT_F32), 4u);
  EXPECT_EQ(fsdprt_get_last_error(), FSDPRT_ERR_INVALID_ARGUMENT);
  fsdprt_clear_last_error();
  EXPECT_EQ(fsdprt_get_last_error(), FSDPRT_OK);
}

TEST(Errors, AnErrorRecordedOnACommIsTheThreadsLastError) {
  rt_test::run_world({2}, [](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_clear_last_error();
    float x[4] = {};
    // An unknown dtype on rank 1 only: its call fails on the argument
    // check and aborts the world; rank 0's fails with ABORTED.
    const fsdprt_status_t st = fsdprt_all_reduce(
        comm, 1, x, x, 4, rank == 1 ? fsdprt_dtype_t(42) : FSDPRT_F32,
        FSDPRT_SUM);
    EXPECT_EQ(fsdprt_get_last_error(), st);
    EXPECT_STREQ(fsdprt_get_last_error_message(),
                 fsdprt_comm_last_error_message(comm));
    if (rank == 1) {
      EXPECT_EQ(st, FSDPRT_ERR_INVALID_ARGUMENT);
      EXPECT_TRUE(contains(fsdprt_get_last_error_message(),
                           "rank 1: invalid argument: all_reduce: unknown "
                           "dtype 42"))
          << fsdprt_get_last_error_message();
    }
  });
}

TEST(Errors, TheAsyncErrorIsTheWorldsAbortSeenWithoutACall) {
  fsdprt_world_t *world = nullptr;
  const int64_t shape[1] = {2};
  ASSERT_EQ(fsdprt_threads_world_create(1, shape, nullptr, &world), FSDPRT_OK);
  fsdprt_comm_t *comm0 = nullptr, *comm1 = nullptr;
  ASSERT_EQ(fsdprt_threads_comm(world, 0, &comm0), FSDPRT_OK);
  ASSERT_EQ(fsdprt_threads_comm(world, 1, &comm1), FSDPRT_OK);
  fsdprt_status_t async = FSDPRT_ERR_INTERNAL;
  ASSERT_EQ(fsdprt_comm_get_async_error(comm0, &async), FSDPRT_OK);
  EXPECT_EQ(async, FSDPRT_OK);
  fsdprt_world_abort(world, "the monitor stopped the job");
  for (fsdprt_comm_t *c : {comm0, comm1}) {
    ASSERT_EQ(fsdprt_comm_get_async_error(c, &async), FSDPRT_OK);
    EXPECT_EQ(async, FSDPRT_ERR_ABORTED);
    // Not recorded on the comm until a call sees it.
    EXPECT_EQ(fsdprt_comm_error(c), FSDPRT_OK);
  }
  float x[2] = {};
  EXPECT_EQ(fsdprt_all_reduce(comm1, 1, x, x, 2, FSDPRT_F32, FSDPRT_SUM),
            FSDPRT_ERR_ABORTED);
  EXPECT_TRUE(
      contains(fsdprt_comm_error_message(comm1), "the monitor stopped the job"))
      << fsdprt_comm_error_message(comm1);
  EXPECT_EQ(fsdprt_comm_get_async_error(nullptr, &async),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_comm_get_async_error(comm0, nullptr),
            FSDPRT_ERR_INVALID_ARGUMENT);
  fsdprt_world_destroy(world);
}

} // namespace

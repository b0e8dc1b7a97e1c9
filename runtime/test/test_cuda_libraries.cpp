// cuBLAS and NCCL are opened on first use (runtime/cuda/cuda_libraries.h):
// a program linked with libfsdprt loads no CUDA library until a GPU context
// or an NCCL communicator needs one, and a library that cannot be opened is
// an error status that names it. Needs no GPU.
#include "fsdprt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <link.h>
#include <string>

namespace {

// The shared objects of this process whose file name contains `part`.
std::string loaded(const char *part) {
  struct Query {
    const char *part;
    std::string found;
  } q{part, ""};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *q = static_cast<Query *>(data);
        if (info->dlpi_name && std::strstr(info->dlpi_name, q->part))
          q->found += std::string(info->dlpi_name) + " ";
        return 0;
      },
      &q);
  return q.found;
}

TEST(CudaLibraries, NoneIsLoadedWithTheRuntime) {
  // A threads world and an all-reduce: the runtime is in use.
  int64_t shape[1] = {1};
  fsdprt_world_t *world = nullptr;
  ASSERT_EQ(fsdprt_threads_world_create(1, shape, nullptr, &world), FSDPRT_OK);
  fsdprt_comm_t *comm = nullptr;
  ASSERT_EQ(fsdprt_threads_comm(world, 0, &comm), FSDPRT_OK);
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(fsdprt_all_reduce(comm, 0, x, x, 4, FSDPRT_F32, FSDPRT_SUM),
            FSDPRT_OK);
  fsdprt_world_destroy(world);
  EXPECT_EQ(loaded("libcublas"), "");
  EXPECT_EQ(loaded("libnccl"), "");
  EXPECT_EQ(loaded("libcudart"), "");
}

TEST(CudaLibrariesDeathTest, AMissingNcclIsAnErrorThatNamesIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("FSDPRT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
        fsdprt_nccl_id_t id;
        fsdprt_status_t st = fsdprt_nccl_get_unique_id(&id);
        std::fprintf(stderr, "status %d: %s\n", int(st),
                     fsdprt_get_last_error_message());
        std::exit(st == FSDPRT_ERR_UNSUPPORTED ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "status 6: NCCL cannot be loaded \\(/nonexistent/libnccl.so.2: .*\\); "
      "the nccl backend needs it");
}

} // namespace

// Member layouts (fsdprt_all_gather_members, fsdprt_reduce_scatter_members)
// on the threads backend: every result against the plain collective on the
// rank-major buffers followed by the permutation done here, bit for bit.
#include "test_util.h"

#include <chrono>
#include <mutex>
#include <string>

using namespace rt_test;

namespace {

// How a collective is called: the C API (blocking or started and waited)
// or the entry points for compiled code (blocking or started).
enum class Call { Sync, Async, Jit, JitStart };

const char *call_name(Call c) {
  switch (c) {
  case Call::Sync:
    return "sync";
  case Call::Async:
    return "async";
  case Call::Jit:
    return "jit";
  case Call::JitStart:
    return "jit start";
  }
  return "?";
}

uint64_t seed_of(int64_t rank, int salt) {
  return uint64_t(rank) * 7919u + uint64_t(salt) * 104729u + 1u;
}

int64_t sum_of(const std::vector<int64_t> &counts) {
  int64_t s = 0;
  for (int64_t c : counts)
    s += c;
  return s;
}

struct Failures {
  std::mutex mu;
  std::vector<std::string> list;
  void add(const std::string &s) {
    std::lock_guard<std::mutex> lock(mu);
    list.push_back(s);
  }
  void check() {
    for (auto &s : list)
      ADD_FAILURE() << s;
  }
};

// Runs the member-layout collective `call`s way on this rank.
fsdprt_status_t run_members(fsdprt_comm_t *comm, Call call, int32_t kind,
                            int64_t mask, const void *send, void *recv,
                            int64_t count, int32_t dtype, int32_t op,
                            const std::vector<int64_t> &counts) {
  const int64_t n = int64_t(counts.size());
  const int64_t *c = counts.data();
  const bool gather = kind == FSDPRT_KIND_ALL_GATHER;
  void *s = const_cast<void *>(send);
  if (call == Call::Sync)
    return gather ? fsdprt_all_gather_members(comm, mask, send, recv, count,
                                              dtype, n, c)
                  : fsdprt_reduce_scatter_members(comm, mask, send, recv, count,
                                                  dtype, op, n, c);
  if (call == Call::Async) {
    fsdprt_request_t req = nullptr;
    fsdprt_status_t st =
        gather ? fsdprt_all_gather_members_async(comm, mask, send, recv, count,
                                                 dtype, n, c, &req)
               : fsdprt_reduce_scatter_members_async(
                     comm, mask, send, recv, count, dtype, op, n, c, &req);
    if (st != FSDPRT_OK)
      return st;
    return fsdprt_wait(&req);
  }
  fsdprt_set_thread_comm(comm);
  if (call == Call::Jit) {
    if (gather)
      fsdprt_jit_all_gather_members(s, recv, count, dtype, mask, n, c);
    else
      fsdprt_jit_reduce_scatter_members(s, recv, count, dtype, op, mask, n, c);
  } else {
    int64_t h = gather ? fsdprt_jit_all_gather_members_start(s, recv, count,
                                                             dtype, mask, n, c)
                       : fsdprt_jit_reduce_scatter_members_start(
                             s, recv, count, dtype, op, mask, n, c);
    fsdprt_jit_wait(h);
  }
  fsdprt_set_thread_comm(nullptr);
  return fsdprt_comm_error(comm);
}

// The member layout `counts` of kind/dtype/op over `mask` of mesh `shape`,
// called `call`s way on every rank, against (1) the plain collective on the
// rank-major buffers, permuted here, and (2) a reference built here from
// every rank's input.
void check_members(const std::vector<int64_t> &shape, int64_t mask,
                   int32_t kind, int32_t dtype, int32_t op,
                   const std::vector<int64_t> &counts, int salt, Call call) {
  const size_t es = fsdprt_dtype_size(dtype);
  const int64_t count = sum_of(counts);
  int64_t world = 1;
  for (int64_t s : shape)
    world *= s;
  int64_t gr0 = 0;
  const int64_t k = int64_t(group_members(shape, 0, mask, &gr0).size());
  const bool gather = kind == FSDPRT_KIND_ALL_GATHER;
  const int64_t send_n = gather ? count : k * count;
  const int64_t recv_n = gather ? k * count : count;
  // Every rank's input (reduce_scatter: member-major).
  std::vector<std::vector<char>> inputs(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    inputs[size_t(r)].resize(size_t(send_n) * es);
    fill(inputs[size_t(r)].data(), dtype, send_n, seed_of(r, salt));
  }
  const std::string what =
      std::string(gather ? "all_gather" : "reduce_scatter") + "_members " +
      fsdprt_dtype_name(dtype) + (gather ? "" : " op ") +
      (gather ? "" : fsdprt_reduce_op_name(op)) + " mask " +
      std::to_string(mask) + " count " + std::to_string(count) + " members " +
      std::to_string(counts.size()) + " " + call_name(call);
  Failures failures;
  run_world(shape, [&](int64_t rank, fsdprt_comm_t *comm) {
    const std::string at = what + " rank " + std::to_string(rank);
    int64_t gr = 0;
    std::vector<int64_t> members = group_members(shape, rank, mask, &gr);
    const std::vector<char> &send = inputs[size_t(rank)];
    // A canary after the receive buffer: nothing may write past it.
    const size_t canary = 64;
    std::vector<char> recv(size_t(recv_n) * es + canary, char(0x5a));
    fsdprt_status_t st = run_members(comm, call, kind, mask, send.data(),
                                     recv.data(), count, dtype, op, counts);
    if (st != FSDPRT_OK) {
      failures.add(at + ": status " + fsdprt_status_string(st) + ": " +
                   fsdprt_comm_last_error_message(comm));
      return;
    }
    for (size_t i = 0; i < canary; ++i)
      if (recv[size_t(recv_n) * es + i] != char(0x5a)) {
        failures.add(at + ": wrote past the receive buffer");
        break;
      }
    std::vector<char> plain(size_t(recv_n) * es), expect;
    if (gather) {
      st = fsdprt_all_gather(comm, mask, send.data(), plain.data(), count,
                             dtype);
      expect = permute_members(counts, k, es, plain.data(), false);
    } else {
      std::vector<char> rank_major =
          permute_members(counts, k, es, send.data(), true);
      st = fsdprt_reduce_scatter(comm, mask, rank_major.data(), plain.data(),
                                 count, dtype, op);
      expect = plain;
    }
    std::vector<const void *> group_inputs;
    for (int64_t m : members)
      group_inputs.push_back(inputs[size_t(m)].data());
    std::vector<char> reference =
        members_reference(counts, kind, dtype, op, gr, group_inputs);
    if (st != FSDPRT_OK) {
      failures.add(at + ": the plain collective failed: " +
                   fsdprt_comm_last_error_message(comm));
      return;
    }
    int64_t bad = -1;
    if (std::memcmp(recv.data(), expect.data(), expect.size()) != 0 &&
        !same_elements(recv.data(), expect.data(), dtype, recv_n, &bad))
      failures.add(at + ": differs from the plain collective at element " +
                   std::to_string(bad));
    if (!same_elements(recv.data(), reference.data(), dtype, recv_n, &bad))
      failures.add(at + ": differs from the reference at element " +
                   std::to_string(bad));
  });
  failures.check();
}

// Small members (one task) and members that span several 256 KiB tasks,
// with empty members first, inside and last.
const std::vector<int64_t> kSmall = {5, 0, 1, 77, 0, 300};
const std::vector<int64_t> kManyTasks = {0, 40000, 3, 17, 25000, 0, 1, 0};

class ThreadsMembers : public ::testing::TestWithParam<int64_t> {};

TEST_P(ThreadsMembers, AllGatherMatchesThePlainCollectivePermuted) {
  const std::vector<int64_t> shape = {GetParam()};
  int salt = 1;
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
    for (Call call : {Call::Sync, Call::Async, Call::Jit, Call::JitStart})
      check_members(shape, 1, FSDPRT_KIND_ALL_GATHER, dtype, -1, kSmall, salt++,
                    call);
    for (Call call : {Call::Sync, Call::JitStart})
      check_members(shape, 1, FSDPRT_KIND_ALL_GATHER, dtype, -1, kManyTasks,
                    salt++, call);
  }
}

TEST_P(ThreadsMembers, ReduceScatterMatchesThePlainCollectivePermuted) {
  const std::vector<int64_t> shape = {GetParam()};
  int salt = 100;
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16})
    for (int32_t op : {FSDPRT_SUM, FSDPRT_AVG}) {
      for (Call call : {Call::Sync, Call::Async, Call::Jit, Call::JitStart})
        check_members(shape, 1, FSDPRT_KIND_REDUCE_SCATTER, dtype, op, kSmall,
                      salt++, call);
      for (Call call : {Call::Async, Call::Jit})
        check_members(shape, 1, FSDPRT_KIND_REDUCE_SCATTER, dtype, op,
                      kManyTasks, salt++, call);
    }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadsMembers, ::testing::Values(2, 3, 8));

TEST(ThreadsMembersMesh, EveryGroupOfA2x2Mesh) {
  const std::vector<int64_t> shape = {2, 2};
  int salt = 200;
  for (int64_t mask : {1, 2, 3}) {
    check_members(shape, mask, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1,
                  kManyTasks, salt++, Call::Async);
    check_members(shape, mask, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_BF16,
                  FSDPRT_AVG, kSmall, salt++, Call::Sync);
    check_members(shape, mask, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32,
                  FSDPRT_SUM, kManyTasks, salt++, Call::JitStart);
  }
}

TEST(ThreadsMembersLarge, StreamingStores) {
  // Gathers of k * k * S * es >= 8 MiB and reductions of k * S * es >= 8 MiB
  // use non-temporal stores.
  check_members({2}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1,
                {0, 700000, 5, 450001}, 300, Call::Sync);
  check_members({2}, 1, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, FSDPRT_SUM,
                {0, 700000, 5, 450001}, 301, Call::Async);
  check_members({8}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_BF16, -1,
                {30000, 0, 9, 40000}, 302, Call::Async);
}

TEST(ThreadsMembersEdge, OneMemberAndEmptyMembersAreThePlainCollective) {
  int salt = 400;
  // One member, and every member empty but one.
  for (const std::vector<int64_t> &counts :
       std::vector<std::vector<int64_t>>{{1234}, {0, 0, 1234, 0}})
    for (int32_t kind : {FSDPRT_KIND_ALL_GATHER, FSDPRT_KIND_REDUCE_SCATTER})
      check_members({3}, 1, kind, FSDPRT_F32, FSDPRT_SUM, counts, salt++,
                    Call::Sync);
  // Every member empty: a collective of count 0 (NULL buffers allowed).
  run_world({2}, [](int64_t, fsdprt_comm_t *comm) {
    const int64_t zeros[3] = {0, 0, 0};
    EXPECT_EQ(fsdprt_all_gather_members(comm, 1, nullptr, nullptr, 0,
                                        FSDPRT_F32, 3, zeros),
              FSDPRT_OK);
    EXPECT_EQ(fsdprt_reduce_scatter_members(comm, 1, nullptr, nullptr, 0,
                                            FSDPRT_F32, FSDPRT_SUM, 3, zeros),
              FSDPRT_OK);
  });
}

TEST(ThreadsMembersEdge, NoMembersOrOneIsThePlainCollectiveOnEveryRank) {
  // Rank 0 passes no layout (NULL counts), rank 1 one member: the same
  // plain collective, so no desync.
  run_world({2}, [](int64_t rank, fsdprt_comm_t *comm) {
    float in[3] = {float(rank), float(rank) + 0.5f, 2.0f};
    float out[6] = {};
    const int64_t one[1] = {3};
    EXPECT_EQ(fsdprt_all_gather_members(comm, 1, in, out, 3, FSDPRT_F32,
                                        rank == 0 ? 0 : 1,
                                        rank == 0 ? nullptr : one),
              FSDPRT_OK)
        << fsdprt_comm_last_error_message(comm);
    const float want[6] = {0.0f, 0.5f, 2.0f, 1.0f, 1.5f, 2.0f};
    EXPECT_EQ(std::memcmp(out, want, sizeof(out)), 0);
  });
}

TEST(ThreadsMembersEdge, StatisticsCountThePlainCollectivesBytes) {
  run_world({4}, [](int64_t, fsdprt_comm_t *comm) {
    const int64_t counts[3] = {3, 0, 5};
    std::vector<float> in(32, 1.0f), out(32);
    ASSERT_EQ(fsdprt_comm_reset_stats(comm), FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_gather_members(comm, 1, in.data(), out.data(), 8,
                                        FSDPRT_F32, 3, counts),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_reduce_scatter_members(comm, 1, in.data(), out.data(), 8,
                                            FSDPRT_F32, FSDPRT_SUM, 3, counts),
              FSDPRT_OK);
    fsdprt_stats_t s;
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &s), FSDPRT_OK);
    EXPECT_EQ(s.calls[FSDPRT_KIND_ALL_GATHER], 1u);
    EXPECT_EQ(s.bytes_sent[FSDPRT_KIND_ALL_GATHER], 8u * 4);
    EXPECT_EQ(s.bytes_received[FSDPRT_KIND_ALL_GATHER], 32u * 4);
    EXPECT_EQ(s.calls[FSDPRT_KIND_REDUCE_SCATTER], 1u);
    EXPECT_EQ(s.bytes_sent[FSDPRT_KIND_REDUCE_SCATTER], 32u * 4);
    EXPECT_EQ(s.bytes_received[FSDPRT_KIND_REDUCE_SCATTER], 8u * 4);
  });
}

// ---- desync and invalid arguments -------------------------------------------

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

TEST(ThreadsMembersDesync, DifferentLayoutsOfTheSameCountNameTheRanks) {
  double elapsed = 0;
  auto res = run_failing(
      {3}, short_timeout(20),
      [](int64_t rank, fsdprt_comm_t *comm) {
        std::vector<float> in(8), out(24);
        const int64_t a[2] = {6, 2}, b[2] = {2, 6};
        return fsdprt_all_gather_members(comm, 1, in.data(), out.data(), 8,
                                         FSDPRT_F32, 2, rank == 2 ? b : a);
      },
      &elapsed);
  EXPECT_LT(elapsed, 10.0) << "desync must be reported, not timed out";
  for (size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].status, FSDPRT_ERR_DESYNC) << "rank " << r;
    EXPECT_TRUE(contains(res[r].message, "rank 0 called all_gather(f32, "
                                         "count=8, members=2, layout="))
        << res[r].message;
    EXPECT_TRUE(contains(res[r].message, "but rank 2 called all_gather(f32, "
                                         "count=8, members=2, layout="))
        << res[r].message;
  }
}

TEST(ThreadsMembersDesync, ALayoutAgainstThePlainCollective) {
  double elapsed = 0;
  auto res = run_failing(
      {2}, short_timeout(20),
      [](int64_t rank, fsdprt_comm_t *comm) {
        std::vector<float> in(16), out(8);
        const int64_t counts[3] = {4, 1, 3};
        return fsdprt_reduce_scatter_members(comm, 1, in.data(), out.data(), 8,
                                             FSDPRT_F32, FSDPRT_SUM,
                                             rank == 1 ? 3 : 0, counts);
      },
      &elapsed);
  EXPECT_LT(elapsed, 10.0);
  for (size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].status, FSDPRT_ERR_DESYNC) << "rank " << r;
    EXPECT_TRUE(contains(res[r].message,
                         "rank 0 called reduce_scatter(f32, count=8, op=sum) "
                         "but rank 1 called reduce_scatter(f32, count=8, "
                         "op=sum, members=3, layout="))
        << res[r].message;
  }
}

TEST(ThreadsMembersApi, InvalidLayoutsAreReported) {
  double elapsed = 0;
  // Every rank makes the same bad calls: each is rejected locally, before
  // any communication.
  auto res = run_failing(
      {2}, short_timeout(20),
      [](int64_t, fsdprt_comm_t *comm) {
        std::vector<float> in(16), out(16);
        const int64_t good[3] = {4, 0, 4}, negative[3] = {5, -1, 4},
                      short_sum[3] = {4, 0, 3}, long_sum[3] = {4, 9, 4};
        struct Bad {
          int64_t n;
          const int64_t *counts;
          const char *message;
        } bad[] = {
            {-1, good, "negative number of members -1"},
            {3, nullptr, "NULL member_counts for 3 members"},
            {3, negative, "member 1 has a negative count -1"},
            {3, short_sum,
             "the counts of the 3 members add up to 7, not the "
             "count 8"},
            {3, long_sum,
             "the counts of the 3 members add up to more than "
             "the count 8"},
        };
        for (const Bad &b : bad) {
          if (fsdprt_all_gather_members(comm, 1, in.data(), out.data(), 8,
                                        FSDPRT_F32, b.n, b.counts) !=
              FSDPRT_ERR_INVALID_ARGUMENT)
            return FSDPRT_ERR_INTERNAL;
          std::string msg = fsdprt_comm_last_error_message(comm);
          if (!contains(msg, "invalid argument: all_gather: ") ||
              !contains(msg, b.message)) {
            ADD_FAILURE() << msg;
            return FSDPRT_ERR_INTERNAL;
          }
        }
        // A member layout cannot run in place.
        if (fsdprt_reduce_scatter_members(comm, 1, in.data(), in.data() + 8, 8,
                                          FSDPRT_F32, FSDPRT_SUM, 3,
                                          good) != FSDPRT_ERR_INVALID_ARGUMENT)
          return FSDPRT_ERR_INTERNAL;
        if (!contains(fsdprt_comm_last_error_message(comm),
                      "reduce_scatter: send and recv overlap"))
          return FSDPRT_ERR_INTERNAL;
        fsdprt_request_t req = nullptr;
        if (fsdprt_all_gather_members_async(comm, 1, in.data(), out.data(), 8,
                                            FSDPRT_F32, 3, short_sum, &req) !=
                FSDPRT_ERR_INVALID_ARGUMENT ||
            req != nullptr)
          return FSDPRT_ERR_INTERNAL;
        return FSDPRT_OK;
      },
      &elapsed);
  for (size_t r = 0; r < res.size(); ++r)
    EXPECT_EQ(res[r].status, FSDPRT_OK)
        << "rank " << r << ": " << res[r].message;
}

TEST(ThreadsMembersApi, AJitCallWithABadLayoutRecordsTheError) {
  run_world({2}, [](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    float in[4] = {}, out[8] = {};
    const int64_t counts[2] = {1, 2};
    EXPECT_EQ(fsdprt_jit_all_gather_members_start(in, out, 4, FSDPRT_F32, 1, 2,
                                                  counts),
              0);
    EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(fsdprt_comm_error_message(comm),
                         "the counts of the 2 members add up to 3, not the "
                         "count 4"))
        << fsdprt_comm_error_message(comm);
    EXPECT_EQ(fsdprt_jit_pending(comm), 0);
    fsdprt_set_thread_comm(nullptr);
  });
}

} // namespace

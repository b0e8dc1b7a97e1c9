// Collectives on the threads backend against references computed here.
#include "test_util.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

using namespace rt_test;

namespace {

const int32_t kAllDtypes[] = {FSDPRT_F32, FSDPRT_F64, FSDPRT_F16, FSDPRT_BF16,
                              FSDPRT_I32, FSDPRT_I64, FSDPRT_U8,  FSDPRT_I8};
const int32_t kAllOps[] = {FSDPRT_SUM, FSDPRT_AVG, FSDPRT_MAX, FSDPRT_MIN};

uint64_t seed_of(int64_t rank, int salt) {
  return uint64_t(rank) * 7919u + uint64_t(salt) * 104729u + 1u;
}

// Thread-safe collection of failures from rank threads.
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

std::string where(int64_t rank, int32_t kind, int32_t dtype, int32_t op,
                  int64_t mask, int64_t count) {
  static const char *kinds[] = {"all_gather", "reduce_scatter", "all_reduce"};
  return std::string(kinds[kind]) + " rank " + std::to_string(rank) + " " +
         fsdprt_dtype_name(dtype) + " op " + fsdprt_reduce_op_name(op) +
         " mask " + std::to_string(mask) + " count " + std::to_string(count);
}

// Runs kind/dtype/op over `mask` of mesh `shape` on every rank and compares
// each rank's result with the reference built from all ranks' inputs.
void check_collective(const std::vector<int64_t> &shape, int64_t mask,
                      int32_t kind, int32_t dtype, int32_t op, int64_t count,
                      int salt, bool in_place = false) {
  const size_t es = fsdprt_dtype_size(dtype);
  int64_t world = 1;
  for (int64_t s : shape)
    world *= s;
  int64_t gr0 = 0;
  const int64_t k = int64_t(group_members(shape, 0, mask, &gr0).size());
  const int64_t send_n = kind == FSDPRT_KIND_REDUCE_SCATTER ? k * count : count;
  const int64_t recv_n = kind == FSDPRT_KIND_ALL_GATHER ? k * count : count;
  // Inputs of every rank (kept for the reference).
  std::vector<std::vector<char>> inputs(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    inputs[size_t(r)].resize(size_t(send_n) * es + 1);
    fill(inputs[size_t(r)].data(), dtype, send_n, seed_of(r, salt));
  }
  Failures failures;
  run_world(shape, [&](int64_t rank, fsdprt_comm_t *comm) {
    int64_t gr = 0;
    std::vector<int64_t> members = group_members(shape, rank, mask, &gr);
    std::vector<char> send = inputs[size_t(rank)];
    std::vector<char> recv(size_t(recv_n) * es + 1, 0);
    const void *sp = send.data();
    void *rp = recv.data();
    if (in_place) {
      // In-place layouts of NCCL: the input lives inside the output.
      if (kind == FSDPRT_KIND_ALL_GATHER) {
        std::memcpy(recv.data() + size_t(gr * count) * es, send.data(),
                    size_t(count) * es);
        sp = recv.data() + size_t(gr * count) * es;
      } else if (kind == FSDPRT_KIND_REDUCE_SCATTER) {
        rp = send.data() + size_t(gr * count) * es;
      } else {
        rp = send.data();
      }
    }
    fsdprt_status_t st;
    if (kind == FSDPRT_KIND_ALL_GATHER)
      st = fsdprt_all_gather(comm, mask, sp, rp, count, dtype);
    else if (kind == FSDPRT_KIND_REDUCE_SCATTER)
      st = fsdprt_reduce_scatter(comm, mask, sp, rp, count, dtype, op);
    else
      st = fsdprt_all_reduce(comm, mask, sp, rp, count, dtype, op);
    std::string at = where(rank, kind, dtype, op, mask, count);
    if (st != FSDPRT_OK) {
      failures.add(at + ": status " + fsdprt_status_string(st) + ": " +
                   fsdprt_comm_last_error_message(comm));
      return;
    }
    std::vector<char> expect(size_t(recv_n) * es + 1, 0);
    if (kind == FSDPRT_KIND_ALL_GATHER) {
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(expect.data() + size_t(j * count) * es,
                    inputs[size_t(members[size_t(j)])].data(),
                    size_t(count) * es);
    } else {
      std::vector<const void *> ins;
      int64_t offset = kind == FSDPRT_KIND_REDUCE_SCATTER ? gr * count : 0;
      for (int64_t m : members)
        ins.push_back(inputs[size_t(m)].data() + size_t(offset) * es);
      reference_reduce(expect.data(), ins, dtype, op, count);
    }
    int64_t bad = -1;
    if (!same_elements(rp, expect.data(), dtype, recv_n, &bad))
      failures.add(at + (in_place ? " (in place)" : "") +
                   ": mismatch at element " + std::to_string(bad));
  });
  failures.check();
}

class ThreadsWorldSize : public ::testing::TestWithParam<int64_t> {};

TEST_P(ThreadsWorldSize, AllGatherEveryDtype) {
  const int64_t w = GetParam();
  for (int32_t dtype : kAllDtypes)
    check_collective({w}, 1, FSDPRT_KIND_ALL_GATHER, dtype, -1, 37, 1);
}

TEST_P(ThreadsWorldSize, ReduceScatterEveryDtypeAndOp) {
  const int64_t w = GetParam();
  for (int32_t dtype : kAllDtypes)
    for (int32_t op : kAllOps)
      check_collective({w}, 1, FSDPRT_KIND_REDUCE_SCATTER, dtype, op, 29, 2);
}

TEST_P(ThreadsWorldSize, AllReduceEveryDtypeAndOp) {
  const int64_t w = GetParam();
  for (int32_t dtype : kAllDtypes)
    for (int32_t op : kAllOps)
      check_collective({w}, 1, FSDPRT_KIND_ALL_REDUCE, dtype, op, 45, 3);
}

TEST_P(ThreadsWorldSize, LargeBuffersSplitIntoManyTasks) {
  const int64_t w = GetParam();
  // Big enough that the data movement is split into several tasks.
  check_collective({w}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 150001, 4);
  check_collective({w}, 1, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_BF16, FSDPRT_SUM,
                   70001, 5);
  check_collective({w}, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F32, FSDPRT_AVG,
                   200003, 6);
}

TEST_P(ThreadsWorldSize, InPlace) {
  const int64_t w = GetParam();
  check_collective({w}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 1001, 7,
                   true);
  check_collective({w}, 1, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, FSDPRT_SUM,
                   1001, 8, true);
  check_collective({w}, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_BF16, FSDPRT_AVG,
                   100001, 9, true);
}

TEST_P(ThreadsWorldSize, ZeroCount) {
  const int64_t w = GetParam();
  check_collective({w}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 0, 10);
  check_collective({w}, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F32, FSDPRT_SUM, 0,
                   10);
}

TEST(ThreadsLarge, StreamingStoresMatchReference) {
  // Above the size where copies and reduction outputs use non-temporal
  // stores (8 MiB of output per collective).
  check_collective({4}, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 600001, 60);
  check_collective({4}, 1, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, FSDPRT_SUM,
                   600001, 61);
  check_collective({4}, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_BF16, FSDPRT_AVG,
                   1200001, 62);
  check_collective({4}, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F32, FSDPRT_MAX,
                   600001, 63, true);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadsWorldSize,
                         ::testing::Values(1, 2, 3, 4, 8));

TEST(ThreadsMesh, TwoByFourEveryMask) {
  for (int64_t mask : {0, 1, 2, 3}) {
    check_collective({2, 4}, mask, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 19,
                     20);
    check_collective({2, 4}, mask, FSDPRT_KIND_ALL_GATHER, FSDPRT_BF16, -1, 8,
                     21);
    for (int32_t op : kAllOps) {
      check_collective({2, 4}, mask, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, op,
                       13, 22);
      check_collective({2, 4}, mask, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_BF16,
                       op, 13, 23);
      check_collective({2, 4}, mask, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F32, op, 33,
                       24);
      check_collective({2, 4}, mask, FSDPRT_KIND_ALL_REDUCE, FSDPRT_I32, op, 33,
                       25);
    }
  }
}

TEST(ThreadsMesh, NonContiguousMaskOnThreeAxes) {
  // Mask 0b101 on 2x2x2: groups of 4 over axes 0 and 2.
  check_collective({2, 2, 2}, 5, FSDPRT_KIND_ALL_GATHER, FSDPRT_I64, -1, 9, 30);
  check_collective({2, 2, 2}, 5, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F16,
                   FSDPRT_SUM, 11, 31);
  check_collective({2, 2, 2}, 6, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F64, FSDPRT_AVG,
                   17, 32);
}

TEST(ThreadsMesh, GroupQueriesMatchCoordinates) {
  const std::vector<int64_t> shape = {2, 3, 2};
  run_world(shape, [&](int64_t rank, fsdprt_comm_t *comm) {
    for (int64_t mask = 0; mask < 8; ++mask) {
      int64_t size = 0, gr = -1, want_gr = -1;
      EXPECT_EQ(fsdprt_comm_group(comm, mask, &size, &gr), FSDPRT_OK);
      auto members = group_members(shape, rank, mask, &want_gr);
      EXPECT_EQ(size, int64_t(members.size()));
      EXPECT_EQ(gr, want_gr);
    }
    int64_t coords[3];
    EXPECT_EQ(fsdprt_comm_coords(comm, coords), FSDPRT_OK);
    EXPECT_EQ(coords[0] * 6 + coords[1] * 2 + coords[2], rank);
    EXPECT_EQ(fsdprt_comm_group(comm, 8, nullptr, nullptr),
              FSDPRT_ERR_INVALID_ARGUMENT);
  });
}

// ---- bf16 rounding ---------------------------------------------------------

TEST(ThreadsRounding, Bf16AccumulatesInFp32AndRoundsOnce) {
  // Rank values 1, 2^-8, 2^-8: fp32 sum 1 + 2^-7 is a bf16 value; rounding
  // after every addition would give 1 (1 + 2^-8 ties to even = 1).
  const uint16_t one = 0x3f80, eps = 0x3b80; // 1.0, 2^-8
  ASSERT_EQ(bf16_value(eps), std::ldexp(1.0, -8));
  run_world({3}, [&](int64_t rank, fsdprt_comm_t *comm) {
    uint16_t in[2] = {rank == 0 ? one : eps,
                      uint16_t(rank == 0 ? 0x3f81 : (rank == 1 ? eps : 0))};
    uint16_t out[2] = {0, 0};
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, in, out, 2, FSDPRT_BF16, FSDPRT_SUM),
              FSDPRT_OK);
    EXPECT_EQ(bf16_value(out[0]), 1.0 + std::ldexp(1.0, -7));
    // (1 + 2^-7) + 2^-8: a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
    EXPECT_EQ(bf16_value(out[1]), 1.0 + std::ldexp(1.0, -6));
  });
}

TEST(ThreadsRounding, Bf16AverageDividesTheFp32Sum) {
  run_world({4}, [&](int64_t rank, fsdprt_comm_t *comm) {
    // 3 + 3 + 3 + 4 = 13; 13 / 4 = 3.25 is exact in bf16.
    uint16_t in = to_bf16(rank == 3 ? 4.0 : 3.0), out = 0;
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, &in, &out, 1, FSDPRT_BF16, FSDPRT_AVG),
              FSDPRT_OK);
    EXPECT_EQ(bf16_value(out), 3.25);
  });
}

TEST(ThreadsRounding, MaxMinPropagateNaN) {
  run_world({4}, [&](int64_t rank, fsdprt_comm_t *comm) {
    float in[2] = {float(rank), rank == 2 ? NAN : float(rank)};
    float mx[2], mn[2];
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, in, mx, 2, FSDPRT_F32, FSDPRT_MAX),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, in, mn, 2, FSDPRT_F32, FSDPRT_MIN),
              FSDPRT_OK);
    EXPECT_EQ(mx[0], 3.0f);
    EXPECT_EQ(mn[0], 0.0f);
    EXPECT_TRUE(std::isnan(mx[1]));
    EXPECT_TRUE(std::isnan(mn[1]));
  });
}

// ---- determinism -----------------------------------------------------------

std::vector<std::vector<char>> reduce_run(int salt) {
  const int64_t w = 8, count = 30011;
  std::vector<std::vector<char>> out(static_cast<size_t>(w));
  run_world({w}, [&](int64_t rank, fsdprt_comm_t *comm) {
    std::vector<float> send(static_cast<size_t>(w * count));
    fill(send.data(), FSDPRT_F32, w * count, seed_of(rank, salt));
    std::vector<float> rs(static_cast<size_t>(count)),
        ar(static_cast<size_t>(w * count));
    ASSERT_EQ(fsdprt_reduce_scatter(comm, 1, send.data(), rs.data(), count,
                                    FSDPRT_F32, FSDPRT_SUM),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, send.data(), ar.data(), w * count,
                                FSDPRT_F32, FSDPRT_AVG),
              FSDPRT_OK);
    auto &o = out[size_t(rank)];
    o.resize((rs.size() + ar.size()) * 4);
    std::memcpy(o.data(), rs.data(), rs.size() * 4);
    std::memcpy(o.data() + rs.size() * 4, ar.data(), ar.size() * 4);
  });
  return out;
}

TEST(ThreadsDeterminism, RepeatedRunsAreBitIdentical) {
  auto a = reduce_run(40);
  auto b = reduce_run(40);
  ASSERT_EQ(a.size(), b.size());
  for (size_t r = 0; r < a.size(); ++r)
    EXPECT_TRUE(a[r] == b[r]) << "rank " << r;
  // The all-reduce copies on every rank are identical too.
  const size_t rs_bytes = 30011 * 4;
  for (size_t r = 1; r < a.size(); ++r)
    EXPECT_TRUE(std::equal(a[r].begin() + rs_bytes, a[r].end(),
                           a[0].begin() + rs_bytes));
}

// ---- asynchronous collectives ----------------------------------------------

TEST(ThreadsAsync, TwoOutstandingOnDifferentGroupsWaitedInReverse) {
  const std::vector<int64_t> shape = {2, 4};
  const int64_t n = 5000;
  Failures failures;
  run_world(shape, [&](int64_t rank, fsdprt_comm_t *comm) {
    int64_t g_shard = 0, g_rep = 0;
    auto shard = group_members(shape, rank, 2, &g_shard);
    auto rep = group_members(shape, rank, 1, &g_rep);
    std::vector<float> ag_in(n), ag_out(4 * n), rs_in(2 * n), rs_out(n);
    fill(ag_in.data(), FSDPRT_F32, n, seed_of(rank, 50));
    fill(rs_in.data(), FSDPRT_F32, 2 * n, seed_of(rank, 51));
    fsdprt_request_t a = nullptr, b = nullptr;
    ASSERT_EQ(fsdprt_all_gather_async(comm, 2, ag_in.data(), ag_out.data(), n,
                                      FSDPRT_F32, &a),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_reduce_scatter_async(comm, 1, rs_in.data(), rs_out.data(),
                                          n, FSDPRT_F32, FSDPRT_SUM, &b),
              FSDPRT_OK);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(fsdprt_wait(&b), FSDPRT_OK);
    ASSERT_EQ(fsdprt_wait(&a), FSDPRT_OK);
    EXPECT_EQ(a, nullptr);
    std::vector<float> peer(2 * n);
    for (int64_t j = 0; j < 4; ++j) {
      fill(peer.data(), FSDPRT_F32, n, seed_of(shard[size_t(j)], 50));
      if (std::memcmp(peer.data(), ag_out.data() + j * n, n * 4) != 0)
        failures.add("all_gather slot " + std::to_string(j));
    }
    std::vector<std::vector<float>> ins(2, std::vector<float>(2 * n));
    std::vector<const void *> ptrs;
    for (int j = 0; j < 2; ++j) {
      fill(ins[size_t(j)].data(), FSDPRT_F32, 2 * n,
           seed_of(rep[size_t(j)], 51));
      ptrs.push_back(ins[size_t(j)].data() + g_rep * n);
    }
    std::vector<float> expect(n);
    reference_reduce(expect.data(), ptrs, FSDPRT_F32, FSDPRT_SUM, n);
    if (std::memcmp(expect.data(), rs_out.data(), n * 4) != 0)
      failures.add("reduce_scatter rank " + std::to_string(rank));
  });
  failures.check();
}

// On the CPU backends the time inside collective calls is exposed
// communication: rank 0 waits for rank 1, which starts 300 ms late; work
// between a start and its wait is not counted.
TEST(ThreadsAsync, ExposedCommunicationIsTheTimeInsideCollectiveCalls) {
  std::vector<uint64_t> exposed(2);
  run_world({2}, [&](int64_t rank, fsdprt_comm_t *comm) {
    float x[4] = {1, 2, 3, 4};
    if (rank == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, x, x, 4, FSDPRT_F32, FSDPRT_SUM),
              FSDPRT_OK);
    fsdprt_stats_t st;
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &st), FSDPRT_OK);
    exposed[size_t(rank)] = st.exposed_ns;
    ASSERT_EQ(fsdprt_comm_reset_stats(comm), FSDPRT_OK);
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &st), FSDPRT_OK);
    EXPECT_EQ(st.exposed_ns, 0u);
  });
  EXPECT_GE(exposed[0], 200'000'000u) << "rank 0 waited for rank 1";
  EXPECT_LT(exposed[1], 100'000'000u) << "rank 1 found rank 0 there";
}

TEST(ThreadsAsync, ManyOutstandingOnOneGroupReuseSlots) {
  // More outstanding collectives than the group has slots.
  const int64_t w = 4, n = 64, ops = 40;
  Failures failures;
  run_world({w}, [&](int64_t rank, fsdprt_comm_t *comm) {
    std::vector<std::vector<int32_t>> in(ops, std::vector<int32_t>(n)),
        out(ops, std::vector<int32_t>(w * n));
    std::vector<fsdprt_request_t> reqs(ops, nullptr);
    for (int64_t i = 0; i < ops; ++i) {
      for (int64_t e = 0; e < n; ++e)
        in[size_t(i)][size_t(e)] = int32_t(rank * 100000 + i * 1000 + e);
      ASSERT_EQ(fsdprt_all_gather_async(comm, 1, in[size_t(i)].data(),
                                        out[size_t(i)].data(), n, FSDPRT_I32,
                                        &reqs[size_t(i)]),
                FSDPRT_OK);
    }
    for (int64_t i = ops - 1; i >= 0; --i)
      ASSERT_EQ(fsdprt_wait(&reqs[size_t(i)]), FSDPRT_OK);
    for (int64_t i = 0; i < ops; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t e = 0; e < n; ++e)
          if (out[size_t(i)][size_t(j * n + e)] !=
              int32_t(j * 100000 + i * 1000 + e)) {
            failures.add("op " + std::to_string(i));
            return;
          }
  });
  failures.check();
}

TEST(ThreadsAsync, TestPollsUntilDone) {
  run_world({3}, [&](int64_t rank, fsdprt_comm_t *comm) {
    double in = double(rank + 1), out = 0;
    fsdprt_request_t req = nullptr;
    ASSERT_EQ(fsdprt_all_reduce_async(comm, 1, &in, &out, 1, FSDPRT_F64,
                                      FSDPRT_SUM, &req),
              FSDPRT_OK);
    int done = 0;
    while (!done)
      ASSERT_EQ(fsdprt_test(&req, &done), FSDPRT_OK);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(out, 6.0);
    EXPECT_EQ(fsdprt_wait(&req), FSDPRT_OK); // NULL request: no-op
  });
}

// ---- desync, timeout, abort ------------------------------------------------

TEST(ThreadsDesync, CountMismatchNamesBothRanks) {
  auto opts = short_timeout(20);
  const char *names[1] = {"shard"};
  opts.axis_names = names;
  double elapsed = 0;
  auto res = run_failing(
      {4}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        std::vector<float> in(64), out(4 * 64);
        // Two good collectives first so the bad one is #3.
        for (int i = 0; i < 2; ++i)
          if (fsdprt_all_gather(comm, 1, in.data(), out.data(), 48,
                                FSDPRT_F32) != FSDPRT_OK)
            return FSDPRT_ERR_INTERNAL;
        return fsdprt_all_gather(comm, 1, in.data(), out.data(),
                                 rank == 2 ? 64 : 48, FSDPRT_F32);
      },
      &elapsed);
  EXPECT_LT(elapsed, 10.0) << "desync must be reported, not timed out";
  for (size_t r = 0; r < res.size(); ++r) {
    EXPECT_EQ(res[r].status, FSDPRT_ERR_DESYNC) << "rank " << r;
    EXPECT_NE(res[r].message.find("desync in collective #3 on group "
                                  "{axes: shard}: rank 0 called"),
              std::string::npos)
        << res[r].message;
    EXPECT_NE(res[r].message.find("rank 0 called all_gather(f32, count=48)"),
              std::string::npos)
        << res[r].message;
    EXPECT_NE(res[r].message.find("rank 2 called all_gather(f32, count=64)"),
              std::string::npos)
        << res[r].message;
  }
}

TEST(ThreadsDesync, DtypeAndKindMismatch) {
  auto opts = short_timeout(20);
  double elapsed = 0;
  auto res = run_failing(
      {2, 2}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        std::vector<float> buf(64), out(64);
        // Group of axis 1 for rank 3 is {2, 3}; rank 3 uses bf16.
        return fsdprt_all_reduce(comm, 2, buf.data(), out.data(), 16,
                                 rank == 3 ? FSDPRT_BF16 : FSDPRT_F32,
                                 FSDPRT_SUM);
      },
      &elapsed);
  // Group {0, 1} agrees: it completes unless the abort reaches it first.
  EXPECT_TRUE(res[0].status == FSDPRT_OK ||
              res[0].status == FSDPRT_ERR_ABORTED);
  EXPECT_EQ(res[2].status, FSDPRT_ERR_DESYNC);
  EXPECT_EQ(res[3].status, FSDPRT_ERR_DESYNC);
  EXPECT_NE(res[3].message.find("rank 2 called all_reduce(f32, count=16, "
                                "op=sum) but rank 3 called all_reduce(bf16"),
            std::string::npos)
      << res[3].message;

  res = run_failing(
      {3}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        std::vector<float> in(30), out(30);
        if (rank == 1)
          return fsdprt_reduce_scatter(comm, 1, in.data(), out.data(), 10,
                                       FSDPRT_F32, FSDPRT_MAX);
        return fsdprt_all_gather(comm, 1, in.data(), out.data(), 10,
                                 FSDPRT_F32);
      },
      &elapsed);
  EXPECT_LT(elapsed, 10.0);
  for (auto &r : res) {
    EXPECT_EQ(r.status, FSDPRT_ERR_DESYNC);
    EXPECT_NE(r.message.find("rank 1 called reduce_scatter(f32, count=10, "
                             "op=max)"),
              std::string::npos)
        << r.message;
  }
}

TEST(ThreadsTimeout, MissingRankIsNamed) {
  auto opts = short_timeout(0.3);
  double elapsed = 0;
  auto res = run_failing(
      {4}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        float in = 1, out[4];
        if (rank == 3) {
          // Never joins the first collective; later calls fail fast.
          std::this_thread::sleep_for(std::chrono::milliseconds(600));
          return fsdprt_all_gather(comm, 1, &in, out, 1, FSDPRT_F32);
        }
        return fsdprt_all_gather(comm, 1, &in, out, 1, FSDPRT_F32);
      },
      &elapsed);
  EXPECT_LT(elapsed, 5.0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[size_t(r)].status, FSDPRT_ERR_TIMEOUT) << "rank " << r;
    EXPECT_NE(res[size_t(r)].message.find("rank(s) 3 did not call it"),
              std::string::npos)
        << res[size_t(r)].message;
    EXPECT_NE(res[size_t(r)].message.find("all_gather(f32, count=1)"),
              std::string::npos)
        << res[size_t(r)].message;
  }
  EXPECT_EQ(res[3].status, FSDPRT_ERR_ABORTED);
}

TEST(ThreadsTimeout, ReportsWhatTheMissingRankIsDoing) {
  auto opts = short_timeout(0.3);
  double elapsed = 0;
  // 2x2 mesh: ranks 0..2 all-gather over the whole mesh, rank 3 all-reduces
  // over axis 0 with rank 1, which never comes: both collectives time out.
  auto res = run_failing(
      {2, 2}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        float in[4] = {0, 0, 0, 0}, out[4];
        if (rank == 3)
          return fsdprt_all_reduce(comm, 1, in, out, 4, FSDPRT_F32, FSDPRT_SUM);
        return fsdprt_all_gather(comm, 3, in, out, 1, FSDPRT_F32);
      },
      &elapsed);
  EXPECT_LT(elapsed, 5.0);
  // Whichever side times out first names the other side's collective.
  bool named = false;
  for (auto &r : res) {
    EXPECT_NE(r.status, FSDPRT_OK);
    if (r.message.find("rank 3 is waiting in collective #1 all_reduce") !=
            std::string::npos ||
        r.message.find("rank 1 is waiting in collective #1 all_gather") !=
            std::string::npos)
      named = true;
  }
  EXPECT_TRUE(named) << res[0].message;
}

TEST(ThreadsAbort, InvalidArgumentOnOneRankFailsPeersFast) {
  auto opts = short_timeout(30);
  double elapsed = 0;
  auto res = run_failing(
      {4}, opts,
      [](int64_t rank, fsdprt_comm_t *comm) {
        float in = 1, out[4];
        return fsdprt_all_gather(comm, 1, &in, out, 1,
                                 rank == 1 ? 42 : FSDPRT_F32);
      },
      &elapsed);
  EXPECT_LT(elapsed, 10.0);
  EXPECT_EQ(res[1].status, FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(res[1].message.find("unknown dtype 42"), std::string::npos);
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(res[size_t(r)].status, FSDPRT_ERR_ABORTED);
    EXPECT_NE(res[size_t(r)].message.find("rank 1: invalid argument"),
              std::string::npos)
        << res[size_t(r)].message;
  }
}

TEST(ThreadsAbort, WorldAbortWakesWaiters) {
  fsdprt_world_t *world = nullptr;
  int64_t shape = 3;
  auto opts = short_timeout(30);
  ASSERT_EQ(fsdprt_threads_world_create(1, &shape, &opts, &world), FSDPRT_OK);
  std::vector<fsdprt_status_t> st(2, FSDPRT_OK);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      fsdprt_comm_t *comm = nullptr;
      fsdprt_threads_comm(world, r, &comm);
      float in = 1, out[3];
      st[size_t(r)] = fsdprt_all_gather(comm, 1, &in, out, 1, FSDPRT_F32);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fsdprt_world_abort(world, "stop");
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(st[0], FSDPRT_ERR_ABORTED);
  EXPECT_EQ(st[1], FSDPRT_ERR_ABORTED);
  fsdprt_world_destroy(world);
}

// ---- argument checks and statistics ----------------------------------------

TEST(ThreadsApi, CreateRejectsBadMeshes) {
  fsdprt_world_t *world = reinterpret_cast<fsdprt_world_t *>(1);
  int64_t bad[2] = {2, 0};
  EXPECT_EQ(fsdprt_threads_world_create(2, bad, nullptr, &world),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(world, nullptr);
  EXPECT_EQ(fsdprt_threads_world_create(-1, bad, nullptr, &world),
            FSDPRT_ERR_INVALID_ARGUMENT);
  int64_t shape = 2;
  ASSERT_EQ(fsdprt_threads_world_create(1, &shape, nullptr, &world), FSDPRT_OK);
  fsdprt_comm_t *comm = nullptr;
  EXPECT_EQ(fsdprt_threads_comm(world, 2, &comm), FSDPRT_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(fsdprt_threads_comm(world, 1, &comm), FSDPRT_OK);
  fsdprt_comm_t *again = nullptr;
  ASSERT_EQ(fsdprt_threads_comm(world, 1, &again), FSDPRT_OK);
  EXPECT_EQ(comm, again);
  EXPECT_EQ(fsdprt_comm_destroy(comm), FSDPRT_ERR_INVALID_ARGUMENT);
  fsdprt_backend_t backend;
  EXPECT_EQ(fsdprt_comm_backend(comm, &backend), FSDPRT_OK);
  EXPECT_EQ(backend, FSDPRT_BACKEND_THREADS);
  int64_t rank = -1, size = -1;
  EXPECT_EQ(fsdprt_comm_rank(comm, &rank), FSDPRT_OK);
  EXPECT_EQ(fsdprt_comm_size(comm, &size), FSDPRT_OK);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 2);
  EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_OK);
  EXPECT_STREQ(fsdprt_comm_error_message(comm), "");
  fsdprt_world_destroy(world);
}

TEST(ThreadsApi, InvalidArgumentsAreReported) {
  int64_t shape[2] = {1, 1};
  fsdprt_world_t *world = nullptr;
  ASSERT_EQ(fsdprt_threads_world_create(2, shape, nullptr, &world), FSDPRT_OK);
  fsdprt_comm_t *comm = nullptr;
  ASSERT_EQ(fsdprt_threads_comm(world, 0, &comm), FSDPRT_OK);
  float x = 0, y = 0;
  EXPECT_EQ(fsdprt_all_gather(comm, 4, &x, &y, 1, FSDPRT_F32),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_comm_last_error_message(comm)).find("mask 4"),
            std::string::npos);
  EXPECT_EQ(fsdprt_all_reduce(comm, 1, &x, &y, 1, FSDPRT_F32, 7),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_comm_last_error_message(comm))
                .find("unknown reduce op 7"),
            std::string::npos);
  EXPECT_EQ(fsdprt_all_reduce(comm, 1, &x, &y, -3, FSDPRT_F32, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_all_reduce(comm, 1, nullptr, &y, 1, FSDPRT_F32, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  // The first error stays the comm's error.
  EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_comm_error_message(comm)).find("mask 4"),
            std::string::npos);
  EXPECT_EQ(fsdprt_all_gather(nullptr, 0, &x, &y, 1, FSDPRT_F32),
            FSDPRT_ERR_INVALID_ARGUMENT);
  fsdprt_world_destroy(world);
}

TEST(ThreadsApi, StatusStrings) {
  for (int s = 0; s <= 9; ++s)
    EXPECT_STRNE(fsdprt_status_string(fsdprt_status_t(s)), "unknown status");
  EXPECT_STREQ(fsdprt_status_string(FSDPRT_ERR_DESYNC), "desync");
  EXPECT_STREQ(fsdprt_dtype_name(FSDPRT_BF16), "bf16");
  EXPECT_EQ(fsdprt_dtype_size(FSDPRT_I64), 8u);
  EXPECT_EQ(fsdprt_dtype_size(99), 0u);
}

TEST(ThreadsApi, OptionsFromEnvironment) {
  setenv("FSDPRT_TIMEOUT_S", "12.5", 1);
  fsdprt_options_t o;
  fsdprt_options_init(&o);
  EXPECT_EQ(o.timeout_s, 12.5);
  unsetenv("FSDPRT_TIMEOUT_S");
  fsdprt_options_init(&o);
  EXPECT_EQ(o.timeout_s, 60.0);
}

TEST(ThreadsApi, StatsCountCallsAndBytes) {
  run_world({2, 2}, [&](int64_t rank, fsdprt_comm_t *comm) {
    std::vector<float> a(100), b(400);
    std::vector<uint16_t> h(40), hout(40);
    ASSERT_EQ(fsdprt_all_gather(comm, 3, a.data(), b.data(), 100, FSDPRT_F32),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_gather(comm, 1, a.data(), b.data(), 10, FSDPRT_F32),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_reduce_scatter(comm, 2, h.data(), hout.data(), 20,
                                    FSDPRT_BF16, FSDPRT_SUM),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_reduce(comm, 3, b.data(), b.data(), 7, FSDPRT_F32,
                                FSDPRT_AVG),
              FSDPRT_OK);
    fsdprt_stats_t s;
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &s), FSDPRT_OK);
    EXPECT_EQ(s.calls[FSDPRT_KIND_ALL_GATHER], 2u);
    EXPECT_EQ(s.bytes_sent[FSDPRT_KIND_ALL_GATHER], (100u + 10u) * 4u);
    EXPECT_EQ(s.bytes_received[FSDPRT_KIND_ALL_GATHER],
              (4u * 100u + 2u * 10u) * 4u);
    EXPECT_EQ(s.calls[FSDPRT_KIND_REDUCE_SCATTER], 1u);
    EXPECT_EQ(s.bytes_sent[FSDPRT_KIND_REDUCE_SCATTER], 2u * 20u * 2u);
    EXPECT_EQ(s.bytes_received[FSDPRT_KIND_REDUCE_SCATTER], 20u * 2u);
    EXPECT_EQ(s.calls[FSDPRT_KIND_ALL_REDUCE], 1u);
    EXPECT_EQ(s.bytes_sent[FSDPRT_KIND_ALL_REDUCE], 28u);
    EXPECT_EQ(s.total_calls, 4u);
    EXPECT_EQ(s.total_bytes_sent, 440u + 80u + 28u);
    EXPECT_EQ(s.total_bytes_received, 1680u + 40u + 28u);
    ASSERT_EQ(fsdprt_comm_reset_stats(comm), FSDPRT_OK);
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &s), FSDPRT_OK);
    EXPECT_EQ(s.total_calls, 0u);
  });
}

} // namespace

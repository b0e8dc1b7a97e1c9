// mpi backend, run under mpirun -np 4 (registered in ctest as runtime_mpi).
// Every rank runs every test; each rank checks its own results against a
// reference built from all ranks' (deterministic) inputs.
#include "test_util.h"

#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

using namespace rt_test;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

uint64_t seed_of(int64_t rank, int salt) {
  return uint64_t(rank) * 7919u + uint64_t(salt) * 104729u + 1u;
}

fsdprt_comm_t *make_comm(const std::vector<int64_t> &shape, double timeout,
                         const char *const *names = nullptr) {
  MPI_Barrier(MPI_COMM_WORLD);
  fsdprt_options_t opts;
  fsdprt_options_init(&opts);
  opts.timeout_s = timeout;
  opts.axis_names = names;
  fsdprt_comm_t *comm = nullptr;
  EXPECT_EQ(
      fsdprt_mpi_comm_create(int32_t(shape.size()), shape.data(), &opts, &comm),
      FSDPRT_OK);
  return comm;
}

void destroy(fsdprt_comm_t *comm) {
  EXPECT_EQ(fsdprt_comm_destroy(comm), FSDPRT_OK);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Runs one collective on this rank and compares with the reference.
void check(fsdprt_comm_t *comm, const std::vector<int64_t> &shape, int64_t mask,
           int32_t kind, int32_t dtype, int32_t op, int64_t count, int salt,
           bool in_place = false) {
  SCOPED_TRACE(testing::Message()
               << "kind " << kind << " dtype " << fsdprt_dtype_name(dtype)
               << " op " << op << " mask " << mask << " count " << count);
  const int64_t rank = world_rank();
  const size_t es = fsdprt_dtype_size(dtype);
  int64_t gr = 0;
  auto members = group_members(shape, rank, mask, &gr);
  const int64_t k = int64_t(members.size());
  const int64_t send_n = kind == FSDPRT_KIND_REDUCE_SCATTER ? k * count : count;
  const int64_t recv_n = kind == FSDPRT_KIND_ALL_GATHER ? k * count : count;
  auto input = [&](int64_t r) {
    std::vector<char> v(size_t(send_n) * es + 1);
    fill(v.data(), dtype, send_n, seed_of(r, salt));
    return v;
  };
  std::vector<char> send = input(rank), recv(size_t(recv_n) * es + 1, 0);
  const void *sp = send.data();
  void *rp = recv.data();
  if (in_place) {
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
  ASSERT_EQ(st, FSDPRT_OK) << fsdprt_comm_last_error_message(comm);
  std::vector<char> expect(size_t(recv_n) * es + 1, 0);
  if (kind == FSDPRT_KIND_ALL_GATHER) {
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(expect.data() + size_t(j * count) * es,
                  input(members[size_t(j)]).data(), size_t(count) * es);
  } else {
    std::vector<std::vector<char>> ins;
    std::vector<const void *> ptrs;
    for (int64_t m : members)
      ins.push_back(input(m));
    int64_t off = kind == FSDPRT_KIND_REDUCE_SCATTER ? gr * count : 0;
    for (auto &v : ins)
      ptrs.push_back(v.data() + size_t(off) * es);
    reference_reduce(expect.data(), ptrs, dtype, op, count);
  }
  int64_t bad = -1;
  EXPECT_TRUE(same_elements(rp, expect.data(), dtype, recv_n, &bad))
      << "first mismatch at " << bad;
}

const int32_t kAllDtypes[] = {FSDPRT_F32, FSDPRT_F64, FSDPRT_F16, FSDPRT_BF16,
                              FSDPRT_I32, FSDPRT_I64, FSDPRT_U8,  FSDPRT_I8};

TEST(Mpi, EveryCollectiveDtypeAndOp) {
  const std::vector<int64_t> shape = {4};
  fsdprt_comm_t *comm = make_comm(shape, 30);
  ASSERT_NE(comm, nullptr);
  for (int32_t dtype : kAllDtypes) {
    check(comm, shape, 1, FSDPRT_KIND_ALL_GATHER, dtype, -1, 33, 1);
    for (int32_t op = 0; op < FSDPRT_NUM_REDUCE_OPS; ++op) {
      check(comm, shape, 1, FSDPRT_KIND_REDUCE_SCATTER, dtype, op, 21, 2);
      check(comm, shape, 1, FSDPRT_KIND_ALL_REDUCE, dtype, op, 39, 3);
    }
  }
  // Uneven all_reduce chunks, large buffers and in-place forms.
  check(comm, shape, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F32, FSDPRT_SUM, 3, 4);
  check(comm, shape, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_BF16, FSDPRT_AVG, 100003,
        5);
  check(comm, shape, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 1001, 6, true);
  check(comm, shape, 1, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, FSDPRT_SUM,
        1001, 7, true);
  check(comm, shape, 1, FSDPRT_KIND_ALL_REDUCE, FSDPRT_F64, FSDPRT_MAX, 1001, 8,
        true);
  check(comm, shape, 1, FSDPRT_KIND_ALL_GATHER, FSDPRT_F32, -1, 0, 9);
  destroy(comm);
}

TEST(Mpi, TwoByTwoMeshEveryMask) {
  const std::vector<int64_t> shape = {2, 2};
  fsdprt_comm_t *comm = make_comm(shape, 30);
  ASSERT_NE(comm, nullptr);
  for (int64_t mask = 0; mask < 4; ++mask) {
    check(comm, shape, mask, FSDPRT_KIND_ALL_GATHER, FSDPRT_BF16, -1, 17, 10);
    check(comm, shape, mask, FSDPRT_KIND_REDUCE_SCATTER, FSDPRT_F32, FSDPRT_AVG,
          13, 11);
    check(comm, shape, mask, FSDPRT_KIND_ALL_REDUCE, FSDPRT_I64, FSDPRT_SUM, 29,
          12);
  }
  int64_t size = 0, gr = 0;
  EXPECT_EQ(fsdprt_comm_group(comm, 1, &size, &gr), FSDPRT_OK);
  EXPECT_EQ(size, 2);
  EXPECT_EQ(gr, world_rank() / 2);
  fsdprt_backend_t backend;
  EXPECT_EQ(fsdprt_comm_backend(comm, &backend), FSDPRT_OK);
  EXPECT_EQ(backend, FSDPRT_BACKEND_MPI);
  destroy(comm);
}

TEST(Mpi, MatchesTheThreadsBackendBitForBit) {
  // Same inputs through a 4-rank threads world in this process.
  const int64_t n = 4099;
  const int rank = world_rank();
  std::vector<uint16_t> mine(4 * n), out_mpi(n);
  fill(mine.data(), FSDPRT_BF16, 4 * n, seed_of(rank, 13));
  fsdprt_comm_t *comm = make_comm({4}, 30);
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(fsdprt_reduce_scatter(comm, 1, mine.data(), out_mpi.data(), n,
                                  FSDPRT_BF16, FSDPRT_AVG),
            FSDPRT_OK);
  destroy(comm);
  std::vector<uint16_t> out_threads(n);
  run_world({4}, [&](int64_t r, fsdprt_comm_t *c) {
    std::vector<uint16_t> in(4 * n), out(n);
    fill(in.data(), FSDPRT_BF16, 4 * n, seed_of(r, 13));
    ASSERT_EQ(fsdprt_reduce_scatter(c, 1, in.data(), out.data(), n, FSDPRT_BF16,
                                    FSDPRT_AVG),
              FSDPRT_OK);
    if (r == rank)
      out_threads = out;
  });
  EXPECT_EQ(out_mpi, out_threads);
}

TEST(Mpi, AsyncOutOfOrderWaits) {
  const std::vector<int64_t> shape = {2, 2};
  fsdprt_comm_t *comm = make_comm(shape, 30);
  ASSERT_NE(comm, nullptr);
  const int rank = world_rank();
  const int64_t n = 300;
  std::vector<float> ag_in(n, float(rank)), ag_out(2 * n);
  std::vector<double> ar1(n, 1.0 + rank), ar2(n, 2.0 * rank), rs_in(2 * n),
      rs_out(n);
  for (int64_t i = 0; i < 2 * n; ++i)
    rs_in[size_t(i)] = double(rank * 1000 + i);
  fsdprt_request_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  ASSERT_EQ(fsdprt_all_reduce_async(comm, 3, ar1.data(), ar1.data(), n,
                                    FSDPRT_F64, FSDPRT_SUM, &a),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_all_gather_async(comm, 2, ag_in.data(), ag_out.data(), n,
                                    FSDPRT_F32, &b),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_all_reduce_async(comm, 3, ar2.data(), ar2.data(), n,
                                    FSDPRT_F64, FSDPRT_MAX, &c),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_reduce_scatter_async(comm, 1, rs_in.data(), rs_out.data(), n,
                                        FSDPRT_F64, FSDPRT_SUM, &d),
            FSDPRT_OK);
  EXPECT_EQ(fsdprt_wait(&d), FSDPRT_OK);
  EXPECT_EQ(fsdprt_wait(&c), FSDPRT_OK);
  EXPECT_EQ(fsdprt_wait(&b), FSDPRT_OK);
  EXPECT_EQ(fsdprt_wait(&a), FSDPRT_OK);
  const int row = rank / 2, col = rank % 2;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(ar1[size_t(i)], 1.0 + 2.0 + 3.0 + 4.0);
    ASSERT_EQ(ar2[size_t(i)], 6.0);
    ASSERT_EQ(ag_out[size_t(i)], float(row * 2));
    ASSERT_EQ(ag_out[size_t(n + i)], float(row * 2 + 1));
    // Axis-0 group of this rank: {col, 2 + col}; slot = row.
    ASSERT_EQ(rs_out[size_t(i)], double(col * 1000 + row * n + i) +
                                     double((2 + col) * 1000 + row * n + i));
  }
  // More outstanding operations than a group would ever need at once.
  std::vector<std::vector<int32_t>> outs(40, std::vector<int32_t>(4));
  std::vector<int32_t> ins(40);
  std::vector<fsdprt_request_t> reqs(40, nullptr);
  for (int i = 0; i < 40; ++i) {
    ins[size_t(i)] = rank * 100 + i;
    ASSERT_EQ(fsdprt_all_gather_async(comm, 3, &ins[size_t(i)],
                                      outs[size_t(i)].data(), 1, FSDPRT_I32,
                                      &reqs[size_t(i)]),
              FSDPRT_OK);
  }
  for (int i = 39; i >= 0; --i)
    ASSERT_EQ(fsdprt_wait(&reqs[size_t(i)]), FSDPRT_OK);
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 4; ++j)
      ASSERT_EQ(outs[size_t(i)][size_t(j)], j * 100 + i);
  destroy(comm);
}

TEST(Mpi, StatsAndJit) {
  fsdprt_comm_t *comm = make_comm({4}, 30);
  ASSERT_NE(comm, nullptr);
  fsdprt_set_thread_comm(comm);
  float in[2] = {1, 2}, out[8];
  fsdprt_jit_all_gather(in, out, 2, FSDPRT_F32, 1);
  int64_t h = fsdprt_jit_all_reduce_start(in, in, 2, FSDPRT_F32, FSDPRT_SUM, 1);
  fsdprt_jit_wait(h);
  EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_OK)
      << fsdprt_comm_error_message(comm);
  EXPECT_EQ(in[0], 4.0f);
  EXPECT_EQ(in[1], 8.0f);
  EXPECT_EQ(out[6], 1.0f);
  fsdprt_set_thread_comm(nullptr);
  fsdprt_stats_t s;
  ASSERT_EQ(fsdprt_comm_get_stats(comm, &s), FSDPRT_OK);
  EXPECT_EQ(s.calls[FSDPRT_KIND_ALL_GATHER], 1u);
  EXPECT_EQ(s.bytes_received[FSDPRT_KIND_ALL_GATHER], 32u);
  EXPECT_EQ(s.calls[FSDPRT_KIND_ALL_REDUCE], 1u);
  destroy(comm);
}

int64_t page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_minflt) + int64_t(u.ru_majflt);
}

TEST(Mpi, ReductionsReuseTheirReceiveBuffers) {
  // The exchange receives 3 peers' chunks of 3M floats: 36 MB, above
  // glibc's largest mmap threshold, so a buffer per call would be fresh
  // pages (9,216 of them) in every call.
  const int64_t m = int64_t(3) << 20;
  std::vector<float> send(size_t(4 * m), 1.0f), out(size_t(m), 0.0f);
  fsdprt_comm_t *comm = make_comm({4}, 60);
  ASSERT_NE(comm, nullptr);
  for (int round = 0; round < 3; ++round) {
    const int64_t before = page_faults();
    ASSERT_EQ(fsdprt_reduce_scatter(comm, 1, send.data(), out.data(), m,
                                    FSDPRT_F32, FSDPRT_SUM),
              FSDPRT_OK);
    ASSERT_EQ(fsdprt_all_reduce(comm, 1, send.data(), send.data() + m, m,
                                FSDPRT_F32, FSDPRT_SUM),
              FSDPRT_OK);
    const int64_t faults = page_faults() - before;
    if (round > 0)
      EXPECT_LT(faults, 1000) << "round " << round;
    EXPECT_EQ(out[0], 4.0f);
    EXPECT_EQ(send[size_t(m)], 4.0f);
    std::fill(send.begin() + m, send.begin() + 2 * m, 1.0f);
  }
  destroy(comm);
}

// A member layout (fsdprt_all_gather_members, ...) through the plain
// collective on a scratch buffer: `how` 0 blocking, 1 started and waited,
// 2 started and polled with fsdprt_test, 3 the jit entry points started.
void check_members(fsdprt_comm_t *comm, const std::vector<int64_t> &shape,
                   int64_t mask, int32_t kind, int32_t dtype, int32_t op,
                   const std::vector<int64_t> &counts, int salt, int how) {
  SCOPED_TRACE(testing::Message() << "members: kind " << kind << " dtype "
                                  << fsdprt_dtype_name(dtype) << " op " << op
                                  << " mask " << mask << " how " << how);
  const int64_t rank = world_rank();
  const size_t es = fsdprt_dtype_size(dtype);
  int64_t count = 0;
  for (int64_t c : counts)
    count += c;
  const int64_t n = int64_t(counts.size());
  int64_t gr = 0;
  auto members = group_members(shape, rank, mask, &gr);
  const int64_t k = int64_t(members.size());
  const bool gather = kind == FSDPRT_KIND_ALL_GATHER;
  const int64_t send_n = gather ? count : k * count;
  const int64_t recv_n = gather ? k * count : count;
  auto input = [&](int64_t r) {
    std::vector<char> v(size_t(send_n) * es);
    fill(v.data(), dtype, send_n, seed_of(r, salt));
    return v;
  };
  std::vector<char> send = input(rank), recv(size_t(recv_n) * es, 0);
  fsdprt_status_t st = FSDPRT_OK;
  fsdprt_request_t req = nullptr;
  if (how == 0) {
    st = gather
             ? fsdprt_all_gather_members(comm, mask, send.data(), recv.data(),
                                         count, dtype, n, counts.data())
             : fsdprt_reduce_scatter_members(comm, mask, send.data(),
                                             recv.data(), count, dtype, op, n,
                                             counts.data());
  } else if (how == 1 || how == 2) {
    st = gather
             ? fsdprt_all_gather_members_async(comm, mask, send.data(),
                                               recv.data(), count, dtype, n,
                                               counts.data(), &req)
             : fsdprt_reduce_scatter_members_async(comm, mask, send.data(),
                                                   recv.data(), count, dtype,
                                                   op, n, counts.data(), &req);
    ASSERT_EQ(st, FSDPRT_OK) << fsdprt_comm_last_error_message(comm);
    if (how == 1) {
      st = fsdprt_wait(&req);
    } else {
      int done = 0;
      while (!done && st == FSDPRT_OK)
        st = fsdprt_test(&req, &done);
    }
    EXPECT_EQ(req, nullptr);
  } else {
    fsdprt_set_thread_comm(comm);
    int64_t h =
        gather
            ? fsdprt_jit_all_gather_members_start(send.data(), recv.data(),
                                                  count, dtype, mask, n,
                                                  counts.data())
            : fsdprt_jit_reduce_scatter_members_start(send.data(), recv.data(),
                                                      count, dtype, op, mask, n,
                                                      counts.data());
    fsdprt_jit_wait(h);
    fsdprt_set_thread_comm(nullptr);
    st = fsdprt_comm_error(comm);
  }
  ASSERT_EQ(st, FSDPRT_OK) << fsdprt_comm_last_error_message(comm);
  std::vector<std::vector<char>> group_inputs;
  std::vector<const void *> inputs;
  for (int64_t m : members)
    group_inputs.push_back(input(m));
  for (auto &v : group_inputs)
    inputs.push_back(v.data());
  std::vector<char> expect =
      members_reference(counts, kind, dtype, op, gr, inputs);
  int64_t bad = -1;
  EXPECT_TRUE(same_elements(recv.data(), expect.data(), dtype, recv_n, &bad))
      << "first mismatch at " << bad;
}

TEST(Mpi, MemberLayoutsThroughAScratchBuffer) {
  const std::vector<int64_t> small = {5, 0, 1, 77, 0, 300};
  const std::vector<int64_t> large = {0, 40000, 3, 17, 25000, 0, 1, 0};
  int salt = 500;
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{4}, {2, 2}}) {
    fsdprt_comm_t *comm = make_comm(shape, 30);
    ASSERT_NE(comm, nullptr);
    const int64_t masks = shape.size() == 1 ? 2 : 4;
    for (int64_t mask = 1; mask < masks; ++mask)
      for (int how = 0; how < 4; ++how)
        for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
          const auto &counts = how % 2 ? large : small;
          check_members(comm, shape, mask, FSDPRT_KIND_ALL_GATHER, dtype, -1,
                        counts, salt++, how);
          check_members(comm, shape, mask, FSDPRT_KIND_REDUCE_SCATTER, dtype,
                        how < 2 ? FSDPRT_SUM : FSDPRT_AVG, counts, salt++, how);
        }
    fsdprt_stats_t s;
    ASSERT_EQ(fsdprt_comm_get_stats(comm, &s), FSDPRT_OK);
    EXPECT_GT(s.calls[FSDPRT_KIND_ALL_GATHER], 0u);
    destroy(comm);
  }
}

TEST(Mpi, MemberLayoutDesyncNamesBothRanks) {
  fsdprt_comm_t *comm = make_comm({4}, 30);
  ASSERT_NE(comm, nullptr);
  const int rank = world_rank();
  std::vector<float> in(8), out(32);
  const int64_t a[2] = {6, 2}, b[2] = {2, 6};
  auto t0 = std::chrono::steady_clock::now();
  fsdprt_status_t st = fsdprt_all_gather_members(
      comm, 1, in.data(), out.data(), 8, FSDPRT_F32, 2, rank == 2 ? b : a);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(secs, 20.0);
  EXPECT_EQ(st, FSDPRT_ERR_DESYNC);
  std::string msg = fsdprt_comm_last_error_message(comm);
  EXPECT_NE(msg.find("rank 0 called all_gather(f32, count=8, members=2, "
                     "layout="),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("but rank 2 called all_gather(f32, count=8, members=2, "
                     "layout="),
            std::string::npos)
      << msg;
  destroy(comm);
}

TEST(Mpi, WrongWorldSizeIsRejected) {
  int64_t shape[2] = {2, 3};
  fsdprt_comm_t *comm = nullptr;
  EXPECT_EQ(fsdprt_mpi_comm_create(2, shape, nullptr, &comm),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
}

TEST(Mpi, DesyncNamesBothRanks) {
  const char *names[1] = {"shard"};
  fsdprt_comm_t *comm = make_comm({4}, 30, names);
  ASSERT_NE(comm, nullptr);
  const int rank = world_rank();
  std::vector<float> in(64), out(256);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(fsdprt_all_gather(comm, 1, in.data(), out.data(), 48, FSDPRT_F32),
            FSDPRT_OK);
  fsdprt_status_t st = fsdprt_all_gather(comm, 1, in.data(), out.data(),
                                         rank == 2 ? 64 : 48, FSDPRT_F32);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(secs, 20.0);
  EXPECT_EQ(st, FSDPRT_ERR_DESYNC);
  std::string msg = fsdprt_comm_last_error_message(comm);
  EXPECT_NE(msg.find("desync in collective #2 on group {axes: shard}"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("rank 0 called all_gather(f32, count=48) but rank 2 "
                     "called all_gather(f32, count=64)"),
            std::string::npos)
      << msg;
  // The comm stays failed.
  EXPECT_EQ(fsdprt_all_gather(comm, 1, in.data(), out.data(), 48, FSDPRT_F32),
            FSDPRT_ERR_ABORTED);
  destroy(comm);
}

TEST(Mpi, MissingRankTimesOut) {
  fsdprt_comm_t *comm = make_comm({4}, 0.5);
  ASSERT_NE(comm, nullptr);
  const int rank = world_rank();
  float in = 1, out[4];
  fsdprt_status_t st;
  if (rank == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    st = fsdprt_all_gather(comm, 1, &in, out, 1, FSDPRT_F32);
    EXPECT_EQ(st, FSDPRT_ERR_ABORTED);
  } else {
    st = fsdprt_all_gather(comm, 1, &in, out, 1, FSDPRT_F32);
    EXPECT_EQ(st, FSDPRT_ERR_TIMEOUT);
    std::string msg = fsdprt_comm_last_error_message(comm);
    EXPECT_NE(msg.find("rank(s) 3 did not call it"), std::string::npos) << msg;
  }
  destroy(comm);
}

TEST(Mpi, LocalErrorAbortsPeers) {
  fsdprt_comm_t *comm = make_comm({4}, 30);
  ASSERT_NE(comm, nullptr);
  const int rank = world_rank();
  float in = 1, out[4];
  auto t0 = std::chrono::steady_clock::now();
  fsdprt_status_t st =
      fsdprt_all_gather(comm, 1, &in, out, 1, rank == 1 ? 99 : FSDPRT_F32);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(secs, 20.0);
  if (rank == 1) {
    EXPECT_EQ(st, FSDPRT_ERR_INVALID_ARGUMENT);
  } else {
    EXPECT_EQ(st, FSDPRT_ERR_ABORTED);
    std::string msg = fsdprt_comm_last_error_message(comm);
    EXPECT_NE(msg.find("rank 1: invalid argument"), std::string::npos) << msg;
  }
  destroy(comm);
}

// Prints failures of ranks other than 0 (whose output gtest prints).
class RankFailurePrinter : public testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult &r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int rank = world_rank();
  if (rank != 0) {
    auto &listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any && !failed)
    std::fprintf(stderr, "a test failed on another rank\n");
  MPI_Finalize();
  return any;
}

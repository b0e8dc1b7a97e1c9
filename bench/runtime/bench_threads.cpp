// threads backend vs a single-thread memcpy of the same bytes.
// Every rank thread times batches of back-to-back collectives; the batch
// time is the slowest rank's (all ranks start a batch together).
#include "bench_common.h"
#include "fsdprt.h"

#include <atomic>
#include <cstring>
#include <thread>

namespace {

const int kRanks = 4;

// Sense-reversing barrier for the rank threads (outside the runtime, so it
// does not add collectives to the measurement).
class Barrier {
public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    int gen = gen_.load();
    if (count_.fetch_add(1) + 1 == n_) {
      count_.store(0);
      gen_.fetch_add(1);
      return;
    }
    while (gen_.load() == gen)
      std::this_thread::yield();
  }

private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<int> gen_{0};
};

double bench_memcpy(size_t bytes, int iters) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> times;
  for (int b = 0; b < bench::batches() + 1; ++b) {
    double t0 = bench::now_s();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      asm volatile("" ::"r"(dst.data()) : "memory");
    }
    if (b > 0) // the first batch warms up
      times.push_back((bench::now_s() - t0) / iters);
  }
  return bench::median(times);
}

double bench_threads(int kind, size_t bytes, int iters) {
  fsdprt_world_t *world = nullptr;
  int64_t shape = kRanks;
  if (fsdprt_threads_world_create(1, &shape, nullptr, &world) != FSDPRT_OK) {
    std::fprintf(stderr, "threads: cannot create a %d-rank world\n", kRanks);
    std::exit(1);
  }
  const int64_t elems = int64_t(bytes / 4);
  const int nb = bench::batches() + 1;
  std::vector<double> start(static_cast<size_t>(nb)),
      stop(static_cast<size_t>(nb), 0.0);
  std::atomic<int> failures{0};
  Barrier barrier(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      fsdprt_comm_t *comm = nullptr;
      fsdprt_threads_comm(world, r, &comm);
      size_t send_elems = kind == 0 ? elems / kRanks : elems;
      size_t recv_elems = kind == 1 ? elems / kRanks : elems;
      std::vector<float> send(send_elems, float(r + 1)), recv(recv_elems, 0);
      for (int b = 0; b < nb; ++b) {
        barrier.wait();
        if (r == 0)
          start[size_t(b)] = bench::now_s();
        for (int i = 0; i < iters; ++i) {
          fsdprt_status_t st;
          if (kind == 0)
            st = fsdprt_all_gather(comm, 1, send.data(), recv.data(),
                                   int64_t(send_elems), FSDPRT_F32);
          else if (kind == 1)
            st = fsdprt_reduce_scatter(comm, 1, send.data(), recv.data(),
                                       int64_t(recv_elems), FSDPRT_F32,
                                       FSDPRT_SUM);
          else
            st = fsdprt_all_reduce(comm, 1, send.data(), recv.data(),
                                   int64_t(recv_elems), FSDPRT_F32, FSDPRT_SUM);
          if (st != FSDPRT_OK)
            failures.fetch_add(1);
        }
        barrier.wait();
        if (r == 0)
          stop[size_t(b)] = bench::now_s();
      }
      if (!bench::check_result("threads", kind, r, kRanks, recv.data(),
                               recv.size()))
        failures.fetch_add(1);
    });
  }
  for (auto &t : threads)
    t.join();
  fsdprt_world_destroy(world);
  if (failures.load()) {
    std::fprintf(stderr,
                 "threads: %d collectives failed or gave wrong "
                 "results\n",
                 failures.load());
    std::exit(1);
  }
  std::vector<double> times;
  for (int b = 1; b < nb; ++b)
    times.push_back((stop[size_t(b)] - start[size_t(b)]) / iters);
  return bench::median(times);
}

} // namespace

int main() {
  const char *kinds[] = {"all_gather", "reduce_scatter", "all_reduce"};
  for (int mib : bench::sizes_mib()) {
    size_t bytes = size_t(mib) << 20;
    int iters = bench::iters_for(mib);
    bench::report("memcpy", "copy", mib, 1e3 * bench_memcpy(bytes, iters));
    for (int kind = 0; kind < 3; ++kind)
      bench::report("threads", kinds[kind], mib,
                    1e3 * bench_threads(kind, bytes, iters));
  }
  return 0;
}

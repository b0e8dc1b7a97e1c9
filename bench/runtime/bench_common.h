// Shared helpers of the runtime benchmarks: sizes, repetition counts and
// the result line format parsed by run.sh.
#ifndef FSDPRT_BENCH_COMMON_H
#define FSDPRT_BENCH_COMMON_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench {

// Sizes in MiB. Meaning per collective (per rank):
//   all_gather     : receive buffer bytes (send = size / ranks)
//   reduce_scatter : send buffer bytes    (receive = size / ranks)
//   all_reduce     : send and receive buffer bytes
inline std::vector<int> sizes_mib() {
  std::vector<int> s = {1, 16, 64};
  if (const char *env = std::getenv("FSDPRT_BENCH_SIZES_MIB")) {
    s.clear();
    for (const char *p = env; *p;) {
      s.push_back(std::atoi(p));
      while (*p && *p != ',')
        ++p;
      if (*p == ',')
        ++p;
    }
  }
  return s;
}

// Collectives per timed batch and number of batches (median is reported).
inline int iters_for(int mib) { return mib >= 64 ? 4 : mib >= 16 ? 8 : 40; }
inline int batches() {
  const char *env = std::getenv("FSDPRT_BENCH_BATCHES");
  return env ? std::max(1, std::atoi(env)) : 7;
}

inline double now_s() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Checks the receive buffer of the last collective: all_gather (kind 0)
// holds rank j's value j + 1 in slot j; reduce_scatter and all_reduce hold
// the sum 1 + 2 + ... + ranks. Prints what differs and returns false.
inline bool check_result(const char *impl, int kind, int rank, int ranks,
                         const float *recv, size_t count) {
  const size_t slot = kind == 0 ? count / size_t(ranks) : count;
  for (size_t i = 0; i < count; ++i) {
    const float want =
        kind == 0 ? float(i / slot + 1) : float(ranks * (ranks + 1) / 2);
    if (recv[i] != want) {
      std::fprintf(stderr,
                   "%s: wrong result on rank %d (collective kind %d): "
                   "element %zu is %g, expected %g\n",
                   impl, rank, kind, i, double(recv[i]), double(want));
      return false;
    }
  }
  return true;
}

// One line per measurement: RESULT <impl> <kind> <MiB> <ms per op>.
inline void report(const char *impl, const char *kind, int mib, double ms) {
  std::printf("RESULT %s %s %d %.4f\n", impl, kind, mib, ms);
  std::fflush(stdout);
}

} // namespace bench

#endif

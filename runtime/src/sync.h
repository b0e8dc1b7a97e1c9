// Spin-then-block waiting for the threads backend. With more rank threads
// than cores pure spinning starves the thread being waited for, so waiters
// spin briefly, yield a few times and then sleep on a futex.
#ifndef FSDPRT_SRC_SYNC_H
#define FSDPRT_SRC_SYNC_H

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <condition_variable>
#include <mutex>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace fsdprt {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// An event count: waiters read a key, re-check their condition and sleep
// only if no notify() happened since the key was read.
class EventCount {
public:
  uint32_t prepare_wait() {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    return seq_.load(std::memory_order_seq_cst);
  }
  void cancel_wait() { waiters_.fetch_sub(1, std::memory_order_seq_cst); }
  // Sleeps until notified (or spuriously), at most timeout_s seconds
  // (< 0: no limit). Ends the wait registered by prepare_wait().
  void wait(uint32_t key, double timeout_s) {
#if defined(__linux__)
    struct timespec ts, *tsp = nullptr;
    if (timeout_s >= 0) {
      ts.tv_sec = time_t(timeout_s);
      ts.tv_nsec = long((timeout_s - double(ts.tv_sec)) * 1e9);
      tsp = &ts;
    }
    if (seq_.load(std::memory_order_seq_cst) == key)
      syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq_),
              FUTEX_WAIT_PRIVATE, key, tsp, nullptr, 0);
#else
    std::unique_lock<std::mutex> lock(mu_);
    auto pred = [&] { return seq_.load(std::memory_order_seq_cst) != key; };
    if (timeout_s >= 0)
      cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), pred);
    else
      cv_.wait(lock, pred);
#endif
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  void notify() {
    seq_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
#if defined(__linux__)
      syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq_),
              FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
#endif
    }
  }

private:
  static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex word");
  alignas(64) std::atomic<uint32_t> seq_{0};
  std::atomic<int32_t> waiters_{0};
#if !defined(__linux__)
  std::mutex mu_;
  std::condition_variable cv_;
#endif
};

} // namespace fsdprt

#endif // FSDPRT_SRC_SYNC_H

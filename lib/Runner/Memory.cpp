//===- Memory.cpp - the JIT'd code's allocations, counted per rank --------===//

#include "Memory.h"

#include <cstdlib>
#include <unordered_map>

namespace fsdp::run::memory {

namespace {
struct ThreadState {
  Counters counters;
  std::unordered_map<void *, size_t> live; // buffer -> requested bytes
  // Freed buffers kept for reuse, by size, and their bytes in all.
  std::unordered_multimap<size_t, void *> kept;
  int64_t keptBytes = 0;

  ThreadState() = default;
  ThreadState(const ThreadState &) = delete;
  ThreadState &operator=(const ThreadState &) = delete;
  ~ThreadState() {
    for (auto &entry : kept)
      std::free(entry.second);
  }
};

ThreadState &state() {
  thread_local ThreadState s;
  return s;
}

/// Ends a live buffer: kept for the next request of its size (a step asks
/// for the same sizes every step; the kept buffers are freed when the
/// thread ends).
void forget(ThreadState &s, std::unordered_map<void *, size_t>::iterator it) {
  void *ptr = it->first;
  size_t bytes = it->second;
  s.counters.liveBytes -= int64_t(bytes);
  s.counters.liveBuffers -= 1;
  s.counters.frees += 1;
  s.live.erase(it);
  s.kept.emplace(bytes, ptr);
  s.keptBytes += int64_t(bytes);
}

/// A kept buffer of exactly `bytes`, or null.
void *reuse(ThreadState &s, size_t bytes) {
  auto it = s.kept.find(bytes);
  if (it == s.kept.end())
    return nullptr;
  void *p = it->second;
  s.kept.erase(it);
  s.keptBytes -= int64_t(bytes);
  s.counters.reused += 1;
  return p;
}
} // namespace

Counters current() { return state().counters; }

bool isLive(void *ptr) { return state().live.count(ptr) != 0; }

bool release(void *ptr) {
  ThreadState &s = state();
  auto it = s.live.find(ptr);
  if (it == s.live.end())
    return false;
  forget(s, it);
  return true;
}

extern "C" void *fsdp_run_jit_malloc(size_t bytes) {
  ThreadState &s = state();
  void *p = reuse(s, bytes);
  if (!p) {
    p = std::malloc(bytes);
    if (!p)
      return p;
    s.counters.allocations += 1;
  }
  s.live[p] = bytes;
  s.counters.liveBytes += int64_t(bytes);
  s.counters.liveBuffers += 1;
  if (s.counters.liveBytes > s.counters.peakBytes)
    s.counters.peakBytes = s.counters.liveBytes;
  return p;
}

extern "C" void fsdp_run_jit_free(void *ptr) {
  if (!ptr)
    return;
  ThreadState &s = state();
  auto it = s.live.find(ptr);
  if (it != s.live.end())
    forget(s, it);
  else
    std::free(ptr);
}

} // namespace fsdp::run::memory

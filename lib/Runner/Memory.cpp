//===- Memory.cpp - the JIT'd code's allocations, counted per rank --------===//

#include "Memory.h"

#include <cstdlib>
#include <unordered_map>

namespace fsdp::run::memory {

namespace {
struct ThreadState {
  Counters counters;
  std::unordered_map<void *, size_t> live; // buffer -> requested bytes
};

ThreadState &state() {
  thread_local ThreadState s;
  return s;
}

void forget(ThreadState &s, std::unordered_map<void *, size_t>::iterator it) {
  s.counters.liveBytes -= int64_t(it->second);
  s.counters.liveBuffers -= 1;
  s.counters.frees += 1;
  s.live.erase(it);
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
  std::free(ptr);
  return true;
}

extern "C" void *fsdp_run_jit_malloc(size_t bytes) {
  void *p = std::malloc(bytes);
  if (!p)
    return p;
  ThreadState &s = state();
  s.live[p] = bytes;
  s.counters.liveBytes += int64_t(bytes);
  s.counters.liveBuffers += 1;
  s.counters.allocations += 1;
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
  std::free(ptr);
}

} // namespace fsdp::run::memory

//===- arena.cpp - the planned buffers of a compiled step, per rank -------===//
//
// fsdp-assign-buffers packs every step-local buffer of static size into one
// block per rank; the comm owns that block. It is mapped once, on the
// thread that reserves it first (the rank's thread), and every page is
// faulted in there (zeroed once, by the kernel): the pages belong to that
// thread's NUMA node, and no later step takes a page fault on them. A step that
// asks for no more than the reservation gets the same block back, so
// steady-state steps allocate nothing.
//
//===----------------------------------------------------------------------===//

#include "common.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FSDPRT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FSDPRT_ASAN 1
#endif
#ifdef FSDPRT_ASAN
#include <sanitizer/asan_interface.h>
#define FSDPRT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define FSDPRT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define FSDPRT_POISON(p, n) ((void)(p), (void)(n))
#define FSDPRT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

using fsdprt::Arena;
using fsdprt::format;
using fsdprt::Status;

namespace {

void unmap(Arena &a) {
  if (!a.base)
    return;
  // A later mapping at these addresses must not inherit the poison.
  FSDPRT_UNPOISON(a.base, a.mapped);
  munmap(a.base, a.mapped);
  a.base = nullptr;
  a.bytes = 0;
  a.mapped = 0;
}

/// Faults in every page of [p, p + size) for writing on the calling
/// thread: the kernel zeroes each page once (MADV_POPULATE_WRITE, Linux
/// 5.14), where a memset would write the 1 GB of a GPT-2 arena a second
/// time; a memset on kernels without it. False when the pages cannot be
/// had.
///
/// In pieces of 32 MiB: the kernel holds the process's mmap lock for the
/// whole of one call, and a thread that maps or unmaps memory meanwhile
/// waits for it -- another rank mapping its own arena, the runner mapping
/// an input. Populated in one call, GPT-2 small's two 1 GB arenas were
/// faulted in one after the other (28 s, then 32 s, on a loaded machine);
/// in pieces the ranks fault theirs in at the same time.
bool touch(void *p, size_t size) {
  constexpr int kPopulateWrite = 23; // MADV_POPULATE_WRITE
  constexpr size_t kPiece = size_t(32) << 20;
  char *bytes = static_cast<char *>(p);
  for (size_t done = 0; done < size; done += kPiece) {
    size_t n = std::min(kPiece, size - done);
    if (madvise(bytes + done, n, kPopulateWrite) == 0)
      continue;
    if (errno != EINVAL || done > 0)
      return false;
    std::memset(p, 0, size); // a kernel before 5.14
    return true;
  }
  return true;
}

/// Maps `bytes` (rounded up to whole pages) and touches every page on the
/// calling thread; false when the system refuses.
bool map(Arena &a, int64_t bytes) {
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t size = (size_t(bytes) + page - 1) / page * page;
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return false;
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE); // fewer TLB misses; a hint only
#endif
  if (!touch(p, size)) {
    munmap(p, size);
    return false;
  }
  FSDPRT_POISON(p, size); // only live planned buffers are addressable
  a.base = p;
  a.bytes = bytes;
  a.mapped = size;
  return true;
}

/// FSDPRT_ARENA_MAX_BYTES: the most bytes an arena may take (unset or
/// invalid: no cap), to leave room for other processes on a shared node.
int64_t arenaCap() {
  const char *v = std::getenv("FSDPRT_ARENA_MAX_BYTES");
  if (!v || !*v)
    return -1;
  char *end = nullptr;
  long long cap = std::strtoll(v, &end, 10);
  return *end || cap < 0 ? -1 : int64_t(cap);
}

Status reserve(Arena &a, int64_t rank, int64_t bytes) {
  if (bytes < 0)
    return Status(FSDPRT_ERR_INVALID_ARGUMENT,
                  format("rank %lld: invalid argument: arena of %lld bytes",
                         (long long)rank, (long long)bytes));
  if (bytes == 0 || bytes <= a.bytes)
    return Status::Ok();
  if (int64_t cap = arenaCap(); cap >= 0 && bytes > cap)
    return Status(FSDPRT_ERR_OUT_OF_MEMORY,
                  format("rank %lld: out of memory: the step's arena of %lld "
                         "bytes exceeds FSDPRT_ARENA_MAX_BYTES=%lld",
                         (long long)rank, (long long)bytes, (long long)cap));
  // The block holds no value between steps, so growing it is a new map.
  unmap(a);
  if (!map(a, bytes))
    return Status(FSDPRT_ERR_OUT_OF_MEMORY,
                  format("rank %lld: out of memory: cannot allocate the "
                         "step's arena of %lld bytes",
                         (long long)rank, (long long)bytes));
  return Status::Ok();
}

/// The arena of a thread without a comm (a step called outside a runner).
Arena &threadArena() {
  thread_local Arena a;
  return a;
}

} // namespace

fsdprt::Arena::~Arena() { unmap(*this); }

extern "C" {

fsdprt_status_t fsdprt_arena_reserve(fsdprt_comm_t *comm, int64_t bytes) {
  if (!comm)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  Status st = reserve(comm->arena, comm->rank, bytes);
  if (!st.ok())
    comm->record_error(st);
  return st.code;
}

int64_t fsdprt_arena_bytes(const fsdprt_comm_t *comm) {
  return comm ? comm->arena.bytes : 0;
}

void *fsdprt_jit_arena(int64_t bytes) {
  fsdprt_comm *c = fsdprt_get_thread_comm();
  Arena &a = c ? c->arena : threadArena();
  if (bytes <= a.bytes)
    return a.base;
  Status st = reserve(a, c ? c->rank : 0, bytes);
  if (!st.ok()) {
    // The step cannot run without its buffers and cannot be told.
    std::fprintf(stderr, "fsdprt: %s\n", st.message.c_str());
    std::abort();
  }
  return a.base;
}

void fsdprt_jit_arena_unpoison(void *ptr, int64_t bytes) {
  FSDPRT_UNPOISON(ptr, size_t(bytes));
}

void fsdprt_jit_arena_poison(void *ptr, int64_t bytes) {
  FSDPRT_POISON(ptr, size_t(bytes));
}

} // extern "C"

//===- Memory.h - the JIT'd code's allocations, counted per rank -*- C++
//-*-===//
//
// The lowered step allocates what stays outside its arena (its results,
// buffers of dynamic size) with malloc and frees them with free. fsdp-run
// binds those two symbols of the JIT'd code to counting wrappers, so that
// each rank thread knows the bytes its step holds, their high-water mark
// and which buffers are still live (the results the step hands to the
// runner, which frees them). A freed buffer is kept for the next request
// of its size until the thread ends: a step's buffers have the same sizes
// every step, so steady-state steps allocate nothing fresh and map no new
// pages.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDPRUN_MEMORY_H
#define FSDP_TOOLS_FSDPRUN_MEMORY_H

#include <cstddef>
#include <cstdint>

namespace fsdp::run::memory {

/// The allocations of the JIT'd code on the calling thread.
struct Counters {
  int64_t liveBytes = 0; // requested bytes not yet freed
  int64_t peakBytes = 0; // high-water mark of liveBytes
  int64_t liveBuffers = 0;
  int64_t allocations = 0, frees = 0; // fresh allocations; frees
  int64_t reused = 0;                 // requests served by a kept buffer
};

/// The calling thread's counters.
Counters current();

/// Whether `ptr` was returned by the JIT'd code's malloc on this thread and
/// is not freed yet.
bool isLive(void *ptr);

/// Frees a buffer the JIT'd code allocated on this thread (counted as the
/// code's own free would be). Returns false, freeing nothing, when `ptr` is
/// not such a live buffer.
bool release(void *ptr);

/// The wrappers the JIT'd code calls for `malloc` and `free`.
extern "C" void *fsdp_run_jit_malloc(size_t bytes);
extern "C" void fsdp_run_jit_free(void *ptr);

} // namespace fsdp::run::memory

#endif

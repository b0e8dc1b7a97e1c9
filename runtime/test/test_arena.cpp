// The planned arena under AddressSanitizer: only live planned buffers are
// addressable, so a kernel running past the end of one buffer into a dead
// neighbour (or into the alignment gap after it) is reported. Skipped in
// builds without ASan, where poisoning is a no-op (scripts/sanitize.sh
// runs these).
#include "test_util.h"

#include <cstdlib>
#include <string>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_TEST_ASAN 1
#endif

namespace {

#ifdef ARENA_TEST_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

/// Writes `n` bytes from `p`, one instrumented store each.
void scribble(char *p, size_t n) {
  volatile char *v = p;
  for (size_t i = 0; i < n; ++i)
    v[i] = 1;
}

// Two buffers as fsdp-assign-buffers lays them out, A at offset 0 and B at
// 64 (64-byte slots), on the arena of a thread without a comm.
TEST(ArenaPoisonDeathTest, OverrunIntoADeadNeighbourIsReported) {
  if (!kAsan)
    GTEST_SKIP() << "needs an AddressSanitizer build";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char *base = static_cast<char *>(fsdprt_jit_arena(4096));
  ASSERT_NE(base, nullptr);
  fsdprt_jit_arena_unpoison(base, 64); // A live
  scribble(base, 64);
  EXPECT_DEATH(scribble(base, 65), "use-after-poison");
  fsdprt_jit_arena_unpoison(base + 64, 64); // B live too: adjacent, no error
  scribble(base, 128);
  fsdprt_jit_arena_poison(base, 64); // A freed
  EXPECT_DEATH(scribble(base + 32, 1), "use-after-poison");
  scribble(base + 64, 64);
  fsdprt_jit_arena_poison(base + 64, 64);
  EXPECT_DEATH(scribble(base + 64, 1), "use-after-poison");
}

TEST(ArenaPoisonDeathTest, TheAlignmentGapIsPoisoned) {
  if (!kAsan)
    GTEST_SKIP() << "needs an AddressSanitizer build";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char *base = static_cast<char *>(fsdprt_jit_arena(4096));
  ASSERT_NE(base, nullptr);
  // A 40-byte buffer in its 64-byte slot at 128.
  fsdprt_jit_arena_unpoison(base + 128, 40);
  scribble(base + 128, 40);
  EXPECT_DEATH(scribble(base + 128, 41), "use-after-poison");
  fsdprt_jit_arena_poison(base + 128, 40);
}

// FSDPRT_ARENA_MAX_BYTES caps a reservation: above it the comm records
// out of memory and keeps what it had.
TEST(Arena, ReservationAboveTheCapFails) {
  rt_test::run_world({1}, [](int64_t, fsdprt_comm_t *comm) {
    ASSERT_EQ(setenv("FSDPRT_ARENA_MAX_BYTES", "4096", 1), 0);
    EXPECT_EQ(fsdprt_arena_reserve(comm, 4096), FSDPRT_OK);
    EXPECT_EQ(fsdprt_arena_reserve(comm, 4097), FSDPRT_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(fsdprt_arena_bytes(comm), 4096);
    EXPECT_NE(std::string(fsdprt_comm_error_message(comm))
                  .find("exceeds FSDPRT_ARENA_MAX_BYTES=4096"),
              std::string::npos)
        << fsdprt_comm_error_message(comm);
    ASSERT_EQ(unsetenv("FSDPRT_ARENA_MAX_BYTES"), 0);
  });
}

} // namespace

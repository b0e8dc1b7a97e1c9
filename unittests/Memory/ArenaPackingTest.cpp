//===- ArenaPackingTest.cpp - offsets of buffers in one arena -------------===//
//
// Every packing must keep buffers that are live at the same time apart,
// aligned, inside the arena it reports, and no smaller than the most bytes
// live at once; the bounds and the heap are checked against brute force.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/ArenaPacking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace fsdp::packing;

namespace {

/// Random buffers: sizes from 1 byte to a few KiB (some equal, as a
/// model's are), intervals over distinct positions.
std::vector<Interval> randomBuffers(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> positions(2 * n);
  for (size_t i = 0; i < positions.size(); ++i)
    positions[i] = int64_t(i);
  std::shuffle(positions.begin(), positions.end(), rng);
  static const int64_t kSizes[] = {1, 63, 64, 100, 256, 1000, 4096};
  std::vector<Interval> buffers(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = positions[2 * i], b = positions[2 * i + 1];
    buffers[i].start = std::min(a, b);
    buffers[i].end = std::max(a, b);
    buffers[i].bytes =
        rng() % 3 ? kSizes[rng() % 7] : int64_t(1 + rng() % 5000);
  }
  return buffers;
}

bool liveTogether(const Interval &a, const Interval &b) {
  return a.start < b.end && b.start < a.end;
}

/// Brute force: the most slot bytes live at any position.
int64_t mostLiveByPositions(const std::vector<Interval> &buffers,
                            int64_t alignment) {
  int64_t most = 0, last = 0;
  for (const Interval &p : buffers)
    last = std::max(last, p.end);
  for (int64_t t = 0; t <= last; ++t) {
    int64_t live = 0;
    for (const Interval &p : buffers)
      if (p.start <= t && t < p.end)
        live += slotBytes(p.bytes, alignment);
    most = std::max(most, live);
  }
  return most;
}

/// Checks that `offsets` is a valid packing of `buffers` in `arena` bytes.
void expectValid(const std::vector<Interval> &buffers,
                 const std::vector<int64_t> &offsets, int64_t arena,
                 int64_t alignment) {
  ASSERT_EQ(offsets.size(), buffers.size());
  int64_t top = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_GE(offsets[i], 0);
    EXPECT_EQ(offsets[i] % alignment, 0) << "buffer " << i;
    top = std::max(top, offsets[i] + slotBytes(buffers[i].bytes, alignment));
  }
  EXPECT_EQ(top, arena);
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!liveTogether(buffers[i], buffers[j]))
        continue;
      int64_t ei = offsets[i] + slotBytes(buffers[i].bytes, alignment);
      int64_t ej = offsets[j] + slotBytes(buffers[j].bytes, alignment);
      EXPECT_TRUE(ei <= offsets[j] || ej <= offsets[i])
          << "buffers " << i << " and " << j << " overlap";
    }
  EXPECT_GE(arena, mostLive(buffers, alignment));
}

TEST(ArenaPacking, Slots) {
  EXPECT_EQ(slotBytes(0, 64), 64);
  EXPECT_EQ(slotBytes(1, 64), 64);
  EXPECT_EQ(slotBytes(64, 64), 64);
  EXPECT_EQ(slotBytes(65, 64), 128);
  EXPECT_EQ(slotBytes(5, 1), 5);
  EXPECT_EQ(alignTo(129, 128), 256);
}

TEST(ArenaPacking, HeapReusesBestFitAndCoalesces) {
  ArenaHeap heap(64);
  int64_t a = heap.allocate(64), b = heap.allocate(200), c = heap.allocate(64),
          d = heap.allocate(128), e = heap.allocate(64);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 64);
  EXPECT_EQ(c, 320);
  EXPECT_EQ(d, 384);
  EXPECT_EQ(e, 512);
  EXPECT_EQ(heap.size(), 576);
  heap.release(b, 200); // a hole of 256 at 64
  heap.release(d, 128); // a hole of 128 at 384
  // The smallest hole that holds 100 bytes: the 128 at 384.
  EXPECT_EQ(heap.allocate(100), 384);
  // 256 fits only the hole at 64.
  EXPECT_EQ(heap.allocate(256), 64);
  EXPECT_EQ(heap.size(), 576);
  // Neighbours coalesce: a, then c's hole joins b's.
  heap.release(a, 64);
  heap.release(64, 256);
  heap.release(c, 64);
  EXPECT_EQ(heap.allocate(384), 0);
  EXPECT_EQ(heap.size(), 576);
}

TEST(ArenaPacking, HeapGrowsTheFreeRangeAtTheTop) {
  ArenaHeap heap(64);
  int64_t a = heap.allocate(64);
  int64_t b = heap.allocate(64);
  heap.release(b, 64);
  // The free range at the top extends rather than leaving it unused.
  EXPECT_EQ(heap.allocate(256), 64);
  EXPECT_EQ(heap.size(), 320);
  EXPECT_EQ(a, 0);
}

TEST(ArenaPacking, BoundsMatchBruteForce) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<Interval> buffers = randomBuffers(40, seed);
    EXPECT_EQ(mostLive(buffers, 64), mostLiveByPositions(buffers, 64));
    std::vector<int64_t> breadth = breadths(buffers, 64);
    ASSERT_EQ(breadth.size(), buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      // The most bytes live at any position of buffer i's life.
      int64_t most = 0;
      for (int64_t t = buffers[i].start; t < buffers[i].end; ++t) {
        int64_t live = 0;
        for (const Interval &p : buffers)
          if (p.start <= t && t < p.end)
            live += slotBytes(p.bytes, 64);
        most = std::max(most, live);
      }
      EXPECT_EQ(breadth[i], most) << "seed " << seed << " buffer " << i;
    }
  }
}

// Program order leaves the first buffer's hole too small for the last one;
// a global packing by size places the largest first and reaches the bound.
TEST(ArenaPacking, GlobalPackingBeatsProgramOrder) {
  std::vector<Interval> buffers = {{64, 0, 5}, {64, 1, 10}, {128, 6, 10}};
  std::vector<int64_t> offsets;
  EXPECT_EQ(packInProgramOrder(buffers, 64, offsets), 256);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 64, 128}));
  EXPECT_EQ(mostLive(buffers, 64), 192);
  std::vector<size_t> order = globalOrder(buffers, Order::Size, {}, 64);
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(packGlobally(buffers, order, 64, INT64_MAX, offsets), 192);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 128, 0}));
  EXPECT_EQ(pack(buffers, 64, offsets), 192);
  expectValid(buffers, offsets, 192, 64);
}

TEST(ArenaPacking, OrdersBreakTiesByProgramOrder) {
  std::vector<Interval> buffers = {
      {64, 4, 6}, {64, 0, 2}, {128, 1, 3}, {64, 2, 4}};
  std::vector<int64_t> breadth = breadths(buffers, 64);
  EXPECT_EQ(globalOrder(buffers, Order::Size, breadth, 64),
            (std::vector<size_t>{2, 1, 3, 0}));
  // Areas: 128, 128, 256, 128; equal areas by size, then start.
  EXPECT_EQ(globalOrder(buffers, Order::Area, breadth, 64),
            (std::vector<size_t>{2, 1, 3, 0}));
}

TEST(ArenaPacking, GlobalPackingStopsAtTheLimit) {
  std::vector<Interval> buffers = {{64, 0, 2}, {64, 1, 3}, {64, 2, 4}};
  std::vector<int64_t> offsets;
  std::vector<size_t> order = {0, 1, 2};
  EXPECT_EQ(packGlobally(buffers, order, 64, INT64_MAX, offsets), 128);
  EXPECT_EQ(packGlobally(buffers, order, 64, 128, offsets), 128);
  EXPECT_EQ(packGlobally(buffers, order, 64, 64, offsets), 64);
}

TEST(ArenaPacking, EveryPackingIsValid) {
  for (int64_t alignment : {1, 16, 64, 4096})
    for (uint32_t seed = 0; seed < 10; ++seed) {
      std::vector<Interval> buffers = randomBuffers(60, seed);
      std::vector<int64_t> offsets;
      int64_t inOrder = packInProgramOrder(buffers, alignment, offsets);
      expectValid(buffers, offsets, inOrder, alignment);
      int64_t smallest = inOrder;
      std::vector<int64_t> breadth = breadths(buffers, alignment);
      for (Order by : {Order::Size, Order::Area, Order::Breadth}) {
        std::vector<size_t> order =
            globalOrder(buffers, by, breadth, alignment);
        int64_t size =
            packGlobally(buffers, order, alignment, INT64_MAX, offsets);
        expectValid(buffers, offsets, size, alignment);
        smallest = std::min(smallest, size);
      }
      int64_t best = pack(buffers, alignment, offsets);
      expectValid(buffers, offsets, best, alignment);
      EXPECT_LE(best, smallest)
          << "alignment " << alignment << " seed " << seed;
    }
}

TEST(ArenaPacking, SearchNeverGrowsTheArena) {
  for (uint32_t seed = 0; seed < 10; ++seed) {
    std::vector<Interval> buffers = randomBuffers(80, 100 + seed);
    std::vector<int64_t> breadth = breadths(buffers, 64), offsets;
    std::vector<size_t> order = globalOrder(buffers, Order::Size, breadth, 64);
    int64_t arena = packGlobally(buffers, order, 64, INT64_MAX, offsets);
    int64_t before = arena;
    searchOrders(buffers, 64, mostLive(buffers, 64), order, offsets, arena);
    EXPECT_LE(arena, before);
    expectValid(buffers, offsets, arena, 64);
    // The order it returns packs to the arena it reports.
    std::vector<int64_t> again;
    EXPECT_EQ(packGlobally(buffers, order, 64, INT64_MAX, again), arena);
    EXPECT_EQ(again, offsets);
  }
}

TEST(ArenaPacking, Deterministic) {
  std::vector<Interval> buffers = randomBuffers(200, 7);
  std::vector<int64_t> first, second;
  int64_t a = pack(buffers, 64, first);
  int64_t b = pack(buffers, 64, second);
  EXPECT_EQ(a, b);
  EXPECT_EQ(first, second);
}

TEST(ArenaPacking, ManyBuffersPackInProgramOrderOnly) {
  std::vector<Interval> buffers = randomBuffers(kMaxGloballyPacked + 1, 3);
  std::vector<int64_t> inOrder, packed;
  int64_t expected = packInProgramOrder(buffers, 64, inOrder);
  EXPECT_EQ(pack(buffers, 64, packed), expected);
  EXPECT_EQ(packed, inOrder);
}

TEST(ArenaPacking, Empty) {
  std::vector<int64_t> offsets = {1, 2};
  EXPECT_EQ(pack({}, 64, offsets), 0);
  EXPECT_TRUE(offsets.empty());
  EXPECT_EQ(mostLive({}, 64), 0);
  EXPECT_TRUE(breadths({}, 64).empty());
}

} // namespace

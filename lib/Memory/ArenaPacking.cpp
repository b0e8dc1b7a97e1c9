//===- ArenaPacking.cpp - Offsets of buffers in one arena -----------------===//
//
// See ArenaPacking.h. Deterministic: the same intervals give the same
// offsets on every platform (std::mt19937's raw output, stable sorts, ties
// broken by index or position).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/ArenaPacking.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>
#include <tuple>

namespace fsdp {
namespace packing {

int64_t alignTo(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

int64_t slotBytes(int64_t bytes, int64_t alignment) {
  return std::max(alignTo(bytes, alignment), alignment);
}

//===----------------------------------------------------------------------===//
// ArenaHeap
//===----------------------------------------------------------------------===//

int64_t ArenaHeap::allocate(int64_t bytes) {
  bytes = slotBytes(bytes, alignment);
  auto fit = bySize.lower_bound({bytes, INT64_MIN});
  if (fit != bySize.end()) {
    auto [size, offset] = *fit;
    erase(offset);
    if (size > bytes)
      insert(offset + bytes, size - bytes);
    return offset;
  }
  // No free range holds it: extend the free range at the top, if any.
  int64_t offset = top;
  if (!byOffset.empty()) {
    auto last = std::prev(byOffset.end());
    if (last->first + last->second == top) {
      offset = last->first;
      erase(offset);
    }
  }
  top = offset + bytes;
  return offset;
}

void ArenaHeap::release(int64_t offset, int64_t bytes) {
  bytes = slotBytes(bytes, alignment);
  auto next = byOffset.lower_bound(offset);
  if (next != byOffset.end() && next->first == offset + bytes) {
    bytes += next->second;
    erase(next->first);
  }
  auto after = byOffset.lower_bound(offset);
  if (after != byOffset.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      bytes += prev->second;
      erase(offset);
    }
  }
  insert(offset, bytes);
}

void ArenaHeap::insert(int64_t offset, int64_t bytes) {
  byOffset[offset] = bytes;
  bySize.insert({bytes, offset});
}

void ArenaHeap::erase(int64_t offset) {
  auto it = byOffset.find(offset);
  bySize.erase({it->second, offset});
  byOffset.erase(it);
}

//===----------------------------------------------------------------------===//
// Packings
//===----------------------------------------------------------------------===//

int64_t packInProgramOrder(const std::vector<Interval> &buffers,
                           int64_t alignment, std::vector<int64_t> &offsets) {
  // (position, buffer, is the allocation); positions are distinct events.
  std::vector<std::tuple<int64_t, size_t, bool>> events;
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    events.emplace_back(buffers[i].start, i, true);
    events.emplace_back(buffers[i].end, i, false);
  }
  std::sort(events.begin(), events.end());
  ArenaHeap heap(alignment);
  offsets.assign(buffers.size(), 0);
  for (auto [position, i, isAlloc] : events) {
    if (isAlloc)
      offsets[i] = heap.allocate(buffers[i].bytes);
    else
      heap.release(offsets[i], buffers[i].bytes);
  }
  return heap.size();
}

/// floor(log2(v)) for v > 0.
static size_t floorLog2(uint64_t v) {
  size_t log = 0;
  while (v >>= 1)
    ++log;
  return log;
}

std::vector<int64_t> breadths(const std::vector<Interval> &buffers,
                              int64_t alignment) {
  // The live bytes between consecutive events, and a sparse table of their
  // maxima.
  std::vector<int64_t> times;
  for (const Interval &p : buffers) {
    times.push_back(p.start);
    times.push_back(p.end);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto at = [&](int64_t t) {
    return size_t(std::lower_bound(times.begin(), times.end(), t) -
                  times.begin());
  };
  size_t m = times.size();
  std::vector<int64_t> delta(m + 1, 0);
  for (const Interval &p : buffers) {
    delta[at(p.start)] += slotBytes(p.bytes, alignment);
    delta[at(p.end)] -= slotBytes(p.bytes, alignment);
  }
  std::vector<std::vector<int64_t>> table(1, std::vector<int64_t>(m, 0));
  int64_t live = 0;
  for (size_t k = 0; k < m; ++k)
    table[0][k] = live += delta[k];
  for (size_t w = 1; 2 * w <= m; w *= 2) {
    std::vector<int64_t> next(m - 2 * w + 1);
    for (size_t k = 0; k + 2 * w <= m; ++k)
      next[k] = std::max(table.back()[k], table.back()[k + w]);
    table.push_back(std::move(next));
  }
  std::vector<int64_t> result;
  result.reserve(buffers.size());
  for (const Interval &p : buffers) {
    size_t lo = at(p.start), hi = at(p.end); // events [lo, hi)
    size_t level = floorLog2(uint64_t(hi - lo));
    result.push_back(
        std::max(table[level][lo], table[level][hi - (size_t(1) << level)]));
  }
  return result;
}

std::vector<size_t> globalOrder(const std::vector<Interval> &buffers, Order by,
                                const std::vector<int64_t> &breadth,
                                int64_t alignment) {
  auto key = [&](size_t i) -> std::tuple<double, int64_t, int64_t> {
    const Interval &p = buffers[i];
    int64_t size = slotBytes(p.bytes, alignment), life = p.end - p.start;
    if (by == Order::Size)
      return {double(size), life, 0};
    if (by == Order::Area)
      return {double(size) * double(life), size, 0};
    return {double(breadth[i]), life, size};
  };
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto ka = key(a), kb = key(b);
    if (ka != kb)
      return ka > kb;
    return buffers[a].start < buffers[b].start;
  });
  return order;
}

int64_t packGlobally(const std::vector<Interval> &buffers,
                     const std::vector<size_t> &order, int64_t alignment,
                     int64_t limit, std::vector<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  // The placed buffers by offset, compact: one pass over them finds the
  // gaps among those live at the same time (no sort per buffer).
  struct Placed {
    int64_t offset, end, start, stop; ///< bytes [offset, end), [start, stop)
  };
  std::vector<Placed> placed;
  placed.reserve(order.size());
  int64_t top = 0;
  for (size_t i : order) {
    const Interval &p = buffers[i];
    int64_t size = slotBytes(p.bytes, alignment);
    int64_t cursor = 0, best = -1, bestGap = INT64_MAX;
    for (const Placed &q : placed) {
      if (q.stop <= p.start || p.end <= q.start)
        continue;
      int64_t gap = q.offset - cursor;
      if (gap >= size && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = std::max(cursor, q.end);
    }
    offsets[i] = best >= 0 ? best : cursor;
    top = std::max(top, offsets[i] + size);
    if (top >= limit)
      return top; // cannot beat the packing it is compared with
    auto at = std::upper_bound(
        placed.begin(), placed.end(), offsets[i],
        [](int64_t o, const Placed &q) { return o < q.offset; });
    placed.insert(at, {offsets[i], offsets[i] + size, p.start, p.end});
  }
  return top;
}

int64_t mostLive(const std::vector<Interval> &buffers, int64_t alignment) {
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * buffers.size());
  for (const Interval &p : buffers) {
    events.push_back({p.start, slotBytes(p.bytes, alignment)});
    events.push_back({p.end, -slotBytes(p.bytes, alignment)});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, most = 0;
  for (auto [position, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return most;
}

void searchOrders(const std::vector<Interval> &buffers, int64_t alignment,
                  int64_t bound, std::vector<size_t> &order,
                  std::vector<int64_t> &best, int64_t &arena) {
  // Greedy packings of many similar small buffers leave holes (recompute:
  // 2.9% above the bound) that a different order closes.
  size_t n = buffers.size();
  if (n < 2 || n > kMaxSearched)
    return;
  uint64_t perPack = uint64_t(n) * uint64_t(n) / 2;
  uint64_t rounds =
      std::min<uint64_t>(kSearchRounds, kSearchComparisons / perPack);
  std::mt19937 rng(5489u);
  std::vector<size_t> trial;
  std::vector<int64_t> offsets;
  for (uint64_t r = 0; r < rounds && arena > bound; ++r) {
    trial.assign(order.begin(), order.end());
    auto move = [&](size_t from, size_t to) {
      size_t moved = trial[from];
      trial.erase(trial.begin() + from);
      trial.insert(trial.begin() + to, moved);
    };
    if (rng() % 2) {
      // One of the buffers at the top, placed earlier.
      std::vector<size_t> top;
      for (size_t k = 0; k < n; ++k)
        if (best[trial[k]] + slotBytes(buffers[trial[k]].bytes, alignment) ==
            arena)
          top.push_back(k);
      size_t from = top[rng() % top.size()];
      move(from, from - std::min<size_t>(from, 1 + rng() % 40));
    } else {
      // A few buffers moved a short way.
      for (uint32_t moves = 1 + rng() % 4; moves > 0; --moves) {
        int64_t from = int64_t(rng() % n);
        int64_t to = from + int64_t(rng() % 41) - 20;
        move(size_t(from), size_t(std::clamp<int64_t>(to, 0, int64_t(n) - 1)));
      }
    }
    int64_t size = packGlobally(buffers, trial, alignment, arena + 1, offsets);
    if (size <= arena) {
      arena = size;
      std::swap(best, offsets);
      std::swap(order, trial);
    }
  }
}

int64_t pack(const std::vector<Interval> &buffers, int64_t alignment,
             std::vector<int64_t> &best) {
  std::vector<int64_t> offsets;
  int64_t arena = packInProgramOrder(buffers, alignment, best);
  int64_t bound = mostLive(buffers, alignment);
  std::vector<int64_t> breadth = breadths(buffers, alignment);
  std::vector<size_t> bestOrder;
  for (Order by : {Order::Size, Order::Area, Order::Breadth}) {
    if (arena == bound || buffers.size() > kMaxGloballyPacked)
      break; // already the least possible, or too many to compare
    std::vector<size_t> order = globalOrder(buffers, by, breadth, alignment);
    int64_t size = packGlobally(buffers, order, alignment, arena, offsets);
    if (size < arena) {
      arena = size;
      std::swap(best, offsets);
      bestOrder = std::move(order);
    }
  }
  if (!bestOrder.empty() && arena > bound)
    searchOrders(buffers, alignment, bound, bestOrder, best, arena);
  return arena;
}

} // namespace packing
} // namespace fsdp

//===- ArenaPacking.h - Buffers' offsets in one arena -----------*- C++ -*-===//
//
// The packing behind `fsdp-assign-buffers` (docs/PASSES.md): buffers with a
// size and a live interval [start, end) in some program order come in, an
// offset per buffer and the arena's size come out, such that two buffers
// live at the same time never overlap. Every buffer takes a slot: its size
// rounded up to the alignment (at least one alignment), so every offset is
// aligned. It depends on nothing but the C++ standard library.
//
// `pack` is what the pass uses: the smallest of a heap simulation in
// program order and three global best fits over the live intervals
// (decreasing size, size times lifetime, breadth), as XLA's heap simulator
// tries several, then a local search over the order of the best global one.
// The pieces are exposed for tests and experiments.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_ARENAPACKING_H
#define FSDP_MEMORY_ARENAPACKING_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace fsdp {
namespace packing {

/// One buffer: its bytes and its live interval [start, end) in program
/// order (start < end; the positions of distinct events are distinct).
struct Interval {
  int64_t bytes = 0;
  int64_t start = 0, end = 0;
};

/// The global packings compare each buffer with those placed before it
/// (quadratic); above this many buffers only the O(n log n) program-order
/// packing runs, so that compile time stays near linear.
constexpr size_t kMaxGloballyPacked = 4096;
/// The local search (searchOrders): for at most kMaxSearched buffers, at
/// most kSearchRounds packings and about kSearchComparisons comparisons in
/// all (a few hundredths of a second).
constexpr size_t kMaxSearched = 1024;
constexpr uint64_t kSearchRounds = 2000;
constexpr uint64_t kSearchComparisons = uint64_t(1) << 25;

/// `bytes` rounded up to a multiple of `alignment` (> 0).
int64_t alignTo(int64_t bytes, int64_t alignment);

/// The bytes a buffer takes in the arena: its size rounded up to the
/// alignment, at least one alignment.
int64_t slotBytes(int64_t bytes, int64_t alignment);

/// A heap of one arena: free ranges by offset (to coalesce on release) and
/// by size (for the best fit), O(log n) per allocation and release. Sizes
/// are multiples of the alignment, so every offset is aligned.
class ArenaHeap {
public:
  explicit ArenaHeap(int64_t alignment) : alignment(alignment) {}

  /// The offset of a new block of `bytes`: the smallest free range that
  /// holds it (the lowest on a tie), else the top, grown.
  int64_t allocate(int64_t bytes);
  /// Frees the block of `bytes` at `offset`, coalescing with its
  /// neighbours.
  void release(int64_t offset, int64_t bytes);
  /// The highest byte ever allocated: the arena's size.
  int64_t size() const { return top; }

private:
  void insert(int64_t offset, int64_t bytes);
  void erase(int64_t offset);

  int64_t alignment;
  int64_t top = 0;
  std::map<int64_t, int64_t> byOffset;
  std::set<std::pair<int64_t, int64_t>> bySize;
};

/// Offsets by a best-fit heap simulation in program order: O(n log n).
/// Returns the arena's size.
int64_t packInProgramOrder(const std::vector<Interval> &buffers,
                           int64_t alignment, std::vector<int64_t> &offsets);

/// Orders of the global best-fit packing: decreasing size; size times
/// lifetime; breadth (the most bytes live at any time of the buffer's
/// life), then lifetime. Ties keep program order (earlier start first).
enum class Order { Size, Area, Breadth };

/// Per buffer, the most slot bytes live at once during its life.
std::vector<int64_t> breadths(const std::vector<Interval> &buffers,
                              int64_t alignment);

/// The buffers' indices in one of those orders (O(n log n)); `breadth` is
/// breadths() (used by Order::Breadth only).
std::vector<size_t> globalOrder(const std::vector<Interval> &buffers, Order by,
                                const std::vector<int64_t> &breadth,
                                int64_t alignment);

/// Offsets by a global best fit over the live intervals, the buffers in
/// `order`: each at the smallest gap (the lowest on a tie) between the
/// buffers already placed that are live at the same time, or above them.
/// Stops early, returning a size >= `limit`, once the arena reaches
/// `limit` (then `offsets` is incomplete). n^2 / 2 comparisons.
int64_t packGlobally(const std::vector<Interval> &buffers,
                     const std::vector<size_t> &order, int64_t alignment,
                     int64_t limit, std::vector<int64_t> &offsets);

/// The most slot bytes live at once: no packing can do better.
int64_t mostLive(const std::vector<Interval> &buffers, int64_t alignment);

/// A local search from `order` (whose global packing is `offsets`, of
/// size `arena`), for at most kMaxSearched buffers: one of the buffers at
/// the top of the arena moved earlier in the order, or a few buffers moved
/// a short way, packed again, the new order kept when its arena is no
/// larger (so that the search crosses plateaus), until `bound` or the
/// budget of comparisons. Updates `order`, `offsets` and `arena`.
/// Deterministic: a fixed seed and the generator's raw output.
void searchOrders(const std::vector<Interval> &buffers, int64_t alignment,
                  int64_t bound, std::vector<size_t> &order,
                  std::vector<int64_t> &offsets, int64_t &arena);

/// Packs `buffers` in program order and globally in each order, keeping
/// the smallest arena (the first on a tie), then searches for a better
/// order of the best global packing. Returns the arena's size; `offsets`
/// has one aligned offset per buffer.
int64_t pack(const std::vector<Interval> &buffers, int64_t alignment,
             std::vector<int64_t> &offsets);

} // namespace packing
} // namespace fsdp

#endif // FSDP_MEMORY_ARENAPACKING_H

//===- ShardsTest.cpp - a rank's buffer as one run of the global array ----===//
//
// contiguousShardOffset says where a rank's buffer of an input lies in the
// global array when it is one contiguous run of it (the runner then maps a
// read-only argument's shard from the input file instead of copying it).
// Checked against shardInput, which copies the shard element by element,
// over layouts, meshes and uneven shapes.
//
//===----------------------------------------------------------------------===//

#include "Shards.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace fsdp::run;
namespace lm = ::fsdp::layout;

namespace {

Port port(std::vector<int64_t> global, std::optional<lm::Layout> layout) {
  Port p;
  p.name = "p";
  p.dtype = "<f4";
  p.elementBytes = 4;
  p.globalShape = global;
  p.layout = layout;
  p.shape = layout ? lm::slotShape(*layout, global) : global;
  return p;
}

/// Every rank's buffer: equal to the global bytes at the offset when one
/// is given; a shard with padding or a partial sum has none.
void expectAgrees(const Port &p, int64_t ranks, int64_t wantRuns) {
  int64_t n = p.globalElements();
  std::vector<float> global(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e)
    global[size_t(e)] = float(e + 1);
  const char *bytes = reinterpret_cast<const char *>(global.data());
  int64_t runs = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    fsdp::Bytes shard = shardInput(p, bytes, r);
    int64_t at = contiguousShardOffset(p, r);
    if (at < 0)
      continue;
    ++runs;
    ASSERT_LE(at + int64_t(shard.size()), n * 4) << "rank " << r;
    EXPECT_EQ(std::memcmp(shard.data(), bytes + at, shard.size()), 0)
        << "rank " << r;
  }
  EXPECT_EQ(runs, wantRuns);
}

lm::Layout layout(std::vector<int64_t> mesh,
                  std::vector<lm::Placement> placements) {
  lm::Layout l;
  l.meshShape = std::move(mesh);
  l.placements = std::move(placements);
  return l;
}

TEST(ContiguousShard, RowsOfTheFirstDim) {
  expectAgrees(port({8, 3}, layout({4}, {lm::Placement::shard(0)})), 4, 4);
  // 10 rows on 4 ranks: 3, 3, 3, 1 rows in slots of 3 (the last padded).
  expectAgrees(port({10, 3}, layout({4}, {lm::Placement::shard(0)})), 4, 3);
}

TEST(ContiguousShard, AnInnerDimIsNotOneRun) {
  expectAgrees(port({4, 8}, layout({2}, {lm::Placement::shard(1)})), 2, 0);
  expectAgrees(port({1, 8}, layout({2}, {lm::Placement::shard(1)})), 2, 2);
}

TEST(ContiguousShard, ReplicasAndBatches) {
  // HSDP: replicated over the first axis, rows over the second.
  expectAgrees(port({8, 2}, layout({2, 2}, {lm::Placement::replicate(),
                                            lm::Placement::shard(0)})),
               4, 4);
  // Both axes cut the rows (2 x 2 ways).
  expectAgrees(port({8, 2}, layout({2, 2}, {lm::Placement::shard(0),
                                            lm::Placement::shard(0)})),
               4, 4);
  // A batch without a layout: rank r's rows of the global batch.
  Port batch = port({2, 3}, std::nullopt);
  batch.globalShape = {8, 3};
  expectAgrees(batch, 4, 4);
}

TEST(ContiguousShard, PartialSumsAreNot) {
  expectAgrees(
      port({4}, layout({2}, {lm::Placement::partial(lm::ReduceKind::Sum)})), 2,
      0);
}

/// placeShard's runs: every element of rank `rank`'s slot lands where
/// placeShard into a global array puts it, and the runs number `wantRuns`.
void expectRuns(const Port &p, int64_t rank, int64_t wantRuns) {
  int64_t n = p.globalElements(), slot = p.slotBytes() / 4;
  std::vector<float> piece(static_cast<size_t>(slot));
  for (int64_t e = 0; e < slot; ++e)
    piece[size_t(e)] = float(e + 1);
  std::vector<int64_t> words = {0, 0, 0};
  words[0] = words[1] = int64_t(reinterpret_cast<intptr_t>(piece.data()));
  for (int64_t d : p.shape)
    words.push_back(d);
  int64_t stride = 1;
  std::vector<int64_t> strides(p.shape.size());
  for (size_t d = p.shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= p.shape[d];
  }
  words.insert(words.end(), strides.begin(), strides.end());
  std::vector<float> direct(static_cast<size_t>(n), 0), viaRuns(direct);
  placeShard(p, rank, words.data(), reinterpret_cast<char *>(direct.data()));
  int64_t runs = 0;
  placeShard(p, rank, words.data(),
             [&](int64_t at, const char *data, int64_t bytes) {
               ++runs;
               ASSERT_LE(at + bytes, n * 4);
               std::memcpy(reinterpret_cast<char *>(viaRuns.data()) + at, data,
                           size_t(bytes));
             });
  EXPECT_EQ(direct, viaRuns) << "rank " << rank;
  EXPECT_EQ(runs, wantRuns) << "rank " << rank;
}

TEST(PlaceShard, RowsOfTheFirstDimAreOneRun) {
  // 10 rows of 3 on 4 ranks: each rank's rows are one run (one write).
  Port p = port({10, 3}, layout({4}, {lm::Placement::shard(0)}));
  for (int64_t r = 0; r < 4; ++r)
    expectRuns(p, r, 1);
}

TEST(PlaceShard, ColumnsAreOneRunPerRow) {
  // Columns 0-3 and 4-7 of 4 rows: one run per row.
  Port p = port({4, 8}, layout({2}, {lm::Placement::shard(1)}));
  expectRuns(p, 0, 4);
  expectRuns(p, 1, 4);
  // A single row: one run.
  expectRuns(port({1, 8}, layout({2}, {lm::Placement::shard(1)})), 1, 1);
}

} // namespace

//===- LayoutMathTest.cpp - layout arithmetic vs. element ownership -------===//
//
// The model below assigns every element explicitly, list by list, as the
// definitions in docs/SEMANTICS.md §3 read; the library computes ranges. They
// must agree for every small case.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Layout/LayoutMath.h"

#include <gtest/gtest.h>

#include <map>

using namespace fsdp::layout;

namespace {

using Indices = std::vector<int64_t>;

/// Brute force: split an explicit index list over k parts.
Indices chunkList(const Indices &in, int64_t k, int64_t i,
                  UnevenPolicy policy) {
  int64_t n = in.size();
  std::vector<Indices> parts(k);
  if (policy == UnevenPolicy::Ceil) {
    int64_t c = (n + k - 1) / k;
    for (int64_t x = 0; x < n; ++x)
      parts[x / c].push_back(in[x]);
  } else {
    // Deal out sizes b+1 to the first r parts, b to the rest.
    int64_t b = n / k, r = n % k, pos = 0;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t t = 0; t < b + (p < r); ++t)
        parts[p].push_back(in[pos++]);
  }
  return parts[i];
}

/// Brute force: StridedShard — element x of the list belongs to the part
/// (x / m) % k, where m = n / (sf * k).
Indices stridedList(const Indices &in, int64_t k, int64_t sf, int64_t i) {
  int64_t m = in.size() / (sf * k);
  Indices out;
  for (int64_t x = 0; x < (int64_t)in.size(); ++x)
    if ((x / m) % k == i)
      out.push_back(in[x]);
  return out;
}

Indices owned(const DimShard &ds) {
  Indices out;
  for (const Range &r : ds.ranges)
    for (int64_t x = r.begin; x < r.end; ++x)
      out.push_back(x);
  return out;
}

Indices iota(int64_t n) {
  Indices v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

/// Model of one dim for a rank: apply the placements sharding `dim` in mesh
/// order to the explicit index list.
Indices modelDim(const Layout &l, int64_t n, int64_t dim,
                 const std::vector<int64_t> &coords) {
  Indices cur = iota(n);
  for (size_t a = 0; a < l.placements.size(); ++a) {
    const Placement &p = l.placements[a];
    if (!p.isSharding() || p.dim != dim)
      continue;
    if (p.kind == Placement::Kind::Shard)
      cur = chunkList(cur, l.meshShape[a], coords[a], l.policy);
    else
      cur = stridedList(cur, l.meshShape[a], p.splitFactor, coords[a]);
  }
  return cur;
}

/// Checks library vs model for every rank, and that within each group of
/// ranks that share their non-sharding coordinates every element is owned
/// exactly once.
void checkLayout(const Layout &l, const std::vector<int64_t> &shape) {
  ASSERT_FALSE(validate(l, shape).has_value()) << *validate(l, shape);
  int64_t world = product(l.meshShape);
  std::vector<int64_t> slot = slotShape(l, shape);
  // (replicate coords, dim) -> ownership count per element.
  std::map<std::pair<std::vector<int64_t>, int64_t>, std::vector<int>> counts;
  for (int64_t r = 0; r < world; ++r) {
    LocalShard s = localShard(l, shape, r);
    ASSERT_EQ(s.slotShape, slot) << "slot differs on rank " << r;
    std::vector<int64_t> key;
    for (int64_t a : replicateAxes(l))
      key.push_back(s.coords[a]);
    for (size_t d = 0; d < shape.size(); ++d) {
      Indices want = modelDim(l, shape[d], d, s.coords);
      Indices got = owned(s.dims[d]);
      ASSERT_EQ(got, want) << "rank " << r << " dim " << d;
      EXPECT_EQ(s.localShape[d], (int64_t)want.size());
      EXPECT_GE(s.slotShape[d], s.localShape[d]);
      if (!want.empty())
        EXPECT_EQ(s.offsets[d], want.front());
      // Every element of the dim is owned once by the ranks that shard it:
      // count only ranks whose coordinates on axes not sharding d are 0.
      bool representative = true;
      std::vector<int64_t> dimAxes = axesShardingDim(l, d);
      for (size_t a = 0; a < l.meshShape.size(); ++a)
        if (std::find(dimAxes.begin(), dimAxes.end(), (int64_t)a) ==
                dimAxes.end() &&
            s.coords[a] != 0)
          representative = false;
      if (representative) {
        auto &c = counts[{key, (int64_t)d}];
        c.resize(shape[d], 0);
        for (int64_t x : got)
          c[x]++;
      }
    }
  }
  for (auto &[k, c] : counts)
    for (size_t x = 0; x < c.size(); ++x)
      ASSERT_EQ(c[x], 1) << "element " << x << " of dim " << k.second;
  // The per-slot view used to unpack gathers agrees with the rank view.
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int64_t> axes = axesShardingDim(l, d);
    if (axes.empty())
      continue;
    std::vector<DimShard> slots = slotsAlongDim(l, shape, d);
    for (int64_t r = 0; r < world; ++r) {
      LocalShard s = localShard(l, shape, r);
      int64_t j = indexInGroup(l.meshShape, axes, r);
      ASSERT_EQ(owned(slots[j]), owned(s.dims[d]));
    }
  }
}

} // namespace

TEST(LayoutMath, DesignExamples) {
  Layout l{{4}, {Placement::shard(0)}, UnevenPolicy::Ceil};
  std::vector<int64_t> sizes, want = {3, 3, 3, 1};
  for (int r = 0; r < 4; ++r)
    sizes.push_back(localShard(l, {10, 16}, r).localShape[0]);
  EXPECT_EQ(sizes, want);
  EXPECT_EQ(slotShape(l, {10, 16}), (std::vector<int64_t>{3, 16}));
  l.policy = UnevenPolicy::Balanced;
  sizes.clear();
  want = {3, 3, 2, 2};
  for (int r = 0; r < 4; ++r)
    sizes.push_back(localShard(l, {10, 16}, r).localShape[0]);
  EXPECT_EQ(sizes, want);
  EXPECT_EQ(slotShape(l, {10, 16}), (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(localShard(l, {10, 16}, 3).offsets[0], 8);
}

TEST(LayoutMath, CeilLeavesTrailingRanksEmpty) {
  Layout l{{4}, {Placement::shard(0)}, UnevenPolicy::Ceil};
  // n = 5 over 4: c = 2 -> 2, 2, 1, 0.
  LocalShard s = localShard(l, {5}, 3);
  EXPECT_EQ(s.localShape[0], 0);
  EXPECT_EQ(s.slotShape[0], 2);
  EXPECT_EQ(s.offsets[0], 5);
}

TEST(LayoutMath, Groups) {
  std::vector<int64_t> mesh = {2, 4};
  EXPECT_EQ(rankToCoords(mesh, 6), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(groupRanks(mesh, {1}, 6), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(groupRanks(mesh, {0}, 6), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(groupRanks(mesh, {0, 1}, 6).size(), 8u);
  EXPECT_EQ(indexInGroup(mesh, {0}, 6), 1);
  EXPECT_EQ(indexInGroup(mesh, {1}, 6), 2);
  EXPECT_EQ(indexInGroup(mesh, {0, 1}, 6), 6);
}

TEST(LayoutMath, Shard1DAllSizes) {
  for (auto policy : {UnevenPolicy::Ceil, UnevenPolicy::Balanced})
    for (int64_t k = 1; k <= 8; ++k)
      for (int64_t n = 1; n <= 40; ++n) {
        Layout l{{k}, {Placement::shard(0)}, policy};
        checkLayout(l, {n});
        checkLayout(Layout{{k}, {Placement::shard(1)}, policy}, {3, n});
        EXPECT_EQ(slotShape(l, {n})[0], ceilDiv(n, k));
      }
}

TEST(LayoutMath, StridedShardAllSizes) {
  for (int64_t sf = 1; sf <= 4; ++sf)
    for (int64_t k = 1; k <= 8; ++k)
      for (int64_t n = 1; n <= 40; ++n) {
        Layout l{{k}, {Placement::stridedShard(0, sf)}, UnevenPolicy::Ceil};
        if (n % (sf * k) != 0) {
          EXPECT_TRUE(validate(l, {n}).has_value());
          continue;
        }
        checkLayout(l, {n});
      }
}

TEST(LayoutMath, TwoDimensionalMeshes) {
  for (auto policy : {UnevenPolicy::Ceil, UnevenPolicy::Balanced})
    for (int64_t a = 1; a <= 4; ++a)
      for (int64_t b = 1; b <= 4; ++b)
        for (int64_t n = 1; n <= 40; ++n) {
          // HSDP: replicate over a, shard over b.
          checkLayout(Layout{{a, b},
                             {Placement::replicate(), Placement::shard(0)},
                             policy},
                      {n, 2});
          // Two different dims.
          checkLayout(Layout{{a, b},
                             {Placement::shard(0), Placement::shard(1)},
                             policy},
                      {n, 7});
          // Nested axes on one dim: the outer one must divide.
          Layout nested{
              {a, b}, {Placement::shard(0), Placement::shard(0)}, policy};
          if (n % a != 0) {
            EXPECT_TRUE(validate(nested, {n}).has_value());
          } else {
            checkLayout(nested, {n});
          }
          // Strided data-parallel shard outside a tensor-parallel shard.
          for (int64_t sf = 1; sf <= 4; ++sf) {
            Layout tp{{a, b},
                      {Placement::stridedShard(0, sf), Placement::shard(0)},
                      policy};
            if (n % (sf * a) == 0)
              checkLayout(tp, {n});
          }
        }
}

TEST(LayoutMath, StridedShardUnderTensorParallelIsContiguous) {
  // dp = 2 outer (StridedShard sf = tp), tp = 2 inner: rank (i, t) holds
  // block [t, i] of the [tp, dp, m] view.
  Layout l{{2, 2},
           {Placement::stridedShard(0, 2), Placement::shard(0)},
           UnevenPolicy::Ceil};
  LocalShard s = localShard(l, {8}, /*rank (1, 0)=*/2);
  ASSERT_EQ(s.dims[0].ranges.size(), 1u);
  EXPECT_EQ(s.dims[0].ranges[0], (Range{2, 4}));
}

TEST(LayoutMath, ValidationMessages) {
  std::vector<int64_t> shape = {10, 16};
  EXPECT_TRUE(validate(Layout{{4}, {Placement::shard(2)}, {}}, shape));
  EXPECT_TRUE(validate(Layout{{4}, {Placement::shard(0)}, {}}, {}));
  EXPECT_FALSE(validate(Layout{{4}, {Placement::replicate()}, {}}, {}));
  EXPECT_TRUE(validate(Layout{{2, 4}, {Placement::shard(0)}, {}}, shape));
  EXPECT_TRUE(
      validate(Layout{{4}, {Placement::partial(ReduceKind::Sum)}, {}}, shape));
  EXPECT_FALSE(validate(Layout{{4}, {Placement::partial(ReduceKind::Sum)}, {}},
                        shape, false));
  EXPECT_TRUE(
      validate(Layout{{4}, {Placement::stridedShard(0, 2)}, {}}, shape));
  EXPECT_TRUE(validate(Layout{{0}, {Placement::shard(0)}, {}}, shape));
  EXPECT_TRUE(validateMesh({2, -1}).has_value());
}

TEST(LayoutMath, TensorParallelView) {
  // [dp = 2, tp = 2]: StridedShard(0, 2) on dp, Shard(0) on tp.
  Layout l{{2, 2},
           {Placement::stridedShard(0, 2), Placement::shard(0)},
           UnevenPolicy::Ceil};
  EXPECT_EQ(tensorParallelAxes(l), (std::vector<int64_t>{1}));
  EXPECT_EQ(tensorParallelGlobalShape(l, {8, 16}),
            (std::vector<int64_t>{16, 16}));
  Layout dp = dataParallelView(l);
  EXPECT_EQ(dp.placements[0].kind, Placement::Kind::Shard);
  EXPECT_EQ(dp.placements[1].kind, Placement::Kind::TensorParallel);
  EXPECT_TRUE(replicateAxes(dp).empty());
  // The data-parallel shard of the TP-local tensor is the block the full
  // layout gives the rank, shifted by its TP chunk.
  for (int64_t r = 0; r < 4; ++r) {
    LocalShard full = localShard(l, {16, 16}, r);
    LocalShard local = localShard(dp, {8, 16}, r);
    EXPECT_EQ(full.localShape, local.localShape);
    EXPECT_EQ(full.offsets[0] - 8 * full.coords[1], local.offsets[0]);
  }
  // No partner with a matching split factor: not tensor-parallel.
  Layout other{{2, 4},
               {Placement::stridedShard(0, 2), Placement::shard(0)},
               UnevenPolicy::Ceil};
  EXPECT_TRUE(tensorParallelAxes(other).empty());
}

TEST(LayoutMath, TensorParallelPlacements) {
  // [shard<0>, tp_shard<0>] owns what [strided_shard<0, 2>, shard<0>] owns,
  // [shard<0>, tp_shard<1>] what [shard<0>, shard<1>] owns, for every rank
  // and several sizes; tp_replicate what replicate owns.
  for (int64_t dp : {1, 2, 3})
    for (int64_t tp : {1, 2, 4}) {
      std::vector<int64_t> mesh = {dp, tp};
      Layout col{mesh,
                 {Placement::shard(0), Placement::tensorParallel(0)},
                 UnevenPolicy::Ceil};
      Layout strided{mesh,
                     {Placement::stridedShard(0, tp), Placement::shard(0)},
                     UnevenPolicy::Ceil};
      Layout row{mesh,
                 {Placement::shard(0), Placement::tensorParallel(1)},
                 UnevenPolicy::Balanced};
      Layout block{mesh,
                   {Placement::shard(0), Placement::shard(1)},
                   UnevenPolicy::Balanced};
      Layout rep{mesh,
                 {Placement::shard(0), Placement::tensorParallel(-1)},
                 UnevenPolicy::Ceil};
      Layout plain{mesh,
                   {Placement::shard(0), Placement::replicate()},
                   UnevenPolicy::Ceil};
      std::vector<int64_t> shape = {dp * tp * 3, tp * 5};
      ASSERT_FALSE(validate(col, shape)) << dp << "x" << tp;
      ASSERT_FALSE(validate(row, {7, tp * 5}));
      for (int64_t r = 0; r < dp * tp; ++r) {
        EXPECT_EQ(localShard(col, shape, r).dims[0].ranges,
                  localShard(strided, shape, r).dims[0].ranges);
        EXPECT_EQ(localShard(row, {7, tp * 5}, r).offsets,
                  localShard(block, {7, tp * 5}, r).offsets);
        EXPECT_EQ(localShard(row, {7, tp * 5}, r).localShape,
                  localShard(block, {7, tp * 5}, r).localShape);
        EXPECT_EQ(localShard(rep, {7, 3}, r).localShape,
                  localShard(plain, {7, 3}, r).localShape);
      }
      EXPECT_EQ(tensorParallelAxes(col), (std::vector<int64_t>{1}));
      EXPECT_EQ(tensorParallelAxes(rep), (std::vector<int64_t>{1}));
      EXPECT_EQ(tensorParallelGlobalShape(row, {7, 5}),
                (std::vector<int64_t>{7, 5 * tp}));
      EXPECT_EQ(tensorParallelGlobalShape(row, {7, 5}, false),
                (std::vector<int64_t>{7, 5}));
      EXPECT_EQ(tensorParallelGlobalShape(rep, {7, 5}),
                (std::vector<int64_t>{7, 5}));
      // The data-parallel view leaves the tensor-parallel axis alone: a
      // tp_replicate axis is not a data-parallel replica.
      Layout view = dataParallelView(rep);
      EXPECT_TRUE(replicateAxes(view).empty());
      EXPECT_EQ(shardAxes(view), (std::vector<int64_t>{0}));
      EXPECT_EQ(
          slotShape(dataParallelView(row), {7, 5}),
          slotShape(Layout{{dp}, {Placement::shard(0)}, UnevenPolicy::Balanced},
                    {7, 5}));
    }
  Layout col{{2, 2},
             {Placement::shard(0), Placement::tensorParallel(0)},
             UnevenPolicy::Ceil};
  auto err = validate(col, {6, 4});
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("StridedShard(0, 2)"), std::string::npos) << *err;
  err = validate(col, {5, 4});
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("must be divisible by the tensor-parallel axis size 2"),
            std::string::npos)
      << *err;
  err = validate(
      Layout{{2, 2},
             {Placement::tensorParallel(0), Placement::tensorParallel(0)},
             UnevenPolicy::Ceil},
      {8, 4});
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("another tensor-parallel"), std::string::npos) << *err;
  err = validate(Layout{{2, 2, 2},
                        {Placement::shard(0), Placement::shard(0),
                         Placement::tensorParallel(0)},
                        UnevenPolicy::Ceil},
                 {16, 4});
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("at most one data-parallel axis"), std::string::npos)
      << *err;
}

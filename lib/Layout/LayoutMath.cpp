//===- LayoutMath.cpp - Shard layout arithmetic ---------------------------===//

#include "fsdp/Layout/LayoutMath.h"

#include <algorithm>
#include <sstream>

namespace fsdp {
namespace layout {

std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

int64_t ceilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}

int64_t LocalShard::localElements() const { return product(localShape); }
int64_t LocalShard::slotElements() const { return product(slotShape); }

std::vector<int64_t> rankToCoords(const std::vector<int64_t> &meshShape,
                                  int64_t rank) {
  std::vector<int64_t> coords(meshShape.size(), 0);
  for (size_t a = meshShape.size(); a-- > 0;) {
    coords[a] = rank % meshShape[a];
    rank /= meshShape[a];
  }
  return coords;
}

int64_t coordsToRank(const std::vector<int64_t> &meshShape,
                     const std::vector<int64_t> &coords) {
  int64_t rank = 0;
  for (size_t a = 0; a < meshShape.size(); ++a)
    rank = rank * meshShape[a] + coords[a];
  return rank;
}

std::vector<int64_t> groupRanks(const std::vector<int64_t> &meshShape,
                                const std::vector<int64_t> &axes,
                                int64_t rank) {
  std::vector<int64_t> coords = rankToCoords(meshShape, rank);
  int64_t groupSize = 1;
  for (int64_t a : axes)
    groupSize *= meshShape[a];
  std::vector<int64_t> ranks;
  ranks.reserve(groupSize);
  for (int64_t g = 0; g < groupSize; ++g) {
    // Row-major over `axes`: the last listed axis varies fastest.
    int64_t rem = g;
    for (size_t i = axes.size(); i-- > 0;) {
      coords[axes[i]] = rem % meshShape[axes[i]];
      rem /= meshShape[axes[i]];
    }
    ranks.push_back(coordsToRank(meshShape, coords));
  }
  return ranks;
}

int64_t indexInGroup(const std::vector<int64_t> &meshShape,
                     const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> coords = rankToCoords(meshShape, rank);
  int64_t index = 0;
  for (int64_t a : axes)
    index = index * meshShape[a] + coords[a];
  return index;
}

Range splitEven(int64_t n, int64_t k, int64_t i, UnevenPolicy policy) {
  if (policy == UnevenPolicy::Ceil) {
    int64_t c = ceilDiv(n, k);
    int64_t begin = std::min(i * c, n);
    return {begin, std::min(begin + c, n)};
  }
  int64_t b = n / k, r = n % k;
  int64_t begin = i * b + std::min(i, r);
  return {begin, begin + b + (i < r ? 1 : 0)};
}

std::optional<std::string> validateMesh(const std::vector<int64_t> &meshShape) {
  if (meshShape.empty())
    return std::string("a mesh needs at least one axis");
  std::ostringstream os;
  if ((int64_t)meshShape.size() > kMaxMeshAxes) {
    os << "a mesh has at most " << kMaxMeshAxes << " axes, got "
       << meshShape.size();
    return os.str();
  }
  int64_t world = 1;
  for (size_t a = 0; a < meshShape.size(); ++a) {
    if (meshShape[a] <= 0) {
      os << "mesh axis " << a << " has non-positive size " << meshShape[a];
      return os.str();
    }
    std::optional<int64_t> w = checkedMul(world, meshShape[a]);
    if (!w || *w > kMaxWorldSize) {
      os << "a mesh has at most " << kMaxWorldSize << " ranks";
      return os.str();
    }
    world = *w;
  }
  return std::nullopt;
}

std::vector<int64_t> axesShardingDim(const Layout &layout, int64_t dim) {
  std::vector<int64_t> axes;
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].isSharding() && layout.placements[a].dim == dim)
      axes.push_back(a);
  return axes;
}

std::vector<int64_t> shardAxes(const Layout &layout) {
  std::vector<int64_t> axes;
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].isSharding())
      axes.push_back(a);
  return axes;
}

std::vector<int64_t> replicateAxes(const Layout &layout) {
  std::vector<int64_t> axes;
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].kind == Placement::Kind::Replicate)
      axes.push_back(a);
  return axes;
}

std::vector<int64_t> tensorParallelAxes(const Layout &layout) {
  std::vector<int64_t> axes;
  for (size_t a = 0; a < layout.placements.size(); ++a) {
    const Placement &p = layout.placements[a];
    if (p.kind == Placement::Kind::TensorParallel) {
      axes.push_back(a);
      continue;
    }
    if (p.kind != Placement::Kind::Shard)
      continue;
    for (size_t b = 0; b < a; ++b) {
      const Placement &q = layout.placements[b];
      if (q.kind == Placement::Kind::StridedShard && q.dim == p.dim &&
          q.splitFactor == layout.meshShape[a]) {
        axes.push_back(a);
        break;
      }
    }
  }
  return axes;
}

Layout dataParallelView(const Layout &layout) {
  Layout view = layout;
  for (int64_t a : tensorParallelAxes(layout)) {
    int64_t dim = layout.placements[a].dim;
    bool partnered = layout.placements[a].kind == Placement::Kind::Shard;
    view.placements[a] = Placement::tensorParallel(-1);
    if (!partnered)
      continue;
    for (int64_t b = 0; b < a; ++b)
      if (view.placements[b].kind == Placement::Kind::StridedShard &&
          view.placements[b].dim == dim)
        view.placements[b] = Placement::shard(dim);
  }
  return view;
}

Layout ownershipView(const Layout &layout) {
  Layout view = layout;
  for (size_t a = 0; a < view.placements.size(); ++a) {
    const Placement p = view.placements[a];
    if (p.kind != Placement::Kind::TensorParallel)
      continue;
    if (p.dim < 0) {
      view.placements[a] = Placement::replicate();
      continue;
    }
    for (size_t b = 0; b < a; ++b)
      if (view.placements[b].kind == Placement::Kind::Shard &&
          view.placements[b].dim == p.dim)
        view.placements[b] = Placement::stridedShard(
            p.dim, view.meshShape.size() > a ? view.meshShape[a] : 1);
    view.placements[a] = Placement::shard(p.dim);
  }
  return view;
}

std::vector<int64_t> tensorParallelGlobalShape(const Layout &layout,
                                               std::vector<int64_t> shape) {
  return tensorParallelGlobalShape(layout, std::move(shape), true);
}

std::vector<int64_t>
tensorParallelGlobalShape(const Layout &layout, std::vector<int64_t> shape,
                          bool withTensorParallelPlacements) {
  for (int64_t a : tensorParallelAxes(layout)) {
    const Placement &p = layout.placements[a];
    if (p.kind == Placement::Kind::TensorParallel &&
        !withTensorParallelPlacements)
      continue;
    int64_t d = p.dim;
    if (d >= 0 && d < (int64_t)shape.size() &&
        a < (int64_t)layout.meshShape.size())
      shape[d] *= layout.meshShape[a];
  }
  return shape;
}

namespace {
/// One placement per mesh axis; anything else is ambiguous.
std::optional<std::string> checkPlacementCount(const Layout &layout) {
  if (layout.placements.size() == layout.meshShape.size())
    return std::nullopt;
  std::ostringstream os;
  os << "layout has " << layout.placements.size()
     << " placement(s) but its mesh has " << layout.meshShape.size()
     << " axis/axes; give exactly one placement per mesh axis";
  return os.str();
}

/// Checks the placement on mesh axis `a` on its own: Partial only off
/// parameters, and a sharding placement names a dim of the tensor and a
/// bounded split factor.
std::optional<std::string> checkPlacement(const Placement &p, size_t a,
                                          int64_t rank, bool isParameter) {
  std::ostringstream os;
  if (p.kind == Placement::Kind::Partial && isParameter) {
    os << "Partial placement on mesh axis " << a
       << " is not allowed on a parameter (only gradients are partial)";
    return os.str();
  }
  if (!p.isSharding())
    return std::nullopt;
  if (rank == 0) {
    os << "a scalar (rank-0) tensor cannot be sharded (mesh axis " << a << ")";
    return os.str();
  }
  if (p.dim < 0 || p.dim >= rank) {
    os << "shard dim " << p.dim << " on mesh axis " << a
       << " is out of range for a rank-" << rank << " tensor";
    return os.str();
  }
  if (p.kind == Placement::Kind::StridedShard &&
      (p.splitFactor < 1 || p.splitFactor > kMaxSplitFactor)) {
    os << "StridedShard split factor must be between 1 and " << kMaxSplitFactor
       << ", got " << p.splitFactor;
    return os.str();
  }
  return std::nullopt;
}

/// Walks dim `d` (of size `len`) through its nested sharding axes, outer
/// first. Every level but the innermost must split evenly so that the slot,
/// and thus the collective's size, is the same in every group.
std::optional<std::string> checkNestedSplits(const Layout &layout, int64_t d,
                                             int64_t len) {
  std::vector<int64_t> axes = axesShardingDim(layout, d);
  std::ostringstream os;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Placement &p = layout.placements[axes[i]];
    int64_t k = layout.meshShape[axes[i]];
    if (p.kind == Placement::Kind::StridedShard) {
      // Both are bounded (kMaxSplitFactor, kMaxWorldSize): no overflow.
      if (len % (p.splitFactor * k) != 0) {
        os << "StridedShard(" << d << ", " << p.splitFactor << ") on mesh axis "
           << axes[i] << " needs dim " << d << " (size " << len
           << ") to be divisible by split_factor * "
           << "axis size = " << p.splitFactor * k;
        return os.str();
      }
      len /= k;
      continue;
    }
    bool innermost = i + 1 == axes.size();
    if (!innermost && len % k != 0) {
      os << "dim " << d << " (size " << len
         << ") is sharded by nested mesh axes; the outer axis " << axes[i]
         << " (size " << k << ") must divide it evenly";
      return os.str();
    }
    len = innermost ? len : len / k;
  }
  return std::nullopt;
}
/// Tensor-parallel placements: an in-range dim that the axis splits evenly,
/// at most one tensor-parallel axis and one data-parallel axis ahead of it
/// per dim.
std::optional<std::string>
checkTensorParallel(const Layout &layout,
                    const std::vector<int64_t> &globalShape) {
  int64_t rank = globalShape.size();
  std::ostringstream os;
  for (size_t a = 0; a < layout.placements.size(); ++a) {
    const Placement &p = layout.placements[a];
    if (p.kind != Placement::Kind::TensorParallel || p.dim < 0)
      continue;
    if (p.dim >= rank) {
      os << "tp_shard dim " << p.dim << " on mesh axis " << a
         << " is out of range for a rank-" << rank << " tensor";
      return os.str();
    }
    int64_t k = layout.meshShape[a];
    if (globalShape[p.dim] % k != 0) {
      os << "tp_shard<" << p.dim << "> on mesh axis " << a << ": dim " << p.dim
         << " (size " << globalShape[p.dim]
         << ") must be divisible by the tensor-parallel axis size " << k;
      return os.str();
    }
    int64_t ahead = 0;
    for (size_t b = 0; b < layout.placements.size(); ++b) {
      const Placement &q = layout.placements[b];
      if (b != a && q.dim == p.dim &&
          (q.kind == Placement::Kind::TensorParallel ||
           q.kind == Placement::Kind::StridedShard)) {
        os << "dim " << p.dim << " has tp_shard on mesh axis " << a
           << " and another tensor-parallel or strided placement on mesh "
              "axis "
           << b;
        return os.str();
      }
      if (b < a && q.kind == Placement::Kind::Shard && q.dim == p.dim)
        ++ahead;
    }
    if (ahead > 1) {
      os << "tp_shard<" << p.dim << "> on mesh axis " << a
         << ": at most one data-parallel axis ahead of it may shard dim "
         << p.dim;
      return os.str();
    }
  }
  return std::nullopt;
}
} // namespace

std::optional<std::string> validate(const Layout &layout,
                                    const std::vector<int64_t> &globalShape,
                                    bool isParameter) {
  if (auto err = validateMesh(layout.meshShape))
    return err;
  if (auto err = checkPlacementCount(layout))
    return err;
  int64_t rank = globalShape.size();
  if (auto err = checkTensorParallel(layout, globalShape))
    return err;
  Layout owned = ownershipView(layout);
  // Each placement on its own first, so that the nested walk below only
  // sees in-range dims and bounded split factors.
  for (size_t a = 0; a < owned.placements.size(); ++a)
    if (auto err = checkPlacement(owned.placements[a], a, rank, isParameter))
      return err;
  for (int64_t d = 0; d < rank; ++d)
    if (auto err = checkNestedSplits(owned, d, globalShape[d]))
      return err;
  return std::nullopt;
}

namespace {
/// Take indices [begin, end) of the local sequence described by `ranges`.
std::vector<Range> sliceRanges(const std::vector<Range> &ranges, int64_t begin,
                               int64_t end) {
  std::vector<Range> out;
  int64_t pos = 0;
  for (const Range &r : ranges) {
    int64_t lo = std::max(begin, pos), hi = std::min(end, pos + r.size());
    if (lo < hi)
      out.push_back({r.begin + (lo - pos), r.begin + (hi - pos)});
    pos += r.size();
  }
  return out;
}

/// Global index at local position `pos` of `ranges`; positions at the end
/// map just past the last owned index, so an empty shard has a position.
int64_t globalIndexAt(const std::vector<Range> &ranges, int64_t pos,
                      int64_t fallback) {
  for (const Range &r : ranges) {
    if (pos < r.size())
      return r.begin + pos;
    pos -= r.size();
  }
  return ranges.empty() ? fallback : ranges.back().end;
}

/// Applies the placements of the axes sharding one dim, given the rank's
/// coordinate on each of them.
DimShard shardDim(const Layout &layout, int64_t n,
                  const std::vector<int64_t> &axes,
                  const std::vector<int64_t> &coordOnAxis) {
  DimShard ds;
  ds.ranges = {{0, n}};
  int64_t len = n, slot = n, anchor = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Placement &p = layout.placements[axes[i]];
    int64_t k = layout.meshShape[axes[i]], c = coordOnAxis[i];
    if (p.kind == Placement::Kind::StridedShard) {
      int64_t m = len / (p.splitFactor * k);
      std::vector<Range> next;
      for (int64_t s = 0; s < p.splitFactor; ++s) {
        auto piece =
            sliceRanges(ds.ranges, (s * k + c) * m, (s * k + c + 1) * m);
        next.insert(next.end(), piece.begin(), piece.end());
      }
      ds.ranges = std::move(next);
      len = m * p.splitFactor;
      slot = len;
      continue;
    }
    Range part = splitEven(len, k, c, layout.policy);
    anchor = globalIndexAt(ds.ranges, part.begin, anchor);
    ds.ranges = sliceRanges(ds.ranges, part.begin, part.end);
    slot = ceilDiv(len, k);
    len = part.size();
  }
  // Merge adjacent ranges so that contiguous ownership reads as one range.
  std::vector<Range> merged;
  for (const Range &r : ds.ranges) {
    if (!merged.empty() && merged.back().end == r.begin)
      merged.back().end = r.end;
    else
      merged.push_back(r);
  }
  ds.ranges = std::move(merged);
  ds.offset = ds.ranges.empty() ? anchor : ds.ranges.front().begin;
  ds.localSize = len;
  ds.slotSize = slot;
  return ds;
}
} // namespace

LocalShard localShard(const Layout &tensorParallelLayout,
                      const std::vector<int64_t> &globalShape, int64_t rank) {
  Layout layout = ownershipView(tensorParallelLayout);
  LocalShard ls;
  ls.coords = rankToCoords(layout.meshShape, rank);
  for (size_t d = 0; d < globalShape.size(); ++d) {
    std::vector<int64_t> axes = axesShardingDim(layout, d);
    std::vector<int64_t> coordOnAxis;
    for (int64_t a : axes)
      coordOnAxis.push_back(ls.coords[a]);
    DimShard ds = shardDim(layout, globalShape[d], axes, coordOnAxis);
    ls.localShape.push_back(ds.localSize);
    ls.slotShape.push_back(ds.slotSize);
    ls.offsets.push_back(ds.offset);
    ls.dims.push_back(std::move(ds));
  }
  return ls;
}

std::vector<int64_t> slotShape(const Layout &layout,
                               const std::vector<int64_t> &globalShape) {
  return localShard(layout, globalShape, 0).slotShape;
}

std::vector<DimShard> slotsAlongDim(const Layout &tensorParallelLayout,
                                    const std::vector<int64_t> &globalShape,
                                    int64_t dim) {
  Layout layout = ownershipView(tensorParallelLayout);
  std::vector<int64_t> axes = axesShardingDim(layout, dim);
  std::vector<int64_t> groupShape;
  for (int64_t a : axes)
    groupShape.push_back(layout.meshShape[a]);
  int64_t k = product(groupShape);
  std::vector<DimShard> slots;
  for (int64_t j = 0; j < k; ++j)
    slots.push_back(
        shardDim(layout, globalShape[dim], axes, rankToCoords(groupShape, j)));
  return slots;
}

} // namespace layout
} // namespace fsdp

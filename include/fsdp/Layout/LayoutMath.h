//===- LayoutMath.h - Shard layout arithmetic without MLIR ------*- C++ -*-===//
//
// The exact meaning of a layout (docs/SEMANTICS.md §3): which global elements
// every rank of a device mesh owns, the padded slot used for communication, and
// the validity rules. Shared by the compiler passes, the runner and the tests;
// it depends on nothing but the C++ standard library.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LAYOUT_LAYOUTMATH_H
#define FSDP_LAYOUT_LAYOUTMATH_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp {
namespace layout {

enum class UnevenPolicy {
  /// PyTorch FSDP2: chunk c = ceil(n/k); trailing ranks may hold fewer rows.
  Ceil,
  /// The HSDP port: the first n%k ranks hold one extra row.
  Balanced,
};

enum class ReduceKind { Sum, Avg, Max, Min };

struct Placement {
  /// TensorParallel is a tensor-parallel axis (`tp_shard<dim>`, or
  /// `tp_replicate` with dim -1): rank t of the axis holds the t-th equal
  /// part of `dim` (split before any data-parallel axis splits it), or the
  /// whole tensor. dataParallelView() marks every tensor-parallel axis with
  /// it and dim -1: an axis that the data-parallel collectives leave alone.
  enum class Kind { Replicate, Shard, StridedShard, Partial, TensorParallel };
  Kind kind = Kind::Replicate;
  int64_t dim = 0;
  int64_t splitFactor = 1;
  ReduceKind reduce = ReduceKind::Sum;

  static Placement replicate() { return {}; }
  static Placement shard(int64_t d) { return {Kind::Shard, d, 1}; }
  static Placement stridedShard(int64_t d, int64_t sf) {
    return {Kind::StridedShard, d, sf};
  }
  static Placement tensorParallel(int64_t d) {
    return {Kind::TensorParallel, d, 1};
  }
  static Placement partial(ReduceKind r) {
    Placement p;
    p.kind = Kind::Partial;
    p.reduce = r;
    return p;
  }
  bool isSharding() const {
    return kind == Kind::Shard || kind == Kind::StridedShard;
  }
};

/// A mesh plus one placement per mesh axis.
struct Layout {
  std::vector<int64_t> meshShape;
  std::vector<Placement> placements;
  UnevenPolicy policy = UnevenPolicy::Ceil;
};

/// A half-open interval [begin, end) of global indices along one dim.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range &o) const {
    return begin == o.begin && end == o.end;
  }
};

/// What one rank owns along one tensor dim.
struct DimShard {
  /// Owned global ranges in local order (one range, or several for
  /// StridedShard).
  std::vector<Range> ranges;
  /// Number of owned indices (sum of the range sizes).
  int64_t localSize = 0;
  /// Padded size used for communication (same on every rank).
  int64_t slotSize = 0;
  /// Global index of the first owned element; for an empty shard, where it
  /// would start.
  int64_t offset = 0;
};

/// One rank's shard of a tensor.
struct LocalShard {
  std::vector<int64_t> coords;     // mesh coordinates of the rank
  std::vector<int64_t> localShape; // true (unpadded) local shape
  std::vector<int64_t> slotShape;  // padded shape, identical on all ranks
  std::vector<int64_t> offsets;    // global offset of the first owned index
  std::vector<DimShard> dims;
  int64_t localElements() const;
  int64_t slotElements() const;
};

/// Limits every layout rule checks (docs/PASSES.md, "Limits"). They keep
/// every size, offset and per-rank loop of the compiler and the runner
/// bounded; the runtime itself supports at most 8 mesh axes.
constexpr int64_t kMaxMeshAxes = 8;
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;
constexpr int64_t kMaxSplitFactor = int64_t(1) << 20;

/// a * b, or nullopt if it does not fit int64_t.
std::optional<int64_t> checkedMul(int64_t a, int64_t b);

int64_t ceilDiv(int64_t a, int64_t b);
int64_t product(const std::vector<int64_t> &v);

/// Mesh coordinates of `rank` (row-major, last axis fastest).
std::vector<int64_t> rankToCoords(const std::vector<int64_t> &meshShape,
                                  int64_t rank);
int64_t coordsToRank(const std::vector<int64_t> &meshShape,
                     const std::vector<int64_t> &coords);

/// The group of `rank` over the mesh axes in `axes` (ascending): the ranks
/// that differ from `rank` only in those axes, ordered row-major over them.
std::vector<int64_t> groupRanks(const std::vector<int64_t> &meshShape,
                                const std::vector<int64_t> &axes, int64_t rank);
/// Position of `rank` inside its group over `axes`.
int64_t indexInGroup(const std::vector<int64_t> &meshShape,
                     const std::vector<int64_t> &axes, int64_t rank);

/// 1-D split of n indices over k ranks: the [offset, offset+size) of part i.
Range splitEven(int64_t n, int64_t k, int64_t i, UnevenPolicy policy);

/// Checks the layout rules of docs/SEMANTICS.md §3 for a parameter of
/// `globalShape`. Returns a human-readable message for the first violated rule.
std::optional<std::string> validate(const Layout &layout,
                                    const std::vector<int64_t> &globalShape,
                                    bool isParameter = true);
/// Checks a mesh: 1 to kMaxMeshAxes axes, positive sizes, at most
/// kMaxWorldSize ranks.
std::optional<std::string> validateMesh(const std::vector<int64_t> &meshShape);

/// Mesh axes that shard `dim`, outermost first.
std::vector<int64_t> axesShardingDim(const Layout &layout, int64_t dim);
/// Mesh axes carrying any Shard/StridedShard placement (ascending).
std::vector<int64_t> shardAxes(const Layout &layout);
/// Mesh axes carrying Replicate placements (ascending).
std::vector<int64_t> replicateAxes(const Layout &layout);

/// Tensor-parallel axes: an axis with a TensorParallel placement
/// (`tp_shard<d>`, `tp_replicate`), or an axis with Shard(d) where an
/// earlier axis holds StridedShard(d, sf) with sf equal to this axis's size
/// (DTensor's FSDP-over-TP layout). A parameter argument then has the
/// TP-local shape.
std::vector<int64_t> tensorParallelAxes(const Layout &layout);

/// The same ownership without TensorParallel placements: `tp_shard<d>` on
/// axis a becomes Shard(d), an earlier Shard(d) its StridedShard(d, k_a)
/// partner (the tensor-parallel split is the outer one), `tp_replicate`
/// Replicate. localShard() and validate() see layouts through it.
Layout ownershipView(const Layout &layout);

/// The data-parallel part of a layout, over the TP-local tensor: each
/// tensor-parallel axis becomes Kind::TensorParallel and its StridedShard
/// partner a plain Shard. Without tensor-parallel axes, the layout itself.
Layout dataParallelView(const Layout &layout);

/// The global shape of a TP-local `localShape` (dims sharded by
/// tensor-parallel axes multiplied by their sizes). Without
/// `withTensorParallelPlacements`, only the StridedShard-partner axes count
/// (a function that fsdp-tensor-parallel has not made TP-local yet has
/// global types under `tp_shard<d>`).
std::vector<int64_t> tensorParallelGlobalShape(const Layout &layout,
                                               std::vector<int64_t> localShape);
std::vector<int64_t>
tensorParallelGlobalShape(const Layout &layout, std::vector<int64_t> localShape,
                          bool withTensorParallelPlacements);

/// What one rank holds. `layout` must be valid for `globalShape`.
LocalShard localShard(const Layout &layout,
                      const std::vector<int64_t> &globalShape, int64_t rank);

/// Padded slot shape (identical on every rank).
std::vector<int64_t> slotShape(const Layout &layout,
                               const std::vector<int64_t> &globalShape);

/// For a dim sharded over a group of size k (the axes sharding it, combined
/// row-major): the true ranges of every slot j in group order. Used to unpack
/// a gathered [k, slot...] buffer and to pack a gradient for reduce-scatter.
std::vector<DimShard> slotsAlongDim(const Layout &layout,
                                    const std::vector<int64_t> &globalShape,
                                    int64_t dim);

} // namespace layout
} // namespace fsdp

#endif // FSDP_LAYOUT_LAYOUTMATH_H

//===- KernelLowering.h - one linalg op's GPU kernel -------------*- C++
//-*-===//
//
// The kernel fsdp-gpu-kernels (GpuKernels.cpp) writes for one linalg op on
// buffers: how its loops map to threads (KernelLowering.cpp), the launches
// and the mappings without a split (KernelLaunches.cpp), and the reductions
// split over blocks in two launches (KernelSplitReductions.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_GPU_KERNELLOWERING_H
#define FSDP_GPU_KERNELLOWERING_H

#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <tuple>
#include <utility>

namespace mlir::fsdp::gpukernels {

constexpr int64_t kWarpSize = 32;
// Resident threads per multiprocessor (every NVIDIA GPU since Volta but
// Turing): a split reduction aims at one full wave of blocks.
constexpr int64_t kThreadsPerSM = 2048;
// The least work of a split: a warp's segment of a row (8 elements per
// lane), a chunk of rows of a column reduction.
constexpr int64_t kMinSegment = 256;
constexpr int64_t kMinChunkRows = 8;
// How much faster a load that hits L2 completes than one from device memory
// (about 0.2 us against 0.5 us on H100 and H200): what a split reduction's
// pass 2, reading partials that pass 1 just wrote, saves per round.
constexpr double kL2LatencyRatio = 2.5;
// Elements a reduction loop loads before it combines them (loads in flight
// per thread).
constexpr int64_t kReductionUnroll = 4;
// Elements an elementwise kernel's thread loads before it stores them.
constexpr int64_t kElementwiseUnroll = 4;
/// The runtime's per-rank device scratch buffer, and the alignment of each
/// output's partials in it.
constexpr int64_t kScratchAlignment = 256;
/// What the runtime's device allocations (fsdprt_gpu_alloc, the arena, the
/// scratch buffer: cudaMallocAsync) are aligned to.
constexpr int64_t kRuntimeAlignment = 256;
/// What a compute=gpu step's buffer arguments must be aligned to (the
/// runners allocate each with fsdprt_gpu_alloc: 256 bytes).
constexpr int64_t kArgumentAlignment = 16;
/// The most alignment BufferAlignment tracks.
constexpr int64_t kKnownAlignment = 256;
/// The widest access of a vectorized elementwise kernel (ld.global.v4.b32).
constexpr int64_t kVectorBytes = 16;

/// The byte alignment of buffers' bases (aligned pointers, before their
/// layout's static offset) in the step's code (KernelAlignment.cpp):
/// arena views at constant offsets, runtime allocations, the step's
/// arguments, views of those, and a private function's argument as every
/// call passes it. 1 where unknown.
class BufferAlignment {
public:
  explicit BufferAlignment(ModuleOp module);
  int64_t of(Value buffer);

private:
  int64_t compute(Value buffer);
  llvm::DenseMap<Attribute, SmallVector<func::CallOp>> callers;
  llvm::DenseMap<Value, int64_t> known;
};

inline Value constIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

inline int64_t product(ArrayRef<int64_t> sizes) {
  int64_t p = 1;
  for (int64_t s : sizes)
    p *= s;
  return p;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// On the `scf.index_switch` of a multi-tensor launch
/// (KernelMultiTensor.cpp): each part's blocks and threads per block, in
/// case order (the cost model costs each part as its own launch's work).
constexpr llvm::StringLiteral kMultiTensorPartsAttrName =
    "fsdp.multi_tensor_parts";

/// Merges the launches of a multi-tensor kernel function's parts (`parts`:
/// each op's launches, in order): the i-th launches of every part become
/// one launch, in which each part runs on blocks of its own with its own
/// block index, grid and block size; the parts' split reductions share one
/// scratch request. `report` adds a remark per merged launch.
LogicalResult mergeMultiTensorLaunches(
    func::FuncOp func, ArrayRef<SmallVector<gpu::LaunchOp>> parts, bool report);

/// The indices of the flat row-major index `flat` over `sizes` (the last
/// index fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value flat,
                               ArrayRef<int64_t> sizes);

/// The value of lane (lane ^ offset) of the warp, for any scalar of at most
/// 64 bits.
Value shuffleXor(OpBuilder &b, Location loc, Value v, int32_t offset);

enum class Mapping {
  Elementwise,
  WarpReduction,
  ThreadReduction,
  SplitRowReduction,
  SplitColumnReduction,
  Serial
};

/// How a vectorized elementwise kernel reads each operand of a chunk of
/// `width` consecutive elements: one aligned vector access, one load for
/// the whole chunk (the operand does not depend on the last loop), one
/// load per element (a value per row of rows that chunks cross), or not at
/// all (a scalar operand).
enum class ChunkAccess { Vector, Invariant, PerElement, Scalar };

struct VectorPlan {
  /// Elements per chunk (0: not vectorized).
  int64_t width = 0;
  /// Chunks may cross rows (the last loop's size is not a multiple of
  /// `width`): vector operands are contiguous and read as one flat range.
  bool flat = false;
  /// Per operand, in operand order.
  SmallVector<ChunkAccess> access;
};

/// What shapes the launches: the pass options.
struct LaunchLimits {
  int64_t blockSize, maxBlocks, smCount, splitMinElements;
};

/// How a split reduction divides its reduction range: `splits` contiguous
/// pieces of `length` elements (the last one shorter) per output element,
/// pass 1 on `blocks` blocks.
struct Split {
  int64_t splits = 0, length = 0, blocks = 0;
};

/// One linalg op's kernel: its loops, how they map to threads, and the
/// fill folded into it.
class KernelLowering {
public:
  /// `alignment` (optional): what the operands' bases are aligned to; an
  /// elementwise op is vectorized where it allows.
  KernelLowering(linalg::LinalgOp op, const LaunchLimits &limits,
                 BufferAlignment *alignment = nullptr)
      : op(op), loc(op.getLoc()), blockSize(limits.blockSize),
        maxBlocks(limits.maxBlocks), limits(limits) {
    ranges = op.getStaticLoopRanges();
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      (it == utils::IteratorType::parallel ? par : red).push_back(d);
    for (unsigned d : par)
      parSizes.push_back(ranges[d]);
    for (unsigned d : red)
      redSizes.push_back(ranges[d]);
    mapping = choose();
    if (mapping == Mapping::Elementwise && alignment)
      planVector(*alignment);
  }

  Mapping getMapping() const { return mapping; }
  /// Elements per thread access of a vectorized elementwise kernel, 0 if
  /// it is not vectorized.
  int64_t getVectorWidth() const { return vector.width; }

  /// The mapping in words, for the report.
  std::string describe() const;

  /// Folds `fill` (which writes one of the op's outputs right before it):
  /// that output starts from the fill's value instead of a load. Only where
  /// every output element is written exactly once.
  bool foldFill(linalg::FillOp fill);

  void lower();

  /// The byte offset in the scratch buffer from which this op's split
  /// reduction takes its partials (0; the parts of a multi-tensor launch run
  /// at once and take disjoint ranges), and the end of what it took.
  void setScratchBase(int64_t bytes) { scratchBase = scratchEnd = bytes; }
  int64_t getScratchEnd() const { return scratchEnd; }

  /// The launches lower() created, in order.
  ArrayRef<gpu::LaunchOp> getLaunches() const { return launches; }

private:
  // The mapping (KernelLowering.cpp).
  Mapping choose();

  /// Whether the reduction (every output `acc <op> x`) is split over blocks,
  /// and how (`split`): when it has at least `split-min-elements` elements
  /// and one warp (rows innermost) or one thread (other reductions) per
  /// output element would launch fewer blocks than the device has
  /// multiprocessors. Pass 1 then aims at one full wave of blocks
  /// (sm-count x 2048 / block-size), each warp or thread doing at least
  /// kMinSegment elements or kMinChunkRows rows.
  bool chooseSplit(bool rows);

  // Launches and the mappings without a split (KernelLaunches.cpp).
  /// A launch of `blocks` blocks of `threads` threads; `body` fills it at
  /// (block id, thread id, number of blocks).
  void launch(OpBuilder &b, int64_t blocks, int64_t threads,
              llvm::function_ref<void(OpBuilder &, Value, Value, Value)> body);

  /// `for (i = start; i < end; i += step) body(i)`.
  void stride(OpBuilder &b, Value start, Value step, int64_t end,
              llvm::function_ref<void(OpBuilder &, Value)> body);

  /// The launch of one grid-stride loop over `total` work items, each
  /// `width` threads wide (1: a thread, 32: a warp); `body` gets the item
  /// and the thread's lane in it.
  void gridStride(OpBuilder &b, int64_t total, int64_t width,
                  llvm::function_ref<void(OpBuilder &, Value, Value)> body);

  /// Loop indices from the parallel ones `pivs` and the reduction ones
  /// `rivs` (zeros when empty).
  SmallVector<Value> merge(OpBuilder &b, ValueRange pivs, ValueRange rivs);

  /// The outputs' values before the op at `ivs`: a folded fill's value, a
  /// load, or (for an output the body never reads) a zero.
  SmallVector<Value> initialValues(OpBuilder &b, ValueRange ivs, bool needed);

  void store(OpBuilder &b, ValueRange values, ValueRange ivs);

  void elementwise(OpBuilder &b);

  /// Blocks and threads per block for `items` work items, one per thread:
  /// at most a block of `blockSize`, whole warps, at most one wave.
  std::pair<int64_t, int64_t> oneWaveGrid(int64_t items) const;

  /// i + k x step (i itself for k = 0).
  Value stridedIndex(OpBuilder &b, Value i, Value step, int64_t k);

  /// Thread (bid, tid) of a launch of `threads`-thread blocks takes the
  /// items start = bid x threads + tid, start + step, ... below `items`
  /// (step: the grid's threads): kElementwiseUnroll of them a grid apart
  /// per iteration while whole groups last, then one at a time.
  /// `group(b, i, step, count)` emits items i, ..., i + (count - 1) x step.
  /// Returns {start, step}.
  std::pair<Value, Value> unrolledGridStride(
      OpBuilder &kb, Value bid, Value tid, Value nblocks, int64_t threads,
      int64_t items,
      llvm::function_ref<void(OpBuilder &, Value, Value, int64_t)> group);

  /// The elements i, i + step, ..., i + (count - 1) x step: all loaded and
  /// computed, then stored.
  void elementGroup(OpBuilder &b, Value i, Value step, int64_t count);

  // The vectorized elementwise mapping (KernelVectorized.cpp).
  /// Whether every operand allows chunks of 16 bytes of the widest element
  /// type (`vector`): contiguous along the last loop with aligned chunks,
  /// or independent of it.
  void planVector(BufferAlignment &alignment);

  /// One thread per chunk of `vector.width` elements, grid-stride,
  /// kElementwiseUnroll chunks a grid apart per iteration, then the rest
  /// of the chunks, then the elements past the last whole chunk one at a
  /// time.
  void vectorElementwise(OpBuilder &b);

  /// The chunks c, c + step, ..., c + (count - 1) x step: all loaded and
  /// computed, then stored. `views`: each vector operand as it is indexed
  /// (flat: a 1-D view).
  void chunkGroup(OpBuilder &b, ArrayRef<Value> views, Value c, Value step,
                  int64_t count);

  /// The reduction loops at the parallel indices `pivs` from `accs`.
  SmallVector<Value> reductionLoops(OpBuilder &b, ValueRange pivs,
                                    ValueRange accs);

  void threadReduction(OpBuilder &b);

  /// `acc <combiner> x` in the body's operand order.
  Value combineLike(OpBuilder &b, unsigned o, Value acc, Value x);

  /// Lane l combines the row's elements l, l + 32, ... from the identity,
  /// then the warp combines the lanes' partials and the output's initial
  /// value.
  void warpReduction(OpBuilder &b);

  SmallVector<Value> identities(OpBuilder &b);

  /// `for (i = start; i < end; i += step)` combining `values(i)` into
  /// accumulators that start at the combiners' identities; `elementFirst`
  /// keeps the body's operand order (an element of the op), otherwise the
  /// accumulator comes first (a partial).
  SmallVector<Value>
  accumulate(OpBuilder &b, Value start, Value end, int64_t step,
             bool elementFirst,
             llvm::function_ref<SmallVector<Value>(OpBuilder &, Value)> values);

  /// What each combiner combines into its output at the parallel indices
  /// `pivs` and the flat reduction index `r`.
  SmallVector<Value> elementsAt(OpBuilder &b, ValueRange pivs, Value r);

  /// The warp's lanes' `partials` combined by halves with `gpu.shuffle xor`
  /// 16, 8, 4, 2, 1: every lane ends with the total.
  SmallVector<Value> butterfly(OpBuilder &b, ValueRange partials);

  /// A builder inside `if (lane == 0)`.
  OpBuilder firstLane(OpBuilder &b, Value lane);

  /// The warp's lanes' `partials` combined (butterfly); lane 0 combines the
  /// output's initial value at `pivs` with the total and stores.
  void warpCombineAndStore(OpBuilder &b, ValueRange pivs, Value lane,
                           ValueRange partials);

  void serial(OpBuilder &b);

  // The split reductions (KernelSplitReductions.cpp).
  /// The partial results of a split reduction: `count` elements per output,
  /// views of the rank's device scratch buffer (`fsdprt_gpu_scratch`,
  /// allocated on its first request and reused by every later one, so a
  /// step allocates nothing for them). Every split reduction of a step
  /// reuses it from offset 0 (from its scratch base in a multi-tensor
  /// launch): their two passes run in stream order on the compute stream,
  /// one reduction's second pass before the next one's first.
  SmallVector<Value> allocPartials(OpBuilder &b, int64_t count);

  /// `fsdprt_gpu_scratch(bytes)` as a `memref<bytes x i8>` (a descriptor of
  /// the returned pointer, which the LLVM lowering folds away).
  Value scratchBuffer(OpBuilder &b, int64_t bytes);

  /// Pass 2 of a split reduction: one warp per output element combines its
  /// `count` partials (partials[output][0, count), contiguous, read by the
  /// lanes in strides of 32) in a fixed order, then the output's initial
  /// value.
  void combinePartials(OpBuilder &b, ValueRange partials, int64_t count);

  /// Rows split over warps: pass 1 gives each (output element, segment)
  /// pair a warp, which reduces its contiguous segment of the row (lanes
  /// striding by 32, then shuffles) into partials[output][segment]; a
  /// block's warps take consecutive segments, so each block reduces a
  /// contiguous chunk of the row. Pass 2: combinePartials.
  void splitRowReduction(OpBuilder &b);

  /// Rows of a column reduction split into chunks: pass 1 gives each
  /// (chunk, output element) pair a thread (consecutive threads take
  /// consecutive output elements, so a warp reads consecutive columns),
  /// which reduces the chunk's rows in order into partials[output][chunk].
  /// Pass 2: combinePartials (whose reads are then contiguous).
  void splitColumnReduction(OpBuilder &b);

  linalg::LinalgOp op;
  Location loc;
  int64_t blockSize, maxBlocks;
  LaunchLimits limits;
  Split split;
  SmallVector<int64_t> ranges, parSizes, redSizes;
  SmallVector<unsigned> par, red;
  SmallVector<Operation *> combiners;
  llvm::DenseMap<unsigned, Value> fillValues;
  Mapping mapping;
  VectorPlan vector;
  SmallVector<int64_t> vectorAlign;
  int64_t scratchBase = 0, scratchEnd = 0;
  SmallVector<gpu::LaunchOp> launches;
};
} // namespace mlir::fsdp::gpukernels

#endif // FSDP_GPU_KERNELLOWERING_H

//===- KernelLowering.cpp - how a linalg op's loops map to GPU threads ----===//
//
// The mapping fsdp-gpu-kernels chooses for one linalg op on buffers
// (elementwise, a warp or a thread per output element, a reduction split
// over blocks, one thread), the fill it folds in, and its lowering
// (GpuKernels.cpp describes the mappings).
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/Compute/LinalgLoops.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

/// The mapping in words, for the report.
std::string KernelLowering::describe() const {
  switch (mapping) {
  case Mapping::Elementwise:
    if (vector.width)
      return llvm::formatv("elementwise, {0} consecutive elements per thread "
                           "access ({1}-byte vector loads and stores)",
                           vector.width, *llvm::max_element(vectorAlign))
          .str();
    return "elementwise, one thread per element";
  case Mapping::WarpReduction:
    return "row reduction, one warp per output element";
  case Mapping::ThreadReduction:
    return "reduction, one thread per output element";
  case Mapping::SplitRowReduction:
    return llvm::formatv("row reduction split over {0} blocks ({1} warp "
                         "partials of {2} elements per output element), "
                         "then one warp per output element",
                         split.blocks, split.splits, split.length)
        .str();
  case Mapping::SplitColumnReduction:
    return llvm::formatv("column reduction split over {0} blocks ({1} "
                         "chunks of {2} rows), then one warp per output "
                         "element",
                         split.blocks, split.splits, split.length)
        .str();
  case Mapping::Serial:
    return "one thread (an output is indexed by a reduction loop)";
  }
  llvm_unreachable("mapping");
}

/// Folds `fill` (which writes one of the op's outputs right before it):
/// that output starts from the fill's value instead of a load. Only where
/// every output element is written exactly once.
bool KernelLowering::foldFill(linalg::FillOp fill) {
  if (mapping == Mapping::Serial)
    return false;
  Value buffer = fill.getOutputs()[0];
  if (llvm::is_contained(op.getDpsInputs(), buffer))
    return false;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (init.get() == buffer && !fillValues.count(init.getOperandNumber())) {
      fillValues[init.getOperandNumber()] = fill.getInputs()[0];
      return true;
    }
  return false;
}

void KernelLowering::lower() {
  OpBuilder b(op);
  switch (mapping) {
  case Mapping::Elementwise:
    elementwise(b);
    break;
  case Mapping::WarpReduction:
    warpReduction(b);
    break;
  case Mapping::ThreadReduction:
    threadReduction(b);
    break;
  case Mapping::SplitRowReduction:
    splitRowReduction(b);
    break;
  case Mapping::SplitColumnReduction:
    splitColumnReduction(b);
    break;
  case Mapping::Serial:
    serial(b);
    break;
  }
  op->erase();
}

Mapping KernelLowering::choose() {
  if (red.empty())
    return Mapping::Elementwise;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (llvm::any_of(red, [&](unsigned d) { return map.isFunctionOfDim(d); }))
      return Mapping::Serial;
  }
  bool rowsInnermost = red.back() == ranges.size() - 1;
  bool allCombiners = true;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Operation *c = matchCombiner(op, init);
    Type t = getElementTypeOrSelf(init.get().getType());
    allCombiners &= c && t.getIntOrFloatBitWidth() <= 64;
    combiners.push_back(c);
  }
  bool rows = rowsInnermost && product(redSizes) >= kWarpSize;
  if (allCombiners && chooseSplit(rows))
    return rows ? Mapping::SplitRowReduction : Mapping::SplitColumnReduction;
  if (rows && allCombiners)
    return Mapping::WarpReduction;
  return Mapping::ThreadReduction;
}

/// Whether the reduction (every output `acc <op> x`) is split over blocks,
/// and how (`split`): when it has at least `split-min-elements` elements
/// and one warp (rows innermost) or one thread (other reductions) per
/// output element would launch fewer blocks than the device has
/// multiprocessors. Each warp or thread of pass 1 does at least
/// kMinSegment elements or kMinChunkRows rows; pass 1 launches at least
/// one block per multiprocessor and at most one full wave (sm-count x 2048
/// / block-size). In between, the number of partials balances the two
/// passes: pass 2 reads each output's partials with one warp, in order, so
/// its rounds of loads grow with them while pass 1's shrink. Equal rounds,
/// pass 2's hitting L2 (kL2LatencyRatio times faster than pass 1's from
/// memory): partials = sqrt(ratio x length x loads per round of pass 2 /
/// loads per round of a pass 1 item).
bool KernelLowering::chooseSplit(bool rows) {
  int64_t outputs = product(parSizes), length = product(redSizes);
  if (outputs * length < limits.splitMinElements)
    return false;
  int64_t wave =
      limits.smCount * std::max<int64_t>(1, kThreadsPerSM / blockSize);
  // Work items per block: warps of a row reduction, threads otherwise.
  int64_t perBlock = rows ? blockSize / kWarpSize : blockSize;
  if (ceilDiv(outputs, perBlock) >= limits.smCount)
    return false;
  int64_t least = rows ? kMinSegment : kMinChunkRows;
  int64_t pass2Loads = kWarpSize * kReductionUnroll;
  int64_t pass1Loads = rows ? pass2Loads : kReductionUnroll;
  auto balanced = static_cast<int64_t>(std::sqrt(
      kL2LatencyRatio * double(length) * double(pass2Loads) / pass1Loads));
  int64_t oneBlockPerSM = ceilDiv(limits.smCount * perBlock, outputs);
  int64_t splits = std::min({ceilDiv(wave * perBlock, outputs), length / least,
                             std::max(balanced, oneBlockPerSM)});
  if (splits < 2)
    return false;
  split.length = ceilDiv(length, splits);
  split.splits = ceilDiv(length, split.length);
  split.blocks = std::min(ceilDiv(outputs * split.splits, perBlock), maxBlocks);
  return true;
}

//===- KernelSplitReductions.cpp - reductions split over GPU blocks -------===//
//
// A reduction whose outputs cannot fill the device (a global norm, a loss,
// a column sum over many rows) in two launches: pass 1 reduces segments of
// rows (a warp each) or chunks of rows of columns (a thread each) into
// partials in the rank's device scratch buffer, pass 2 combines each
// output's partials in a fixed order (deterministic, no atomics).
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/LinalgLoops.h"
#include "fsdp/Memory/BufferViews.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

/// The partial results of a split reduction: `count` elements per output,
/// views of the rank's device scratch buffer (`fsdprt_gpu_scratch`,
/// allocated on its first request and reused by every later one, so a
/// step allocates nothing for them). Every split reduction of a step
/// reuses it from offset 0: their two passes run in stream order on the
/// compute stream, one reduction's second pass before the next one's
/// first.
SmallVector<Value> KernelLowering::allocPartials(OpBuilder &b, int64_t count) {
  SmallVector<int64_t> offsets;
  int64_t bytes = scratchBase;
  for (Value init : op.getDpsInits()) {
    offsets.push_back(bytes);
    Type element = getElementTypeOrSelf(init.getType());
    int64_t width =
        element.isIndex() ? 64 : int64_t(element.getIntOrFloatBitWidth());
    int64_t size = (width + 7) / 8 * count;
    bytes +=
        (size + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
  }
  scratchEnd = bytes;
  Value scratch = scratchBuffer(b, bytes);
  SmallVector<Value> partials;
  for (auto [init, offset] : llvm::zip(op.getDpsInits(), offsets))
    partials.push_back(memref::ViewOp::create(
        b, loc, MemRefType::get({count}, getElementTypeOrSelf(init.getType())),
        scratch, constIndex(b, loc, offset), ValueRange{}));
  return partials;
}

/// `fsdprt_gpu_scratch(bytes)` as a `memref<bytes x i8>` (a descriptor of
/// the returned pointer, which the LLVM lowering folds away).
Value KernelLowering::scratchBuffer(OpBuilder &b, int64_t bytes) {
  auto module = op->getParentOfType<ModuleOp>();
  Type i64 = b.getI64Type();
  func::FuncOp decl =
      declareRuntimeFunction(module, RuntimeFunction::gpu_scratch);
  auto word = [&](int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  Value ptr =
      func::CallOp::create(b, loc, decl, ValueRange{word(bytes)}).getResult(0);
  return pointerAsBuffer(b, loc, ptr, bytes);
}

/// Pass 2 of a split reduction: one warp per output element combines its
/// `count` partials (partials[output][0, count), contiguous, read by the
/// lanes in strides of 32) in a fixed order, then the output's initial
/// value.
void KernelLowering::combinePartials(OpBuilder &b, ValueRange partials,
                                     int64_t count) {
  gridStride(b, product(parSizes), kWarpSize,
             [&](OpBuilder &lb, Value output, Value lane) {
               SmallVector<Value> pivs = delinearize(lb, loc, output, parSizes);
               Value base = arith::MulIOp::create(lb, loc, output,
                                                  constIndex(lb, loc, count));
               SmallVector<Value> totals = accumulate(
                   lb, lane, constIndex(lb, loc, count), kWarpSize,
                   /*elementFirst=*/false, [&](OpBuilder &fb, Value s) {
                     Value at = arith::AddIOp::create(fb, loc, base, s);
                     SmallVector<Value> xs;
                     for (Value p : partials)
                       xs.push_back(memref::LoadOp::create(fb, loc, p, at));
                     return xs;
                   });
               warpCombineAndStore(lb, pivs, lane, totals);
             });
}

/// Rows split over warps: pass 1 gives each (output element, segment)
/// pair a warp, which reduces its contiguous segment of the row (lanes
/// striding by 32, then shuffles) into partials[output][segment]; a
/// block's warps take consecutive segments, so each block reduces a
/// contiguous chunk of the row. Pass 2: combinePartials.
void KernelLowering::splitRowReduction(OpBuilder &b) {
  int64_t outputs = product(parSizes), rowLength = product(redSizes);
  int64_t segments = split.splits, length = split.length;
  SmallVector<Value> partials = allocPartials(b, outputs * segments);
  gridStride(
      b, outputs * segments, kWarpSize,
      [&](OpBuilder &lb, Value item, Value lane) {
        Value count = constIndex(lb, loc, segments);
        Value row = arith::DivUIOp::create(lb, loc, item, count);
        Value segment = arith::RemUIOp::create(lb, loc, item, count);
        SmallVector<Value> pivs = delinearize(lb, loc, row, parSizes);
        Value begin = arith::MulIOp::create(lb, loc, segment,
                                            constIndex(lb, loc, length));
        Value end = arith::MinUIOp::create(
            lb, loc,
            arith::AddIOp::create(lb, loc, begin, constIndex(lb, loc, length)),
            constIndex(lb, loc, rowLength));
        SmallVector<Value> sums = butterfly(
            lb, accumulate(lb, arith::AddIOp::create(lb, loc, begin, lane), end,
                           kWarpSize, /*elementFirst=*/true,
                           [&](OpBuilder &fb, Value r) {
                             return elementsAt(fb, pivs, r);
                           }));
        OpBuilder tb = firstLane(lb, lane);
        for (auto [p, v] : llvm::zip(partials, sums))
          memref::StoreOp::create(tb, loc, v, p, ValueRange{item});
      });
  combinePartials(b, partials, segments);
}

/// Rows of a column reduction split into chunks: pass 1 gives each
/// (chunk, output element) pair a thread (consecutive threads take
/// consecutive output elements, so a warp reads consecutive columns),
/// which reduces the chunk's rows in order into partials[output][chunk].
/// Pass 2: combinePartials (whose reads are then contiguous).
void KernelLowering::splitColumnReduction(OpBuilder &b) {
  int64_t outputs = product(parSizes), rows = product(redSizes);
  int64_t chunks = split.splits, length = split.length;
  SmallVector<Value> partials = allocPartials(b, outputs * chunks);
  gridStride(b, outputs * chunks, 1, [&](OpBuilder &lb, Value item, Value) {
    Value count = constIndex(lb, loc, outputs);
    Value chunk = arith::DivUIOp::create(lb, loc, item, count);
    Value column = arith::RemUIOp::create(lb, loc, item, count);
    SmallVector<Value> pivs = delinearize(lb, loc, column, parSizes);
    Value begin =
        arith::MulIOp::create(lb, loc, chunk, constIndex(lb, loc, length));
    Value end = arith::MinUIOp::create(
        lb, loc,
        arith::AddIOp::create(lb, loc, begin, constIndex(lb, loc, length)),
        constIndex(lb, loc, rows));
    SmallVector<Value> sums = accumulate(
        lb, begin, end, 1, /*elementFirst=*/true,
        [&](OpBuilder &fb, Value r) { return elementsAt(fb, pivs, r); });
    Value at = arith::AddIOp::create(
        lb, loc,
        arith::MulIOp::create(lb, loc, column, constIndex(lb, loc, chunks)),
        chunk);
    for (auto [p, v] : llvm::zip(partials, sums))
      memref::StoreOp::create(lb, loc, v, p, ValueRange{at});
  });
  combinePartials(b, partials, chunks);
}

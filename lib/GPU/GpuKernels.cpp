//===- GpuKernels.cpp - linalg ops on buffers to gpu.launch ---------------===//
//
// Lowers every linalg op on buffers in host code (after fsdp-outline-kernels:
// one op, or a fill and the op accumulating into it, per kernel function) to
// a `gpu.launch` whose iteration space depends on the kind of op:
//
//  - elementwise: one thread per element, flattened row-major over the
//    loops (the last loop fastest, so a warp touches 32 consecutive
//    elements of a row-major output), in a grid-stride loop;
//  - row reduction (reduction loops innermost, `acc <op> x` outputs, rows
//    of at least a warp): one warp per output element, lanes striding the
//    row, then a butterfly of `gpu.shuffle xor` and one store by lane 0;
//  - other reductions: one thread per output element, accumulators in
//    registers (a column sum is then coalesced along its columns);
//  - a reduction whose outputs cannot fill the device (a global norm, a
//    loss, a column sum over many rows): split over blocks in two launches,
//    per-warp or per-chunk partials in a device buffer, then combined in a
//    fixed order (deterministic, no atomics);
//  - an output indexed by a reduction loop: one thread.
//
// The body is cloned per element exactly as the host lowerings do
// (LinalgLoops.h). Contiguous copies become device memcpys.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/LinalgLoops.h"
#include "fsdp/GPU/Passes.h"
#include "fsdp/Memory/BufferViews.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUKERNELS
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr int64_t kWarpSize = 32;
// Resident threads per multiprocessor (every NVIDIA GPU since Volta but
// Turing): a split reduction aims at one full wave of blocks.
constexpr int64_t kThreadsPerSM = 2048;
// The least work of a split: a warp's segment of a row (8 elements per
// lane), a chunk of rows of a column reduction.
constexpr int64_t kMinSegment = 256;
constexpr int64_t kMinChunkRows = 8;
/// The runtime's per-rank device scratch buffer, and the alignment of each
/// output's partials in it.
constexpr int64_t kScratchAlignment = 256;

Value constIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

int64_t product(ArrayRef<int64_t> sizes) {
  int64_t p = 1;
  for (int64_t s : sizes)
    p *= s;
  return p;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The indices of the flat row-major index `flat` over `sizes` (the last
/// index fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value flat,
                               ArrayRef<int64_t> sizes) {
  SmallVector<Value> ivs(sizes.size());
  Value rest = flat;
  for (unsigned i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) {
      ivs[i] = constIndex(b, loc, 0);
      continue;
    }
    bool outermost =
        llvm::all_of(sizes.take_front(i), [](int64_t s) { return s == 1; });
    if (outermost) {
      ivs[i] = rest;
      rest = nullptr;
      continue;
    }
    Value size = constIndex(b, loc, sizes[i]);
    ivs[i] = arith::RemUIOp::create(b, loc, rest, size);
    rest = arith::DivUIOp::create(b, loc, rest, size);
  }
  return ivs;
}

/// The value of lane (lane ^ offset) of the warp, for any scalar of at most
/// 64 bits: NVVM shuffles 32-bit words, so narrower values travel widened
/// bit for bit and 64-bit ones as two words.
Value shuffleXor(OpBuilder &b, Location loc, Value v, int32_t offset) {
  Type t = v.getType();
  unsigned bits = t.getIntOrFloatBitWidth();
  auto shuffle32 = [&](Value w) -> Value {
    return gpu::ShuffleOp::create(b, loc, w, offset, kWarpSize,
                                  gpu::ShuffleMode::XOR)
        .getShuffleResult();
  };
  if (t.isF32() || t.isInteger(32))
    return shuffle32(v);
  Type i32 = b.getI32Type(), iN = b.getIntegerType(bits);
  Value word = t.isInteger(bits) ? v : arith::BitcastOp::create(b, loc, iN, v);
  Value result;
  if (bits < 32) {
    Value wide = arith::ExtUIOp::create(b, loc, i32, word);
    result = arith::TruncIOp::create(b, loc, iN, shuffle32(wide));
  } else {
    Value lo = arith::TruncIOp::create(b, loc, i32, word);
    Value hiWide = arith::ShRUIOp::create(
        b, loc, word, arith::ConstantIntOp::create(b, loc, iN, 32));
    Value hi = arith::TruncIOp::create(b, loc, i32, hiWide);
    Value lo64 = arith::ExtUIOp::create(b, loc, iN, shuffle32(lo));
    Value hi64 = arith::ShLIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, iN, shuffle32(hi)),
        arith::ConstantIntOp::create(b, loc, iN, 32));
    result = arith::OrIOp::create(b, loc, lo64, hi64);
  }
  return t.isInteger(bits) ? result
                           : arith::BitcastOp::create(b, loc, t, result);
}

/// A contiguous buffer with an offset (a subview of a packed buffer) as an
/// identity-layout memref at the same address: gpu-to-llvm lowers a
/// gpu.memcpy of identity layouts only.
Value identityView(OpBuilder &b, Location loc, Value v) {
  auto t = cast<MemRefType>(v.getType());
  if (t.getLayout().isIdentity() || t.getMemorySpace())
    return v;
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, v);
  Value bytes =
      arith::MulIOp::create(b, loc, meta.getOffset(),
                            arith::ConstantIndexOp::create(
                                b, loc, (t.getElementTypeBitWidth() + 7) / 8));
  Value addr = arith::IndexCastOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, bytes));
  Value ptr = LLVM::IntToPtrOp::create(b, loc, ptrTy, addr);
  int64_t rank = t.getRank();
  SmallVector<Type> fields = {ptrTy, ptrTy, i64};
  if (rank > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
  }
  auto structTy = LLVM::LLVMStructType::getLiteral(ctx, fields);
  auto constant = [&](int64_t c) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(c));
  };
  Value desc = LLVM::PoisonOp::create(b, loc, structTy);
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
  desc = LLVM::InsertValueOp::create(b, loc, desc, constant(0),
                                     ArrayRef<int64_t>{2});
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(t.getDimSize(d)),
                                       ArrayRef<int64_t>{3, d});
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(stride),
                                       ArrayRef<int64_t>{4, d});
    stride *= t.getDimSize(d);
  }
  auto identity = MemRefType::get(t.getShape(), t.getElementType());
  return UnrealizedConversionCastOp::create(b, loc, identity, desc)
      .getResult(0);
}

enum class Mapping {
  Elementwise,
  WarpReduction,
  ThreadReduction,
  SplitRowReduction,
  SplitColumnReduction,
  Serial
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
  KernelLowering(linalg::LinalgOp op, const LaunchLimits &limits)
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
  }

  Mapping getMapping() const { return mapping; }

  /// The mapping in words, for the report.
  std::string describe() const {
    switch (mapping) {
    case Mapping::Elementwise:
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
  bool foldFill(linalg::FillOp fill) {
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

  void lower() {
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

private:
  Mapping choose() {
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
  /// multiprocessors. Pass 1 then aims at one full wave of blocks
  /// (sm-count x 2048 / block-size), each warp or thread doing at least
  /// kMinSegment elements or kMinChunkRows rows.
  bool chooseSplit(bool rows) {
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
    int64_t splits =
        std::min(ceilDiv(wave * perBlock, outputs), length / least);
    if (splits < 2)
      return false;
    split.length = ceilDiv(length, splits);
    split.splits = ceilDiv(length, split.length);
    split.blocks =
        std::min(ceilDiv(outputs * split.splits, perBlock), maxBlocks);
    return true;
  }

  /// A launch of `blocks` blocks of `threads` threads; `body` fills it at
  /// (block id, thread id, number of blocks).
  void launch(OpBuilder &b, int64_t blocks, int64_t threads,
              llvm::function_ref<void(OpBuilder &, Value, Value, Value)> body) {
    Value one = constIndex(b, loc, 1);
    auto l = gpu::LaunchOp::create(b, loc, constIndex(b, loc, blocks), one, one,
                                   constIndex(b, loc, threads), one, one);
    Block &entry = l.getBody().front();
    OpBuilder kb = OpBuilder::atBlockEnd(&entry);
    body(kb, l.getBlockIds().x, l.getThreadIds().x, l.getGridSize().x);
    gpu::TerminatorOp::create(kb, loc);
  }

  /// `for (i = start; i < end; i += step) body(i)`.
  void stride(OpBuilder &b, Value start, Value step, int64_t end,
              llvm::function_ref<void(OpBuilder &, Value)> body) {
    auto loop =
        scf::ForOp::create(b, loc, start, constIndex(b, loc, end), step);
    OpBuilder lb(loop.getBody()->getTerminator());
    body(lb, loop.getInductionVar());
  }

  /// The launch of one grid-stride loop over `total` work items, each
  /// `width` threads wide (1: a thread, 32: a warp); `body` gets the item
  /// and the thread's lane in it.
  void gridStride(OpBuilder &b, int64_t total, int64_t width,
                  llvm::function_ref<void(OpBuilder &, Value, Value)> body) {
    int64_t threads =
        std::min(blockSize,
                 std::max<int64_t>(
                     kWarpSize, ceilDiv(total * width, kWarpSize) * kWarpSize));
    int64_t perBlock = threads / width;
    int64_t blocks =
        std::clamp<int64_t>(ceilDiv(total, perBlock), 1, maxBlocks);
    launch(b, blocks, threads,
           [&](OpBuilder &kb, Value bid, Value tid, Value nblocks) {
             Value w = constIndex(kb, loc, width);
             Value item = tid, lane = constIndex(kb, loc, 0);
             if (width > 1) {
               item = arith::DivUIOp::create(kb, loc, tid, w);
               lane = arith::RemUIOp::create(kb, loc, tid, w);
             }
             Value per = constIndex(kb, loc, perBlock);
             Value start = arith::AddIOp::create(
                 kb, loc, arith::MulIOp::create(kb, loc, bid, per), item);
             Value step = arith::MulIOp::create(kb, loc, nblocks, per);
             stride(kb, start, step, total,
                    [&](OpBuilder &lb, Value i) { body(lb, i, lane); });
           });
  }

  /// Loop indices from the parallel ones `pivs` and the reduction ones
  /// `rivs` (zeros when empty).
  SmallVector<Value> merge(OpBuilder &b, ValueRange pivs, ValueRange rivs) {
    SmallVector<Value> ivs(ranges.size());
    for (auto [d, v] : llvm::zip(par, pivs))
      ivs[d] = v;
    for (auto [i, d] : llvm::enumerate(red))
      ivs[d] = rivs.empty() ? constIndex(b, loc, 0) : rivs[i];
    return ivs;
  }

  /// The outputs' values before the op at `ivs`: a folded fill's value, a
  /// load, or (for an output the body never reads) a zero.
  SmallVector<Value> initialValues(OpBuilder &b, ValueRange ivs, bool needed) {
    SmallVector<Value> accs;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      auto it = fillValues.find(init.getOperandNumber());
      Type t = getElementTypeOrSelf(init.get().getType());
      if (it != fillValues.end())
        accs.push_back(it->second);
      else if (needed || !op.getMatchingBlockArgument(&init).use_empty())
        accs.push_back(memref::LoadOp::create(
            b, loc, init.get(), indicesAt(b, loc, op, init, ivs)));
      else
        accs.push_back(arith::ConstantOp::create(
            b, loc, cast<TypedAttr>(b.getZeroAttr(t))));
    }
    return accs;
  }

  void store(OpBuilder &b, ValueRange values, ValueRange ivs) {
    for (auto [init, v] : llvm::zip(op.getDpsInitsMutable(), values))
      memref::StoreOp::create(b, loc, v, init.get(),
                              indicesAt(b, loc, op, init, ivs));
  }

  void elementwise(OpBuilder &b) {
    gridStride(b, product(ranges), 1, [&](OpBuilder &lb, Value i, Value) {
      SmallVector<Value> ivs = delinearize(lb, loc, i, ranges);
      SmallVector<Value> accs = initialValues(lb, ivs, /*needed=*/false);
      store(lb, bodyAt(lb, loc, op, ivs, accs), ivs);
    });
  }

  /// The reduction loops at the parallel indices `pivs` from `accs`.
  SmallVector<Value> reductionLoops(OpBuilder &b, ValueRange pivs,
                                    ValueRange accs) {
    SmallVector<Value> lbs, ubs, steps;
    for (int64_t s : redSizes) {
      lbs.push_back(constIndex(b, loc, 0));
      ubs.push_back(constIndex(b, loc, s));
      steps.push_back(constIndex(b, loc, 1));
    }
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lbs, ubs, steps, accs,
        [&](OpBuilder &nb, Location, ValueRange rivs,
            ValueRange iterArgs) -> scf::ValueVector {
          return bodyAt(nb, loc, op, merge(nb, pivs, rivs), iterArgs);
        });
    return nest.results;
  }

  void threadReduction(OpBuilder &b) {
    gridStride(b, product(parSizes), 1, [&](OpBuilder &lb, Value i, Value) {
      SmallVector<Value> pivs = delinearize(lb, loc, i, parSizes);
      SmallVector<Value> ivs = merge(lb, pivs, {});
      SmallVector<Value> accs = initialValues(lb, ivs, /*needed=*/true);
      store(lb, reductionLoops(lb, pivs, accs), ivs);
    });
  }

  /// `acc <combiner> x` in the body's operand order.
  Value combineLike(OpBuilder &b, unsigned o, Value acc, Value x) {
    Operation *c = combiners[o];
    Value arg = op.getMatchingBlockArgument(op.getDpsInitOperand(o));
    return c->getOperand(0) == arg ? combine(b, loc, c, acc, x)
                                   : combine(b, loc, c, x, acc);
  }

  /// Lane l combines the row's elements l, l + 32, ... from the identity,
  /// then the warp combines the lanes' partials and the output's initial
  /// value.
  void warpReduction(OpBuilder &b) {
    int64_t rowLength = product(redSizes);
    gridStride(b, product(parSizes), kWarpSize,
               [&](OpBuilder &lb, Value row, Value lane) {
                 SmallVector<Value> pivs = delinearize(lb, loc, row, parSizes);
                 SmallVector<Value> partials = accumulate(
                     lb, lane, constIndex(lb, loc, rowLength), kWarpSize,
                     /*elementFirst=*/true, [&](OpBuilder &fb, Value r) {
                       return elementsAt(fb, pivs, r);
                     });
                 warpCombineAndStore(lb, pivs, lane, partials);
               });
  }

  /// The partial results of a split reduction: `count` elements per output,
  /// views of the rank's device scratch buffer (`fsdprt_gpu_scratch`,
  /// allocated on its first request and reused by every later one, so a
  /// step allocates nothing for them). Every split reduction of a step
  /// reuses it from offset 0: their two passes run in stream order on the
  /// compute stream, one reduction's second pass before the next one's
  /// first.
  SmallVector<Value> allocPartials(OpBuilder &b, int64_t count) {
    SmallVector<int64_t> offsets;
    int64_t bytes = 0;
    for (Value init : op.getDpsInits()) {
      offsets.push_back(bytes);
      Type element = getElementTypeOrSelf(init.getType());
      int64_t width =
          element.isIndex() ? 64 : int64_t(element.getIntOrFloatBitWidth());
      int64_t size = (width + 7) / 8 * count;
      bytes += (size + kScratchAlignment - 1) / kScratchAlignment *
               kScratchAlignment;
    }
    Value scratch = scratchBuffer(b, bytes);
    SmallVector<Value> partials;
    for (auto [init, offset] : llvm::zip(op.getDpsInits(), offsets))
      partials.push_back(memref::ViewOp::create(
          b, loc,
          MemRefType::get({count}, getElementTypeOrSelf(init.getType())),
          scratch, constIndex(b, loc, offset), ValueRange{}));
    return partials;
  }

  /// `fsdprt_gpu_scratch(bytes)` as a `memref<bytes x i8>` (a descriptor of
  /// the returned pointer, which the LLVM lowering folds away).
  Value scratchBuffer(OpBuilder &b, int64_t bytes) {
    auto module = op->getParentOfType<ModuleOp>();
    Type i64 = b.getI64Type();
    func::FuncOp decl =
        declareRuntimeFunction(module, RuntimeFunction::gpu_scratch);
    auto word = [&](int64_t v) {
      return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
    };
    Value ptr = func::CallOp::create(b, loc, decl, ValueRange{word(bytes)})
                    .getResult(0);
    return pointerAsBuffer(b, loc, ptr, bytes);
  }

  SmallVector<Value> identities(OpBuilder &b) {
    SmallVector<Value> ids;
    for (unsigned o = 0; o < combiners.size(); ++o)
      ids.push_back(
          identityOf(b, loc, combiners[o],
                     getElementTypeOrSelf(op.getDpsInits()[o].getType())));
    return ids;
  }

  /// `for (i = start; i < end; i += step)` combining `values(i)` into
  /// accumulators that start at the combiners' identities; `elementFirst`
  /// keeps the body's operand order (an element of the op), otherwise the
  /// accumulator comes first (a partial).
  SmallVector<Value> accumulate(
      OpBuilder &b, Value start, Value end, int64_t step, bool elementFirst,
      llvm::function_ref<SmallVector<Value>(OpBuilder &, Value)> values) {
    auto loop = scf::ForOp::create(
        b, loc, start, end, constIndex(b, loc, step), identities(b),
        [&](OpBuilder &fb, Location, Value i, ValueRange accs) {
          SmallVector<Value> xs = values(fb, i);
          SmallVector<Value> next;
          for (auto [o, acc] : llvm::enumerate(accs))
            next.push_back(elementFirst
                               ? combineLike(fb, o, acc, xs[o])
                               : combine(fb, loc, combiners[o], acc, xs[o]));
          scf::YieldOp::create(fb, loc, next);
        });
    return SmallVector<Value>(loop.getResults());
  }

  /// What each combiner combines into its output at the parallel indices
  /// `pivs` and the flat reduction index `r`.
  SmallVector<Value> elementsAt(OpBuilder &b, ValueRange pivs, Value r) {
    SmallVector<Value> rivs = delinearize(b, loc, r, redSizes);
    return bodyAt(b, loc, op, merge(b, pivs, rivs), {}, combiners);
  }

  /// The warp's lanes' `partials` combined by halves with `gpu.shuffle xor`
  /// 16, 8, 4, 2, 1: every lane ends with the total.
  SmallVector<Value> butterfly(OpBuilder &b, ValueRange partials) {
    SmallVector<Value> totals(partials);
    for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2)
      for (auto [o, t] : llvm::enumerate(totals))
        t = combine(b, loc, combiners[o], t, shuffleXor(b, loc, t, offset));
    return totals;
  }

  /// A builder inside `if (lane == 0)`.
  OpBuilder firstLane(OpBuilder &b, Value lane) {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                        constIndex(b, loc, 0));
    auto ifOp = scf::IfOp::create(b, loc, first, /*withElse=*/false);
    return OpBuilder(ifOp.thenBlock()->getTerminator());
  }

  /// The warp's lanes' `partials` combined (butterfly); lane 0 combines the
  /// output's initial value at `pivs` with the total and stores.
  void warpCombineAndStore(OpBuilder &b, ValueRange pivs, Value lane,
                           ValueRange partials) {
    SmallVector<Value> totals = butterfly(b, partials);
    OpBuilder tb = firstLane(b, lane);
    SmallVector<Value> ivs = merge(tb, pivs, {});
    SmallVector<Value> accs = initialValues(tb, ivs, /*needed=*/true);
    SmallVector<Value> results;
    for (auto [o, acc] : llvm::enumerate(accs))
      results.push_back(combineLike(tb, o, acc, totals[o]));
    store(tb, results, ivs);
  }

  /// Pass 2 of a split reduction: one warp per output element combines its
  /// `count` partials (partials[output][0, count), contiguous, read by the
  /// lanes in strides of 32) in a fixed order, then the output's initial
  /// value.
  void combinePartials(OpBuilder &b, ValueRange partials, int64_t count) {
    gridStride(b, product(parSizes), kWarpSize,
               [&](OpBuilder &lb, Value output, Value lane) {
                 SmallVector<Value> pivs =
                     delinearize(lb, loc, output, parSizes);
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
  void splitRowReduction(OpBuilder &b) {
    int64_t outputs = product(parSizes), rowLength = product(redSizes);
    int64_t segments = split.splits, length = split.length;
    SmallVector<Value> partials = allocPartials(b, outputs * segments);
    gridStride(b, outputs * segments, kWarpSize,
               [&](OpBuilder &lb, Value item, Value lane) {
                 Value count = constIndex(lb, loc, segments);
                 Value row = arith::DivUIOp::create(lb, loc, item, count);
                 Value segment = arith::RemUIOp::create(lb, loc, item, count);
                 SmallVector<Value> pivs = delinearize(lb, loc, row, parSizes);
                 Value begin = arith::MulIOp::create(
                     lb, loc, segment, constIndex(lb, loc, length));
                 Value end = arith::MinUIOp::create(
                     lb, loc,
                     arith::AddIOp::create(lb, loc, begin,
                                           constIndex(lb, loc, length)),
                     constIndex(lb, loc, rowLength));
                 SmallVector<Value> sums = butterfly(
                     lb,
                     accumulate(lb, arith::AddIOp::create(lb, loc, begin, lane),
                                end, kWarpSize, /*elementFirst=*/true,
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
  void splitColumnReduction(OpBuilder &b) {
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

  void serial(OpBuilder &b) {
    launch(b, 1, 1, [&](OpBuilder &kb, Value, Value, Value) {
      SmallVector<Value> lbs, ubs, steps;
      for (int64_t s : ranges) {
        lbs.push_back(constIndex(kb, loc, 0));
        ubs.push_back(constIndex(kb, loc, s));
        steps.push_back(constIndex(kb, loc, 1));
      }
      scf::buildLoopNest(kb, loc, lbs, ubs, steps,
                         [&](OpBuilder &nb, Location, ValueRange ivs) {
                           SmallVector<Value> accs =
                               initialValues(nb, ivs, /*needed=*/true);
                           store(nb, bodyAt(nb, loc, op, ivs, accs), ivs);
                         });
    });
  }

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
};

bool isHostCode(Operation *op) {
  return !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUModuleOp>();
}

/// Why `op` cannot be a kernel, or "".
std::string unsupported(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return "operands are not buffers";
  if (!op.getBlock())
    return "the op has no body";
  if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return "dynamic loop bounds (compute=gpu needs static shapes)";
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<MemRefType>(v.getType());
        t && !t.getElementType().isIntOrFloat())
      return "an element type that is neither an integer nor a float";
  return "";
}

struct FSDPGpuKernelsPass
    : public mlir::fsdp::impl::FSDPGpuKernelsBase<FSDPGpuKernelsPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (blockSize < kWarpSize || blockSize > 1024 || blockSize % kWarpSize)
      return emitError(UnknownLoc::get(ctx))
             << "option block-size must be a multiple of 32 between 32 and "
                "1024, got "
             << static_cast<int64_t>(blockSize);
    if (maxBlocks < 1 || maxBlocks > std::numeric_limits<int32_t>::max())
      return emitError(UnknownLoc::get(ctx))
             << "option max-blocks must be between 1 and 2^31 - 1, got "
             << static_cast<int64_t>(maxBlocks);
    if (smCount < 1 || smCount > 65536)
      return emitError(UnknownLoc::get(ctx))
             << "option sm-count must be between 1 and 65536, got "
             << static_cast<int64_t>(smCount);
    if (splitMinElements < 1)
      return emitError(UnknownLoc::get(ctx))
             << "option split-min-elements must be at least 1, got "
             << static_cast<int64_t>(splitMinElements);
    return success();
  }

  LaunchLimits limits() const {
    return {blockSize, maxBlocks, smCount, splitMinElements};
  }

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if ((isa<linalg::LinalgOp>(op) || isa<memref::CopyOp>(op)) &&
          isHostCode(op) && !op->getParentOfType<linalg::LinalgOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult lowered = isa<memref::CopyOp>(op)
                                  ? lowerCopy(cast<memref::CopyOp>(op))
                                  : lowerLinalg(cast<linalg::LinalgOp>(op));
      if (failed(lowered))
        return signalPassFailure();
    }
  }

  LogicalResult lowerCopy(memref::CopyOp copy) {
    auto src = dyn_cast<MemRefType>(copy.getSource().getType());
    auto dst = dyn_cast<MemRefType>(copy.getTarget().getType());
    if (!src || !dst || !src.hasStaticShape())
      return copy.emitOpError("cannot become a GPU copy: compute=gpu needs "
                              "ranked buffers of static shape");
    OpBuilder b(copy);
    if (memref::isStaticShapeAndContiguousRowMajor(src) &&
        memref::isStaticShapeAndContiguousRowMajor(dst)) {
      gpu::MemcpyOp::create(b, copy.getLoc(), Type(), ValueRange(),
                            identityView(b, copy.getLoc(), copy.getTarget()),
                            identityView(b, copy.getLoc(), copy.getSource()));
      ++numMemcpy;
      copy.erase();
      return success();
    }
    auto loops =
        linalg::CopyOp::create(b, copy.getLoc(), ValueRange{copy.getSource()},
                               ValueRange{copy.getTarget()});
    copy.erase();
    return lowerLinalg(cast<linalg::LinalgOp>(loops.getOperation()));
  }

  LogicalResult lowerLinalg(linalg::LinalgOp op) {
    std::string why = unsupported(op);
    if (!why.empty())
      return op->emitOpError("cannot become a GPU kernel: ") << why;
    // A fill of a buffer that the next op accumulates into is left for that
    // op's kernel, where it is the outputs' initial value (one launch, no
    // load).
    if (auto fill = dyn_cast<linalg::FillOp>(op.getOperation()))
      if (auto next = dyn_cast_or_null<linalg::LinalgOp>(op->getNextNode());
          next && unsupported(next).empty() &&
          KernelLowering(next, limits()).foldFill(fill))
        return success();
    KernelLowering lowering(op, limits());
    auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
    bool foldsFill = fill && lowering.foldFill(fill);
    if (report)
      op->emitRemark() << "GPU kernel: " << lowering.describe()
                       << (foldsFill ? " (the fill before folded in)" : "");
    countMapping(lowering.getMapping());
    lowering.lower();
    if (foldsFill) {
      fill->erase();
      ++numFoldedFills;
    }
    return success();
  }

  void countMapping(Mapping m) {
    switch (m) {
    case Mapping::Elementwise:
      ++numElementwise;
      break;
    case Mapping::WarpReduction:
      ++numWarpReductions;
      break;
    case Mapping::ThreadReduction:
      ++numThreadReductions;
      break;
    case Mapping::SplitRowReduction:
    case Mapping::SplitColumnReduction:
      ++numSplitReductions;
      break;
    case Mapping::Serial:
      ++numSerial;
      break;
    }
  }
};

} // namespace

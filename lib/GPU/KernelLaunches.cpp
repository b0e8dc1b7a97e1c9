//===- KernelLaunches.cpp - GPU launches of elementwise ops and reductions ===//
//
// The launches fsdp-gpu-kernels writes (a grid-stride loop over work items
// of a thread or a warp) and the mappings that need one launch: elementwise
// ops, a thread per output element, a warp per output element (lanes
// striding the row, then a butterfly of shuffles), and one thread. The body
// is cloned per element exactly as the host lowerings do (LinalgLoops.h).
// Elementwise kernels and reduction loops take several elements per
// iteration, loaded before any is stored or combined (loads in flight).
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/Compute/LinalgLoops.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

/// The indices of the flat row-major index `flat` over `sizes` (the last
/// index fastest).
SmallVector<Value> gpukernels::delinearize(OpBuilder &b, Location loc,
                                           Value flat,
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
Value gpukernels::shuffleXor(OpBuilder &b, Location loc, Value v,
                             int32_t offset) {
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

/// A launch of `blocks` blocks of `threads` threads; `body` fills it at
/// (block id, thread id, number of blocks).
void KernelLowering::launch(
    OpBuilder &b, int64_t blocks, int64_t threads,
    llvm::function_ref<void(OpBuilder &, Value, Value, Value)> body) {
  Value one = constIndex(b, loc, 1);
  auto l = gpu::LaunchOp::create(b, loc, constIndex(b, loc, blocks), one, one,
                                 constIndex(b, loc, threads), one, one);
  launches.push_back(l);
  Block &entry = l.getBody().front();
  OpBuilder kb = OpBuilder::atBlockEnd(&entry);
  body(kb, l.getBlockIds().x, l.getThreadIds().x, l.getGridSize().x);
  gpu::TerminatorOp::create(kb, loc);
}

/// `for (i = start; i < end; i += step) body(i)`.
void KernelLowering::stride(OpBuilder &b, Value start, Value step, int64_t end,
                            llvm::function_ref<void(OpBuilder &, Value)> body) {
  auto loop = scf::ForOp::create(b, loc, start, constIndex(b, loc, end), step);
  OpBuilder lb(loop.getBody()->getTerminator());
  body(lb, loop.getInductionVar());
}

/// The launch of one grid-stride loop over `total` work items, each
/// `width` threads wide (1: a thread, 32: a warp); `body` gets the item
/// and the thread's lane in it.
void KernelLowering::gridStride(
    OpBuilder &b, int64_t total, int64_t width,
    llvm::function_ref<void(OpBuilder &, Value, Value)> body) {
  int64_t threads = std::min(
      blockSize, std::max<int64_t>(
                     kWarpSize, ceilDiv(total * width, kWarpSize) * kWarpSize));
  int64_t perBlock = threads / width;
  int64_t blocks = std::clamp<int64_t>(ceilDiv(total, perBlock), 1, maxBlocks);
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
SmallVector<Value> KernelLowering::merge(OpBuilder &b, ValueRange pivs,
                                         ValueRange rivs) {
  SmallVector<Value> ivs(ranges.size());
  for (auto [d, v] : llvm::zip(par, pivs))
    ivs[d] = v;
  for (auto [i, d] : llvm::enumerate(red))
    ivs[d] = rivs.empty() ? constIndex(b, loc, 0) : rivs[i];
  return ivs;
}

/// The outputs' values before the op at `ivs`: a folded fill's value, a
/// load, or (for an output the body never reads) a zero.
SmallVector<Value> KernelLowering::initialValues(OpBuilder &b, ValueRange ivs,
                                                 bool needed) {
  SmallVector<Value> accs;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    auto it = fillValues.find(init.getOperandNumber());
    Type t = getElementTypeOrSelf(init.get().getType());
    if (it != fillValues.end())
      accs.push_back(it->second);
    else if (needed || !op.getMatchingBlockArgument(&init).use_empty())
      accs.push_back(memref::LoadOp::create(b, loc, init.get(),
                                            indicesAt(b, loc, op, init, ivs)));
    else
      accs.push_back(
          arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(t))));
  }
  return accs;
}

void KernelLowering::store(OpBuilder &b, ValueRange values, ValueRange ivs) {
  for (auto [init, v] : llvm::zip(op.getDpsInitsMutable(), values))
    memref::StoreOp::create(b, loc, v, init.get(),
                            indicesAt(b, loc, op, init, ivs));
}

std::pair<int64_t, int64_t> KernelLowering::oneWaveGrid(int64_t items) const {
  int64_t threads = std::min(
      blockSize,
      std::max<int64_t>(kWarpSize, ceilDiv(items, kWarpSize) * kWarpSize));
  int64_t wave = limits.smCount * std::max<int64_t>(1, kThreadsPerSM / threads);
  int64_t blocks = std::clamp<int64_t>(ceilDiv(items, threads), 1,
                                       std::min(maxBlocks, wave));
  return {blocks, threads};
}

Value KernelLowering::stridedIndex(OpBuilder &b, Value i, Value step,
                                   int64_t k) {
  if (k == 0)
    return i;
  return arith::AddIOp::create(
      b, loc, i, arith::MulIOp::create(b, loc, step, constIndex(b, loc, k)));
}

/// The elements i, i + step, ..., i + (count - 1) x step: all loaded and
/// computed, then stored.
void KernelLowering::elementGroup(OpBuilder &b, Value i, Value step,
                                  int64_t count) {
  SmallVector<SmallVector<Value>> ivs, values;
  for (int64_t k = 0; k < count; ++k) {
    ivs.push_back(delinearize(b, loc, stridedIndex(b, i, step, k), ranges));
    SmallVector<Value> accs = initialValues(b, ivs.back(), false);
    values.push_back(bodyAt(b, loc, op, ivs.back(), accs));
  }
  for (int64_t k = 0; k < count; ++k)
    store(b, values[k], ivs[k]);
}

/// One thread per element, in a grid-stride loop over one wave of blocks
/// (sm-count x 2048 / block-size, or fewer for a small op) that takes
/// kElementwiseUnroll elements a grid apart per iteration: all of them are
/// loaded and computed before the first is stored, so a thread has that
/// many loads in flight. A loop over the rest follows (fewer than
/// kElementwiseUnroll per thread). Threads of a warp still touch
/// consecutive elements. Where the operands allow it, chunks of 16 bytes
/// per thread instead (vectorElementwise).
void KernelLowering::elementwise(OpBuilder &b) {
  if (vector.width) {
    vectorElementwise(b);
    return;
  }
  int64_t total = product(ranges);
  int64_t blocks, threads;
  std::tie(blocks, threads) = oneWaveGrid(total);
  launch(b, blocks, threads,
         [&](OpBuilder &kb, Value bid, Value tid, Value nblocks) {
           unrolledGridStride(
               kb, bid, tid, nblocks, threads, total,
               [&](OpBuilder &gb, Value i, Value step, int64_t count) {
                 elementGroup(gb, i, step, count);
               });
         });
}

std::pair<Value, Value> KernelLowering::unrolledGridStride(
    OpBuilder &kb, Value bid, Value tid, Value nblocks, int64_t threads,
    int64_t items,
    llvm::function_ref<void(OpBuilder &, Value, Value, int64_t)> group) {
  Value per = constIndex(kb, loc, threads);
  Value start = arith::AddIOp::create(
      kb, loc, arith::MulIOp::create(kb, loc, bid, per), tid);
  Value step = arith::MulIOp::create(kb, loc, nblocks, per);
  Value unroll = constIndex(kb, loc, kElementwiseUnroll);
  Value span = arith::MulIOp::create(kb, loc, step, unroll);
  // [0, whole) is whole groups of U x step items, of which the thread
  // takes start, start + step, ..., start + (U - 1) x step of each; the
  // rest one item at a time.
  Value whole = arith::MulIOp::create(
      kb, loc,
      arith::DivUIOp::create(kb, loc, constIndex(kb, loc, items), span), span);
  auto groups = scf::ForOp::create(kb, loc, start, whole, span);
  OpBuilder gb(groups.getBody()->getTerminator());
  group(gb, groups.getInductionVar(), step, kElementwiseUnroll);
  stride(kb, arith::AddIOp::create(kb, loc, whole, start), step, items,
         [&](OpBuilder &lb, Value i) { group(lb, i, step, 1); });
  return {start, step};
}

/// The reduction loops at the parallel indices `pivs` from `accs`.
SmallVector<Value> KernelLowering::reductionLoops(OpBuilder &b, ValueRange pivs,
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

void KernelLowering::threadReduction(OpBuilder &b) {
  gridStride(b, product(parSizes), 1, [&](OpBuilder &lb, Value i, Value) {
    SmallVector<Value> pivs = delinearize(lb, loc, i, parSizes);
    SmallVector<Value> ivs = merge(lb, pivs, {});
    SmallVector<Value> accs = initialValues(lb, ivs, /*needed=*/true);
    store(lb, reductionLoops(lb, pivs, accs), ivs);
  });
}

/// `acc <combiner> x` in the body's operand order.
Value KernelLowering::combineLike(OpBuilder &b, unsigned o, Value acc,
                                  Value x) {
  Operation *c = combiners[o];
  Value arg = op.getMatchingBlockArgument(op.getDpsInitOperand(o));
  return c->getOperand(0) == arg ? combine(b, loc, c, acc, x)
                                 : combine(b, loc, c, x, acc);
}

/// Lane l combines the row's elements l, l + 32, ... from the identity,
/// then the warp combines the lanes' partials and the output's initial
/// value.
void KernelLowering::warpReduction(OpBuilder &b) {
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

SmallVector<Value> KernelLowering::identities(OpBuilder &b) {
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
/// accumulator comes first (a partial). The loop takes kReductionUnroll
/// elements per iteration, all loaded before the first is combined (then a
/// loop over the rest, fewer than kReductionUnroll): a thread has that many
/// loads in flight instead of one. The elements are combined in the same
/// order as one at a time, so the result is the same bit for bit.
SmallVector<Value> KernelLowering::accumulate(
    OpBuilder &b, Value start, Value end, int64_t step, bool elementFirst,
    llvm::function_ref<SmallVector<Value>(OpBuilder &, Value)> values) {
  auto combineInto = [&](OpBuilder &fb, SmallVector<Value> &accs,
                         ArrayRef<Value> xs) {
    for (auto [o, acc] : llvm::enumerate(accs))
      acc = elementFirst ? combineLike(fb, o, acc, xs[o])
                         : combine(fb, loc, combiners[o], acc, xs[o]);
  };
  auto loop = [&](Value from, Value to, int64_t count, ValueRange init) {
    auto l = scf::ForOp::create(
        b, loc, from, to, constIndex(b, loc, step * count), init,
        [&](OpBuilder &fb, Location, Value i, ValueRange accs) {
          SmallVector<SmallVector<Value>> xs;
          for (int64_t k = 0; k < count; ++k)
            xs.push_back(values(
                fb, k == 0 ? i
                           : arith::AddIOp::create(
                                 fb, loc, i, constIndex(fb, loc, k * step))));
          SmallVector<Value> next(accs);
          for (ArrayRef<Value> x : xs)
            combineInto(fb, next, x);
          scf::YieldOp::create(fb, loc, next);
        });
    return SmallVector<Value>(l.getResults());
  };
  // The whole groups: [start, start + groups * group).
  Value length = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, end, start), constIndex(b, loc, 0));
  Value group = constIndex(b, loc, kReductionUnroll * step);
  Value groupsEnd = arith::AddIOp::create(
      b, loc, start,
      arith::MulIOp::create(
          b, loc, arith::DivUIOp::create(b, loc, length, group), group));
  SmallVector<Value> accs =
      loop(start, groupsEnd, kReductionUnroll, identities(b));
  return loop(groupsEnd, end, 1, accs);
}

/// What each combiner combines into its output at the parallel indices
/// `pivs` and the flat reduction index `r`.
SmallVector<Value> KernelLowering::elementsAt(OpBuilder &b, ValueRange pivs,
                                              Value r) {
  SmallVector<Value> rivs = delinearize(b, loc, r, redSizes);
  return bodyAt(b, loc, op, merge(b, pivs, rivs), {}, combiners);
}

/// The warp's lanes' `partials` combined by halves with `gpu.shuffle xor`
/// 16, 8, 4, 2, 1: every lane ends with the total.
SmallVector<Value> KernelLowering::butterfly(OpBuilder &b,
                                             ValueRange partials) {
  SmallVector<Value> totals(partials);
  for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2)
    for (auto [o, t] : llvm::enumerate(totals))
      t = combine(b, loc, combiners[o], t, shuffleXor(b, loc, t, offset));
  return totals;
}

/// A builder inside `if (lane == 0)`.
OpBuilder KernelLowering::firstLane(OpBuilder &b, Value lane) {
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                      constIndex(b, loc, 0));
  auto ifOp = scf::IfOp::create(b, loc, first, /*withElse=*/false);
  return OpBuilder(ifOp.thenBlock()->getTerminator());
}

/// The warp's lanes' `partials` combined (butterfly); lane 0 combines the
/// output's initial value at `pivs` with the total and stores.
void KernelLowering::warpCombineAndStore(OpBuilder &b, ValueRange pivs,
                                         Value lane, ValueRange partials) {
  SmallVector<Value> totals = butterfly(b, partials);
  OpBuilder tb = firstLane(b, lane);
  SmallVector<Value> ivs = merge(tb, pivs, {});
  SmallVector<Value> accs = initialValues(tb, ivs, /*needed=*/true);
  SmallVector<Value> results;
  for (auto [o, acc] : llvm::enumerate(accs))
    results.push_back(combineLike(tb, o, acc, totals[o]));
  store(tb, results, ivs);
}

void KernelLowering::serial(OpBuilder &b) {
  launch(b, 1, 1, [&](OpBuilder &kb, Value, Value, Value) {
    SmallVector<Value> lbs, ubs, steps;
    for (int64_t s : ranges) {
      lbs.push_back(constIndex(kb, loc, 0));
      ubs.push_back(constIndex(kb, loc, s));
      steps.push_back(constIndex(kb, loc, 1));
    }
    scf::buildLoopNest(
        kb, loc, lbs, ubs, steps, [&](OpBuilder &nb, Location, ValueRange ivs) {
          SmallVector<Value> accs = initialValues(nb, ivs, /*needed=*/true);
          store(nb, bodyAt(nb, loc, op, ivs, accs), ivs);
        });
  });
}

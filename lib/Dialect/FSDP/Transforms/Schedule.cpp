//===- Schedule.cpp - overlap collectives with compute --------------------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

using mlir::fsdp::detail::BlockOrder;
using mlir::fsdp::detail::derivesGathered;
using mlir::fsdp::detail::hoistBefore;
using mlir::fsdp::detail::isHoistable;

/// Bytes of a statically shaped tensor of int or float elements (sub-byte
/// elements packed); saturates instead of overflowing, 0 for other types.
int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (!t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return 0;
  int64_t bits = 0;
  if (llvm::MulOverflow(t.getNumElements(), (int64_t)t.getElementTypeBitWidth(),
                        bits))
    return std::numeric_limits<int64_t>::max();
  return bits / 8 + (bits % 8 != 0);
}

struct Gather {
  Operation *start = nullptr, *wait = nullptr;
  int64_t bytes = 0;
  Operation *lastUse = nullptr;
};

struct SchedulePass : public mlir::fsdp::impl::FSDPScheduleBase<SchedulePass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (prefetch < 0 || memoryLimit < 0)
      return emitError(UnknownLoc::get(ctx))
             << "options prefetch and memory-limit must not be negative";
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.isExternal() && func.getBody().hasOneBlock())
      scheduleFunction(func);
  }

  /// Replaces a collective by start + wait at its position.
  std::pair<Operation *, Operation *> split(CollectiveOpInterface op,
                                            BlockOrder &order) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type resultType = op.getCollectiveOutput().getType();
    // The candidates are blocking all-gathers and reductions: each has a
    // started form.
    Operation *start = createStartedCollective(b, op);
    for (NamedAttribute a : op->getDiscardableAttrs())
      start->setAttr(a.getName(), a.getValue());
    Operation *wait = WaitOp::create(b, loc, resultType, start->getResult(0),
                                     start->getResult(1));
    op.getCollectiveOutput().replaceAllUsesWith(wait->getResult(0));
    order.erase(op);
    ++numStarted;
    return {start, wait};
  }

  /// Moves `op` (after its pure, same-block operand chain) as early as its
  /// operands allow. `hoisted` remembers ops already as early as they go.
  void hoistEarly(Operation *op, BlockOrder &order,
                  llvm::SmallPtrSetImpl<Operation *> &hoisted) {
    Block *block = op->getBlock();
    Operation *latest = nullptr;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != block)
        continue;
      if (isHoistable(def) && hoisted.insert(def).second)
        hoistEarly(def, order, hoisted);
      if (!latest || order.isBefore(latest, def))
        latest = def;
    }
    if (latest)
      order.moveAfter(op, latest);
    else
      order.moveBefore(op, &block->front());
  }

  /// Moves `op` and everything that transitively uses it in its block to just
  /// before the terminator, keeping their order.
  void sinkToEnd(Operation *op, BlockOrder &order) {
    Block *block = op->getBlock();
    llvm::SetVector<Operation *> moving;
    moving.insert(op);
    for (size_t i = 0; i < moving.size(); ++i)
      for (Value r : moving[i]->getResults())
        for (Operation *user : r.getUsers()) {
          Operation *top = block->findAncestorOpInBlock(*user);
          if (top && top != block->getTerminator())
            moving.insert(top);
        }
    SmallVector<Operation *> ordered(moving.begin(), moving.end());
    order.sort(ordered);
    for (Operation *m : ordered)
      order.moveBefore(m, block->getTerminator());
  }

  /// The last op (in the block) that reads the gathered parameter.
  Operation *lastUseOf(Operation *wait, BlockOrder &order) {
    Block *block = wait->getBlock();
    Operation *last = wait;
    SmallVector<Value> worklist = {wait->getResult(0)};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (Operation *user : v.getUsers()) {
        Operation *top = block->findAncestorOpInBlock(*user);
        if (!top)
          continue;
        if (order.isBefore(last, top))
          last = top;
        if (derivesGathered(user))
          for (Value r : user->getResults())
            worklist.push_back(r);
      }
    }
    return last;
  }

  /// The earliest point at or after `target` where gather `i` can start
  /// without more than memory-limit bytes of gathered parameters alive at
  /// any point between it and the gather's own position. Earlier gathers are
  /// already placed; later ones start after gather `i`.
  Operation *boundedStart(ArrayRef<Gather> scheduled, size_t i,
                          Operation *target, BlockOrder &order) {
    const Gather &g = scheduled[i];
    int64_t allowed = memoryLimit - g.bytes;
    int64_t lo = order.position(target), hi = order.position(g.start);
    // Earlier gathers alive somewhere in [target, g.start).
    SmallVector<const Gather *> overlapping;
    for (const Gather &o : scheduled.take_front(i))
      if (order.position(o.start) < hi && order.position(o.lastUse) >= lo)
        overlapping.push_back(&o);
    // Live bytes only drop after a last use, so the last point that breaks
    // the bound is a last use or the op just before the gather.
    SmallVector<Operation *> candidates;
    if (Operation *prev = g.start->getPrevNode())
      candidates.push_back(prev);
    for (const Gather *o : overlapping)
      candidates.push_back(o->lastUse);
    Operation *lastBad = nullptr;
    for (Operation *c : candidates) {
      int64_t at = order.position(c);
      if (at < lo || at >= hi || (lastBad && order.isBefore(c, lastBad)))
        continue;
      int64_t live = 0;
      for (const Gather *o : overlapping)
        if (order.position(o->start) <= at && at <= order.position(o->lastUse))
          live += o->bytes;
      if (live > allowed)
        lastBad = c;
    }
    return lastBad ? lastBad->getNextNode() : target;
  }

  /// Splits the body's blocking tensor collectives into parameter gathers
  /// and gradient reductions, in program order.
  void collectCollectives(Block &body,
                          SmallVectorImpl<CollectiveOpInterface> &gathers,
                          SmallVectorImpl<CollectiveOpInterface> &reductions) {
    // Only the blocking tensor collectives the fsdp passes created; a
    // quantized gather stays blocking.
    for (Operation &op : body) {
      auto c = dyn_cast<CollectiveOpInterface>(&op);
      if (!c || !c.isMovable() || c.isAsync() || c.isOnBuffers())
        continue;
      if (c.getCollectiveKind() == CollectiveKind::all_gather)
        gathers.push_back(c);
      else if (c.getCollectiveKind() == CollectiveKind::reduce_scatter ||
               c.getCollectiveKind() == CollectiveKind::all_reduce)
        reductions.push_back(c);
    }
  }

  /// Gradient reductions start once their inputs exist. Waits go to the
  /// end of the step in the order the collectives started: reduce-scatters
  /// first, then all-reduces, so that an HSDP all-reduce (which reads a
  /// reduce-scatter's result and starts right after its wait) is in flight
  /// while later reduce-scatters are waited on.
  void scheduleReductions(ArrayRef<CollectiveOpInterface> reductions,
                          BlockOrder &order) {
    SmallVector<std::pair<Operation *, Operation *>> scatters, allReduces;
    for (CollectiveOpInterface op : reductions)
      (op.getCollectiveKind() == CollectiveKind::reduce_scatter ? scatters
                                                                : allReduces)
          .push_back(split(op, order));
    llvm::SmallPtrSet<Operation *, 32> hoisted;
    for (auto [start, wait] : llvm::concat<std::pair<Operation *, Operation *>>(
             scatters, allReduces))
      hoistEarly(start, order, hoisted);
    auto byStart = [&](const std::pair<Operation *, Operation *> &a,
                       const std::pair<Operation *, Operation *> &b) {
      return order.isBefore(a.first, b.first);
    };
    llvm::stable_sort(scatters, byStart);
    for (auto [start, wait] : scatters)
      sinkToEnd(wait, order);
    llvm::stable_sort(allReduces, byStart);
    for (auto [start, wait] : allReduces)
      sinkToEnd(wait, order);
  }

  /// Splits the parameter gathers (in program order: forward, then
  /// backward) into start + wait and records their sizes and last uses.
  SmallVector<Gather> splitGathers(ArrayRef<CollectiveOpInterface> gathers,
                                   BlockOrder &order) {
    SmallVector<Gather> scheduled;
    for (CollectiveOpInterface op : gathers) {
      auto [start, wait] = split(op, order);
      scheduled.push_back({start, wait, bytesOf(wait->getResult(0)), nullptr});
    }
    for (Gather &g : scheduled)
      g.lastUse = lastUseOf(g.wait, order);
    return scheduled;
  }

  /// Moves the start of gather `i` up to `prefetch` gathers ahead, within
  /// what its input and the memory limit allow.
  void prefetchGather(MutableArrayRef<Gather> scheduled, size_t i, Block &body,
                      BlockOrder &order) {
    Gather &g = scheduled[i];
    // Start `prefetch` gathers ahead: before the wait of gather
    // i - prefetch, i.e. while that unit computes; the first ones at the
    // top of the step. Never before the previous gather's start: gathers
    // are issued in program order, the order in which they are needed.
    Operation *target =
        i >= (size_t)prefetch ? scheduled[i - prefetch].wait : &body.front();
    if (i > 0 && !order.isBefore(scheduled[i - 1].start, target))
      target = scheduled[i - 1].start->getNextNode();
    if (!order.isBefore(target, g.start))
      return;
    // Bring the input's (argument-derived) computation up to the target;
    // if that is impossible, start right after the input exists.
    if (!hoistBefore(g.start->getOperand(0), target, order))
      target = g.start->getOperand(0).getDefiningOp()->getNextNode();
    if (!order.isBefore(target, g.start))
      return; // already as early as allowed
    if (memoryLimit > 0)
      target = boundedStart(scheduled, i, target, order);
    order.moveBefore(g.start, target);
    ++numPrefetched;
  }

  void scheduleFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    BlockOrder order(body);
    SmallVector<CollectiveOpInterface> gathers, reductions;
    collectCollectives(body, gathers, reductions);
    scheduleReductions(reductions, order);
    SmallVector<Gather> scheduled = splitGathers(gathers, order);
    if (prefetch == 0)
      return;
    for (size_t i = 0; i < scheduled.size(); ++i)
      prefetchGather(scheduled, i, body, order);
  }
};
} // namespace

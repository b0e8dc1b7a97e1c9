//===- Schedule.cpp - overlap collectives with compute --------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr StringLiteral kPhase = "fsdp.phase";

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() *
         std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

/// Ops that only rearrange, cast or slice a gathered parameter: values they
/// produce still hold (part of) it.
bool isUnpackOp(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::ConcatOp, tensor::InsertSliceOp,
             linalg::TransposeOp, arith::ExtFOp, arith::TruncFOp>(op);
}

/// Moves `op` (after its pure, same-block operand chain) as early as its
/// operands allow.
void hoistEarly(Operation *op) {
  Block *block = op->getBlock();
  Operation *latest = nullptr;
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def->getBlock() != block)
      continue;
    if (isMemoryEffectFree(def) && def->getNumRegions() == 0)
      hoistEarly(def);
    if (!latest || latest->isBeforeInBlock(def))
      latest = def;
  }
  if (latest)
    op->moveAfter(latest);
  else
    op->moveBefore(&block->front());
}

/// Moves the pure ops computing `v` before `point` when they come after it.
bool hoistBefore(Value v, Operation *point) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() ||
      def->isBeforeInBlock(point))
    return true;
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return false;
  for (Value operand : def->getOperands())
    if (!hoistBefore(operand, point))
      return false;
  def->moveBefore(point);
  return true;
}

/// Moves `op` and everything that transitively uses it in its block to just
/// before the terminator, keeping their order.
void sinkToEnd(Operation *op) {
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
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *m : ordered)
    m->moveBefore(block->getTerminator());
}

struct Gather {
  Operation *start = nullptr, *wait = nullptr;
  int64_t bytes = 0;
  Operation *lastUse = nullptr;
};

struct SchedulePass
    : public mlir::fsdp::impl::FSDPScheduleBase<SchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    if (prefetch < 0 || memoryLimit < 0) {
      getOperation().emitError()
          << "options prefetch and memory-limit must not be negative";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        scheduleFunction(func);
  }

  /// Replaces a tagged collective by start + wait at its position.
  std::pair<Operation *, Operation *> split(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value in = op->getOperand(0);
    Type resultType = op->getResult(0).getType();
    auto mesh = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    auto reduce = op->getAttrOfType<ReduceKindAttr>("reduce");
    Type request = RequestType::get(op->getContext());
    Operation *start;
    if (isa<AllGatherOp>(op))
      start = AllGatherStartOp::create(b, loc, request, resultType, in, mesh,
                                       axes);
    else if (isa<ReduceScatterOp>(op))
      start = ReduceScatterStartOp::create(b, loc, request, resultType, in,
                                           mesh, axes, reduce);
    else
      start = AllReduceStartOp::create(b, loc, request, resultType, in, mesh,
                                       axes, reduce);
    for (NamedAttribute a : op->getDiscardableAttrs())
      start->setAttr(a.getName(), a.getValue());
    Operation *wait = WaitOp::create(b, loc, resultType, start->getResult(0),
                                     start->getResult(1));
    op->getResult(0).replaceAllUsesWith(wait->getResult(0));
    op->erase();
    return {start, wait};
  }

  /// The last op (in the block) that reads the gathered parameter.
  Operation *lastUseOf(Operation *wait) {
    Block *block = wait->getBlock();
    Operation *last = wait;
    SmallVector<Value> worklist = {wait->getResult(0)};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (Operation *user : v.getUsers()) {
        Operation *top = block->findAncestorOpInBlock(*user);
        if (!top)
          continue;
        if (last->isBeforeInBlock(top))
          last = top;
        if (isUnpackOp(user))
          for (Value r : user->getResults())
            worklist.push_back(r);
      }
    }
    return last;
  }

  void scheduleFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> gathers, reductions;
    for (Operation &op : body) {
      if (!op.getAttr(kPhase))
        continue;
      if (isa<AllGatherOp>(op))
        gathers.push_back(&op);
      else if (isa<ReduceScatterOp, AllReduceOp>(op))
        reductions.push_back(&op);
    }

    // Gradient reductions: start once the inputs exist, wait at the end.
    // An HSDP all-reduce reads a reduce-scatter's result, so it starts after
    // that wait.
    for (Operation *op : reductions) {
      auto [start, wait] = split(op);
      hoistEarly(start);
      sinkToEnd(wait);
    }

    // Parameter gathers, in program order (forward, then backward).
    SmallVector<Gather> scheduled;
    SmallVector<Operation *> originalPos;
    for (Operation *op : gathers) {
      auto [start, wait] = split(op);
      scheduled.push_back({start, wait, bytesOf(wait->getResult(0)), nullptr});
    }
    for (Gather &g : scheduled)
      g.lastUse = lastUseOf(g.wait);
    for (size_t i = 0; i < scheduled.size(); ++i) {
      Gather &g = scheduled[i];
      // Start `prefetch` gathers ahead: before the wait of gather
      // i - prefetch, i.e. while that unit computes.
      Operation *target =
          i >= (size_t)prefetch && prefetch > 0
              ? scheduled[i - prefetch].wait
              : (prefetch > 0 ? &body.front() : g.start);
      if (!target->isBeforeInBlock(g.start))
        continue;
      // Bring the input's (argument-derived) computation up to the target;
      // if that is impossible, start right after the input exists.
      if (!hoistBefore(g.start->getOperand(0), target)) {
        Operation *def = g.start->getOperand(0).getDefiningOp();
        target = def->getNextNode();
      }
      if (!target->isBeforeInBlock(g.start))
        continue; // already as early as allowed
      // Respect the memory bound: gathered bytes alive at the start point
      // (earlier gathers started and not yet fully used) plus this one.
      if (memoryLimit > 0) {
        while (target != g.start) {
          int64_t live = g.bytes;
          Operation *firstFree = nullptr;
          for (size_t j = 0; j < i; ++j) {
            Gather &o = scheduled[j];
            bool started =
                o.start == target || o.start->isBeforeInBlock(target);
            bool alive = target == o.lastUse || target->isBeforeInBlock(o.lastUse);
            if (started && alive) {
              live += o.bytes;
              if (!firstFree || o.lastUse->isBeforeInBlock(firstFree))
                firstFree = o.lastUse;
            }
          }
          if (live <= memoryLimit || !firstFree)
            break;
          target = firstFree->getNextNode();
          if (!target || g.start->isBeforeInBlock(target) ||
              target == g.start->getNextNode())
            target = g.start;
        }
      }
      if (target != g.start)
        g.start->moveBefore(target);
    }
  }
};
} // namespace

//===- Recompute.cpp - activation recompute per FSDP unit -----------------===//
//
// Activation checkpointing on one rank's step, before partitioning: the
// values a selected unit's forward computes for the backward are recomputed
// in the backward from the unit's inputs instead of being kept alive from
// the forward (docs/SEMANTICS.md, "Activation recompute").
//
//===----------------------------------------------------------------------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPRECOMPUTE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

using mlir::fsdp::detail::BlockOrder;

constexpr int kNoUnit = -1;

/// Every value an op reads, including values from above used in its
/// regions.
void forEachOperand(Operation *op, function_ref<void(Value)> fn) {
  op->walk([&](Operation *nested) {
    for (Value v : nested->getOperands()) {
      // Values defined inside `op` itself are not inputs of `op`.
      if (Operation *def = v.getDefiningOp()) {
        if (op->isAncestor(def))
          continue;
      } else if (op->isAncestor(
                     cast<BlockArgument>(v).getOwner()->getParentOp())) {
        continue;
      }
      fn(v);
    }
  });
}

/// The unit names of a function's arguments (empty: none).
SmallVector<StringAttr> argUnits(func::FuncOp func) {
  SmallVector<StringAttr> units;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    units.push_back(func.getArgAttrOfType<StringAttr>(i, kUnitAttrName));
  return units;
}

struct RecomputePass
    : public mlir::fsdp::impl::FSDPRecomputeBase<RecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool all = units.empty();
    llvm::StringSet<> requested;
    for (const std::string &u : units) {
      if (u == "all") {
        all = true;
        continue;
      }
      requested.insert(u);
    }
    if (all && !requested.empty()) {
      module.emitError() << "option units: 'all' cannot be combined with "
                            "unit names";
      return signalPassFailure();
    }

    llvm::StringSet<> known;
    SmallVector<std::string> knownOrder;
    func::FuncOp firstWithUnits;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (StringAttr u : argUnits(func))
        if (u) {
          if (!firstWithUnits)
            firstWithUnits = func;
          if (known.insert(u.getValue()).second)
            knownOrder.push_back(u.str());
        }
    }
    for (const std::string &u : units) {
      if (u == "all" || known.contains(u))
        continue;
      Operation *at = firstWithUnits ? firstWithUnits.getOperation()
                                     : module.getOperation();
      InFlightDiagnostic diag = at->emitError()
                                << "fsdp-recompute: unknown FSDP unit '" << u
                                << "' in option units; ";
      if (knownOrder.empty())
        diag << "no argument has an fsdp.unit";
      else
        diag << "the units are: " << llvm::join(knownOrder, ", ");
      return signalPassFailure();
    }

    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      llvm::SetVector<StringAttr> selected;
      for (StringAttr u : argUnits(func))
        if (u && (all || requested.contains(u.getValue())))
          selected.insert(u);
      if (selected.empty())
        continue;
      if (failed(recompute(func, selected)))
        return signalPassFailure();
    }
  }

  /// The index of the loss result, when the pass can apply to `func`.
  FailureOr<unsigned> checkStep(func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitError()
             << "fsdp-recompute needs a function body with a single block "
                "(use structured control flow); this one has "
             << func.getBody().getBlocks().size() << " blocks";
    if (!isa<func::ReturnOp>(func.getBody().front().getTerminator()))
      return func.emitError() << "fsdp-recompute needs a func.return "
                                 "terminator";
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (func.getResultAttr(i, kLossAttrName)) {
        if (lossIndex)
          return func.emitError()
                 << "more than one result is marked " << kLossAttrName;
        lossIndex = i;
      }
    if (!lossIndex)
      return func.emitError()
             << "fsdp-recompute needs a result marked " << kLossAttrName
             << " to tell the forward (what the loss depends on) from the "
                "backward";
    return *lossIndex;
  }

  /// Units in forward order: by their parameters' first forward use.
  static DenseMap<StringAttr, int>
  rankUnits(Block &body, ArrayRef<StringAttr> argUnit,
            const llvm::SetVector<Operation *> &forward) {
    DenseMap<StringAttr, int> unitRank;
    for (Operation &op : body) {
      if (!forward.contains(&op))
        continue;
      forEachOperand(&op, [&](Value v) {
        auto arg = dyn_cast<BlockArgument>(v);
        if (arg && arg.getOwner() == &body && argUnit[arg.getArgNumber()])
          unitRank.try_emplace(argUnit[arg.getArgNumber()], unitRank.size());
      });
    }
    return unitRank;
  }

  /// Where each forward op belongs, and which ops depend on an argument.
  struct UnitAssignment {
    DenseMap<Operation *, int> unitOf;
    DenseSet<Operation *> dependsOnArgs, readsParameters;
  };

  /// The unit of every forward op (that of the parameters it reads, else
  /// that of its operands), and which ops depend on no argument (constants,
  /// empties, fills: cloned with the unit that uses them).
  static UnitAssignment
  assignDirectUnits(Block &body, ArrayRef<StringAttr> argUnit,
                    const DenseMap<StringAttr, int> &unitRank,
                    const llvm::SetVector<Operation *> &forward) {
    UnitAssignment units;
    for (Operation &op : body) {
      int direct = kNoUnit, inherited = kNoUnit;
      bool usesArgs = false;
      forEachOperand(&op, [&](Value v) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          usesArgs = true;
          if (arg.getOwner() != &body)
            return;
          StringAttr u = argUnit[arg.getArgNumber()];
          if (u && unitRank.count(u))
            direct = std::max(direct, unitRank.lookup(u));
          return;
        }
        Operation *def = body.findAncestorOpInBlock(*v.getDefiningOp());
        if (!def)
          return;
        if (units.dependsOnArgs.contains(def))
          usesArgs = true;
        auto it = units.unitOf.find(def);
        if (it != units.unitOf.end())
          inherited = std::max(inherited, it->second);
      });
      if (usesArgs)
        units.dependsOnArgs.insert(&op);
      if (forward.contains(&op))
        units.unitOf[&op] = direct != kNoUnit ? direct : inherited;
      if (direct != kNoUnit)
        units.readsParameters.insert(&op);
    }
    return units;
  }

  /// An op that reads no parameter and whose forward users all belong to
  /// one unit belongs to that unit (the statistics of a norm before its
  /// weight, an activation before the next matmul); a value users of two
  /// units read (a residual stream) stays where it was computed.
  static void assignUsersUnits(Block &body,
                               const llvm::SetVector<Operation *> &forward,
                               UnitAssignment &units) {
    for (Operation &op : llvm::reverse(body)) {
      if (!forward.contains(&op) || units.readsParameters.contains(&op))
        continue;
      std::optional<int> single;
      bool several = false;
      for (Value result : op.getResults())
        for (Operation *user : result.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (!top || top == &op || !forward.contains(top))
            continue;
          int u = units.unitOf.lookup(top);
          if (single && *single != u)
            several = true;
          single = u;
        }
      if (single && !several && *single != kNoUnit)
        units.unitOf[&op] = *single;
    }
  }

  LogicalResult recompute(func::FuncOp func,
                          const llvm::SetVector<StringAttr> &selected) {
    FailureOr<unsigned> lossIndex = checkStep(func);
    if (failed(lossIndex))
      return failure();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Forward: every op the loss depends on (as fsdp-partition decides).
    llvm::SetVector<Operation *> forward;
    if (Operation *def = ret.getOperand(*lossIndex).getDefiningOp()) {
      BackwardSliceOptions options;
      options.inclusive = true;
      options.omitUsesFromAbove = false;
      (void)getBackwardSlice(def, &forward, options);
    }
    auto isForward = [&](Operation *op) {
      Operation *top = body.findAncestorOpInBlock(*op);
      return top && forward.contains(top);
    };

    SmallVector<StringAttr> argUnit = argUnits(func);
    DenseMap<StringAttr, int> unitRank = rankUnits(body, argUnit, forward);
    UnitAssignment units = assignDirectUnits(body, argUnit, unitRank, forward);
    assignUsersUnits(body, forward, units);

    for (StringAttr unit : selected) {
      auto rankIt = unitRank.find(unit);
      if (rankIt == unitRank.end())
        continue; // no forward op reads its parameters
      if (failed(recomputeUnit(func, body, unit, rankIt->second, forward,
                               units.unitOf, units.dependsOnArgs, isForward)))
        return failure();
    }
    return success();
  }

  /// Values to recompute: the unit's values with a backward use (a use by
  /// an op outside the forward other than the return) and no forward use
  /// outside the unit (its outputs, which the next unit reads, stay as they
  /// are), with the backward uses to redirect. Sets `insertPoint` to the
  /// first op with such a use.
  static llvm::MapVector<Value, SmallVector<OpOperand *>>
  valuesToRecompute(Block &body, function_ref<bool(Operation *)> inUnit,
                    function_ref<bool(Operation *)> isForward,
                    Operation *&insertPoint) {
    llvm::MapVector<Value, SmallVector<OpOperand *>> recomputed;
    insertPoint = nullptr;
    for (Operation &op : body) {
      if (!inUnit(&op))
        continue;
      for (Value result : op.getResults()) {
        SmallVector<OpOperand *> backwardUses;
        bool output = false;
        for (OpOperand &use : result.getUses()) {
          Operation *top = body.findAncestorOpInBlock(*use.getOwner());
          // Returned values (the loss, outputs) are not kept for the
          // backward: they are results.
          if (top == body.getTerminator())
            continue;
          if (isForward(use.getOwner())) {
            if (!inUnit(top))
              output = true;
          } else {
            backwardUses.push_back(&use);
          }
        }
        if (output || backwardUses.empty())
          continue;
        for (OpOperand *use : backwardUses) {
          Operation *top = body.findAncestorOpInBlock(*use->getOwner());
          if (!insertPoint || top->isBeforeInBlock(insertPoint))
            insertPoint = top;
        }
        recomputed[result] = std::move(backwardUses);
      }
    }
    return recomputed;
  }

  /// The ops to clone: the unit's ops (and the argument-free ops they use)
  /// that the recomputed values depend on.
  static DenseSet<Operation *>
  opsToClone(Block &body,
             const llvm::MapVector<Value, SmallVector<OpOperand *>> &recomputed,
             function_ref<bool(Operation *)> inUnit,
             const DenseSet<Operation *> &dependsOnArgs) {
    DenseSet<Operation *> toClone;
    SmallVector<Operation *> worklist;
    for (auto &entry : recomputed)
      worklist.push_back(entry.first.getDefiningOp());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!toClone.insert(op).second)
        continue;
      forEachOperand(op, [&](Value v) {
        Operation *def = v.getDefiningOp();
        if (!def)
          return;
        Operation *top = body.findAncestorOpInBlock(*def);
        if (top && (inUnit(top) || !dependsOnArgs.contains(top)))
          worklist.push_back(top);
      });
    }
    return toClone;
  }

  /// Each clone moves down to just before its first user, last clone
  /// first: a value the backward needs late is recomputed late.
  static void sinkClones(Block &body, ArrayRef<Operation *> clones) {
    BlockOrder order(body);
    for (Operation *clone : llvm::reverse(clones)) {
      Operation *first = nullptr;
      for (Operation *user : clone->getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && (!first || order.isBefore(top, first)))
          first = top;
      }
      if (first && order.isBefore(clone, first))
        order.moveBefore(clone, first);
    }
  }

  LogicalResult recomputeUnit(func::FuncOp func, Block &body, StringAttr unit,
                              int rank,
                              const llvm::SetVector<Operation *> &forward,
                              const DenseMap<Operation *, int> &unitOf,
                              const DenseSet<Operation *> &dependsOnArgs,
                              function_ref<bool(Operation *)> isForward) {
    auto inUnit = [&](Operation *top) {
      auto it = unitOf.find(top);
      return it != unitOf.end() && it->second == rank;
    };
    Operation *insertPoint;
    llvm::MapVector<Value, SmallVector<OpOperand *>> recomputed =
        valuesToRecompute(body, inUnit, isForward, insertPoint);
    if (recomputed.empty())
      return success();
    DenseSet<Operation *> toClone =
        opsToClone(body, recomputed, inUnit, dependsOnArgs);
    // A tensor-parallel collective of the forward runs again in the
    // recomputed forward, as Megatron's and TransformerEngine's recompute
    // do: every rank clones the same collectives in the same order.
    for (Operation *op : toClone)
      if (!isMemoryEffectFree(op) && !isa<CollectiveOpInterface>(op))
        return op->emitError()
               << "fsdp-recompute cannot recompute this op of unit '"
               << unit.getValue()
               << "': it has memory effects (or unknown ones)";

    OpBuilder b(insertPoint);
    IRMapping mapping;
    SmallVector<Operation *> clones;
    for (Operation &op : body) {
      if (!toClone.contains(&op))
        continue;
      Operation *clone = b.clone(op, mapping);
      clone->setAttr(kRecomputeAttrName, unit);
      clones.push_back(clone);
      ++numCloned;
    }
    for (auto &[value, uses] : recomputed) {
      Value replacement = mapping.lookup(value);
      for (OpOperand *use : uses)
        use->set(replacement);
      ++numValues;
    }
    sinkClones(body, clones);
    ++numUnits;
    (void)func;
    return success();
  }
};
} // namespace

//===- RematElementwise.cpp - recompute elementwise values where read -----===//
//
// A value one segment of a step computes and a later segment reads is kept
// in memory between them. When it is a chain of elementwise ops over values
// the later segment reads anyway, that segment recomputes it: the chain is
// cloned before its first reader there (docs/GPU.md, "The stages").
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREMATELEMENTWISE
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// An op that ends a segment (fsdp-outline-segments takes runs of the
/// others): an fsdp op, a call, an op with memory effects.
bool endsSegment(Operation &op) {
  if (isa_and_nonnull<linalg::LinalgDialect, tensor::TensorDialect>(
          op.getDialect()))
    return !isMemoryEffectFree(&op);
  if (op.getDialect() && op.getDialect()->getNamespace() == "fsdp")
    return true;
  return isa<func::CallOp>(op) || !isMemoryEffectFree(&op);
}

/// A linalg.generic on tensors whose loops are all parallel and whose body
/// does not read its outputs: cloning it recomputes the same values.
bool isElementwise(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumLoops() != generic.getNumParallelLoops() ||
      generic->getNumResults() != 1)
    return false;
  for (OpOperand &init : generic.getDpsInitsMutable())
    if (generic.payloadUsesValueFromOperand(&init))
      return false;
  return true;
}

/// A value a segment makes itself (fsdp-outline-segments rematerializes
/// constants and empty tensors in each segment).
bool isFree(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 &&
         (def->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(def));
}

/// An op that computes its result from its operands alone, element by
/// element: an arith or math op on tensors, or an elementwise generic whose
/// outputs are empty tensors (which it does not read).
bool isDedupCandidate(Operation &op) {
  if (op.getNumResults() != 1 ||
      !isa<RankedTensorType>(op.getResult(0).getType()))
    return false;
  if (isa<arith::ArithDialect, math::MathDialect>(op.getDialect()))
    return op.getNumRegions() == 0 && isMemoryEffectFree(&op);
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && isElementwise(generic) &&
         llvm::all_of(generic.getDpsInits(), [](Value init) {
           return init.getDefiningOp<tensor::EmptyOp>();
         });
}

/// Replaces each dedup candidate equal to an earlier one (the same op on
/// the same values, empty output tensors of the same type alike) by it.
/// Returns how many it replaced.
unsigned dedupElementwise(Block &body) {
  DenseMap<std::pair<OperationName, Value>, SmallVector<Operation *, 2>> seen;
  unsigned replaced = 0;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isDedupCandidate(op) || op.getNumOperands() == 0)
      continue;
    auto key = std::make_pair(op.getName(), op.getOperand(0));
    Operation *equal = nullptr;
    for (Operation *earlier : seen[key]) {
      DenseMap<Value, Value> same;
      auto check = [&](Value a, Value b) -> LogicalResult {
        if (a == b || same.lookup(a) == b)
          return success();
        auto ea = a.getDefiningOp<tensor::EmptyOp>();
        auto eb = b.getDefiningOp<tensor::EmptyOp>();
        return success(ea && eb && a.getType() == b.getType());
      };
      auto mark = [&](Value a, Value b) { same[a] = b; };
      if (OperationEquivalence::isEquivalentTo(
              earlier, &op, check, mark,
              OperationEquivalence::IgnoreLocations)) {
        equal = earlier;
        break;
      }
    }
    if (!equal) {
      seen[key].push_back(&op);
      continue;
    }
    op.getResult(0).replaceAllUsesWith(equal->getResult(0));
    op.erase();
    ++replaced;
  }
  return replaced;
}

struct FSDPRematElementwisePass
    : public mlir::fsdp::impl::FSDPRematElementwiseBase<
          FSDPRematElementwisePass> {
  using Base::Base;

  /// Each op's segment: the number of segment-ending ops before it.
  DenseMap<Operation *, unsigned> segment;

  /// Whether an op of segment `s` reads `v`.
  bool readIn(Value v, unsigned s) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      auto it = segment.find(user);
      return it != segment.end() && it->second == s;
    });
  }

  /// The elementwise ops (in program order) that recompute `v` in segment
  /// `s` from values it reads anyway; empty when there are none or more
  /// than max-ops.
  SmallVector<Operation *> chain(Value v, unsigned s) {
    llvm::SetVector<Operation *> ops;
    SmallVector<Value> work{v};
    while (!work.empty()) {
      Value x = work.pop_back_val();
      Operation *def = x.getDefiningOp();
      if (ops.contains(def))
        continue;
      auto it = segment.find(def);
      if (!isElementwise(def) || it == segment.end() || it->second >= s ||
          ops.size() >= maxOps)
        return {};
      ops.insert(def);
      for (Value in : cast<linalg::GenericOp>(def).getDpsInputs())
        if (!isFree(in) && !readIn(in, s))
          work.push_back(in);
    }
    SmallVector<Operation *> sorted(ops.begin(), ops.end());
    llvm::sort(sorted, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    return sorted;
  }

  /// A member of a bucket packed in segment `s` that an earlier segment
  /// computed from the function's arguments alone (a parameter rounded to
  /// bf16, which the forward's bucket packs too) through static reshapes:
  /// the elementwise op and the reshapes, in program order; empty otherwise.
  SmallVector<Operation *> argumentChain(Value v, unsigned s) {
    SmallVector<Operation *> ops;
    while (auto reshape = v.getDefiningOp()) {
      if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(reshape) ||
          reshape->getNumOperands() != 1)
        break;
      ops.push_back(reshape);
      v = reshape->getOperand(0);
    }
    Operation *def = v.getDefiningOp();
    auto it = segment.find(def);
    if (it == segment.end() || it->second >= s)
      return {};
    // An arith or math op on tensors (a rounding before elementwise ops
    // become linalg) or an elementwise generic, reading arguments only.
    auto arguments = [](ValueRange values) {
      return llvm::all_of(values,
                          [](Value in) { return isa<BlockArgument>(in); });
    };
    bool tensorOp = isa_and_nonnull<arith::ArithDialect, math::MathDialect>(
                        def->getDialect()) &&
                    def->getNumResults() == 1 && def->getNumRegions() == 0 &&
                    isMemoryEffectFree(def) && arguments(def->getOperands());
    bool generic = isElementwise(def) &&
                   arguments(cast<linalg::GenericOp>(def).getDpsInputs());
    if (!tensorOp && !generic)
      return {};
    ops.push_back(def);
    std::reverse(ops.begin(), ops.end());
    return ops;
  }

  /// Recomputes each such member right before its bucket's packing: the
  /// arguments are live for the whole step, so nothing is kept longer, the
  /// rounded copy is not kept from the earlier segment to this one, and the
  /// rounding writes its slot of the bucket (fsdp-pack-in-place) instead of
  /// being copied in.
  void recomputeBucketMembers(Block &body) {
    for (Operation &op : body) {
      auto concat = dyn_cast<tensor::ConcatOp>(op);
      auto it = segment.find(&op);
      if (!concat || it == segment.end())
        continue;
      for (OpOperand &use : concat->getOpOperands()) {
        SmallVector<Operation *> ops = argumentChain(use.get(), it->second);
        if (ops.empty())
          continue;
        OpBuilder b(concat);
        IRMapping map;
        for (Operation *o : ops)
          segment[b.clone(*o, map)] = it->second;
        use.set(map.lookup(use.get()));
        ++numRecomputed;
      }
    }
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty() || !func.getBody().hasOneBlock())
      return;
    Block &body = func.getBody().front();
    numDeduplicated += dedupElementwise(body);
    unsigned s = 0;
    for (Operation &op : body) {
      if (endsSegment(op)) {
        ++s;
        continue;
      }
      segment[&op] = s;
    }
    recomputeBucketMembers(body);
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto it = segment.find(&op);
      if (it == segment.end())
        continue;
      unsigned here = it->second;
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        Operation *def = v.getDefiningOp();
        auto d = segment.find(def);
        if (!isElementwise(def) || d == segment.end() || d->second >= here)
          continue;
        SmallVector<Operation *> ops = chain(v, here);
        if (ops.empty())
          continue;
        // Before the first reader in this segment (an earlier clone that
        // took `v` as an input among them), and every reader there reads
        // the clone.
        auto inHere = [&](Operation *user) {
          auto us = segment.find(user);
          return us != segment.end() && us->second == here;
        };
        Operation *first = &op;
        for (Operation *user : v.getUsers())
          if (inHere(user) && user->isBeforeInBlock(first))
            first = user;
        OpBuilder b(first);
        IRMapping map;
        for (Operation *o : ops)
          segment[b.clone(*o, map)] = here;
        Value clone = map.lookup(v);
        v.replaceUsesWithIf(clone, [&](OpOperand &u) {
          return inHere(u.getOwner()) && u.getOwner() != clone.getDefiningOp();
        });
        ++numRecomputed;
      }
    }
  }
};

} // namespace

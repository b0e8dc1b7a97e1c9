//===- FuseElementwise.cpp - fuse elementwise producers into consumers ----===//
//
// Upstream elementwise fusion (`linalg::populateElementwiseOpsFusionPatterns`)
// with one rule of its own: a producer is fused only into a consumer that
// is not a contraction, so multiply-accumulate bodies stay recognizable for
// the BLAS lowering, and only when the consumer is its single use, so no
// work is duplicated. Chains of `linalg.generic` elementwise ops (and the
// elementwise part that feeds a reduction such as a softmax or a norm)
// become one loop nest and one buffer.
//
// With `multi-use`, a producer with several uses is also fused into a
// consumer without reduction loops, the fused op yielding the producer's
// result for its other uses (upstream keeps such results): one kernel
// instead of two, the intermediate written once and not read back. Before
// any fusion, reshapes between elementwise ops are folded into them (the op
// takes the expanded shape), and a consumer may read several results of
// one producer (the fused op computes them instead of reading them).
//
// Before fusing, a `linalg.fill` of a `tensor.empty` with several uses is
// duplicated, one fill (and empty tensor) per use: exported programs share
// one zero (or -inf) tensor among all the matmuls and reductions that
// accumulate into it, which bufferizes to one filled buffer copied for
// every consumer; with its own fill each consumer accumulates in place.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEELEMENTWISE
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPFuseElementwisePass
    : public mlir::fsdp::impl::FSDPFuseElementwiseBase<
          FSDPFuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    if (multiUse && failed(expandReshapedOps()))
      return signalPassFailure();
    duplicateSharedFills();
    if (failed(fuseSingleUses()))
      return signalPassFailure();
    if (!multiUse)
      return;
    // A widening producer read by several ops is recomputed in each.
    if (duplicateWidenings() && failed(fuseSingleUses()))
      return signalPassFailure();
    // Fusing a producer with other uses can leave single-use chains behind
    // (and the other way round).
    while (fuseOneMultiUse()) {
      while (fuseOneMultiUse()) {
      }
      if (failed(fuseSingleUses()))
        return signalPassFailure();
    }
  }

  /// Folds the reshapes between elementwise ops into them, before any
  /// fusion: a gemm's 2-d result read as the 3-d activation (a bias add in
  /// 2-d, then GELU in 3-d) is one chain of 3-d ops, which fuse as one.
  LogicalResult expandReshapedOps() {
    RewritePatternSet patterns(&getContext());
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns,
                                                      isElementwiseReshape);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    return applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }

  /// Upstream's patterns, for producers whose single use is the consumer.
  LogicalResult fuseSingleUses() {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *use) {
      Operation *producer = use->get().getDefiningOp();
      auto consumer = dyn_cast<linalg::LinalgOp>(use->getOwner());
      if (!producer || !consumer || !producer->hasOneUse())
        return false;
      return !linalg::isaContractionOpInterface(consumer);
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    return applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }

  /// A reshape between an elementwise generic op and its producer or
  /// consumer (a gemm's 2-d result read as the 3-d activation): the generic
  /// op takes the expanded shape, so that it fuses with its neighbours.
  static bool isElementwiseReshape(OpOperand *use) {
    auto generic = dyn_cast<linalg::GenericOp>(use->getOwner());
    if (!generic)
      generic = use->get().getDefiningOp<linalg::GenericOp>();
    return generic && generic.getNumReductionLoops() == 0 &&
           !linalg::isaContractionOpInterface(generic);
  }

  /// Whether `op` only widens or narrows its one input element by element
  /// (extf, extsi, extui, truncf, ...: one cast per element, nothing else)
  /// into an element at least as wide: recomputing it in each of its
  /// consumers reads no more than reading its result back.
  static bool isWidening(linalg::GenericOp op) {
    if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
        op.getNumReductionLoops() != 0 || !op.hasPureTensorSemantics())
      return false;
    Block *body = op.getBlock();
    if (!llvm::hasSingleElement(body->without_terminator()))
      return false;
    Operation &cast = body->front();
    if (!isa<arith::ExtFOp, arith::ExtSIOp, arith::ExtUIOp>(cast))
      return false;
    return cast.getOperand(0) == body->getArgument(0) &&
           body->getTerminator()->getOperand(0) == cast.getResult(0);
  }

  /// Gives every use of a widening producer with several uses, all of them
  /// ops it can be fused into, a copy of its own: a norm's input widened to
  /// f64 for its mean and its variance is then read as f32 by both instead
  /// of written and read back as f64. Returns whether it duplicated any.
  bool duplicateWidenings() {
    SmallVector<linalg::GenericOp> producers;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (isWidening(op) && !op->hasOneUse() &&
          llvm::all_of(op->getUses(), [](OpOperand &use) {
            auto consumer = dyn_cast<linalg::LinalgOp>(use.getOwner());
            return consumer && !linalg::isaContractionOpInterface(consumer) &&
                   linalg::areElementwiseOpsFusable(&use);
          }))
        producers.push_back(op);
    });
    for (linalg::GenericOp producer : producers) {
      SmallVector<OpOperand *> uses = llvm::map_to_vector(
          producer->getUses(), [](OpOperand &u) { return &u; });
      for (OpOperand *use : ArrayRef(uses).drop_front()) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*producer)->getResult(0));
      }
    }
    return !producers.empty();
  }

  /// A use of a generic op's result that has other uses too, by a generic
  /// op without reduction loops that reads it through a permutation (so the
  /// producer's result becomes an output over the same loops, each element
  /// written once), every other use after the consumer in its block (the
  /// fused op, at the consumer, defines what they read).
  static bool isMultiUseCandidate(OpOperand &use) {
    auto consumer = dyn_cast<linalg::GenericOp>(use.getOwner());
    auto producer = use.get().getDefiningOp<linalg::GenericOp>();
    if (!consumer || !producer || producer->hasOneUse() ||
        !consumer.isDpsInput(&use) || !consumer.hasPureTensorSemantics() ||
        !producer.hasPureTensorSemantics() ||
        consumer.getNumReductionLoops() != 0 ||
        linalg::isaContractionOpInterface(consumer) ||
        !consumer.getMatchingIndexingMap(&use).isPermutation() ||
        !linalg::areElementwiseOpsFusable(&use))
      return false;
    // Every other read of the producer by the consumer is of another result,
    // through the same map, of a result the producer writes through the
    // same map as this one and computes in its body: the fused op computes
    // that element itself (selfReads).
    AffineMap map = consumer.getMatchingIndexingMap(&use);
    auto result = cast<OpResult>(use.get());
    AffineMap out = producer.getIndexingMapMatchingResult(result);
    for (OpOperand &other : consumer->getOpOperands()) {
      if (&other == &use || other.get().getDefiningOp() != producer)
        continue;
      auto r = cast<OpResult>(other.get());
      if (r == result || !consumer.isDpsInput(&other) ||
          consumer.getMatchingIndexingMap(&other) != map ||
          producer.getIndexingMapMatchingResult(r) != out ||
          isa<BlockArgument>(producerYield(producer, r.getResultNumber())))
        return false;
    }
    if (!producer.getBody()->getOps<linalg::IndexOp>().empty())
      return false;
    for (Operation *user : producer->getUsers())
      if (user != consumer && !usedAfter(user, consumer))
        return false;
    return true;
  }

  /// Whether `user` (of a producer fused into `consumer`) comes after the
  /// consumer in its block, or is a reshape (a view, moved after the
  /// consumer before fusing: movedReshapes) whose users all do.
  static bool usedAfter(Operation *user, Operation *consumer) {
    Block *block = consumer->getBlock();
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    if (!ancestor || ancestor == consumer)
      return false;
    if (consumer->isBeforeInBlock(ancestor))
      return true;
    if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user) ||
        user->getBlock() != block)
      return false;
    return llvm::all_of(user->getUsers(), [&](Operation *u) {
      return u != consumer && usedAfter(u, consumer);
    });
  }

  /// Moves the reshapes of `producer` that come before `consumer` (and the
  /// reshapes of them) right after it, in their order.
  static void moveReshapesAfter(Operation *producer, Operation *consumer) {
    SmallVector<Operation *> reshapes;
    SmallVector<Operation *> work(producer->getUsers().begin(),
                                  producer->getUsers().end());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (op == consumer || op->getBlock() != consumer->getBlock() ||
          !op->isBeforeInBlock(consumer) ||
          !isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op) ||
          llvm::is_contained(reshapes, op))
        continue;
      reshapes.push_back(op);
      work.append(op->getUsers().begin(), op->getUsers().end());
    }
    llvm::sort(reshapes, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    Operation *after = consumer;
    for (Operation *op : reshapes) {
      op->moveAfter(after);
      after = op;
    }
  }

  /// Fuses the first candidate (in program order) into one op that yields
  /// the consumer's results and the producer's, and points every use of
  /// either at it. Returns whether it fused.
  bool fuseOneMultiUse() {
    OpOperand *found = nullptr;
    getOperation()->walk([&](linalg::GenericOp consumer) {
      for (OpOperand *input : consumer.getDpsInputOperands())
        if (isMultiUseCandidate(*input)) {
          found = input;
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (!found)
      return false;
    Operation *consumer = found->getOwner();
    auto producer = cast<linalg::GenericOp>(found->get().getDefiningOp());
    moveReshapesAfter(producer, consumer);
    IRRewriter rewriter(&getContext());
    rewriter.setInsertionPoint(consumer);
    FailureOr<linalg::ElementwiseOpFusionResult> fused =
        linalg::fuseElementwiseOps(rewriter, found);
    if (failed(fused))
      return false;
    auto fusedOp = cast<linalg::GenericOp>(fused->fusedOp);
    for (Value r : consumer->getResults())
      rewriter.replaceAllUsesWith(r, fused->replacements.lookup(r));
    rewriter.eraseOp(consumer);
    fusedOp = selfReads(rewriter, fusedOp, producer, *fused);
    for (Value r : producer->getResults())
      if (Value with = fused->replacements.lookup(r))
        rewriter.replaceAllUsesWith(r, with);
    if (producer->use_empty())
      rewriter.eraseOp(producer);
    return true;
  }

  /// The value the body of `producer` yields for its result `i`.
  static Value producerYield(linalg::GenericOp producer, unsigned i) {
    return producer.getBody()->getTerminator()->getOperand(i);
  }

  /// The fused op of `producer` and a consumer that read other results of
  /// the producer too: those inputs become the values the fused body
  /// computes for them (the producer's body comes first in the fused body,
  /// op for op), and the inputs are dropped. Returns the op that replaces
  /// `fusedOp` (itself when it has no such input).
  static linalg::GenericOp selfReads(IRRewriter &rewriter,
                                     linalg::GenericOp fusedOp,
                                     linalg::GenericOp producer,
                                     linalg::ElementwiseOpFusionResult &fused) {
    Block *body = fusedOp.getBody();
    SmallVector<Operation *> producerOps =
        llvm::map_to_vector(producer.getBody()->without_terminator(),
                            [](Operation &op) { return &op; });
    SmallVector<Operation *> fusedOps = llvm::map_to_vector(
        body->without_terminator(), [](Operation &op) { return &op; });
    if (fusedOps.size() < producerOps.size())
      return fusedOp;
    for (auto [p, f] : llvm::zip(producerOps, fusedOps))
      if (p->getName() != f->getName() ||
          p->getNumResults() != f->getNumResults())
        return fusedOp;
    SmallVector<unsigned> dropped;
    for (OpOperand *input : fusedOp.getDpsInputOperands()) {
      auto r = dyn_cast<OpResult>(input->get());
      if (!r || r.getOwner() != producer.getOperation())
        continue;
      auto def =
          dyn_cast<OpResult>(producerYield(producer, r.getResultNumber()));
      if (!def)
        continue;
      unsigned index =
          llvm::find(producerOps, def.getOwner()) - producerOps.begin();
      Value computed = fusedOps[index]->getResult(def.getResultNumber());
      fusedOp.getMatchingBlockArgument(input).replaceAllUsesWith(computed);
      dropped.push_back(input->getOperandNumber());
    }
    if (dropped.empty())
      return fusedOp;
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *input : fusedOp.getDpsInputOperands())
      if (!llvm::is_contained(dropped, input->getOperandNumber())) {
        inputs.push_back(input->get());
        maps.push_back(fusedOp.getMatchingIndexingMap(input));
      }
    for (OpOperand &init : fusedOp.getDpsInitsMutable())
      maps.push_back(fusedOp.getMatchingIndexingMap(&init));
    rewriter.setInsertionPoint(fusedOp);
    auto rebuilt = linalg::GenericOp::create(
        rewriter, fusedOp.getLoc(), fusedOp->getResultTypes(), inputs,
        fusedOp.getDpsInits(), maps, fusedOp.getIteratorTypesArray());
    rebuilt->setDiscardableAttrs(fusedOp->getDiscardableAttrDictionary());
    rewriter.inlineRegionBefore(fusedOp.getRegion(), rebuilt.getRegion(),
                                rebuilt.getRegion().end());
    Block *moved = rebuilt.getBody();
    for (unsigned i : llvm::reverse(dropped))
      moved->eraseArgument(i);
    for (auto &[from, to] : fused.replacements)
      if (to.getDefiningOp() == fusedOp.getOperation())
        to = rebuilt->getResult(cast<OpResult>(to).getResultNumber());
    rewriter.replaceOp(fusedOp, rebuilt->getResults());
    return rebuilt;
  }

  /// One fill of its own empty tensor per use of a shared fill.
  void duplicateSharedFills() {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && fill->getNumResults() == 1 &&
          fill.getOutputs().front().getDefiningOp<tensor::EmptyOp>() &&
          !fill->getResult(0).use_empty() && !fill->getResult(0).hasOneUse())
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills) {
      auto empty = fill.getOutputs().front().getDefiningOp<tensor::EmptyOp>();
      SmallVector<OpOperand *> uses = llvm::map_to_vector(
          fill->getResult(0).getUses(), [](OpOperand &u) { return &u; });
      // One use keeps the original.
      for (OpOperand *use : ArrayRef(uses).drop_front()) {
        OpBuilder b(use->getOwner());
        IRMapping map;
        map.map(empty.getResult(), b.clone(*empty)->getResult(0));
        use->set(b.clone(*fill, map)->getResult(0));
      }
    }
  }
};

} // namespace

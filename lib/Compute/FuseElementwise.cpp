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
    duplicateSharedFills();
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
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }

  /// One fill of its own empty tensor per use of a shared fill.
  void duplicateSharedFills() {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && fill->getNumResults() == 1 &&
          fill.getOutputs().front().getDefiningOp<tensor::EmptyOp>() &&
          !fill->getResult(0).hasOneUse())
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

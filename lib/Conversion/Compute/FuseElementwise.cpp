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
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEELEMENTWISE
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPFuseElementwisePass
    : public mlir::fsdp::impl::FSDPFuseElementwiseBase<
          FSDPFuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
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
};

} // namespace

//===- ApproximateMath.cpp - f32 math functions as polynomials ------------===//
//
// `math.exp`, `math.erf`, `math.log`, `math.tanh` (and a few relatives) on
// f32 become upstream's polynomial approximations
// (`populateMathPolynomialApproximationPatterns`): plain arithmetic that
// LLVM vectorizes with the loop around it, where a call to libm's `expf` or
// `erff` keeps the loop scalar. The approximations are accurate to a few
// ulp of f32 and handle infinities and NaN (exp(-inf) = 0 for a masked
// softmax). f64 and other element types keep their libm calls.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPAPPROXIMATEMATH
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPApproximateMathPass
    : public mlir::fsdp::impl::FSDPApproximateMathBase<
          FSDPApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return llvm::is_contained(
          {math::ErfOp::getOperationName(), math::ErfcOp::getOperationName(),
           math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
           math::LogOp::getOperationName(), math::Log1pOp::getOperationName(),
           math::Log2Op::getOperationName(), math::TanhOp::getOperationName()},
          name);
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

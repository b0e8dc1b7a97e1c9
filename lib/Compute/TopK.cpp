//===- TopK.cpp - the form of each fsdp.topk_indices for the target -------===//
//
// fsdp.topk_indices picks the indices aten's CPU topk kernel picks. The
// frontend gives each op a `stable` operand too: the same selection with
// equal values in position order, built from elementwise ops. On the CPU
// paths the op runs the runtime's kernel after bufferization, so `stable` is
// dropped here and its computation dies; under compute=gpu, where host code
// cannot read the input, the op is replaced by `stable`.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/ExpertPasses.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPTOPK
#include "fsdp/Compute/ExpertPasses.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPTopkPass : public mlir::fsdp::impl::FSDPTopkBase<FSDPTopkPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<TopkIndicesOp> ops;
    getOperation()->walk([&](TopkIndicesOp op) { ops.push_back(op); });
    for (TopkIndicesOp op : ops) {
      Value stable = op.getStable();
      if (!device) {
        if (stable)
          op.getStableMutable().clear();
        ++numKernels;
        continue;
      }
      if (!stable) {
        op.emitOpError()
            << "has no compute=gpu lowering without its stable form: the "
               "runtime's topk kernel runs on the host";
        return signalPassFailure();
      }
      op.getResult().replaceAllUsesWith(stable);
      op.erase();
      ++numStable;
    }
  }
};

} // namespace

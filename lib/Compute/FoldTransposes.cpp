//===- FoldTransposes.cpp - read transposed operands in place -------------===//
//
// A `linalg.transpose` on tensors whose result feeds an input of another
// linalg op is folded into that op's indexing map: the consumer (made a
// `linalg.generic` if it is a named op) reads the transpose's source with
// permuted indices, and the transpose disappears once it has no other use.
// PyTorch exports spell `x @ w.T` as `linalg.transpose` + `linalg.matmul`;
// after this pass the matmul reads `w` with a transposed map, which the
// BLAS lowering passes as CblasTrans without materializing a copy.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFOLDTRANSPOSES
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The transpose that defines input `operand`, if it is one on tensors.
linalg::TransposeOp transposeOf(OpOperand &operand) {
  auto t = operand.get().getDefiningOp<linalg::TransposeOp>();
  if (t && t.hasPureTensorSemantics())
    return t;
  return nullptr;
}

struct FSDPFoldTransposesPass
    : public mlir::fsdp::impl::FSDPFoldTransposesBase<FSDPFoldTransposesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> consumers;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics() || isa<linalg::TransposeOp>(op))
        return;
      for (OpOperand *in : op.getDpsInputOperands())
        if (transposeOf(*in)) {
          consumers.push_back(op);
          return;
        }
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : consumers) {
      auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
      if (!generic) {
        rewriter.setInsertionPoint(op);
        FailureOr<linalg::GenericOp> g =
            linalg::generalizeNamedOp(rewriter, op);
        if (failed(g))
          continue;
        generic = *g;
      }
      SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
      bool changed = false;
      for (OpOperand *in : generic.getDpsInputOperands()) {
        linalg::TransposeOp t = transposeOf(*in);
        if (!t)
          continue;
        // result[i] = source[perm[i]]: the source's dimension perm[i] is
        // read with the consumer's expression for the result's dimension i.
        ArrayRef<int64_t> perm = t.getPermutation();
        AffineMap old = maps[in->getOperandNumber()];
        SmallVector<AffineExpr> exprs(old.getNumResults());
        for (auto [i, p] : llvm::enumerate(perm))
          exprs[p] = old.getResult(i);
        maps[in->getOperandNumber()] =
            AffineMap::get(old.getNumDims(), 0, exprs, &getContext());
        rewriter.modifyOpInPlace(generic, [&] { in->set(t.getInput()); });
        changed = true;
      }
      if (changed)
        generic.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    }
    // Transposes that no longer have a use.
    getOperation()->walk([&](linalg::TransposeOp t) {
      if (t.hasPureTensorSemantics() && t->use_empty())
        t->erase();
    });
  }
};

} // namespace

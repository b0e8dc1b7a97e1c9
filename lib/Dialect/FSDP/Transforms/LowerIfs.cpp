//===- LowerIfs.cpp - function-level scf.if to cf branches ----------------===//
//
// The lowering of convert-scf-to-cf for an scf.if, with an IRRewriter that
// has no listener: a block split then moves the operations after the split
// in one splice, where the dialect conversion moves (and records) them one
// by one. Lowering a block's scf.if ops from its end moves each operation
// once: linear in the length of the block.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLOWERIFS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Replaces `ifOp` by a conditional branch to its regions' blocks, which
/// branch to the rest of its block (with the yielded values as arguments).
void lowerIf(IRRewriter &rewriter, scf::IfOp ifOp) {
  Location loc = ifOp.getLoc();
  Block *condBlock = ifOp->getBlock();
  Block *rest = rewriter.splitBlock(condBlock, std::next(ifOp->getIterator()));
  Block *continueBlock = rest;
  if (ifOp.getNumResults() != 0) {
    SmallVector<Location> locs(ifOp.getNumResults(), loc);
    continueBlock = rewriter.createBlock(rest, ifOp.getResultTypes(), locs);
    cf::BranchOp::create(rewriter, loc, rest);
  }
  // Each region's last block branches to the continuation with what it
  // yields; an empty else region branches there directly.
  auto inlineRegion = [&](Region &region) -> Block * {
    if (region.empty())
      return continueBlock;
    Block *first = &region.front();
    Operation *yield = region.back().getTerminator();
    rewriter.setInsertionPointToEnd(&region.back());
    cf::BranchOp::create(rewriter, loc, continueBlock, yield->getOperands());
    rewriter.eraseOp(yield);
    rewriter.inlineRegionBefore(region, continueBlock);
    return first;
  };
  Block *thenBlock = inlineRegion(ifOp.getThenRegion());
  Block *elseBlock = inlineRegion(ifOp.getElseRegion());
  rewriter.setInsertionPoint(ifOp);
  cf::CondBranchOp::create(rewriter, loc, ifOp.getCondition(), thenBlock,
                           ValueRange(), elseBlock, ValueRange());
  rewriter.replaceOp(ifOp, continueBlock->getArguments());
}

struct FSDPLowerIfsPass
    : public mlir::fsdp::impl::FSDPLowerIfsBase<FSDPLowerIfsPass> {
  using FSDPLowerIfsBase::FSDPLowerIfsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    IRRewriter rewriter(func.getContext());
    // Outermost first: an scf.if nested in a lowered one is then directly
    // in the function's region, and is lowered in the next round.
    for (;;) {
      SmallVector<scf::IfOp> ifs;
      for (Block &block : func.getBody())
        for (Operation &op : block)
          if (auto ifOp = dyn_cast<scf::IfOp>(op))
            ifs.push_back(ifOp);
      if (ifs.empty())
        break;
      // Last first: a split moves the operations after the scf.if to a new
      // block (updating each one's parent), so lowering from the end of a
      // block moves each operation once.
      for (scf::IfOp ifOp : llvm::reverse(ifs))
        lowerIf(rewriter, ifOp);
      numIfs += ifs.size();
    }
  }
};

} // namespace

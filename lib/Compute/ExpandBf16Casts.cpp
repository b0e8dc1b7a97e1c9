//===- ExpandBf16Casts.cpp - conversions to bf16 through f32 --------------===//
//
// arith-expand writes `arith.truncf` f32 -> bf16 as integer operations
// (round to nearest even), so a CPU without AVX512-BF16 needs no library
// call for it. A conversion from an integer (a boolean mask stored in bf16)
// or from f64 it leaves alone, and LLVM lowers those on such a CPU to a call
// of `__truncsfbf2` / `__truncdfbf2`, which neither libgcc nor the process
// defines: a step library compiled for a generic x86-64 failed to link, and
// a JIT on an older CPU would fail to resolve it. Converting through f32
// first is also what torch does (`c10::BFloat16` rounds a float), so the
// values are torch's on every CPU.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEXPANDBF16CASTS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// `type` with its element type replaced by f32 (scalars, vectors, tensors).
Type withF32Elements(Type type) {
  Type f32 = Float32Type::get(type.getContext());
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(f32);
  return f32;
}

struct FSDPExpandBf16CastsPass
    : public mlir::fsdp::impl::FSDPExpandBf16CastsBase<
          FSDPExpandBf16CastsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> casts;
    getOperation()->walk([&](Operation *op) {
      if (!isa<arith::SIToFPOp, arith::UIToFPOp, arith::TruncFOp>(op))
        return;
      if (!getElementTypeOrSelf(op->getResult(0)).isBF16())
        return;
      if (isa<arith::TruncFOp>(op) &&
          getElementTypeOrSelf(op->getOperand(0)).isF32())
        return;
      casts.push_back(op);
    });
    for (Operation *op : casts) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      Type wide = withF32Elements(op->getResult(0).getType());
      Value in = op->getOperand(0), f32;
      if (isa<arith::SIToFPOp>(op))
        f32 = arith::SIToFPOp::create(b, loc, wide, in);
      else if (isa<arith::UIToFPOp>(op))
        f32 = arith::UIToFPOp::create(b, loc, wide, in);
      else
        f32 = arith::TruncFOp::create(b, loc, wide, in);
      Value bf16 =
          arith::TruncFOp::create(b, loc, op->getResult(0).getType(), f32);
      op->getResult(0).replaceAllUsesWith(bf16);
      op->erase();
      ++numExpanded;
    }
  }
};

} // namespace

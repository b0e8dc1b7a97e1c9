//===- CopiesToLoops.cpp - strided memref.copy to a linalg.copy -----------===//
//
// `memref.copy` between two buffers that are both contiguous lowers to one
// `memcpy`; any other copy lowers to a call of `memrefCopy`, MLIR's generic
// runtime function, which copies one element at a time and recomputes its
// address from the strides each time. The packing and unpacking of
// gathered parameter buckets (rows of a [ranks, bucket] buffer) are such
// copies. This pass turns every copy of static shape that is not a plain
// `memcpy` into `linalg.copy`, lowered to a loop nest whose innermost,
// unit-stride loop LLVM vectorizes.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCOPIESTOLOOPS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FSDPCopiesToLoopsPass
    : public mlir::fsdp::impl::FSDPCopiesToLoopsBase<FSDPCopiesToLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      auto src = dyn_cast<MemRefType>(copy.getSource().getType());
      auto dst = dyn_cast<MemRefType>(copy.getTarget().getType());
      // Unranked or dynamic copies keep the runtime function; contiguous
      // ones are a memcpy already.
      if (!src || !dst || !src.hasStaticShape() || !dst.hasStaticShape() ||
          src.getRank() == 0 || !src.isStrided() || !dst.isStrided())
        return;
      if (memref::isStaticShapeAndContiguousRowMajor(src) &&
          memref::isStaticShapeAndContiguousRowMajor(dst))
        return;
      copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    }
  }
};

} // namespace

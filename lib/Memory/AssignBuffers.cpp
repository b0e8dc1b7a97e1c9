//===- AssignBuffers.cpp - one planned arena of buffers per rank ----------===//
//
// The pass applies the buffer plan of BufferPlan.h to the module: every
// step-local buffer of static size becomes a view of its group's arena
// (docs/PASSES.md, "fsdp-assign-buffers").
//
//===----------------------------------------------------------------------===//

#include "BufferPlan.h"
#include "fsdp/Memory/Passes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPASSIGNBUFFERS
#include "fsdp/Memory/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr int64_t kMaxAlignment = 4096;

struct FSDPAssignBuffersPass
    : public mlir::fsdp::impl::FSDPAssignBuffersBase<FSDPAssignBuffersPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (alignment < 1 || alignment > kMaxAlignment ||
        !llvm::isPowerOf2_64(uint64_t(int64_t(alignment))))
      return emitError(UnknownLoc::get(ctx))
             << "option alignment must be a power of two between 1 and "
             << kMaxAlignment << " bytes, got " << int64_t(alignment);
    return success();
  }

  void runOnOperation() override {
    ArenaCounts counts;
    if (failed(applyBufferPlan(getOperation(),
                               {alignment, poison, entryResults}, counts)))
      signalPassFailure();
    numPlanned += counts.planned;
    numOutParams += counts.outParams;
    numRepeatedCalls += counts.repeatedCalls;
    numOutside += counts.outside;
  }
};

} // namespace

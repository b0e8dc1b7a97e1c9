//===- TopKToRuntime.cpp - fsdp.buffer.topk_indices as runtime calls ------===//
//
// Each `fsdp.buffer.topk_indices` becomes one call of the runtime's
// `fsdprt_jit_topk_indices` (fsdprt.h), which selects every row's indices
// with aten's CPU algorithm, so that ties and NaN resolve as in torch. The
// kernel reads contiguous rows along the last dim: an input that is a
// strided view is copied into a row-major buffer first (freed after the
// call); the output is the fresh buffer bufferization allocated. With
// `sort` (torch.sort with stable=False) the call is `fsdprt_jit_sort_indices`,
// aten's std::sort of every row.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/ExpertPasses.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdprt_types.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPTOPKTORUNTIME
#include "fsdp/Compute/ExpertPasses.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The runtime's code of the element type, where the kernel reads it.
std::optional<int32_t> dtypeCode(Type t) {
  std::optional<int32_t> code = runtimeDtypeCode(t);
  if (!code || *code == FSDPRT_U8 || *code == FSDPRT_I8)
    return std::nullopt;
  return code;
}

/// `v` as a buffer the kernel can read from its start: itself when it is a
/// contiguous row-major buffer, else a copy into a new one (`copied`).
Value contiguous(OpBuilder &b, Location loc, Value v, bool &copied) {
  auto type = cast<MemRefType>(v.getType());
  copied = !type.areTrailingDimsContiguous(type.getRank());
  if (!copied)
    return v;
  auto plain = MemRefType::get(type.getShape(), type.getElementType());
  Value copy = memref::AllocOp::create(b, loc, plain);
  memref::CopyOp::create(b, loc, v, copy);
  return copy;
}

struct FSDPTopkToRuntimePass
    : public mlir::fsdp::impl::FSDPTopkToRuntimeBase<FSDPTopkToRuntimePass> {
  using Base::Base;

  LogicalResult lower(BufferTopkIndicesOp op) {
    auto inType = cast<MemRefType>(op.getInput().getType());
    auto outType = cast<MemRefType>(op.getOutput().getType());
    if (!inType.hasStaticShape() || !outType.hasStaticShape())
      return op.emitOpError() << "needs static shapes to become a runtime "
                                 "call, got "
                              << inType << " and " << outType;
    std::optional<int32_t> dtype = dtypeCode(inType.getElementType());
    if (!dtype)
      return op.emitOpError()
             << "has no runtime kernel for element type "
             << inType.getElementType()
             << ": the runtime's topk and sort read f32, f64, bf16, f16, "
                "i32 and i64";
    if (!outType.areTrailingDimsContiguous(outType.getRank()))
      return op.emitOpError() << "writes a strided output " << outType
                              << "; the runtime kernel writes contiguous rows";
    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t rank = inType.getRank();
    int64_t n = inType.getDimSize(rank - 1);
    int64_t k = outType.getDimSize(rank - 1);
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < rank; ++d)
      rows *= inType.getDimSize(d);
    bool copied = false;
    Value input = contiguous(b, loc, op.getInput(), copied);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    int64_t bytes = inType.getElementTypeBitWidth() / 8;
    Value in = elementPointer(b, loc, input, zero, bytes);
    Value out = elementPointer(b, loc, op.getOutput(), zero, 8);
    int32_t largest = op.getLargest() ? 1 : 0;
    if (op.getSort())
      createRuntimeCall(b, loc, RuntimeFunction::sort_indices,
                        {in, *dtype, rows, n, largest, out});
    else
      createRuntimeCall(
          b, loc, RuntimeFunction::topk_indices,
          {in, *dtype, rows, n, k, largest, op.getSorted() ? 1 : 0, out});
    if (copied)
      memref::DeallocOp::create(b, loc, input);
    op.erase();
    ++numCalls;
    return success();
  }

  void runOnOperation() override {
    SmallVector<BufferTopkIndicesOp> ops;
    getOperation().walk([&](BufferTopkIndicesOp op) { ops.push_back(op); });
    for (BufferTopkIndicesOp op : ops)
      if (failed(lower(op)))
        return signalPassFailure();
  }
};

} // namespace

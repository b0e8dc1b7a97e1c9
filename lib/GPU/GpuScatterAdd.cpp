//===- GpuScatterAdd.cpp - scatter-add of rows to the device kernel -------===//
//
// Under compute=gpu the embedding backward is an `fsdp.scatter_add_rows`
// (fsdp-one-hot-scatter{device=true}), bufferized in place into its init.
// Host loops over device buffers cannot run it, and the one-hot matrix
// product it replaced is O(tokens x vocabulary x width); the runtime's
// `fsdprt_gpu_scatter_add_rows_*` sorts the tokens by (index, position) on
// the device and adds each index's rows in token order (no float atomics:
// the same sum as the host loop's, from run to run). This pass turns the
// buffer op into that call, with the buffers' sizes and strides.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUSCATTERADD
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The runtime entry point for the element type, or "" if it has none.
std::optional<RuntimeFunction> scatterFunction(Type element) {
  if (element.isF32())
    return RuntimeFunction::gpu_scatter_add_rows_f32;
  if (element.isBF16())
    return RuntimeFunction::gpu_scatter_add_rows_bf16;
  return std::nullopt;
}

struct FSDPGpuScatterAddPass
    : public mlir::fsdp::impl::FSDPGpuScatterAddBase<FSDPGpuScatterAddPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<BufferScatterAddRowsOp> ops;
    module.walk([&](BufferScatterAddRowsOp op) { ops.push_back(op); });
    for (BufferScatterAddRowsOp op : ops)
      if (failed(lower(module, op)))
        return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module, BufferScatterAddRowsOp op) {
    auto outType = cast<MemRefType>(op.getOutput().getType());
    auto idxType = cast<MemRefType>(op.getIndices().getType());
    std::optional<RuntimeFunction> fn =
        scatterFunction(outType.getElementType());
    if (!fn)
      return op.emitOpError("has no device scatter-add for element type ")
             << outType.getElementType() << " (f32 and bf16 have one)";
    int64_t bits = runtimeIndexBits(idxType.getElementType());
    if (!bits)
      return op.emitOpError("has no device scatter-add for indices of type ")
             << idxType.getElementType() << " (i32, i64 and index have one)";
    func::FuncOp callee = declareRuntimeFunction(module, *fn);
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto i32 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, v, 32);
    };
    auto i64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, v, 64);
    };
    auto toI64 = [&](Value index) -> Value {
      return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
    };
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    // A static size or stride is a constant (what the cost report reads),
    // a dynamic one is read from the buffer's metadata.
    auto sizeOf = [&](Value buffer, unsigned dim) -> Value {
      auto type = cast<MemRefType>(buffer.getType());
      if (!type.isDynamicDim(dim))
        return i64(type.getDimSize(dim));
      auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
      return toI64(meta.getSizes()[dim]);
    };
    auto strideOf = [&](Value buffer, unsigned dim) -> Value {
      auto type = cast<MemRefType>(buffer.getType());
      SmallVector<int64_t> strides;
      int64_t offset;
      if (succeeded(type.getStridesAndOffset(strides, offset)) &&
          !ShapedType::isDynamic(strides[dim]))
        return i64(strides[dim]);
      auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
      return toI64(meta.getStrides()[dim]);
    };
    // Rows: source [tokens, width], output [slots, width]; columns: the
    // token and slot dim is the second.
    unsigned tokenDim = op.getColumns() ? 1 : 0;
    unsigned widthDim = 1 - tokenDim;
    int64_t elemBytes = outType.getElementTypeBitWidth() / 8;
    Value src = op.getSource(), out = op.getOutput(), idx = op.getIndices();
    SmallVector<Value> args = {elementPointer(b, loc, idx, zero, bits / 8),
                               i32(bits),
                               strideOf(idx, 0),
                               sizeOf(idx, 0),
                               elementPointer(b, loc, src, zero, elemBytes),
                               strideOf(src, tokenDim),
                               strideOf(src, widthDim),
                               elementPointer(b, loc, out, zero, elemBytes),
                               strideOf(out, tokenDim),
                               strideOf(out, widthDim),
                               sizeOf(out, tokenDim),
                               sizeOf(out, widthDim)};
    func::CallOp::create(b, loc, callee, args);
    op.erase();
    ++numScatters;
    return success();
  }
};

} // namespace

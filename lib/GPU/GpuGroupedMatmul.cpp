//===- GpuGroupedMatmul.cpp - grouped products to the device grouped gemm -===//
//
// Under compute=gpu a sparse mixture of experts' grouped products stay
// `fsdp.grouped_matmul` / `fsdp.grouped_matmul_transpose_lhs` through the
// tensor passes (fsdp-grouped-matmul{device=true}): their group sizes are
// offsets the step computes on the device, which host loops could only
// read by waiting for the stream. Bufferized, each is an
// `fsdp.buffer.grouped_matmul`; this pass turns it into the runtime's
// `fsdprt_gpu_grouped_matmul_*`, whose kernel reads the offsets on the
// device, with the buffers' sizes and strides.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUGROUPEDMATMUL
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The runtime entry point for the element type, if it has one.
std::optional<RuntimeFunction> groupedFunction(Type element) {
  if (element.isF32())
    return RuntimeFunction::gpu_grouped_matmul_f32;
  if (element.isBF16())
    return RuntimeFunction::gpu_grouped_matmul_bf16;
  return std::nullopt;
}

/// Builds the call's size and stride operands: constants where the type
/// knows them (what the cost report reads), the buffer's metadata
/// otherwise.
struct Operands {
  OpBuilder &b;
  Location loc;

  Value i64(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 64); }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); }
  Value toI64(Value index) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  }
  Value size(Value buffer, unsigned dim) {
    auto type = cast<MemRefType>(buffer.getType());
    if (!type.isDynamicDim(dim))
      return i64(type.getDimSize(dim));
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    return toI64(meta.getSizes()[dim]);
  }
  Value stride(Value buffer, unsigned dim) {
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (succeeded(type.getStridesAndOffset(strides, offset)) &&
        !ShapedType::isDynamic(strides[dim]))
      return i64(strides[dim]);
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    return toI64(meta.getStrides()[dim]);
  }
  Value pointer(Value buffer, int64_t bytes) {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    return elementPointer(b, loc, buffer, zero, bytes);
  }
};

struct FSDPGpuGroupedMatmulPass
    : public mlir::fsdp::impl::FSDPGpuGroupedMatmulBase<
          FSDPGpuGroupedMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<BufferGroupedMatmulOp> ops;
    module.walk([&](BufferGroupedMatmulOp op) { ops.push_back(op); });
    for (BufferGroupedMatmulOp op : ops)
      if (failed(lower(module, op)))
        return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module, BufferGroupedMatmulOp op) {
    auto outType = cast<MemRefType>(op.getOutput().getType());
    auto offType = cast<MemRefType>(op.getOffsets().getType());
    std::optional<RuntimeFunction> fn =
        groupedFunction(outType.getElementType());
    if (!fn)
      return op.emitOpError("has no device grouped gemm for element type ")
             << outType.getElementType() << " (f32 and bf16 have one)";
    int64_t bits = runtimeIndexBits(offType.getElementType());
    if (!bits)
      return op.emitOpError("has no device grouped gemm for offsets of type ")
             << offType.getElementType() << " (i32, i64 and index have one)";
    func::FuncOp callee = declareRuntimeFunction(module, *fn);
    OpBuilder b(op);
    Operands o{b, op.getLoc()};
    bool transposed = op.getTransposeLhs();
    Value lhs = op.getLhs(), rhs = op.getRhs(), out = op.getOutput();
    Value offsets = op.getOffsets();
    int64_t elemBytes = outType.getElementTypeBitWidth() / 8;
    // Rows form: rhs [groups, k, n], out [rows, n]; transposed: rhs
    // [rows, n], out [groups, k, n]. The 2-D one's group stride is unused.
    SmallVector<Value> rhsStrides =
        transposed
            ? SmallVector<Value>{o.i64(0), o.stride(rhs, 0), o.stride(rhs, 1)}
            : SmallVector<Value>{o.stride(rhs, 0), o.stride(rhs, 1),
                                 o.stride(rhs, 2)};
    SmallVector<Value> outStrides =
        transposed
            ? SmallVector<Value>{o.stride(out, 0), o.stride(out, 1),
                                 o.stride(out, 2)}
            : SmallVector<Value>{o.i64(0), o.stride(out, 0), o.stride(out, 1)};
    SmallVector<Value> args = {o.i32(transposed ? 1 : 0),
                               o.pointer(offsets, bits / 8),
                               o.i32(bits),
                               o.stride(offsets, 0),
                               o.size(offsets, 0),
                               o.pointer(lhs, elemBytes),
                               o.stride(lhs, 0),
                               o.stride(lhs, 1),
                               o.pointer(rhs, elemBytes)};
    args.append(rhsStrides);
    args.push_back(o.pointer(out, elemBytes));
    args.append(outStrides);
    args.append(
        {o.size(lhs, 0), o.size(lhs, 1), o.size(out, transposed ? 2 : 1)});
    func::CallOp::create(b, op.getLoc(), callee, args);
    op.erase();
    ++numCalls;
    return success();
  }
};

} // namespace

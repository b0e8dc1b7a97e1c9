//===- GpuKernels.cpp - linalg ops on buffers to gpu.launch ---------------===//
//
// Lowers every linalg op on buffers in host code (after fsdp-outline-kernels:
// one op, or a fill and the op accumulating into it, per kernel function) to
// a `gpu.launch` whose iteration space depends on the kind of op:
//
//  - elementwise: one thread per element, flattened row-major over the
//    loops (the last loop fastest, so a warp touches 32 consecutive
//    elements of a row-major output), in a grid-stride loop; where the
//    operands are contiguous and aligned, one thread per 16-byte chunk
//    with vector loads and stores (KernelVectorized.cpp);
//  - row reduction (reduction loops innermost, `acc <op> x` outputs, rows
//    of at least a warp): one warp per output element, lanes striding the
//    row, then a butterfly of `gpu.shuffle xor` and one store by lane 0;
//  - other reductions: one thread per output element, accumulators in
//    registers (a column sum is then coalesced along its columns);
//  - a reduction whose outputs cannot fill the device (a global norm, a
//    loss, a column sum over many rows): split over blocks in two launches,
//    per-warp or per-chunk partials in a device buffer, then combined in a
//    fixed order (deterministic, no atomics);
//  - an output indexed by a reduction loop: one thread.
//
// The body is cloned per element exactly as the host lowerings do
// (LinalgLoops.h). Contiguous copies become device memcpys.
//
// How each op's loops map to threads and the kernels' bodies are in
// KernelLowering.h and the files it names.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/Dialect/FSDP/IR/FSDPMultiTensor.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUKERNELS
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

namespace {

/// A contiguous buffer with an offset (a subview of a packed buffer) as an
/// identity-layout memref at the same address: gpu-to-llvm lowers a
/// gpu.memcpy of identity layouts only.
Value identityView(OpBuilder &b, Location loc, Value v) {
  auto t = cast<MemRefType>(v.getType());
  if (t.getLayout().isIdentity() || t.getMemorySpace())
    return v;
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, v);
  Value bytes =
      arith::MulIOp::create(b, loc, meta.getOffset(),
                            arith::ConstantIndexOp::create(
                                b, loc, (t.getElementTypeBitWidth() + 7) / 8));
  Value addr = arith::IndexCastOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, bytes));
  Value ptr = LLVM::IntToPtrOp::create(b, loc, ptrTy, addr);
  int64_t rank = t.getRank();
  SmallVector<Type> fields = {ptrTy, ptrTy, i64};
  if (rank > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
  }
  auto structTy = LLVM::LLVMStructType::getLiteral(ctx, fields);
  auto constant = [&](int64_t c) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(c));
  };
  Value desc = LLVM::PoisonOp::create(b, loc, structTy);
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
  desc = LLVM::InsertValueOp::create(b, loc, desc, constant(0),
                                     ArrayRef<int64_t>{2});
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(t.getDimSize(d)),
                                       ArrayRef<int64_t>{3, d});
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(stride),
                                       ArrayRef<int64_t>{4, d});
    stride *= t.getDimSize(d);
  }
  auto identity = MemRefType::get(t.getShape(), t.getElementType());
  return UnrealizedConversionCastOp::create(b, loc, identity, desc)
      .getResult(0);
}

bool isHostCode(Operation *op) {
  return !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUModuleOp>();
}

/// Why `op` cannot be a kernel, or "".
std::string unsupported(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return "operands are not buffers";
  if (!op.getBlock())
    return "the op has no body";
  if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return "dynamic loop bounds (compute=gpu needs static shapes)";
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<MemRefType>(v.getType());
        t && !t.getElementType().isIntOrFloat())
      return "an element type that is neither an integer nor a float";
  return "";
}

struct FSDPGpuKernelsPass
    : public mlir::fsdp::impl::FSDPGpuKernelsBase<FSDPGpuKernelsPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (blockSize < kWarpSize || blockSize > 1024 || blockSize % kWarpSize)
      return emitError(UnknownLoc::get(ctx))
             << "option block-size must be a multiple of 32 between 32 and "
                "1024, got "
             << static_cast<int64_t>(blockSize);
    if (maxBlocks < 1 || maxBlocks > std::numeric_limits<int32_t>::max())
      return emitError(UnknownLoc::get(ctx))
             << "option max-blocks must be between 1 and 2^31 - 1, got "
             << static_cast<int64_t>(maxBlocks);
    if (smCount < 1 || smCount > 65536)
      return emitError(UnknownLoc::get(ctx))
             << "option sm-count must be between 1 and 65536, got "
             << static_cast<int64_t>(smCount);
    if (splitMinElements < 1)
      return emitError(UnknownLoc::get(ctx))
             << "option split-min-elements must be at least 1, got "
             << static_cast<int64_t>(splitMinElements);
    return success();
  }

  LaunchLimits limits() const {
    return {blockSize, maxBlocks, smCount, splitMinElements};
  }

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if ((isa<linalg::LinalgOp>(op) || isa<memref::CopyOp>(op)) &&
          isHostCode(op) && !op->getParentOfType<linalg::LinalgOp>())
        ops.push_back(op);
    });
    // A multi-tensor kernel function's ops (fsdp-gpu-multi-tensor) are its
    // parts: lowered one by one, each split reduction's partials at its own
    // scratch offset, then launched together.
    llvm::MapVector<Operation *, MultiTensor> multi;
    BufferAlignment alignment(getOperation());
    this->alignment = &alignment;
    for (Operation *op : ops) {
      auto func = op->getParentOfType<func::FuncOp>();
      MultiTensor *parts = func && func->hasAttr(kMultiTensorAttrName)
                               ? &multi[func.getOperation()]
                               : nullptr;
      LogicalResult lowered =
          isa<memref::CopyOp>(op)
              ? lowerCopy(cast<memref::CopyOp>(op))
              : lowerLinalg(cast<linalg::LinalgOp>(op), parts);
      if (failed(lowered))
        return signalPassFailure();
    }
    for (auto &[kernel, parts] : multi) {
      if (failed(mergeMultiTensorLaunches(cast<func::FuncOp>(kernel),
                                          parts.launches, report)))
        return signalPassFailure();
      ++numMultiTensor;
    }
  }

  /// What the buffers of the module being lowered are aligned to.
  BufferAlignment *alignment = nullptr;

  /// The parts of a multi-tensor kernel function lowered so far: each op's
  /// launches, and the end of the scratch bytes they take.
  struct MultiTensor {
    SmallVector<SmallVector<gpu::LaunchOp>> launches;
    int64_t scratchEnd = 0;
  };

  LogicalResult lowerCopy(memref::CopyOp copy) {
    auto src = dyn_cast<MemRefType>(copy.getSource().getType());
    auto dst = dyn_cast<MemRefType>(copy.getTarget().getType());
    if (!src || !dst || !src.hasStaticShape())
      return copy.emitOpError("cannot become a GPU copy: compute=gpu needs "
                              "ranked buffers of static shape");
    OpBuilder b(copy);
    if (memref::isStaticShapeAndContiguousRowMajor(src) &&
        memref::isStaticShapeAndContiguousRowMajor(dst)) {
      gpu::MemcpyOp::create(b, copy.getLoc(), Type(), ValueRange(),
                            identityView(b, copy.getLoc(), copy.getTarget()),
                            identityView(b, copy.getLoc(), copy.getSource()));
      ++numMemcpy;
      copy.erase();
      return success();
    }
    auto loops =
        linalg::CopyOp::create(b, copy.getLoc(), ValueRange{copy.getSource()},
                               ValueRange{copy.getTarget()});
    copy.erase();
    return lowerLinalg(cast<linalg::LinalgOp>(loops.getOperation()));
  }

  LogicalResult lowerLinalg(linalg::LinalgOp op, MultiTensor *parts = nullptr) {
    std::string why = unsupported(op);
    if (!why.empty())
      return op->emitOpError("cannot become a GPU kernel: ") << why;
    // A fill of a buffer that the next op accumulates into is left for that
    // op's kernel, where it is the outputs' initial value (one launch, no
    // load).
    if (auto fill = dyn_cast<linalg::FillOp>(op.getOperation()))
      if (auto next = dyn_cast_or_null<linalg::LinalgOp>(op->getNextNode());
          next && unsupported(next).empty() &&
          KernelLowering(next, limits()).foldFill(fill))
        return success();
    auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
    // Before the fill, which must stay right before the op to fold into it.
    viewInputsAtTheirAddress(op,
                             fill ? fill.getOperation() : op.getOperation());
    KernelLowering lowering(op, limits(), vectorize ? alignment : nullptr);
    bool foldsFill = fill && lowering.foldFill(fill);
    if (report)
      op->emitRemark() << "GPU kernel: " << lowering.describe()
                       << (foldsFill ? " (the fill before folded in)" : "");
    countMapping(lowering.getMapping());
    if (lowering.getVectorWidth())
      ++numVectorized;
    if (parts)
      lowering.setScratchBase(ceilDiv(parts->scratchEnd, kScratchAlignment) *
                              kScratchAlignment);
    lowering.lower();
    if (parts) {
      parts->scratchEnd = std::max(parts->scratchEnd, lowering.getScratchEnd());
      if (!lowering.getLaunches().empty())
        parts->launches.push_back(llvm::to_vector(lowering.getLaunches()));
    }
    if (foldsFill) {
      fill->erase();
      ++numFoldedFills;
    }
    return success();
  }

  /// Kernel arguments are bare pointers, so a buffer needs a static layout.
  /// A contiguous input at an offset known only at run time (a rank's part
  /// of a tensor-parallel value, sliced at its index on the axis) is passed
  /// as an identity buffer at its address instead.
  void viewInputsAtTheirAddress(linalg::LinalgOp op, Operation *before) {
    OpBuilder b(before);
    for (OpOperand *input : op.getDpsInputOperands()) {
      auto t = dyn_cast<MemRefType>(input->get().getType());
      int64_t offset;
      SmallVector<int64_t> strides;
      if (t && succeeded(t.getStridesAndOffset(strides, offset)) &&
          ShapedType::isDynamic(offset) &&
          memref::isStaticShapeAndContiguousRowMajor(t))
        input->set(identityView(b, op.getLoc(), input->get()));
    }
  }

  void countMapping(Mapping m) {
    switch (m) {
    case Mapping::Elementwise:
      ++numElementwise;
      break;
    case Mapping::WarpReduction:
      ++numWarpReductions;
      break;
    case Mapping::ThreadReduction:
      ++numThreadReductions;
      break;
    case Mapping::SplitRowReduction:
    case Mapping::SplitColumnReduction:
      ++numSplitReductions;
      break;
    case Mapping::Serial:
      ++numSerial;
      break;
    }
  }
};

} // namespace

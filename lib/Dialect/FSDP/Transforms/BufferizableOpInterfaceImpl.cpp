//===- BufferizableOpInterfaceImpl.cpp - bufferizing collectives ----------===//

#include "fsdp/Dialect/FSDP/Transforms/BufferizableOpInterfaceImpl.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::fsdp;

namespace {

/// The runtime reads and writes flat contiguous buffers: copy a strided
/// input into a fresh one.
FailureOr<Value> contiguousBuffer(RewriterBase &rewriter, Location loc,
                                  Value buffer,
                                  const BufferizationOptions &options) {
  auto type = cast<MemRefType>(buffer.getType());
  if (memref::isStaticShapeAndContiguousRowMajor(type))
    return buffer;
  auto contiguous = MemRefType::get(type.getShape(), type.getElementType());
  FailureOr<Value> alloc = options.createAlloc(rewriter, loc, contiguous, {});
  if (failed(alloc))
    return failure();
  if (failed(options.createMemCpy(rewriter, loc, buffer, *alloc)))
    return failure();
  return *alloc;
}

template <typename TensorOp, typename BufferOp>
struct CollectiveModel
    : public BufferizableOpInterface::ExternalModel<
          CollectiveModel<TensorOp, BufferOp>, TensorOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto collective = cast<TensorOp>(op);
    Location loc = op->getLoc();
    FailureOr<Value> input =
        getBuffer(rewriter, collective.getInput(), options, state);
    if (failed(input))
      return failure();
    FailureOr<Value> flatInput =
        contiguousBuffer(rewriter, loc, *input, options);
    if (failed(flatInput))
      return failure();
    auto resultType = cast<RankedTensorType>(collective.getResult().getType());
    auto outType =
        MemRefType::get(resultType.getShape(), resultType.getElementType());
    FailureOr<Value> output = options.createAlloc(rewriter, loc, outType, {});
    if (failed(output))
      return failure();
    SmallVector<NamedAttribute> attrs(op->getAttrs());
    BufferOp::create(rewriter, loc, TypeRange{},
                     ValueRange{*flatInput, *output}, attrs);
    replaceOpWithBufferizedValues(rewriter, op, *output);
    return success();
  }
};

} // namespace

void mlir::fsdp::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FSDPDialect *) {
    AllGatherOp::attachInterface<
        CollectiveModel<AllGatherOp, BufferAllGatherOp>>(*ctx);
    ReduceScatterOp::attachInterface<
        CollectiveModel<ReduceScatterOp, BufferReduceScatterOp>>(*ctx);
    AllReduceOp::attachInterface<
        CollectiveModel<AllReduceOp, BufferAllReduceOp>>(*ctx);
  });
}

//===- BufferizableOpInterfaceImpl.cpp - bufferizing collectives ----------===//

#include "fsdp/Dialect/FSDP/Transforms/BufferizableOpInterfaceImpl.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

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

/// A new buffer of `type`'s shape and element type for the op's result.
FailureOr<Value> allocateResult(RewriterBase &rewriter, Location loc,
                                RankedTensorType type,
                                const BufferizationOptions &options) {
  return options.createAlloc(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()),
      {});
}

/// Allocates the result buffer of a collective and a contiguous input.
template <typename TensorOp>
FailureOr<std::pair<Value, Value>>
prepareBuffers(TensorOp collective, RewriterBase &rewriter,
               const BufferizationOptions &options, BufferizationState &state) {
  Location loc = collective->getLoc();
  FailureOr<Value> input =
      getBuffer(rewriter, collective.getInput(), options, state);
  if (failed(input))
    return failure();
  FailureOr<Value> flatInput = contiguousBuffer(rewriter, loc, *input, options);
  if (failed(flatInput))
    return failure();
  FailureOr<Value> output = allocateResult(
      rewriter, loc, cast<RankedTensorType>(collective.getResult().getType()),
      options);
  if (failed(output))
    return failure();
  return std::make_pair(*flatInput, *output);
}

/// An op that only reads its operands and writes fresh buffers: what the
/// collectives, `fsdp.quantize`, the grouped products and topk share.
template <typename Model, typename Op>
struct ReadsOperandsAllocatesResults
    : public BufferizableOpInterface::ExternalModel<Model, Op> {
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
};

/// A collective reads its input and writes a fresh buffer. The blocking
/// form has the tensor as its only result; a `*_start` form also returns its
/// request (result 0), which the buffer form returns too.
template <typename TensorOp, typename BufferOp>
struct CollectiveModel
    : public ReadsOperandsAllocatesResults<CollectiveModel<TensorOp, BufferOp>,
                                           TensorOp> {

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto buffers = prepareBuffers(cast<TensorOp>(op), rewriter, options, state);
    if (failed(buffers))
      return failure();
    bool started = op->getNumResults() == 2;
    SmallVector<Type> requestType;
    if (started)
      requestType.push_back(op->getResult(0).getType());
    SmallVector<NamedAttribute> attrs(op->getAttrs());
    Operation *bufferOp =
        BufferOp::create(rewriter, op->getLoc(), requestType,
                         ValueRange{buffers->first, buffers->second}, attrs);
    SmallVector<Value> replacements;
    if (started)
      replacements.push_back(bufferOp->getResult(0));
    replacements.push_back(buffers->second);
    replaceOpWithBufferizedValues(rewriter, op, replacements);
    return success();
  }
};

/// `fsdp.quantize` reads its input and the amax and writes a fresh packet.
struct QuantizeModel
    : public ReadsOperandsAllocatesResults<QuantizeModel, QuantizeOp> {

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto quantize = cast<QuantizeOp>(op);
    auto buffers = prepareBuffers(quantize, rewriter, options, state);
    if (failed(buffers))
      return failure();
    SmallVector<Value> operands = {buffers->first};
    if (Value amax = quantize.getAmax()) {
      FailureOr<Value> buffer = getBuffer(rewriter, amax, options, state);
      if (failed(buffer))
        return failure();
      FailureOr<Value> flat =
          contiguousBuffer(rewriter, op->getLoc(), *buffer, options);
      if (failed(flat))
        return failure();
      operands.push_back(*flat);
    }
    operands.push_back(buffers->second);
    BufferQuantizeOp::create(rewriter, op->getLoc(), TypeRange{}, operands,
                             op->getAttrs());
    replaceOpWithBufferizedValues(rewriter, op, buffers->second);
    return success();
  }
};

/// `fsdp.wait` returns the started collective's buffer itself.
struct WaitModel
    : public BufferizableOpInterface::ExternalModel<WaitModel, WaitOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return false;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    if (operand.getOperandNumber() != 1)
      return {};
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto wait = cast<WaitOp>(op);
    FailureOr<Value> buffer =
        getBuffer(rewriter, wait.getPending(), options, state);
    if (failed(buffer))
      return failure();
    BufferWaitOp::create(rewriter, op->getLoc(), wait.getRequest());
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

/// `fsdp.scatter_add_rows` updates its init in place (a destination): the
/// result is the init's buffer (a copy where the analysis says the init is
/// still read), the source and the indices are only read.
struct ScatterAddRowsModel
    : public BufferizableOpInterface::ExternalModel<ScatterAddRowsModel,
                                                    ScatterAddRowsOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return &operand == &cast<ScatterAddRowsOp>(op).getInitMutable();
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    if (&operand != &cast<ScatterAddRowsOp>(op).getInitMutable())
      return {};
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto scatter = cast<ScatterAddRowsOp>(op);
    FailureOr<Value> source =
        getBuffer(rewriter, scatter.getSource(), options, state);
    FailureOr<Value> indices =
        getBuffer(rewriter, scatter.getIndices(), options, state);
    FailureOr<Value> output =
        getBuffer(rewriter, scatter.getInit(), options, state);
    if (failed(source) || failed(indices) || failed(output))
      return failure();
    BufferScatterAddRowsOp::create(rewriter, op->getLoc(), *source, *indices,
                                   *output, scatter.getColumns());
    replaceOpWithBufferizedValues(rewriter, op, *output);
    return success();
  }
};

/// The grouped products (kept for compute=gpu) read their operands and
/// write every element of a fresh buffer: `fsdp.buffer.grouped_matmul`
/// into a new allocation, the operands passed as they are (strided views
/// too).
template <typename Op, bool TransposeLhs>
struct GroupedMatmulModel
    : public ReadsOperandsAllocatesResults<GroupedMatmulModel<Op, TransposeLhs>,
                                           Op> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto grouped = cast<Op>(op);
    FailureOr<Value> lhs =
        getBuffer(rewriter, grouped.getLhs(), options, state);
    FailureOr<Value> rhs =
        getBuffer(rewriter, grouped.getRhs(), options, state);
    FailureOr<Value> offsets =
        getBuffer(rewriter, grouped.getOffsets(), options, state);
    if (failed(lhs) || failed(rhs) || failed(offsets))
      return failure();
    FailureOr<Value> output = allocateResult(
        rewriter, op->getLoc(),
        cast<RankedTensorType>(grouped.getResult().getType()), options);
    if (failed(output))
      return failure();
    BufferGroupedMatmulOp::create(rewriter, op->getLoc(), *lhs, *rhs, *offsets,
                                  *output, TransposeLhs);
    replaceOpWithBufferizedValues(rewriter, op, *output);
    return success();
  }
};

/// fsdp.topk_indices reads its input and writes every element of a fresh
/// i64 buffer: `fsdp.buffer.topk_indices` into a new allocation. Its stable
/// form must be gone (fsdp-topk drops or uses it before bufferization).
struct TopkIndicesModel
    : public ReadsOperandsAllocatesResults<TopkIndicesModel, TopkIndicesOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto topk = cast<TopkIndicesOp>(op);
    if (topk.getStable())
      return op->emitOpError()
             << "still has its stable form: fsdp-topk must run before "
                "bufferization";
    FailureOr<Value> input =
        getBuffer(rewriter, topk.getInput(), options, state);
    if (failed(input))
      return failure();
    FailureOr<Value> output = allocateResult(
        rewriter, op->getLoc(), topk.getResult().getType(), options);
    if (failed(output))
      return failure();
    BufferTopkIndicesOp::create(rewriter, op->getLoc(), *input, *output,
                                topk.getLargest(), topk.getSorted(),
                                topk.getSort());
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
    QuantizedAllGatherOp::attachInterface<
        CollectiveModel<QuantizedAllGatherOp, BufferQuantizedAllGatherOp>>(
        *ctx);
    AllGatherStartOp::attachInterface<
        CollectiveModel<AllGatherStartOp, BufferAllGatherStartOp>>(*ctx);
    ReduceScatterStartOp::attachInterface<
        CollectiveModel<ReduceScatterStartOp, BufferReduceScatterStartOp>>(
        *ctx);
    AllReduceStartOp::attachInterface<
        CollectiveModel<AllReduceStartOp, BufferAllReduceStartOp>>(*ctx);
    WaitOp::attachInterface<WaitModel>(*ctx);
    // The local quantization steps: no communication, same buffer rules.
    QuantAmaxOp::attachInterface<
        CollectiveModel<QuantAmaxOp, BufferQuantAmaxOp>>(*ctx);
    QuantizeOp::attachInterface<QuantizeModel>(*ctx);
    DequantizeOp::attachInterface<
        CollectiveModel<DequantizeOp, BufferDequantizeOp>>(*ctx);
    ScatterAddRowsOp::attachInterface<ScatterAddRowsModel>(*ctx);
    GroupedMatmulOp::attachInterface<
        GroupedMatmulModel<GroupedMatmulOp, false>>(*ctx);
    GroupedMatmulTransposeLhsOp::attachInterface<
        GroupedMatmulModel<GroupedMatmulTransposeLhsOp, true>>(*ctx);
    TopkIndicesOp::attachInterface<TopkIndicesModel>(*ctx);
  });
}

void mlir::fsdp::registerFSDPExtensions(DialectRegistry &registry) {
  registerBufferizableOpInterfaceExternalModels(registry);
}

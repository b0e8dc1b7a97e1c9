//===- TensorParallel.cpp - the global step becomes the TP-local one ------===//
//
// Propagates tensor-parallel shardings through a step's forward and backward
// and inserts the collectives of partial results: all-reduces, or with
// sequence parallelism reduce-scatters along the tokens and the all-gathers
// before products that need whole activations (docs/TENSOR_PARALLEL.md).
// Structured ops: TensorParallelLinalg.cpp; reshapes, slices, concat:
// TensorParallelReshapes.cpp; what is inserted: TensorParallelValues.cpp.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"
#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPTENSORPARALLEL
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;

LogicalResult tensor_parallel::visitOther(TPFunction &tp, Operation *op) {
  WalkResult walk = op->walk([&](Operation *inner) {
    for (OpOperand &operand : inner->getOpOperands()) {
      Sharding s = shardingOf(tp, operand.get());
      if (!s.isSharded())
        continue;
      if (s.sequence) {
        operand.set(gatherSequence(tp, operand.get()));
        continue;
      }
      op->emitError() << "'" << op->getName()
                      << "' reads a value sharded along dim " << s.dim
                      << " over the tensor-parallel axis \""
                      << tp.axis.getValue()
                      << "\"; fsdp-tensor-parallel partitions linalg ops, "
                         "reshapes, slices and concatenations only";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

namespace {

struct TensorParallelPass
    : public mlir::fsdp::impl::FSDPTensorParallelBase<TensorParallelPass> {
  using Base::Base;

  Type reduceType;
  std::optional<QuantFormat> gatherFormat;

  LogicalResult initialize(MLIRContext *ctx) override {
    reduceType = toType(reduceDtype, ctx);
    if (sequenceGatherQuant.empty())
      return success();
    gatherFormat = symbolizeQuantFormat(sequenceGatherQuant);
    if (!gatherFormat)
      return emitError(UnknownLoc::get(ctx))
             << "fsdp-tensor-parallel: sequence-gather-quant: unknown format '"
             << sequenceGatherQuant << "'";
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func->hasAttr(kTPLocalAttrName))
      return;
    TPFunction tp;
    tp.func = func;
    tp.reduceType = reduceType;
    tp.gatherFormat = gatherFormat;
    tp.sequenceParallel =
        sequenceParallel || func->hasAttr(kSequenceParallelAttrName);
    FailureOr<bool> found = findAxis(tp);
    if (failed(found))
      return signalPassFailure();
    if (!*found)
      return;
    LogicalResult result = partition(tp);
    numShardedOps += tp.shardedOps;
    numAllReduces += tp.allReduces;
    numAllGathers += tp.allGathers;
    numReduceScatters += tp.reduceScatters;
    numQuantizedGathers += tp.quantizedGathers;
    if (failed(result))
      return signalPassFailure();
  }

  /// The one tensor-parallel mesh axis of the function's layouts. False
  /// when no layout has a tensor-parallel placement.
  FailureOr<bool> findAxis(TPFunction &tp) {
    func::FuncOp func = tp.func;
    std::optional<unsigned> axisIndex;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName);
      if (!layout)
        continue;
      for (auto [a, p] : llvm::enumerate(layout.getPlacements())) {
        if (!isa<TPShardAttr, TPReplicateAttr>(p))
          continue;
        if ((axisIndex && *axisIndex != a) ||
            (tp.meshRef && tp.meshRef != layout.getMesh()))
          return func.emitError()
                 << "argument #" << i << " places mesh axis " << a << " of "
                 << layout.getMesh()
                 << " as tensor-parallel, but an earlier argument places "
                 << "axis " << *axisIndex << " of " << tp.meshRef
                 << "; a step has one tensor-parallel axis";
        axisIndex = a;
        tp.meshRef = layout.getMesh();
      }
    }
    if (!axisIndex)
      return false;
    MeshOp mesh = lookupMesh(func, tp.meshRef);
    if (!mesh)
      return func.emitError() << "unknown mesh " << tp.meshRef;
    tp.axis = cast<StringAttr>(mesh.getAxisNames()[*axisIndex]);
    tp.size = mesh.getAxisSizes()[*axisIndex];
    return true;
  }

  static bool hasGradient(func::FuncOp func, unsigned arg) {
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (auto g = func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName))
        if (g.getInt() == int64_t(arg))
          return true;
    return false;
  }

  /// Arguments: `tp_shard<d>` ones become their TP-local part.
  LogicalResult partitionArguments(TPFunction &tp) {
    func::FuncOp func = tp.func;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName);
      if (!layout)
        continue; // data: every rank of the axis sees the same batch
      unsigned axisIndex = 0;
      Attribute placement;
      MeshOp mesh = lookupMesh(func, tp.meshRef);
      for (auto [a, name] : llvm::enumerate(mesh.getAxisNames()))
        if (name == tp.axis)
          axisIndex = a;
      if (layout.getMesh() == tp.meshRef)
        placement = layout.getPlacements()[axisIndex];
      // A value replicated on every axis without a gradient (a buffer) is
      // whole on every rank; with a gradient, `replicate` would be a
      // data-parallel replica: the plan must say tp_replicate.
      if (isa_and_nonnull<ReplicateAttr>(placement) && !hasGradient(func, i)) {
        tp.shardings[func.getArgument(i)] = Sharding{};
        continue;
      }
      if (!isa_and_nonnull<TPShardAttr, TPReplicateAttr>(placement))
        return func.emitError()
               << "parameter argument #" << i << " has no tensor-parallel "
               << "placement on mesh axis \"" << tp.axis.getValue()
               << "\" (layout " << layout
               << "); give it tp_shard<d> or tp_replicate (replicate is "
                  "accepted for arguments without a gradient only)";
      Sharding s;
      if (auto shard = dyn_cast<TPShardAttr>(placement))
        s.dim = shard.getDim();
      BlockArgument arg = func.getArgument(i);
      auto type = cast<RankedTensorType>(arg.getType());
      arg.setType(localType(type, s, tp.size));
      tp.shardings[arg] = s;
    }
    return success();
  }

  LogicalResult partition(TPFunction &tp) {
    func::FuncOp func = tp.func;
    if (!func.getBody().hasOneBlock())
      return func.emitError() << "fsdp-tensor-parallel needs a single-block "
                                 "step";
    if (failed(partitionArguments(tp)))
      return failure();
    collectDemands(tp);
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    auto visit = [&](Operation *op) -> LogicalResult {
      if (mergeOrResolvePartials(tp, op))
        return success();
      return llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](linalg::LinalgOp l) {
            return tensor_parallel::visitLinalg(tp, l);
          })
          .Case([&](tensor::ExpandShapeOp e) { return visitExpand(tp, e); })
          .Case([&](tensor::CollapseShapeOp c) { return visitCollapse(tp, c); })
          .Case([&](tensor::ExtractSliceOp e) {
            return visitExtractSlice(tp, e);
          })
          .Case(
              [&](tensor::InsertSliceOp i) { return visitInsertSlice(tp, i); })
          .Case([&](tensor::ConcatOp c) { return visitConcat(tp, c); })
          .Case([&](func::ReturnOp r) { return visitReturn(tp, r); })
          .Default([&](Operation *o) { return visitOther(tp, o); });
    };
    collectCrossEntropies(tp);
    for (Operation *op : ops) {
      if (tp.absorbed.contains(op))
        continue;
      auto ce = tp.crossEntropies.find(op);
      if (ce != tp.crossEntropies.end()) {
        FailureOr<bool> done = partitionCrossEntropy(tp, ce->second);
        if (failed(done))
          return failure();
        if (*done)
          continue;
        // Not split along the vocabulary: op by op.
        for (Operation *a : ce->second.absorbed())
          if (failed(visit(a)))
            return failure();
      }
      if (failed(visit(op)))
        return failure();
    }
    eraseRecomputed(tp);
    overlapGathers(tp);
    // Global shape-only values whose every use now reads a local copy.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<tensor::EmptyOp, linalg::FillOp, arith::ConstantOp>(op) &&
          op.use_empty())
        op.erase();
    func->setAttr(kTPLocalAttrName, UnitAttr::get(func.getContext()));
    return success();
  }

  /// Gradients come out as their parameter lies; everything else whole.
  LogicalResult visitReturn(TPFunction &tp, func::ReturnOp ret) {
    func::FuncOp func = tp.func;
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned r = operand.getOperandNumber();
      Sharding need;
      if (auto gradOf =
              func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName))
        if (gradOf.getInt() >= 0 && gradOf.getInt() < func.getNumArguments())
          need = shardingOf(tp, func.getArgument(gradOf.getInt()));
      // A sequence-split value (a gradient of a replicated parameter
      // never is: its sum over the tokens is all-reduced) comes out whole.
      if (shardingOf(tp, operand.get()).sequence)
        operand.set(gatherSequence(tp, operand.get()));
      Sharding have = shardingOf(tp, operand.get());
      if (have == need)
        continue;
      Value local =
          need.isSharded() ? localPart(tp, operand.get(), need.dim) : Value();
      if (!local)
        return ret->emitError()
               << "result #" << r << " is " << describe(have)
               << " over the tensor-parallel axis \"" << tp.axis.getValue()
               << "\" but must be " << describe(need)
               << (need.isSharded() ? " (as its parameter)" : "");
      operand.set(local);
    }
    SmallVector<Type> argTypes, resultTypes;
    for (BlockArgument a : func.getArguments())
      argTypes.push_back(a.getType());
    for (Value v : ret.getOperands())
      resultTypes.push_back(v.getType());
    func.setFunctionType(
        FunctionType::get(func.getContext(), argTypes, resultTypes));
    return success();
  }
};

} // namespace

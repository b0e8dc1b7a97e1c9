//===- Partition.cpp - one rank's step becomes the sharded SPMD program ---===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPARTITION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

namespace {

using mlir::fsdp::detail::castFloatElements;

/// The op in `block` that contains `op` (possibly `op` itself).
Operation *ancestorIn(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

/// Most micro-steps of gradient accumulation (its 1/M must stay a useful
/// float and the accumulate names distinct).
constexpr int64_t kMaxAccumulationSteps = int64_t(1) << 20;

/// What partitioning one step needs to know about it.
struct Step {
  func::FuncOp func;
  FlatSymbolRefAttr meshRef;
  MeshOp mesh;
  SmallVector<unsigned> params;
  Block *body = nullptr;
  func::ReturnOp ret;
  std::optional<unsigned> lossIndex;
  /// Ops the loss depends on (the forward pass).
  llvm::SetVector<Operation *> forward;
};

struct PartitionPass
    : public mlir::fsdp::impl::FSDPPartitionBase<PartitionPass> {
  using Base::Base;

  Type paramType, reduceType;
  std::optional<UnevenPolicy> policyOverride;

  enum class Variant { Single, Micro, Final };

  LogicalResult initialize(MLIRContext *ctx) override {
    auto error = [&]() { return mlir::emitError(UnknownLoc::get(ctx)); };
    if (!std::isfinite(static_cast<double>(gradScale)))
      return error() << "option grad-scale must be a finite number, got "
                     << static_cast<double>(gradScale);
    if (gradScale != 0.0 && reduceOp != ReduceKind::sum)
      return error() << "option grad-scale needs reduce-op=sum";
    if (accumulationSteps < 1 || accumulationSteps > kMaxAccumulationSteps)
      return error() << "option accumulation-steps must be between 1 and "
                     << kMaxAccumulationSteps << ", got "
                     << static_cast<int64_t>(accumulationSteps);
    paramType = toType(paramDtype, ctx);
    reduceType = toType(reduceDtype, ctx);
    policyOverride.reset();
    if (unevenPolicy == PolicyOverride::ceil)
      policyOverride = UnevenPolicy::ceil;
    else if (unevenPolicy == PolicyOverride::balanced)
      policyOverride = UnevenPolicy::balanced;
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (accumulationSteps > 1 && !func.isExternal() && hasLayouts(func)) {
        // Every micro-step but the last runs @<step>_accumulate.
        auto micro = cast<func::FuncOp>(func->clone());
        micro.setSymName((func.getSymName() + "_accumulate").str());
        module.getBody()->getOperations().insertAfter(func->getIterator(),
                                                      micro);
        if (failed(partition(micro, Variant::Micro)) ||
            failed(partition(func, Variant::Final)))
          return signalPassFailure();
        continue;
      }
      if (failed(partition(func, Variant::Single)))
        return signalPassFailure();
    }
  }

  static bool hasLayouts(func::FuncOp func) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kLayoutAttrName))
        return true;
    return false;
  }

  /// The layout of a running gradient sum: still Partial(sum) over the
  /// replicate axes, whose all-reduce waits for the last micro-step.
  static LayoutAttr partialLayout(LayoutAttr layout) {
    MLIRContext *ctx = layout.getContext();
    SmallVector<Attribute> placements;
    for (Attribute p : layout.getPlacements())
      placements.push_back(
          isa<ReplicateAttr>(p) ? PartialAttr::get(ctx, ReduceKind::sum) : p);
    return LayoutAttr::get(ctx, layout.getMesh(),
                           ArrayAttr::get(ctx, placements), layout.getPolicy());
  }

  LogicalResult partition(func::FuncOp func, Variant variant) {
    if (func.isExternal())
      return success();
    Step step;
    step.func = func;
    if (failed(collectParameters(step)))
      return failure();
    if (step.params.empty())
      return success();
    if (failed(checkEntryPoint(step)) || failed(checkBody(step)))
      return failure();
    applyPolicyOverride(step);
    findForward(step);
    OpBuilder b(func.getContext());
    for (unsigned i : step.params)
      if (failed(gatherParameter(step, i, b)))
        return failure();
    b.setInsertionPoint(step.ret);
    SmallVector<Type> resultTypes(func.getResultTypes());
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (failed(reduceGradient(step, r, variant, resultTypes, b)))
        return failure();
    if (step.lossIndex && allReduceLoss)
      allReduceLossResult(step, b);
    SmallVector<Type> argTypes;
    for (BlockArgument a : step.body->getArguments())
      argTypes.push_back(a.getType());
    func.setFunctionType(
        FunctionType::get(func.getContext(), argTypes, resultTypes));
    return success();
  }

  /// The parameter arguments (those with a layout) and their one mesh.
  LogicalResult collectParameters(Step &step) {
    func::FuncOp func = step.func;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName);
      if (!layout)
        continue;
      if (func.getArgAttr(i, kGlobalTypeAttrName))
        return func.emitError()
               << "argument #" << i << " is already partitioned (it has "
               << kGlobalTypeAttrName << ")";
      if (!func->hasAttr(kTPLocalAttrName) &&
          llvm::any_of(layout.getPlacements(), llvm::IsaPred<TPShardAttr>))
        return func.emitError()
               << "argument #" << i << " has the tensor-parallel layout "
               << layout
               << " on its global type; run fsdp-tensor-parallel first";
      if (step.meshRef && step.meshRef != layout.getMesh())
        return func.emitError()
               << "all parameters of a step must use one mesh; argument #" << i
               << " uses " << layout.getMesh() << " but an earlier one "
               << "uses " << step.meshRef;
      step.meshRef = layout.getMesh();
      step.params.push_back(i);
    }
    if (step.params.empty())
      return success();
    step.mesh = lookupMesh(func, step.meshRef);
    if (!step.mesh)
      return func.emitError() << "unknown mesh " << step.meshRef;
    return success();
  }

  /// The signature changes (parameters become shards), so callers would be
  /// left with mismatched types: a step must be an entry point.
  LogicalResult checkEntryPoint(Step &step) {
    auto uses = SymbolTable::getSymbolUses(step.func, getOperation());
    if (!uses)
      return success();
    for (const SymbolTable::SymbolUse &use : *uses) {
      InFlightDiagnostic diag =
          use.getUser()->emitOpError()
          << "refers to @" << step.func.getSymName()
          << ", a step with fsdp.layout parameters; fsdp-partition changes "
             "its signature, so it must not be called or referenced";
      diag.attachNote(step.func.getLoc()) << "the step is defined here";
      return failure();
    }
    return success();
  }

  /// One block ending in func.return (gathers are placed before the first
  /// use in block order), at most one loss, and result types the options
  /// can rewrite.
  LogicalResult checkBody(Step &step) {
    func::FuncOp func = step.func;
    if (!func.getBody().hasOneBlock())
      return func.emitError()
             << "fsdp-partition needs a function body with a single block "
                "(use structured control flow); this one has "
             << func.getBody().getBlocks().size() << " blocks";
    step.body = &func.getBody().front();
    step.ret = dyn_cast<func::ReturnOp>(step.body->getTerminator());
    if (!step.ret)
      return func.emitError() << "fsdp-partition needs a func.return "
                                 "terminator";
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (func.getResultAttr(i, kLossAttrName)) {
        if (step.lossIndex)
          return func.emitError()
                 << "more than one result is marked " << kLossAttrName;
        step.lossIndex = i;
      }
    if (step.lossIndex && allReduceLoss &&
        !isa<RankedTensorType>(step.ret.getOperand(*step.lossIndex).getType()))
      return func.emitError() << "all-reduce-loss needs a tensor loss; result #"
                              << *step.lossIndex << " has type "
                              << step.ret.getOperand(*step.lossIndex).getType();
    // reduce-dtype and grad-scale rewrite float gradients only.
    if (!reduceType && gradScale == 0.0)
      return success();
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      if (!func.getResultAttr(r, kGradOfAttrName))
        continue;
      auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[r]);
      if (!type || !isa<FloatType>(type.getElementType()))
        return func.emitError() << "gradient result #" << r << " has type "
                                << func.getResultTypes()[r] << "; "
                                << (reduceType ? "reduce-dtype" : "grad-scale")
                                << " needs a floating-point gradient";
    }
    return success();
  }

  void applyPolicyOverride(Step &step) {
    if (!policyOverride)
      return;
    for (unsigned i : step.params) {
      auto layout = step.func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName);
      step.func.setArgAttr(
          i, kLayoutAttrName,
          LayoutAttr::get(step.func.getContext(), layout.getMesh(),
                          layout.getPlacements(), *policyOverride));
    }
  }

  /// Forward = everything the loss depends on.
  void findForward(Step &step) {
    if (!step.lossIndex)
      return;
    Value loss = step.ret.getOperand(*step.lossIndex);
    if (Operation *def = loss.getDefiningOp()) {
      BackwardSliceOptions options;
      options.inclusive = true;
      options.omitUsesFromAbove = false;
      (void)getBackwardSlice(def, &step.forward, options);
    }
  }

  /// Whether a use belongs to the forward pass (everything does without a
  /// loss); uses nested in a forward op's region are forward too.
  static bool isForwardUse(const Step &step, Operation *user) {
    if (!step.lossIndex)
      return true;
    Operation *top = ancestorIn(step.body, user);
    for (Operation *op = user; op; op = op->getParentOp()) {
      if (step.forward.contains(op))
        return true;
      if (op == top)
        break;
    }
    return false;
  }

  /// Argument `i` becomes this rank's padded slot; its forward and backward
  /// uses read a gather placed before the first of them.
  LogicalResult gatherParameter(Step &step, unsigned i, OpBuilder &b) {
    func::FuncOp func = step.func;
    BlockArgument arg = func.getArgument(i);
    auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName);
    auto global = cast<RankedTensorType>(arg.getType());
    lm::Layout model = layout.toDataParallelLayout(step.mesh.getAxisSizes());
    if (lm::shardAxes(model).empty())
      return success(); // Replicate-only: every rank holds it whole (DDP).
    auto unit = func.getArgAttrOfType<StringAttr>(i, kUnitAttrName);
    // The root unit stays unsharded from the forward to the backward, as
    // FSDP2 keeps its root module: one gather serves both.
    bool reshard = reshardAfterForward &&
                   !(unit && !rootUnit.empty() && unit.getValue() == rootUnit);
    SmallVector<OpOperand *> fwdUses, bwdUses;
    for (OpOperand &use : arg.getUses()) {
      if (isa<func::ReturnOp>(use.getOwner()))
        return use.getOwner()->emitError()
               << "parameter argument #" << i
               << " is returned directly; return a computed value";
      bool fwd = isForwardUse(step, use.getOwner()) || !reshard;
      (fwd ? fwdUses : bwdUses).push_back(&use);
    }
    arg.setType(
        RankedTensorType::get(lm::slotShape(model, global.getShape().vec()),
                              global.getElementType()));
    func.setArgAttr(i, kGlobalTypeAttrName, TypeAttr::get(global));
    ++numParameters;
    insertGather(step, arg, global, layout, unit, fwdUses, Phase::forward, b);
    insertGather(step, arg, global, layout, unit, bwdUses, Phase::backward, b);
    return success();
  }

  void insertGather(Step &step, BlockArgument arg, RankedTensorType global,
                    LayoutAttr layout, StringAttr unit,
                    ArrayRef<OpOperand *> uses, Phase phase, OpBuilder &b) {
    if (uses.empty())
      return;
    Operation *first = nullptr;
    for (OpOperand *u : uses) {
      Operation *top = ancestorIn(step.body, u->getOwner());
      if (!first || top->isBeforeInBlock(first))
        first = top;
    }
    b.setInsertionPoint(first);
    Location loc = first->getLoc();
    Value shard = castFloatElements(b, loc, arg, paramType);
    auto fullType =
        global.clone(cast<RankedTensorType>(shard.getType()).getElementType());
    Value full =
        ParamGatherOp::create(b, loc, fullType, shard, layout, phase, unit);
    ++numGathers;
    full = castFloatElements(b, loc, full, global.getElementType());
    for (OpOperand *u : uses)
      u->set(full);
  }

  /// Result `r`, if it is a gradient, goes through fsdp.grad_reduce and
  /// becomes the reduced gradient's slot.
  LogicalResult reduceGradient(Step &step, unsigned r, Variant variant,
                               SmallVectorImpl<Type> &resultTypes,
                               OpBuilder &b) {
    func::FuncOp func = step.func;
    auto gradOf = func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName);
    if (!gradOf)
      return success();
    unsigned argIndex = gradOf.getInt();
    auto layout = func.getArgAttrOfType<LayoutAttr>(argIndex, kLayoutAttrName);
    Value grad = step.ret.getOperand(r);
    auto fullType = cast<RankedTensorType>(grad.getType());
    lm::Layout model = layout.toDataParallelLayout(step.mesh.getAxisSizes());
    auto slot =
        RankedTensorType::get(lm::slotShape(model, fullType.getShape().vec()),
                              fullType.getElementType());
    ReduceKind reduce = reduceOp;
    double scale = gradScale;
    Value accumulator;
    LayoutAttr resultLayout = layout;
    if (variant != Variant::Single) {
      FailureOr<Value> acc = addAccumulator(step, r, layout, slot, fullType, b);
      if (failed(acc))
        return failure();
      accumulator = *acc;
      if (variant == Variant::Micro) {
        scale = 0.0; // scaled once, in the last micro-step
        resultLayout = partialLayout(layout);
        unsigned accIndex = cast<BlockArgument>(accumulator).getArgNumber();
        func.setResultAttr(r, kNameAttrName,
                           func.getArgAttr(accIndex, kNameAttrName));
      } else if (reduce == ReduceKind::avg) {
        scale = 1.0 / accumulationSteps; // the mean over micro-steps
      }
    }
    auto op = GradReduceOp::create(
        b, step.ret.getLoc(), slot, grad, accumulator, layout,
        ReduceKindAttr::get(func.getContext(), reduce),
        scale != 0.0 ? b.getF64FloatAttr(scale) : FloatAttr(),
        reduceType ? TypeAttr::get(reduceType) : TypeAttr(),
        func.getArgAttrOfType<StringAttr>(argIndex, kUnitAttrName),
        variant == Variant::Micro ? b.getUnitAttr() : UnitAttr());
    ++numGradients;
    step.ret.setOperand(r, op.getResult());
    resultTypes[r] = slot;
    func.setResultAttr(r, kLayoutAttrName, resultLayout);
    if (slot != fullType)
      func.setResultAttr(r, kGlobalTypeAttrName, TypeAttr::get(fullType));
    return success();
  }

  /// The running sum of the earlier micro-steps of gradient `r`: a new
  /// argument `accum.<name>`.
  FailureOr<Value> addAccumulator(Step &step, unsigned r, LayoutAttr layout,
                                  RankedTensorType slot,
                                  RankedTensorType fullType, OpBuilder &b) {
    func::FuncOp func = step.func;
    auto name = func.getResultAttrOfType<StringAttr>(r, kNameAttrName);
    std::string accName =
        "accum." + (name ? name.str() : "result" + std::to_string(r));
    NamedAttrList attrs;
    attrs.set(kLayoutAttrName, partialLayout(layout));
    attrs.set(kAccumulatorAttrName, b.getUnitAttr());
    attrs.set(kNameAttrName, b.getStringAttr(accName));
    if (slot != fullType)
      attrs.set(kGlobalTypeAttrName, TypeAttr::get(fullType));
    unsigned index = func.getNumArguments();
    if (failed(func.insertArgument(index, slot,
                                   attrs.getDictionary(b.getContext()),
                                   step.ret.getLoc())))
      return failure();
    return Value(func.getArgument(index));
  }

  /// The loss becomes the mean over every rank of the mesh.
  void allReduceLossResult(Step &step, OpBuilder &b) {
    Value loss = step.ret.getOperand(*step.lossIndex);
    SmallVector<Attribute> axes(step.mesh.getAxisNames().begin(),
                                step.mesh.getAxisNames().end());
    auto op = AllReduceOp::create(
        b, step.ret.getLoc(), loss.getType(), loss, step.meshRef,
        b.getArrayAttr(axes),
        ReduceKindAttr::get(step.func.getContext(), ReduceKind::avg));
    step.ret.setOperand(*step.lossIndex, op.getResult());
  }
};
} // namespace

Type mlir::fsdp::toType(FloatDtype dtype, MLIRContext *ctx) {
  Builder b(ctx);
  switch (dtype) {
  case FloatDtype::none:
    return Type();
  case FloatDtype::f32:
    return b.getF32Type();
  case FloatDtype::f64:
    return b.getF64Type();
  case FloatDtype::f16:
    return b.getF16Type();
  case FloatDtype::bf16:
    return b.getBF16Type();
  }
  return Type();
}

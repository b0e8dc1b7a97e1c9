//===- Partition.cpp - one rank's step becomes the sharded SPMD program ---===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPARTITION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

namespace {

using mlir::fsdp::detail::castFloatElements;

/// Parses an element type option ("" = none).
FailureOr<Type> parseDtypeOption(MLIRContext *ctx, StringRef text,
                                 StringRef option, Operation *where) {
  if (text.empty())
    return Type();
  Type type;
  {
    // The parser reports at a location inside the option text; one message
    // about the option is clearer.
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    type = parseType(text, ctx, nullptr, /*isKnownNullTerminated=*/false);
  }
  if (!type || !isa<FloatType>(type))
    return where->emitError() << "option " << option
                              << " must name a float type (f32, bf16, f16, "
                                 "f64), got '"
                              << text << "'",
           failure();
  return type;
}

/// The op in `block` that contains `op` (possibly `op` itself).
Operation *ancestorIn(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

struct PartitionPass
    : public mlir::fsdp::impl::FSDPPartitionBase<PartitionPass> {
  using Base::Base;

  Type paramType, reduceType;
  std::optional<UnevenPolicy> policyOverride;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    if (reduceOp != "avg" && reduceOp != "sum") {
      module.emitError() << "option reduce-op must be avg or sum, got '"
                         << reduceOp << "'";
      return signalPassFailure();
    }
    if (gradScale != 0.0 && reduceOp != "sum") {
      module.emitError() << "option grad-scale needs reduce-op=sum";
      return signalPassFailure();
    }
    auto p = parseDtypeOption(ctx, paramDtype, "param-dtype", module);
    auto r = parseDtypeOption(ctx, reduceDtype, "reduce-dtype", module);
    if (failed(p) || failed(r))
      return signalPassFailure();
    paramType = *p;
    reduceType = *r;
    if (!unevenPolicy.empty()) {
      policyOverride = symbolizeUnevenPolicy(unevenPolicy);
      if (!policyOverride) {
        module.emitError() << "option uneven-policy must be ceil or balanced, "
                              "got '"
                           << unevenPolicy << "'";
        return signalPassFailure();
      }
    }
    if (accumulationSteps < 1) {
      module.emitError() << "option accumulation-steps must be at least 1";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (accumulationSteps > 1 && !func.isExternal() && hasLayouts(func)) {
        // Every micro-step but the last runs @<step>_accumulate.
        auto micro = cast<func::FuncOp>(func->clone());
        micro.setSymName((func.getSymName() + "_accumulate").str());
        module.getBody()->getOperations().insertAfter(func->getIterator(),
                                                      micro);
        if (failed(partition(micro, Variant::Micro)))
          return signalPassFailure();
        if (failed(partition(func, Variant::Final)))
          return signalPassFailure();
        continue;
      }
      if (failed(partition(func, Variant::Single)))
        return signalPassFailure();
    }
  }

  enum class Variant { Single, Micro, Final };

  static bool hasLayouts(func::FuncOp func) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, FSDPDialect::kLayoutAttrName))
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
    SmallVector<unsigned> params;
    FlatSymbolRefAttr meshRef;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto layout =
          func.getArgAttrOfType<LayoutAttr>(i, FSDPDialect::kLayoutAttrName);
      if (!layout)
        continue;
      if (func.getArgAttr(i, FSDPDialect::kGlobalTypeAttrName))
        return func.emitError()
               << "argument #" << i << " is already partitioned (it has "
               << FSDPDialect::kGlobalTypeAttrName << ")";
      if (meshRef && meshRef != layout.getMesh())
        return func.emitError()
               << "all parameters of a step must use one mesh; argument #" << i
               << " uses " << layout.getMesh() << " but an earlier one "
               << "uses " << meshRef;
      meshRef = layout.getMesh();
      params.push_back(i);
    }
    if (params.empty())
      return success();
    // The signature changes (parameters become shards), so callers would be
    // left with mismatched types: a step must be an entry point.
    if (auto uses = SymbolTable::getSymbolUses(func, getOperation()))
      for (const SymbolTable::SymbolUse &use : *uses) {
        InFlightDiagnostic diag =
            use.getUser()->emitOpError()
            << "refers to @" << func.getSymName()
            << ", a step with fsdp.layout parameters; fsdp-partition changes "
               "its signature, so it must not be called or referenced";
        diag.attachNote(func.getLoc()) << "the step is defined here";
        return failure();
      }
    MeshOp mesh = lookupMesh(func, meshRef);
    if (!mesh)
      return func.emitError() << "unknown mesh " << meshRef;
    if (policyOverride)
      for (unsigned i : params) {
        auto layout =
            func.getArgAttrOfType<LayoutAttr>(i, FSDPDialect::kLayoutAttrName);
        func.setArgAttr(i, FSDPDialect::kLayoutAttrName,
                        LayoutAttr::get(func.getContext(), layout.getMesh(),
                                        layout.getPlacements(),
                                        *policyOverride));
      }

    // Gathers are placed before the first use in block order, which needs
    // one block (structured control flow).
    if (!func.getBody().hasOneBlock())
      return func.emitError()
             << "fsdp-partition needs a function body with a single block "
                "(use structured control flow); this one has "
             << func.getBody().getBlocks().size() << " blocks";
    Block &body = func.getBody().front();
    auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
    if (!ret)
      return func.emitError() << "fsdp-partition needs a func.return "
                                 "terminator";

    // Forward = everything the loss depends on.
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (func.getResultAttr(i, FSDPDialect::kLossAttrName)) {
        if (lossIndex)
          return func.emitError() << "more than one result is marked "
                                  << FSDPDialect::kLossAttrName;
        lossIndex = i;
      }
    if (lossIndex && allReduceLoss &&
        !isa<RankedTensorType>(ret.getOperand(*lossIndex).getType()))
      return func.emitError()
             << "all-reduce-loss needs a tensor loss; result #" << *lossIndex
             << " has type " << ret.getOperand(*lossIndex).getType();
    // reduce-dtype and grad-scale rewrite float gradients only.
    if (reduceType || gradScale != 0.0)
      for (unsigned r = 0; r < func.getNumResults(); ++r) {
        if (!func.getResultAttr(r, FSDPDialect::kGradOfAttrName))
          continue;
        auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[r]);
        if (!type || !isa<FloatType>(type.getElementType()))
          return func.emitError()
                 << "gradient result #" << r << " has type "
                 << func.getResultTypes()[r] << "; "
                 << (reduceType ? "reduce-dtype" : "grad-scale")
                 << " needs a floating-point gradient";
      }
    llvm::SetVector<Operation *> forward;
    if (lossIndex) {
      Value loss = ret.getOperand(*lossIndex);
      if (Operation *def = loss.getDefiningOp()) {
        BackwardSliceOptions options;
        options.inclusive = true;
        options.omitUsesFromAbove = false;
        (void)getBackwardSlice(def, &forward, options);
      }
    }
    bool hasBackward = lossIndex.has_value();
    auto isForward = [&](Operation *user) {
      if (!hasBackward)
        return true;
      Operation *top = ancestorIn(&body, user);
      // Uses nested in a forward op's region are forward too.
      for (Operation *op = user; op; op = op->getParentOp()) {
        if (forward.contains(op))
          return true;
        if (op == top)
          break;
      }
      return false;
    };

    OpBuilder b(func.getContext());
    for (unsigned i : params) {
      BlockArgument arg = func.getArgument(i);
      auto layout =
          func.getArgAttrOfType<LayoutAttr>(i, FSDPDialect::kLayoutAttrName);
      auto global = cast<RankedTensorType>(arg.getType());
      lm::Layout model = layout.toDataParallelLayout(mesh.getAxisSizes());
      if (lm::shardAxes(model).empty())
        continue; // Replicate-only: every rank holds it whole (DDP).
      auto slot =
          RankedTensorType::get(lm::slotShape(model, global.getShape().vec()),
                                global.getElementType());
      auto unit =
          func.getArgAttrOfType<StringAttr>(i, FSDPDialect::kUnitAttrName);

      // Group the uses by phase, each with the first op (in block order)
      // that needs the gathered value.
      SmallVector<OpOperand *> fwdUses, bwdUses;
      for (OpOperand &use : arg.getUses()) {
        if (isa<func::ReturnOp>(use.getOwner()))
          return use.getOwner()->emitError()
                 << "parameter argument #" << i
                 << " is returned directly; return a computed value";
        bool fwd = isForward(use.getOwner()) || !reshardAfterForward;
        (fwd ? fwdUses : bwdUses).push_back(&use);
      }
      arg.setType(slot);
      func.setArgAttr(i, FSDPDialect::kGlobalTypeAttrName,
                      TypeAttr::get(global));
      auto gatherFor = [&](ArrayRef<OpOperand *> uses, Phase phase) {
        if (uses.empty())
          return;
        Operation *first = nullptr;
        for (OpOperand *u : uses) {
          Operation *top = ancestorIn(&body, u->getOwner());
          if (!first || top->isBeforeInBlock(first))
            first = top;
        }
        b.setInsertionPoint(first);
        Location loc = first->getLoc();
        Value shard = castFloatElements(b, loc, arg, paramType);
        auto fullType = global.clone(
            cast<RankedTensorType>(shard.getType()).getElementType());
        Value full = ParamGatherOp::create(b, loc, fullType, shard, layout,
                                           phase, unit);
        full = castFloatElements(b, loc, full, global.getElementType());
        for (OpOperand *u : uses)
          u->set(full);
      };
      gatherFor(fwdUses, Phase::forward);
      gatherFor(bwdUses, Phase::backward);
    }

    // Gradients: reduce each marked result into the parameter's slot.
    b.setInsertionPoint(ret);
    SmallVector<Type> resultTypes(func.getResultTypes());
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      auto gradOf = func.getResultAttrOfType<IntegerAttr>(
          r, FSDPDialect::kGradOfAttrName);
      if (!gradOf)
        continue;
      unsigned argIndex = gradOf.getInt();
      auto layout = func.getArgAttrOfType<LayoutAttr>(
          argIndex, FSDPDialect::kLayoutAttrName);
      Value grad = ret.getOperand(r);
      auto fullType = cast<RankedTensorType>(grad.getType());
      lm::Layout model = layout.toDataParallelLayout(mesh.getAxisSizes());
      auto slot =
          RankedTensorType::get(lm::slotShape(model, fullType.getShape().vec()),
                                fullType.getElementType());
      auto reduce = reduceOp == "sum" ? ReduceKind::sum : ReduceKind::avg;
      double scale = gradScale;
      Value accumulator;
      LayoutAttr resultLayout = layout;
      if (variant != Variant::Single) {
        // The running sum of the earlier micro-steps, an extra argument.
        auto name =
            func.getResultAttrOfType<StringAttr>(r, FSDPDialect::kNameAttrName);
        std::string accName =
            "accum." + (name ? name.str() : "result" + std::to_string(r));
        NamedAttrList attrs;
        attrs.set(FSDPDialect::kLayoutAttrName, partialLayout(layout));
        attrs.set(FSDPDialect::kAccumulatorAttrName, b.getUnitAttr());
        attrs.set(FSDPDialect::kNameAttrName, b.getStringAttr(accName));
        if (slot != fullType)
          attrs.set(FSDPDialect::kGlobalTypeAttrName, TypeAttr::get(fullType));
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(index, slot,
                                       attrs.getDictionary(b.getContext()),
                                       ret.getLoc())))
          return failure();
        accumulator = func.getArgument(index);
        if (variant == Variant::Micro) {
          scale = 0.0; // scaled once, in the last micro-step
          resultLayout = partialLayout(layout);
          func.setResultAttr(r, FSDPDialect::kNameAttrName,
                             b.getStringAttr(accName));
        } else if (reduce == ReduceKind::avg) {
          scale = 1.0 / accumulationSteps; // the mean over micro-steps
        }
      }
      auto op = GradReduceOp::create(
          b, ret.getLoc(), slot, grad, accumulator, layout,
          ReduceKindAttr::get(func.getContext(), reduce),
          scale != 0.0 ? b.getF64FloatAttr(scale) : FloatAttr(),
          reduceType ? TypeAttr::get(reduceType) : TypeAttr(),
          func.getArgAttrOfType<StringAttr>(argIndex,
                                            FSDPDialect::kUnitAttrName),
          variant == Variant::Micro ? b.getUnitAttr() : UnitAttr());
      ret.setOperand(r, op.getResult());
      resultTypes[r] = slot;
      func.setResultAttr(r, FSDPDialect::kLayoutAttrName, resultLayout);
      if (slot != fullType)
        func.setResultAttr(r, FSDPDialect::kGlobalTypeAttrName,
                           TypeAttr::get(fullType));
    }
    if (lossIndex && allReduceLoss) {
      Value loss = ret.getOperand(*lossIndex);
      SmallVector<Attribute> axes(mesh.getAxisNames().begin(),
                                  mesh.getAxisNames().end());
      auto op = AllReduceOp::create(
          b, ret.getLoc(), loss.getType(), loss, meshRef, b.getArrayAttr(axes),
          ReduceKindAttr::get(func.getContext(), ReduceKind::avg));
      ret.setOperand(*lossIndex, op.getResult());
    }
    SmallVector<Type> argTypes;
    for (BlockArgument a : body.getArguments())
      argTypes.push_back(a.getType());
    func.setFunctionType(
        FunctionType::get(func.getContext(), argTypes, resultTypes));
    return success();
  }
};
} // namespace

//===- Optimizer.cpp - the optimizer update on the local shards -----------===//
//
// Appends to a partitioned training step the update of every parameter slot
// by its reduced gradient slot (SGD or AdamW with torch.optim's
// single-tensor semantics, optionally after clipping by the global norm).
// Optimizer state has the parameter's slot type and layout, so it is never
// gathered; only the clipping norm crosses ranks (one scalar all-reduce per
// set of sharding axes). docs/SEMANTICS.md §5.5.
//
// The scalars (the norm, the clipping coefficient, the terms that depend on
// lr and the step count) are host arithmetic on extracted values, or with
// device-scalars ops on 0-d tensors that the updates read as inputs: on a
// GPU they are kernels, and no host code waits for a device value. The
// building blocks are in OptimizerIR.cpp, the clipping norm in
// GradientNorm.cpp.
//
//===----------------------------------------------------------------------===//

#include "OptimizerIR.h"
#include "fsdp/Dialect/FSDP/IR/FSDPMultiTensor.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPOPTIMIZER
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::optimizer;

namespace {

/// A number as the user would write it (%g).
std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

/// Scalars shared by every parameter's update, as values of the compute
/// type (f32, or f64 for f64 parameters), built once per type.
struct Scalars {
  Value lr;        // sgd: -lr
  Value decay;     // adamw: 1 - lr * wd
  Value stepSize;  // adamw: -lr / (1 - beta1^t)
  Value bc2Sqrt;   // adamw: sqrt(1 - beta2^t)
  Value firstStep; // sgd: i1, step == 0
  Value clip;      // clipping coefficient, or null
};

struct OptimizerPass
    : public mlir::fsdp::impl::FSDPOptimizerBase<OptimizerPass> {
  using Base::Base;

  double beta1 = 0.9, beta2 = 0.999;

  LogicalResult initialize(MLIRContext *ctx) override {
    auto error = [&]() { return mlir::emitError(UnknownLoc::get(ctx)); };
    auto finite = [](double v) { return std::isfinite(v); };
    if (optimizer == OptimizerKind::none)
      return error() << "the optimizer options (momentum, dampening, "
                        "nesterov, weight-decay, betas, eps, max-grad-norm, "
                        "keep-grads) need optimizer=sgd or optimizer=adamw";
    if (!finite(momentum) || momentum < 0.0)
      return error() << "option momentum must be a finite number >= 0, got "
                     << num(momentum);
    if (!finite(dampening))
      return error() << "option dampening must be a finite number, got "
                     << num(dampening);
    if (nesterov && (momentum <= 0.0 || dampening != 0.0))
      return error() << "option nesterov needs momentum > 0 and dampening = "
                        "0, got momentum "
                     << num(momentum) << " and dampening " << num(dampening);
    if (!finite(weightDecay) || weightDecay < 0.0)
      return error() << "option weight-decay must be a finite number >= 0, got "
                     << num(weightDecay);
    if (!finite(eps) || eps < 0.0)
      return error() << "option eps must be a finite number >= 0, got "
                     << num(eps);
    if (!finite(maxGradNorm) || maxGradNorm < 0.0)
      return error() << "option max-grad-norm must be a finite number >= 0 "
                        "(0 = no clipping), got "
                     << num(maxGradNorm);
    if (!betas.empty()) {
      if (betas.size() != 2)
        return error() << "option betas takes two values beta1,beta2, got "
                       << betas.size();
      for (double beta : betas)
        if (!finite(beta) || beta < 0.0 || beta >= 1.0)
          return error() << "option betas: each value must be in [0, 1), got "
                         << num(beta);
      beta1 = betas[0];
      beta2 = betas[1];
    }
    if (optimizer == OptimizerKind::sgd && (!betas.empty() || eps != 1e-8))
      return error() << "options betas and eps are AdamW's; "
                        "optimizer=sgd takes momentum, dampening, nesterov, "
                        "weight-decay and max-grad-norm";
    if (optimizer == OptimizerKind::adamw &&
        (momentum != 0.0 || dampening != 0.0 || nesterov))
      return error() << "options momentum, dampening and nesterov are SGD's; "
                        "optimizer=adamw takes betas, eps, weight-decay and "
                        "max-grad-norm";
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool any = false;
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      bool hasGrads = false, hasParams = false;
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        hasGrads |= !!func.getResultAttr(r, kGradOfAttrName);
      for (unsigned a = 0; a < func.getNumArguments(); ++a)
        hasParams |= !!func.getArgAttr(a, kLayoutAttrName);
      if (!hasGrads) {
        if (hasParams) {
          func.emitError() << "fsdp-optimizer: @" << func.getSymName()
                           << " has parameters (fsdp.layout arguments) but "
                              "no fsdp.grad_of results; the optimizer "
                              "updates parameters by their gradients";
          return signalPassFailure();
        }
        continue;
      }
      any = true;
      if (failed(rewrite(func)))
        return signalPassFailure();
    }
    if (!any) {
      module.emitError() << "fsdp-optimizer: no function has fsdp.grad_of "
                            "results; the optimizer needs a training step "
                            "that returns its gradients";
      return signalPassFailure();
    }
  }

  //===--------------------------------------------------------------------===//
  // Checking the step
  //===--------------------------------------------------------------------===//

  /// Whether the gradient results are the running sums of gradient
  /// accumulation (@<step>_accumulate): no update there.
  static bool isAccumulationStep(func::FuncOp func) {
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      if (!func.getResultAttr(r, kGradOfAttrName))
        continue;
      auto layout = func.getResultAttrOfType<LayoutAttr>(r, kLayoutAttrName);
      if (layout && llvm::any_of(layout.getPlacements(), [](Attribute p) {
            return isa<PartialAttr>(p);
          }))
        return true;
    }
    return false;
  }

  /// The parameters to update, in argument order; diagnoses steps the
  /// update cannot apply to.
  FailureOr<SmallVector<Param>> collectParams(func::FuncOp func,
                                              func::ReturnOp ret) {
    SmallVector<Param> params;
    llvm::DenseMap<unsigned, unsigned> seen;
    for (unsigned a = 0; a < func.getNumArguments(); ++a)
      if (func.getArgAttr(a, kOptimAttrName) ||
          func.getArgAttr(a, kStateOfAttrName))
        return func.emitError() << "fsdp-optimizer: @" << func.getSymName()
                                << " already has an optimizer step (argument #"
                                << a << " is an optimizer input)";
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      auto gradOf = func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName);
      if (!gradOf)
        continue;
      unsigned arg = gradOf.getInt();
      auto [it, inserted] = seen.try_emplace(arg, r);
      if (!inserted)
        return func.emitError()
               << "fsdp-optimizer: results #" << it->second << " and #" << r
               << " are both the gradient of argument #" << arg
               << "; a parameter takes one update";
      auto layout = func.getResultAttrOfType<LayoutAttr>(r, kLayoutAttrName);
      if (!layout)
        return func.emitError()
               << "fsdp-optimizer: result #" << r
               << " (the gradient of argument #" << arg
               << ") is not a reduced gradient slot (no fsdp.layout); run "
                  "fsdp-partition before fsdp-optimizer";
      Type argType = func.getArgumentTypes()[arg];
      Type gradType = func.getResultTypes()[r];
      auto tensor = dyn_cast<RankedTensorType>(argType);
      if (!tensor || !isa<FloatType>(tensor.getElementType()))
        return func.emitError()
               << "fsdp-optimizer: parameter argument #" << arg << " has type "
               << argType << "; the optimizer updates floating-point tensors";
      if (argType != gradType)
        return func.emitError()
               << "fsdp-optimizer: the gradient (result #" << r << ") has type "
               << gradType << " but its parameter (argument #" << arg
               << ") has type " << argType << "; they must be the same";
      Param p;
      p.arg = arg;
      p.gradIndex = r;
      p.grad = ret.getOperand(r);
      p.layout = func.getArgAttrOfType<LayoutAttr>(arg, kLayoutAttrName);
      if (!p.layout)
        return func.emitError()
               << "fsdp-optimizer: parameter argument #" << arg
               << " has no fsdp.layout; run fsdp-import-shard and "
                  "fsdp-partition before fsdp-optimizer";
      auto name = func.getArgAttrOfType<StringAttr>(arg, kNameAttrName);
      p.name = name ? name.str() : "arg" + std::to_string(arg);
      params.push_back(p);
    }
    llvm::sort(params,
               [](const Param &a, const Param &b) { return a.arg < b.arg; });
    for (const Param &p : params)
      if (p.layout.getMesh() != params.front().layout.getMesh())
        return func.emitError()
               << "fsdp-optimizer: all parameters of a step must use one "
                  "mesh; argument #"
               << p.arg << " uses " << p.layout.getMesh();
    return params;
  }

  //===--------------------------------------------------------------------===//
  // The rewrite
  //===--------------------------------------------------------------------===//

  /// What the update appends to the step's inputs.
  struct StepInputs {
    unsigned lrArg, stepArg;
    LayoutAttr scalarLayout; // replicated over the mesh
  };

  /// The results of the update, with their attributes.
  struct StepResults {
    SmallVector<Value> values;
    SmallVector<DictionaryAttr> attrs;
    void add(Value v, DictionaryAttr a) {
      values.push_back(v);
      attrs.push_back(a);
    }
  };

  LogicalResult rewrite(func::FuncOp func) {
    if (isAccumulationStep(func))
      return success();
    FailureOr<func::ReturnOp> ret = checkStep(func);
    if (failed(ret))
      return failure();
    FailureOr<SmallVector<Param>> collected = collectParams(func, *ret);
    if (failed(collected))
      return failure();
    SmallVector<Param> &params = *collected;
    FlatSymbolRefAttr meshRef = params.front().layout.getMesh();
    MeshOp mesh = lookupMesh(func, meshRef);
    if (!mesh)
      return func.emitError() << "fsdp-optimizer: unknown mesh " << meshRef;
    if (failed(checkNames(func, params)))
      return failure();
    FailureOr<StepInputs> inputs = appendInputs(func, mesh, params);
    if (failed(inputs))
      return failure();
    StepResults results = buildUpdate(func, *ret, mesh, params, *inputs);
    MLIRContext *ctx = func.getContext();
    ret->getOperandsMutable().assign(results.values);
    func.setFunctionType(FunctionType::get(
        ctx, func.getArgumentTypes(), ValueRange(results.values).getTypes()));
    func.setAllResultAttrs(results.attrs);
    return success();
  }

  /// The step's return, when the update can apply to its body.
  FailureOr<func::ReturnOp> checkStep(func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitError()
             << "fsdp-optimizer needs a function body with a single block; @"
             << func.getSymName() << " has "
             << func.getBody().getBlocks().size();
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!ret)
      return func.emitError() << "fsdp-optimizer needs a func.return "
                                 "terminator";
    return ret;
  }

  /// Appends the arguments: lr, step, then each parameter's state.
  FailureOr<StepInputs> appendInputs(func::FuncOp func, MeshOp mesh,
                                     MutableArrayRef<Param> params) {
    MLIRContext *ctx = func.getContext();
    Builder b(ctx);
    SmallVector<Attribute> replicated(mesh.getNumAxes(),
                                      ReplicateAttr::get(ctx));
    StepInputs inputs;
    inputs.scalarLayout =
        LayoutAttr::get(ctx, params.front().layout.getMesh(),
                        ArrayAttr::get(ctx, replicated), UnevenPolicy::ceil);
    auto addArg = [&](Type type, NamedAttrList attrs) -> FailureOr<unsigned> {
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(index, type, attrs.getDictionary(ctx),
                                     func.getLoc())))
        return failure();
      return index;
    };
    auto optimArg = [&](StringRef role) {
      NamedAttrList attrs;
      attrs.set(kNameAttrName, b.getStringAttr(role));
      attrs.set(kOptimAttrName, b.getStringAttr(role));
      attrs.set(kLayoutAttrName, inputs.scalarLayout);
      return addArg(RankedTensorType::get({}, b.getF32Type()), attrs);
    };
    FailureOr<unsigned> lrArg = optimArg("lr");
    FailureOr<unsigned> stepArg = optimArg("step");
    if (failed(lrArg) || failed(stepArg))
      return failure();
    inputs.lrArg = *lrArg;
    inputs.stepArg = *stepArg;
    for (Param &p : params) {
      for (StringRef state : stateNames()) {
        NamedAttrList attrs;
        attrs.set(kNameAttrName, b.getStringAttr(state + "." + p.name));
        attrs.set(kStateOfAttrName, b.getI64IntegerAttr(p.arg));
        for (StringRef copied :
             {kLayoutAttrName, kGlobalTypeAttrName, kUnitAttrName})
          if (Attribute a = func.getArgAttr(p.arg, copied))
            attrs.set(copied, a);
        FailureOr<unsigned> index =
            addArg(func.getArgumentTypes()[p.arg], attrs);
        if (failed(index))
          return failure();
        p.stateArgs.push_back(*index);
      }
    }
    return inputs;
  }

  /// Builds every update before `ret`. Results: the original ones without
  /// the gradients (unless kept), then parameters, states, step and
  /// grad_norm.
  StepResults buildUpdate(func::FuncOp func, func::ReturnOp ret, MeshOp mesh,
                          ArrayRef<Param> params, const StepInputs &inputs) {
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    Type f32 = b.getF32Type();
    // Host values, or with device-scalars 0-d tensors.
    Value lr, step, newStep, gradNorm, clip;
    if (deviceScalars) {
      lr = func.getArgument(inputs.lrArg);
      step = func.getArgument(inputs.stepArg);
      newStep = scalarOp(
          b, loc, step, f32, [&](OpBuilder &nb, Location nl, ValueRange v) {
            return SmallVector<Value>{
                arith::AddFOp::create(nb, nl, v[0], constant(nb, nl, f32, 1))};
          })[0];
      if (maxGradNorm > 0.0)
        std::tie(gradNorm, clip) =
            deviceClipCoefficient(b, loc, mesh, params, maxGradNorm);
    } else {
      lr = scalarOf(b, loc, func.getArgument(inputs.lrArg));
      step = scalarOf(b, loc, func.getArgument(inputs.stepArg));
      newStep = arith::AddFOp::create(b, loc, step, constant(b, loc, f32, 1));
      if (maxGradNorm > 0.0)
        std::tie(gradNorm, clip) =
            clipCoefficient(b, loc, mesh, params, maxGradNorm);
    }
    std::map<unsigned, Scalars> scalarsByWidth;
    std::map<unsigned, SmallVector<Value>> tensorsByWidth;
    auto scalarsFor = [&](Type computeType) -> Scalars & {
      unsigned width = computeType.getIntOrFloatBitWidth();
      auto it = scalarsByWidth.find(width);
      if (it == scalarsByWidth.end())
        it = scalarsByWidth
                 .emplace(width, buildScalars(b, loc, computeType, lr, step,
                                              newStep, clip))
                 .first;
      return it->second;
    };
    auto tensorsFor = [&](Type computeType) -> SmallVector<Value> & {
      unsigned width = computeType.getIntOrFloatBitWidth();
      auto it = tensorsByWidth.find(width);
      if (it == tensorsByWidth.end())
        it = tensorsByWidth
                 .emplace(width, buildScalarTensors(b, loc, computeType, lr,
                                                    step, newStep, clip))
                 .first;
      return it->second;
    };

    StepResults results;
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (keepGrads || !func.getResultAttr(r, kGradOfAttrName))
        results.add(ret.getOperand(r), func.getResultAttrDict(r));
    SmallVector<std::pair<unsigned, Value>> updatedStates;
    for (const Param &p : params) {
      auto type = cast<RankedTensorType>(func.getArgumentTypes()[p.arg]);
      Type computeType =
          type.getElementType().isF64() ? Type(b.getF64Type()) : Type(f32);
      SmallVector<Value> updated =
          deviceScalars ? deviceUpdate(b, loc, func, p, type, computeType,
                                       tensorsFor(computeType), step, !!clip)
                        : update(b, loc, func, p, type, computeType,
                                 scalarsFor(computeType), {}, {});
      // Every parameter's update is independent of the others': a GPU
      // launches them together (fsdp-gpu-multi-tensor).
      if (deviceScalars)
        updated[0].getDefiningOp()->setAttr(
            kMultiTensorAttrName,
            b.getStringAttr(optimizer == OptimizerKind::adamw ? "adamw"
                                                              : "sgd"));
      results.add(updated[0], updateAttrs(func, p.arg));
      for (auto [stateArg, value] :
           llvm::zip_equal(p.stateArgs, ArrayRef(updated).drop_front()))
        updatedStates.emplace_back(stateArg, value);
      ++numUpdated;
    }
    for (auto [stateArg, value] : updatedStates)
      results.add(value, updateAttrs(func, stateArg));
    auto asTensor = [&](Value v) {
      return deviceScalars ? v : tensorOf(b, loc, v);
    };
    results.add(asTensor(newStep), updateAttrs(func, inputs.stepArg));
    if (gradNorm) {
      NamedAttrList attrs;
      attrs.set(kNameAttrName, b.getStringAttr("grad_norm"));
      attrs.set(kLayoutAttrName, inputs.scalarLayout);
      results.add(asTensor(gradNorm), attrs.getDictionary(func.getContext()));
    }
    return results;
  }

  SmallVector<StringRef> stateNames() const {
    if (optimizer == OptimizerKind::adamw)
      return {"exp_avg", "exp_avg_sq"};
    if (momentum != 0.0)
      return {"momentum_buffer"};
    return {};
  }

  /// The new names must not collide with the step's own.
  LogicalResult checkNames(func::FuncOp func, ArrayRef<Param> params) {
    llvm::StringSet<> argNames, resultNames;
    for (unsigned a = 0; a < func.getNumArguments(); ++a)
      if (auto n = func.getArgAttrOfType<StringAttr>(a, kNameAttrName))
        argNames.insert(n.getValue());
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      if (!keepGrads && func.getResultAttr(r, kGradOfAttrName))
        continue;
      if (auto n = func.getResultAttrOfType<StringAttr>(r, kNameAttrName))
        resultNames.insert(n.getValue());
    }
    auto clash = [&](StringRef name, bool argument) -> LogicalResult {
      if (!(argument ? argNames : resultNames).contains(name))
        return success();
      return func.emitError()
             << "fsdp-optimizer: @" << func.getSymName() << " already has "
             << (argument ? "an argument" : "a result") << " named \"" << name
             << "\"; the optimizer step adds one of that name";
    };
    SmallVector<std::string> newArgs = {"lr", "step"};
    SmallVector<std::string> newResults = {"step"};
    if (maxGradNorm > 0.0)
      newResults.push_back("grad_norm");
    for (const Param &p : params) {
      newResults.push_back(p.name);
      for (StringRef state : stateNames()) {
        newArgs.push_back((state + "." + p.name).str());
        newResults.push_back(newArgs.back());
      }
    }
    for (const std::string &n : newArgs)
      if (failed(clash(n, true)))
        return failure();
    for (const std::string &n : newResults)
      if (failed(clash(n, false)))
        return failure();
    return success();
  }

  /// The result attributes of the next value of argument `arg`.
  static DictionaryAttr updateAttrs(func::FuncOp func, unsigned arg) {
    Builder b(func.getContext());
    NamedAttrList attrs;
    for (StringRef copied :
         {kNameAttrName, kLayoutAttrName, kGlobalTypeAttrName})
      if (Attribute a = func.getArgAttr(arg, copied))
        attrs.set(copied, a);
    attrs.set(kUpdateOfAttrName, b.getI64IntegerAttr(arg));
    return attrs.getDictionary(func.getContext());
  }

  /// The per-step scalars in `computeType`: hyper-parameters that depend on
  /// lr and step are computed in f64 (torch's Python floats), then rounded.
  Scalars buildScalars(OpBuilder &b, Location loc, Type computeType, Value lr,
                       Value step, Value newStep, Value clip,
                       bool withFirstStep = true) {
    Type f64 = b.getF64Type();
    Scalars s;
    Value lr64 = convertTo(b, loc, lr, f64);
    auto c64 = [&](double v) { return constant(b, loc, f64, v); };
    if (optimizer == OptimizerKind::sgd) {
      s.lr =
          convertTo(b, loc, arith::NegFOp::create(b, loc, lr64), computeType);
      if (withFirstStep)
        s.firstStep =
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, step,
                                  constant(b, loc, step.getType(), 0));
    } else {
      Value t = convertTo(b, loc, newStep, f64);
      Value one = c64(1);
      Value beta1t = math::PowFOp::create(b, loc, c64(beta1), t);
      Value bc1 = arith::SubFOp::create(b, loc, one, beta1t);
      Value beta2t = math::PowFOp::create(b, loc, c64(beta2), t);
      Value bc2 = arith::SubFOp::create(b, loc, one, beta2t);
      Value stepSize = arith::DivFOp::create(b, loc, lr64, bc1);
      s.stepSize = convertTo(b, loc, arith::NegFOp::create(b, loc, stepSize),
                             computeType);
      s.bc2Sqrt =
          convertTo(b, loc, math::SqrtOp::create(b, loc, bc2), computeType);
      Value lrWd = arith::MulFOp::create(b, loc, lr64, c64(weightDecay));
      Value decay = arith::SubFOp::create(b, loc, one, lrWd);
      s.decay = convertTo(b, loc, decay, computeType);
    }
    if (clip)
      s.clip = convertTo(b, loc, clip, computeType);
    return s;
  }

  /// The fields of `s` that buildScalars sets (firstStep aside), in a fixed
  /// order.
  SmallVector<Value *> scalarFields(Scalars &s, bool withClip) const {
    SmallVector<Value *> fields;
    if (optimizer == OptimizerKind::sgd)
      fields = {&s.lr};
    else
      fields = {&s.decay, &s.stepSize, &s.bc2Sqrt};
    if (withClip)
      fields.push_back(&s.clip);
    return fields;
  }

  /// buildScalars as one scalar op on the 0-d tensors lr, step, newStep
  /// and clip (or null): one 0-d result per scalarFields entry (SGD's
  /// first-step test is left to the update).
  SmallVector<Value> buildScalarTensors(OpBuilder &b, Location loc,
                                        Type computeType, Value lr, Value step,
                                        Value newStep, Value clip) {
    SmallVector<Value> inputs = {lr, step, newStep};
    if (clip)
      inputs.push_back(clip);
    Scalars layout;
    SmallVector<Type> types(scalarFields(layout, !!clip).size(), computeType);
    return scalarOp(b, loc, inputs, types,
                    [&](OpBuilder &nb, Location nl, ValueRange v) {
                      Scalars s = buildScalars(nb, nl, computeType, v[0], v[1],
                                               v[2], clip ? v[3] : Value(),
                                               /*withFirstStep=*/false);
                      SmallVector<Value> values;
                      for (Value *f : scalarFields(s, !!clip))
                        values.push_back(*f);
                      return values;
                    });
  }

  /// update() with the scalars read from the 0-d tensors `tensors`
  /// (buildScalarTensors), and `step` for SGD's first-step test.
  SmallVector<Value> deviceUpdate(OpBuilder &b, Location loc, func::FuncOp func,
                                  const Param &p, RankedTensorType type,
                                  Type computeType, ValueRange tensors,
                                  Value step, bool withClip) {
    SmallVector<Value> scalarInputs(tensors);
    bool needsStep = optimizer == OptimizerKind::sgd && momentum != 0.0;
    if (needsStep)
      scalarInputs.push_back(step);
    auto scalarsAt = [&](OpBuilder &nb, Location nl, ValueRange v) {
      Scalars s;
      for (auto [f, value] : llvm::zip(scalarFields(s, withClip), v))
        *f = value;
      if (needsStep)
        s.firstStep =
            arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, v.back(),
                                  constant(nb, nl, v.back().getType(), 0));
      return s;
    };
    return update(b, loc, func, p, type, computeType, Scalars(), scalarInputs,
                  scalarsAt);
  }

  /// The updated parameter slot, then its updated states. The scalars are
  /// `hostScalars`, or with `scalarInputs` (0-d tensors) what `scalarsAt`
  /// makes of their values in the body.
  SmallVector<Value>
  update(OpBuilder &b, Location loc, func::FuncOp func, const Param &p,
         RankedTensorType type, Type computeType, const Scalars &hostScalars,
         ValueRange scalarInputs,
         function_ref<Scalars(OpBuilder &, Location, ValueRange)> scalarsAt) {
    SmallVector<Value> inputs = {func.getArgument(p.arg), p.grad};
    for (unsigned stateArg : p.stateArgs)
      inputs.push_back(func.getArgument(stateArg));
    unsigned numResults = 1 + p.stateArgs.size();
    auto body = [&](OpBuilder &nb, Location nl,
                    ValueRange all) -> SmallVector<Value> {
      ValueRange v = all.take_front(inputs.size());
      Scalars s = scalarInputs.empty()
                      ? hostScalars
                      : scalarsAt(nb, nl, all.drop_front(inputs.size()));
      auto c = [&](double x) { return constant(nb, nl, computeType, x); };
      auto add = [&](Value x, Value y) -> Value {
        return arith::AddFOp::create(nb, nl, x, y);
      };
      auto mul = [&](Value x, Value y) -> Value {
        return arith::MulFOp::create(nb, nl, x, y);
      };
      Value param = v[0], grad = v[1];
      if (s.clip)
        grad = mul(grad, s.clip);
      if (optimizer == OptimizerKind::sgd) {
        // torch.optim.SGD, _single_tensor_sgd.
        if (weightDecay != 0.0)
          grad = add(grad, mul(c(weightDecay), param));
        SmallVector<Value> out = {Value()};
        if (momentum != 0.0) {
          Value buf = v[2];
          Value damped =
              dampening != 0.0 ? mul(c(1.0 - dampening), grad) : grad;
          Value next = add(mul(buf, c(momentum)), damped);
          buf = arith::SelectOp::create(nb, nl, s.firstStep, grad, next);
          out.push_back(buf);
          grad = nesterov ? add(grad, mul(c(momentum), buf)) : buf;
        }
        out[0] = add(param, mul(s.lr, grad));
        return out;
      }
      // torch.optim.AdamW, _single_tensor_adam with decoupled weight decay.
      Value expAvg = v[2], expAvgSq = v[3];
      if (weightDecay != 0.0)
        param = mul(param, s.decay);
      // lerp(m, g, w) as torch computes it for w < 0.5 and w >= 0.5.
      double w = 1.0 - beta1;
      Value diff = arith::SubFOp::create(nb, nl, grad, expAvg);
      if (static_cast<float>(w) < 0.5f)
        expAvg = add(expAvg, mul(c(w), diff));
      else
        expAvg = arith::SubFOp::create(
            nb, nl, grad,
            mul(diff, c(1.0 - static_cast<double>(static_cast<float>(w)))));
      // Operands are built one statement at a time: C++ leaves the order in
      // which call arguments are evaluated open.
      Value decayed = mul(expAvgSq, c(beta2));
      Value scaled = mul(c(1.0 - beta2), grad);
      expAvgSq = add(decayed, mul(scaled, grad));
      Value root = math::SqrtOp::create(nb, nl, expAvgSq);
      Value corrected = arith::DivFOp::create(nb, nl, root, s.bc2Sqrt);
      Value denom = add(corrected, c(eps));
      param = add(
          param, arith::DivFOp::create(nb, nl, mul(s.stepSize, expAvg), denom));
      return {param, expAvg, expAvgSq};
    };
    return elementwise(b, loc, type, computeType, inputs, scalarInputs,
                       numResults, body);
  }
};

} // namespace

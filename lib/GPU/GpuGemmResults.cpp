//===- GpuGemmResults.cpp - zero-started and rounded gemm results ---------===//
//
// Two rewrites of contractions on tensors, before bufferization, that the
// cuBLAS lowering turns into cheaper calls:
//
// - An accumulator of zeros that is not a fill of the op's own (a fill the
//   outlined segments pass around as an argument or a result, or one several
//   products share) becomes a zero fill right before the op. Bufferized, a
//   shared or passed-in accumulator is a copy of the zeros into a fresh
//   buffer and a gemm with beta = 1 that reads it; a fill of its own is
//   beta = 0 (fsdp-linalg-to-cublas folds it).
// - An f32 product of bf16 operands whose result is only rounded to bf16 by
//   its readers becomes a bf16 product with an f32 accumulator
//   (fsdp.f32_accumulation, fsdprt_gpu_gemm_bf16: cuBLAS sums in f32 and
//   rounds once), and the readers take the bf16 result in place of their
//   `arith.truncf`: the same values, half the bytes written and read.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUGEMMRESULTS
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Which tensors are all zeros, following reshapes, calls into the module's
/// functions (every return) and the arguments of private functions (every
/// call site).
class Zeros {
public:
  explicit Zeros(ModuleOp module) : module(module) {
    module.walk([&](func::CallOp call) {
      calls[call.getCalleeAttr().getAttr()].push_back(call);
    });
  }

  bool isZero(Value v) {
    auto it = cache.find(v);
    if (it != cache.end())
      return it->second;
    // A cycle (recursion) is not known to be zeros.
    if (!visiting.insert(v).second)
      return false;
    bool zero = compute(v);
    visiting.erase(v);
    cache[v] = zero;
    return zero;
  }

  /// The calls of `func` when they are all of its uses (a private
  /// function called directly); none otherwise.
  ArrayRef<func::CallOp> allCallsOf(func::FuncOp func) {
    if (!func.isPrivate())
      return {};
    auto it = calls.find(func.getSymNameAttr());
    if (it == calls.end())
      return {};
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(func, module);
    if (!uses)
      return {};
    size_t n = 0;
    for (const SymbolTable::SymbolUse &use : *uses) {
      if (!isa<func::CallOp>(use.getUser()))
        return {};
      ++n;
    }
    if (n != it->second.size())
      return {};
    return it->second;
  }

private:
  bool compute(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (!func || arg.getOwner() != &func.getBody().front())
        return false;
      ArrayRef<func::CallOp> callers = allCallsOf(func);
      return !callers.empty() && llvm::all_of(callers, [&](func::CallOp call) {
        return isZero(call.getOperand(arg.getArgNumber()));
      });
    }
    Operation *def = v.getDefiningOp();
    if (auto fill = dyn_cast<linalg::FillOp>(def))
      return fill.hasPureTensorSemantics() &&
             matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def))
      return isZero(expand.getSrc());
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def))
      return isZero(collapse.getSrc());
    if (auto call = dyn_cast<func::CallOp>(def)) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
      if (!callee || callee.isExternal())
        return false;
      unsigned i = cast<OpResult>(v).getResultNumber();
      bool any = false;
      WalkResult r = callee.walk([&](func::ReturnOp ret) {
        any = true;
        return isZero(ret.getOperand(i)) ? WalkResult::advance()
                                         : WalkResult::interrupt();
      });
      return any && !r.wasInterrupted();
    }
    return false;
  }

  ModuleOp module;
  llvm::DenseMap<StringAttr, SmallVector<func::CallOp>> calls;
  llvm::DenseMap<Value, bool> cache;
  llvm::DenseSet<Value> visiting;
};

/// A contraction on tensors of static shape with M, N and K dimensions
/// that a gemm computes (the shape planGemm takes).
bool isGemmOnTensors(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || !isMultiplyAccumulate(op))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.empty() || dims->n.empty() || dims->k.empty())
    return false;
  if (!llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isProjectedPermutation(); }))
    return false;
  auto type = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  return type && type.hasStaticShape() && isa<FloatType>(type.getElementType());
}

/// Whether the accumulator of `op` is a zero fill right before it that only
/// `op` reads (bufferized, the fill and the op share one buffer and one
/// outlined kernel: beta = 0).
bool hasOwnZeroFill(linalg::LinalgOp op) {
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  return fill && fill->getNextNode() == op.getOperation() &&
         fill->getResult(0).hasOneUse() &&
         matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// A zero fill of a new tensor of `type`, at `b`'s insertion point.
Value zeroFill(OpBuilder &b, Location loc, RankedTensorType type) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value zero = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type.getElementType(), 0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// Whether `v` is a reshape of a tensor (expand_shape, collapse_shape): a
/// view whose readers are the value's readers.
bool isReshape(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op);
}

/// Whether every reader of `v` (through reshapes) is a linalg.generic that
/// only rounds it to bf16 (and there is at least one).
bool onlyRoundedToBf16(Value v) {
  if (v.use_empty())
    return false;
  for (OpOperand &use : v.getUses()) {
    if (isReshape(use.getOwner())) {
      if (!onlyRoundedToBf16(use.getOwner()->getResult(0)))
        return false;
      continue;
    }
    auto reader = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (!reader || !reader.isDpsInput(&use))
      return false;
    BlockArgument arg = reader.getMatchingBlockArgument(&use);
    if (arg.use_empty())
      return false;
    for (Operation *user : arg.getUsers()) {
      auto trunc = dyn_cast<arith::TruncFOp>(user);
      if (!trunc || !trunc.getType().isBF16() || trunc.getRoundingmodeAttr())
        return false;
    }
  }
  return true;
}

/// Points every reader of `old` (through reshapes, which are recreated on
/// bf16) at `rounded`, its bf16 rounding, dropping the readers' truncf.
void readRounded(OpBuilder &b, Value old, Value rounded) {
  for (OpOperand &use : llvm::make_early_inc_range(old.getUses())) {
    Operation *owner = use.getOwner();
    if (isReshape(owner)) {
      b.setInsertionPoint(owner);
      auto type = cast<RankedTensorType>(owner->getResult(0).getType());
      Operation *view = b.clone(*owner);
      view->setOperand(0, rounded);
      view->getResult(0).setType(
          RankedTensorType::get(type.getShape(), b.getBF16Type()));
      readRounded(b, owner->getResult(0), view->getResult(0));
      owner->erase();
      continue;
    }
    auto reader = cast<linalg::GenericOp>(owner);
    BlockArgument arg = reader.getMatchingBlockArgument(&use);
    use.set(rounded);
    arg.setType(b.getBF16Type());
    for (Operation *trunc : llvm::make_early_inc_range(arg.getUsers())) {
      trunc->getResult(0).replaceAllUsesWith(arg);
      trunc->erase();
    }
  }
}

/// The bf16 contraction of the bf16 operands of `op` (an f32 product of
/// widened bf16 inputs from zeros), its sum carried in f32.
Value roundedContraction(OpBuilder &b, linalg::LinalgOp op) {
  Location loc = op.getLoc();
  auto f32Type = cast<RankedTensorType>(op->getResult(0).getType());
  auto type = RankedTensorType::get(f32Type.getShape(), b.getBF16Type());
  Value init = zeroFill(b, loc, type);
  auto gemm = linalg::GenericOp::create(
      b, loc, TypeRange{type}, op.getDpsInputs(), ValueRange{init},
      op.getIndexingMapsArray(), op.getIteratorTypesArray(),
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value p = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        Value s = arith::AddFOp::create(nb, nloc, args[2], p);
        linalg::YieldOp::create(nb, nloc, s);
      });
  gemm->setAttr(kF32AccumulationAttrName, b.getUnitAttr());
  return gemm.getResult(0);
}

void eraseIfDead(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !v.use_empty() || !isa<linalg::FillOp>(def))
    return;
  Value empty = cast<linalg::FillOp>(def).getOutputs()[0];
  def->erase();
  if (Operation *e = empty.getDefiningOp<tensor::EmptyOp>())
    if (e->use_empty())
      e->erase();
}

struct FSDPGpuGemmResultsPass
    : public mlir::fsdp::impl::FSDPGpuGemmResultsBase<FSDPGpuGemmResultsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Zeros zeros(module);
    SmallVector<linalg::LinalgOp> gemms;
    module.walk([&](linalg::LinalgOp op) {
      if (isGemmOnTensors(op))
        gemms.push_back(op);
    });
    // Decide on every accumulator before changing any: the analysis
    // follows values that the rewrites below replace.
    SmallVector<linalg::LinalgOp> zeroStarted;
    for (linalg::LinalgOp op : gemms)
      if (zeros.isZero(op.getDpsInits()[0]))
        zeroStarted.push_back(op);

    // The function arguments that were accumulators, to remove once unused.
    llvm::MapVector<func::FuncOp, llvm::SetVector<unsigned>> argsToCheck;
    for (linalg::LinalgOp op : zeroStarted) {
      if (hasOwnZeroFill(op))
        continue;
      OpOperand *init = op.getDpsInitOperand(0);
      Value old = init->get();
      if (auto arg = dyn_cast<BlockArgument>(old))
        if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
          argsToCheck[func].insert(arg.getArgNumber());
      OpBuilder b(op);
      init->set(
          zeroFill(b, op.getLoc(), cast<RankedTensorType>(old.getType())));
      eraseIfDead(old);
      ++numLocalZeros;
      if (report)
        op->emitRemark() << "contraction starts from a zero fill of its own";
    }

    for (linalg::LinalgOp op : zeroStarted) {
      Type in = getElementTypeOrSelf(op.getDpsInputs()[0].getType());
      Type out = getElementTypeOrSelf(op.getDpsInits()[0].getType());
      if (!in.isBF16() || !out.isF32() || !onlyRoundedToBf16(op->getResult(0)))
        continue;
      OpBuilder b(op);
      Value rounded = roundedContraction(b, op);
      readRounded(b, op->getResult(0), rounded);
      Value oldInit = op.getDpsInits()[0];
      if (report)
        op->emitRemark() << "contraction writes its bf16 rounding (f32 "
                            "accumulation)";
      op->erase();
      eraseIfDead(oldInit);
      ++numRounded;
    }

    for (auto &[func, indices] : argsToCheck) {
      ArrayRef<func::CallOp> callers = zeros.allCallsOf(func);
      if (callers.empty())
        continue;
      llvm::BitVector dead(func.getNumArguments());
      for (unsigned i : indices)
        if (func.getArgument(i).use_empty())
          dead.set(i);
      if (dead.none())
        continue;
      if (failed(func.eraseArguments(dead))) {
        func.emitError("cannot remove the unused accumulator arguments");
        return signalPassFailure();
      }
      for (func::CallOp call : callers)
        call->eraseOperands(dead);
      numArgsErased += dead.count();
    }
  }
};

} // namespace

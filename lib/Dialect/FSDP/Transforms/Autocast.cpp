//===- Autocast.cpp - 16-bit contractions, f32 sums and exponentials ------===//
//
// fsdp-autocast (Passes.td has the rule; docs/SEMANTICS.md, "Which ops run
// in which dtype"). Decisions are made on the step as it is, then each op is
// rewritten in program order. A value stored in 16 bits is an
// `arith.extf` of its 16-bit twin, so every op that is not rewritten keeps
// reading f32; the rewritten ones read the twin and widen it in their body.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPAUTOCAST
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

enum class Role { Contraction, Grouped, Reduction, Elementwise, Move, Other };

/// What happens to an elementwise op's result.
enum class Store { Narrow, KeepF32 };

bool isF32Tensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.getElementType().isF32();
}

/// Float tensors of the op are all f32 (integer ones, e.g. labels, may
/// appear), and at least one result is an f32 tensor.
bool onlyF32Floats(linalg::LinalgOp op) {
  for (Value v : op->getOperands()) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    if (!rt)
      continue;
    if (isa<FloatType>(rt.getElementType()) && !rt.getElementType().isF32())
      return false;
  }
  bool anyF32 = false;
  for (Type t : op->getResultTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt)
      return false;
    if (isa<FloatType>(rt.getElementType()) && !rt.getElementType().isF32())
      return false;
    anyF32 |= rt.getElementType().isF32();
  }
  return anyF32;
}

/// The data a reshape, slice, transpose, broadcast or copy moves, or null.
Value moveSource(Operation *op) {
  if (op->getNumResults() != 1 || !isF32Tensor(op->getResult(0).getType()))
    return Value();
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          tensor::ExtractSliceOp, tensor::CastOp>(op))
    return op->getOperand(0);
  if (isa<linalg::TransposeOp, linalg::BroadcastOp, linalg::CopyOp>(op)) {
    auto lop = cast<linalg::LinalgOp>(op);
    // The twin needs a fresh init of its own type.
    if (!lop.hasPureTensorSemantics() ||
        !lop.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>())
      return Value();
    return lop.getDpsInputOperand(0)->get();
  }
  return Value();
}

/// A grouped product (sparse experts) whose lhs, rhs and result are f32.
bool isF32Grouped(Operation *op) {
  if (!isa<GroupedMatmulOp, GroupedMatmulTransposeLhsOp>(op))
    return false;
  return isF32Tensor(op->getOperand(0).getType()) &&
         isF32Tensor(op->getOperand(1).getType()) &&
         isF32Tensor(op->getResult(0).getType());
}

Role roleOf(Operation *op) {
  if (moveSource(op))
    return Role::Move;
  if (isF32Grouped(op))
    return Role::Grouped;
  auto lop = dyn_cast<linalg::LinalgOp>(op);
  if (!lop || isa<linalg::FillOp>(op) || !lop.hasPureTensorSemantics() ||
      !onlyF32Floats(lop))
    return Role::Other;
  if (lop.getNumDpsInputs() == 2 && lop.getNumDpsInits() == 1 &&
      llvm::all_of(lop->getOperandTypes(), isF32Tensor) &&
      linalg::isaContractionOpInterface(lop))
    return Role::Contraction;
  if (!isa<linalg::GenericOp>(op))
    return Role::Other;
  if (lop.getNumParallelLoops() == lop.getNumLoops())
    return Role::Elementwise;
  return Role::Reduction;
}

/// torch.autocast's f32 list among elementwise math: exponentials,
/// logarithms and powers.
bool hasExpOrLog(Operation *op) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (isa<math::ExpOp, math::Exp2Op, math::ExpM1Op, math::LogOp,
            math::Log1pOp, math::Log2Op, math::Log10Op, math::PowFOp>(inner))
      found = true;
  });
  return found;
}

struct AutocastPass : public mlir::fsdp::impl::FSDPAutocastBase<AutocastPass> {
  using Base::Base;

  Type narrowType, wideType;
  DenseMap<Operation *, Role> roles;
  DenseMap<Operation *, Store> stores;
  /// f32 value -> its 16-bit twin (the value is stored in 16 bits).
  DenseMap<Value, Value> twins;
  /// Ops that may be dead once their users read the twins.
  llvm::SetVector<Operation *> maybeDead;

  Role role(Operation *op) const {
    auto it = roles.find(op);
    return it == roles.end() ? Role::Other : it->second;
  }

  /// The op that computes `v`, looking through reshapes, slices,
  /// transposes, broadcasts and copies (null for a block argument).
  Operation *producer(Value v) const {
    while (Operation *def = v.getDefiningOp()) {
      if (role(def) != Role::Move)
        return def;
      v = moveSource(def);
    }
    return nullptr;
  }

  /// Elementwise ops that must stay f32: exp/log bodies, and (backwards)
  /// every elementwise op a reduction or such an op reads.
  void findKeptF32(ArrayRef<Operation *> ops) {
    SmallVector<Operation *> work;
    for (Operation *op : ops) {
      Role r = role(op);
      if (r == Role::Reduction) {
        work.push_back(op);
      } else if (r == Role::Elementwise && hasExpOrLog(op)) {
        stores[op] = Store::KeepF32;
        work.push_back(op);
      }
    }
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value operand : op->getOperands()) {
        Operation *def = producer(operand);
        if (def && role(def) == Role::Elementwise &&
            stores.try_emplace(def, Store::KeepF32).second)
          work.push_back(def);
      }
    }
  }

  /// Elementwise ops that only read statistics (reductions' results,
  /// fills, constants, and such ops' results) stay f32 too; the others
  /// store 16 bits.
  void findStatistics(ArrayRef<Operation *> ops) {
    DenseSet<Operation *> statistics;
    auto isStatistic = [&](Value v) {
      auto rt = dyn_cast<RankedTensorType>(v.getType());
      if (!rt || !isa<FloatType>(rt.getElementType()))
        return true; // integer data (labels, masks) does not count
      Operation *def = producer(v);
      if (!def)
        return false; // step inputs are activations
      return role(def) == Role::Reduction || statistics.contains(def) ||
             isa<linalg::FillOp, arith::ConstantOp, tensor::EmptyOp>(def);
    };
    for (Operation *op : ops) {
      if (role(op) != Role::Elementwise)
        continue;
      auto lop = cast<linalg::LinalgOp>(op);
      bool onlyStatistics =
          llvm::all_of(lop.getDpsInputOperands(),
                       [&](OpOperand *o) { return isStatistic(o->get()); });
      if (onlyStatistics)
        statistics.insert(op);
      if (stores.count(op))
        continue;
      stores[op] = onlyStatistics ? Store::KeepF32 : Store::Narrow;
    }
  }

  /// The 16-bit twin of `v`, if it is stored in 16 bits: a widening of a
  /// 16-bit value (a gathered parameter) or a value this pass narrowed.
  Value twinOf(Value v) const {
    if (Value t = twins.lookup(v))
      return t;
    if (auto ext = v.getDefiningOp<arith::ExtFOp>()) {
      auto src = dyn_cast<RankedTensorType>(ext.getIn().getType());
      if (src && src.getElementType() == narrowType && isF32Tensor(v.getType()))
        return ext.getIn();
    }
    return Value();
  }

  RankedTensorType narrowed(Type t) const {
    return cast<RankedTensorType>(t).clone(narrowType);
  }

  /// `v` stored in 16 bits: its twin, else one rounding.
  Value narrowValue(OpBuilder &b, Location loc, Value v) {
    if (Value t = twinOf(v))
      return t;
    return arith::TruncFOp::create(b, loc, narrowed(v.getType()), v);
  }

  /// Users of `old` read the widening of `narrow` instead, whose twin is
  /// `narrow`.
  void storeNarrow(OpBuilder &b, Location loc, Value old, Value narrow) {
    auto ext = arith::ExtFOp::create(b, loc, old.getType(), narrow);
    old.replaceAllUsesWith(ext.getResult());
    twins[ext.getResult()] = narrow;
    maybeDead.insert(ext);
  }

  /// Rebuilds `op` as a linalg.generic with the same maps and body whose
  /// inputs are the 16-bit twins where they exist (all of them for a
  /// contraction: `narrowInputs`), widened in the body; with
  /// `narrowResults` its f32 results are rounded to 16 bits in the body.
  /// Returns the new op, or null when nothing changes.
  linalg::GenericOp rebuild(linalg::LinalgOp op, bool narrowInputs,
                            bool narrowResults) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<Value> inputs, inits;
    SmallVector<bool> widen;
    bool changed = narrowResults;
    for (OpOperand *in : op.getDpsInputOperands()) {
      Value v = in->get();
      Value t = isF32Tensor(v.getType())
                    ? (narrowInputs ? narrowValue(b, loc, v) : twinOf(v))
                    : Value();
      inputs.push_back(t ? t : v);
      widen.push_back(bool(t));
      changed |= bool(t);
    }
    if (!changed)
      return nullptr;
    SmallVector<bool> roundResult;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      Value v = init.get();
      bool narrow = narrowResults && isF32Tensor(v.getType());
      roundResult.push_back(narrow);
      if (!narrow) {
        inits.push_back(v);
        widen.push_back(false);
        continue;
      }
      if (op.getMatchingBlockArgument(&init).use_empty()) {
        SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, v);
        inits.push_back(tensor::EmptyOp::create(b, loc, sizes, narrowType));
        widen.push_back(false);
      } else {
        inits.push_back(narrowValue(b, loc, v));
        widen.push_back(true);
      }
    }
    SmallVector<Type> resultTypes;
    for (Value v : inits)
      resultTypes.push_back(v.getType());
    Block *body = op.getBlock();
    auto generic = linalg::GenericOp::create(
        b, loc, resultTypes, inputs, inits, op.getIndexingMapsArray(),
        op.getIteratorTypesArray(),
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          IRMapping map;
          for (auto [i, arg] : llvm::enumerate(args)) {
            Value v = arg;
            if (widen[i])
              v = arith::ExtFOp::create(nb, nloc, wideType, arg);
            map.map(body->getArgument(i), v);
          }
          for (Operation &inner : body->without_terminator())
            nb.clone(inner, map);
          SmallVector<Value> yields;
          for (auto [i, y] :
               llvm::enumerate(body->getTerminator()->getOperands())) {
            Value v = map.lookupOrDefault(y);
            if (roundResult[i])
              v = arith::TruncFOp::create(nb, nloc, narrowType, v);
            yields.push_back(v);
          }
          linalg::YieldOp::create(nb, nloc, yields);
        });
    for (NamedAttribute attr : op->getDiscardableAttrs())
      generic->setAttr(attr.getName(), attr.getValue());
    return generic;
  }

  void rewriteContraction(linalg::LinalgOp op) {
    linalg::GenericOp generic = rebuild(op, /*narrowInputs=*/true,
                                        /*narrowResults=*/false);
    OpBuilder b(op);
    b.setInsertionPointAfter(generic);
    Value acc = generic->getResult(0);
    Value rounded =
        arith::TruncFOp::create(b, op.getLoc(), narrowed(acc.getType()), acc);
    storeNarrow(b, op.getLoc(), op->getResult(0), rounded);
    op->erase();
    ++numContractions;
  }

  /// A grouped product as a contraction: 16-bit operands (twins, or one
  /// rounding), the product accumulated in f32 by its lowering and rounded
  /// once to 16 bits (fsdp-grouped-matmul).
  void rewriteGrouped(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value lhs = narrowValue(b, loc, op->getOperand(0));
    Value rhs = narrowValue(b, loc, op->getOperand(1));
    Type type = narrowed(op->getResult(0).getType());
    Value offsets = op->getOperand(2);
    Value narrow =
        isa<GroupedMatmulOp>(op)
            ? GroupedMatmulOp::create(b, loc, type, lhs, rhs, offsets)
                  .getResult()
            : GroupedMatmulTransposeLhsOp::create(b, loc, type, lhs, rhs,
                                                  offsets)
                  .getResult();
    storeNarrow(b, loc, op->getResult(0), narrow);
    op->erase();
    ++numGrouped;
  }

  void rewriteGeneric(linalg::LinalgOp op, bool narrowResults) {
    linalg::GenericOp generic =
        rebuild(op, /*narrowInputs=*/false, narrowResults);
    if (!generic)
      return;
    OpBuilder b(op);
    b.setInsertionPointAfter(generic);
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      Value now = generic->getResult(i);
      if (now.getType() == result.getType())
        result.replaceAllUsesWith(now);
      else
        storeNarrow(b, op.getLoc(), result, now);
    }
    op->erase();
  }

  void rewriteMove(Operation *op) {
    Value source = moveSource(op);
    Value twin = twinOf(source);
    if (!twin)
      return;
    OpBuilder b(op);
    IRMapping map;
    map.map(source, twin);
    if (auto lop = dyn_cast<linalg::LinalgOp>(op)) {
      Value init = lop.getDpsInitOperand(0)->get();
      auto empty = init.getDefiningOp<tensor::EmptyOp>();
      map.map(init, tensor::EmptyOp::create(b, op->getLoc(),
                                            empty.getMixedSizes(), narrowType));
    }
    Operation *copy = b.clone(*op, map);
    copy->getResult(0).setType(narrowed(op->getResult(0).getType()));
    // Transposes, broadcasts and copies only yield their input element.
    for (Region &region : copy->getRegions())
      for (BlockArgument arg : region.getArguments())
        if (arg.getType() == wideType)
          arg.setType(narrowType);
    twins[op->getResult(0)] = copy->getResult(0);
    maybeDead.insert(op);
    ++numMoves;
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    narrowType = dtype == AutocastDtype::bf16 ? Type(BFloat16Type::get(ctx))
                                              : Type(Float16Type::get(ctx));
    wideType = Float32Type::get(ctx);
    roles.clear();
    stores.clear();
    twins.clear();
    maybeDead.clear();

    SmallVector<Operation *> ops;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op->getParentOfType<linalg::LinalgOp>())
        return WalkResult::skip();
      Role r = roleOf(op);
      if (r != Role::Other) {
        ops.push_back(op);
        roles[op] = r;
      }
      return WalkResult::advance();
    });
    findKeptF32(ops);
    findStatistics(ops);

    // Parameters gathered in 16 bits: their widenings may die.
    func.walk([&](arith::ExtFOp ext) {
      if (twinOf(ext.getResult()))
        maybeDead.insert(ext);
    });
    for (Operation *op : ops) {
      switch (role(op)) {
      case Role::Move:
        rewriteMove(op);
        break;
      case Role::Contraction:
        rewriteContraction(cast<linalg::LinalgOp>(op));
        break;
      case Role::Grouped:
        rewriteGrouped(op);
        break;
      case Role::Reduction:
        rewriteGeneric(cast<linalg::LinalgOp>(op), /*narrowResults=*/false);
        break;
      case Role::Elementwise: {
        bool narrow = stores.lookup(op) == Store::Narrow;
        if (narrow)
          ++numNarrowed;
        else
          ++numKeptF32;
        rewriteGeneric(cast<linalg::LinalgOp>(op), narrow);
        break;
      }
      case Role::Other:
        break;
      }
    }
    // Widenings and f32 moves nobody reads any more, last first (a move's
    // source may be another one).
    for (Operation *op : llvm::reverse(maybeDead))
      if (isOpTriviallyDead(op))
        op->erase();
  }
};

} // namespace

//===- TensorParallel.cpp - the global step becomes the TP-local one ------===//
//
// Propagates tensor-parallel shardings through a step's forward and backward
// and inserts the all-reduces of partial results (docs/TENSOR_PARALLEL.md).
//
//===----------------------------------------------------------------------===//

#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPTENSORPARALLEL
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

using mlir::fsdp::detail::castFloatElements;

/// How a value lies over the tensor-parallel axis: whole on every rank
/// (dim < 0), or split evenly along `dim`. Partial values exist only
/// between a reduction and the all-reduce right after it.
struct Sharding {
  int64_t dim = -1;
  bool isSharded() const { return dim >= 0; }
  bool operator==(const Sharding &o) const { return dim == o.dim; }
};

/// What partitioning one function needs.
struct TPFunction {
  func::FuncOp func;
  FlatSymbolRefAttr meshRef;
  StringAttr axis;
  int64_t size = 1;
  llvm::DenseMap<Value, Sharding> shardings;
  /// Rank-local copies of shape-only values, per (value, dim).
  llvm::DenseMap<std::pair<Value, int64_t>, Value> localCopies;
};

std::string exprText(AffineExpr e) {
  std::string text;
  llvm::raw_string_ostream os(text);
  e.print(os);
  return text;
}

std::string describe(Sharding s) {
  return s.isSharded() ? "sharded along dim " + std::to_string(s.dim)
                       : std::string("replicated");
}

struct TensorParallelPass
    : public mlir::fsdp::impl::FSDPTensorParallelBase<TensorParallelPass> {
  using Base::Base;

  Type reduceType;

  LogicalResult initialize(MLIRContext *ctx) override {
    reduceType = toType(reduceDtype, ctx);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func->hasAttr(kTPLocalAttrName))
      return;
    TPFunction tp;
    tp.func = func;
    FailureOr<bool> found = findAxis(tp);
    if (failed(found))
      return signalPassFailure();
    if (!*found)
      return;
    if (failed(partition(tp)))
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

  static RankedTensorType localType(RankedTensorType type, Sharding s,
                                    int64_t size) {
    if (!s.isSharded())
      return type;
    SmallVector<int64_t> shape(type.getShape());
    shape[s.dim] /= size;
    return type.clone(shape);
  }

  Sharding shardingOf(TPFunction &tp, Value v) {
    auto it = tp.shardings.find(v);
    return it == tp.shardings.end() ? Sharding{} : it->second;
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

  /// The rank's part along `dim` of a value that only has a shape (its
  /// elements do not depend on the rank): an empty tensor, a fill of one,
  /// a splat constant. Null otherwise.
  Value localCopy(TPFunction &tp, Value v, int64_t dim) {
    auto key = std::make_pair(v, dim);
    if (Value known = tp.localCopies.lookup(key))
      return known;
    Operation *def = v.getDefiningOp();
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!def || !type || !type.hasStaticShape() ||
        type.getDimSize(dim) % tp.size != 0)
      return {};
    auto local = localType(type, Sharding{dim}, tp.size);
    OpBuilder b(def);
    b.setInsertionPointAfter(def);
    Value copy;
    if (isa<tensor::EmptyOp>(def)) {
      copy = tensor::EmptyOp::create(b, def->getLoc(), local.getShape(),
                                     local.getElementType());
    } else if (auto fill = dyn_cast<linalg::FillOp>(def)) {
      Value init = localCopy(tp, fill.getOutputs()[0], dim);
      if (!init)
        return {};
      b.setInsertionPointAfter(def);
      copy = linalg::FillOp::create(b, def->getLoc(), fill.getInputs()[0], init)
                 .getResult(0);
    } else if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
      auto dense = dyn_cast<SplatElementsAttr>(cst.getValue());
      if (!dense)
        return {};
      copy = arith::ConstantOp::create(
          b, def->getLoc(),
          SplatElementsAttr::get(local, dense.getSplatValue<Attribute>()));
    } else {
      return {};
    }
    tp.localCopies[key] = copy;
    tp.shardings[copy] = Sharding{dim};
    return copy;
  }

  LogicalResult partition(TPFunction &tp) {
    func::FuncOp func = tp.func;
    if (!func.getBody().hasOneBlock())
      return func.emitError() << "fsdp-tensor-parallel needs a single-block "
                                 "step";
    if (failed(partitionArguments(tp)))
      return failure();
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](linalg::LinalgOp l) { return visitLinalg(tp, l); })
              .Case([&](tensor::ExpandShapeOp e) { return visitExpand(tp, e); })
              .Case([&](tensor::CollapseShapeOp c) {
                return visitCollapse(tp, c);
              })
              .Case([&](tensor::ExtractSliceOp e) {
                return visitExtractSlice(tp, e);
              })
              .Case([&](tensor::InsertSliceOp i) {
                return visitInsertSlice(tp, i);
              })
              .Case([&](tensor::ConcatOp c) { return visitConcat(tp, c); })
              .Case([&](func::ReturnOp r) { return visitReturn(tp, r); })
              .Default([&](Operation *o) { return visitOther(tp, o); });
      if (failed(result))
        return failure();
    }
    // Global shape-only values whose every use now reads a local copy.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<tensor::EmptyOp, linalg::FillOp, arith::ConstantOp>(op) &&
          op.use_empty())
        op.erase();
    func->setAttr(kTPLocalAttrName, UnitAttr::get(func.getContext()));
    return success();
  }

  /// An op the pass does not partition: it must see replicated values only.
  LogicalResult visitOther(TPFunction &tp, Operation *op) {
    WalkResult walk = op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Sharding s = shardingOf(tp, v);
        if (!s.isSharded())
          continue;
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

  /// The reduction of result `i`'s combiner: what the all-reduce of its
  /// partial values must do.
  static std::optional<ReduceKind> combinerOf(linalg::LinalgOp op, unsigned i) {
    SmallVector<Operation *> combiners;
    if (!matchReduction(op.getRegionOutputArgs(), i, combiners) ||
        combiners.size() != 1)
      return std::nullopt;
    Operation *c = combiners.front();
    if (isa<arith::AddFOp, arith::AddIOp>(c))
      return ReduceKind::sum;
    if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp>(c))
      return ReduceKind::max;
    if (isa<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp>(c))
      return ReduceKind::min;
    return std::nullopt;
  }

  /// A sum's init is read on every rank: it must be zero, or it is counted
  /// once per rank of the axis.
  static bool isZero(Value v) {
    if (auto fill = v.getDefiningOp<linalg::FillOp>())
      return matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
             matchPattern(fill.getInputs()[0], m_Zero());
    return matchPattern(v, m_AnyZeroFloat()) || matchPattern(v, m_Zero());
  }

  /// a + c, elementwise, for tensors of one type.
  static Value addElementwise(OpBuilder &b, Location loc, Value a, Value c) {
    auto type = cast<RankedTensorType>(a.getType());
    Value empty =
        tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    AffineMap id = b.getMultiDimIdentityMap(type.getRank());
    SmallVector<utils::IteratorType> iterators(type.getRank(),
                                               utils::IteratorType::parallel);
    bool isFloat = isa<FloatType>(type.getElementType());
    return linalg::GenericOp::create(
               b, loc, type, ValueRange{a, c}, ValueRange{empty},
               ArrayRef<AffineMap>{id, id, id}, iterators,
               [&](OpBuilder &nb, Location nloc, ValueRange args) {
                 Value sum = isFloat ? Value(arith::AddFOp::create(
                                           nb, nloc, args[0], args[1]))
                                     : Value(arith::AddIOp::create(
                                           nb, nloc, args[0], args[1]));
                 linalg::YieldOp::create(nb, nloc, sum);
               })
        .getResult(0);
  }

  LogicalResult visitLinalg(TPFunction &tp, linalg::LinalgOp op) {
    if (!op.hasPureTensorSemantics())
      return visitOther(tp, op);
    // A sharded value read inside the payload (an embedding's
    // tensor.extract) would be indexed globally.
    WalkResult captured =
        op->walk([&](Operation *inner) {
          if (inner == op.getOperation())
            return WalkResult::advance();
          for (Value v : inner->getOperands())
            if (shardingOf(tp, v).isSharded()) {
              op->emitError()
                  << "its body reads a value sharded along dim "
                  << shardingOf(tp, v).dim
                  << " over the tensor-parallel axis by global indices (an "
                     "embedding or gather): such a parameter must be "
                     "tp_replicate";
              return WalkResult::interrupt();
            }
          return WalkResult::advance();
        });
    if (captured.wasInterrupted())
      return failure();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    // The loop the sharded operands are split along.
    std::optional<unsigned> loop;
    OpOperand *first = nullptr;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<RankedTensorType>(operand.get().getType()))
        continue;
      if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand))
        continue;
      Sharding s = shardingOf(tp, operand.get());
      if (!s.isSharded())
        continue;
      AffineMap map = op.getMatchingIndexingMap(&operand);
      auto dimExpr = dyn_cast<AffineDimExpr>(map.getResult(s.dim));
      if (!dimExpr)
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is sharded along dim " << s.dim
               << " over the tensor-parallel axis, which the op indexes by "
               << exprText(map.getResult(s.dim)) << ", not by one loop";
      if (loop && *loop != dimExpr.getPosition())
        return op->emitError()
               << "ambiguous tensor-parallel sharding: operand #"
               << first->getOperandNumber() << " is split along loop d" << *loop
               << " and operand #" << operand.getOperandNumber()
               << " along loop d" << dimExpr.getPosition()
               << "; one of them must be gathered or replicated first";
      loop = dimExpr.getPosition();
      first = first ? first : &operand;
    }
    if (!loop) {
      // Replicated in, replicated out; a write-only init that happens to
      // be sharded is replaced by an empty tensor of the whole shape.
      for (OpOperand &init : op.getDpsInitsMutable()) {
        Sharding s = shardingOf(tp, init.get());
        if (!s.isSharded())
          continue;
        auto type = cast<RankedTensorType>(init.get().getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[s.dim] *= tp.size;
        OpBuilder b(op);
        init.set(tensor::EmptyOp::create(b, op.getLoc(), shape,
                                         type.getElementType()));
      }
      return success();
    }
    AffineExpr loopExpr = getAffineDimExpr(*loop, op->getContext());
    // Where each operand is indexed by the sharded loop.
    auto positionOf = [&](AffineMap map) -> FailureOr<Sharding> {
      Sharding s;
      for (auto [p, e] : llvm::enumerate(map.getResults())) {
        if (e == loopExpr) {
          s.dim = p;
          continue;
        }
        if (e.isFunctionOfDim(*loop))
          return failure();
      }
      return s;
    };
    OpBuilder b(op);
    SmallVector<Value> operands;
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type) {
        operands.push_back(v);
        continue;
      }
      FailureOr<Sharding> need =
          positionOf(op.getMatchingIndexingMap(&operand));
      if (failed(need))
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is indexed by the sharded loop d" << *loop
               << " inside a compound expression; its part cannot be "
                  "taken along one dim";
      Sharding have = shardingOf(tp, v);
      if (have == *need) {
        operands.push_back(v);
        continue;
      }
      SmallVector<int64_t> global(type.getShape());
      if (have.isSharded())
        global[have.dim] *= tp.size;
      auto globalType = type.clone(global);
      if (need->isSharded() && globalType.getDimSize(need->dim) % tp.size != 0)
        return op->emitError()
               << "operand #" << operand.getOperandNumber() << " would be "
               << "split along dim " << need->dim << " (size "
               << globalType.getDimSize(need->dim)
               << "), which the tensor-parallel axis size " << tp.size
               << " does not divide";
      if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand)) {
        // A write-only init: only its shape matters.
        RankedTensorType want = localType(globalType, *need, tp.size);
        operands.push_back(tensor::EmptyOp::create(
            b, op.getLoc(), want.getShape(), want.getElementType()));
        continue;
      }
      // A read operand that is not sharded (reads set the loop).
      Value local = localCopy(tp, v, need->dim);
      if (!local)
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is replicated but read along the tensor-parallel loop d"
               << *loop << " (its dim " << need->dim
               << "): this rank would need its part of it; shard it where "
                  "it is produced";
      operands.push_back(local);
    }
    bool reduction =
        op.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction;
    // A sum along the sharded loop into a value (a residual, a bias, an
    // earlier gradient): each rank sums from zero, and the value is added
    // once, after the all-reduce.
    SmallVector<Value> addAfter(op.getNumDpsInits());
    if (reduction) {
      for (OpOperand &init : op.getDpsInitsMutable()) {
        unsigned i = init.getOperandNumber() - op.getNumDpsInputs();
        std::optional<ReduceKind> kind = combinerOf(op, i);
        if (kind != ReduceKind::sum || !op.payloadUsesValueFromOperand(&init) ||
            isZero(init.get()))
          continue;
        Value original = operands[init.getOperandNumber()];
        auto type = cast<RankedTensorType>(original.getType());
        Value zero = arith::ConstantOp::create(
            b, op.getLoc(), b.getZeroAttr(type.getElementType()));
        Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                              type.getElementType());
        operands[init.getOperandNumber()] =
            linalg::FillOp::create(b, op.getLoc(), zero, empty).getResult(0);
        addAfter[i] = original;
      }
    }
    SmallVector<Type> resultTypes;
    for (OpOperand &init : op.getDpsInitsMutable())
      resultTypes.push_back(operands[init.getOperandNumber()].getType());
    Operation *local = mlir::clone(b, op.getOperation(), resultTypes, operands);
    ++numShardedOps;
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      Value replacement = local->getResult(i);
      if (!reduction) {
        OpOperand *init = op.getDpsInitOperand(i);
        FailureOr<Sharding> s = positionOf(op.getMatchingIndexingMap(init));
        tp.shardings[replacement] = *s;
        result.replaceAllUsesWith(replacement);
        continue;
      }
      // A reduction along the sharded loop: every rank holds a partial
      // result, all-reduced here.
      std::optional<ReduceKind> kind = combinerOf(op, i);
      if (!kind)
        return op->emitError()
               << "result #" << i << " reduces along the tensor-parallel loop d"
               << *loop << " with a combiner that is not a sum, max or min";
      b.setInsertionPointAfter(local);
      Value partial =
          castFloatElements(b, op.getLoc(), replacement,
                            *kind == ReduceKind::sum ? reduceType : Type());
      Value reduced =
          AllReduceOp::create(b, op.getLoc(), partial.getType(), partial,
                              tp.meshRef, b.getStrArrayAttr({tp.axis}),
                              ReduceKindAttr::get(op->getContext(), *kind))
              .getResult();
      ++numAllReduces;
      reduced = castFloatElements(
          b, op.getLoc(), reduced,
          cast<RankedTensorType>(replacement.getType()).getElementType());
      if (Value init = addAfter[i])
        reduced = addElementwise(b, op.getLoc(), reduced, init);
      result.replaceAllUsesWith(reduced);
    }
    op->erase();
    return success();
  }

  /// `[.., n, ..] -> [.., a, b, ..]`: a sharded `n` is sharded along its
  /// outer non-unit part `a`, which the axis must divide.
  LogicalResult visitExpand(TPFunction &tp, tensor::ExpandShapeOp op) {
    Sharding s = shardingOf(tp, op.getSrc());
    if (!s.isSharded())
      return success();
    RankedTensorType result = op.getResultType();
    if (!result.hasStaticShape())
      return op->emitError() << "tensor-parallel sharding needs a static shape";
    ReassociationIndices group = op.getReassociationIndices()[s.dim];
    int64_t outer = group.front();
    for (int64_t d : group)
      if (result.getDimSize(d) != 1) {
        outer = d;
        break;
      }
    if (result.getDimSize(outer) % tp.size != 0)
      return op->emitError()
             << "this reshape cannot carry the tensor-parallel sharding of "
                "dim "
             << s.dim << ": it splits into dims [" << group
             << "], whose outer size " << result.getDimSize(outer)
             << " is not divisible by the tensor-parallel axis size "
             << tp.size;
    Sharding to{outer};
    OpBuilder b(op);
    auto expand = tensor::ExpandShapeOp::create(
        b, op.getLoc(), localType(result, to, tp.size), op.getSrc(),
        op.getReassociationIndices());
    tp.shardings[expand.getResult()] = to;
    ++numShardedOps;
    op.getResult().replaceAllUsesWith(expand.getResult());
    op->erase();
    return success();
  }

  /// `[.., a, b, ..] -> [.., a*b, ..]`: the collapsed dim is sharded when
  /// the sharded dim is the outer non-unit dim of its group.
  LogicalResult visitCollapse(TPFunction &tp, tensor::CollapseShapeOp op) {
    Sharding s = shardingOf(tp, op.getSrc());
    if (!s.isSharded())
      return success();
    auto src = cast<RankedTensorType>(op.getSrc().getType());
    for (auto [r, group] : llvm::enumerate(op.getReassociationIndices())) {
      if (!llvm::is_contained(group, s.dim))
        continue;
      for (int64_t d : group) {
        if (d == s.dim)
          break;
        if (src.getDimSize(d) != 1)
          return op->emitError()
                 << "this reshape cannot carry the tensor-parallel sharding "
                    "of dim "
                 << s.dim << ": it merges it into dims [" << group
                 << "] behind dim " << d << " (size " << src.getDimSize(d)
                 << "), so this rank's part is not contiguous";
      }
      Sharding to{int64_t(r)};
      OpBuilder b(op);
      auto collapse = tensor::CollapseShapeOp::create(
          b, op.getLoc(), op.getSrc(), op.getReassociationIndices());
      tp.shardings[collapse.getResult()] = to;
      ++numShardedOps;
      op.getResult().replaceAllUsesWith(collapse.getResult());
      op->erase();
      return success();
    }
    return op->emitError() << "collapse_shape without a group for dim "
                           << s.dim;
  }

  /// A slice, insertion or concatenation keeps a sharded dim that it
  /// takes whole: offset 0, the full size, stride 1 along it.
  static bool takesWhole(ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes,
                         ArrayRef<int64_t> strides, int64_t dim, int64_t size) {
    return offsets[dim] == 0 && sizes[dim] == size && strides[dim] == 1;
  }

  LogicalResult visitExtractSlice(TPFunction &tp, tensor::ExtractSliceOp op) {
    Sharding s = shardingOf(tp, op.getSource());
    if (!s.isSharded())
      return success();
    int64_t global = op.getSourceType().getDimSize(s.dim) * tp.size;
    llvm::SmallBitVector dropped = op.getDroppedDims();
    if (!takesWhole(op.getStaticOffsets(), op.getStaticSizes(),
                    op.getStaticStrides(), s.dim, global) ||
        dropped.test(s.dim))
      return op->emitError()
             << "this slice cuts dim " << s.dim
             << ", which is sharded over the tensor-parallel axis; only "
                "slices that keep it whole are partitioned";
    // Dims dropped before the sharded one shift it left.
    Sharding to{s.dim};
    for (int64_t d = 0; d < s.dim; ++d)
      if (dropped.test(d))
        --to.dim;
    SmallVector<int64_t> resultShape(op.getResultType().getShape());
    resultShape[to.dim] /= tp.size;
    OpBuilder b(op);
    SmallVector<OpFoldResult> sizes = op.getMixedSizes();
    sizes[s.dim] = b.getIndexAttr(global / tp.size);
    auto slice = tensor::ExtractSliceOp::create(
        b, op.getLoc(), op.getResultType().clone(resultShape), op.getSource(),
        op.getMixedOffsets(), sizes, op.getMixedStrides());
    tp.shardings[slice.getResult()] = to;
    ++numShardedOps;
    op.getResult().replaceAllUsesWith(slice.getResult());
    op->erase();
    return success();
  }

  LogicalResult visitInsertSlice(TPFunction &tp, tensor::InsertSliceOp op) {
    Sharding src = shardingOf(tp, op.getSource());
    Sharding dst = shardingOf(tp, op.getDest());
    if (!src.isSharded() && !dst.isSharded())
      return success();
    if (op.getSourceType().getRank() != op.getResultType().getRank())
      return op->emitError() << "a rank-changing insert_slice of a value "
                                "sharded over the tensor-parallel axis is not "
                                "partitioned";
    int64_t dim = src.isSharded() ? src.dim : dst.dim;
    if ((src.isSharded() && dst.isSharded() && src.dim != dst.dim))
      return op->emitError()
             << "ambiguous tensor-parallel sharding: the "
                "source is sharded along dim "
             << src.dim << " and the destination along dim " << dst.dim;
    int64_t global =
        op.getResultType().getDimSize(dim) * (dst.isSharded() ? tp.size : 1);
    if (!takesWhole(op.getStaticOffsets(), op.getStaticSizes(),
                    op.getStaticStrides(), dim, global))
      return op->emitError()
             << "this insert_slice cuts dim " << dim
             << ", which is sharded over the tensor-parallel axis; only "
                "insertions that keep it whole are partitioned";
    Value source = op.getSource(), dest = op.getDest();
    if (!src.isSharded())
      source = localCopy(tp, source, dim);
    if (!dst.isSharded())
      dest = localCopy(tp, dest, dim);
    if (!source || !dest)
      return op->emitError()
             << "the " << (source ? "destination" : "source")
             << " is replicated but the other operand is sharded along dim "
             << dim << " over the tensor-parallel axis";
    OpBuilder b(op);
    SmallVector<OpFoldResult> sizes = op.getMixedSizes();
    sizes[dim] = b.getIndexAttr(global / tp.size);
    auto insert = tensor::InsertSliceOp::create(b, op.getLoc(), source, dest,
                                                op.getMixedOffsets(), sizes,
                                                op.getMixedStrides());
    tp.shardings[insert.getResult()] = Sharding{dim};
    ++numShardedOps;
    op.getResult().replaceAllUsesWith(insert.getResult());
    op->erase();
    return success();
  }

  LogicalResult visitConcat(TPFunction &tp, tensor::ConcatOp op) {
    std::optional<int64_t> dim;
    for (Value v : op.getInputs()) {
      Sharding s = shardingOf(tp, v);
      if (!s.isSharded())
        continue;
      if (dim && *dim != s.dim)
        return op->emitError() << "ambiguous tensor-parallel sharding: "
                                  "inputs sharded along dims "
                               << *dim << " and " << s.dim;
      dim = s.dim;
    }
    if (!dim)
      return success();
    if (int64_t(op.getDim()) == *dim)
      return op->emitError()
             << "this concatenation is along dim " << *dim
             << ", which is sharded over the tensor-parallel axis";
    SmallVector<Value> inputs;
    for (Value v : op.getInputs()) {
      Value local = shardingOf(tp, v).isSharded() ? v : localCopy(tp, v, *dim);
      if (!local)
        return op->emitError()
               << "an input is replicated but another is sharded along dim "
               << *dim << " over the tensor-parallel axis";
      inputs.push_back(local);
    }
    OpBuilder b(op);
    auto concat =
        tensor::ConcatOp::create(b, op.getLoc(), int64_t(op.getDim()), inputs);
    tp.shardings[concat.getResult()] = Sharding{*dim};
    ++numShardedOps;
    op.getResult().replaceAllUsesWith(concat.getResult());
    op->erase();
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
      Sharding have = shardingOf(tp, operand.get());
      if (have == need)
        continue;
      Value local =
          need.isSharded() ? localCopy(tp, operand.get(), need.dim) : Value();
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

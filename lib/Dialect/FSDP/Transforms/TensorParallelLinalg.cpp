//===- TensorParallelLinalg.cpp - structured ops over the TP axis ---------===//
//
// fsdp-tensor-parallel on linalg ops: the loop their sharded operands are
// split along (from the indexing maps), the operands each rank needs, and
// the collective after a reduction along that loop.
// docs/TENSOR_PARALLEL.md.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;

namespace {

std::string exprText(AffineExpr e) {
  std::string text;
  llvm::raw_string_ostream os(text);
  e.print(os);
  return text;
}

/// Whether `v`, in a linalg body, depends on an accumulator (a region
/// output argument).
bool readsAccumulator(linalg::LinalgOp op, Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op.getBlock() &&
           arg.getArgNumber() >= op.getNumDpsInputs();
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != op.getBlock())
    return false;
  return llvm::any_of(def->getOperands(),
                      [&](Value x) { return readsAccumulator(op, x); });
}

/// Result `i`'s combiner where its accumulator is also read for another
/// result (a max and the index of the max in one op): the yielded value
/// combines the accumulator with a value that reads no accumulator.
Operation *sharedAccumulatorCombiner(linalg::LinalgOp op, unsigned i) {
  auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
  Operation *c = yield.getValues()[i].getDefiningOp();
  BlockArgument acc = op.getRegionOutputArgs()[i];
  if (!c || c->getNumOperands() != 2 || llvm::count(c->getOperands(), acc) != 1)
    return nullptr;
  Value other = c->getOperand(0) == acc ? c->getOperand(1) : c->getOperand(0);
  return readsAccumulator(op, other) ? nullptr : c;
}

/// The reduction of result `i`'s combiner: what the collective of its
/// partial values must do.
std::optional<ReduceKind> combinerOf(linalg::LinalgOp op, unsigned i) {
  SmallVector<Operation *> combiners;
  Operation *c = nullptr;
  if (matchReduction(op.getRegionOutputArgs(), i, combiners) &&
      combiners.size() == 1)
    c = combiners.front();
  else
    c = sharedAccumulatorCombiner(op, i);
  if (!c)
    return std::nullopt;
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
bool isZero(Value v) {
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
           matchPattern(fill.getInputs()[0], m_Zero());
  return matchPattern(v, m_AnyZeroFloat()) || matchPattern(v, m_Zero());
}

/// a + c, elementwise, for tensors of one type.
Value addElementwise(OpBuilder &b, Location loc, Value a, Value c) {
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
               Value sum = isFloat
                               ? Value(arith::AddFOp::create(nb, nloc, args[0],
                                                             args[1]))
                               : Value(arith::AddIOp::create(nb, nloc, args[0],
                                                             args[1]));
               linalg::YieldOp::create(nb, nloc, sum);
             })
      .getResult(0);
}

int64_t bytesOf(Value v, int64_t scale) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() * scale *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// A sharded value an op reads: an operand, or a value its body captures
/// (read with `tensor.extract`).
struct ShardedRead {
  Value value;
  Sharding sharding;
  OpOperand *operand = nullptr; // null: captured by the body
  std::optional<unsigned> loop; // the loop indexing its sharded dim
};

/// Partitions one structured op: decides its sharded loop, then rewrites.
class LinalgPartition {
public:
  LinalgPartition(TPFunction &tp, linalg::LinalgOp op) : tp(tp), op(op) {}

  LogicalResult run() {
    if (failed(collectReads()) || failed(chooseLoop()))
      return failure();
    if (loop && failed(checkIndexUses()))
      return failure();
    if (loop && failed(planReplicatedReads()))
      return failure();
    applyGathers();
    if (!loop)
      return replicatedOp();
    return rewrite();
  }

private:
  TPFunction &tp;
  linalg::LinalgOp op;
  SmallVector<ShardedRead> reads;
  std::optional<unsigned> loop;
  bool sequenceLoop = false;
  /// The loop was chosen because the result is needed split.
  bool demandLoop = false;
  /// The body reads the sharded loop's index as a number: it is offset to
  /// the global index.
  bool offsetIndices = false;
  /// Rows of strided blocks along the sharded loop (Sharding::outer).
  int64_t loopOuter = 1;
  /// Sequence-split values to gather before the op.
  llvm::SetVector<Value> toGather;
  /// Replicated operands read along a sequence loop: take this rank's part.
  llvm::DenseMap<Value, int64_t> toSlice;

  AffineExpr loopExpr() const {
    return getAffineDimExpr(*loop, op->getContext());
  }

  /// Where a map indexes the sharded loop: the dim, none, or failure when
  /// inside a compound expression.
  FailureOr<Sharding> positionOf(AffineMap map) const {
    Sharding s;
    s.outer = loopOuter;
    for (auto [p, e] : llvm::enumerate(map.getResults())) {
      if (e == loopExpr()) {
        s.dim = p;
        continue;
      }
      if (e.isFunctionOfDim(*loop))
        return failure();
    }
    return s;
  }

  /// The loop a captured value's sharded dim is read by: every use is a
  /// tensor.extract whose index at that dim is `linalg.index L`.
  std::optional<unsigned> capturedLoop(Value v, int64_t dim) {
    std::optional<unsigned> found;
    for (OpOperand &use : v.getUses()) {
      if (!op->isProperAncestor(use.getOwner()))
        continue;
      auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
      if (!extract)
        return std::nullopt;
      auto index = extract.getIndices()[dim].getDefiningOp<linalg::IndexOp>();
      if (!index || (found && *found != index.getDim()))
        return std::nullopt;
      found = index.getDim();
    }
    return found;
  }

  LogicalResult collectReads() {
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<RankedTensorType>(operand.get().getType()))
        continue;
      if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand))
        continue;
      Sharding s = shardingOf(tp, operand.get());
      if (!s.isSharded())
        continue;
      AffineMap map = op.getMatchingIndexingMap(&operand);
      ShardedRead read{operand.get(), s, &operand, std::nullopt};
      if (auto dimExpr = dyn_cast<AffineDimExpr>(map.getResult(s.dim)))
        read.loop = dimExpr.getPosition();
      else if (!s.sequence)
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is sharded along dim " << s.dim
               << " over the tensor-parallel axis, which the op indexes by "
               << exprText(map.getResult(s.dim)) << ", not by one loop";
      reads.push_back(read);
    }
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    for (Value v : captured) {
      Sharding s = shardingOf(tp, v);
      if (!s.isSharded())
        continue;
      ShardedRead read{v, s, nullptr, capturedLoop(v, s.dim)};
      if (!read.loop && !s.sequence)
        return op->emitError()
               << "its body reads a value sharded along dim " << s.dim
               << " over the tensor-parallel axis by global indices (an "
                  "embedding or gather): such a parameter must be "
                  "tp_replicate";
      reads.push_back(read);
    }
    return success();
  }

  unsigned numberOf(const ShardedRead &r) const {
    return r.operand ? r.operand->getOperandNumber() : op->getNumOperands();
  }

  std::string nameOf(const ShardedRead &r) const {
    return r.operand ? "operand #" + std::to_string(numberOf(r))
                     : std::string("a value its body reads");
  }

  /// Feature splits name one loop; sequence splits on another loop (or
  /// indexed by a compound expression) are gathered.
  LogicalResult chooseLoop() {
    const ShardedRead *first = nullptr;
    for (const ShardedRead &r : reads) {
      if (r.sharding.sequence)
        continue;
      if (loop && *loop != *r.loop)
        return op->emitError()
               << "ambiguous tensor-parallel sharding: " << nameOf(*first)
               << " is split along loop d" << *loop << " and " << nameOf(r)
               << " along loop d" << *r.loop
               << "; one of them must be gathered or replicated first";
      if (loop && loopOuter != r.sharding.outer)
        return op->emitError()
               << "ambiguous tensor-parallel sharding: " << nameOf(*first)
               << " and " << nameOf(r) << " are split along loop d" << *loop
               << " in " << loopOuter << " and " << r.sharding.outer
               << " strided blocks";
      loop = r.loop;
      loopOuter = r.sharding.outer;
      first = first ? first : &r;
    }
    if (!loop)
      chooseDemandedLoop();
    if (!loop)
      for (const ShardedRead &r : reads)
        if (r.loop) {
          loop = r.loop;
          sequenceLoop = true;
          break;
        }
    for (const ShardedRead &r : reads)
      if (r.sharding.sequence && (!loop || r.loop != loop || demandLoop))
        toGather.insert(r.value);
    return success();
  }

  /// No feature split, but the result is needed split (a gradient of a
  /// split table, computed from a one-hot): split along the loop that
  /// indexes the needed dim when it is parallel and every replicated read
  /// along it has a rank's part (the sequence-split reads are gathered).
  void chooseDemandedLoop() {
    if (op.getNumDpsInits() != 1)
      return;
    auto it = tp.demanded.find(op->getResult(0));
    if (it == tp.demanded.end())
      return;
    auto dimExpr = dyn_cast<AffineDimExpr>(
        op.getMatchingIndexingMap(op.getDpsInitOperand(0))
            .getResult(it->second));
    if (!dimExpr || op.getIteratorTypesArray()[dimExpr.getPosition()] !=
                        utils::IteratorType::parallel)
      return;
    loop = dimExpr.getPosition();
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (!isa<RankedTensorType>(v.getType()) ||
          (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand)))
        continue;
      FailureOr<Sharding> need =
          positionOf(op.getMatchingIndexingMap(&operand));
      bool ok = succeeded(need) &&
                (!need->isSharded() || (!shardingOf(tp, v).isSharded() &&
                                        localPart(tp, v, need->dim)));
      if (!ok) {
        loop.reset();
        return;
      }
    }
    demandLoop = true;
  }

  /// Gathers every sequence-split read: the op runs whole.
  void gatherAll() {
    for (const ShardedRead &r : reads)
      if (r.sharding.sequence)
        toGather.insert(r.value);
    toSlice.clear();
    loop.reset();
    sequenceLoop = false;
  }

  /// The body may read the index of the sharded loop only to index a
  /// captured value split along it: anything else would see this rank's
  /// local index where it needs the global one.
  LogicalResult checkIndexUses() {
    WalkResult walk = op->walk([&](linalg::IndexOp index) {
      if (index.getDim() != *loop)
        return WalkResult::advance();
      for (OpOperand &use : index->getUses())
        if (!readsSplitHere(use))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (!walk.wasInterrupted())
      return success();
    if (sequenceLoop) {
      gatherAll();
      return success();
    }
    // A plain block split: the global index is this rank's offset plus
    // the local one.
    if (loopOuter == 1) {
      offsetIndices = true;
      return success();
    }
    return op->emitError() << "its body reads the index of loop d" << *loop
                           << ", which is split over the tensor-parallel "
                              "axis in "
                           << loopOuter
                           << " strided blocks: this rank's index is not the "
                              "global one";
  }

  /// The use of the loop index that reads a captured value split along
  /// it keeps the local index.
  bool readsSplitHere(OpOperand &use) const {
    auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
    Sharding s = extract ? shardingOf(tp, extract.getTensor()) : Sharding{};
    return s.isSharded() && !toGather.contains(extract.getTensor()) &&
           use.getOperandNumber() == unsigned(1 + s.dim);
  }

  /// Gathering `v` needs no new collective: its whole value exists (or is
  /// the transpose of one that does).
  bool gatheredAlready(Value v) const {
    if (tp.gathered.count(v))
      return true;
    auto transpose = v.getDefiningOp<linalg::TransposeOp>();
    if (!transpose)
      return false;
    Sharding s = shardingOf(tp, v);
    Sharding from = shardingOf(tp, transpose.getInput());
    return s.sequence && from.sequence && from.outer == s.outer &&
           from.dim == transpose.getPermutation()[s.dim] &&
           tp.gathered.count(transpose.getInput());
  }

  /// Whether `v` is a parameter of the step with a gradient, read through
  /// transposes and reshapes.
  bool isTrainedParameter(Value v) const {
    while (Operation *def = v.getDefiningOp()) {
      if (auto t = dyn_cast<linalg::TransposeOp>(def))
        v = t.getInput();
      else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
        v = def->getOperand(0);
      else
        return false;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &tp.func.getBody().front())
      return false;
    for (unsigned r = 0; r < tp.func.getNumResults(); ++r)
      if (auto g = tp.func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName))
        if (g.getInt() == int64_t(arg.getArgNumber()))
          return true;
    return false;
  }

  /// Along a sequence loop, a product with a replicated trained parameter
  /// contracted over a loop the tokens are not split along (an LM head the
  /// plan leaves whole) would run on this rank's tokens, and the
  /// parameter's gradient would be a sum over split tokens, all-reduced
  /// whole (and so would every sum over the tokens of its result, the
  /// loss). Where the parameter is larger than the split reads gathered,
  /// they are gathered instead (as DTensor's and Megatron's sequence
  /// parallelism gather the LM head's input): every rank computes the
  /// product whole, and neither its result nor the parameter's gradient
  /// needs a collective.
  bool gatherForParameter() {
    if (!sequenceLoop)
      return false;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    int64_t paramBytes = 0;
    for (OpOperand *operand : op.getDpsInputOperands()) {
      Value v = operand->get();
      if (!isa<RankedTensorType>(v.getType()) ||
          shardingOf(tp, v).isSharded() || !isTrainedParameter(v))
        continue;
      AffineMap map = op.getMatchingIndexingMap(operand);
      FailureOr<Sharding> need = positionOf(map);
      if (failed(need) || need->isSharded())
        continue;
      bool contracted = llvm::any_of(map.getResults(), [&](AffineExpr e) {
        auto d = dyn_cast<AffineDimExpr>(e);
        return d &&
               iterators[d.getPosition()] == utils::IteratorType::reduction;
      });
      if (contracted)
        paramBytes = std::max(paramBytes, bytesOf(v, 1));
    }
    if (paramBytes == 0)
      return false;
    int64_t gatherBytes = 0;
    for (const ShardedRead &r : reads)
      if (r.sharding.sequence && !gatheredAlready(r.value))
        gatherBytes += bytesOf(r.value, tp.size);
    return paramBytes > gatherBytes;
  }

  /// Replicated operands read along the sharded loop: shape-only ones get
  /// a local copy; along a sequence loop, the others are sliced to this
  /// rank's part when that moves fewer bytes than gathering the split
  /// reads (then the op runs whole; reads gathered already cost nothing).
  LogicalResult planReplicatedReads() {
    if (gatherForParameter()) {
      gatherAll();
      return success();
    }
    int64_t sliceBytes = 0, gatherBytes = 0;
    bool sliceable = true;
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (!isa<RankedTensorType>(v.getType()) || shardingOf(tp, v).isSharded())
        continue;
      if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand))
        continue;
      FailureOr<Sharding> need =
          positionOf(op.getMatchingIndexingMap(&operand));
      if (failed(need)) {
        if (sequenceLoop) {
          gatherAll();
          return success();
        }
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is indexed by the sharded loop d" << *loop
               << " inside a compound expression; its part cannot be "
                  "taken along one dim";
      }
      if (!need->isSharded() || localCopy(tp, v, need->dim) ||
          (!sequenceLoop && localPart(tp, v, need->dim)))
        continue;
      if (!sequenceLoop)
        return op->emitError()
               << "operand #" << operand.getOperandNumber()
               << " is replicated but read along the tensor-parallel loop d"
               << *loop << " (its dim " << need->dim
               << "): this rank would need its part of it; shard it where "
                  "it is produced";
      sliceable &= canTakeRankPart(tp, v, need->dim);
      sliceBytes += bytesOf(v, 1);
      toSlice[v] = need->dim;
    }
    for (const ShardedRead &r : reads)
      if (r.sharding.sequence && !toGather.contains(r.value) &&
          !gatheredAlready(r.value))
        gatherBytes += bytesOf(r.value, tp.size);
    if (!toSlice.empty() && (!sliceable || sliceBytes > gatherBytes))
      gatherAll();
    // A sequence-split operand read by a compound index is gathered.
    for (const ShardedRead &r : reads)
      if (r.operand && r.sharding.sequence && !toGather.contains(r.value) &&
          loop && failed(positionOf(op.getMatchingIndexingMap(r.operand))))
        gatherAll();
    return success();
  }

  void applyGathers() {
    for (Value v : toGather) {
      Value whole = gatherSequence(tp, v);
      v.replaceUsesWithIf(whole, [&](OpOperand &use) {
        return use.getOwner() == op.getOperation() ||
               op->isProperAncestor(use.getOwner());
      });
    }
  }

  /// No sharded read: replicated in, replicated out; a write-only init
  /// that happens to be sharded is replaced by an empty tensor of the
  /// whole shape.
  LogicalResult replicatedOp() {
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

  /// The operand this rank reads in place of `operand`.
  FailureOr<Value> localOperand(OpBuilder &b, OpOperand &operand) {
    Value v = operand.get();
    auto type = cast<RankedTensorType>(v.getType());
    FailureOr<Sharding> position =
        positionOf(op.getMatchingIndexingMap(&operand));
    if (failed(position))
      return op->emitError()
             << "operand #" << operand.getOperandNumber()
             << " is indexed by the sharded loop d" << *loop
             << " inside a compound expression; its part cannot be taken "
                "along one dim";
    Sharding need = *position;
    Sharding have = shardingOf(tp, v);
    if (have == need)
      return v;
    SmallVector<int64_t> global(type.getShape());
    if (have.isSharded())
      global[have.dim] *= tp.size;
    auto globalType = type.clone(global);
    if (need.isSharded() && globalType.getDimSize(need.dim) % tp.size != 0)
      return op->emitError()
             << "operand #" << operand.getOperandNumber() << " would be "
             << "split along dim " << need.dim << " (size "
             << globalType.getDimSize(need.dim)
             << "), which the tensor-parallel axis size " << tp.size
             << " does not divide";
    if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand)) {
      // A write-only init: only its shape matters.
      RankedTensorType want = localType(globalType, need, tp.size);
      return Value(tensor::EmptyOp::create(b, op.getLoc(), want.getShape(),
                                           want.getElementType()));
    }
    if (Value local = sequenceLoop ? localCopy(tp, v, need.dim)
                                   : localPart(tp, v, need.dim))
      return local;
    if (Value part = toSlice.count(v) ? rankPart(tp, v, need.dim) : Value())
      return part;
    return op->emitError()
           << "operand #" << operand.getOperandNumber()
           << " is replicated but read along the tensor-parallel loop d"
           << *loop << " (its dim " << need.dim
           << "): this rank would need its part of it; shard it where it "
              "is produced";
  }

  LogicalResult rewrite() {
    OpBuilder b(op);
    SmallVector<Value> operands;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<RankedTensorType>(operand.get().getType())) {
        operands.push_back(operand.get());
        continue;
      }
      FailureOr<Value> local = localOperand(b, operand);
      if (failed(local))
        return failure();
      operands.push_back(*local);
    }
    bool reduction =
        op.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction;
    SmallVector<Value> addAfter = zeroAccumulators(b, operands, reduction);
    SmallVector<Type> resultTypes;
    for (OpOperand &init : op.getDpsInitsMutable())
      resultTypes.push_back(operands[init.getOperandNumber()].getType());
    Operation *local = mlir::clone(b, op.getOperation(), resultTypes, operands);
    ++tp.shardedOps;
    if (offsetIndices)
      offsetLoopIndices(
          tp, local, *loop,
          cast<linalg::LinalgOp>(local).getStaticLoopRanges()[*loop],
          [&](OpOperand &use) { return readsSplitHere(use); });
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      Value replacement = local->getResult(i);
      if (!reduction) {
        OpOperand *init = op.getDpsInitOperand(i);
        Sharding s = *positionOf(op.getMatchingIndexingMap(init));
        s.sequence = sequenceLoop;
        tp.shardings[replacement] = s;
        result.replaceAllUsesWith(replacement);
        continue;
      }
      // A reduction along the sharded loop: every rank holds a partial
      // result, resolved here (a result nothing reads, such as the index
      // of a maximum, is left partial).
      if (result.use_empty())
        continue;
      std::optional<ReduceKind> kind = combinerOf(op, i);
      if (!kind)
        return op->emitError()
               << "result #" << i << " reduces along the tensor-parallel loop d"
               << *loop << " with a combiner that is not a sum, max or min";
      // A plain partial sum waits for its first use: partial sums of one
      // value are added before one collective.
      if (*kind == ReduceKind::sum && !addAfter[i]) {
        tp.partials[replacement] = PendingPartial{!sequenceLoop};
        result.replaceAllUsesWith(replacement);
        continue;
      }
      b.setInsertionPointAfter(local);
      Sharding resolved;
      Value reduced = resolvePartial(
          tp, b, op.getLoc(), replacement, *kind,
          /*mayScatter=*/!sequenceLoop && !addAfter[i], &resolved);
      if (Value init = addAfter[i])
        reduced = addElementwise(b, op.getLoc(), reduced, init);
      tp.shardings[reduced] = resolved;
      result.replaceAllUsesWith(reduced);
    }
    op->erase();
    return success();
  }

  /// A sum along the sharded loop into a value (a residual, a bias, an
  /// earlier gradient): each rank sums from zero, and the value is added
  /// once, after the collective. The values to add, per result.
  SmallVector<Value> zeroAccumulators(OpBuilder &b,
                                      SmallVectorImpl<Value> &operands,
                                      bool reduction) {
    SmallVector<Value> addAfter(op.getNumDpsInits());
    if (!reduction)
      return addAfter;
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
    return addAfter;
  }
};

} // namespace

LogicalResult tensor_parallel::visitLinalg(TPFunction &tp,
                                           linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics())
    return visitOther(tp, op);
  FailureOr<bool> indexedRead = partitionIndexedRead(tp, op);
  if (failed(indexedRead))
    return failure();
  if (*indexedRead)
    return success();
  return LinalgPartition(tp, op).run();
}

//===- TensorParallelVocab.cpp - vocabulary-parallel reads over TP --------===//
//
// fsdp-tensor-parallel where a split dim is read by position: the rank's
// index on the axis (global loop indices, the offset of its vocabulary
// range), the read by index of a table split along its rows (a
// vocabulary-parallel embedding, the target logit of a vocabulary-parallel
// cross-entropy), the rank's part of a replicated value recomputed from
// its producers (a one-hot against an iota), and the gradients that must
// come out split (docs/TENSOR_PARALLEL.md, "Vocabulary parallelism").
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::tensor_parallel;

Value tensor_parallel::rankIndex(TPFunction &tp) {
  if (tp.rankIndex)
    return tp.rankIndex;
  // The rank's coordinate on the axis is known locally: no communication.
  Block &entry = tp.func.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  tp.rankIndex = AxisIndexOp::create(b, tp.func.getLoc(), b.getIndexType(),
                                     tp.meshRef, b.getStrArrayAttr({tp.axis}));
  return tp.rankIndex;
}

Value tensor_parallel::rankOffset(TPFunction &tp, OpBuilder &b, Location loc,
                                  int64_t localSize) {
  Value size = arith::ConstantIndexOp::create(b, loc, localSize);
  return arith::MulIOp::create(b, loc, rankIndex(tp), size);
}

void tensor_parallel::offsetLoopIndices(
    TPFunction &tp, Operation *op, unsigned loop, int64_t localSize,
    function_ref<bool(OpOperand &)> keepLocal) {
  op->walk([&](linalg::IndexOp index) {
    if (index.getDim() != loop)
      return;
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : index->getUses())
      if (!keepLocal(use))
        uses.push_back(&use);
    if (uses.empty())
      return;
    OpBuilder b(index);
    b.setInsertionPointAfter(index);
    Value global = arith::AddIOp::create(
        b, index.getLoc(), index, rankOffset(tp, b, index.getLoc(), localSize));
    for (OpOperand *use : uses)
      use->set(global);
  });
}

namespace {

/// A captured value split along its rows that the body reads at a position
/// computed from data (not a loop index): its extracts.
struct IndexedRead {
  Value table;
  Sharding sharding;
  SmallVector<tensor::ExtractOp> extracts;
};

std::optional<IndexedRead> findIndexedRead(const TPFunction &tp,
                                           linalg::LinalgOp op) {
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  for (Value v : captured) {
    Sharding s = shardingOf(tp, v);
    if (!s.isSharded() || s.sequence)
      continue;
    IndexedRead read{v, s, {}};
    bool byData = false;
    for (OpOperand &use : v.getUses()) {
      if (!op->isProperAncestor(use.getOwner()))
        continue;
      auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
      if (extract)
        read.extracts.push_back(extract);
      if (!extract ||
          !extract.getIndices()[s.dim].getDefiningOp<linalg::IndexOp>())
        byData = true;
    }
    if (byData)
      return read;
  }
  return std::nullopt;
}

/// Why `read` cannot be partitioned as a vocabulary-parallel read, or
/// empty.
std::string unsupportedReason(const TPFunction &tp, linalg::LinalgOp op,
                              const IndexedRead &read) {
  if (read.sharding.outer != 1)
    return "it is split in strided blocks";
  if (op.getNumDpsInits() != 1 || op.getNumParallelLoops() != op.getNumLoops())
    return "the op must have parallel loops and one result";
  if (read.extracts.size() != 1 ||
      llvm::count_if(read.table.getUses(), [&](OpOperand &use) {
        return op->isProperAncestor(use.getOwner());
      }) != 1)
    return "the body must read it with one tensor.extract";
  tensor::ExtractOp extract = read.extracts.front();
  auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
  if (!extract->hasOneUse() || *extract->user_begin() != yield)
    return "the element read must be what the op yields";
  for (OpOperand &operand : op->getOpOperands()) {
    Sharding s = shardingOf(tp, operand.get());
    if (s.isSharded() && !s.sequence &&
        (!op.isDpsInit(&operand) || op.payloadUsesValueFromOperand(&operand)))
      return "operand #" + std::to_string(operand.getOperandNumber()) +
             " is split over the axis too";
  }
  return "";
}

/// Rank t holds rows [t*n, (t+1)*n) of the table: it reads the row when
/// the index falls in its range and yields 0 otherwise, so that the sum
/// over the axis is the global read.
void rewriteIndexedRead(TPFunction &tp, const IndexedRead &read) {
  tensor::ExtractOp extract = read.extracts.front();
  int64_t dim = read.sharding.dim;
  int64_t rows = cast<RankedTensorType>(read.table.getType()).getDimSize(dim);
  OpBuilder b(extract);
  Location loc = extract.getLoc();
  Value global = extract.getIndices()[dim];
  Value local =
      arith::SubIOp::create(b, loc, global, rankOffset(tp, b, loc, rows));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value count = arith::ConstantIndexOp::create(b, loc, rows);
  Value inRange = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, local, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, local, count));
  Value safe = arith::SelectOp::create(b, loc, inRange, local, zero);
  extract.getIndicesMutable()[dim].set(safe);
  b.setInsertionPointAfter(extract);
  Type elem = extract.getType();
  Value none = arith::ConstantOp::create(b, loc, b.getZeroAttr(elem));
  Value picked = arith::SelectOp::create(b, loc, inRange, extract, none);
  extract.getResult().replaceAllUsesExcept(picked, picked.getDefiningOp());
}

} // namespace

FailureOr<bool> tensor_parallel::partitionIndexedRead(TPFunction &tp,
                                                      linalg::LinalgOp op) {
  std::optional<IndexedRead> read = findIndexedRead(tp, op);
  if (!read)
    return false;
  std::string reason = unsupportedReason(tp, op, *read);
  if (!reason.empty())
    return op->emitError()
           << "its body reads a value split along dim " << read->sharding.dim
           << " over the tensor-parallel axis \"" << tp.axis.getValue()
           << "\" at positions computed from data; a vocabulary-parallel "
              "read (an embedding lookup, the target logit of a "
              "cross-entropy) is partitioned where each rank reads its "
              "rows, but here "
           << reason;
  // The indices and every other value are read whole.
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  for (Value v : captured)
    if (shardingOf(tp, v).sequence) {
      Value whole = gatherSequence(tp, v);
      v.replaceUsesWithIf(whole, [&](OpOperand &use) {
        return op->isProperAncestor(use.getOwner());
      });
    }
  gatherSequenceOperands(tp, op);
  rewriteIndexedRead(tp, *read);
  // Exactly one rank read each element: the sum over the axis is the
  // read, resolved where it is first used (all-reduce, or with sequence
  // parallelism a reduce-scatter along the tokens).
  tp.partials[op->getResult(0)] = PendingPartial{/*mayScatter=*/true};
  ++tp.shardedOps;
  return true;
}

/// The position of loop `loop` among the results of `map` when it is
/// indexed there by itself; -1 when not at all; failure inside a compound
/// expression.
static FailureOr<int64_t> loopPosition(AffineMap map, unsigned loop) {
  int64_t found = -1;
  for (auto [p, e] : llvm::enumerate(map.getResults())) {
    auto dimExpr = dyn_cast<AffineDimExpr>(e);
    if (dimExpr && dimExpr.getPosition() == loop) {
      found = p;
      continue;
    }
    if (e.isFunctionOfDim(loop))
      return failure();
  }
  return found;
}

Value tensor_parallel::localPart(TPFunction &tp, Value v, int64_t dim) {
  if (Value copy = localCopy(tp, v, dim))
    return copy;
  auto key = std::make_pair(v, dim);
  if (Value known = tp.localCopies.lookup(key))
    return known;
  auto op = v.getDefiningOp<linalg::LinalgOp>();
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!op || !op.hasPureTensorSemantics() || !type || !type.hasStaticShape() ||
      type.getDimSize(dim) % tp.size != 0 || shardingOf(tp, v).isSharded())
    return {};
  OpOperand *init = op.getDpsInitOperand(cast<OpResult>(v).getResultNumber());
  auto dimExpr =
      dyn_cast<AffineDimExpr>(op.getMatchingIndexingMap(init).getResult(dim));
  if (!dimExpr || op.getIteratorTypesArray()[dimExpr.getPosition()] !=
                      utils::IteratorType::parallel)
    return {};
  unsigned loop = dimExpr.getPosition();
  SmallVector<Value> operands;
  for (OpOperand &operand : op->getOpOperands()) {
    Value x = operand.get();
    if (!isa<RankedTensorType>(x.getType())) {
      operands.push_back(x);
      continue;
    }
    FailureOr<int64_t> p =
        loopPosition(op.getMatchingIndexingMap(&operand), loop);
    if (failed(p) || shardingOf(tp, x).isSharded())
      return {};
    Value local = *p < 0 ? x : localPart(tp, x, *p);
    if (!local)
      return {};
    operands.push_back(local);
  }
  SmallVector<Type> resultTypes;
  for (OpOperand &out : op.getDpsInitsMutable())
    resultTypes.push_back(operands[out.getOperandNumber()].getType());
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  Operation *copy = mlir::clone(b, op.getOperation(), resultTypes, operands);
  int64_t localSize = type.getDimSize(dim) / tp.size;
  offsetLoopIndices(tp, copy, loop, localSize,
                    [](OpOperand &) { return false; });
  Value part = copy->getResult(cast<OpResult>(v).getResultNumber());
  tp.localCopies[key] = part;
  tp.shardings[part] = Sharding{dim};
  tp.recomputed.insert(op);
  return part;
}

void tensor_parallel::collectDemands(TPFunction &tp) {
  func::FuncOp func = tp.func;
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (OpOperand &operand : ret->getOpOperands()) {
    auto gradOf = func.getResultAttrOfType<IntegerAttr>(
        operand.getOperandNumber(), kGradOfAttrName);
    if (!gradOf || gradOf.getInt() < 0 ||
        gradOf.getInt() >= func.getNumArguments())
      continue;
    Sharding s = shardingOf(tp, func.getArgument(gradOf.getInt()));
    if (s.isSharded())
      tp.demanded[operand.get()] = s.dim;
  }
  // Backwards through linalg ops along a parallel loop, to operands that
  // have no other use (a value something else also reads is not forced).
  for (Operation &o : llvm::reverse(body)) {
    auto op = dyn_cast<linalg::LinalgOp>(&o);
    if (!op || op.getNumDpsInits() != 1 || !op.hasPureTensorSemantics())
      continue;
    auto it = tp.demanded.find(op->getResult(0));
    if (it == tp.demanded.end())
      continue;
    auto dimExpr = dyn_cast<AffineDimExpr>(
        op.getMatchingIndexingMap(op.getDpsInitOperand(0))
            .getResult(it->second));
    if (!dimExpr)
      continue;
    for (OpOperand *input : op.getDpsInputOperands()) {
      FailureOr<int64_t> p =
          loopPosition(op.getMatchingIndexingMap(input), dimExpr.getPosition());
      if (succeeded(p) && *p >= 0 && input->get().hasOneUse() &&
          input->get().getDefiningOp())
        tp.demanded[input->get()] = *p;
    }
  }
}

void tensor_parallel::eraseRecomputed(TPFunction &tp) {
  Block &body = tp.func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (tp.recomputed.contains(&op) && isOpTriviallyDead(&op)) {
      // Its operands' producers may now be dead too.
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (isa<linalg::LinalgOp>(def))
            tp.recomputed.insert(def);
      op.erase();
    }
}

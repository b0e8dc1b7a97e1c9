//===- ReductionLoops.cpp - reductions on buffers to register loops -------===//
//
// `convert-linalg-to-loops` lowers a reduction to a loop nest that loads and
// stores the output element on every iteration of the reduction loop. LLVM
// cannot keep that element in a register (the output buffer may alias an
// input as far as it knows) and does not reassociate floating-point sums,
// so layer norms, softmax and cross-entropy ran one scalar element per
// iteration. This pass lowers a linalg op on buffers whose innermost loops
// are its reduction loops itself: the parallel loops outside, then the
// reduction loops carrying the output elements as `scf.for` iteration
// arguments (one load before, one store after). An f32/f64 output whose
// body is `acc <op> element` (a sum, product, max or min) is accumulated
// into a vector of partial results (16 for f32, 8 for f64) in an order
// fixed by the loop bounds alone, then the partials are combined by halves;
// no fast-math flag is added, so LLVM vectorizes the partials as they are
// and cannot reorder anything: the results are the same bits whatever the
// kernel fuses around the reduction and whatever the host's vector width.
// Other reductions keep their sequential order.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/LinalgLoops.h"
#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREDUCTIONLOOPS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Why `op` cannot take the register-accumulator lowering, or "" if it can.
std::string whyNot(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return "operands are not buffers";
  if (!op.getBlock())
    return "the op has no body";
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned numLoops = iterators.size();
  if (iterators.back() != utils::IteratorType::reduction)
    return "the innermost loop is not a reduction (it vectorizes as it is)";
  auto firstReduction = llvm::find(iterators, utils::IteratorType::reduction);
  if (!std::all_of(firstReduction, iterators.end(), [](auto it) {
        return it == utils::IteratorType::reduction;
      }))
    return "a parallel loop lies inside a reduction loop";
  unsigned numParallel = firstReduction - iterators.begin();
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    for (unsigned d = numParallel; d < numLoops; ++d)
      if (map.isFunctionOfDim(d))
        return "an output is indexed by a reduction dimension";
  }
  for (OpOperand &operand : op->getOpOperands())
    if (auto shaped = dyn_cast<ShapedType>(operand.get().getType());
        shaped && !isa<MemRefType>(shaped))
      return "an operand is not a memref";
  return "";
}

/// How many partial results a reduction of this element type keeps: one
/// 64-byte vector's worth (f32: 16, f64: 8), or 0 for an element type whose
/// reductions keep their sequential order.
unsigned partialsFor(Type t) {
  if (t.isF32())
    return 16;
  if (t.isF64())
    return 8;
  return 0;
}

/// The number of partial results every output of `op` may be split into,
/// with each output's combiner in `combiners`; 0 when the op's elements must
/// be combined in their sequential order (an output that is not f32/f64, or
/// whose body is not `acc <op> x`).
unsigned partialsOf(linalg::LinalgOp op,
                    SmallVectorImpl<Operation *> &combiners) {
  unsigned k = 0;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    unsigned n = partialsFor(getElementTypeOrSelf(init.get().getType()));
    Operation *combiner = matchCombiner(op, init);
    if (n == 0 || !combiner || (k != 0 && n != k))
      return 0;
    k = n;
    combiners.push_back(combiner);
  }
  // An innermost reduction loop of fewer than k iterations (known here)
  // would put every element into partial 0: the sequential order.
  int64_t size = op.getStaticLoopRanges().back();
  if (!ShapedType::isDynamic(size) && size < k)
    return 0;
  return k;
}

/// The loops of one reduction op (see lower()): its loop bounds, the
/// combiner of each output and the number of partial results (0: in order).
class ReductionLowering {
public:
  explicit ReductionLowering(linalg::LinalgOp op)
      : op(op), inits(op.getDpsInitsMutable()) {
    OpBuilder b(op);
    for (Range r : op.createLoopRanges(b, op.getLoc())) {
      lbs.push_back(getValueOrCreateConstantIndexOp(b, op.getLoc(), r.offset));
      ubs.push_back(getValueOrCreateConstantIndexOp(b, op.getLoc(), r.size));
      steps.push_back(
          getValueOrCreateConstantIndexOp(b, op.getLoc(), r.stride));
    }
    numParallel = op.getNumParallelLoops();
    k = partialsOf(op, combiners);
  }

  void lower() {
    OpBuilder b(op);
    auto parallelBody = [&](OpBuilder &pb, Location l, ValueRange pivs) {
      // The output elements, loaded once.
      SmallVector<Value> accs;
      for (OpOperand &init : inits)
        accs.push_back(memref::LoadOp::create(
            pb, l, init.get(), indicesAt(pb, l, op, init, pivs)));
      SmallVector<Value> results =
          k == 0 ? sequential(pb, l, pivs, accs) : partials(pb, l, pivs, accs);
      for (auto [init, result] : llvm::zip(inits, results))
        memref::StoreOp::create(pb, l, result, init.get(),
                                indicesAt(pb, l, op, init, pivs));
    };
    scf::buildLoopNest(b, op.getLoc(), ArrayRef(lbs).take_front(numParallel),
                       ArrayRef(ubs).take_front(numParallel),
                       ArrayRef(steps).take_front(numParallel), parallelBody);
    op->erase();
  }

private:
  /// One iteration of the body at the loop indices `ivs`: the outputs'
  /// values from their values `accs` before it or, with `elements`, what
  /// the combiners would combine into them (`accs` is then unused).
  SmallVector<Value> iteration(OpBuilder &rb, Location rl, ValueRange ivs,
                               ValueRange accs, bool elements) {
    return bodyAt(rb, rl, op, ivs, accs,
                  elements ? ArrayRef(combiners) : ArrayRef<Operation *>());
  }

  ArrayRef<Value> reductionLbs() {
    return ArrayRef(lbs).drop_front(numParallel);
  }
  ArrayRef<Value> reductionUbs() {
    return ArrayRef(ubs).drop_front(numParallel);
  }
  ArrayRef<Value> reductionSteps() {
    return ArrayRef(steps).drop_front(numParallel);
  }

  /// The reduction loops at the parallel indices `pivs`, in order, from the
  /// outputs' values `accs`.
  SmallVector<Value> sequential(OpBuilder &pb, Location l, ValueRange pivs,
                                ValueRange accs) {
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, reductionLbs(), reductionUbs(), reductionSteps(), accs,
        [&](OpBuilder &rb, Location rl, ValueRange rivs,
            ValueRange iterArgs) -> scf::ValueVector {
          SmallVector<Value> ivs(pivs);
          ivs.append(rivs.begin(), rivs.end());
          return iteration(rb, rl, ivs, iterArgs, /*elements=*/false);
        });
    return nest.results;
  }

  /// The reduction loops into a vector of k partial results per output.
  /// Partial j takes, in order, the elements whose innermost reduction
  /// index is j modulo k, except the last (size modulo k) of each innermost
  /// row, which partial 0 takes; partial 0 starts from the output's value,
  /// the others from the combiner's identity. Then partials j and j + k/2
  /// are combined, halving k until one is left. That order depends on the
  /// loop bounds only: not on the body around the combiner, nor on the
  /// vector width of the machine. LLVM has nothing to reassociate: the k
  /// elements of a block are computed as k scalars, which it vectorizes as
  /// they are, and combined with the partials in one vector op.
  SmallVector<Value> partials(OpBuilder &pb, Location l, ValueRange pivs,
                              ValueRange accs) {
    SmallVector<Value> starts;
    for (auto [o, acc] : llvm::enumerate(accs)) {
      auto type = VectorType::get({k}, acc.getType());
      Value ids = vector::BroadcastOp::create(
          pb, l, type, identityOf(pb, l, combiners[o], acc.getType()));
      starts.push_back(vector::InsertOp::create(pb, l, acc, ids, 0));
    }
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, reductionLbs().drop_back(), reductionUbs().drop_back(),
        reductionSteps().drop_back(), starts,
        [&](OpBuilder &rb, Location rl, ValueRange outer,
            ValueRange vecs) -> scf::ValueVector {
          SmallVector<Value> ivs(pivs);
          ivs.append(outer.begin(), outer.end());
          return innermostRow(rb, rl, ivs, vecs);
        });
    SmallVector<Value> results;
    for (auto [o, vec] : llvm::enumerate(nest.results))
      results.push_back(combineHalves(pb, l, combiners[o], vec));
    return results;
  }

  /// One innermost row at the outer indices `outerIvs` into the partials
  /// `vecs`: the full blocks of k elements (element j into partial j), then
  /// the rest, in order, into partial 0.
  scf::ValueVector innermostRow(OpBuilder &rb, Location rl,
                                ArrayRef<Value> outerIvs, ValueRange vecs) {
    Value lb = reductionLbs().back(), ub = reductionUbs().back();
    Value kc = arith::ConstantIndexOp::create(rb, rl, k);
    auto ivsAt = [&](Value iv) {
      SmallVector<Value> ivs(outerIvs);
      ivs.push_back(iv);
      return ivs;
    };
    Value rest = rb.createOrFold<arith::RemUIOp>(
        rl, rb.createOrFold<arith::SubIOp>(rl, ub, lb), kc);
    Value mainUb = rb.createOrFold<arith::SubIOp>(rl, ub, rest);
    auto blocks = scf::ForOp::create(
        rb, rl, lb, mainUb, kc, vecs,
        [&](OpBuilder &fb, Location fl, Value iv, ValueRange partial) {
          scf::YieldOp::create(fb, fl, block(fb, fl, iv, ivsAt, partial));
        });
    SmallVector<Value> firsts;
    for (Value vec : blocks.getResults())
      firsts.push_back(vector::ExtractOp::create(rb, rl, vec, 0));
    auto tail = scf::ForOp::create(
        rb, rl, mainUb, ub, reductionSteps().back(), firsts,
        [&](OpBuilder &fb, Location fl, Value iv, ValueRange lanes) {
          scf::YieldOp::create(
              fb, fl, iteration(fb, fl, ivsAt(iv), lanes, /*elements=*/false));
        });
    scf::ValueVector results;
    for (auto [vec, first] : llvm::zip(blocks.getResults(), tail.getResults()))
      results.push_back(vector::InsertOp::create(rb, rl, first, vec, 0));
    return results;
  }

  /// The k elements of the block starting at `iv`, combined into `vecs`.
  SmallVector<Value> block(OpBuilder &fb, Location fl, Value iv,
                           llvm::function_ref<SmallVector<Value>(Value)> ivsAt,
                           ValueRange vecs) {
    SmallVector<SmallVector<Value>> elems(vecs.size());
    for (unsigned j = 0; j < k; ++j) {
      Value ivj = arith::AddIOp::create(
          fb, fl, iv, arith::ConstantIndexOp::create(fb, fl, j));
      for (auto [o, e] : llvm::enumerate(
               iteration(fb, fl, ivsAt(ivj), {}, /*elements=*/true)))
        elems[o].push_back(e);
    }
    SmallVector<Value> next;
    for (auto [o, vec] : llvm::enumerate(vecs)) {
      Value elements =
          vector::FromElementsOp::create(fb, fl, vec.getType(), elems[o]);
      Operation *c = combiners[o];
      bool accFirst =
          c->getOperand(0) == op.getMatchingBlockArgument(&inits[o]);
      next.push_back(accFirst ? combine(fb, fl, c, vec, elements)
                              : combine(fb, fl, c, elements, vec));
    }
    return next;
  }

  /// Partials j and j + half combined, halving until one is left.
  Value combineHalves(OpBuilder &pb, Location l, Operation *combiner,
                      Value vec) {
    for (unsigned half = k / 2; half > 0; half /= 2) {
      auto lo = llvm::to_vector(llvm::seq<int64_t>(0, half));
      auto hi = llvm::to_vector(llvm::seq<int64_t>(half, 2 * half));
      Value low = vector::ShuffleOp::create(pb, l, vec, vec, lo);
      Value high = vector::ShuffleOp::create(pb, l, vec, vec, hi);
      vec = combine(pb, l, combiner, low, high);
    }
    return vector::ExtractOp::create(pb, l, vec, 0);
  }

  linalg::LinalgOp op;
  MutableOperandRange inits;
  SmallVector<Value> lbs, ubs, steps;
  unsigned numParallel = 0;
  SmallVector<Operation *> combiners;
  unsigned k = 0;
};

void lower(linalg::LinalgOp op) { ReductionLowering(op).lower(); }

struct FSDPReductionLoopsPass
    : public mlir::fsdp::impl::FSDPReductionLoopsBase<FSDPReductionLoopsPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registry.insert<vector::VectorDialect>();
  }

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() > 0)
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      std::string why = whyNot(op);
      if (!why.empty()) {
        if (report)
          op->emitRemark() << "reduction stays a loop nest: " << why;
        continue;
      }
      if (report) {
        SmallVector<Operation *> combiners;
        unsigned k = partialsOf(op, combiners);
        InFlightDiagnostic d = op->emitRemark()
                               << "reduction accumulates in registers";
        if (k)
          d << " (" << k
            << " partial results per output, combined in a fixed order)";
        else
          d << " (in order)";
      }
      lower(op);
    }
  }
};

} // namespace

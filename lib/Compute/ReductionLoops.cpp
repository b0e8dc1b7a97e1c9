//===- ReductionLoops.cpp - reductions on buffers to blocked loops --------===//
//
// `convert-linalg-to-loops` lowers a reduction to a loop nest that loads and
// stores the output element on every iteration of the reduction loop, and
// sums every output's elements one after the other into that one element:
// on data with an offset the rounding error then grows with the number of
// elements (a sum over 100,352 values of 1000 + N(0, 1) was 30x torch's
// error; torch sums pairwise). This pass writes the loops of a linalg
// reduction on buffers itself.
//
// A float output whose body is `acc <op> element` (a sum, product, max or
// min) is accumulated in blocks: each reduction loop is a cascade in which
// every accumulator takes at most 16 values before it is combined into the
// level above (buildBlockedLoop), and an outer reduction loop combines the
// sums of the inner ones, each started from the identity. The order depends
// on the loop bounds alone and no fast-math flag is added, so LLVM cannot
// reorder anything: the same bits whatever the kernel fuses around the
// reduction, whatever the host's vector width.
//
//  - Innermost loop a reduction (row sums, norms, softmax, a mean over
//    (0, 2, 3) once the channel loop is moved out): the parallel loops
//    outside, the reduction loops inside with accumulators in registers.
//    f32 (f64) rows of at least 16 (8) elements keep 16 (8) partial
//    results along the innermost loop in one vector, partial j taking
//    element j of each block of 16; other rows one accumulator per level.
//  - Innermost loop parallel (column sums: a bias gradient, x.sum(0)): the
//    columns in tiles of 256; for each tile, the reduction loops outside a
//    column loop that combines each row of the tile into a stack buffer of
//    256 accumulators per level. The column loop vectorizes as it is (each
//    column has its own accumulators).
//
// Other reductions (integer outputs, bodies that are not `acc <op> x`) keep
// their sequential order, with the accumulators in registers when their
// reduction loops are innermost. Both CPU paths (compute=fast and the
// reference, compute=loops) run this pass: they sum in the same order.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/LinalgLoops.h"
#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREDUCTIONLOOPS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Columns per tile of a reduction whose innermost loop is parallel: the
/// accumulators of a tile (256 per level and output) stay in the L1 cache.
constexpr int64_t kColumnTile = 256;

/// How a reduction op is lowered.
enum class Kind {
  /// Not here: left to convert-linalg-to-loops (`why` says why).
  None,
  /// Sequential order, the accumulators in registers (fast path only).
  InOrder,
  /// Blocked, the innermost loop a reduction: accumulators in registers.
  Rows,
  /// Blocked, the innermost loop parallel: accumulators in stack buffers.
  Columns,
};

struct Plan {
  Kind kind = Kind::None;
  std::string why;
  /// Rows: partial results along the innermost loop (0: one accumulator).
  unsigned lanes = 0;
  /// The combiner of each output (Rows and Columns).
  SmallVector<Operation *> combiners;
};

/// How many partial results a reduction of this element type keeps along
/// its innermost loop on the fast path: one 64-byte vector's worth (f32: 16,
/// f64: 8), or 0 for one accumulator.
unsigned partialsFor(Type t) {
  if (t.isF32())
    return 16;
  if (t.isF64())
    return 8;
  return 0;
}

Plan planFor(linalg::LinalgOp op) {
  Plan plan;
  auto reject = [&](StringRef why) {
    plan.kind = Kind::None;
    plan.why = why.str();
    return plan;
  };
  if (!op.hasPureBufferSemantics())
    return reject("operands are not buffers");
  if (!op.getBlock())
    return reject("the op has no body");
  for (OpOperand &operand : op->getOpOperands())
    if (auto shaped = dyn_cast<ShapedType>(operand.get().getType());
        shaped && !isa<MemRefType>(shaped))
      return reject("an operand is not a memref");
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    for (auto [d, it] : llvm::enumerate(iterators))
      if (it == utils::IteratorType::reduction && map.isFunctionOfDim(d))
        return reject("an output is indexed by a reduction dimension");
  }

  bool allCombiners = true;
  unsigned lanes = 0;
  bool uniformLanes = true;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Type t = getElementTypeOrSelf(init.get().getType());
    Operation *combiner = isa<FloatType>(t) ? matchCombiner(op, init) : nullptr;
    allCombiners &= combiner != nullptr;
    plan.combiners.push_back(combiner);
    unsigned n = partialsFor(t);
    if (lanes != 0 && n != lanes)
      uniformLanes = false;
    lanes = n;
  }
  bool innermostReduction = iterators.back() == utils::IteratorType::reduction;

  if (allCombiners) {
    if (!innermostReduction) {
      plan.kind = Kind::Columns;
      return plan;
    }
    plan.kind = Kind::Rows;
    // A row shorter than the partials (known here) would put every element
    // into partial 0.
    int64_t size = op.getStaticLoopRanges().back();
    if (uniformLanes && lanes != 0 &&
        (ShapedType::isDynamic(size) || size >= lanes))
      plan.lanes = lanes;
    return plan;
  }
  plan.combiners.clear();
  if (!innermostReduction)
    return reject(
        "the innermost loop is not a reduction (it vectorizes as it is)");
  auto firstReduction = llvm::find(iterators, utils::IteratorType::reduction);
  if (!std::all_of(firstReduction, iterators.end(), [](auto it) {
        return it == utils::IteratorType::reduction;
      }))
    return reject("a parallel loop lies inside a reduction loop");
  plan.kind = Kind::InOrder;
  return plan;
}

/// The loops of one reduction op (see the file comment).
class ReductionLowering {
public:
  ReductionLowering(linalg::LinalgOp op, Plan plan)
      : op(op), loc(op.getLoc()), plan(std::move(plan)),
        inits(op.getDpsInitsMutable()) {
    OpBuilder b(op);
    for (Range r : op.createLoopRanges(b, loc))
      ubs.push_back(getValueOrCreateConstantIndexOp(b, loc, r.size));
    sizes = op.getStaticLoopRanges();
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      (it == utils::IteratorType::parallel ? par : red).push_back(d);
    int64_t elements = 1;
    innerElements.resize(red.size());
    for (unsigned r = red.size(); r-- > 0;) {
      innerElements[r] = elements;
      if (!ShapedType::isDynamic(elements))
        elements = ShapedType::isDynamic(sizes[red[r]])
                       ? ShapedType::kDynamic
                       : elements * sizes[red[r]];
    }
  }

  void lower() {
    switch (plan.kind) {
    case Kind::InOrder:
    case Kind::Rows:
      lowerRows();
      break;
    case Kind::Columns:
      lowerColumns();
      break;
    case Kind::None:
      return;
    }
    op->erase();
  }

private:
  Value index(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }

  /// The op's loop indices from the parallel ones `pivs` and the reduction
  /// ones `rivs`, in the op's order; the missing ones are 0.
  SmallVector<Value> ivsAt(OpBuilder &b, ArrayRef<Value> pivs,
                           ArrayRef<Value> rivs) {
    SmallVector<Value> ivs(sizes.size());
    for (auto [i, d] : llvm::enumerate(par))
      ivs[d] = i < pivs.size() ? pivs[i] : index(b, 0);
    for (auto [i, d] : llvm::enumerate(red))
      ivs[d] = i < rivs.size() ? rivs[i] : index(b, 0);
    return ivs;
  }

  /// The values the body combines into its outputs at `ivs`.
  SmallVector<Value> elementsAt(OpBuilder &b, ArrayRef<Value> ivs) {
    return bodyAt(b, loc, op, ivs, {}, plan.combiners);
  }

  /// Whether the elements of the reduction loops inside reduction loop `r`
  /// are combined straight into the accumulator of `r`'s level 0, in order:
  /// when they are at most 16 (three taps of a convolution, a 3x3 window),
  /// rather than summed from a fresh accumulator each and merged. Rows of
  /// partial results are always merged.
  bool direct(unsigned r) {
    if (r + 1 == red.size())
      return true;
    int64_t inner = innerElements[r];
    return !plan.lanes && !ShapedType::isDynamic(inner) &&
           inner <= kBlockedLoopBlock;
  }

  /// Iterations of reduction loop `r` per level-0 block: at most 16
  /// elements (or merged sums) per accumulator.
  int64_t firstBlock(unsigned r) {
    if (r + 1 == red.size() || !direct(r))
      return kBlockedLoopBlock;
    return std::max<int64_t>(1, kBlockedLoopBlock / innerElements[r]);
  }

  /// The reduction loops inside reduction loop `r` (at the reduction
  /// indices `rivs`, which include `r`'s) in order: `body` at each of their
  /// indices, threading `accs` through.
  SmallVector<Value> innerLoopsInOrder(
      OpBuilder &b, ArrayRef<Value> rivs, ValueRange accs,
      llvm::function_ref<SmallVector<Value>(OpBuilder &, ArrayRef<Value>,
                                            ValueRange)>
          body) {
    SmallVector<Value> zeros, ones, innerUbs;
    for (unsigned r = rivs.size(); r < red.size(); ++r) {
      zeros.push_back(index(b, 0));
      ones.push_back(index(b, 1));
      innerUbs.push_back(ubs[red[r]]);
    }
    scf::LoopNest nest =
        scf::buildLoopNest(b, loc, zeros, innerUbs, ones, accs,
                           [&](OpBuilder &nb, Location, ValueRange innerIvs,
                               ValueRange iterArgs) -> scf::ValueVector {
                             SmallVector<Value> all(rivs);
                             all.append(innerIvs.begin(), innerIvs.end());
                             return body(nb, all, iterArgs);
                           });
    return nest.results;
  }

  /// `acc <op> x` for output `o`, in the body's operand order.
  Value combineLike(OpBuilder &b, unsigned o, Value acc, Value x) {
    Operation *c = plan.combiners[o];
    bool accFirst = c->getOperand(0) == op.getMatchingBlockArgument(&inits[o]);
    return accFirst ? combine(b, loc, c, acc, x) : combine(b, loc, c, x, acc);
  }

  SmallVector<Value> combineAll(OpBuilder &b, ValueRange accs, ValueRange xs) {
    SmallVector<Value> out;
    for (auto [o, acc, x] : llvm::enumerate(accs, xs))
      out.push_back(combineLike(b, o, acc, x));
    return out;
  }

  Type elementType(unsigned o) {
    return getElementTypeOrSelf(inits[o].get().getType());
  }

  /// The identity of output `o`'s combiner, one or `lanes` of it.
  Value identity(OpBuilder &b, unsigned o, unsigned lanes) {
    Value id = identityOf(b, loc, plan.combiners[o], elementType(o));
    if (lanes == 0)
      return id;
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({lanes}, elementType(o)), id);
  }

  //===--------------------------------------------------------------------===//
  // Rows: the parallel loops outside, accumulators in registers.
  //===--------------------------------------------------------------------===//

  void lowerRows() {
    OpBuilder b(op);
    SmallVector<Value> zeros(par.size(), index(b, 0)),
        ones(par.size(), index(b, 1)), parUbs;
    for (unsigned d : par)
      parUbs.push_back(ubs[d]);
    scf::buildLoopNest(
        b, loc, zeros, parUbs, ones,
        [&](OpBuilder &pb, Location, ValueRange pivsRange) {
          SmallVector<Value> pivs(pivsRange);
          SmallVector<Value> outIvs = ivsAt(pb, pivs, {});
          SmallVector<Value> accs;
          for (OpOperand &init : inits)
            accs.push_back(memref::LoadOp::create(
                pb, loc, init.get(), indicesAt(pb, loc, op, init, outIvs)));
          SmallVector<Value> results;
          if (plan.kind == Kind::InOrder) {
            results = inOrder(pb, pivs, accs);
          } else {
            SmallVector<Value> totals = sumRows(pb, pivs, {}, 0);
            for (auto [o, total] : llvm::enumerate(totals)) {
              if (plan.lanes)
                total = combineHalves(pb, plan.combiners[o], total);
              results.push_back(combineLike(pb, o, accs[o], total));
            }
          }
          for (auto [init, result] : llvm::zip(inits, results))
            memref::StoreOp::create(pb, loc, result, init.get(),
                                    indicesAt(pb, loc, op, init, outIvs));
        });
  }

  /// The reduction loops at the parallel indices `pivs`, in order, from the
  /// outputs' values `accs`.
  SmallVector<Value> inOrder(OpBuilder &pb, ArrayRef<Value> pivs,
                             ValueRange accs) {
    SmallVector<Value> zeros(red.size(), index(pb, 0)),
        ones(red.size(), index(pb, 1)), redUbs;
    for (unsigned d : red)
      redUbs.push_back(ubs[d]);
    scf::LoopNest nest = scf::buildLoopNest(
        pb, loc, zeros, redUbs, ones, accs,
        [&](OpBuilder &rb, Location, ValueRange rivs,
            ValueRange iterArgs) -> scf::ValueVector {
          return bodyAt(rb, loc, op, ivsAt(rb, pivs, SmallVector<Value>(rivs)),
                        iterArgs);
        });
    return nest.results;
  }

  /// The sum (per output: a scalar, or `lanes` partial results) over the
  /// reduction loops from `rivs.size()` on at the indices `pivs`, `rivs`,
  /// from the identity: a blocked loop over this reduction loop whose
  /// iterations are the elements (innermost) or the sums of the loops
  /// inside.
  SmallVector<Value> sumRows(OpBuilder &b, ArrayRef<Value> pivs,
                             ArrayRef<Value> rivs, unsigned depth) {
    unsigned r = rivs.size();
    if (r + 1 == red.size() && plan.lanes)
      return partialsOfRow(b, pivs, rivs, depth);
    BlockedLoopCallbacks cb;
    cb.fresh = [&](OpBuilder &fb, Location, unsigned) {
      return freshAccumulators(fb);
    };
    cb.merge = [&](OpBuilder &fb, Location, ValueRange parent, ValueRange child,
                   unsigned) { return combineAll(fb, parent, child); };
    cb.step = [&](OpBuilder &fb, Location, Value iv, ValueRange acc,
                  unsigned d) -> SmallVector<Value> {
      SmallVector<Value> inner(rivs);
      inner.push_back(iv);
      if (!direct(r))
        return combineAll(fb, acc, sumRows(fb, pivs, inner, d + 1));
      return innerLoopsInOrder(
          fb, inner, acc,
          [&](OpBuilder &nb, ArrayRef<Value> all, ValueRange accs) {
            return combineAll(nb, accs, elementsAt(nb, ivsAt(nb, pivs, all)));
          });
    };
    return buildBlockedLoop(b, loc, index(b, 0), ubs[red[r]], 1, sizes[red[r]],
                            firstBlock(r), depth, cb);
  }

  SmallVector<Value> freshAccumulators(OpBuilder &b) {
    SmallVector<Value> ids;
    for (unsigned o = 0; o < inits.size(); ++o)
      ids.push_back(identity(b, o, plan.lanes));
    return ids;
  }

  /// The innermost row at `pivs`, `rivs` into `lanes` partial results:
  /// blocks of `lanes` elements (element j into partial j) in a blocked
  /// loop, then the last (size mod lanes) elements, in order, into
  /// partial 0. The elements of a block are computed as scalars, which
  /// LLVM vectorizes as they are, and combined with the partials in one
  /// vector op.
  SmallVector<Value> partialsOfRow(OpBuilder &b, ArrayRef<Value> pivs,
                                   ArrayRef<Value> rivs, unsigned depth) {
    unsigned k = plan.lanes;
    Value ub = ubs[red.back()];
    int64_t size = sizes[red.back()];
    Value kc = index(b, k);
    Value rest = b.createOrFold<arith::RemUIOp>(loc, ub, kc);
    Value mainUb = b.createOrFold<arith::SubIOp>(loc, ub, rest);
    auto ivsWith = [&](OpBuilder &fb, Value iv) {
      SmallVector<Value> inner(rivs);
      inner.push_back(iv);
      return ivsAt(fb, pivs, inner);
    };
    BlockedLoopCallbacks cb;
    cb.fresh = [&](OpBuilder &fb, Location, unsigned) {
      return freshAccumulators(fb);
    };
    cb.merge = [&](OpBuilder &fb, Location, ValueRange parent, ValueRange child,
                   unsigned) { return combineAll(fb, parent, child); };
    cb.step = [&](OpBuilder &fb, Location, Value iv, ValueRange vecs,
                  unsigned) {
      SmallVector<SmallVector<Value>> elems(vecs.size());
      for (unsigned j = 0; j < k; ++j) {
        Value ivj = arith::AddIOp::create(fb, loc, iv, index(fb, j));
        for (auto [o, e] : llvm::enumerate(elementsAt(fb, ivsWith(fb, ivj))))
          elems[o].push_back(e);
      }
      SmallVector<Value> next;
      for (auto [o, vec] : llvm::enumerate(vecs))
        next.push_back(combineLike(
            fb, o, vec,
            vector::FromElementsOp::create(fb, loc, vec.getType(), elems[o])));
      return next;
    };
    int64_t blocks = ShapedType::isDynamic(size) ? size : size / k;
    SmallVector<Value> vecs = buildBlockedLoop(
        b, loc, index(b, 0), mainUb, k, blocks, kBlockedLoopBlock, depth, cb);
    SmallVector<Value> firsts;
    for (Value vec : vecs)
      firsts.push_back(vector::ExtractOp::create(b, loc, vec, 0));
    auto tail = scf::ForOp::create(
        b, loc, mainUb, ub, index(b, 1), firsts,
        [&](OpBuilder &fb, Location, Value iv, ValueRange lanes) {
          scf::YieldOp::create(
              fb, loc, combineAll(fb, lanes, elementsAt(fb, ivsWith(fb, iv))));
        });
    SmallVector<Value> results;
    for (auto [vec, first] : llvm::zip(vecs, tail.getResults()))
      results.push_back(vector::InsertOp::create(b, loc, first, vec, 0));
    return results;
  }

  /// Partials j and j + half combined, halving until one is left.
  Value combineHalves(OpBuilder &b, Operation *combiner, Value vec) {
    unsigned k = cast<VectorType>(vec.getType()).getNumElements();
    for (unsigned half = k / 2; half > 0; half /= 2) {
      auto lo = llvm::to_vector(llvm::seq<int64_t>(0, half));
      auto hi = llvm::to_vector(llvm::seq<int64_t>(half, 2 * half));
      Value low = vector::ShuffleOp::create(b, loc, vec, vec, lo);
      Value high = vector::ShuffleOp::create(b, loc, vec, vec, hi);
      vec = combine(b, loc, combiner, low, high);
    }
    return vector::ExtractOp::create(b, loc, vec, 0);
  }

  //===--------------------------------------------------------------------===//
  // Columns: the innermost (parallel) loop in tiles, accumulators in buffers.
  //===--------------------------------------------------------------------===//

  void lowerColumns() {
    unsigned column = par.back();
    ArrayRef<unsigned> outer = ArrayRef(par).drop_back();
    int64_t columns = sizes[column];
    tile = ShapedType::isDynamic(columns) ? kColumnTile
                                          : std::min(kColumnTile, columns);
    scope = op->getParentWithTrait<OpTrait::AutomaticAllocationScope>();
    OpBuilder b(op);
    SmallVector<Value> zeros(outer.size(), index(b, 0)),
        ones(outer.size(), index(b, 1)), outerUbs;
    for (unsigned d : outer)
      outerUbs.push_back(ubs[d]);
    scf::buildLoopNest(
        b, loc, zeros, outerUbs, ones,
        [&](OpBuilder &pb, Location, ValueRange outerIvs) {
          Value tileSize = index(pb, tile);
          scf::ForOp::create(
              pb, loc, index(pb, 0), ubs[column], tileSize, ValueRange{},
              [&](OpBuilder &tb, Location, Value first, ValueRange) {
                // Whole tiles have a static width: a column loop of a
                // known trip count.
                Value width = tileSize;
                if (ShapedType::isDynamic(columns) || columns % tile != 0)
                  width = tb.createOrFold<arith::MinSIOp>(
                      loc, tileSize,
                      tb.createOrFold<arith::SubIOp>(loc, ubs[column], first));
                Columns cols{SmallVector<Value>(outerIvs), first, width};
                sumColumns(tb, cols, {}, 0);
                columnLoop(tb, cols, [&](OpBuilder &cb, Value c, Value col) {
                  SmallVector<Value> pivs(cols.outerIvs);
                  pivs.push_back(col);
                  SmallVector<Value> ivs = ivsAt(cb, pivs, {});
                  for (auto [o, init] : llvm::enumerate(inits)) {
                    SmallVector<Value> idx = indicesAt(cb, loc, op, init, ivs);
                    Value acc =
                        memref::LoadOp::create(cb, loc, init.get(), idx);
                    Value total =
                        memref::LoadOp::create(cb, loc, buffer(o, 0), c);
                    memref::StoreOp::create(cb, loc,
                                            combineLike(cb, o, acc, total),
                                            init.get(), idx);
                  }
                });
                scf::YieldOp::create(tb, loc);
              });
        });
  }

  /// A tile of columns: the indices of the outer parallel loops, the first
  /// column and the number of columns.
  struct Columns {
    SmallVector<Value> outerIvs;
    Value first, width;
  };

  /// `for (c = 0; c < width; ++c) body(c, first + c)`.
  void columnLoop(OpBuilder &b, const Columns &cols,
                  llvm::function_ref<void(OpBuilder &, Value, Value)> body) {
    scf::ForOp::create(
        b, loc, index(b, 0), cols.width, index(b, 1), ValueRange{},
        [&](OpBuilder &cb, Location, Value c, ValueRange) {
          body(cb, c, arith::AddIOp::create(cb, loc, cols.first, c));
          scf::YieldOp::create(cb, loc);
        });
  }

  /// The accumulators of output `o` at depth `depth`: a stack buffer of one
  /// tile, allocated once at the start of the function.
  Value buffer(unsigned o, unsigned depth) {
    auto key = std::make_pair(o, depth);
    auto it = buffers.find(key);
    if (it != buffers.end())
      return it->second;
    OpBuilder b = OpBuilder::atBlockBegin(&scope->getRegion(0).front());
    Value buf = memref::AllocaOp::create(
        b, loc, MemRefType::get({tile}, elementType(o)));
    buffers[key] = buf;
    return buf;
  }

  /// The sums over the reduction loops from `rivs.size()` on, at the tile
  /// `cols` and the indices `rivs`, from the identity, into the buffers of
  /// depth `depth`.
  void sumColumns(OpBuilder &b, const Columns &cols, ArrayRef<Value> rivs,
                  unsigned depth) {
    unsigned r = rivs.size();
    BlockedLoopCallbacks cb;
    cb.fresh = [&](OpBuilder &fb, Location, unsigned d) {
      columnLoop(fb, cols, [&](OpBuilder &lb, Value c, Value) {
        for (unsigned o = 0; o < inits.size(); ++o)
          memref::StoreOp::create(lb, loc, identity(lb, o, 0), buffer(o, d), c);
      });
      return SmallVector<Value>();
    };
    cb.merge = [&](OpBuilder &fb, Location, ValueRange, ValueRange,
                   unsigned d) {
      mergeColumns(fb, cols, d);
      return SmallVector<Value>();
    };
    cb.step = [&](OpBuilder &fb, Location, Value iv, ValueRange, unsigned d) {
      SmallVector<Value> inner(rivs);
      inner.push_back(iv);
      if (!direct(r)) {
        sumColumns(fb, cols, inner, d + 1);
        mergeColumns(fb, cols, d);
        return SmallVector<Value>();
      }
      // Each row of the tile, in order, into the accumulators.
      innerLoopsInOrder(
          fb, inner, {}, [&](OpBuilder &nb, ArrayRef<Value> all, ValueRange) {
            columnLoop(nb, cols, [&](OpBuilder &lb, Value c, Value col) {
              SmallVector<Value> pivs(cols.outerIvs);
              pivs.push_back(col);
              SmallVector<Value> elems = elementsAt(lb, ivsAt(lb, pivs, all));
              for (auto [o, e] : llvm::enumerate(elems)) {
                Value buf = buffer(o, d);
                Value acc = memref::LoadOp::create(lb, loc, buf, c);
                memref::StoreOp::create(lb, loc, combineLike(lb, o, acc, e),
                                        buf, c);
              }
            });
            return SmallVector<Value>();
          });
      return SmallVector<Value>();
    };
    buildBlockedLoop(b, loc, index(b, 0), ubs[red[r]], 1, sizes[red[r]],
                     firstBlock(r), depth, cb);
  }

  /// The buffers of depth `depth` + 1 combined into those of `depth`.
  void mergeColumns(OpBuilder &b, const Columns &cols, unsigned depth) {
    columnLoop(b, cols, [&](OpBuilder &lb, Value c, Value) {
      for (unsigned o = 0; o < inits.size(); ++o) {
        Value parent = buffer(o, depth), child = buffer(o, depth + 1);
        Value acc = memref::LoadOp::create(lb, loc, parent, c);
        Value x = memref::LoadOp::create(lb, loc, child, c);
        memref::StoreOp::create(lb, loc, combineLike(lb, o, acc, x), parent, c);
      }
    });
  }

  linalg::LinalgOp op;
  Location loc;
  Plan plan;
  MutableOperandRange inits;
  SmallVector<Value> ubs;
  SmallVector<int64_t> sizes;
  SmallVector<unsigned> par, red;
  /// Per reduction loop: the elements one of its iterations covers (the
  /// product of the sizes of the reduction loops inside it; dynamic if one
  /// is).
  SmallVector<int64_t> innerElements;
  // Columns only.
  int64_t tile = 0;
  Operation *scope = nullptr;
  std::map<std::pair<unsigned, unsigned>, Value> buffers;
};

std::string remarkFor(const Plan &plan) {
  switch (plan.kind) {
  case Kind::InOrder:
    return "reduction accumulates in registers (in order)";
  case Kind::Rows:
    if (plan.lanes)
      return "reduction accumulates in registers (" +
             std::to_string(plan.lanes) +
             " partial results per output, in blocks of 16)";
    return "reduction accumulates in registers (in blocks of 16)";
  case Kind::Columns:
    return "reduction accumulates along its innermost parallel loop (tiles "
           "of 256 columns, in blocks of 16)";
  case Kind::None:
    return "reduction stays a loop nest: " + plan.why;
  }
  llvm_unreachable("unknown kind");
}

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
      Plan plan = planFor(op);
      // The column buffers live on the stack of the enclosing function.
      if (plan.kind == Kind::Columns &&
          !op->getParentWithTrait<OpTrait::AutomaticAllocationScope>()) {
        plan.kind = Kind::None;
        plan.why = "no enclosing allocation scope for its accumulators";
      }
      if (report)
        op->emitRemark() << remarkFor(plan);
      if (plan.kind != Kind::None)
        ReductionLowering(op, std::move(plan)).lower();
    }
  }
};

} // namespace

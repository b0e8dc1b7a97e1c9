//===- GemmPlan.cpp - a contraction on buffers as one gemm ----------------===//
//
// See GemmPlan.h. Shared by the host (cblas) and device (cuBLAS) lowerings
// of contractions.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/GemmPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A rows x cols matrix with element strides (sr, sc), as cblas row-major
/// sees it: a unit column stride is CblasNoTrans, a unit row stride
/// CblasTrans; the other stride must be a valid leading dimension.
std::optional<MatrixLayout> matrixLayout(int64_t rows, int64_t cols, int64_t sr,
                                         int64_t sc) {
  if (sc == 1 || cols == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : sr;
    if (ld >= std::max<int64_t>(cols, 1))
      return MatrixLayout{false, ld};
  }
  if (sr == 1 || rows == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
    if (ld >= std::max<int64_t>(rows, 1))
      return MatrixLayout{true, ld};
  }
  return std::nullopt;
}

/// `v`, or the value an `arith.extf` in the body widens (a 16-bit input
/// multiplied in f32).
Value widened(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtFOp>())
    return ext.getIn();
  return v;
}

/// Whether the body is `out + in0 * in1` (either order of the add) in the
/// output's element type, the inputs either of that type or widened to it
/// by `arith.extf` (bf16 x bf16 -> f32), with nothing else.
bool isMulAddBody(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (!body || body->getNumArguments() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value c = body->getArgument(2);
  Value product = add.getLhs() == c ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == c) == (add.getRhs() == c))
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  Value a = body->getArgument(0), b = body->getArgument(1);
  Value x = widened(mul.getLhs()), y = widened(mul.getRhs());
  bool mulOk = (x == a && y == b) || (x == b && y == a);
  // mul, add and up to two widenings, each used once.
  unsigned numOps = 0;
  for (Operation &inner : body->without_terminator()) {
    ++numOps;
    if (!inner.hasOneUse())
      return false;
  }
  unsigned numWidenings = (x != mul.getLhs()) + (y != mul.getRhs());
  return mulOk && numOps == 2 + numWidenings;
}

/// Element stride of loop dimension `dim` in `operand` (0: not indexed).
FailureOr<int64_t> loopStride(linalg::LinalgOp op, OpOperand &operand,
                              unsigned dim) {
  auto type = cast<MemRefType>(operand.get().getType());
  auto [strides, offset] = type.getStridesAndOffset();
  AffineMap map = op.getMatchingIndexingMap(&operand);
  std::optional<unsigned> pos =
      map.getResultPosition(getAffineDimExpr(dim, op.getContext()));
  if (!pos)
    return int64_t(0);
  if (ShapedType::isDynamic(strides[*pos]))
    return failure();
  return strides[*pos];
}

/// Why `op` is not a multiply-accumulate of two strided f32 or f64 buffers
/// into a third, or nullopt when it is.
std::optional<std::string> notAGemmBody(linalg::LinalgOp op,
                                        const GemmElementTypes &types) {
  if (!op.hasPureBufferSemantics())
    return std::string("operands are not buffers");
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::string("not two inputs and one output");
  if (!isMulAddBody(op))
    return std::string("the body is not a single multiply-accumulate");
  Type elem, inElem;
  for (OpOperand &o : op->getOpOperands()) {
    auto t = dyn_cast<MemRefType>(o.get().getType());
    if (!t)
      return std::string("an operand is not a memref");
    if (!t.isStrided())
      return std::string("an operand has a non-strided layout");
  }
  inElem = cast<MemRefType>(op.getDpsInputOperand(0)->get().getType())
               .getElementType();
  elem = cast<MemRefType>(op.getDpsInitOperand(0)->get().getType())
             .getElementType();
  if (cast<MemRefType>(op.getDpsInputOperand(1)->get().getType())
          .getElementType() != inElem)
    return std::string("mixed element types");
  if (inElem != elem &&
      !(types.acceptsMixed && types.acceptsMixed(inElem, elem)))
    return std::string("mixed element types");
  if (inElem == elem && !types.accepts(elem)) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "element type " << elem << " has no " << types.missing;
    return s;
  }
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation())
      return std::string("an indexing map is not a projected permutation");
  return std::nullopt;
}

/// Several M (N, K) dimensions are one matrix dimension when every operand
/// that reads them lays them out contiguously in the same order, e.g. the
/// (batch, token) rows of a linear layer on 3-D activations. Sets the
/// collapsed `size` and each user's stride of it.
LogicalResult collapseDims(linalg::LinalgOp op, ArrayRef<int64_t> ranges,
                           ArrayRef<unsigned> group, OpOperand *ref,
                           ArrayRef<OpOperand *> users, int64_t &size,
                           SmallVector<int64_t, 3> &strides) {
  SmallVector<unsigned> order(group);
  AffineMap refMap = op.getMatchingIndexingMap(ref);
  auto pos = [&](unsigned d) {
    return *refMap.getResultPosition(getAffineDimExpr(d, op.getContext()));
  };
  llvm::sort(order, [&](unsigned x, unsigned y) { return pos(x) < pos(y); });
  size = 1;
  for (unsigned d : order)
    size *= ranges[d];
  strides.clear();
  for (OpOperand *o : users) {
    int64_t inner = 0;
    bool first = true;
    for (unsigned i = order.size(); i-- > 0;) {
      FailureOr<int64_t> st = loopStride(op, *o, order[i]);
      if (failed(st) || *st == 0)
        return failure();
      if (ranges[order[i]] == 1)
        continue;
      if (!first && *st != inner)
        return failure();
      if (first)
        strides.push_back(*st);
      first = false;
      inner = *st * ranges[order[i]];
    }
    if (first) // every dimension of the group has size 1
      strides.push_back(1);
  }
  return success();
}

} // namespace

FailureOr<GemmPlan> mlir::fsdp::planGemm(linalg::LinalgOp op,
                                         const GemmElementTypes &types,
                                         std::string &why) {
  auto fail = [&](const llvm::Twine &reason) {
    why = reason.str();
    return failure();
  };
  if (std::optional<std::string> reason = notAGemmBody(op, types))
    return fail(*reason);
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims))
    return fail("not a contraction");
  if (dims->m.empty() || dims->n.empty() || dims->k.empty())
    return fail("no M, N or K dimension");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return fail("dynamic loop bounds");

  OpOperand *a = op.getDpsInputOperand(0), *b = op.getDpsInputOperand(1),
            *c = op.getDpsInitOperand(0);
  GemmPlan p;
  SmallVector<int64_t, 3> stM, stN, stK;
  if (failed(collapseDims(op, ranges, dims->m, c, {a, c}, p.m, stM)) ||
      failed(collapseDims(op, ranges, dims->n, c, {b, c}, p.n, stN)) ||
      failed(collapseDims(op, ranges, dims->k, a, {a, b}, p.k, stK)))
    return fail("M, N or K dimensions are dynamic, broadcast or not "
                "contiguous in every operand");
  p.elementType = cast<MemRefType>(c->get().getType()).getElementType();
  p.inputType = cast<MemRefType>(a->get().getType()).getElementType();
  p.a = a->get();
  p.b = b->get();
  p.c = c->get();
  std::optional<MatrixLayout> lc = matrixLayout(p.m, p.n, stM[1], stN[1]);
  std::optional<MatrixLayout> la = matrixLayout(p.m, p.k, stM[0], stK[0]);
  std::optional<MatrixLayout> lb = matrixLayout(p.k, p.n, stK[1], stN[0]);
  if (!lc || !la || !lb)
    return fail("an operand has no unit stride in its matrix dimensions");
  if (lc->trans) {
    // C^T = B^T A^T: swap the operands and transpose each.
    std::swap(p.a, p.b);
    std::swap(p.m, p.n);
    MatrixLayout na{!lb->trans, lb->ld}, nb{!la->trans, la->ld};
    la = na;
    lb = nb;
  }
  p.la = *la;
  p.lb = *lb;
  p.ldc = lc->ld;
  for (int64_t v : {p.m, p.n, p.k, p.la.ld, p.lb.ld, p.ldc})
    if (v > std::numeric_limits<int32_t>::max())
      return fail("a size or leading dimension exceeds 32 bits");
  for (unsigned d : dims->batch) {
    FailureOr<int64_t> ba = loopStride(op, *a, d), bb = loopStride(op, *b, d),
                       bc = loopStride(op, *c, d);
    if (failed(ba) || failed(bb) || failed(bc))
      return fail("dynamic strides");
    if (lc->trans)
      std::swap(ba, bb);
    p.batchSizes.push_back(ranges[d]);
    p.batchStrides.push_back({*ba, *bb, *bc});
  }
  return p;
}

linalg::FillOp mlir::fsdp::zeroFillBefore(linalg::LinalgOp op) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (fill && fill.hasPureBufferSemantics() &&
      fill.getOutputs()[0] == op.getDpsInitOperand(0)->get() &&
      matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
    return fill;
  return nullptr;
}

bool mlir::fsdp::isMultiplyAccumulate(linalg::LinalgOp op) {
  return op.getNumDpsInputs() == 2 && op.getNumDpsInits() == 1 &&
         isMulAddBody(op);
}

bool mlir::fsdp::isContraction(linalg::LinalgOp op) {
  return isa<linalg::ContractionOpInterface>(op.getOperation()) ||
         succeeded(linalg::inferContractionDims(op));
}

/// Address of element `offset` (plus the view's own offset) of `memref`.
GemmOffsets mlir::fsdp::emitBatchLoops(OpBuilder &b, Location loc,
                                       const GemmPlan &p, unsigned numLoops) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  GemmOffsets off{zero, zero, zero};
  for (unsigned d = 0; d < numLoops; ++d) {
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value ub = arith::ConstantIndexOp::create(b, loc, p.batchSizes[d]);
    auto loop = scf::ForOp::create(b, loc, zero, ub, one);
    b.setInsertionPointToStart(loop.getBody());
    Value iv = loop.getInductionVar();
    auto advance = [&](Value offset, int64_t stride) -> Value {
      if (stride == 0)
        return offset;
      Value s = arith::ConstantIndexOp::create(b, loc, stride);
      return arith::AddIOp::create(b, loc, offset,
                                   arith::MulIOp::create(b, loc, iv, s));
    };
    off.a = advance(off.a, p.batchStrides[d][0]);
    off.b = advance(off.b, p.batchStrides[d][1]);
    off.c = advance(off.c, p.batchStrides[d][2]);
  }
  return off;
}

Value mlir::fsdp::elementPointer(OpBuilder &b, Location loc, Value memref,
                                 Value offset, int64_t bytes) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value elems =
      arith::AddIOp::create(b, loc, meta.getOffset(), offset).getResult();
  Value byteOff = arith::MulIOp::create(
      b, loc, elems, arith::ConstantIndexOp::create(b, loc, bytes));
  Value addr = arith::AddIOp::create(b, loc, base, byteOff);
  Value i64 =
      arith::IndexCastOp::create(b, loc, b.getI64Type(), addr).getResult();
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), i64);
}

/// A contiguous f32 copy of the 16-bit buffer `v` (freed by the caller).
Value mlir::fsdp::widenedF32Copy(OpBuilder &b, Location loc, Value v) {
  auto type = cast<MemRefType>(v.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(memref::DimOp::create(b, loc, v, d));
  auto wideType = MemRefType::get(type.getShape(), b.getF32Type());
  Value wide = memref::AllocOp::create(b, loc, wideType, dynamicSizes);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  linalg::GenericOp::create(
      b, loc, ValueRange{v}, ValueRange{wide}, ArrayRef<AffineMap>{id, id},
      parallel, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value x = arith::ExtFOp::create(nb, nloc, nb.getF32Type(), args[0]);
        linalg::YieldOp::create(nb, nloc, x);
      });
  return wide;
}

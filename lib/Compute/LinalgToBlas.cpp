//===- LinalgToBlas.cpp - contractions on buffers to cblas_?gemm calls ----===//
//
// A linalg op on buffers that multiplies and accumulates (`linalg.matmul`,
// `batch_matmul`, their transposed variants and `linalg.generic`
// contractions with one M, one N and one K dimension and any number of
// batch dimensions) becomes one `cblas_sgemm` / `cblas_dgemm` call per batch
// index. Operands are passed in place: a unit stride on either matrix
// dimension selects CblasNoTrans or CblasTrans, the other stride is the
// leading dimension; a column-major result swaps the operands. A zero
// `linalg.fill` of the output right before the op becomes beta = 0 (the
// gemm overwrites C instead of adding to it). Anything
// else (other element types, mixed precision, dynamic shapes or strides,
// broadcast operands, several M/N/K dimensions) stays a linalg op and is
// lowered to loops; `report` says why with a remark on the op.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLINALGTOBLAS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

// cblas.h enum values.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

RuntimeFunction gemmFunction(Type elem) {
  return elem.isF32() ? RuntimeFunction::cblas_sgemm
                      : RuntimeFunction::cblas_dgemm;
}

void emitGemm(OpBuilder &b, Location loc, func::FuncOp gemm,
              const GemmPlan &p) {
  int64_t bytes = p.elementType.getIntOrFloatBitWidth() / 8;
  // One loop per batch dimension, each advancing the three offsets.
  GemmOffsets off = emitBatchLoops(b, loc, p, p.batchSizes.size());
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  Value one =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(p.elementType, 1.0));
  Value beta = p.zeroC ? arith::ConstantOp::create(
                             b, loc, b.getFloatAttr(p.elementType, 0.0))
                       : one;
  SmallVector<Value> args = {i32(kRowMajor),
                             i32(p.la.trans ? kTrans : kNoTrans),
                             i32(p.lb.trans ? kTrans : kNoTrans),
                             i32(p.m),
                             i32(p.n),
                             i32(p.k),
                             one,
                             elementPointer(b, loc, p.a, off.a, bytes),
                             i32(p.la.ld),
                             elementPointer(b, loc, p.b, off.b, bytes),
                             i32(p.lb.ld),
                             beta,
                             elementPointer(b, loc, p.c, off.c, bytes),
                             i32(p.ldc)};
  func::CallOp::create(b, loc, gemm, args);
}

/// `op` (16-bit A and B, f32 C) on f32 copies of A and B: the same
/// products (a 16-bit product is exact in f32) as an f32 contraction, which
/// replaces `op`. The copies are freed after it.
linalg::LinalgOp widenOperands(linalg::LinalgOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value a = widenedF32Copy(b, loc, op.getDpsInputOperand(0)->get());
  Value bw = widenedF32Copy(b, loc, op.getDpsInputOperand(1)->get());
  auto wide = linalg::GenericOp::create(
      b, loc, ValueRange{a, bw}, ValueRange{op.getDpsInitOperand(0)->get()},
      op.getIndexingMapsArray(), op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value m = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        Value s = arith::AddFOp::create(nb, nloc, args[2], m);
        linalg::YieldOp::create(nb, nloc, s);
      });
  b.setInsertionPointAfter(op);
  memref::DeallocOp::create(b, loc, a);
  memref::DeallocOp::create(b, loc, bw);
  op->erase();
  return cast<linalg::LinalgOp>(wide.getOperation());
}

struct FSDPLinalgToBlasPass
    : public mlir::fsdp::impl::FSDPLinalgToBlasBase<FSDPLinalgToBlasPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    module.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    auto blasTypes = [](Type t) { return t.isF32() || t.isF64(); };
    auto widenedTypes = [](Type in, Type out) {
      return (in.isBF16() || in.isF16()) && out.isF32();
    };
    GemmElementTypes types{blasTypes, "BLAS gemm (only f32 and f64)",
                           widenedTypes};
    for (linalg::LinalgOp op : ops) {
      std::string why;
      FailureOr<GemmPlan> p = planGemm(op, types, why);
      if (failed(p)) {
        // Only ops that compute a contraction are worth a word.
        if (report && isContraction(op))
          op->emitRemark() << "contraction stays a loop: " << why;
        continue;
      }
      // A zero fill of exactly C right before: the gemm overwrites C.
      linalg::FillOp fill = zeroFillBefore(op);
      bool widened = p->inputType != p->elementType;
      if (widened) {
        // The f32 copies are contiguous: plan again on them.
        Type narrow = p->inputType;
        op = widenOperands(op);
        p = planGemm(op, types, why);
        if (failed(p)) {
          op->emitError() << "widened " << narrow
                          << " contraction is not a gemm: " << why;
          return signalPassFailure();
        }
      }
      p->zeroC = bool(fill);
      if (report)
        op->emitRemark() << "contraction becomes "
                         << getRuntimeFunctionName(gemmFunction(p->elementType))
                         << (widened ? " on f32 copies of its 16-bit operands"
                                     : "")
                         << (fill ? " (beta = 0, the zero fill removed)" : "");
      func::FuncOp gemm =
          declareRuntimeFunction(module, gemmFunction(p->elementType));
      OpBuilder b(op);
      emitGemm(b, op.getLoc(), gemm, *p);
      op->erase();
      if (fill)
        fill->erase();
    }
  }
};

} // namespace

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

#include "fsdp/Conversion/GemmPlan.h"
#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLINALGTOBLAS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

// cblas.h enum values.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

func::FuncOp declareGemm(ModuleOp module, Type elem) {
  StringRef name = elem.isF32() ? "cblas_sgemm" : "cblas_dgemm";
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Type i32 = b.getI32Type(), ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto type = b.getFunctionType(
      {i32, i32, i32, i32, i32, i32, elem, ptr, i32, ptr, i32, elem, ptr, i32},
      {});
  auto f = func::FuncOp::create(b, module.getLoc(), name, type);
  f.setPrivate();
  return f;
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

struct FSDPLinalgToBlasPass
    : public mlir::fsdp::impl::FSDPLinalgToBlasBase<FSDPLinalgToBlasPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    module.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    auto blasTypes = [](Type t) { return t.isF32() || t.isF64(); };
    GemmElementTypes types{blasTypes, "BLAS gemm (only f32 and f64)"};
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
      p->zeroC = bool(fill);
      if (report)
        op->emitRemark() << "contraction becomes "
                         << (p->elementType.isF32() ? "cblas_sgemm"
                                                    : "cblas_dgemm")
                         << (fill ? " (beta = 0, the zero fill removed)" : "");
      func::FuncOp gemm = declareGemm(module, p->elementType);
      OpBuilder b(op);
      emitGemm(b, op.getLoc(), gemm, *p);
      op->erase();
      if (fill)
        fill->erase();
    }
  }
};

} // namespace

//===- GroupedMatmulToBlas.cpp - one gemm per group of a grouped product --===//
//
// fsdp-grouped-matmul leaves one contraction per group, marked
// `fsdp.grouped_segment`, whose row count is the group's size, known only
// at run time. fsdp-linalg-to-blas plans static shapes only, so this pass
// turns each marked contraction on buffers into one `cblas_sgemm` /
// `cblas_dgemm` call with the sizes and leading dimensions read from the
// buffers (`memref.dim`, the strided metadata). 16-bit groups (bf16, f16
// operands with an f32 accumulator) run on f32 copies of the group's
// operands, as fsdp-linalg-to-blas does for the dense ones. A marked op it
// cannot pass to BLAS (another element type, a non-unit inner stride) stays
// a loop, with a remark when `report` is set.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/ExpertPasses.h"
#include "fsdp/Compute/GemmPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGROUPEDMATMULTOBLAS
#include "fsdp/Compute/ExpertPasses.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr StringLiteral kSegmentAttr = "fsdp.grouped_segment";

// cblas.h enum values.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

func::FuncOp declareGemm(ModuleOp module, Type elem) {
  return declareRuntimeFunction(module, elem.isF32()
                                            ? RuntimeFunction::cblas_sgemm
                                            : RuntimeFunction::cblas_dgemm);
}

/// Why `v` cannot be passed to a row-major gemm as it is, or "".
std::string unpassable(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type || type.getRank() != 2)
    return "an operand is not a 2-D buffer";
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides[1] != 1)
    return "an operand's rows are not contiguous";
  return "";
}

struct FSDPGroupedMatmulToBlasPass
    : public mlir::fsdp::impl::FSDPGroupedMatmulToBlasBase<
          FSDPGroupedMatmulToBlasPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::GenericOp> ops;
    module.walk([&](linalg::GenericOp op) {
      if (op->hasAttr(kSegmentAttr))
        ops.push_back(op);
    });
    for (linalg::GenericOp op : ops) {
      auto form = op->getAttrOfType<StringAttr>(kSegmentAttr);
      bool transposeLhs = form && form.getValue() == "transpose_lhs";
      if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
          op.getNumDpsInits() != 1)
        continue;
      Value a = op.getDpsInputOperand(0)->get();
      Value bMat = op.getDpsInputOperand(1)->get();
      Value c = op.getDpsInitOperand(0)->get();
      Type elem = cast<MemRefType>(c.getType()).getElementType();
      Type in = cast<MemRefType>(a.getType()).getElementType();
      // 16-bit operands with an f32 accumulator (fsdp-grouped-matmul's
      // bf16 and f16 groups): sgemm on f32 copies of the group's operands,
      // whose products are the same (a 16-bit product is exact in f32).
      bool widened = in != elem;
      std::string why;
      if (!elem.isF32() && !elem.isF64())
        why = "BLAS gemm takes only f32 and f64";
      else if (widened && !(elem.isF32() && (in.isBF16() || in.isF16())))
        why = "operands are neither the result's type nor 16 bits widened "
              "to f32";
      for (Value v : {a, bMat, c})
        if (why.empty())
          why = unpassable(v);
      if (!why.empty()) {
        if (report)
          op->emitRemark() << "group contraction stays a loop: " << why;
        continue;
      }
      OpBuilder b(op);
      Location loc = op.getLoc();
      if (widened) {
        a = widenedF32Copy(b, loc, a);
        bMat = widenedF32Copy(b, loc, bMat);
      }
      auto dim = [&](Value v, int64_t d) {
        return memref::DimOp::create(b, loc, v, d).getResult();
      };
      auto i32 = [&](Value index) {
        return arith::IndexCastOp::create(b, loc, b.getI32Type(), index)
            .getResult();
      };
      auto ld = [&](Value v) {
        auto meta = memref::ExtractStridedMetadataOp::create(b, loc, v);
        return i32(meta.getStrides()[0]);
      };
      auto constI32 = [&](int64_t v) -> Value {
        return arith::ConstantIntOp::create(b, loc, v, 32);
      };
      // rows: C[M,N] = A[M,K] B[K,N]; transpose_lhs: C[M,N] = A[K,M]^T B[K,N].
      Value m = dim(c, 0), n = dim(c, 1);
      Value k = transposeLhs ? dim(a, 0) : dim(a, 1);
      Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(elem, 1.0));
      int64_t bytes = elem.getIntOrFloatBitWidth() / 8;
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      // beta = 1: the lowering zeroed the whole result before the groups.
      SmallVector<Value> args = {constI32(kRowMajor),
                                 constI32(transposeLhs ? kTrans : kNoTrans),
                                 constI32(kNoTrans),
                                 i32(m),
                                 i32(n),
                                 i32(k),
                                 one,
                                 elementPointer(b, loc, a, zero, bytes),
                                 ld(a),
                                 elementPointer(b, loc, bMat, zero, bytes),
                                 ld(bMat),
                                 one,
                                 elementPointer(b, loc, c, zero, bytes),
                                 ld(c)};
      func::CallOp::create(b, loc, declareGemm(module, elem), args);
      if (widened) {
        memref::DeallocOp::create(b, loc, a);
        memref::DeallocOp::create(b, loc, bMat);
      }
      if (report)
        op->emitRemark() << "group contraction becomes "
                         << (elem.isF32() ? "cblas_sgemm" : "cblas_dgemm")
                         << (widened ? " on f32 copies of its 16-bit operands"
                                     : "");
      op->erase();
      ++numCalls;
    }
  }
};

} // namespace

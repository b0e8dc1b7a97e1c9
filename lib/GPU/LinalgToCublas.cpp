//===- LinalgToCublas.cpp - contractions on device buffers to cuBLAS ------===//
//
// The device counterpart of LinalgToBlas, from the same plan (GemmPlan.h):
// a contraction becomes a call to the runtime's row-major cuBLAS entry
// points `fsdprt_gpu_gemm_f32` / `fsdprt_gpu_gemm_bf16` (bf16 operands, f32
// accumulation) / `fsdprt_gpu_gemm_bf16_f32` (bf16 operands, f32 output:
// fsdp-autocast's contractions), which run on the calling rank's compute
// stream. Where the host path loops over the batch dimensions with one small
// gemm each (a BLAS without batched gemm), here the innermost batch dimensions
// whose strides nest in all three operands are the batch of one strided-batched
// call: attention's per-(batch, head) products are one call.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLINALGTOCUBLAS
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr llvm::StringLiteral kTf32AttrName = "fsdp.gpu_tf32";

RuntimeFunction gemmFunction(const GemmPlan &p) {
  if (p.inputType != p.elementType)
    return RuntimeFunction::gpu_gemm_bf16_f32;
  return p.elementType.isF32() ? RuntimeFunction::gpu_gemm_f32
                               : RuntimeFunction::gpu_gemm_bf16;
}

/// The plan's batch loops split into the ones left as host loops (outer)
/// and the innermost ones that nest in every operand, which are the batch
/// of one strided-batched call.
struct BatchSplit {
  unsigned numLoops = 0;
  int64_t batch = 1;
  std::array<int64_t, 3> strides = {0, 0, 0};
};

BatchSplit splitBatch(const GemmPlan &p) {
  BatchSplit s;
  unsigned n = p.batchSizes.size();
  s.numLoops = n;
  // Dimensions of size 1 contribute nothing; the first real one sets the
  // call's strides, each further one must advance every operand by the
  // stride times the batch so far (0 stays 0: a broadcast operand).
  while (s.numLoops > 0) {
    unsigned d = s.numLoops - 1;
    int64_t size = p.batchSizes[d];
    const std::array<int64_t, 3> &st = p.batchStrides[d];
    if (size != 1) {
      if (s.batch == 1) {
        s.strides = st;
      } else {
        for (unsigned o = 0; o < 3; ++o)
          if (st[o] != s.strides[o] * s.batch)
            return s;
      }
      s.batch *= size;
    }
    s.numLoops = d;
  }
  return s;
}

/// The host loops over the outer batch dimensions, then one call.
void emitGemm(OpBuilder &b, Location loc, func::FuncOp gemm, const GemmPlan &p,
              const BatchSplit &split) {
  int64_t bytes = p.elementType.getIntOrFloatBitWidth() / 8;
  int64_t inBytes = p.inputType.getIntOrFloatBitWidth() / 8;
  GemmOffsets off = emitBatchLoops(b, loc, p, split.numLoops);
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  auto i64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 64);
  };
  auto f32 = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  };
  SmallVector<Value> args = {i32(p.la.trans),
                             i32(p.lb.trans),
                             i64(p.m),
                             i64(p.n),
                             i64(p.k),
                             f32(1.0),
                             elementPointer(b, loc, p.a, off.a, inBytes),
                             i64(p.la.ld),
                             i64(split.strides[0]),
                             elementPointer(b, loc, p.b, off.b, inBytes),
                             i64(p.lb.ld),
                             i64(split.strides[1]),
                             f32(p.zeroC ? 0.0 : 1.0),
                             elementPointer(b, loc, p.c, off.c, bytes),
                             i64(p.ldc),
                             i64(split.strides[2]),
                             i64(split.batch)};
  func::CallOp::create(b, loc, gemm, args);
}

struct FSDPLinalgToCublasPass
    : public mlir::fsdp::impl::FSDPLinalgToCublasBase<FSDPLinalgToCublasPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tf32)
      module->setAttr(kTf32AttrName, UnitAttr::get(module.getContext()));
    SmallVector<linalg::LinalgOp> ops;
    module.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    auto cublasTypes = [](Type t) { return t.isF32() || t.isBF16(); };
    auto mixedTypes = [](Type in, Type out) {
      return in.isBF16() && out.isF32();
    };
    GemmElementTypes types{cublasTypes, "cuBLAS gemm (only f32 and bf16)",
                           mixedTypes};
    for (linalg::LinalgOp op : ops) {
      std::string why;
      FailureOr<GemmPlan> p = planGemm(op, types, why);
      if (failed(p)) {
        if (op->hasAttr(kF32AccumulationAttrName)) {
          op->emitError() << "a contraction with an f32 accumulator ("
                          << kF32AccumulationAttrName
                          << ") must become a cuBLAS gemm, but " << why;
          return signalPassFailure();
        }
        if (report && isContraction(op))
          op->emitRemark() << "contraction stays a kernel: " << why;
        continue;
      }
      linalg::FillOp fill = zeroFillBefore(op);
      p->zeroC = bool(fill);
      BatchSplit split = splitBatch(*p);
      if (report) {
        InFlightDiagnostic d = op->emitRemark()
                               << "contraction becomes "
                               << getRuntimeFunctionName(gemmFunction(*p));
        if (split.batch > 1)
          d << " (strided-batched, batch " << split.batch << ")";
        if (split.numLoops > 0)
          d << " in " << split.numLoops << " host loop(s)";
        if (fill)
          d << " (beta = 0, the zero fill removed)";
      }
      ++numGemms;
      if (split.batch > 1)
        ++numBatched;
      func::FuncOp gemm = declareRuntimeFunction(module, gemmFunction(*p));
      OpBuilder b(op);
      emitGemm(b, op.getLoc(), gemm, *p, split);
      op->erase();
      if (fill)
        fill->erase();
    }
  }
};

} // namespace

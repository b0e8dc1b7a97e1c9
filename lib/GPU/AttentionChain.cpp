//===- AttentionChain.cpp - checks shared by the attention matchers -------===//
//
// What every attention chain fsdp-gpu-fuse-attention fuses must satisfy,
// whichever frontend wrote it: Q, K, V (and dO) static, all f32 or all
// bf16, of matching shapes, a head dim with a fused kernel and a positive
// softmax scale.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::attention;

/// Checks common to every chain: the operand types and the head dim.
LogicalResult attention::checkOperands(Attention &a, Miss &m, Operation *at) {
  auto qt = dyn_cast<RankedTensorType>(a.q.getType());
  RankedTensorType kt;
  if (a.kT) {
    auto t = dyn_cast<RankedTensorType>(a.kT.getType());
    if (t && t.getRank() == 4)
      kt = RankedTensorType::get(
          {t.getDimSize(0), t.getDimSize(1), t.getDimSize(3), t.getDimSize(2)},
          t.getElementType());
  } else {
    kt = dyn_cast<RankedTensorType>(a.k.getType());
  }
  auto vt = dyn_cast<RankedTensorType>(a.v.getType());
  if (!qt || !kt || !vt || !qt.hasStaticShape() || !kt.hasStaticShape() ||
      !vt.hasStaticShape())
    return missed(m, at, "operands without a static shape");
  Type e = qt.getElementType();
  if (!(e.isF32() || e.isBF16()) || kt.getElementType() != e ||
      vt.getElementType() != e ||
      (a.dout && cast<ShapedType>(a.dout.getType()).getElementType() != e))
    return missed(m, at, "Q, K, V (and dO) are not all f32 or all bf16");
  // The kernels read the mask in the operands' element type.
  if (a.mask && cast<ShapedType>(a.mask.getType()).getElementType() != e)
    return missed(m, at, "the additive mask's element type differs from Q's");
  a.element = e;
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape();
  unsigned rank = qs.size();
  if ((rank != 3 && rank != 4) || ks.size() != rank || vt.getShape() != ks ||
      qs.drop_back(2) != ks.drop_back(2) || qs.back() != ks.back() ||
      (a.dout && cast<ShapedType>(a.dout.getType()).getShape() != qs))
    return missed(m, at, "Q, K, V shapes do not match");
  a.batch = qs[0];
  a.heads = rank == 4 ? qs[1] : 1;
  a.tq = qs[rank - 2];
  a.tk = ks[rank - 2];
  a.dim = qs.back();
  if (!llvm::is_contained({16, 32, 64, 96, 128}, a.dim))
    return missed(m, at,
                  "head dim " + Twine(a.dim) +
                      " has no fused kernel (16, 32, 64, 96, 128)");
  if (!(a.scale > 0) || !std::isfinite(a.scale))
    return missed(m, at,
                  "the softmax scale is not a positive constant (" +
                      llvm::formatv("{0}", a.scale) + ")");
  return success();
}

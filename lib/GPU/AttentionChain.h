//===- AttentionChain.h - attention chains fsdp-gpu-fuse-attention fuses -*- C++
//-*-===//
//
// The chain of ops fsdp-gpu-fuse-attention (GpuFuseAttention.cpp) replaces
// by the runtime's fused kernels, and its matchers: the generator's
// attention (AttentionMatchGenerator.cpp) and PyTorch's
// scaled_dot_product_attention (AttentionMatchTorch.cpp, with its masks in
// AttentionTorchMasks.cpp). A matcher fails silently on what is not
// attention at all, and says why (`Miss`) when a chain that looked like
// attention stays unfused.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_GPU_ATTENTIONCHAIN_H
#define FSDP_GPU_ATTENTIONCHAIN_H

#include "ChainMatching.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/SetVector.h"

#include <array>
#include <cmath>
#include <string>

namespace mlir::fsdp::attention {

/// A recognized chain.
struct Attention {
  /// Contiguous [batch, heads, T, d] tensors, or [batch, T, d] with one
  /// head; the additive mask (null: none) with its element strides.
  Value q, k, v, mask;
  std::array<int64_t, 4> maskStrides = {0, 0, 0, 0};
  int64_t batch = 0, heads = 1, tq = 0, tk = 0, dim = 0;
  bool causal = false;
  double scale = 0;
  Type element;
  /// The value O replaces, and the forward call's insertion point.
  Value out;
  Operation *forwardAt = nullptr;
  /// The backward (null dout: a forward alone): dO, the values dQ, dK and
  /// dV replace, and the backward call's insertion point.
  Value dout, dq, dk, dv;
  Operation *backwardAt = nullptr;
  /// Every op the calls replace.
  llvm::SetVector<Operation *> chain;
  /// K given as [batch, heads, d, T] (torch's `k.transpose(-2, -1)`): the
  /// call takes its transpose.
  Value kT;
  /// How the replaced values hold the kernels' [batch, heads, T, d]
  /// results: as they are, with (batch, heads) collapsed, or transposed
  /// to [batch, heads, d, T].
  enum class Form { Same, Collapsed, Transposed };
  Form outForm = Form::Same, dkForm = Form::Same, dvForm = Form::Same;
};

/// Why a chain that looked like attention stays unfused; empty: it is not
/// attention at all.
struct Miss {
  Operation *at = nullptr;
  std::string why;
};

inline FailureOr<Attention> miss(Miss &m, Operation *at, const Twine &why) {
  m.at = at;
  m.why = why.str();
  return failure();
}

inline LogicalResult missed(Miss &m, Operation *at, const Twine &why) {
  m.at = at;
  m.why = why.str();
  return failure();
}

inline bool sameScale(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::fabs(a);
}

/// Checks common to every chain: the operand types and the head dim (sets
/// the shape and the element type).
LogicalResult checkOperands(Attention &a, Miss &m, Operation *at);

/// The generator's attention (fsdp_mlir.dev.gen transformer --attention),
/// from the scores contraction `s` = Q K^T ([batch, seq, dim] operands).
FailureOr<Attention> matchGenerator(linalg::GenericOp s, Miss &m);

/// PyTorch's scaled_dot_product_attention (math backend), from the scores
/// product `s` = batch_matmul(q * c, k^T * c) on [batch * heads] collapses.
FailureOr<Attention> matchTorch(linalg::LinalgOp s, Miss &m);

/// torch's causal mask, `[T, T]`: select(arange[j] - arange[i] <= 0, 0,
/// -inf).
bool isCausalMask(Value mask);

/// Hugging Face's causal mask, `[batch, 1, T, T]` (or without the batch
/// broadcast).
bool isBroadcastCausalMask(Value mask);

/// The element strides of an additive mask read through `map` by the 4
/// loops (batch, heads, query, key); failure for a map that is not a
/// projection in loop order.
FailureOr<std::array<int64_t, 4>> maskStrides(AffineMap map,
                                              RankedTensorType type);

} // namespace mlir::fsdp::attention

#endif // FSDP_GPU_ATTENTIONCHAIN_H

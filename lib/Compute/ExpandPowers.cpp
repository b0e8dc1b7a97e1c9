//===- ExpandPowers.cpp - small integer powers as multiplications ---------===//
//
// `x ** 3` (GELU's tanh approximation, `torch.pow(x, 3.0)`) reaches the
// lowering as `math.fpowi` or `math.powf` with a constant exponent. On the
// GPU that is a call of libdevice's `__nv_powif` / `__nv_powf` (a stack
// frame, spills, dozens of instructions) for what is two multiplications;
// on the CPU `powf` is a libm call that keeps the loop around it scalar.
// This pass writes such powers as multiplications, in the order LLVM's own
// expansion of `llvm.powi` with a constant exponent uses (square and
// multiply over the exponent's bits, the result first:
// `x^3 = x * (x * x)`, a negative exponent `1 / x^|n|`), so a CPU step that
// lowered `math.fpowi` through `llvm.powi` keeps its bits, and every
// lowering computes the same value. aten computes `pow(x, 2)` and
// `pow(x, 3)` as products too.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEXPANDPOWERS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The exponent as an integer of magnitude at most `limit`, if it is a
/// constant (a scalar or a splat) with an integral value.
std::optional<int64_t> smallExponent(Value exponent, int64_t limit) {
  APInt intValue;
  if (matchPattern(exponent, m_ConstantInt(&intValue))) {
    if (intValue.getSignificantBits() > 32)
      return std::nullopt;
    int64_t n = intValue.getSExtValue();
    return std::abs(n) <= limit ? std::optional<int64_t>(n) : std::nullopt;
  }
  APFloat floatValue(0.0);
  if (matchPattern(exponent, m_ConstantFloat(&floatValue))) {
    if (!floatValue.isInteger())
      return std::nullopt;
    double d = floatValue.convertToDouble();
    if (std::abs(d) > double(limit))
      return std::nullopt;
    return int64_t(d);
  }
  return std::nullopt;
}

/// x^n by squaring and multiplying over n's bits, as LLVM expands
/// `llvm.powi` with a constant exponent (SelectionDAG's ExpandPowI).
Value power(OpBuilder &b, Location loc, Value x, int64_t n) {
  Type type = x.getType();
  auto one = [&]() -> Value {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, 1.0));
  };
  uint64_t bits = uint64_t(std::abs(n));
  Value result, square = x;
  while (bits) {
    if (bits & 1)
      result = result
                   ? arith::MulFOp::create(b, loc, result, square).getResult()
                   : square;
    bits >>= 1;
    if (bits)
      square = arith::MulFOp::create(b, loc, square, square);
  }
  if (!result)
    return one();
  if (n < 0)
    result = arith::DivFOp::create(b, loc, one(), result);
  return result;
}

struct FSDPExpandPowersPass
    : public mlir::fsdp::impl::FSDPExpandPowersBase<FSDPExpandPowersPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> powers;
    getOperation()->walk([&](Operation *op) {
      if (isa<math::FPowIOp, math::PowFOp>(op) &&
          isa<FloatType>(op->getResult(0).getType()))
        powers.push_back(op);
    });
    for (Operation *op : powers) {
      std::optional<int64_t> n =
          smallExponent(op->getOperand(1), maxExponent.getValue());
      if (!n)
        continue;
      OpBuilder b(op);
      Value value = power(b, op->getLoc(), op->getOperand(0), *n);
      op->getResult(0).replaceAllUsesWith(value);
      op->erase();
      ++numExpanded;
    }
  }
};

} // namespace

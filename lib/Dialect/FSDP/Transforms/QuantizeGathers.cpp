//===- QuantizeGathers.cpp - quantized parameter all-gathers --------------===//
//
// Rewrites the flat parameter all-gathers of expanded IR into quantized
// ones: each rank sends its shard in a compact format (FP8, MXFP8, NVFP4,
// FP8 blockwise) and dequantizes what it receives, so the unpack code after
// the gather is unchanged. By default as local steps around a plain byte
// all-gather (quantize, gather, dequantize), which bucketing and scheduling
// treat like any parameter gather; with split=false as one
// fsdp.quantized_all_gather.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPQUANTIZEGATHERS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The parameter argument a gather input is a reshaped or cast view of:
/// exactly the ops fsdp-partition and fsdp-expand-collectives put between a
/// shard and its flat all-gather.
BlockArgument parameterOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, arith::TruncFOp,
             arith::ExtFOp>(def))
      return nullptr;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return nullptr;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getBody().front())
    return nullptr;
  if (!func.getArgAttr(arg.getArgNumber(), kLayoutAttrName))
    return nullptr;
  return arg;
}

std::string parameterName(BlockArgument arg) {
  auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (auto name =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttrName))
    return name.str();
  return "argument #" + std::to_string(arg.getArgNumber());
}

struct QuantizeGathersPass
    : public mlir::fsdp::impl::FSDPQuantizeGathersBase<QuantizeGathersPass> {
  using Base::Base;

  /// The element types and phases selected (dtypes, phases).
  bool quantizeF32 = true, quantizeBF16 = true;
  DenseSet<Phase> phaseSet;

  LogicalResult initialize(MLIRContext *ctx) override {
    auto error = [&]() {
      return emitError(UnknownLoc::get(ctx)) << "fsdp-quantize-gathers: ";
    };
    for (const std::string &t : dtypes)
      if (t != "f32" && t != "bf16")
        return error() << "dtypes lists '" << t
                       << "'; only f32 and bf16 quantize";
    quantizeF32 = dtypes.empty() || llvm::is_contained(dtypes, "f32");
    quantizeBF16 = dtypes.empty() || llvm::is_contained(dtypes, "bf16");
    phaseSet.clear();
    for (const std::string &p : phases) {
      std::optional<Phase> phase = symbolizePhase(p);
      if (!phase || *phase == Phase::optimizer)
        return error() << "phases lists '" << p
                       << "'; expected forward or backward";
      phaseSet.insert(*phase);
    }
    if (phaseSet.empty())
      phaseSet = {Phase::forward, Phase::backward};
    if (minElements < 0)
      return emitError(UnknownLoc::get(ctx))
             << "fsdp-quantize-gathers: min-elements must be >= 0, got "
             << static_cast<int64_t>(minElements);
    return success();
  }

  void runOnOperation() override {
    SymbolTableCollection tables;
    reported.clear();
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp op) { gathers.push_back(op); });
    for (AllGatherOp op : gathers) {
      OriginAttr origin = op.getOrigin();
      if (!origin || !phaseSet.contains(origin.getPhase()))
        continue;
      Type elem = op.getInput().getType().getElementType();
      if (!(elem.isF32() && quantizeF32) && !(elem.isBF16() && quantizeBF16))
        continue;
      quantize(op, format, tables);
    }
  }

  /// Parameters already reported as not quantized.
  DenseSet<Value> reported;

  void quantize(AllGatherOp op, QuantFormat fmt,
                SymbolTableCollection &tables) {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    if (inType.getRank() != 1 || !inType.hasStaticShape())
      return;
    BlockArgument arg = parameterOf(op.getInput());
    if (!arg) {
      op->emitRemark() << "not quantized: the input is not a parameter shard "
                          "(e.g. the second gather of a tensor sharded on two "
                          "dims)";
      return;
    }
    auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto slotType = cast<RankedTensorType>(arg.getType());
    int64_t cols = slotType.getRank() ? slotType.getShape().back() : 1;
    int64_t rows = slotType.getRank() ? slotType.getNumElements() / cols : 1;
    if (cols == 0 || rows * cols != inType.getNumElements())
      return;
    FailureOr<int64_t> k = op.getGroupSize(tables);
    if (failed(k))
      return;
    int64_t full = *k * rows * cols;
    if (auto global = func.getArgAttrOfType<TypeAttr>(arg.getArgNumber(),
                                                      kGlobalTypeAttrName))
      full = cast<ShapedType>(global.getValue()).getNumElements();
    if (full < minElements)
      return;
    if (auto err = quantShapeError(fmt, rows, cols)) {
      // Once per parameter, not for each of its (re-)gathers.
      if (!reported.insert(arg).second)
        return;
      op->emitRemark() << "not quantized: parameter '" << parameterName(arg)
                       << "' has shard shape [" << rows << ", " << cols
                       << "]: " << *err;
      return;
    }
    OpBuilder b(op);
    if (split) {
      splitGather(b, op, fmt, rows, cols, *k);
      return;
    }
    auto q = QuantizedAllGatherOp::create(
        b, op.getLoc(), op.getResult().getType(), op.getInput(),
        op.getMeshAttr(), op.getAxes(),
        QuantFormatAttr::get(b.getContext(), fmt),
        b.getDenseI64ArrayAttr({rows, cols}));
    // Keep the origin for reports; bucketing and scheduling leave quantized
    // gathers alone.
    for (NamedAttribute a : op->getDiscardableAttrs())
      q->setAttr(a.getName(), a.getValue());
    q->setAttr(kWireBytesAttrName,
               b.getI64IntegerAttr(quantWireBytes(fmt, rows, cols)));
    op.getResult().replaceAllUsesWith(q.getResult());
    op.erase();
    ++numQuantized;
  }

  /// quant_amax + all_reduce(max) (formats scaled by the group's amax),
  /// quantize, a plain all-gather of the packets' bytes, dequantize: the
  /// bits of fsdp.quantized_all_gather, with a gather the bucketing and
  /// scheduling passes treat like any parameter gather.
  void splitGather(OpBuilder &b, AllGatherOp op, QuantFormat fmt, int64_t rows,
                   int64_t cols, int64_t k) {
    Location loc = op.getLoc();
    Value in = op.getInput();
    int64_t wire = quantWireBytes(fmt, rows, cols), gathered = 0;
    if (llvm::MulOverflow(k, wire, gathered)) {
      op->emitRemark() << "not quantized: " << k << " packets of " << wire
                       << " bytes overflow 64 bits";
      return;
    }
    auto formatAttr = QuantFormatAttr::get(b.getContext(), fmt);
    DenseI64ArrayAttr shape = b.getDenseI64ArrayAttr({rows, cols});
    Value amax;
    if (needsGroupAmax(fmt)) {
      auto amaxType = RankedTensorType::get({1}, b.getF32Type());
      Value local = QuantAmaxOp::create(b, loc, amaxType, in);
      auto reduce = AllReduceOp::create(
          b, loc, amaxType, local, op.getMeshAttr(), op.getAxes(),
          ReduceKindAttr::get(b.getContext(), ReduceKind::max));
      // No origin: not a gradient reduction. The passes may move it up
      // with the gather that needs it.
      reduce->setAttr(kMovableAttrName, b.getUnitAttr());
      amax = reduce.getResult();
    }
    auto packetType = RankedTensorType::get({wire}, b.getI8Type());
    Value packet =
        QuantizeOp::create(b, loc, packetType, in, amax, formatAttr, shape);
    auto gather = AllGatherOp::create(
        b, loc, RankedTensorType::get({gathered}, b.getI8Type()), packet,
        op.getMeshAttr(), op.getAxes(), /*members=*/DenseI64ArrayAttr());
    for (NamedAttribute a : op->getDiscardableAttrs())
      gather->setAttr(a.getName(), a.getValue());
    gather->setAttr(kWireBytesAttrName, b.getI64IntegerAttr(wire));
    Value result = DequantizeOp::create(b, loc, op.getResult().getType(),
                                        gather.getResult(), formatAttr, shape);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    ++numQuantized;
  }
};

} // namespace

//===- OptimizerIR.cpp - the building blocks of the optimizer update ------===//

#include "OptimizerIR.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace mlir::fsdp::optimizer {

Value constant(OpBuilder &b, Location loc, Type type, double v) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
}

Value convertTo(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v);
}

Value scalarOf(OpBuilder &b, Location loc, Value tensor0d) {
  return tensor::ExtractOp::create(b, loc, tensor0d, ValueRange{});
}

Value tensorOf(OpBuilder &b, Location loc, Value scalar) {
  return tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, scalar.getType()), scalar);
}

/// A linalg.generic without loops over scalar tensors (0-d, or of one
/// element): `body` maps the input values to results of `resultTypes`,
/// returned as 0-d tensors. Lowered for a GPU it is a one-thread kernel.
SmallVector<Value> scalarOp(
    OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<Type> resultTypes,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value in : inputs) {
    auto t = cast<RankedTensorType>(in.getType());
    SmallVector<AffineExpr> zeros(t.getRank(), getAffineConstantExpr(0, ctx));
    maps.push_back(AffineMap::get(0, 0, zeros, ctx));
  }
  SmallVector<Value> outs;
  SmallVector<Type> types;
  for (Type t : resultTypes) {
    outs.push_back(tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, t));
    types.push_back(RankedTensorType::get({}, t));
    maps.push_back(AffineMap::get(0, 0, {}, ctx));
  }
  auto op = linalg::GenericOp::create(
      b, loc, types, inputs, outs, maps, ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl,
                                body(nb, nl, args.take_front(inputs.size())));
      });
  return SmallVector<Value>(op.getResults());
}

/// An elementwise linalg.generic over tensors of one type; `body` maps the
/// element values (in the compute type) to the results (compute type),
/// which are rounded to the tensors' element type. `scalarInputs` (0-d
/// tensors) are read by every element; the body gets their values as they
/// are, after the elements.
SmallVector<Value> elementwise(
    OpBuilder &b, Location loc, RankedTensorType type, Type computeType,
    ValueRange inputs, ValueRange scalarInputs, unsigned numResults,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  unsigned rank = type.getRank();
  SmallVector<Value> outs;
  for (unsigned i = 0; i < numResults; ++i)
    outs.push_back(tensor::EmptyOp::create(b, loc, type.getShape(),
                                           type.getElementType()));
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(rank));
  maps.append(scalarInputs.size(), AffineMap::get(rank, 0, {}, b.getContext()));
  maps.append(numResults, b.getMultiDimIdentityMap(rank));
  SmallVector<Value> allInputs(inputs);
  llvm::append_range(allInputs, scalarInputs);
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  SmallVector<Type> resultTypes(numResults, type);
  auto op = linalg::GenericOp::create(
      b, loc, resultTypes, allInputs, outs, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        SmallVector<Value> elems;
        for (unsigned i = 0; i < inputs.size(); ++i)
          elems.push_back(convertTo(nb, nl, args[i], computeType));
        llvm::append_range(elems,
                           args.slice(inputs.size(), scalarInputs.size()));
        SmallVector<Value> results = body(nb, nl, elems);
        for (Value &r : results)
          r = convertTo(nb, nl, r, type.getElementType());
        linalg::YieldOp::create(nb, nl, results);
      });
  return SmallVector<Value>(op.getResults());
}

} // namespace mlir::fsdp::optimizer

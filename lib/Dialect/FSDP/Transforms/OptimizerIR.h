//===- OptimizerIR.h - what fsdp-optimizer builds its update from -*- C++
//-*-===//
//
// Internal to lib/Dialect/FSDP/Transforms: the parameters fsdp-optimizer
// updates, the IR building blocks of the update (OptimizerIR.cpp), and the
// global gradient norm for clipping, host and device-scalar forms
// (GradientNorm.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERIR_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERIR_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/Builders.h"

#include <string>
#include <utility>

namespace mlir::fsdp::optimizer {

/// One parameter the step updates.
struct Param {
  unsigned arg;       // its argument
  unsigned gradIndex; // the result that is its reduced gradient
  Value grad;
  LayoutAttr layout;
  std::string name;
  SmallVector<unsigned> stateArgs; // appended state arguments
};

/// A float constant of `type`.
Value constant(OpBuilder &b, Location loc, Type type, double v);

/// `v` extended or truncated to the float type `to`.
Value convertTo(OpBuilder &b, Location loc, Value v, Type to);

/// The element of a 0-d tensor, and a scalar as a 0-d tensor.
Value scalarOf(OpBuilder &b, Location loc, Value tensor0d);
Value tensorOf(OpBuilder &b, Location loc, Value scalar);

/// A linalg.generic without loops over scalar tensors (0-d, or of one
/// element): `body` maps the input values to results of `resultTypes`,
/// returned as 0-d tensors. Lowered for a GPU it is a one-thread kernel.
SmallVector<Value> scalarOp(
    OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<Type> resultTypes,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body);

/// An elementwise linalg.generic over tensors of one type; `body` maps the
/// element values (in the compute type) to the results (compute type),
/// which are rounded to the tensors' element type. `scalarInputs` (0-d
/// tensors) are read by every element; the body gets their values as they
/// are, after the elements.
SmallVector<Value> elementwise(
    OpBuilder &b, Location loc, RankedTensorType type, Type computeType,
    ValueRange inputs, ValueRange scalarInputs, unsigned numResults,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body);

/// The global gradient norm (f32) and the clipping coefficient
/// min(1, maxGradNorm / (norm + 1e-6)) (f32), as clip_grad_norm_ computes
/// them, as host scalars. Local sums of squares are added per set of axes
/// that shard their parameter and all-reduced over those axes only: a
/// parameter is counted once however many ranks hold a copy of it.
std::pair<Value, Value> clipCoefficient(OpBuilder &b, Location loc, MeshOp mesh,
                                        ArrayRef<Param> params,
                                        double maxGradNorm);

/// clipCoefficient as 0-d tensors (device scalars): each parameter's sum of
/// squares is a `tensor<1xf64>` of its own (a reduction from zero, marked
/// `fsdp.multi_tensor`); a set of sharding axes adds its sums in order and
/// all-reduces the total over those axes; one scalar op adds the sets (the
/// unsharded set's sums in order) and computes the norm and the
/// coefficient, the same values bit for bit as one running total.
std::pair<Value, Value> deviceClipCoefficient(OpBuilder &b, Location loc,
                                              MeshOp mesh,
                                              ArrayRef<Param> params,
                                              double maxGradNorm);

} // namespace mlir::fsdp::optimizer

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERIR_H

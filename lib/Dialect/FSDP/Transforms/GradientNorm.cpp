//===- GradientNorm.cpp - the global gradient norm for clipping -----------===//
//
// fsdp-optimizer's max-grad-norm: the norm of every gradient slot of the
// step, each parameter counted once however it is sharded, and the
// coefficient that clips the update (torch.nn.utils.clip_grad_norm_). Only
// this scalar crosses ranks: one all-reduce per set of sharding axes.
//
//===----------------------------------------------------------------------===//

#include "OptimizerIR.h"
#include "fsdp/Dialect/FSDP/IR/FSDPMultiTensor.h"
#include "fsdp/Layout/LayoutMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <vector>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::optimizer;
namespace lm = ::fsdp::layout;

namespace {

/// torch.nn.utils.clip_grad_norm_ adds this to the norm before dividing.
constexpr double kClipEpsilon = 1e-6;

/// sum(x^2) over a whole tensor, accumulated in f64.
Value sumOfSquares(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  Type f64 = b.getF64Type();
  auto accType = RankedTensorType::get({}, f64);
  Value init = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, f64);
  init = linalg::FillOp::create(b, loc, ValueRange{constant(b, loc, f64, 0.0)},
                                ValueRange{init})
             .getResult(0);
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 AffineMap::get(rank, 0, {}, b.getContext())};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::reduction);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{accType}, ValueRange{x}, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value v = convertTo(nb, nl, args[0], f64);
        Value sq = arith::MulFOp::create(nb, nl, v, v);
        Value sum = arith::AddFOp::create(nb, nl, args[1], sq);
        linalg::YieldOp::create(nb, nl, sum);
      });
  return scalarOf(b, loc, op.getResult(0));
}

/// `acc + sum(x^2)` over a whole tensor in f64, as a `tensor<1xf64>`;
/// `acc` null is zero. Lowered for a GPU, the reduction's initial value
/// is combined with its total last, as the host sum `acc + ss` would be.
Value accumulateSquares(OpBuilder &b, Location loc, Value x, Value acc) {
  auto type = cast<RankedTensorType>(x.getType());
  Type f64 = b.getF64Type();
  auto accType = RankedTensorType::get({1}, f64);
  if (!acc) {
    Value init = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{1}, f64);
    acc = linalg::FillOp::create(b, loc, ValueRange{constant(b, loc, f64, 0.0)},
                                 ValueRange{init})
              .getResult(0);
  }
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps = {
      b.getMultiDimIdentityMap(rank),
      AffineMap::get(rank, 0, {getAffineConstantExpr(0, b.getContext())},
                     b.getContext())};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::reduction);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{accType}, ValueRange{x}, ValueRange{acc}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value v = convertTo(nb, nl, args[0], f64);
        Value sq = arith::MulFOp::create(nb, nl, v, v);
        Value sum = arith::AddFOp::create(nb, nl, args[1], sq);
        linalg::YieldOp::create(nb, nl, sum);
      });
  return op.getResult(0);
}

/// The mesh axes that shard `p` (sorted; a tensor-parallel split counts as
/// a sharding axis here: each rank of it holds a different part,
/// tp_replicate a copy).
std::vector<int64_t> sortedShardAxes(MeshOp mesh, const Param &p) {
  std::vector<int64_t> meshShape(mesh.getAxisSizes().begin(),
                                 mesh.getAxisSizes().end());
  std::vector<int64_t> axes =
      lm::shardAxes(lm::ownershipView(p.layout.toLayout(meshShape)));
  llvm::sort(axes);
  return axes;
}

/// `((sums[0] + sums[1]) + ...)` of `tensor<1xf64>` values, as a
/// `tensor<1xf64>` (one thread on a GPU).
Value sumInOrder(OpBuilder &b, Location loc, ValueRange sums) {
  MLIRContext *ctx = b.getContext();
  Type f64 = b.getF64Type();
  AffineMap first = AffineMap::get(0, 0, {getAffineConstantExpr(0, ctx)}, ctx);
  SmallVector<AffineMap> maps(sums.size() + 1, first);
  Value init = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{1}, f64);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, sums, ValueRange{init}, maps,
      ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value total = args.front();
        for (Value sum : args.drop_front().drop_back())
          total = arith::AddFOp::create(nb, nl, total, sum);
        linalg::YieldOp::create(nb, nl, total);
      });
  return op.getResult(0);
}

/// The parameters' gradients summed per set of mesh axes that shard them
/// (sorted; a tensor-parallel split counts as a sharding axis here: each
/// rank of it holds a different part, tp_replicate a copy), sets in the
/// order of their first parameter: `add(p, sum)` adds `p` to its set's sum
/// (null for the set's first parameter).
SmallVector<std::pair<std::vector<int64_t>, Value>>
sumPerShardAxes(MeshOp mesh, ArrayRef<Param> params,
                function_ref<Value(const Param &, Value)> add) {
  SmallVector<std::pair<std::vector<int64_t>, Value>> groups;
  for (const Param &p : params) {
    std::vector<int64_t> axes = sortedShardAxes(mesh, p);
    auto it =
        llvm::find_if(groups, [&](const auto &g) { return g.first == axes; });
    if (it == groups.end())
      groups.emplace_back(axes, add(p, Value()));
    else
      it->second = add(p, it->second);
  }
  return groups;
}

/// The sum of `value` over the mesh axes `axes`.
Value allReduceOver(OpBuilder &b, Location loc, MeshOp mesh,
                    ArrayRef<int64_t> axes, Value value) {
  SmallVector<Attribute> names;
  for (int64_t a : axes)
    names.push_back(mesh.getAxisNames()[a]);
  return AllReduceOp::create(
      b, loc, value.getType(), value,
      FlatSymbolRefAttr::get(mesh.getSymNameAttr()), b.getArrayAttr(names),
      ReduceKindAttr::get(b.getContext(), ReduceKind::sum));
}

/// The norm sqrt(total) (f32) and min(1, max / (norm + 1e-6)) (f32).
std::pair<Value, Value> normAndCoefficient(OpBuilder &b, Location loc,
                                           Value total, double maxGradNorm) {
  Type f32 = b.getF32Type();
  Value norm =
      arith::TruncFOp::create(b, loc, f32, math::SqrtOp::create(b, loc, total));
  Value denom =
      arith::AddFOp::create(b, loc, norm, constant(b, loc, f32, kClipEpsilon));
  Value coef =
      arith::DivFOp::create(b, loc, constant(b, loc, f32, maxGradNorm), denom);
  coef = arith::MinimumFOp::create(b, loc, coef, constant(b, loc, f32, 1.0));
  return {norm, coef};
}

} // namespace

std::pair<Value, Value>
mlir::fsdp::optimizer::clipCoefficient(OpBuilder &b, Location loc, MeshOp mesh,
                                       ArrayRef<Param> params,
                                       double maxGradNorm) {
  Type f64 = b.getF64Type();
  auto groups =
      sumPerShardAxes(mesh, params, [&](const Param &p, Value sum) -> Value {
        Value ss = sumOfSquares(b, loc, p.grad);
        return sum ? Value(arith::AddFOp::create(b, loc, sum, ss)) : ss;
      });
  Value total;
  for (auto &[axes, sum] : groups) {
    Value part = sum;
    if (!axes.empty()) {
      auto type = RankedTensorType::get({1}, f64);
      Value buf = tensor::FromElementsOp::create(b, loc, type, part);
      Value reduced = allReduceOver(b, loc, mesh, axes, buf);
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      part = tensor::ExtractOp::create(b, loc, reduced, ValueRange{zero});
    }
    total = total ? Value(arith::AddFOp::create(b, loc, total, part)) : part;
  }
  return normAndCoefficient(b, loc, total, maxGradNorm);
}

std::pair<Value, Value> mlir::fsdp::optimizer::deviceClipCoefficient(
    OpBuilder &b, Location loc, MeshOp mesh, ArrayRef<Param> params,
    double maxGradNorm) {
  // Each parameter's sum of squares is a reduction of its own (from zero),
  // independent of the others, so a GPU launches them together
  // (fsdp-gpu-multi-tensor). They are added in the order of the host form
  // (per set of sharding axes, in parameter order), and a sum that starts
  // from zero is the same as one that starts from the previous total and
  // adds it last: the total is the same bit for bit.
  SmallVector<std::pair<std::vector<int64_t>, SmallVector<Value>>> groups;
  for (const Param &p : params) {
    std::vector<int64_t> axes = sortedShardAxes(mesh, p);
    auto it =
        llvm::find_if(groups, [&](const auto &g) { return g.first == axes; });
    if (it == groups.end()) {
      groups.emplace_back(axes, SmallVector<Value>());
      it = std::prev(groups.end());
    }
    Value squares = accumulateSquares(b, loc, p.grad, Value());
    squares.getDefiningOp()->setAttr(kMultiTensorAttrName,
                                     b.getStringAttr("sum_of_squares"));
    it->second.push_back(squares);
  }
  // A set of axes that shards its parameters sums them before its
  // all-reduce; the unsharded set's sums go to the norm directly.
  SmallVector<Value> inputs;
  SmallVector<unsigned> counts;
  for (auto &[axes, sums] : groups) {
    if (axes.empty()) {
      llvm::append_range(inputs, sums);
      counts.push_back(sums.size());
      continue;
    }
    Value total = sums.size() == 1 ? sums.front() : sumInOrder(b, loc, sums);
    inputs.push_back(allReduceOver(b, loc, mesh, axes, total));
    counts.push_back(1);
  }
  Type f32 = b.getF32Type();
  SmallVector<Value> normAndCoef = scalarOp(
      b, loc, inputs, ArrayRef<Type>{f32, f32},
      [&](OpBuilder &nb, Location nl, ValueRange v) {
        Value total;
        for (unsigned count : counts) {
          Value part = v.front();
          for (Value sum : v.take_front(count).drop_front())
            part = arith::AddFOp::create(nb, nl, part, sum);
          v = v.drop_front(count);
          total =
              total ? Value(arith::AddFOp::create(nb, nl, total, part)) : part;
        }
        auto [norm, coef] = normAndCoefficient(nb, nl, total, maxGradNorm);
        return SmallVector<Value>{norm, coef};
      });
  return {normAndCoef[0], normAndCoef[1]};
}

//===- FSDPExpertOps.cpp - sparse mixture-of-experts ops ------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"

using namespace mlir;
using namespace mlir::fsdp;

/// The shared checks of the grouped products: element types, the offsets,
/// and each pair of sizes that must agree (`what` names them).
static LogicalResult
verifyGrouped(Operation *op, ShapedType lhs, ShapedType rhs, ShapedType offsets,
              ShapedType result, int64_t rhsRank, int64_t resultRank,
              int64_t groups,
              ArrayRef<std::tuple<int64_t, int64_t, StringRef>> agree) {
  if (lhs.getRank() != 2 || rhs.getRank() != rhsRank ||
      result.getRank() != resultRank)
    return op->emitOpError()
           << "expects a 2-D lhs, a " << rhsRank << "-D rhs and a "
           << resultRank << "-D result, got " << lhs << ", " << rhs << " and "
           << result;
  Type elem = lhs.getElementType();
  if (!isa<FloatType>(elem) || rhs.getElementType() != elem ||
      result.getElementType() != elem)
    return op->emitOpError()
           << "lhs, rhs and result must have one float element type, got "
           << lhs.getElementType() << ", " << rhs.getElementType() << " and "
           << result.getElementType();
  if (offsets.getRank() != 1 ||
      !isa<IntegerType, IndexType>(offsets.getElementType()))
    return op->emitOpError()
           << "offsets must be a 1-D integer tensor, got " << offsets;
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (mismatch(offsets.getDimSize(0), groups))
    return op->emitOpError() << "has " << groups << " groups but "
                             << offsets.getDimSize(0) << " offsets";
  for (auto [a, b, what] : agree)
    if (mismatch(a, b))
      return op->emitOpError() << what << " differ: " << a << " and " << b;
  return success();
}

LogicalResult GroupedMatmulOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  auto result = getResult().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 3 || result.getRank() != 2)
    return verifyGrouped(*this, lhs, rhs, getOffsets().getType(), result, 3, 2,
                         ShapedType::kDynamic, {});
  return verifyGrouped(
      *this, lhs, rhs, getOffsets().getType(), result, 3, 2, rhs.getDimSize(0),
      {{lhs.getDimSize(1), rhs.getDimSize(1),
        "lhs columns and rhs rows (the contracted size)"},
       {lhs.getDimSize(0), result.getDimSize(0), "lhs and result rows"},
       {rhs.getDimSize(2), result.getDimSize(1), "rhs and result columns"}});
}

LogicalResult GroupedMatmulTransposeLhsOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  auto result = getResult().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || result.getRank() != 3)
    return verifyGrouped(*this, lhs, rhs, getOffsets().getType(), result, 2, 3,
                         ShapedType::kDynamic, {});
  return verifyGrouped(
      *this, lhs, rhs, getOffsets().getType(), result, 2, 3,
      result.getDimSize(0),
      {{lhs.getDimSize(0), rhs.getDimSize(0),
        "lhs and rhs rows (the contracted size)"},
       {lhs.getDimSize(1), result.getDimSize(1), "lhs columns and result rows"},
       {rhs.getDimSize(1), result.getDimSize(2),
        "rhs columns and result columns"}});
}

LogicalResult BufferGroupedMatmulOp::verify() {
  auto lhs = cast<ShapedType>(getLhs().getType());
  auto rhs = cast<ShapedType>(getRhs().getType());
  auto offsets = cast<ShapedType>(getOffsets().getType());
  auto out = cast<ShapedType>(getOutput().getType());
  if (!getTransposeLhs()) {
    if (lhs.getRank() != 2 || rhs.getRank() != 3 || out.getRank() != 2)
      return verifyGrouped(*this, lhs, rhs, offsets, out, 3, 2,
                           ShapedType::kDynamic, {});
    return verifyGrouped(
        *this, lhs, rhs, offsets, out, 3, 2, rhs.getDimSize(0),
        {{lhs.getDimSize(1), rhs.getDimSize(1),
          "lhs columns and rhs rows (the contracted size)"},
         {lhs.getDimSize(0), out.getDimSize(0), "lhs and output rows"},
         {rhs.getDimSize(2), out.getDimSize(1), "rhs and output columns"}});
  }
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || out.getRank() != 3)
    return verifyGrouped(*this, lhs, rhs, offsets, out, 2, 3,
                         ShapedType::kDynamic, {});
  return verifyGrouped(
      *this, lhs, rhs, offsets, out, 2, 3, out.getDimSize(0),
      {{lhs.getDimSize(0), rhs.getDimSize(0),
        "lhs and rhs rows (the contracted size)"},
       {lhs.getDimSize(1), out.getDimSize(1), "lhs columns and output rows"},
       {rhs.getDimSize(1), out.getDimSize(2),
        "rhs columns and output columns"}});
}

/// The shared checks of the topk ops: a float or integer input of rank >= 1,
/// an i64 result of the same rank and leading sizes, at most `n` indices
/// per row (all of them with `sort`).
static LogicalResult verifyTopk(Operation *op, ShapedType input,
                                ShapedType result, StringRef resultName,
                                bool sort) {
  if (input.getRank() < 1 || result.getRank() != input.getRank())
    return op->emitOpError()
           << "expects an input of rank >= 1 and a " << resultName
           << " of the same rank, got " << input << " and " << result;
  Type elem = input.getElementType();
  if (!isa<FloatType>(elem) && !elem.isInteger(32) && !elem.isInteger(64))
    return op->emitOpError()
           << "input must have a float, i32 or i64 element type, got " << elem;
  if (!result.getElementType().isInteger(64))
    return op->emitOpError() << resultName << " must hold i64 indices, got "
                             << result.getElementType();
  int64_t rank = input.getRank();
  for (int64_t d = 0; d + 1 < rank; ++d) {
    int64_t a = input.getDimSize(d), b = result.getDimSize(d);
    if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b)
      return op->emitOpError()
             << "input and " << resultName << " differ in dim " << d << ": "
             << a << " and " << b;
  }
  int64_t n = input.getDimSize(rank - 1), k = result.getDimSize(rank - 1);
  if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(k) && k > n)
    return op->emitOpError() << "picks " << k << " indices from rows of " << n;
  if (sort && !ShapedType::isDynamic(n) && !ShapedType::isDynamic(k) && k != n)
    return op->emitOpError() << "with `sort` orders every index of a row: " << k
                             << " indices from rows of " << n;
  return success();
}

LogicalResult TopkIndicesOp::verify() {
  auto input = getInput().getType(), result = getResult().getType();
  if (failed(verifyTopk(*this, input, result, "result", getSort())))
    return failure();
  if (getStable() && getStable().getType() != result)
    return emitOpError() << "stable must have the result's type " << result
                         << ", got " << getStable().getType();
  return success();
}

LogicalResult BufferTopkIndicesOp::verify() {
  return verifyTopk(*this, cast<ShapedType>(getInput().getType()),
                    cast<ShapedType>(getOutput().getType()), "output",
                    getSort());
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.cpp.inc"

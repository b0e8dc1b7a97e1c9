//===- FoldSelfCopies.cpp - copies of a buffer onto itself ----------------===//
//
// A member of a bucket written in place by its producer (fsdp-pack-in-place)
// bufferizes to a `memref.copy` from the slot, seen through the producer's
// reshapes, to the same slot seen as the bucket's slice: the same bytes in
// the same order. Canonicalization erases a copy only when source and
// target are one value, which the reshapes prevent. This pass erases a
// copy whose source and target are views of the same buffer with static,
// contiguous layouts at the same offset and with as many elements.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFOLDSELFCOPIES
#include "fsdp/Memory/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The buffer `v` is a view of (through view-like ops).
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// The offset of a static, contiguous (row-major) layout, if it is one.
std::optional<int64_t> contiguousOffset(MemRefType type) {
  if (!type.hasStaticShape())
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset))
    return std::nullopt;
  int64_t expected = 1;
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    if (type.getDimSize(d) != 1 && strides[d] != expected)
      return std::nullopt;
    expected *= type.getDimSize(d);
  }
  return offset;
}

bool isSelfCopy(memref::CopyOp copy) {
  auto source = cast<MemRefType>(copy.getSource().getType());
  auto target = cast<MemRefType>(copy.getTarget().getType());
  if (source.getElementType() != target.getElementType() ||
      rootOf(copy.getSource()) != rootOf(copy.getTarget()))
    return false;
  std::optional<int64_t> from = contiguousOffset(source);
  std::optional<int64_t> to = contiguousOffset(target);
  return from && to && *from == *to &&
         source.getNumElements() == target.getNumElements();
}

struct FSDPFoldSelfCopiesPass
    : public mlir::fsdp::impl::FSDPFoldSelfCopiesBase<FSDPFoldSelfCopiesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      if (isSelfCopy(copy))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies)
      copy.erase();
  }
};

} // namespace

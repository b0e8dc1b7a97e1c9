//===- BufferViews.h - the buffer a view looks into ------------*- C++ -*-===//
//
// What the buffer passes (fsdp-early-dealloc, fsdp-assign-buffers) share
// about views: a buffer's lifetime is its root allocation's, whichever
// view of it an op uses; and the one way lowered code sees memory a runtime
// call returns (the rank's arena, the GPU scratch buffer) as a buffer.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_BUFFERVIEWS_H
#define FSDP_MEMORY_BUFFERVIEWS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::fsdp {

/// The buffer `v` is a view of (through view-like ops), or `v` itself.
inline Value viewRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view || !isa<BaseMemRefType>(view.getViewSource().getType()))
      break;
    v = view.getViewSource();
  }
  return v;
}

/// `ptr` (an !llvm.ptr a runtime call returned) as a `memref<bytes x i8>`:
/// a memref descriptor of the pointer, cast back to the memref, which the
/// LLVM lowering folds away.
Value pointerAsBuffer(OpBuilder &b, Location loc, Value ptr, int64_t bytes);

} // namespace mlir::fsdp

#endif

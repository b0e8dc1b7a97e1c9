//===- BufferViews.h - the buffer a view looks into ------------*- C++ -*-===//
//
// What the buffer passes (fsdp-early-dealloc, fsdp-assign-buffers) share
// about views: a buffer's lifetime is its root allocation's, whichever
// view of it an op uses.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_BUFFERVIEWS_H
#define FSDP_MEMORY_BUFFERVIEWS_H

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

} // namespace mlir::fsdp

#endif

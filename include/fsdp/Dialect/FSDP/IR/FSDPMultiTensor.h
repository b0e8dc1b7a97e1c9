//===- FSDPMultiTensor.h - the mark of multi-tensor ops ---------*- C++ -*-===//
//
// The attribute fsdp-optimizer puts on its per-parameter ops and
// fsdp-gpu-multi-tensor reads (docs/GPU.md, "Multi-tensor launches").
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPMULTITENSOR_H
#define FSDP_DIALECT_FSDP_IR_FSDPMULTITENSOR_H

#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp {

/// String attribute on a linalg op that is one of many independent
/// per-tensor ops of one kind (the optimizer's updates, its sums of
/// squares): under compute=gpu, consecutive ops of the same kind are
/// launched together (fsdp-gpu-multi-tensor). On a kernel function, the
/// kind of the ops it launches together.
inline constexpr llvm::StringLiteral kMultiTensorAttrName = "fsdp.multi_tensor";

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDPMULTITENSOR_H

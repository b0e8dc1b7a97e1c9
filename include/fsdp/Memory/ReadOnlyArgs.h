//===- ReadOnlyArgs.h - the arguments a step never writes --------*- C++
//-*-===//
//
// fsdp-mark-read-only-args marks the memref arguments of a bufferized step
// that no operation may write with `fsdp.read_only`; convert-fsdp-to-runtime
// records them per entry in the module attribute `fsdp.read_only_args`
// (entry name -> the argument indices), which the manifest writer turns
// into each port's `read_only`.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_READONLYARGS_H
#define FSDP_MEMORY_READONLYARGS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp {

/// Unit attribute on a bufferized step's memref argument that the step
/// never writes.
inline constexpr llvm::StringLiteral kReadOnlyAttrName = "fsdp.read_only";
/// Module attribute: entry name -> `array<i64>` of its read-only arguments.
inline constexpr llvm::StringLiteral kReadOnlyArgsAttrName =
    "fsdp.read_only_args";

} // namespace mlir::fsdp

#endif

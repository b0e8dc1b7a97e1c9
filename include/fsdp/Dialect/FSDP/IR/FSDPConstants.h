//===- FSDPConstants.h - names of the fsdp discardable attributes -*- C++
//-*-===//
//
// Every discardable attribute the fsdp dialect, its passes and the runner
// read or write, in one place. Attributes that are part of an op's own
// definition (its ODS arguments) are not listed: they have accessors.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPCONSTANTS_H
#define FSDP_DIALECT_FSDP_IR_FSDPCONSTANTS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp {

/// Prefix of every fsdp discardable attribute.
inline constexpr llvm::StringLiteral kAttrPrefix = "fsdp.";

//===----------------------------------------------------------------------===//
// Function arguments and results (written by the user or fsdp-partition)
//===----------------------------------------------------------------------===//

/// `#fsdp.layout` of a parameter argument, gradient or accumulator.
inline constexpr llvm::StringLiteral kLayoutAttrName = "fsdp.layout";
/// Unit attribute on the result that is the loss.
inline constexpr llvm::StringLiteral kLossAttrName = "fsdp.loss";
/// Index of the parameter argument a result is the gradient of.
inline constexpr llvm::StringLiteral kGradOfAttrName = "fsdp.grad_of";
/// File stem of an argument or result (the runner's `<name>.npy`).
inline constexpr llvm::StringLiteral kNameAttrName = "fsdp.name";
/// FSDP unit (wrapping group) of a parameter argument.
inline constexpr llvm::StringLiteral kUnitAttrName = "fsdp.unit";
/// Full (unsharded) type of a partitioned argument or result.
inline constexpr llvm::StringLiteral kGlobalTypeAttrName = "fsdp.global_type";
/// Unit attribute on a function that fsdp-tensor-parallel has partitioned:
/// its arguments under `tp_shard<d>` have TP-local types.
inline constexpr llvm::StringLiteral kTPLocalAttrName = "fsdp.tp_local";
/// Unit attribute on a parameter argument that no result is the gradient of
/// (FSDP2's requires_grad=False; docs/PASSES.md, input contract). Optional
/// where the argument has an fsdp.layout; --fsdp-import-shard needs it to
/// tell a frozen parameter from a sharded data argument.
inline constexpr llvm::StringLiteral kFrozenAttrName = "fsdp.frozen";
/// Unit attribute on a gradient accumulation argument.
inline constexpr llvm::StringLiteral kAccumulatorAttrName = "fsdp.accumulator";

/// Role of an optimizer input argument: "lr" or "step" (fsdp-optimizer).
inline constexpr llvm::StringLiteral kOptimAttrName = "fsdp.optim";
/// Index of the parameter argument an optimizer state argument belongs to.
inline constexpr llvm::StringLiteral kStateOfAttrName = "fsdp.state_of";
/// Index of the argument a result is the next value of (fed back by a
/// training loop).
inline constexpr llvm::StringLiteral kUpdateOfAttrName = "fsdp.update_of";

//===----------------------------------------------------------------------===//
// Operations (written by the passes)
//===----------------------------------------------------------------------===//

/// `#fsdp.origin` of a flat collective that the fsdp passes created: the
/// phase and unit it belongs to. Only collectives with an origin are moved,
/// bucketed, scheduled or quantized.
inline constexpr llvm::StringLiteral kOriginAttrName = "fsdp.origin";
/// Number of collectives a bucket fused (i64).
inline constexpr llvm::StringLiteral kBucketSizeAttrName = "fsdp.bucket_size";
/// Bytes one rank sends in a quantized all-gather (i64).
inline constexpr llvm::StringLiteral kWireBytesAttrName = "fsdp.wire_bytes";
/// FSDP unit whose forward an op recomputes in the backward (string), set
/// by fsdp-recompute on every op it clones.
inline constexpr llvm::StringLiteral kRecomputeAttrName = "fsdp.recompute";
/// Unit attribute on a blocking collective without an origin (the amax
/// all-reduce of a quantized gather): the fsdp passes may move it earlier,
/// with the gather whose input it computes. Every rank moves it alike.
inline constexpr llvm::StringLiteral kMovableAttrName = "fsdp.movable";

//===----------------------------------------------------------------------===//
// Functions (written by the compute lowering)
//===----------------------------------------------------------------------===//

/// Unit attribute on a function fsdp-outline-segments outlined.
inline constexpr llvm::StringLiteral kSegmentAttrName = "fsdp.segment";
/// Unit attribute on a function fsdp-outline-kernels outlined (fsdp-run
/// compiles these at -O2).
inline constexpr llvm::StringLiteral kKernelAttrName = "fsdp.kernel";

//===----------------------------------------------------------------------===//
// Modules (written by convert-fsdp-to-runtime, read by fsdp-run)
//===----------------------------------------------------------------------===//

/// Dictionary from step name to its `#fsdp.signature` (FSDPSignature.h).
inline constexpr llvm::StringLiteral kSignaturesAttrName = "fsdp.signatures";
/// Dictionary from step name to its `#fsdp.memory_plan` (written by
/// fsdp-assign-buffers).
inline constexpr llvm::StringLiteral kMemoryPlansAttrName = "fsdp.memory_plans";

} // namespace mlir::fsdp

#endif

//===- BufferPlan.h - A function's buffer plan ------------------*- C++ -*-===//
//
// The plan `fsdp-assign-buffers` applies: one arena per planned group of
// functions (BufferPlan.cpp), the per-function record, what stays outside
// the arena (OutsideBytes.cpp), and the out-parameters of a callee planned
// on its own (OutParams.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_BUFFERPLAN_H
#define FSDP_MEMORY_BUFFERPLAN_H

#include "BufferGroups.h"

#include "mlir/Support/LLVM.h"

namespace mlir::fsdp {

/// What the pass decided for one function.
struct FunctionPlan {
  int64_t arena = 0; ///< bytes of its arena (0: nothing planned)
  /// Peak bytes of the static buffers outside the arena while it runs, and
  /// those still allocated when it returns (its results).
  int64_t outsidePeak = 0, outsideHeld = 0;
  /// Static allocations of its own left outside the arena.
  int64_t outsideBuffers = 0;
  int64_t buffers = 0;
  SmallVector<int64_t> largest;
  /// Per result: the outside bytes it hands the caller (0: none).
  SmallVector<int64_t> resultBytes;
  bool takesArena = false; ///< its arena is its last argument
};

using FunctionPlans = llvm::DenseMap<func::FuncOp, FunctionPlan>;

/// The options of fsdp-assign-buffers (include/fsdp/Memory/Passes.td).
struct ArenaOptions {
  int64_t alignment = 64; ///< a power of two, checked by the pass
  bool poison = true;
  bool entryResults = true;
};

/// What applying the plan did: the pass's statistics.
struct ArenaCounts {
  int64_t planned = 0, outParams = 0, repeatedCalls = 0, outside = 0;
};

/// Packs the static buffers of every planned group of `module` into one
/// arena per group, rewrites their allocations into views of it, and records
/// each entry's plan in the module's `fsdp.memory_plans`. Fails after a
/// located error when a function cannot take its arena or offsets.
LogicalResult applyBufferPlan(ModuleOp module, const ArenaOptions &options,
                              ArenaCounts &counts);

/// Records in `plan` the peak bytes of static buffers outside the arena
/// while `func` runs (its callees' included, from `plans`) and those it
/// returns, and how many of its own allocations stay outside. `inArena`: the
/// allocations the arena takes.
void accountOutside(func::FuncOp func,
                    const llvm::DenseSet<Operation *> &inArena,
                    BufferGroups &groups, const FunctionPlans &plans,
                    FunctionPlan &plan);

/// Turns each result of callee `func` that is a statically shaped
/// allocation of its body (through views taking no other operand), shared
/// by no other result, into an argument that each of `callsOfFunc`
/// allocates before the call; `callsOfFunc` becomes the rewritten calls.
/// Returns the number of out-parameters passed over all calls.
FailureOr<int64_t> resultsToOutParams(func::FuncOp func,
                                      SmallVector<func::CallOp> &callsOfFunc);

} // namespace mlir::fsdp

#endif // FSDP_MEMORY_BUFFERPLAN_H

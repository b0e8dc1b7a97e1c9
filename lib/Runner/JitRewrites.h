//===- JitRewrites.h - LLVM IR rewrites before the JIT compiles -*- C++ -*-===//
//
// The glue of a lowered step (the step, its segments and the C interface
// wrappers) is compiled at -O0, whose code generation is linear in the size
// of a function only while FastISel selects every instruction: an aggregate
// value, a call returning one or a very long block sends a whole block to
// SelectionDAG. These rewrites turn the translated module into that form
// without changing what it computes. Each is unit-tested
// (unittests/Runner/JitRewritesTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_JITREWRITES_H
#define FSDP_RUNNER_JITREWRITES_H

#include "llvm/ADT/StringSet.h"

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace fsdp::run {

/// For each C interface function `_mlir_ciface_<f>`, the packed wrapper
/// `_mlir__mlir_ciface_<f>(void **args)` the runner calls (as the
/// ExecutionEngine defines it: args[i] points to argument i, the result
/// is stored through args[n]).
void addPackedWrappers(llvm::Module &m);

/// Splits the basic blocks of `f` into pieces of at most `limit`
/// instructions (allocas and phis stay in their block).
void splitLongBlocks(llvm::Function &f, unsigned limit);

/// Rewrites each function of `names` that returns an aggregate, and whose
/// every use is a direct call, to store it through a new first pointer
/// argument instead, and each call to read the fields it uses from that
/// memory.
void returnThroughMemory(llvm::Module &m, const llvm::StringSet<> &names);

/// Inlines each entry `<f>` into its C interface wrapper `_mlir_ciface_<f>`
/// when the wrapper is its only caller, by moving its body (no copy).
void inlineEntries(llvm::Module &m);

/// Replaces the loads and stores of aggregates in `f` (descriptors and
/// result structs) by loads and stores of their fields, and extractvalues
/// of insertvalue chains by the inserted values.
void scalarizeAggregates(llvm::Function &f);

/// The functions gatherConstructors defines.
inline constexpr const char kConstructorsFunction[] =
    "fsdp_step_run_constructors";
inline constexpr const char kDestructorsFunction[] =
    "fsdp_step_run_destructors";

/// Replaces `llvm.global_ctors` and `llvm.global_dtors` (the GPU lowering's
/// module loads and unloads) by the functions kConstructorsFunction (in
/// ascending priority) and kDestructorsFunction (descending), which the
/// JIT calls: objects linked in memory have no loader to run their
/// `.init_array`. A module without them gets no function.
void gatherConstructors(llvm::Module &m);

} // namespace fsdp::run

#endif

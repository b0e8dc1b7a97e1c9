//===- BufferGroups.h - Lifetimes and groups of buffers ---------*- C++ -*-===//
//
// The analysis behind `fsdp-assign-buffers`: which functions are planned
// together (a function and the segments it calls, as one program), the
// program order of such a group, and the live interval of every buffer the
// group's arena can take. The pass (AssignBuffers.cpp) packs the intervals
// (fsdp/Memory/ArenaPacking.h) and rewrites the allocations into views.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MEMORY_BUFFERGROUPS_H
#define FSDP_MEMORY_BUFFERGROUPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <tuple>

namespace mlir::fsdp {

/// The bytes of a statically shaped, identity-layout memref in the default
/// memory space, or nullopt.
std::optional<int64_t> staticBytes(MemRefType type, const DataLayout &layout);

/// One planned buffer: its allocation, its free, its live interval
/// [allocation, free) in the program order of its group, and its offset.
struct PlannedBuffer {
  memref::AllocOp alloc;
  memref::DeallocOp dealloc;
  int64_t bytes = 0, offset = 0;
  int64_t start = 0, end = 0;
  /// The call of the repeated function this is a buffer of, or null.
  Operation *instance = nullptr;
};

/// The group of `root` in program order: the ops of its block, each call
/// of a member or repeated function replaced by the callee's block
/// (recursively), each such call an instance of the callee. Records the
/// candidate buffers (static allocations of these blocks) per instance,
/// every free of these blocks, and the frees nested in regions.
struct GroupTimeline {
  SmallVector<func::FuncOp> functions; ///< root first, callers first
  SmallVector<PlannedBuffer> candidates;
  /// (allocation, instance: the repeated function's call, or null)
  llvm::DenseMap<std::pair<Operation *, Operation *>, unsigned> candidateOf;
  SmallVector<std::tuple<memref::DeallocOp, int64_t, Operation *>> frees;
  SmallVector<std::pair<memref::DeallocOp, Operation *>> nestedFrees;
  /// Candidates an entry returns: live to its return.
  SmallVector<unsigned> results;
  int64_t position = 0;
};
/// The functions of a module by how their buffers are planned: who calls
/// whom, which callees are planned with their callers (members and
/// repeated functions), and the program order of a group.
class BufferGroups {
public:
  /// An entry (nobody calls it) gets its arena from the runtime; a callee
  /// (private, called only by `func.call`) is planned with its callers or
  /// on its own; any other function is not planned.
  enum class Role { Entry, Callee, Other };

  /// Collects the module's calls and groups; `alignment` is the arena's:
  /// an allocation aligned beyond it stays outside.
  BufferGroups(ModuleOp module, int64_t alignment);

  func::FuncOp calleeOf(func::CallOp call);
  Role roleOf(func::FuncOp func);
  /// Functions in an order where every callee comes before its callers.
  SmallVector<func::FuncOp> calleesFirst(ModuleOp module);
  /// The function whose top-level block holds `call`, or null.
  static func::FuncOp topLevelCaller(func::CallOp call);
  /// Whether `f` is planned in its callers' groups (a member or repeated).
  bool planInCaller(func::FuncOp f);
  /// The callee of `call` when the call is planned in its caller's group.
  func::FuncOp inlinedCallee(func::CallOp call);

  /// Appends the group of `func` (one `instance` of it) to `t`.
  void walkGroup(func::FuncOp func, Operation *instance, GroupTimeline &t);
  /// The allocation of the group that `v` of `instance` is, and its
  /// instance, or nulls.
  std::pair<Operation *, Operation *> allocationOf(Value v,
                                                   Operation *instance);
  /// The buffers the arena takes, with their live intervals.
  SmallVector<PlannedBuffer> collectPlanned(GroupTimeline &t);

  /// Every function's direct calls (kept current as calls are rewritten).
  llvm::DenseMap<func::FuncOp, SmallVector<func::CallOp>> callsTo;
  /// Functions planned with their only caller's group, and that call.
  llvm::DenseMap<func::FuncOp, func::CallOp> memberCall;
  /// Functions planned in each of their calls, and those calls.
  llvm::DenseMap<func::FuncOp, SmallVector<func::CallOp>> repeated;

private:
  void collectUses(ModuleOp module);
  void collectMembers();

  int64_t alignment;
  /// The module's symbols: a lookup in the module itself would scan it
  /// (quadratic in its size).
  SymbolTable symbols;
  llvm::DenseSet<func::FuncOp> otherUses; ///< used other than by func.call
};

} // namespace mlir::fsdp

#endif // FSDP_MEMORY_BUFFERGROUPS_H

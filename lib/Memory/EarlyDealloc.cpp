//===- EarlyDealloc.cpp - free each buffer after its last use -------------===//
//
// Upstream ownership-based buffer deallocation frees the buffers of a block
// in one `bufferization.dealloc` at its end, with run-time checks for the
// memrefs that may alias each other or a retained value (a result). In an
// outlined step that op holds every gathered parameter, activation and
// gradient the step allocates or gets from a segment call: all of them
// would stay allocated until the step returns.
//
// This pass runs before `bufferization-lower-deallocations` and frees each
// allocation whose aliases it can follow with a plain `memref.dealloc`
// right after the last use of any of them. An allocation is the buffer of a
// `memref.alloc` or `bufferization.clone`, or the results of a call to a
// function that returns only buffers it allocates itself (the segments:
// ownership-based deallocation copies a result that would alias an
// argument, so such a call's results never alias its arguments, and two
// results that share one buffer form one allocation, freed once).
//
// Why not upstream's buffer-deallocation-simplification: it compares every
// pair of memrefs of a dealloc op (the step's last one holds every buffer,
// quadratic: 326 s at 300 parameters). Here each allocation's aliases are
// found by walking its uses once (views, collective requests), so the work
// is linear in the size of the function.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/BufferViews.h"
#include "fsdp/Memory/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEARLYDEALLOC
#include "fsdp/Memory/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// What the pass knows about a function's buffer results.
struct CalleeInfo {
  /// Every buffer result is (a view of) a buffer the function allocates:
  /// no result aliases an argument.
  bool fresh = false;
  /// Per result: the index of the first result with the same buffer (a
  /// result's own index when no earlier one shares it); -1 for non-buffers.
  SmallVector<int> allocation;
  /// The results of each buffer that more than one result holds.
  llvm::DenseMap<int, SmallVector<unsigned>> shared;
};

CalleeInfo analyzeCallee(func::FuncOp func) {
  CalleeInfo info;
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return info;
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (!ret)
    return info;
  llvm::DenseMap<Value, int> first;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (!isa<BaseMemRefType>(v.getType())) {
      info.allocation.push_back(-1);
      continue;
    }
    Value root = viewRoot(v);
    if (!root.getDefiningOp<memref::AllocOp>() &&
        !root.getDefiningOp<bufferization::CloneOp>())
      return info;
    info.allocation.push_back(first.try_emplace(root, i).first->second);
  }
  for (auto [i, a] : llvm::enumerate(info.allocation))
    if (a >= 0 && a != static_cast<int>(i)) {
      SmallVector<unsigned> &results = info.shared[a];
      if (results.empty())
        results.push_back(a);
      results.push_back(i);
    }
  info.fresh = true;
  return info;
}

/// One allocation: the op that defines it and, for a call, which of the
/// call's result groups.
using AllocationKey = std::pair<Operation *, int>;

struct FSDPEarlyDeallocPass
    : public mlir::fsdp::impl::FSDPEarlyDeallocBase<FSDPEarlyDeallocPass> {
  llvm::DenseMap<StringAttr, CalleeInfo> callees;

  const CalleeInfo *calleeOf(func::CallOp call) {
    auto it = callees.find(call.getCalleeAttr().getAttr());
    return it == callees.end() ? nullptr : &it->second;
  }

  /// The allocation `v` is (a view of), if the pass knows it.
  std::optional<AllocationKey> allocationOf(Value v) {
    Value root = viewRoot(v);
    Operation *def = root.getDefiningOp();
    if (isa_and_nonnull<memref::AllocOp, bufferization::CloneOp>(def))
      return AllocationKey{def, 0};
    if (auto call = dyn_cast_or_null<func::CallOp>(def)) {
      const CalleeInfo *info = calleeOf(call);
      unsigned i = cast<OpResult>(root).getResultNumber();
      if (info && info->fresh && i < info->allocation.size() &&
          info->allocation[i] >= 0)
        return AllocationKey{def, info->allocation[i]};
    }
    return std::nullopt;
  }

  /// The values that hold an allocation itself (not views of it).
  SmallVector<Value> membersOf(AllocationKey key) {
    if (!isa<func::CallOp>(key.first))
      return {key.first->getResult(0)};
    const CalleeInfo *info = calleeOf(cast<func::CallOp>(key.first));
    auto it = info->shared.find(key.second);
    if (it == info->shared.end())
      return {key.first->getResult(key.second)};
    return llvm::map_to_vector(it->second, [&](unsigned i) -> Value {
      return key.first->getResult(i);
    });
  }

  /// How an allocation is used, seen from the dealloc op `dealloc`.
  struct Uses {
    SmallVector<Operation *> users; ///< ops of the block that use it
    bool escapes = false;           ///< a use the pass cannot follow
    bool retained = false;          ///< an alias is a retained value
  };

  Uses usesOf(ArrayRef<Value> members, Operation *dealloc) {
    Uses uses;
    Block &block = *dealloc->getBlock();
    auto addUser = [&](Operation *user) {
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        uses.escapes = true;
      else
        uses.users.push_back(top);
    };
    SmallVector<Value> worklist(members.begin(), members.end());
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (user == dealloc) {
          if (auto d = dyn_cast<bufferization::DeallocOp>(user))
            uses.retained |= use.getOperandNumber() >=
                             d.getMemrefs().size() + d.getConditions().size();
          continue;
        }
        if (isa<memref::DeallocOp, bufferization::DeallocOp,
                memref::ExtractAlignedPointerAsIndexOp>(user) ||
            user->hasTrait<OpTrait::IsTerminator>()) {
          // Freed elsewhere, returned, yielded or its address taken.
          uses.escapes = true;
          continue;
        }
        auto view = dyn_cast<ViewLikeOpInterface>(user);
        if (view && view.getViewSource() == v) {
          // A view reads nothing; the uses of its buffer results count.
          for (Value r : user->getResults())
            if (isa<BaseMemRefType>(r.getType()))
              worklist.push_back(r);
          continue;
        }
        // A call whose buffer results are fresh and a clone read the buffer
        // but return other buffers; any other buffer result may alias it.
        bool freshResults = isa<bufferization::CloneOp>(user);
        if (auto call = dyn_cast<func::CallOp>(user)) {
          const CalleeInfo *info = calleeOf(call);
          freshResults = info && info->fresh;
        }
        if (!freshResults && llvm::any_of(user->getResultTypes(), [](Type t) {
              return isa<BaseMemRefType>(t);
            }))
          uses.escapes = true;
        addUser(user);
        // A request (or any non-buffer result) used later extends the use.
        for (Value r : user->getResults())
          if (!isa<BaseMemRefType>(r.getType()))
            for (Operation *later : r.getUsers())
              addUser(later);
      }
    }
    return uses;
  }

  /// The last op of the block that uses the allocation defined by `def`,
  /// or null when the free cannot move before `dealloc`.
  static Operation *lastUse(Operation *def, const Uses &uses,
                            Operation *dealloc) {
    if (uses.escapes || def->getBlock() != dealloc->getBlock() ||
        !def->isBeforeInBlock(dealloc))
      return nullptr;
    Operation *last = def;
    for (Operation *u : uses.users)
      if (last->isBeforeInBlock(u))
        last = u;
    return last->isBeforeInBlock(dealloc) ? last : nullptr;
  }

  /// A plain free of a known allocation moves up after its last use.
  void moveDealloc(memref::DeallocOp dealloc) {
    std::optional<AllocationKey> key = allocationOf(dealloc.getMemref());
    if (!key)
      return;
    Uses uses = usesOf(membersOf(*key), dealloc);
    if (Operation *last = lastUse(key->first, uses, dealloc))
      dealloc->moveAfter(last);
  }

  /// The memrefs of a dealloc op that belong to an allocation the pass can
  /// follow leave the op: freed after their last use, or dropped when an
  /// alias is retained (the op never frees those). The rest stay.
  void splitDealloc(bufferization::DeallocOp dealloc) {
    if (!dealloc->use_empty())
      return; // the updated ownership of a retained value is used
    llvm::MapVector<AllocationKey, SmallVector<unsigned>> groups;
    for (auto [i, m] : llvm::enumerate(dealloc.getMemrefs()))
      if (std::optional<AllocationKey> key = allocationOf(m))
        groups[*key].push_back(i);
    llvm::SmallBitVector leaves(dealloc.getMemrefs().size());
    for (auto &[key, entries] : groups) {
      Uses uses = usesOf(membersOf(key), dealloc);
      if (uses.retained) {
        for (unsigned i : entries)
          leaves.set(i);
        continue;
      }
      if (!llvm::all_of(entries, [&](unsigned i) {
            return matchPattern(dealloc.getConditions()[i], m_One());
          }))
        continue;
      Operation *last = lastUse(key.first, uses, dealloc);
      if (!last)
        continue;
      OpBuilder b(last->getContext());
      b.setInsertionPointAfter(last);
      memref::DeallocOp::create(b, dealloc.getLoc(), membersOf(key).front());
      for (unsigned i : entries)
        leaves.set(i);
    }
    if (leaves.none())
      return;
    SmallVector<Value> memrefs, conditions;
    for (auto [i, m] : llvm::enumerate(dealloc.getMemrefs())) {
      if (leaves.test(i))
        continue;
      memrefs.push_back(m);
      conditions.push_back(dealloc.getConditions()[i]);
    }
    llvm::SetVector<Operation *> views;
    for (Value m : dealloc.getMemrefs())
      if (Operation *def = m.getDefiningOp();
          def && isa<ViewLikeOpInterface>(def))
        views.insert(def);
    if (!memrefs.empty()) {
      OpBuilder b(dealloc);
      bufferization::DeallocOp::create(b, dealloc.getLoc(), memrefs, conditions,
                                       dealloc.getRetained());
    }
    dealloc.erase();
    // The views that named a freed memref for the op (its base buffer).
    for (Operation *view : views)
      if (view->use_empty())
        view->erase();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    callees.clear();
    // Every function's results before any change: the pass moves and
    // splits frees, it does not change what a function returns.
    for (auto func : module.getOps<func::FuncOp>())
      callees[func.getSymNameAttr()] = analyzeCallee(func);
    SmallVector<Operation *> deallocs;
    module.walk([&](Operation *op) {
      if (isa<memref::DeallocOp, bufferization::DeallocOp>(op))
        deallocs.push_back(op);
    });
    for (Operation *op : deallocs) {
      if (auto d = dyn_cast<memref::DeallocOp>(op))
        moveDealloc(d);
      else
        splitDealloc(cast<bufferization::DeallocOp>(op));
    }
  }
};

} // namespace

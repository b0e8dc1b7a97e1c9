//===- BufferGroups.cpp - Lifetimes of buffers and groups of functions ----===//
//
// See BufferGroups.h.
//
//===----------------------------------------------------------------------===//

#include "BufferGroups.h"

#include "fsdp/Memory/BufferViews.h"

#include <functional>

using namespace mlir;
using namespace mlir::fsdp;

std::optional<int64_t> mlir::fsdp::staticBytes(MemRefType type,
                                               const DataLayout &layout) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace())
    return std::nullopt;
  Type element = type.getElementType();
  if (!element.isIntOrIndexOrFloat())
    return std::nullopt;
  return int64_t(layout.getTypeSize(element)) * type.getNumElements();
}

BufferGroups::BufferGroups(ModuleOp module, int64_t alignment)
    : alignment(alignment), symbols(module) {
  collectUses(module);
  collectMembers();
}

func::FuncOp BufferGroups::calleeOf(func::CallOp call) {
  return symbols.lookup<func::FuncOp>(call.getCallee());
}

BufferGroups::Role BufferGroups::roleOf(func::FuncOp func) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return Role::Other;
  auto it = callsTo.find(func);
  bool called = it != callsTo.end() && !it->second.empty();
  if (otherUses.contains(func))
    return Role::Other;
  if (!called)
    return Role::Entry;
  return func.isPrivate() ? Role::Callee : Role::Other;
}

/// Every function's direct calls, and the functions used otherwise.
void BufferGroups::collectUses(ModuleOp module) {
  module.walk([&](Operation *op) {
    if (auto call = dyn_cast<func::CallOp>(op)) {
      if (auto callee = calleeOf(call))
        callsTo[callee].push_back(call);
      return;
    }
    for (NamedAttribute a : op->getAttrs())
      a.getValue().walk([&](SymbolRefAttr ref) {
        if (auto f = symbols.lookup<func::FuncOp>(ref.getRootReference()))
          otherUses.insert(f);
      });
  });
}

/// Functions in an order where every callee comes before its callers
/// (a function in a cycle comes once, wherever the walk meets it).
SmallVector<func::FuncOp> BufferGroups::calleesFirst(ModuleOp module) {
  SmallVector<func::FuncOp> order;
  llvm::DenseSet<func::FuncOp> seen;
  std::function<void(func::FuncOp)> visit = [&](func::FuncOp f) {
    if (!seen.insert(f).second)
      return;
    f.walk([&](func::CallOp call) {
      if (auto callee = calleeOf(call))
        visit(callee);
    });
    order.push_back(f);
  };
  for (auto f : module.getOps<func::FuncOp>())
    visit(f);
  return order;
}

/// The function whose top-level block holds `call`, or null.
func::FuncOp BufferGroups::topLevelCaller(func::CallOp call) {
  auto caller = call->getParentOfType<func::FuncOp>();
  if (!caller || !caller.getBody().hasOneBlock() ||
      call->getBlock() != &caller.getBody().front())
    return {};
  return caller;
}

/// Which callees are planned with their callers (the call's times in the
/// caller's program order, their buffers in the caller's arena):
/// - a member: a private function called once, from the top-level block
///   of a planned function, no cycle; a chain of members ends at a root;
/// - a repeated function: a private function called several times, each
///   call from the top-level block of an entry or of a member of an
///   entry, all of the same entry. Each call passes the offsets of that
///   call's buffers.
/// Every other planned function is a root with an arena of its own.
void BufferGroups::collectMembers() {
  llvm::DenseMap<func::FuncOp, func::CallOp> single;
  for (auto &[callee, calls] : callsTo) {
    if (calls.size() != 1 || roleOf(callee) != Role::Callee)
      continue;
    func::FuncOp caller = topLevelCaller(calls.front());
    if (caller && roleOf(caller) != Role::Other)
      single[callee] = calls.front();
  }
  llvm::DenseMap<func::FuncOp, func::FuncOp> rootOf;
  for (auto &[callee, call] : single) {
    llvm::DenseSet<func::FuncOp> chain;
    func::FuncOp f = callee;
    bool rooted = true;
    for (auto it = single.find(f); it != single.end(); it = single.find(f)) {
      if (!chain.insert(f).second) {
        rooted = false;
        break;
      }
      f = topLevelCaller(it->second);
    }
    if (rooted)
      rootOf[callee] = f;
  }
  auto entryRoot = [&](func::FuncOp g) -> func::FuncOp {
    auto it = rootOf.find(g);
    func::FuncOp root = it == rootOf.end() ? g : it->second;
    return roleOf(root) == Role::Entry ? root : func::FuncOp();
  };
  for (auto &[callee, calls] : callsTo) {
    if (calls.size() < 2 || roleOf(callee) != Role::Callee ||
        rootOf.contains(callee))
      continue;
    func::FuncOp root;
    bool ok = true;
    for (func::CallOp call : calls) {
      func::FuncOp caller = topLevelCaller(call);
      func::FuncOp r = caller ? entryRoot(caller) : func::FuncOp();
      ok &= r && (!root || r == root);
      root = r;
    }
    if (ok)
      repeated[callee] = calls;
  }
  // A member of a repeated function runs once per call: it is a root.
  for (auto &[callee, call] : single)
    if (auto it = rootOf.find(callee);
        it != rootOf.end() && !repeated.contains(it->second))
      memberCall[callee] = call;
}

bool BufferGroups::planInCaller(func::FuncOp f) {
  return memberCall.contains(f) || repeated.contains(f);
}

/// The call `call` as a call of a planned-in-caller function: the callee
/// (null when it is not one).
func::FuncOp BufferGroups::inlinedCallee(func::CallOp call) {
  func::FuncOp callee = calleeOf(call);
  if (!callee)
    return {};
  if (auto it = memberCall.find(callee); it != memberCall.end())
    return it->second == call ? callee : func::FuncOp();
  if (auto it = repeated.find(callee); it != repeated.end())
    return llvm::is_contained(it->second, call) ? callee : func::FuncOp();
  return {};
}

void BufferGroups::walkGroup(func::FuncOp func, Operation *instance,
                             GroupTimeline &t) {
  if (!llvm::is_contained(t.functions, func))
    t.functions.push_back(func);
  DataLayout layout = DataLayout::closest(func);
  for (Operation &op : func.getBody().front()) {
    ++t.position;
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      std::optional<int64_t> bytes = staticBytes(alloc.getType(), layout);
      std::optional<uint64_t> align = alloc.getAlignment();
      if (!bytes || *bytes == 0 || !alloc.getDynamicSizes().empty() ||
          !alloc.getSymbolOperands().empty() ||
          (align && int64_t(*align) > alignment))
        continue;
      t.candidateOf[{alloc, instance}] = t.candidates.size();
      PlannedBuffer p;
      p.alloc = alloc;
      p.instance = instance;
      p.bytes = *bytes;
      p.start = t.position;
      t.candidates.push_back(p);
      continue;
    }
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      t.frees.push_back({dealloc, t.position, instance});
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      if (func::FuncOp callee = inlinedCallee(call)) {
        walkGroup(callee, repeated.contains(callee) ? call : instance, t);
        ++t.position; // the return
        continue;
      }
    }
    if (op.getNumRegions())
      op.walk([&](memref::DeallocOp d) {
        t.nestedFrees.push_back({d, instance});
      });
  }
}

/// The allocation of the group that `v` (of `instance`) is, and its
/// instance: through views, from an argument to the operand of the
/// instance's call and from a call's result to the callee's returned
/// value. Null when it is none.
std::pair<Operation *, Operation *>
BufferGroups::allocationOf(Value v, Operation *instance) {
  for (unsigned steps = 0; steps < 1024; ++steps) {
    v = viewRoot(v);
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (!f || arg.getOwner() != &f.getBody().front())
        return {};
      Operation *call = nullptr;
      if (auto it = memberCall.find(f); it != memberCall.end())
        call = it->second;
      else if (repeated.contains(f))
        call = instance;
      if (!call || arg.getArgNumber() >= call->getNumOperands())
        return {};
      v = call->getOperand(arg.getArgNumber());
      if (call == instance)
        instance = nullptr; // repeated functions are called from roots'
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (isa<memref::AllocOp>(def))
      return {def, instance};
    auto call = dyn_cast<func::CallOp>(def);
    func::FuncOp callee = call ? inlinedCallee(call) : func::FuncOp();
    if (!callee)
      return {};
    if (repeated.contains(callee))
      instance = call;
    auto ret = cast<func::ReturnOp>(callee.getBody().front().getTerminator());
    v = ret.getOperand(cast<OpResult>(v).getResultNumber());
  }
  return {};
}

/// The buffers the arena takes: candidates freed exactly once, by a free
/// of the group's blocks (none in a nested region), with their live
/// intervals [allocation, free). A repeated function's allocation is
/// planned in all its calls or in none, and a free there must be of its
/// own allocation (the same op frees it in every call).
SmallVector<PlannedBuffer> BufferGroups::collectPlanned(GroupTimeline &t) {
  SmallVector<unsigned> frees(t.candidates.size(), 0);
  llvm::DenseSet<Operation *> dropped;
  for (auto [dealloc, position, instance] : t.frees) {
    auto key = allocationOf(dealloc.getMemref(), instance);
    auto it = t.candidateOf.find(key);
    if (it == t.candidateOf.end())
      continue;
    PlannedBuffer &p = t.candidates[it->second];
    ++frees[it->second];
    p.dealloc = dealloc;
    p.end = position;
    if (instance && key.second != instance)
      dropped.insert(p.alloc);
  }
  for (unsigned i : t.results) {
    ++frees[i];
    t.candidates[i].end = t.position + 1;
  }
  for (auto [d, instance] : t.nestedFrees) {
    auto it = t.candidateOf.find(allocationOf(d.getMemref(), instance));
    if (it != t.candidateOf.end())
      frees[it->second] += 2;
  }
  for (auto [i, p] : llvm::enumerate(t.candidates))
    if (frees[i] != 1)
      dropped.insert(p.alloc);
  SmallVector<PlannedBuffer> planned;
  for (PlannedBuffer &p : t.candidates)
    if (!dropped.contains(p.alloc))
      planned.push_back(p);
  return planned;
}

//===- AssignBuffers.cpp - one planned arena of buffers per rank ----------===//
//
// After bufferization and early deallocation every step-local buffer is a
// `memref.alloc` freed by a `memref.dealloc` right after its last use. As
// plain malloc/free, a step of a real model maps and unmaps gigabytes of
// pages per step (hundreds of thousands of page faults), and on the threads
// backend every rank's thread does so in one address space. This pass
// instead packs the buffers into one arena per rank and turns each
// allocation into a view of the arena at its offset.
//
// A planned function and the outlined segments it calls are one program:
// a segment called once is planned in its caller's order (its buffers at
// the times of the call, its results live from their allocation inside it
// to their free in the caller, as with malloc), and a segment called
// several times in each of its calls, which pass the offsets of their
// buffers. The packing (fsdp/Memory/ArenaPacking.h, no MLIR) is the
// smallest of a heap simulation in program order and three global best
// fits over the live intervals, improved by a local search. A callee that
// cannot be planned with its callers has a plan of its own: its results become
// out-parameters its callers allocate, and its temporaries a sub-arena argument
// allocated around each call. An entry (a function nobody calls) gets its arena
// from the runtime, which allocates it once per rank; its results are planned
// too (valid until its next call, which the runners copy them before).
//
//===----------------------------------------------------------------------===//

#include "../FSDPToRuntime/RuntimeFunctions.h"
#include "fsdp/Conversion/BufferViews.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/Memory/ArenaPacking.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPASSIGNBUFFERS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Discardable attribute on the sub-arena a caller allocates for a callee:
/// the callee marks its own buffers live and dead.
constexpr llvm::StringLiteral kSubArenaAttrName = "fsdp.sub_arena";
/// How many of the largest planned buffers a plan records.
constexpr size_t kLargestRecorded = 3;
constexpr int64_t kMaxAlignment = 4096;

namespace packing = ::fsdp::packing;

/// The bytes of a statically shaped, identity-layout memref in the default
/// memory space, or nullopt.
std::optional<int64_t> staticBytes(MemRefType type, const DataLayout &layout) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace())
    return std::nullopt;
  Type element = type.getElementType();
  if (!element.isIntOrIndexOrFloat())
    return std::nullopt;
  return int64_t(layout.getTypeSize(element)) * type.getNumElements();
}

/// What the pass decided for one function.
struct FunctionPlan {
  int64_t arena = 0; ///< bytes of its arena (0: nothing planned)
  /// Peak bytes of the static buffers outside the arena while it runs, and
  /// those still allocated when it returns (its results).
  int64_t outsidePeak = 0, outsideHeld = 0;
  int64_t buffers = 0;
  SmallVector<int64_t> largest;
  /// Per result: the outside bytes it hands the caller (0: none).
  SmallVector<int64_t> resultBytes;
  bool takesArena = false; ///< its arena is its last argument
};

/// One planned buffer: its allocation, its free, its live interval
/// [allocation, free) in the program order of its group, and its offset.
struct Planned {
  memref::AllocOp alloc;
  memref::DeallocOp dealloc;
  int64_t bytes = 0, offset = 0;
  int64_t start = 0, end = 0;
  /// The call of the repeated function this is a buffer of, or null.
  Operation *instance = nullptr;
};

} // namespace

namespace {

struct FSDPAssignBuffersPass
    : public mlir::fsdp::impl::FSDPAssignBuffersBase<FSDPAssignBuffersPass> {
  using Base::Base;

  enum class Role { Entry, Callee, Other };

  llvm::DenseMap<func::FuncOp, FunctionPlan> plans;
  llvm::DenseMap<func::FuncOp, SmallVector<func::CallOp>> callsTo;
  llvm::DenseSet<func::FuncOp> otherUses; ///< used other than by func.call
  /// Functions planned with their only caller's group, and that call.
  llvm::DenseMap<func::FuncOp, func::CallOp> memberCall;
  /// Functions planned in each of their calls, and those calls.
  llvm::DenseMap<func::FuncOp, SmallVector<func::CallOp>> repeated;
  /// The module's symbols, and the runtime functions declared so far: a
  /// lookup in the module itself would scan it (quadratic in its size).
  std::optional<SymbolTable> symbols;
  llvm::DenseMap<unsigned, func::FuncOp> runtime;

  func::FuncOp calleeOf(func::CallOp call) {
    return symbols->lookup<func::FuncOp>(call.getCallee());
  }

  /// A call of runtime function `fn`, declared once.
  func::CallOp callRuntime(OpBuilder &b, Location loc, RuntimeFunction fn,
                           ArrayRef<RuntimeArg> args) {
    func::FuncOp &decl = runtime[unsigned(fn)];
    if (!decl)
      decl = declareRuntimeFunction(getOperation(), fn);
    SmallVector<Value> operands;
    for (auto [arg, type] :
         llvm::zip_equal(args, decl.getFunctionType().getInputs()))
      operands.push_back(arg.materialize(b, loc, type));
    return func::CallOp::create(b, loc, decl, operands);
  }

  LogicalResult initialize(MLIRContext *ctx) override {
    if (alignment < 1 || alignment > kMaxAlignment ||
        !llvm::isPowerOf2_64(uint64_t(int64_t(alignment))))
      return emitError(UnknownLoc::get(ctx))
             << "option alignment must be a power of two between 1 and "
             << kMaxAlignment << " bytes, got " << int64_t(alignment);
    return success();
  }

  Role roleOf(func::FuncOp func) {
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
  void collectUses(ModuleOp module) {
    module.walk([&](Operation *op) {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        if (auto callee = calleeOf(call))
          callsTo[callee].push_back(call);
        return;
      }
      for (NamedAttribute a : op->getAttrs())
        a.getValue().walk([&](SymbolRefAttr ref) {
          if (auto f = symbols->lookup<func::FuncOp>(ref.getRootReference()))
            otherUses.insert(f);
        });
    });
  }

  /// Functions in an order where every callee comes before its callers
  /// (a function in a cycle comes once, wherever the walk meets it).
  SmallVector<func::FuncOp> calleesFirst(ModuleOp module) {
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

  void runOnOperation() override {
    ModuleOp module = getOperation();
    symbols.emplace(module);
    plans.clear();
    callsTo.clear();
    otherUses.clear();
    runtime.clear();
    memberCall.clear();
    repeated.clear();
    collectUses(module);
    collectMembers();
    SmallVector<NamedAttribute> entries;
    for (func::FuncOp func : calleesFirst(module)) {
      Role role = roleOf(func);
      bool member = planInCaller(func);
      if (role == Role::Callee && !member)
        resultsToOutParams(func);
      addSubArenas(func);
      if (member)
        continue; // planned with its caller's group
      if (role != Role::Other)
        planGroup(func, role == Role::Entry);
      else
        accountOutside(func, {}, plans[func]);
      if (role == Role::Entry)
        entries.emplace_back(func.getSymNameAttr(), planAttr(plans[func]));
    }
    if (!entries.empty())
      module->setAttr(kMemoryPlansAttrName,
                      DictionaryAttr::get(module.getContext(), entries));
  }

  Attribute planAttr(const FunctionPlan &plan) {
    MLIRContext *ctx = &getContext();
    return MemoryPlanAttr::get(ctx, plan.arena, plan.outsidePeak, plan.buffers,
                               DenseI64ArrayAttr::get(ctx, plan.largest));
  }

  //===--------------------------------------------------------------------===//
  // Out-parameters and sub-arenas of callees
  //===--------------------------------------------------------------------===//

  /// A result of a callee that becomes an out-parameter: the allocation
  /// it is, through static views (reshapes, constant subviews) that each
  /// caller repeats on its own buffer.
  struct OutParam {
    unsigned result;
    memref::AllocOp alloc;
    SmallVector<Operation *> views; ///< from the allocation outward
  };

  /// The allocation of `func`'s block that `v` is, through views that take
  /// no operand but their source, or nullopt.
  std::optional<OutParam> outParamOf(Value v, Block &block,
                                     const DataLayout &layout) {
    OutParam p;
    while (Operation *def = v.getDefiningOp()) {
      if (auto alloc = dyn_cast<memref::AllocOp>(def)) {
        if (alloc->getBlock() != &block || !alloc.getDynamicSizes().empty() ||
            !alloc.getSymbolOperands().empty() ||
            !staticBytes(alloc.getType(), layout))
          return std::nullopt;
        p.alloc = alloc;
        std::reverse(p.views.begin(), p.views.end());
        return p;
      }
      auto view = dyn_cast<ViewLikeOpInterface>(def);
      if (!view || def->getNumOperands() != 1 || def->getNumResults() != 1 ||
          def->getNumRegions() != 0)
        return std::nullopt;
      p.views.push_back(def);
      v = view.getViewSource();
    }
    return std::nullopt;
  }

  /// The results of `func` that are a statically shaped allocation of its
  /// body (possibly viewed), no other result sharing the allocation.
  SmallVector<OutParam> outParamResults(func::FuncOp func, func::ReturnOp ret) {
    DataLayout layout = DataLayout::closest(func);
    llvm::DenseMap<Value, unsigned> roots;
    for (Value v : ret.getOperands())
      if (isa<BaseMemRefType>(v.getType()))
        ++roots[viewRoot(v)];
    SmallVector<OutParam> out;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (!isa<BaseMemRefType>(v.getType()) || roots[viewRoot(v)] != 1)
        continue;
      if (std::optional<OutParam> p = outParamOf(v, *ret->getBlock(), layout)) {
        p->result = unsigned(i);
        out.push_back(std::move(*p));
      }
    }
    return out;
  }

  /// Turns the results outParamResults picks into arguments the callers
  /// allocate before each call.
  void resultsToOutParams(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    SmallVector<OutParam> outs = outParamResults(func, ret);
    if (outs.empty())
      return;
    // All at once: one insertion per argument would rebuild the function's
    // type each time (quadratic in the optimizer segment's results).
    llvm::BitVector dropped(ret.getNumOperands());
    unsigned first = func.getNumArguments();
    SmallVector<unsigned> at(outs.size(), first);
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (OutParam &p : outs) {
      dropped.set(p.result);
      types.push_back(p.alloc.getType());
      locs.push_back(p.alloc.getLoc());
    }
    SmallVector<DictionaryAttr> attrs(outs.size(),
                                      DictionaryAttr::get(func.getContext()));
    if (failed(func.insertArguments(at, types, attrs, locs)))
      return signalPassFailure();
    for (auto [i, p] : llvm::enumerate(outs))
      p.alloc.replaceAllUsesWith(func.getArgument(first + i));
    SmallVector<Value> kept;
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (!dropped.test(i))
        kept.push_back(v);
    ret->setOperands(kept);
    if (failed(func.eraseResults(dropped)))
      return signalPassFailure();
    SmallVector<func::CallOp> calls;
    for (func::CallOp call : callsTo[func])
      calls.push_back(rewriteCall(call, func, dropped, outs));
    callsTo[func] = calls;
    numOutParams += outs.size() * calls.size();
    for (OutParam &p : outs) {
      // The views now only fed the return; the allocation is the argument.
      for (Operation *view : llvm::reverse(p.views))
        if (view->use_empty())
          view->erase();
      p.alloc.erase();
    }
  }

  /// The call of `func` (already rewritten) with an allocation before it for
  /// each out-parameter; the old call's results map to the new one's and to
  /// those allocations (through the callee's views, repeated here). A free
  /// of such a result frees the allocation.
  func::CallOp rewriteCall(func::CallOp call, func::FuncOp func,
                           const llvm::BitVector &dropped,
                           MutableArrayRef<OutParam> outs) {
    OpBuilder b(call);
    SmallVector<Value> operands(call.getOperands());
    llvm::DenseMap<unsigned, std::pair<Value, Value>> byResult;
    for (OutParam &p : outs) {
      Value alloc = memref::AllocOp::create(b, call.getLoc(), p.alloc.getType(),
                                            p.alloc.getAlignmentAttr());
      operands.push_back(alloc);
      Value v = alloc;
      for (Operation *view : p.views) {
        IRMapping map;
        map.map(view->getOperand(0), v);
        v = b.clone(*view, map)->getResult(0);
      }
      byResult[p.result] = {v, alloc};
    }
    auto fresh = func::CallOp::create(b, call.getLoc(), func, operands);
    fresh->setDiscardableAttrs(call->getDiscardableAttrDictionary());
    unsigned next = 0;
    for (unsigned i = 0; i < call.getNumResults(); ++i) {
      Value old = call.getResult(i);
      if (!dropped.test(i)) {
        old.replaceAllUsesWith(fresh.getResult(next++));
        continue;
      }
      auto [view, alloc] = byResult[i];
      for (OpOperand &use : llvm::make_early_inc_range(old.getUses()))
        use.set(isa<memref::DeallocOp>(use.getOwner()) ? alloc : view);
    }
    call.erase();
    return fresh;
  }

  /// Each call of a function that takes an arena gets one, allocated just
  /// before the call and freed just after it.
  void addSubArenas(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    func.walk([&](func::CallOp call) {
      func::FuncOp callee = calleeOf(call);
      auto it = callee ? plans.find(callee) : plans.end();
      if (it == plans.end() || !it->second.takesArena)
        return;
      OpBuilder b(call);
      auto type = MemRefType::get({it->second.arena}, IntegerType::get(ctx, 8));
      auto sub = memref::AllocOp::create(b, call.getLoc(), type,
                                         b.getI64IntegerAttr(alignment));
      sub->setAttr(kSubArenaAttrName, UnitAttr::get(ctx));
      call->insertOperands(call->getNumOperands(), {sub});
      b.setInsertionPointAfter(call);
      memref::DeallocOp::create(b, call.getLoc(), sub);
    });
  }

  //===--------------------------------------------------------------------===//
  // Groups: a function and the segments it calls, planned as one program
  //===--------------------------------------------------------------------===//

  /// The function whose top-level block holds `call`, or null.
  static func::FuncOp topLevelCaller(func::CallOp call) {
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
  void collectMembers() {
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

  bool planInCaller(func::FuncOp f) {
    return memberCall.contains(f) || repeated.contains(f);
  }

  /// The call `call` as a call of a planned-in-caller function: the callee
  /// (null when it is not one).
  func::FuncOp inlinedCallee(func::CallOp call) {
    func::FuncOp callee = calleeOf(call);
    if (!callee)
      return {};
    if (auto it = memberCall.find(callee); it != memberCall.end())
      return it->second == call ? callee : func::FuncOp();
    if (auto it = repeated.find(callee); it != repeated.end())
      return llvm::is_contained(it->second, call) ? callee : func::FuncOp();
    return {};
  }

  /// The group of `root` in program order: the ops of its block, each call
  /// of a member or repeated function replaced by the callee's block
  /// (recursively), each such call an instance of the callee. Records the
  /// candidate buffers (static allocations of these blocks) per instance,
  /// every free of these blocks, and the frees nested in regions.
  struct Timeline {
    SmallVector<func::FuncOp> functions; ///< root first, callers first
    SmallVector<Planned> candidates;
    /// (allocation, instance: the repeated function's call, or null)
    llvm::DenseMap<std::pair<Operation *, Operation *>, unsigned> candidateOf;
    SmallVector<std::tuple<memref::DeallocOp, int64_t, Operation *>> frees;
    SmallVector<std::pair<memref::DeallocOp, Operation *>> nestedFrees;
    /// Candidates an entry returns: live to its return.
    SmallVector<unsigned> results;
    int64_t position = 0;
  };

  void walkGroup(func::FuncOp func, Operation *instance, Timeline &t) {
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
        Planned p;
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
  std::pair<Operation *, Operation *> allocationOf(Value v,
                                                   Operation *instance) {
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
  SmallVector<Planned> collectPlanned(Timeline &t) {
    SmallVector<unsigned> frees(t.candidates.size(), 0);
    llvm::DenseSet<Operation *> dropped;
    for (auto [dealloc, position, instance] : t.frees) {
      auto key = allocationOf(dealloc.getMemref(), instance);
      auto it = t.candidateOf.find(key);
      if (it == t.candidateOf.end())
        continue;
      Planned &p = t.candidates[it->second];
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
    SmallVector<Planned> planned;
    for (Planned &p : t.candidates)
      if (!dropped.contains(p.alloc))
        planned.push_back(p);
    return planned;
  }
  /// Offsets of `planned` in one arena (fsdp/Memory/ArenaPacking.h): the
  /// smallest of the program-order and global packings, then a local
  /// search. Returns the arena's bytes.
  int64_t pack(MutableArrayRef<Planned> planned) {
    std::vector<packing::Interval> intervals;
    intervals.reserve(planned.size());
    for (const Planned &p : planned)
      intervals.push_back({p.bytes, p.start, p.end});
    std::vector<int64_t> offsets;
    int64_t arena = packing::pack(intervals, alignment, offsets);
    for (auto [p, offset] : llvm::zip_equal(planned, offsets))
      p.offset = offset;
    return arena;
  }

  /// A repeated function's buffers become offset arguments (one index per
  /// buffer, in one order for every call) after its arena; each call passes
  /// its own offsets.
  LogicalResult
  passOffsets(func::FuncOp f,
              llvm::MapVector<Operation *, SmallVector<Planned *>> &byAlloc,
              llvm::DenseMap<func::FuncOp, std::pair<Value, Value>> &arenaOf,
              llvm::DenseMap<Operation *, Value> &offsetArg) {
    SmallVector<Operation *> own;
    for (auto &[alloc, instances] : byAlloc)
      if (alloc->getParentOfType<func::FuncOp>() == f)
        own.push_back(alloc);
    unsigned first = f.getNumArguments();
    Type index = IndexType::get(f.getContext());
    SmallVector<unsigned> at(own.size(), first);
    SmallVector<Type> types(own.size(), index);
    SmallVector<DictionaryAttr> attrs(own.size(),
                                      DictionaryAttr::get(f.getContext()));
    SmallVector<Location> locs(own.size(), f.getLoc());
    if (failed(f.insertArguments(at, types, attrs, locs)))
      return failure();
    for (auto [i, alloc] : llvm::enumerate(own))
      offsetArg[alloc] = f.getArgument(first + i);
    numRepeatedCalls += repeated[f].size();
    for (func::CallOp call : repeated[f]) {
      OpBuilder b(call);
      SmallVector<Value> extra = {arenaOf[topLevelCaller(call)].first};
      for (Operation *alloc : own) {
        const Planned *mine = nullptr;
        for (const Planned *p : byAlloc[alloc])
          if (p->instance == call)
            mine = p;
        extra.push_back(
            arith::ConstantIndexOp::create(b, call.getLoc(), mine->offset));
      }
      call->insertOperands(call->getNumOperands(), extra);
    }
    return success();
  }

  /// Plans `root` and the functions planned in its callers into one arena;
  /// records the plans of all of them.
  void planGroup(func::FuncOp root, bool entry) {
    Timeline t;
    walkGroup(root, nullptr, t);
    if (entry && entryResults) {
      // Each buffer the entry returns once, live to the return.
      llvm::SetVector<unsigned> results;
      for (Value v : root.getBody().front().getTerminator()->getOperands())
        if (isa<BaseMemRefType>(v.getType()))
          if (auto it = t.candidateOf.find(allocationOf(v, nullptr));
              it != t.candidateOf.end())
            results.insert(it->second);
      t.results.assign(results.begin(), results.end());
    }
    SmallVector<Planned> planned = collectPlanned(t);
    for (func::FuncOp f : t.functions)
      (void)plans[f]; // no insertion below: references stay valid
    FunctionPlan &plan = plans[root];
    plan.arena = pack(planned);
    plan.buffers = int64_t(planned.size());
    SmallVector<int64_t> sizes =
        llvm::map_to_vector(planned, [](const Planned &p) { return p.bytes; });
    size_t n = std::min(sizes.size(), kLargestRecorded);
    std::partial_sort(sizes.begin(), sizes.begin() + n, sizes.end(),
                      std::greater<int64_t>());
    plan.largest.assign(sizes.begin(), sizes.begin() + n);

    llvm::DenseSet<Operation *> inArena;
    for (const Planned &p : planned)
      inArena.insert(p.alloc);
    // Callees before callers (a caller counts its callees' outside bytes):
    // repeated functions call no member, and a member comes after its
    // caller in `functions`.
    for (func::FuncOp f : t.functions)
      if (repeated.contains(f))
        accountOutside(f, inArena, plans[f]);
    for (func::FuncOp f : llvm::reverse(t.functions))
      if (!repeated.contains(f))
        accountOutside(f, inArena, plans[f]);
    numPlanned += planned.size();
    if (planned.empty())
      return;

    // Each function's arena and base pointer; a member's and a repeated
    // function's are arguments its calls pass, with a repeated function's
    // offsets (one index per buffer) after them.
    llvm::DenseMap<func::FuncOp, std::pair<Value, Value>> arenaOf;
    arenaOf[root] = entry ? arenaFromRuntime(root, plan.arena)
                          : arenaArgument(root, plan.arena);
    plan.takesArena = !entry;
    llvm::MapVector<Operation *, SmallVector<Planned *>> byAlloc;
    for (Planned &p : planned)
      byAlloc[p.alloc].push_back(&p);
    llvm::DenseMap<Operation *, Value> offsetArg;
    // Members first (each after its caller), then repeated functions,
    // whose callers are the root and members.
    for (func::FuncOp f : ArrayRef(t.functions).drop_front()) {
      auto it = memberCall.find(f);
      if (it == memberCall.end())
        continue;
      arenaOf[f] = arenaArgument(f, plan.arena);
      func::CallOp call = it->second;
      call->insertOperands(call->getNumOperands(),
                           {arenaOf[topLevelCaller(call)].first});
    }
    for (func::FuncOp f : ArrayRef(t.functions).drop_front()) {
      if (!repeated.contains(f))
        continue;
      arenaOf[f] = arenaArgument(f, plan.arena);
      if (failed(passOffsets(f, byAlloc, arenaOf, offsetArg)))
        return signalPassFailure();
    }
    for (auto &[alloc, instances] : byAlloc) {
      auto owner = alloc->getParentOfType<func::FuncOp>();
      rewritePlanned(cast<memref::AllocOp>(alloc), instances, arenaOf[owner],
                     offsetArg.lookup(alloc), arenaOf);
    }
  }

  /// The entry's arena: the runtime's base pointer for this rank, as a
  /// `memref<bytes x i8>` (a descriptor the LLVM lowering folds away).
  std::pair<Value, Value> arenaFromRuntime(func::FuncOp func, int64_t bytes) {
    MLIRContext *ctx = func.getContext();
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    Location loc = func.getLoc();
    Value ptr =
        callRuntime(b, loc, RuntimeFunction::arena, {bytes}).getResult(0);
    Type i64 = b.getI64Type();
    Type sizes = LLVM::LLVMArrayType::get(i64, 1);
    auto descType = LLVM::LLVMStructType::getLiteral(
        ctx, {ptr.getType(), ptr.getType(), i64, sizes, sizes});
    auto word = [&](int64_t v) {
      return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
    };
    Value desc = LLVM::PoisonOp::create(b, loc, descType);
    desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
    desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
    desc = LLVM::InsertValueOp::create(b, loc, desc, word(0),
                                       ArrayRef<int64_t>{2});
    desc = LLVM::InsertValueOp::create(b, loc, desc, word(bytes),
                                       ArrayRef<int64_t>{3, 0});
    desc = LLVM::InsertValueOp::create(b, loc, desc, word(1),
                                       ArrayRef<int64_t>{4, 0});
    auto type = MemRefType::get({bytes}, b.getI8Type());
    Value arena =
        UnrealizedConversionCastOp::create(b, loc, type, desc).getResult(0);
    // The last step's results (in the arena) stay addressable until here.
    if (poison && entryResults)
      callRuntime(b, loc, RuntimeFunction::arena_poison, {ptr, bytes});
    return {arena, ptr};
  }

  /// A callee's arena: a new last argument (its callers allocate it, or
  /// pass their own arena to a member).
  std::pair<Value, Value> arenaArgument(func::FuncOp func, int64_t bytes) {
    auto type =
        MemRefType::get({bytes}, IntegerType::get(func.getContext(), 8));
    unsigned i = func.getNumArguments();
    if (failed(func.insertArgument(i, type, {}, func.getLoc()))) {
      signalPassFailure();
      return {};
    }
    Value arena = func.getArgument(i);
    if (!poison)
      return {arena, Value()};
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    Location loc = func.getLoc();
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arena);
    Value asInt = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
    Value ptr = LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(func.getContext()), asInt);
    return {arena, ptr};
  }

  /// The allocation becomes a view of its function's arena at its offset
  /// (a constant, or `offsetArg` in a repeated function); with `poison`,
  /// the runtime hears where it becomes live and dead (the free may be in
  /// another function of the group, with its own base pointer; a free in
  /// the caller of a repeated function is one per call, at that call's
  /// offset).
  void rewritePlanned(
      memref::AllocOp alloc, ArrayRef<Planned *> instances,
      std::pair<Value, Value> arena, Value offsetArg,
      llvm::DenseMap<func::FuncOp, std::pair<Value, Value>> &arenaOf) {
    if (!arena.first)
      return;
    Location loc = alloc.getLoc();
    OpBuilder b(alloc);
    Value offset =
        offsetArg
            ? offsetArg
            : arith::ConstantIndexOp::create(b, loc, instances.front()->offset)
                  .getResult();
    Value view = memref::ViewOp::create(b, loc, alloc.getType(), arena.first,
                                        offset, ValueRange{});
    int64_t bytes = instances.front()->bytes;
    bool marks = poison && !alloc->hasAttr(kSubArenaAttrName);
    auto owner = alloc->getParentOfType<func::FuncOp>();
    if (marks && arena.second)
      callRuntime(b, loc, RuntimeFunction::arena_unpoison,
                  {addressAt(b, loc, arena.second, offset), bytes});
    llvm::SetVector<Operation *> frees;
    for (Planned *p : instances) {
      if (!p->dealloc || !frees.insert(p->dealloc))
        continue;
      auto freer = p->dealloc->getParentOfType<func::FuncOp>();
      Value base = arenaOf.lookup(freer).second;
      if (!marks || !base)
        continue;
      OpBuilder d(p->dealloc);
      Value at =
          freer == owner
              ? offset
              : arith::ConstantIndexOp::create(d, loc, p->offset).getResult();
      callRuntime(d, p->dealloc.getLoc(), RuntimeFunction::arena_poison,
                  {addressAt(d, loc, base, at), bytes});
    }
    for (Operation *free : frees)
      free->erase();
    alloc.replaceAllUsesWith(view);
    alloc.erase();
  }

  /// `base` + `offset` bytes (an index) as a pointer.
  static Value addressAt(OpBuilder &b, Location loc, Value base, Value offset) {
    Value bytes = arith::IndexCastOp::create(b, loc, b.getI64Type(), offset);
    return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{bytes});
  }

  //===--------------------------------------------------------------------===//
  // What stays outside
  //===--------------------------------------------------------------------===//

  /// The bytes the lowered allocation asks malloc for: the buffer, plus its
  /// alignment when it has one (the LLVM lowering aligns by hand).
  static std::optional<int64_t> mallocBytes(memref::AllocOp alloc,
                                            const DataLayout &layout) {
    std::optional<int64_t> bytes = staticBytes(alloc.getType(), layout);
    if (!bytes || !alloc.getDynamicSizes().empty())
      return std::nullopt;
    return *bytes + int64_t(alloc.getAlignment().value_or(0));
  }

  /// The peak bytes of static buffers outside the arena while `func` runs
  /// (its callees' included) and those it returns. A free inside a nested
  /// region (a conditional one) is not counted: the bound stays an upper
  /// one.
  void accountOutside(func::FuncOp func,
                      const llvm::DenseSet<Operation *> &inArena,
                      FunctionPlan &plan) {
    if (func.isExternal())
      return;
    DataLayout layout = DataLayout::closest(func);
    llvm::DenseMap<Value, int64_t> open;
    int64_t live = 0, peak = 0;
    for (Operation &top : func.getBody().front()) {
      top.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
          std::optional<int64_t> bytes = mallocBytes(alloc, layout);
          if (inArena.contains(op) || !bytes)
            return;
          open[alloc] = *bytes;
          live += *bytes;
        } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
          auto it = open.find(dealloc.getMemref());
          if (op != &top || it == open.end())
            return;
          live -= it->second;
          open.erase(it);
        } else if (auto call = dyn_cast<func::CallOp>(op)) {
          accountCall(call, open, live, peak);
        }
        peak = std::max(peak, live);
      });
    }
    plan.outsidePeak = peak;
    plan.outsideHeld = live;
    recordResultBytes(func, open, plan);
  }

  void accountCall(func::CallOp call, llvm::DenseMap<Value, int64_t> &open,
                   int64_t &live, int64_t &peak) {
    func::FuncOp callee = calleeOf(call);
    auto it = callee ? plans.find(callee) : plans.end();
    if (it == plans.end())
      return;
    const FunctionPlan &p = it->second;
    peak = std::max(peak, live + p.outsidePeak);
    for (auto [i, bytes] : llvm::enumerate(p.resultBytes))
      if (bytes > 0 && i < call.getNumResults()) {
        open[call.getResult(i)] = bytes;
        live += bytes;
      }
  }

  /// Per result of `func`, the outside bytes it hands its caller (a buffer
  /// shared by several results counts once).
  void recordResultBytes(func::FuncOp func,
                         llvm::DenseMap<Value, int64_t> &open,
                         FunctionPlan &plan) {
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!ret)
      return;
    for (Value v : ret.getOperands()) {
      auto it = open.find(viewRoot(v));
      plan.resultBytes.push_back(it == open.end() ? 0 : it->second);
      if (it != open.end())
        open.erase(it);
    }
  }
};

} // namespace

//===- BufferPlan.cpp - one planned arena of buffers per rank -------------===//
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
// The parts: BufferGroups.h (groups, program order, live intervals),
// fsdp/Memory/ArenaPacking.h (the offsets), OutParams.cpp (callee results
// as arguments), OutsideBytes.cpp (what stays outside); this file plans
// each group and rewrites its allocations into views of its arena, and the
// pass (AssignBuffers.cpp) applies it to a module.
//
//===----------------------------------------------------------------------===//

#include "BufferPlan.h"
#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/Memory/ArenaPacking.h"
#include "fsdp/Memory/BufferViews.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Discardable attribute on the sub-arena a caller allocates for a callee:
/// the callee marks its own buffers live and dead.
constexpr llvm::StringLiteral kSubArenaAttrName = "fsdp.sub_arena";
/// How many of the largest planned buffers a plan records.
constexpr size_t kLargestRecorded = 3;

namespace packing = ::fsdp::packing;

/// Plans and rewrites one module (see the top of this file).
class BufferPlanner {
public:
  BufferPlanner(ModuleOp module, const ArenaOptions &options,
                ArenaCounts &counts)
      : module(module), options(options), counts(counts) {}

private:
  ModuleOp module;
  const ArenaOptions &options;
  ArenaCounts &counts;
  bool anyFailed = false;
  void fail() { anyFailed = true; }

  llvm::DenseMap<func::FuncOp, FunctionPlan> plans;
  /// Who calls whom, and which functions are planned together.
  std::optional<BufferGroups> groups;
  /// The runtime functions declared so far.
  llvm::DenseMap<unsigned, func::FuncOp> runtime;

  /// A call of runtime function `fn`, declared once.
  func::CallOp callRuntime(OpBuilder &b, Location loc, RuntimeFunction fn,
                           ArrayRef<RuntimeArg> args) {
    func::FuncOp &decl = runtime[unsigned(fn)];
    if (!decl)
      decl = declareRuntimeFunction(module, fn);
    SmallVector<Value> operands;
    for (auto [arg, type] :
         llvm::zip_equal(args, decl.getFunctionType().getInputs()))
      operands.push_back(arg.materialize(b, loc, type));
    return func::CallOp::create(b, loc, decl, operands);
  }

public:
  /// Plans every function; fails after a located error.
  LogicalResult run() {
    groups.emplace(module, options.alignment);
    SmallVector<NamedAttribute> entries;
    for (func::FuncOp func : groups->calleesFirst(module)) {
      BufferGroups::Role role = groups->roleOf(func);
      bool member = groups->planInCaller(func);
      if (role == BufferGroups::Role::Callee && !member) {
        FailureOr<int64_t> outs =
            resultsToOutParams(func, groups->callsTo[func]);
        if (succeeded(outs))
          counts.outParams += *outs;
        else
          fail();
      }
      addSubArenas(func);
      if (member)
        continue; // planned with its caller's group
      if (role != BufferGroups::Role::Other)
        planGroup(func, role == BufferGroups::Role::Entry);
      else
        accountOutside(func, {}, *groups, plans, plans[func]);
      if (role == BufferGroups::Role::Entry)
        entries.emplace_back(func.getSymNameAttr(), planAttr(plans[func]));
    }
    for (const auto &[func, plan] : plans)
      counts.outside += plan.outsideBuffers;
    if (!entries.empty())
      module->setAttr(kMemoryPlansAttrName,
                      DictionaryAttr::get(module.getContext(), entries));
    return failure(anyFailed);
  }

private:
  Attribute planAttr(const FunctionPlan &plan) {
    MLIRContext *ctx = module.getContext();
    return MemoryPlanAttr::get(ctx, plan.arena, plan.outsidePeak, plan.buffers,
                               DenseI64ArrayAttr::get(ctx, plan.largest));
  }

  /// Each call of a function that takes an arena gets one, allocated just
  /// before the call and freed just after it.
  void addSubArenas(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    func.walk([&](func::CallOp call) {
      func::FuncOp callee = groups->calleeOf(call);
      auto it = callee ? plans.find(callee) : plans.end();
      if (it == plans.end() || !it->second.takesArena)
        return;
      OpBuilder b(call);
      auto type = MemRefType::get({it->second.arena}, IntegerType::get(ctx, 8));
      auto sub = memref::AllocOp::create(
          b, call.getLoc(), type, b.getI64IntegerAttr(options.alignment));
      sub->setAttr(kSubArenaAttrName, UnitAttr::get(ctx));
      call->insertOperands(call->getNumOperands(), {sub});
      b.setInsertionPointAfter(call);
      memref::DeallocOp::create(b, call.getLoc(), sub);
    });
  }

  /// Offsets of `planned` in one arena (fsdp/Memory/ArenaPacking.h): the
  /// smallest of the program-order and global packings, then a local
  /// search. Returns the arena's bytes.
  int64_t pack(MutableArrayRef<PlannedBuffer> planned) {
    std::vector<packing::Interval> intervals;
    intervals.reserve(planned.size());
    for (const PlannedBuffer &p : planned)
      intervals.push_back({p.bytes, p.start, p.end});
    std::vector<int64_t> offsets;
    int64_t arena = packing::pack(intervals, options.alignment, offsets);
    for (auto [p, offset] : llvm::zip_equal(planned, offsets))
      p.offset = offset;
    return arena;
  }

  /// A repeated function's buffers become offset arguments (one index per
  /// buffer, in one order for every call) after its arena; each call passes
  /// its own offsets.
  LogicalResult passOffsets(
      func::FuncOp f,
      llvm::MapVector<Operation *, SmallVector<PlannedBuffer *>> &byAlloc,
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
    counts.repeatedCalls += groups->repeated[f].size();
    for (func::CallOp call : groups->repeated[f]) {
      OpBuilder b(call);
      SmallVector<Value> extra = {
          arenaOf[BufferGroups::topLevelCaller(call)].first};
      for (Operation *alloc : own) {
        const PlannedBuffer *mine = nullptr;
        for (const PlannedBuffer *p : byAlloc[alloc])
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
    GroupTimeline t;
    groups->walkGroup(root, nullptr, t);
    if (entry && options.entryResults) {
      // Each buffer the entry returns once, live to the return.
      llvm::SetVector<unsigned> results;
      for (Value v : root.getBody().front().getTerminator()->getOperands())
        if (isa<BaseMemRefType>(v.getType()))
          if (auto it = t.candidateOf.find(groups->allocationOf(v, nullptr));
              it != t.candidateOf.end())
            results.insert(it->second);
      t.results.assign(results.begin(), results.end());
    }
    SmallVector<PlannedBuffer> planned = groups->collectPlanned(t);
    for (func::FuncOp f : t.functions)
      (void)plans[f]; // no insertion below: references stay valid
    FunctionPlan &plan = plans[root];
    plan.arena = pack(planned);
    plan.buffers = int64_t(planned.size());
    SmallVector<int64_t> sizes = llvm::map_to_vector(
        planned, [](const PlannedBuffer &p) { return p.bytes; });
    size_t n = std::min(sizes.size(), kLargestRecorded);
    std::partial_sort(sizes.begin(), sizes.begin() + n, sizes.end(),
                      std::greater<int64_t>());
    plan.largest.assign(sizes.begin(), sizes.begin() + n);

    llvm::DenseSet<Operation *> inArena;
    for (const PlannedBuffer &p : planned)
      inArena.insert(p.alloc);
    // Callees before callers (a caller counts its callees' outside bytes):
    // repeated functions call no member, and a member comes after its
    // caller in `functions`.
    for (func::FuncOp f : t.functions)
      if (groups->repeated.contains(f))
        accountOutside(f, inArena, *groups, plans, plans[f]);
    for (func::FuncOp f : llvm::reverse(t.functions))
      if (!groups->repeated.contains(f))
        accountOutside(f, inArena, *groups, plans, plans[f]);
    counts.planned += planned.size();
    if (planned.empty())
      return;

    // Each function's arena and base pointer; a member's and a repeated
    // function's are arguments its calls pass, with a repeated function's
    // offsets (one index per buffer) after them.
    llvm::DenseMap<func::FuncOp, std::pair<Value, Value>> arenaOf;
    arenaOf[root] = entry ? arenaFromRuntime(root, plan.arena)
                          : arenaArgument(root, plan.arena);
    plan.takesArena = !entry;
    llvm::MapVector<Operation *, SmallVector<PlannedBuffer *>> byAlloc;
    for (PlannedBuffer &p : planned)
      byAlloc[p.alloc].push_back(&p);
    llvm::DenseMap<Operation *, Value> offsetArg;
    // Members first (each after its caller), then repeated functions,
    // whose callers are the root and members.
    for (func::FuncOp f : ArrayRef(t.functions).drop_front()) {
      auto it = groups->memberCall.find(f);
      if (it == groups->memberCall.end())
        continue;
      arenaOf[f] = arenaArgument(f, plan.arena);
      func::CallOp call = it->second;
      call->insertOperands(call->getNumOperands(),
                           {arenaOf[BufferGroups::topLevelCaller(call)].first});
    }
    for (func::FuncOp f : ArrayRef(t.functions).drop_front()) {
      if (!groups->repeated.contains(f))
        continue;
      arenaOf[f] = arenaArgument(f, plan.arena);
      if (failed(passOffsets(f, byAlloc, arenaOf, offsetArg)))
        return fail();
    }
    for (auto &[alloc, instances] : byAlloc) {
      auto owner = alloc->getParentOfType<func::FuncOp>();
      rewritePlanned(cast<memref::AllocOp>(alloc), instances, arenaOf[owner],
                     offsetArg.lookup(alloc), arenaOf);
    }
  }

  /// The entry's arena: the runtime's base pointer for this rank, as a
  /// `memref<bytes x i8>`.
  std::pair<Value, Value> arenaFromRuntime(func::FuncOp func, int64_t bytes) {
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    Location loc = func.getLoc();
    Value ptr =
        callRuntime(b, loc, RuntimeFunction::arena, {bytes}).getResult(0);
    Value arena = pointerAsBuffer(b, loc, ptr, bytes);
    // The last step's results (in the arena) stay addressable until here.
    if (options.poison && options.entryResults)
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
      fail();
      return {};
    }
    Value arena = func.getArgument(i);
    if (!options.poison)
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
      memref::AllocOp alloc, ArrayRef<PlannedBuffer *> instances,
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
    bool marks = options.poison && !alloc->hasAttr(kSubArenaAttrName);
    auto owner = alloc->getParentOfType<func::FuncOp>();
    if (marks && arena.second)
      callRuntime(b, loc, RuntimeFunction::arena_unpoison,
                  {addressAt(b, loc, arena.second, offset), bytes});
    llvm::SetVector<Operation *> frees;
    for (PlannedBuffer *p : instances) {
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
};

} // namespace

LogicalResult mlir::fsdp::applyBufferPlan(ModuleOp module,
                                          const ArenaOptions &options,
                                          ArenaCounts &counts) {
  return BufferPlanner(module, options, counts).run();
}

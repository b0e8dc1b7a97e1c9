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
#include "BufferGroups.h"
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

} // namespace

namespace {

struct FSDPAssignBuffersPass
    : public mlir::fsdp::impl::FSDPAssignBuffersBase<FSDPAssignBuffersPass> {
  using Base::Base;

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

  void runOnOperation() override {
    ModuleOp module = getOperation();
    groups.emplace(module, alignment);
    plans.clear();
    runtime.clear();
    SmallVector<NamedAttribute> entries;
    for (func::FuncOp func : groups->calleesFirst(module)) {
      BufferGroups::Role role = groups->roleOf(func);
      bool member = groups->planInCaller(func);
      if (role == BufferGroups::Role::Callee && !member)
        resultsToOutParams(func);
      addSubArenas(func);
      if (member)
        continue; // planned with its caller's group
      if (role != BufferGroups::Role::Other)
        planGroup(func, role == BufferGroups::Role::Entry);
      else
        accountOutside(func, {}, plans[func]);
      if (role == BufferGroups::Role::Entry)
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
    for (func::CallOp call : groups->callsTo[func])
      calls.push_back(rewriteCall(call, func, dropped, outs));
    groups->callsTo[func] = calls;
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
      func::FuncOp callee = groups->calleeOf(call);
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

  /// Offsets of `planned` in one arena (fsdp/Memory/ArenaPacking.h): the
  /// smallest of the program-order and global packings, then a local
  /// search. Returns the arena's bytes.
  int64_t pack(MutableArrayRef<PlannedBuffer> planned) {
    std::vector<packing::Interval> intervals;
    intervals.reserve(planned.size());
    for (const PlannedBuffer &p : planned)
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
    numRepeatedCalls += groups->repeated[f].size();
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
    if (entry && entryResults) {
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
        accountOutside(f, inArena, plans[f]);
    for (func::FuncOp f : llvm::reverse(t.functions))
      if (!groups->repeated.contains(f))
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
    bool marks = poison && !alloc->hasAttr(kSubArenaAttrName);
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
    func::FuncOp callee = groups->calleeOf(call);
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

//===- OutParams.cpp - Callee results as arguments ------------------------===//
//
// See BufferPlan.h.
//
//===----------------------------------------------------------------------===//

#include "BufferPlan.h"

#include "fsdp/Memory/BufferViews.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/BitVector.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// A result of a callee that becomes an out-parameter: the allocation
/// it is, through static views (reshapes, constant subviews) that each
/// caller repeats on its own buffer.
struct OutParam {
  unsigned result;
  memref::AllocOp alloc;
  SmallVector<Operation *> views; ///< from the allocation outward
};
} // namespace

/// The allocation of `func`'s block that `v` is, through views that take
/// no operand but their source, or nullopt.
static std::optional<OutParam> outParamOf(Value v, Block &block,
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
static SmallVector<OutParam> outParamResults(func::FuncOp func,
                                             func::ReturnOp ret) {
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

/// The call of `func` (already rewritten) with an allocation before it for
/// each out-parameter; the old call's results map to the new one's and to
/// those allocations (through the callee's views, repeated here). A free
/// of such a result frees the allocation.
static func::CallOp rewriteCall(func::CallOp call, func::FuncOp func,
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

/// Turns the results outParamResults picks into arguments the callers
/// allocate before each call.
FailureOr<int64_t>
mlir::fsdp::resultsToOutParams(func::FuncOp func,
                               SmallVector<func::CallOp> &callsOfFunc) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<OutParam> outs = outParamResults(func, ret);
  if (outs.empty())
    return int64_t(0);
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
    return failure();
  for (auto [i, p] : llvm::enumerate(outs))
    p.alloc.replaceAllUsesWith(func.getArgument(first + i));
  SmallVector<Value> kept;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (!dropped.test(i))
      kept.push_back(v);
  ret->setOperands(kept);
  if (failed(func.eraseResults(dropped)))
    return failure();
  SmallVector<func::CallOp> calls;
  for (func::CallOp call : callsOfFunc)
    calls.push_back(rewriteCall(call, func, dropped, outs));
  callsOfFunc = calls;
  for (OutParam &p : outs) {
    // The views now only fed the return; the allocation is the argument.
    for (Operation *view : llvm::reverse(p.views))
      if (view->use_empty())
        view->erase();
    p.alloc.erase();
  }
  return int64_t(outs.size() * calls.size());
}

//===- OutsideBytes.cpp - Static bytes outside the arena ------------------===//
//
// See BufferPlan.h.
//
//===----------------------------------------------------------------------===//

#include "BufferPlan.h"

#include "fsdp/Memory/BufferViews.h"

using namespace mlir;
using namespace mlir::fsdp;

/// The bytes the lowered allocation asks malloc for: the buffer, plus its
/// alignment when it has one (the LLVM lowering aligns by hand).
static std::optional<int64_t> mallocBytes(memref::AllocOp alloc,
                                          const DataLayout &layout) {
  std::optional<int64_t> bytes = staticBytes(alloc.getType(), layout);
  if (!bytes || !alloc.getDynamicSizes().empty())
    return std::nullopt;
  return *bytes + int64_t(alloc.getAlignment().value_or(0));
}

static void accountCall(func::CallOp call, BufferGroups &groups,
                        const FunctionPlans &plans,
                        llvm::DenseMap<Value, int64_t> &open, int64_t &live,
                        int64_t &peak) {
  func::FuncOp callee = groups.calleeOf(call);
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
static void recordResultBytes(func::FuncOp func,
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

/// The peak bytes of static buffers outside the arena while `func` runs
/// (its callees' included) and those it returns. A free inside a nested
/// region (a conditional one) is not counted: the bound stays an upper
/// one.
void mlir::fsdp::accountOutside(func::FuncOp func,
                                const llvm::DenseSet<Operation *> &inArena,
                                BufferGroups &groups,
                                const FunctionPlans &plans,
                                FunctionPlan &plan) {
  if (func.isExternal())
    return;
  DataLayout layout = DataLayout::closest(func);
  llvm::DenseMap<Value, int64_t> open;
  int64_t live = 0, peak = 0, buffers = 0;
  for (Operation &top : func.getBody().front()) {
    top.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        std::optional<int64_t> bytes = mallocBytes(alloc, layout);
        if (inArena.contains(op) || !bytes)
          return;
        open[alloc] = *bytes;
        live += *bytes;
        ++buffers;
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        auto it = open.find(dealloc.getMemref());
        if (op != &top || it == open.end())
          return;
        live -= it->second;
        open.erase(it);
      } else if (auto call = dyn_cast<func::CallOp>(op)) {
        accountCall(call, groups, plans, open, live, peak);
      }
      peak = std::max(peak, live);
    });
  }
  plan.outsidePeak = peak;
  plan.outsideHeld = live;
  plan.outsideBuffers = buffers;
  recordResultBytes(func, open, plan);
}

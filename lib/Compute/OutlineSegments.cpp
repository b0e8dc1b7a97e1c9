//===- OutlineSegments.cpp - one function per run of compute --------------===//
//
// Moves every maximal run of side-effect-free, non-fsdp ops of a function
// body (on tensors, before bufferization) into a private function of its
// own (`__fsdp_segment_<n>`) and calls it. In an expanded FSDP step such a
// run is the forward or backward compute of a unit between its
// collectives; structurally equal runs (the identical blocks of a model,
// on other tensors) share one function. Everything downstream --
// bufferization, kernel outlining, the lowering to LLVM and LLVM's code
// generation -- then sees a step function that grows by a few calls per
// unit and a set of functions that does not grow with the model's depth.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Compute/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPOUTLINESEGMENTS
#include "fsdp/Compute/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A constant, or a `tensor.empty` of static shape.
bool isLeafRematerializable(Operation *op) {
  return op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->getNumResults() == 1 &&
         (op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op));
}

/// A `linalg.fill` of a constant into a static `tensor.empty`.
bool isRematerializableFill(Operation *op) {
  auto fill = dyn_cast<linalg::FillOp>(op);
  return fill && fill.hasPureTensorSemantics() &&
         llvm::all_of(fill->getOperands(), [](Value v) {
           Operation *def = v.getDefiningOp();
           return def && isLeafRematerializable(def);
         });
}

/// An op a segment rematerializes itself instead of taking its result as
/// an argument: a constant, a `tensor.empty` of static shape (passed in,
/// one shared empty tensor would become one buffer that several segments
/// write and return), or a fill of a constant into one. A filled tensor
/// passed in (a zero accumulator computed once and used by the forward and
/// the backward) is one the segments that accumulate into it cannot write:
/// bufferization copies it before each such call, and it lives from its
/// fill to its last use.
bool isRematerializable(Operation *op) {
  return isLeafRematerializable(op) || isRematerializableFill(op);
}

/// Gives each destination use of a rematerializable fill with several uses
/// a fill (and an empty tensor) of its own, right before that use (the
/// original keeps the uses that only read it). One filled tensor that several
/// ops write in place would be copied before all but the last of them; a fill
/// of its own is written once, and right before a contraction it is folded
/// into the contraction's beta = 0.
void splitFillDestinations(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isRematerializableFill(&op) || op.getResult(0).hasOneUse())
      continue;
    auto fill = cast<linalg::FillOp>(op);
    for (OpOperand &use :
         llvm::make_early_inc_range(fill.getResult(0).getUses())) {
      auto dest = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
      if (!dest || !dest.isDpsInit(&use))
        continue;
      // Right before the op that writes it, so that a kernel folds it.
      OpBuilder b(use.getOwner());
      IRMapping map;
      Value init = fill.getOutputs()[0];
      map.map(init, b.clone(*init.getDefiningOp())->getResult(0));
      use.set(b.clone(op, map)->getResult(0));
    }
  }
}

/// A slice or reshape of static shape whose only operand is its source.
bool isStaticView(Operation *op) {
  if (op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  return isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp>(op);
}

/// Whether `op` may move into a segment: pure compute, not a collective.
bool isSegmentOp(Operation *op) {
  // The scatter-add of rows is compute (the embedding backward), not a
  // collective.
  // So are the grouped products (kept for compute=gpu).
  if (isa<ScatterAddRowsOp, GroupedMatmulOp, GroupedMatmulTransposeLhsOp>(op))
    return true;
  if (op->hasTrait<OpTrait::IsTerminator>() ||
      isa_and_nonnull<FSDPDialect>(op->getDialect()))
    return false;
  if (isa<func::CallOp, func::FuncOp>(op))
    return false;
  return isMemoryEffectFree(op);
}

/// Rewrites collapse_shape(extract_slice(expand_shape(x))) of a 1-D `x`
/// viewed as [1, N] (a parameter's slice of a bucket) into the 1-D slice
/// of `x` it is. The three-op chain made in a segment would let the reshape
/// folding of the elementwise fusion give the ops that read it a unit
/// dimension the ops around them lack, so they would no longer fuse.
void foldUnitSliceChains(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto collapse = dyn_cast<tensor::CollapseShapeOp>(op);
    if (!collapse || collapse.getResultType().getRank() != 1)
      continue;
    auto slice = collapse.getSrc().getDefiningOp<tensor::ExtractSliceOp>();
    if (!slice || slice->getNumOperands() != 1)
      continue;
    auto expand = slice.getSource().getDefiningOp<tensor::ExpandShapeOp>();
    if (!expand || expand->getNumOperands() != 1 ||
        expand.getSrcType().getRank() != 1 ||
        expand.getResultType().getShape().size() != 2 ||
        expand.getResultType().getShape()[0] != 1)
      continue;
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    ArrayRef<int64_t> sizes = slice.getStaticSizes();
    ArrayRef<int64_t> strides = slice.getStaticStrides();
    if (offsets[0] != 0 || sizes[0] != 1 || strides[1] != 1)
      continue;
    OpBuilder b(collapse);
    auto direct = tensor::ExtractSliceOp::create(
        b, collapse.getLoc(), collapse.getResultType(), expand.getSrc(),
        ValueRange{}, ValueRange{}, ValueRange{},
        b.getDenseI64ArrayAttr({offsets[1]}),
        b.getDenseI64ArrayAttr({sizes[1]}), b.getDenseI64ArrayAttr({1}));
    collapse.replaceAllUsesWith(direct.getResult());
    collapse.erase();
    if (slice->use_empty())
      slice.erase();
    if (expand->use_empty())
      expand.erase();
  }
}

/// The static views (slices, reshapes) in `body` of a value that no run
/// computes: a block argument, a collective's result (a gathered bucket, a
/// reduce-scattered one), a call's result, or such a view itself. They stay
/// in the body and each segment that reads one takes the viewed value and
/// makes the view itself. Computed in a segment, such a view (a parameter
/// of a gathered bucket) would be a result: a buffer of its own, so a copy
/// per parameter and call.
llvm::DenseSet<Operation *> outsideViews(Block &body) {
  llvm::DenseSet<Operation *> views;
  for (Operation &op : body) {
    if (!isStaticView(&op))
      continue;
    Value source = op.getOperand(0);
    Operation *def = source.getDefiningOp();
    if (!def || views.contains(def) ||
        (!isSegmentOp(def) && !isRematerializable(def)))
      views.insert(&op);
  }
  return views;
}

/// The values a run reads from outside it and the values it defines that
/// are used after it, each in first-occurrence order.
struct RunInterface {
  llvm::SetVector<Value> inputs;
  SmallVector<Operation *> constants;
  SmallVector<Value> outputs;
};

RunInterface analyze(ArrayRef<Operation *> run,
                     const llvm::DenseSet<Operation *> &inRun,
                     const llvm::DenseSet<Operation *> &views, Block &body) {
  RunInterface iface;
  llvm::SetVector<Operation *> constants;
  // A view of an outside value is made in the segment: the viewed value is
  // the input.
  std::function<void(Value)> read = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && views.contains(def)) {
      read(def->getOperand(0));
      constants.insert(def);
    } else if (def && isRematerializable(def)) {
      constants.insert(def);
    } else {
      iface.inputs.insert(v);
    }
  };
  auto definedInside = [&](Value v) {
    Operation *owner = isa<BlockArgument>(v)
                           ? cast<BlockArgument>(v).getOwner()->getParentOp()
                           : v.getDefiningOp();
    if (!owner)
      return false;
    Operation *top = body.findAncestorOpInBlock(*owner);
    // A block argument of the body itself has the function as its owner.
    if (isa<BlockArgument>(v) && cast<BlockArgument>(v).getOwner() == &body)
      return false;
    return top && inRun.contains(top);
  };
  for (Operation *op : run) {
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) {
        if (!definedInside(v))
          read(v);
      }
    });
  }
  iface.constants.assign(constants.begin(), constants.end());
  for (Operation *op : run)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *user) {
            Operation *top = body.findAncestorOpInBlock(*user);
            return !top || !inRun.contains(top);
          }))
        iface.outputs.push_back(r);
  return iface;
}

struct FSDPOutlineSegmentsPass
    : public mlir::fsdp::impl::FSDPOutlineSegmentsBase<
          FSDPOutlineSegmentsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::StringMap<func::FuncOp> segments;
    unsigned counter = 0;
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !func->hasAttr(kSegmentAttrName) &&
          !func->hasAttr(kKernelAttrName) && func.getBody().hasOneBlock())
        funcs.push_back(func);
    for (func::FuncOp func : funcs) {
      Block &body = func.getBody().front();
      splitFillDestinations(body);
      foldUnitSliceChains(body);
      llvm::DenseSet<Operation *> views = outsideViews(body);
      // Collect the runs first: outlining one does not change the others.
      SmallVector<SmallVector<Operation *>> runs(1);
      for (Operation &op : body) {
        if (isRematerializable(&op) || views.contains(&op))
          continue; // stays in place, cloned into the segments that use it
        if (isSegmentOp(&op))
          runs.back().push_back(&op);
        else if (!runs.back().empty())
          runs.emplace_back();
      }
      for (ArrayRef<Operation *> run : runs)
        if (run.size() >= minOps)
          outline(module, symbols, segments, counter, body, views, run);
      // The fills and views every segment now makes itself, and their empty
      // tensors.
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
        if ((isRematerializableFill(&op) || isa<tensor::EmptyOp>(op) ||
             views.contains(&op)) &&
            op.use_empty())
          op.erase();
    }
  }

  /// The candidate segment of `run`, detached: its inputs are the
  /// arguments, its outputs the results.
  static func::FuncOp buildSegment(MLIRContext *ctx, Location loc,
                                   const RunInterface &iface,
                                   ArrayRef<Operation *> run) {
    OpBuilder b(ctx);
    SmallVector<Type> argTypes =
        llvm::map_to_vector(iface.inputs, [](Value v) { return v.getType(); });
    SmallVector<Type> resultTypes =
        llvm::map_to_vector(iface.outputs, [](Value v) { return v.getType(); });
    auto segment = func::FuncOp::create(
        b, loc, "__fsdp_segment", b.getFunctionType(argTypes, resultTypes));
    Block *entry = segment.addEntryBlock();
    b.setInsertionPointToStart(entry);
    IRMapping map;
    for (auto [from, to] : llvm::zip(iface.inputs, entry->getArguments()))
      map.map(from, to);
    // Each constant, empty tensor or fill is cloned right before its first
    // use, not at the top: an empty tensor becomes the allocation of the op
    // that fills it, which then lives from that op on, not from the
    // segment's start (the temporaries of a long backward segment would all
    // be allocated at once).
    llvm::DenseSet<Operation *> constants(iface.constants.begin(),
                                          iface.constants.end());
    std::function<void(Operation *)> rematerialize = [&](Operation *def) {
      for (Value operand : def->getOperands())
        if (!map.contains(operand))
          rematerialize(operand.getDefiningOp());
      b.clone(*def, map);
    };
    for (Operation *op : run) {
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (def && constants.contains(def) && !map.contains(v))
            rematerialize(def);
        }
      });
      b.clone(*op, map);
    }
    SmallVector<Value> returned = llvm::map_to_vector(
        iface.outputs, [&](Value v) { return map.lookup(v); });
    func::ReturnOp::create(b, loc, returned);
    return segment;
  }

  void outline(ModuleOp module, SymbolTable &symbols,
               llvm::StringMap<func::FuncOp> &segments, unsigned &counter,
               Block &body, const llvm::DenseSet<Operation *> &views,
               ArrayRef<Operation *> run) {
    llvm::DenseSet<Operation *> inRun(run.begin(), run.end());
    RunInterface iface = analyze(run, inRun, views, body);
    MLIRContext *ctx = module.getContext();
    Location loc = run.front()->getLoc();

    // Build the candidate detached; its generic form is the dedup key.
    func::FuncOp segment = buildSegment(ctx, loc, iface, run);
    std::string key;
    {
      llvm::raw_string_ostream os(key);
      OpPrintingFlags flags;
      flags.printGenericOpForm().elideLargeElementsAttrs(1 << 30);
      segment->print(os, flags);
    }
    func::FuncOp &existing = segments[key];
    if (!existing) {
      segment.setSymName(("__fsdp_segment_" + llvm::Twine(counter++)).str());
      segment.setPrivate();
      segment->setAttr(kSegmentAttrName, UnitAttr::get(ctx));
      symbols.insert(segment);
      existing = segment;
    } else {
      segment.erase();
    }

    // The call replaces the run where its last op was: every input is
    // defined before it (inputs come from before the run or from constants
    // that dominate their uses) and every output is used after it.
    OpBuilder at(run.back()->getNextNode());
    SmallVector<Value> args(iface.inputs.begin(), iface.inputs.end());
    auto call = func::CallOp::create(at, loc, existing, args);
    for (auto [from, to] : llvm::zip(iface.outputs, call.getResults()))
      from.replaceAllUsesWith(to);
    for (Operation *op : llvm::reverse(run))
      op->erase();
  }
};

} // namespace

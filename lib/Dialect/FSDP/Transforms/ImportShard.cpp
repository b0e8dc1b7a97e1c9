//===- ImportShard.cpp - upstream shard annotations to fsdp layouts -------===//
//
// A step written for upstream sharding propagation names a device grid
// (`shard.grid`) and annotates its arguments with `shard.shard %arg to
// %sharding`. This pass turns each annotated argument into an fsdp parameter:
// `split_axes` become the placements of an `fsdp.layout` (a dim split over a
// grid axis is `shard<dim>` on that mesh axis, an axis that splits nothing is
// `replicate`), the annotation is removed, and every `shard.grid` becomes an
// `fsdp.mesh` of the same name and sizes. What has no fsdp meaning is
// diagnosed at the op that carries it.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPIMPORTSHARD
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The fsdp layout of one `shard.sharding`, or failure (diagnosed).
FailureOr<LayoutAttr> toLayout(shard::ShardingOp sharding, shard::GridOp grid,
                               unsigned argIndex, RankedTensorType type) {
  auto fail = [&]() {
    return sharding.emitOpError() << "on argument #" << argIndex << ": ";
  };
  if (!sharding.getStaticHaloSizes().empty() ||
      !sharding.getDynamicHaloSizes().empty()) {
    fail() << "halo sizes have no fsdp meaning: the shards of a parameter do "
              "not overlap";
    return failure();
  }
  if (!sharding.getStaticShardedDimsOffsets().empty() ||
      !sharding.getDynamicShardedDimsOffsets().empty()) {
    fail() << "sharded_dims_offsets have no fsdp meaning: fsdp splits a dim "
              "by its uneven policy (ceil or balanced), not by given offsets";
    return failure();
  }
  MLIRContext *ctx = sharding.getContext();
  int64_t gridRank = grid.getRank();
  SmallVector<Attribute> placements(gridRank, ReplicateAttr::get(ctx));
  auto splitAxes = sharding.getSplitAxes().getAxes();
  if (static_cast<int64_t>(splitAxes.size()) > type.getRank()) {
    fail() << "split_axes has " << splitAxes.size()
           << " entries but the argument has rank " << type.getRank();
    return failure();
  }
  for (auto [dim, axes] : llvm::enumerate(splitAxes)) {
    ArrayRef<int16_t> list = axes.asArrayRef();
    for (auto [i, axis] : llvm::enumerate(list)) {
      if (axis < 0 || axis >= gridRank) {
        fail() << "split axis " << axis << " of dim " << dim
               << " is not an axis of grid @" << grid.getSymName() << " ("
               << gridRank << " axes)";
        return failure();
      }
      if (i > 0 && list[i - 1] > axis) {
        auto diag = fail();
        diag << "dim " << dim << " is split over grid axes [";
        llvm::interleaveComma(list, diag);
        diag << "]; fsdp nests the axes of one dim in grid order, so they "
                "must be increasing";
        return failure();
      }
      if (!isa<ReplicateAttr>(placements[axis])) {
        fail() << "grid axis " << axis << " splits more than one dim";
        return failure();
      }
      placements[axis] = ShardAttr::get(ctx, dim);
    }
  }
  return LayoutAttr::get(ctx, FlatSymbolRefAttr::get(grid.getSymNameAttr()),
                         ArrayAttr::get(ctx, placements), UnevenPolicy::ceil);
}

struct ImportShardPass
    : public mlir::fsdp::impl::FSDPImportShardBase<ImportShardPass> {
  using FSDPImportShardBase::FSDPImportShardBase;

  /// The layout `annotations` give argument #`i`; clears `ok` at the first
  /// bad one (the layout is then that of the annotations before it).
  static LayoutAttr annotatedLayout(MutableArrayRef<shard::ShardOp> annotations,
                                    unsigned i, RankedTensorType type,
                                    SymbolTableCollection &symbols, bool &ok) {
    LayoutAttr layout;
    for (shard::ShardOp s : annotations) {
      auto sharding = s.getSharding().getDefiningOp<shard::ShardingOp>();
      if (!sharding) {
        s.emitOpError() << "on argument #" << i
                        << ": the sharding must come from a shard.sharding "
                           "op in the function";
        ok = false;
        break;
      }
      shard::GridOp grid =
          shard::getGridOrNull(sharding, sharding.getGridAttr(), symbols);
      if (!grid) {
        sharding.emitOpError()
            << "refers to unknown grid " << sharding.getGridAttr();
        ok = false;
        break;
      }
      FailureOr<LayoutAttr> next = toLayout(sharding, grid, i, type);
      if (failed(next)) {
        ok = false;
        break;
      }
      if (layout && layout != *next) {
        InFlightDiagnostic diag =
            s.emitOpError()
            << "gives argument #" << i << " a second sharding (" << *next
            << " after " << layout << "); an fsdp parameter has one layout";
        diag.attachNote(annotations.front().getLoc())
            << "the first sharding is here";
        ok = false;
        break;
      }
      layout = *next;
    }
    return layout;
  }

  LogicalResult convertFunction(func::FuncOp func,
                                SymbolTableCollection &symbols) {
    // Parameters are the arguments some result is the gradient of; without
    // any fsdp.grad_of every annotated argument is one.
    llvm::SmallDenseSet<int64_t> gradOf;
    for (unsigned r = 0, e = func.getNumResults(); r < e; ++r)
      if (auto idx = func.getResultAttrOfType<IntegerAttr>(r, kGradOfAttrName))
        gradOf.insert(idx.getInt());

    // The annotations of every argument, in program order.
    llvm::SmallVector<SmallVector<shard::ShardOp>> annotationsOf(
        func.getNumArguments());
    func.walk([&](shard::ShardOp s) {
      auto arg = dyn_cast<BlockArgument>(s.getSrc());
      if (arg && arg.getOwner()->getParentOp() == func.getOperation())
        annotationsOf[arg.getArgNumber()].push_back(s);
    });

    bool ok = true;
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      MutableArrayRef<shard::ShardOp> annotations = annotationsOf[i];
      if (annotations.empty())
        continue;
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      LayoutAttr layout = annotatedLayout(annotations, i, type, symbols, ok);
      if (!layout)
        continue;
      if (func.getArgAttr(i, kLayoutAttrName)) {
        annotations.front().emitOpError()
            << "annotates argument #" << i
            << ", which already has an fsdp.layout";
        ok = false;
        continue;
      }
      // A frozen parameter (fsdp.frozen) has a layout and no gradient; any
      // other annotated argument without one is a data argument.
      if (!gradOf.empty() && !gradOf.contains(i) &&
          !func.getArgAttr(i, kFrozenAttrName)) {
        annotations.front().emitOpError()
            << "annotates argument #" << i
            << ", but no result is its gradient (fsdp.grad_of); only "
               "parameters carry layouts in an fsdp step, data arguments are "
               "this rank's micro-batch at its local shape (mark a frozen "
               "parameter with fsdp.frozen)";
        ok = false;
        continue;
      }
      func.setArgAttr(i, kLayoutAttrName, layout);
      for (shard::ShardOp s : annotations) {
        s.getResult().replaceAllUsesWith(arg);
        s.erase();
      }
    }
    return success(ok);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;

    // Grids first: every one must become a mesh.
    SmallVector<shard::GridOp> grids(module.getOps<shard::GridOp>());
    bool ok = true;
    for (shard::GridOp grid : grids) {
      if (ShapedType::isDynamicShape(grid.getShape())) {
        grid.emitOpError() << "has a dynamic size; an fsdp mesh has static "
                              "axis sizes";
        ok = false;
      }
      if (!axisNames.empty() &&
          static_cast<int64_t>(axisNames.size()) != grid.getRank()) {
        grid.emitOpError() << "has " << grid.getRank()
                           << " axes but axis-names gives " << axisNames.size()
                           << " name(s)";
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();

    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(convertFunction(func, symbols)))
        ok = false;
    if (!ok)
      return signalPassFailure();

    // Shardings no annotation uses any more go; any other shard op left has
    // no fsdp meaning (the collectives are fsdp-opt's to insert).
    module.walk([](shard::ShardingOp op) {
      if (op->use_empty())
        op.erase();
    });
    module.walk(
        [&](Operation *op) {
          Dialect *dialect = op->getDialect();
          if (isa<shard::GridOp, shard::ShardingOp>(op) || !dialect ||
              !isa<shard::ShardDialect>(dialect))
            return;
          if (isa<shard::ShardOp>(op))
            op->emitOpError()
                << "annotates a value that is not a function argument; fsdp "
                   "layouts describe parameters only (the partitioner decides "
                   "how intermediate values are placed)";
          else
            op->emitOpError() << "has no fsdp meaning in a step: fsdp-opt "
                                 "inserts the collectives itself";
          ok = false;
        });
    if (!ok)
      return signalPassFailure();

    OpBuilder builder(module.getContext());
    for (shard::GridOp grid : grids) {
      SmallVector<Attribute> names;
      for (int64_t a = 0; a < grid.getRank(); ++a)
        names.push_back(builder.getStringAttr(
            axisNames.empty() ? "a" + std::to_string(a) : axisNames[a]));
      builder.setInsertionPoint(grid);
      MeshOp::create(builder, grid.getLoc(), grid.getSymNameAttr(),
                     builder.getArrayAttr(names),
                     builder.getDenseI64ArrayAttr(grid.getShape()));
      grid.erase();
    }
  }
};

} // namespace

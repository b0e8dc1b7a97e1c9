//===- LayoutReport.cpp - print every rank's shard ------------------------===//

#include "ReportUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLAYOUTREPORT
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

namespace {
void printShape(llvm::raw_ostream &os, llvm::ArrayRef<int64_t> shape) {
  if (shape.empty()) {
    os << "scalar";
    return;
  }
  llvm::interleave(shape, os, "x");
}

void reportValue(llvm::raw_ostream &os, StringRef what, LayoutAttr layout,
                 RankedTensorType globalType, MeshOp mesh, bool tpLocal) {
  lm::Layout model = layout.toLayout(mesh.getAxisSizes());
  // A TP-local value: report the global tensor the layout describes (under
  // tp_shard only once fsdp-tensor-parallel has made the function TP-local).
  std::vector<int64_t> shape = lm::tensorParallelGlobalShape(
      model, globalType.getShape().vec(), tpLocal);
  int64_t elemBytes =
      std::max<int64_t>(1, globalType.getElementTypeBitWidth() / 8);
  os << what << ": " << globalType << " " << layout << "\n";
  os << "  mesh @" << mesh.getSymName() << " [";
  for (auto [i, n] : llvm::enumerate(mesh.getAxisNames()))
    os << (i ? ", " : "") << cast<StringAttr>(n).getValue() << " = "
       << mesh.getAxisSizes()[i];
  os << "], slot ";
  printShape(os, lm::slotShape(model, shape));
  os << "\n";
  for (int64_t r = 0, w = mesh.getWorldSize(); r < w; ++r) {
    lm::LocalShard s = lm::localShard(model, shape, r);
    os << "  rank " << r << " (";
    llvm::interleaveComma(s.coords, os);
    os << "): local ";
    printShape(os, s.localShape);
    os << " offsets [";
    llvm::interleaveComma(s.offsets, os);
    os << "] slot ";
    printShape(os, s.slotShape);
    os << " padding " << (s.slotElements() - s.localElements()) * elemBytes
       << " bytes";
    for (auto [d, ds] : llvm::enumerate(s.dims)) {
      bool sharded = !lm::axesShardingDim(model, d).empty();
      if (!sharded)
        continue;
      os << " dim" << d << " {";
      llvm::interleaveComma(ds.ranges, os, [&](const lm::Range &rg) {
        os << "[" << rg.begin << ", " << rg.end << ")";
      });
      os << "}";
    }
    os << "\n";
  }
}

struct LayoutReportPass
    : public mlir::fsdp::impl::FSDPLayoutReportBase<LayoutReportPass> {
  using Base::Base;
  void runOnOperation() override {
    auto out = mlir::fsdp::detail::openReport(getOperation(), outputFile);
    if (!out)
      return signalPassFailure();
    llvm::raw_ostream &os = out->os();
    SymbolTableCollection tables;
    getOperation().walk([&](FunctionOpInterface func) {
      auto report = [&](DictionaryAttr attrs, Type type, std::string what) {
        if (!attrs)
          return;
        auto layout = attrs.getAs<LayoutAttr>(kLayoutAttrName);
        if (!layout)
          return;
        if (auto global = attrs.getAs<TypeAttr>(kGlobalTypeAttrName))
          type = global.getValue();
        if (auto name = attrs.getAs<StringAttr>(kNameAttrName))
          what += " (" + name.str() + ")";
        MeshOp mesh = lookupMesh(func, layout.getMesh(), &tables);
        auto tensorType = dyn_cast<RankedTensorType>(type);
        if (!mesh || !tensorType)
          return; // The verifier already reported it.
        reportValue(os, what, layout, tensorType, mesh,
                    func->hasAttr(kTPLocalAttrName));
      };
      std::string fname = "@" + func.getName().str();
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        report(func.getArgAttrDict(i), func.getArgumentTypes()[i],
               fname + " argument #" + std::to_string(i));
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        report(func.getResultAttrDict(i), func.getResultTypes()[i],
               fname + " result #" + std::to_string(i));
    });
    out->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace

//===- ReportUtils.h - what the report passes share -------------*- C++ -*-===//
//
// Internal to lib/Dialect/FSDP/Transforms: the report file and the mesh a
// function's report describes, written alike by fsdp-comm-report and
// fsdp-memory-report (text and JSON).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_REPORTUTILS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_REPORTUTILS_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace mlir::fsdp::detail {

/// Opens a report pass's output file ("-" is stdout); on failure reports it
/// on `op` and returns null.
inline std::unique_ptr<llvm::ToolOutputFile> openReport(Operation *op,
                                                        StringRef path) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(path, &error);
  if (!out)
    op->emitError() << "cannot open report file: " << error;
  return out;
}

/// Bytes of a statically shaped tensor or memref (sub-byte elements packed);
/// 0 when the size is unknown.
inline int64_t bytesOf(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  Type elem = shaped.getElementType();
  int64_t bits = 0;
  if (elem.isIntOrFloat())
    bits = elem.getIntOrFloatBitWidth();
  else if (elem.isIndex())
    bits = 64;
  else if (auto complex = dyn_cast<ComplexType>(elem))
    bits = 2 * complex.getElementType().getIntOrFloatBitWidth();
  return (shaped.getNumElements() * bits + 7) / 8;
}

/// Adds the zero padding of argument `arg`'s slots (slot minus true shard,
/// in bytes) to `padding[rank]` of every rank; an argument without a
/// layout, a static global type or a valid layout adds nothing.
inline void addSlotPadding(FunctionOpInterface func, unsigned arg,
                           SymbolTableCollection &tables,
                           std::vector<int64_t> &padding) {
  auto layout = func.getArgAttrOfType<LayoutAttr>(arg, kLayoutAttrName);
  auto global = func.getArgAttrOfType<TypeAttr>(arg, kGlobalTypeAttrName);
  if (!layout || !global)
    return;
  auto type = dyn_cast<RankedTensorType>(global.getValue());
  MeshOp mesh = lookupMesh(func, layout.getMesh(), &tables);
  if (!type || !type.hasStaticShape() || !mesh)
    return;
  ::fsdp::layout::Layout model =
      layout.toDataParallelLayout(mesh.getAxisSizes());
  std::vector<int64_t> shape = type.getShape().vec();
  if (::fsdp::layout::validate(model, shape))
    return; // the verifier reports it
  int64_t elementBytes =
      bytesOf(RankedTensorType::get({1}, type.getElementType()));
  int64_t ranks = std::min<int64_t>(padding.size(), mesh.getWorldSize());
  for (int64_t r = 0; r < ranks; ++r) {
    ::fsdp::layout::LocalShard s = ::fsdp::layout::localShard(model, shape, r);
    padding[r] += (s.slotElements() - s.localElements()) * elementBytes;
  }
}

/// The mesh a function's report is about (no name: none, one rank).
struct ReportMesh {
  std::string name;
  std::vector<std::string> axisNames;
  std::vector<int64_t> shape;
  int64_t ranks = 1;

  static ReportMesh of(MeshOp mesh) {
    ReportMesh m;
    if (!mesh)
      return m;
    m.name = mesh.getSymName().str();
    for (Attribute a : mesh.getAxisNames())
      m.axisNames.push_back(cast<StringAttr>(a).str());
    m.shape.assign(mesh.getAxisSizes().begin(), mesh.getAxisSizes().end());
    m.ranks = mesh.getWorldSize();
    return m;
  }

  /// `mesh @m [dp = 2, fsdp = 4], 8 ranks` or `no mesh, 1 rank`.
  void print(llvm::raw_ostream &os) const {
    if (!name.empty()) {
      os << "mesh @" << name << " [";
      for (auto [i, n] : llvm::enumerate(axisNames))
        os << (i ? ", " : "") << n << " = " << shape[i];
      os << "], ";
    } else {
      os << "no mesh, ";
    }
    os << ranks << " rank" << (ranks == 1 ? "" : "s");
  }

  /// The attributes `mesh`, `mesh_axes`, `mesh_shape` (with a mesh) and
  /// `ranks` of the function's JSON object.
  void writeJson(llvm::json::OStream &j) const {
    if (!name.empty()) {
      j.attribute("mesh", name);
      j.attributeArray("mesh_axes", [&] {
        for (const std::string &n : axisNames)
          j.value(n);
      });
      j.attributeArray("mesh_shape", [&] {
        for (int64_t size : shape)
          j.value(size);
      });
    }
    j.attribute("ranks", ranks);
  }
};

/// The `per_rank` array of a function's JSON object: per rank, an object
/// with its `rank`, what `fields` writes (a static account: the same for
/// every rank) and its `padding_bytes`.
inline void writePerRankJson(llvm::json::OStream &j, int64_t ranks,
                             ArrayRef<int64_t> padding,
                             llvm::function_ref<void()> fields) {
  j.attributeArray("per_rank", [&] {
    for (int64_t rank = 0; rank < ranks; ++rank)
      j.object([&] {
        j.attribute("rank", rank);
        fields();
        j.attribute("padding_bytes", padding[rank]);
      });
  });
}

} // namespace mlir::fsdp::detail

#endif

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

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

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

} // namespace mlir::fsdp::detail

#endif

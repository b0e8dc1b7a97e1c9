//===- ManifestWriter.h - the manifest of a lowered module --------*- C++
//-*-===//
//
// The compiler side of Manifest.h: reads the signatures a lowered module
// records (`fsdp.signatures`, `#fsdp.signature`), checks every lowered
// function against its signature, and writes the manifest the runner reads.
// Part of the JIT library (the only part of the runner that links MLIR).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_MANIFESTWRITER_H
#define FSDP_RUNNER_MANIFESTWRITER_H

#include "Json.h"
#include "Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp::run {

/// What the manifest says besides the module.
struct ManifestOptions {
  /// Only this entry (empty: the module's only one), with the runner's
  /// messages when the module has none, several, or not this one; unset:
  /// every entry.
  std::optional<std::string> entry;
  /// The file the module came from (its name is recorded).
  std::string source;
  /// The CPU the code is for and the host features it may use.
  std::string cpu;
  std::vector<std::string> features;
};

/// The manifest of `module`. Checks each entry's lowered function against
/// its signature: `_mlir_ciface_<entry>` takes one pointer per argument
/// plus one for the results area, `@<entry>` takes that area and one
/// descriptor of the recorded rank per argument, returns nothing, and
/// stores one descriptor of the recorded rank per result at its offset.
/// Then strips every fsdp attribute and mesh, so that only the LLVM
/// dialect is left for translation.
llvm::Expected<json::Object> writeManifest(mlir::ModuleOp module,
                                           const ManifestOptions &o);

} // namespace fsdp::run

#endif

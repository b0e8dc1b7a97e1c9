//===- Manifest.h - the interface between the compiler and the runner -----===//
//
// A step's manifest is the whole of what the runner knows about compiled
// code: a versioned JSON object with the target, the meshes, and per entry
// the symbol of its packed wrapper, its ports (names, dtypes, slot and
// global shapes, layouts with every rank's owned ranges, the training
// contract), its memory plan and whether it is a compute=gpu step. The
// compiler writes it (ManifestWriter.h) into both forms a step's code
// takes: a shared library built by fsdp-compile (section `.fsdp.manifest`)
// and the JIT's in-memory result (kept next to its cached objects). The
// runner reads it here, with no MLIR, and checks it as a file it does not
// trust.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_MANIFEST_H
#define FSDP_RUNNER_MANIFEST_H

#include "Program.h"

#include "Json.h"

#include <string>
#include <vector>

namespace fsdp::run {

inline constexpr char kManifestSection[] = ".fsdp.manifest";
/// The version of the manifest's JSON layout. Keys are added without a new
/// version when a reader may ignore them (a compute=gpu step's `gpu`).
/// Version 2: the stub module is gone; each port's `layout_spec` and each
/// entry's `memory_plan` say what it said.
inline constexpr int kManifestVersion = 2;

/// A parsed manifest and the facts a loader checks before running code.
struct StepManifest {
  json::Value json = nullptr;
  int64_t abiVersion = 0;
  std::string cpu;
  std::vector<std::string> features;
  /// The names of the entries, in order.
  std::vector<std::string> entries;
};

/// Parses and checks the manifest `text` of `source` (the file, for
/// messages): its format, version and top-level keys.
Expected<StepManifest> parseManifest(std::string_view text,
                                     const std::string &source);

/// The program of `entry` (the only entry when empty), every port checked:
/// safe and unique names, known dtypes, shapes that fit, valid layouts on
/// the entry's mesh whose slots are the ports' shapes, a training contract
/// whose indices and types agree. An error names the entry and the port.
Expected<Program> readProgram(const StepManifest &manifest,
                              std::string_view entry,
                              const std::string &source);

/// The manifest object of one entry (what readProgram reads back).
json::Object entryJSON(const Program &prog);

} // namespace fsdp::run

#endif

//===- Checkpoint.h - sharded checkpoints of a training run -----*- C++ -*-===//
//
// A checkpoint is a directory `<save>/step-<K>` holding one file per rank
// (`rank-<R>.bin`, the rank's own shards of every fed-back argument, as
// its step function holds them, padding included) and `metadata.json`
// (names, dtypes, global shapes, layouts, and for every shard the file,
// byte range, CRC-32 and the global indices it holds), written by the
// ranks into `<save>/.step-<K>.partial` and renamed once complete.
// Loading reassembles each tensor from its shards and cuts it by the
// running program's layouts, so a checkpoint loads on any mesh.
// docs/RUNTIME.md describes the format.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDPRUN_CHECKPOINT_H
#define FSDP_TOOLS_FSDPRUN_CHECKPOINT_H

#include "Npy.h"
#include "Program.h"

#include "fsdp/Runner/Support.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::run::checkpoint {

/// The arguments a checkpoint holds: those fed back after each step.
std::vector<int64_t> savedArgs(const Program &prog);

/// `<save>/step-<K>` and its temporary sibling `<save>/.step-<K>.partial`.
std::string finalDir(const std::string &saveDir, int64_t step);
std::string partialDir(const std::string &saveDir, int64_t step);

/// Writes this rank's file into `dir`: its primary replica's shard of every
/// saved argument (`buffers` indexed by argument). `crcs` receives one
/// CRC-32 per saved argument (0 where the rank writes none).
bool writeRankFile(const std::string &dir, const Program &prog,
                   const std::vector<Bytes> &buffers, int64_t rank,
                   std::vector<uint32_t> &crcs, std::string &error);

/// Writes `metadata.json` into `dir` (the last file of a checkpoint):
/// `crcs[r]` is rank r's list from writeRankFile.
bool writeMetadata(const std::string &dir, const Program &prog, int64_t step,
                   const std::vector<std::vector<uint32_t>> &crcs,
                   std::string &error);

/// Renames a complete `partial` directory to `final`; an existing `final`
/// is replaced only after the new one is in place.
bool publish(const std::string &partial, const std::string &final,
             std::string &error);

/// A loaded checkpoint: the training steps it has taken and the global
/// value of every saved argument of `prog` (indexed by argument; empty for
/// others).
struct Loaded {
  std::string dir;
  int64_t step = 0;
  std::vector<npy::Array> values;
};

/// Loads the checkpoint `dir` (a step directory, or the newest complete
/// `step-<K>` in it) for `prog`. An error, with the names, when its
/// tensors are not the program's, or when a shard file is truncated or
/// corrupt.
Expected<Loaded> load(const std::string &dir, const Program &prog);

} // namespace fsdp::run::checkpoint

#endif

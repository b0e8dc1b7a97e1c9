//===- Shards.h - global arrays to rank buffers and back --------*- C++ -*-===//
//
// Cuts a global input into the buffer one rank's function takes (its padded
// slot, or its rows of the batch) and assembles a global result from every
// rank's piece, by the layouts the compiler recorded.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDPRUN_SHARDS_H
#define FSDP_TOOLS_FSDPRUN_SHARDS_H

#include "Npy.h"
#include "Program.h"

#include <vector>

namespace fsdp::run {

/// A strided memref descriptor as the C interface passes it.
struct Descriptor {
  std::vector<int64_t> words; // allocated, aligned, offset, sizes, strides
  static Descriptor forBuffer(void *data, llvm::ArrayRef<int64_t> shape);
};

/// This rank's buffer of input `p`: its padded slot, or its batch rows.
std::vector<char> shardInput(const Port &p, const npy::Array &global,
                             int64_t rank);

/// Reads one result out of the C interface's result struct (`words` points
/// at its descriptor).
std::vector<char> copyResult(const Port &p, const int64_t *words);

/// The global value of result `p` from every rank's piece: the owned
/// elements of each rank for a layout (Partial(sum) pieces added up,
/// replicas checked to agree bit for bit), else rank 0's value.
npy::Array assembleResult(const Port &p,
                          const std::vector<const std::vector<char> *> &pieces);

} // namespace fsdp::run

#endif

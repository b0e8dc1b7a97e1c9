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

#include "fsdp/Runner/Support.h"

#include <functional>
#include <vector>

namespace fsdp::run {

/// A strided memref descriptor as the C interface passes it.
struct Descriptor {
  std::vector<int64_t> words; // allocated, aligned, offset, sizes, strides
  static Descriptor forBuffer(void *data, Span<const int64_t> shape);
};

/// This rank's buffer of input `p`: its padded slot, or its batch rows.
Bytes shardInput(const Port &p, const npy::Array &global, int64_t rank);
/// The same from the bytes of a global array of `p`'s global shape (the
/// batch times the world size for an input without a layout).
Bytes shardInput(const Port &p, const char *global, int64_t rank);
/// The same into `out`, whose allocation is reused when it fits.
void shardInput(const Port &p, const char *global, int64_t rank, Bytes &out);

/// The byte offset in the global array of rank `rank`'s buffer of input
/// `p` when that buffer is one contiguous run of it (no padding, no partial
/// sum: its rows of the first sharded dim, every element of the others),
/// else -1.
int64_t contiguousShardOffset(const Port &p, int64_t rank);

/// Whether `rank` writes `p`'s shard to a checkpoint: the first replica
/// (coordinate 0 on every axis that does not shard it; rank 0 without a
/// layout).
bool isPrimaryReplica(const Port &p, int64_t rank);

/// Copies the elements a slot owns (per dim, the global indices of
/// `ranges` in slot order) into a row-major global array.
void placeOwned(const std::vector<std::vector<::fsdp::layout::Range>> &ranges,
                const std::vector<int64_t> &slotShape,
                const std::vector<int64_t> &globalShape, int64_t elementBytes,
                const char *slot, char *global);

/// Reads one result out of the C interface's result struct (`words` points
/// at its descriptor).
Bytes copyResult(const Port &p, const int64_t *words);
/// The same into `out`, whose allocation is reused when it fits.
void copyResult(const Port &p, const int64_t *words, Bytes &out);

/// Whether the memref descriptor `words` of `p` is row-major from its
/// aligned pointer plus offset (one copy moves it).
bool isRowMajor(const Port &p, const int64_t *words);

/// The global value of result `p` from every rank's piece: the owned
/// elements of each rank for a layout (Partial(sum) pieces added up,
/// replicas checked to agree bit for bit), else rank 0's value.
/// `placed`, when given, already holds the first replicas' elements
/// (placeShard; their pieces are not read), and becomes the value.
Expected<npy::Array> assembleResult(const Port &p,
                                    const std::vector<const Bytes *> &pieces,
                                    Bytes *placed = nullptr);

/// Whether the global value of result `p` can be assembled by the ranks
/// themselves, each first replica placing its elements (a layout without
/// Partial).
bool placeable(const Port &p);

/// Copies the elements rank `rank`'s result `p` (its descriptor `words`)
/// owns into the global array `global`.
void placeShard(const Port &p, int64_t rank, const int64_t *words,
                char *global);
/// The same through `put(globalByteOffset, data, bytes)`, run by run.
void placeShard(const Port &p, int64_t rank, const int64_t *words,
                const std::function<void(int64_t, const char *, int64_t)> &put);

} // namespace fsdp::run

#endif

//===- Shards.cpp - global arrays to rank buffers and back ----------------===//

#include "Shards.h"

#include <cstring>

namespace lm = ::fsdp::layout;

namespace fsdp::run {

namespace {

/// Per dim of a shard: local position -> global index.
std::vector<std::vector<int64_t>> ownedIndices(const lm::LocalShard &shard) {
  std::vector<std::vector<int64_t>> index(shard.dims.size());
  for (size_t d = 0; d < shard.dims.size(); ++d)
    for (const lm::Range &r : shard.dims[d].ranges)
      for (int64_t x = r.begin; x < r.end; ++x)
        index[d].push_back(x);
  return index;
}

/// Splits the innermost dim into runs of consecutive global indices.
template <typename Fn>
void forEachInnerRun(const std::vector<int64_t> &inner, int64_t slotOff,
                     int64_t globalOff, Fn &fn) {
  size_t i = 0;
  while (i < inner.size()) {
    size_t j = i + 1;
    while (j < inner.size() && inner[j] == inner[j - 1] + 1)
      ++j;
    fn(slotOff + int64_t(i), globalOff + inner[i], int64_t(j - i));
    i = j;
  }
}

/// Calls `fn(slotOffset, globalOffset, count)` for every contiguous run of
/// elements this rank owns along the innermost dim, in slot (row-major)
/// order.
template <typename Fn>
void forEachOwnedRowRun(const lm::LocalShard &shard,
                        const std::vector<int64_t> &global, Fn &fn) {
  size_t rank = global.size();
  if (rank == 0)
    return fn(0, 0, 1);
  std::vector<std::vector<int64_t>> index = ownedIndices(shard);
  for (const auto &idx : index)
    if (idx.empty())
      return;
  std::vector<int64_t> slotStride(rank, 1), globalStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    slotStride[d] = slotStride[d + 1] * shard.slotShape[d + 1];
    globalStride[d] = globalStride[d + 1] * global[d + 1];
  }
  std::vector<int64_t> pos(rank, 0);
  while (true) {
    int64_t slotOff = 0, globalOff = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      slotOff += pos[d] * slotStride[d];
      globalOff += index[d][pos[d]] * globalStride[d];
    }
    forEachInnerRun(index[rank - 1], slotOff, globalOff, fn);
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++pos[d] < int64_t(index[d].size()))
        break;
      pos[d] = 0;
    }
    if (d == size_t(-1))
      return;
  }
}

/// Calls `fn(slotOffset, globalOffset, count)` for every contiguous run of
/// elements this rank owns, in slot (row-major) order. Runs that continue
/// each other in both the slot and the global array are one run: whole
/// rows of a shard cut along its first dimension are one copy (or one
/// write), not one per row.
template <typename Fn>
void forEachOwnedRun(const lm::LocalShard &shard,
                     const std::vector<int64_t> &global, Fn fn) {
  int64_t slotAt = 0, globalAt = 0, count = 0;
  auto merge = [&](int64_t so, int64_t go, int64_t n) {
    if (count && so == slotAt + count && go == globalAt + count) {
      count += n;
      return;
    }
    if (count)
      fn(slotAt, globalAt, count);
    slotAt = so, globalAt = go, count = n;
  };
  forEachOwnedRowRun(shard, global, merge);
  if (count)
    fn(slotAt, globalAt, count);
}

/// Whether `rank` holds the whole of a Partial(sum) value (coordinate 0 on
/// every partial axis); the other ranks of its group hold zeros.
bool ownsPartial(const lm::Layout &layout, int64_t rank) {
  std::vector<int64_t> coords = lm::rankToCoords(layout.meshShape, rank);
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].kind == lm::Placement::Kind::Partial &&
        coords[a] != 0)
      return false;
  return true;
}

bool hasPartial(const lm::Layout &layout) {
  for (const lm::Placement &p : layout.placements)
    if (p.kind == lm::Placement::Kind::Partial)
      return true;
  return false;
}

/// Adds (Partial) or places (checking replicas) one element of a piece.
struct ElementSink {
  const Port &port;
  npy::Array &out;
  Bytes written;
  bool partial;
  int64_t bytes;
  std::string error; // the first disagreement of replicas

  void put(const char *src, int64_t g, int64_t rank) {
    char *dst = out.data.data() + g * bytes;
    if (partial && port.isF32())
      *reinterpret_cast<float *>(dst) += *reinterpret_cast<const float *>(src);
    else if (partial)
      *reinterpret_cast<double *>(dst) +=
          *reinterpret_cast<const double *>(src);
    else if (written[g] && std::memcmp(dst, src, bytes) != 0) {
      if (error.empty())
        error = "result '" + port.name + "': replicas disagree at element " +
                std::to_string(g) + " (rank " + std::to_string(rank) + ")";
    } else
      std::memcpy(dst, src, bytes);
    written[g] = 1;
  }
};

} // namespace

Descriptor Descriptor::forBuffer(void *data, Span<const int64_t> shape) {
  Descriptor d;
  d.words.push_back(reinterpret_cast<int64_t>(data));
  d.words.push_back(reinterpret_cast<int64_t>(data));
  d.words.push_back(0);
  for (int64_t s : shape)
    d.words.push_back(s);
  int64_t stride = 1;
  std::vector<int64_t> strides(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  d.words.insert(d.words.end(), strides.begin(), strides.end());
  return d;
}

Bytes shardInput(const Port &p, const npy::Array &global, int64_t rank) {
  return shardInput(p, global.data.data(), rank);
}

Bytes shardInput(const Port &p, const char *global, int64_t rank) {
  Bytes buf;
  shardInput(p, global, rank, buf);
  return buf;
}

void shardInput(const Port &p, const char *global, int64_t rank, Bytes &buf) {
  int64_t bytes = p.elementBytes;
  buf.resize(size_t(p.elements() * bytes));
  if (buf.empty())
    return;
  if (p.layout && !ownsPartial(*p.layout, rank)) {
    // A Partial(sum) input: one rank per group holds the value.
    std::memset(buf.data(), 0, buf.size());
    return;
  }
  if (!p.layout && (p.rank() == 0 || p.rankLocal)) {
    std::memcpy(buf.data(), global, buf.size()); // every rank's own copy
    return;
  }
  if (!p.layout) {
    std::memcpy(buf.data(), global + rank * buf.size(), buf.size());
    return;
  }
  lm::LocalShard s = lm::localShard(*p.layout, p.globalShape, rank);
  // The padding is zeros; the owned runs are copied over them.
  if (s.localElements() != s.slotElements())
    std::memset(buf.data(), 0, buf.size());
  forEachOwnedRun(s, p.globalShape, [&](int64_t so, int64_t go, int64_t n) {
    std::memcpy(buf.data() + so * bytes, global + go * bytes, n * bytes);
  });
}

int64_t contiguousShardOffset(const Port &p, int64_t rank) {
  int64_t bytes = p.slotBytes();
  if (!p.layout)
    return p.rank() == 0 || p.rankLocal ? 0 : rank * bytes;
  if (hasPartial(*p.layout))
    return -1;
  lm::LocalShard s = lm::localShard(*p.layout, p.globalShape, rank);
  if (s.localElements() != s.slotElements())
    return -1;
  // Whole dims after the first one that is cut, one range in it.
  for (size_t d = 0; d < s.dims.size(); ++d) {
    const std::vector<lm::Range> &r = s.dims[d].ranges;
    bool whole =
        r.size() == 1 && r[0].begin == 0 && r[0].end == p.globalShape[d];
    if (whole)
      continue;
    if (r.size() != 1)
      return -1;
    for (size_t e = d + 1; e < s.dims.size(); ++e)
      if (s.dims[e].ranges.size() != 1 || s.dims[e].ranges[0].begin != 0 ||
          s.dims[e].ranges[0].end != p.globalShape[e])
        return -1;
    int64_t inner = p.elementBytes;
    for (size_t e = d + 1; e < s.dims.size(); ++e)
      inner *= p.globalShape[e];
    // Leading dims must be whole of extent 1 for one run.
    for (size_t e = 0; e < d; ++e)
      if (p.globalShape[e] != 1)
        return -1;
    return r[0].begin * inner;
  }
  return 0;
}

bool isPrimaryReplica(const Port &p, int64_t rank) {
  if (!p.layout)
    return rank == 0;
  // A tensor-parallel split (tp_shard) is a sharding here.
  lm::Layout owned = lm::ownershipView(*p.layout);
  std::vector<int64_t> coords = lm::rankToCoords(owned.meshShape, rank);
  for (size_t a = 0; a < owned.placements.size(); ++a)
    if (!owned.placements[a].isSharding() && coords[a] != 0)
      return false;
  return true;
}

void placeOwned(const std::vector<std::vector<lm::Range>> &ranges,
                const std::vector<int64_t> &slotShape,
                const std::vector<int64_t> &globalShape, int64_t elementBytes,
                const char *slot, char *global) {
  lm::LocalShard s;
  s.slotShape = slotShape;
  s.dims.resize(ranges.size());
  for (size_t d = 0; d < ranges.size(); ++d)
    s.dims[d].ranges = ranges[d];
  forEachOwnedRun(s, globalShape, [&](int64_t so, int64_t go, int64_t n) {
    std::memcpy(global + go * elementBytes, slot + so * elementBytes,
                n * elementBytes);
  });
}

bool isRowMajor(const Port &p, const int64_t *words) {
  int64_t rank = p.rank();
  const int64_t *sizes = words + 3, *strides = words + 3 + rank;
  int64_t expect = 1;
  bool contiguous = true;
  for (int64_t d = rank - 1; d >= 0; --d) {
    contiguous &= sizes[d] == 1 || strides[d] == expect;
    expect *= sizes[d];
  }
  return contiguous;
}

Bytes copyResult(const Port &p, const int64_t *words) {
  Bytes out;
  copyResult(p, words, out);
  return out;
}

void copyResult(const Port &p, const int64_t *words, Bytes &out) {
  int64_t rank = p.rank(), bytes = p.elementBytes;
  const char *aligned = reinterpret_cast<const char *>(words[1]);
  int64_t offset = words[2];
  std::vector<int64_t> sizes(words + 3, words + 3 + rank),
      strides(words + 3 + rank, words + 3 + 2 * rank);
  out.resize(size_t(p.elements() * bytes));
  // A row-major buffer (what the lowering returns) is one copy.
  if (isRowMajor(p, words)) {
    if (!out.empty())
      std::memcpy(out.data(), aligned + offset * bytes, out.size());
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < p.elements(); ++e) {
    int64_t src = offset;
    for (int64_t d = 0; d < rank; ++d)
      src += idx[d] * strides[d];
    std::memcpy(out.data() + e * bytes, aligned + src * bytes, bytes);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
}

bool placeable(const Port &p) { return p.layout && !hasPartial(*p.layout); }

void placeShard(const Port &p, int64_t rank, const int64_t *words,
                char *global) {
  placeShard(p, rank, words, [&](int64_t at, const char *src, int64_t n) {
    std::memcpy(global + at, src, n);
  });
}

void placeShard(
    const Port &p, int64_t rank, const int64_t *words,
    const std::function<void(int64_t, const char *, int64_t)> &put) {
  int64_t bytes = p.elementBytes;
  Bytes copy;
  const char *slot;
  if (isRowMajor(p, words)) {
    slot = reinterpret_cast<const char *>(words[1]) + words[2] * bytes;
  } else {
    copyResult(p, words, copy);
    slot = copy.data();
  }
  lm::LocalShard s = lm::localShard(*p.layout, p.globalShape, rank);
  forEachOwnedRun(s, p.globalShape, [&](int64_t so, int64_t go, int64_t n) {
    put(go * bytes, slot + so * bytes, n * bytes);
  });
}

Expected<npy::Array> assembleResult(const Port &p,
                                    const std::vector<const Bytes *> &pieces,
                                    Bytes *placed) {
  npy::Array a;
  a.descr = p.dtype;
  a.shape = p.globalShape;
  if (!p.layout) {
    a.data = *pieces[0];
    return a;
  }
  bool partial = hasPartial(*p.layout);
  if (partial && !p.isF32() && !p.isF64())
    return makeError("result '" + p.name + "': partial sums need f32 or f64");
  int64_t bytes = p.elementBytes;
  if (!partial) {
    // The first replicas (coordinate 0 on every axis that does not shard)
    // own every element once between them: their runs fill the array, and
    // every other replica's runs must equal what is there.
    if (placed)
      a.data = std::move(*placed);
    else
      a.data.resize(size_t(p.globalElements() * bytes));
    for (size_t r = 0; r < pieces.size() && !placed; ++r) {
      if (!isPrimaryReplica(p, int64_t(r)))
        continue;
      lm::LocalShard s = lm::localShard(*p.layout, a.shape, int64_t(r));
      const char *piece = pieces[r]->data();
      forEachOwnedRun(s, a.shape, [&](int64_t so, int64_t go, int64_t n) {
        std::memcpy(a.data.data() + go * bytes, piece + so * bytes, n * bytes);
      });
    }
    for (size_t r = 0; r < pieces.size(); ++r) {
      if (isPrimaryReplica(p, int64_t(r)))
        continue;
      lm::LocalShard s = lm::localShard(*p.layout, a.shape, int64_t(r));
      const char *piece = pieces[r]->data();
      int64_t differs = -1;
      forEachOwnedRun(s, a.shape, [&](int64_t so, int64_t go, int64_t n) {
        const char *have = a.data.data() + go * bytes,
                   *mine = piece + so * bytes;
        if (differs >= 0 || !std::memcmp(have, mine, n * bytes))
          return;
        for (int64_t e = 0; e < n && differs < 0; ++e)
          if (std::memcmp(have + e * bytes, mine + e * bytes, bytes))
            differs = go + e;
      });
      if (differs >= 0)
        return makeError(
            "result '" + p.name + "': replicas disagree at element " +
            std::to_string(differs) + " (rank " + std::to_string(r) + ")");
    }
    return a;
  }
  a.data.assign(p.globalElements() * bytes, 0);
  ElementSink sink{p, a, Bytes(p.globalElements(), 0), partial, bytes};
  for (size_t r = 0; r < pieces.size(); ++r) {
    lm::LocalShard s = lm::localShard(*p.layout, a.shape, int64_t(r));
    const char *piece = pieces[r]->data();
    forEachOwnedRun(s, a.shape, [&](int64_t so, int64_t go, int64_t n) {
      for (int64_t e = 0; e < n; ++e)
        sink.put(piece + (so + e) * bytes, go + e, int64_t(r));
    });
  }
  if (!sink.error.empty())
    return makeError(sink.error);
  return a;
}

} // namespace fsdp::run

//===- Checkpoint.cpp - sharded checkpoints of a training run -------------===//

#include "Checkpoint.h"
#include "Files.h"
#include "Json.h"
#include "Shards.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace lm = ::fsdp::layout;

namespace fsdp::run::checkpoint {

namespace {

constexpr const char *kFormat = "fsdp-run-checkpoint";
constexpr int64_t kVersion = 1;

std::string rankFile(int64_t rank) {
  return "rank-" + std::to_string(rank) + ".bin";
}

/// Per dim, the global indices rank `rank`'s slot of `p` holds.
std::vector<std::vector<lm::Range>> ownedRanges(const Port &p, int64_t rank) {
  std::vector<int64_t> global = p.globalShape;
  std::vector<std::vector<lm::Range>> ranges;
  if (!p.layout) {
    for (int64_t d : global)
      ranges.push_back({lm::Range{0, d}});
    return ranges;
  }
  lm::LocalShard s = lm::localShard(*p.layout, global, rank);
  for (const lm::DimShard &d : s.dims)
    ranges.push_back(d.ranges);
  return ranges;
}

json::Array shapeJson(Span<const int64_t> shape) {
  json::Array a;
  for (int64_t d : shape)
    a.push_back(d);
  return a;
}

std::string kindOf(const Port &p) {
  if (p.stateOf)
    return "state";
  if (!p.optim.empty())
    return p.optim;
  return "parameter";
}

bool writeBytes(const std::string &path, std::string_view bytes,
                std::string &error) {
  return files::write(path, bytes.data(), bytes.size(), error);
}

/// The CRC-32 of zlib (and of the checkpoint format since version 1).
uint32_t crc32(const char *data, size_t size) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ uint8_t(data[i])) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

//===--- loading ----------------------------------------------------------===//

Error refuse(const std::string &dir, const std::string &why) {
  return makeError("checkpoint " + dir + ": " + why);
}

/// The step directory: `dir` itself when it has metadata.json, else its
/// complete `step-<K>` with the largest K.
Expected<std::string> chooseStepDir(const std::string &dir) {
  if (files::exists(dir + "/metadata.json"))
    return dir;
  if (!files::isDirectory(dir))
    return makeError("--resume: " + dir + " is not a directory");
  int64_t best = -1;
  std::string bestDir;
  for (const std::string &name : files::list(dir)) {
    if (!startsWith(name, "step-") || name.size() == 5 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos ||
        name.size() > 5 + 18)
      continue;
    int64_t k = std::strtoll(name.c_str() + 5, nullptr, 10);
    std::string path = dir + "/" + name;
    if (k > best && files::exists(path + "/metadata.json")) {
      best = k;
      bestDir = path;
    }
  }
  if (bestDir.empty())
    return makeError("--resume: " + dir +
                     " holds no complete checkpoint (no metadata.json, no "
                     "step-<K>/metadata.json)");
  return bestDir;
}

struct ShardRecord {
  std::string file;
  int64_t offset = 0, bytes = 0;
  uint32_t crc = 0;
  std::vector<int64_t> slotShape;
  std::vector<std::vector<lm::Range>> index;
};

struct TensorRecord {
  std::string name, dtype;
  std::vector<int64_t> globalShape;
  std::vector<ShardRecord> shards;
};

Expected<std::vector<int64_t>> readShape(const json::Value *v,
                                         const std::string &dir,
                                         const std::string &what) {
  const json::Array *a = v ? v->getAsArray() : nullptr;
  if (!a)
    return refuse(dir, "metadata.json: " + what + " is not a list");
  std::vector<int64_t> out;
  for (const json::Value &d : *a) {
    std::optional<int64_t> i = d.getAsInteger();
    if (!i || *i < 0)
      return refuse(dir, "metadata.json: " + what + " holds a bad size");
    out.push_back(*i);
  }
  return out;
}

Expected<ShardRecord> readShard(const json::Value &v, const std::string &dir,
                                const TensorRecord &t) {
  const json::Object *o = v.getAsObject();
  if (!o)
    return refuse(dir, "metadata.json: a shard of '" + t.name +
                           "' is not an object");
  ShardRecord s;
  std::optional<std::string_view> file = o->getString("file");
  std::optional<int64_t> offset = o->getInteger("offset"),
                         bytes = o->getInteger("bytes"),
                         crc = o->getInteger("crc32");
  if (!file || !offset || !bytes || !crc || *offset < 0 || *bytes < 0 ||
      !isSafeName(*file))
    return refuse(dir, "metadata.json: a shard of '" + t.name +
                           "' lacks a file, offset, bytes or crc32");
  s.file = std::string(*file);
  s.offset = *offset;
  s.bytes = *bytes;
  s.crc = uint32_t(*crc);
  auto slotShape = readShape(o->get("slot_shape"), dir, "slot_shape");
  if (!slotShape)
    return slotShape.takeError();
  s.slotShape = std::move(*slotShape);
  const json::Array *index = o->getArray("index");
  if (!index || index->size() != t.globalShape.size() ||
      s.slotShape.size() != t.globalShape.size())
    return refuse(dir, "metadata.json: a shard of '" + t.name +
                           "' has an index or slot shape of the wrong rank");
  for (size_t d = 0; d < index->size(); ++d) {
    const json::Array *ranges = (*index)[d].getAsArray();
    if (!ranges)
      return refuse(dir, "metadata.json: bad index of '" + t.name + "'");
    std::vector<lm::Range> dim;
    int64_t count = 0;
    for (const json::Value &r : *ranges) {
      auto range = readShape(&r, dir, "an index range");
      if (!range)
        return range.takeError();
      std::vector<int64_t> be = std::move(*range);
      if (be.size() != 2 || be[0] > be[1] || be[1] > t.globalShape[d])
        return refuse(dir, "metadata.json: an index range of '" + t.name +
                               "' is outside its global shape");
      dim.push_back(lm::Range{be[0], be[1]});
      count += be[1] - be[0];
    }
    if (count > s.slotShape[d])
      return refuse(dir, "metadata.json: a shard of '" + t.name +
                             "' holds more indices than its slot");
    s.index.push_back(dim);
  }
  return s;
}

Expected<std::map<std::string, TensorRecord>>
readMetadata(const std::string &dir, int64_t &step) {
  auto bytes = files::read(dir + "/metadata.json");
  if (!bytes)
    return refuse(dir, toString(bytes.takeError()));
  Expected<json::Value> root =
      json::parse(std::string_view(bytes->data(), bytes->size()));
  if (!root)
    return refuse(dir,
                  "metadata.json is not JSON: " + toString(root.takeError()));
  const json::Object *o = root->getAsObject();
  if (!o || o->getString("format") != kFormat)
    return refuse(dir, "metadata.json is not an fsdp-run checkpoint");
  if (o->getInteger("version") != kVersion)
    return refuse(dir, "unsupported checkpoint version (this fsdp-run reads " +
                           std::to_string(kVersion) + ")");
  std::optional<int64_t> s = o->getInteger("step");
  if (!s || *s < 0)
    return refuse(dir, "metadata.json has no step count");
  step = *s;
  const json::Array *tensors = o->getArray("tensors");
  if (!tensors)
    return refuse(dir, "metadata.json has no tensor list");
  std::map<std::string, TensorRecord> out;
  for (const json::Value &v : *tensors) {
    const json::Object *t = v.getAsObject();
    std::optional<std::string_view> name =
        t ? t->getString("name") : std::nullopt;
    std::optional<std::string_view> dtype =
        t ? t->getString("dtype") : std::nullopt;
    if (!name || !dtype)
      return refuse(dir, "metadata.json: a tensor has no name or dtype");
    TensorRecord r;
    r.name = std::string(*name);
    r.dtype = std::string(*dtype);
    auto shape = readShape(t->get("global_shape"), dir,
                           "the global shape of '" + r.name + "'");
    if (!shape)
      return shape.takeError();
    r.globalShape = std::move(*shape);
    const json::Array *shards = t->getArray("shards");
    if (!shards || shards->empty())
      return refuse(dir, "metadata.json: '" + r.name + "' has no shards");
    for (const json::Value &sv : *shards) {
      auto shard = readShard(sv, dir, r);
      if (!shard)
        return shard.takeError();
      r.shards.push_back(std::move(*shard));
    }
    out[r.name] = std::move(r);
  }
  return out;
}

/// Refuses a checkpoint whose tensors are not the program's saved
/// arguments, listing every missing, extra and mismatched name.
Error checkNames(const std::string &dir,
                 const std::map<std::string, TensorRecord> &tensors,
                 const Program &prog, const std::vector<int64_t> &saved) {
  std::string missing, extra, shapes;
  std::set<std::string> wanted;
  for (int64_t i : saved) {
    const Port &p = prog.args[i];
    wanted.insert(p.name);
    auto it = tensors.find(p.name);
    if (it == tensors.end()) {
      missing += " " + p.name;
      continue;
    }
    std::vector<int64_t> shape = p.globalShape;
    std::string dtype = p.dtype;
    if (it->second.globalShape != shape || it->second.dtype != dtype) {
      auto text = [](const std::vector<int64_t> &s, const std::string &d) {
        std::string t = d + "[";
        for (size_t i = 0; i < s.size(); ++i)
          t += (i ? "," : "") + std::to_string(s[i]);
        return t + "]";
      };
      shapes += " " + p.name + " (checkpoint " +
                text(it->second.globalShape, it->second.dtype) + ", program " +
                text(shape, dtype) + ")";
    }
  }
  for (const auto &[name, t] : tensors)
    if (!wanted.count(name))
      extra += " " + name;
  std::string why;
  if (!missing.empty())
    why += "\n  missing:" + missing;
  if (!extra.empty())
    why += "\n  not in the program:" + extra;
  if (!shapes.empty())
    why += "\n  other global shape or dtype:" + shapes;
  if (!why.empty())
    return refuse(dir, "it is not a checkpoint of this program's state:" + why);
  return Error::success();
}

/// One tensor reassembled from its shards.
Expected<npy::Array> assemble(const std::string &dir, const TensorRecord &t,
                              const Port &p,
                              std::map<std::string, Bytes> &shardFiles) {
  npy::Array a;
  a.descr = t.dtype;
  a.shape = t.globalShape;
  int64_t bytes = p.elementBytes;
  a.data.assign(size_t(p.globalElements() * bytes), 0);
  for (const ShardRecord &s : t.shards) {
    auto found = shardFiles.find(s.file);
    if (found == shardFiles.end()) {
      auto buf = files::read(dir + "/" + s.file);
      if (!buf)
        return refuse(dir, "cannot read shard file " + s.file + ": " +
                               toString(buf.takeError()));
      found = shardFiles.emplace(s.file, std::move(*buf)).first;
    }
    const Bytes &file = found->second;
    int64_t slotBytes = bytes;
    bool overflow = false;
    for (int64_t d : s.slotShape)
      overflow |= __builtin_mul_overflow(slotBytes, d, &slotBytes);
    if (overflow || s.bytes != slotBytes)
      return refuse(dir, "metadata.json: the shard of '" + t.name + "' in " +
                             s.file + " has " + std::to_string(s.bytes) +
                             " bytes, which is not the size of its slot shape");
    int64_t size = int64_t(file.size());
    if (s.offset > size || s.bytes > size - s.offset)
      return refuse(dir, "shard file " + s.file + " is truncated: it holds " +
                             std::to_string(size) + " bytes, the shard of '" +
                             t.name + "' ends at byte " +
                             std::to_string(s.offset + s.bytes));
    const char *slot = file.data() + s.offset;
    if (crc32(slot, size_t(s.bytes)) != s.crc)
      return refuse(dir, "shard file " + s.file +
                             " is corrupt: the CRC-32 of '" + t.name +
                             "' does not match");
    placeOwned(s.index, s.slotShape, t.globalShape, bytes, slot, a.data.data());
  }
  return a;
}

} // namespace

std::vector<int64_t> savedArgs(const Program &prog) {
  std::vector<int64_t> saved;
  for (size_t i = 0; i < prog.args.size(); ++i)
    if (prog.fedBy[i] >= 0)
      saved.push_back(int64_t(i));
  return saved;
}

std::string finalDir(const std::string &saveDir, int64_t step) {
  return saveDir + "/step-" + std::to_string(step);
}

std::string partialDir(const std::string &saveDir, int64_t step) {
  return saveDir + "/.step-" + std::to_string(step) + ".partial";
}

bool writeRankFile(const std::string &dir, const Program &prog,
                   const std::vector<Bytes> &buffers, int64_t rank,
                   std::vector<uint32_t> &crcs, std::string &error) {
  std::string bytes;
  crcs.clear();
  for (int64_t i : savedArgs(prog)) {
    const Port &p = prog.args[i];
    if (!isPrimaryReplica(p, rank)) {
      crcs.push_back(0);
      continue;
    }
    const Bytes &b = buffers[i];
    crcs.push_back(crc32(b.data(), b.size()));
    bytes.append(b.data(), b.size());
  }
  return writeBytes(dir + "/" + rankFile(rank), bytes, error);
}

bool writeMetadata(const std::string &dir, const Program &prog, int64_t step,
                   const std::vector<std::vector<uint32_t>> &crcs,
                   std::string &error) {
  int64_t world = prog.meshSize();
  std::vector<int64_t> saved = savedArgs(prog);
  std::vector<int64_t> fileBytes(size_t(world), 0);
  json::Array tensors;
  for (size_t t = 0; t < saved.size(); ++t) {
    const Port &p = prog.args[saved[t]];
    json::Array shards;
    for (int64_t r = 0; r < world; ++r) {
      if (!isPrimaryReplica(p, r))
        continue;
      json::Array index;
      for (const std::vector<lm::Range> &dim : ownedRanges(p, r)) {
        json::Array ranges;
        for (const lm::Range &x : dim)
          ranges.push_back(json::Array{x.begin, x.end});
        index.push_back(std::move(ranges));
      }
      shards.push_back(json::Object{{"rank", r},
                                    {"file", rankFile(r)},
                                    {"offset", fileBytes[r]},
                                    {"bytes", p.slotBytes()},
                                    {"crc32", int64_t(crcs[r][t])},
                                    {"slot_shape", shapeJson(p.shape)},
                                    {"index", std::move(index)}});
      fileBytes[r] += p.slotBytes();
    }
    tensors.push_back(json::Object{{"name", p.name},
                                   {"kind", kindOf(p)},
                                   {"dtype", p.dtype},
                                   {"global_shape", shapeJson(p.globalShape)},
                                   {"layout", p.layoutText},
                                   {"shards", std::move(shards)}});
  }
  json::Array axes;
  for (const std::string &a : prog.axisNames)
    axes.push_back(a);
  json::Object root{{"format", kFormat},
                    {"version", kVersion},
                    {"entry", prog.entry},
                    {"step", step},
                    {"mesh", json::Object{{"shape", shapeJson(prog.meshShape)},
                                          {"axes", std::move(axes)}}},
                    {"tensors", std::move(tensors)}};
  std::string text = json::write(std::move(root), 2) + "\n";
  return writeBytes(dir + "/metadata.json", text, error);
}

bool publish(const std::string &partial, const std::string &final,
             std::string &error) {
  std::string old;
  if (files::exists(final)) {
    old = final + ".old";
    files::removeAll(old);
    if (std::error_code ec = files::rename(final, old)) {
      error = "cannot move " + final + " aside: " + ec.message();
      return false;
    }
  }
  if (std::error_code ec = files::rename(partial, final)) {
    error = "cannot rename " + partial + " to " + final + ": " + ec.message();
    if (!old.empty())
      files::rename(old, final);
    return false;
  }
  if (!old.empty())
    files::removeAll(old);
  return true;
}

Expected<Loaded> load(const std::string &dirArg, const Program &prog) {
  Loaded out;
  auto dir = chooseStepDir(dirArg);
  if (!dir)
    return dir.takeError();
  out.dir = *dir;
  auto tensors = readMetadata(out.dir, out.step);
  if (!tensors)
    return tensors.takeError();
  std::vector<int64_t> saved = savedArgs(prog);
  if (Error e = checkNames(out.dir, *tensors, prog, saved))
    return std::move(e);
  out.values.resize(prog.args.size());
  std::map<std::string, Bytes> shardFiles;
  for (int64_t i : saved) {
    auto value = assemble(out.dir, tensors->at(prog.args[i].name), prog.args[i],
                          shardFiles);
    if (!value)
      return value.takeError();
    out.values[i] = std::move(*value);
  }
  return out;
}

} // namespace fsdp::run::checkpoint

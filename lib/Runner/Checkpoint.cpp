//===- Checkpoint.cpp - sharded checkpoints of a training run -------------===//

#include "Checkpoint.h"
#include "Shards.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace lm = ::fsdp::layout;
namespace json = llvm::json;

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

json::Array shapeJson(llvm::ArrayRef<int64_t> shape) {
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

bool writeBytes(const std::string &path, llvm::StringRef bytes,
                std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec) {
    os << bytes;
    os.close();
    if (os.has_error())
      ec = os.error();
  }
  if (ec)
    error = "cannot write " + path + ": " + ec.message();
  return !ec;
}

//===--- loading ----------------------------------------------------------===//

llvm::Error refuse(const std::string &dir, const llvm::Twine &why) {
  return llvm::createStringError("checkpoint " + dir + ": " + why);
}

/// The step directory: `dir` itself when it has metadata.json, else its
/// complete `step-<K>` with the largest K.
llvm::Expected<std::string> chooseStepDir(const std::string &dir) {
  if (llvm::sys::fs::exists(dir + "/metadata.json"))
    return dir;
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError("--resume: " + dir + " is not a directory");
  std::error_code ec;
  int64_t best = -1;
  std::string bestDir;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    int64_t k = 0;
    if (!name.consume_front("step-") || name.getAsInteger(10, k) || k < 0)
      continue;
    if (k > best && llvm::sys::fs::exists(it->path() + "/metadata.json")) {
      best = k;
      bestDir = it->path();
    }
  }
  if (bestDir.empty())
    return llvm::createStringError(
        "--resume: " + dir +
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

llvm::Expected<std::vector<int64_t>> readShape(const json::Value *v,
                                               const std::string &dir,
                                               const llvm::Twine &what) {
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

llvm::Expected<ShardRecord>
readShard(const json::Value &v, const std::string &dir, const TensorRecord &t) {
  const json::Object *o = v.getAsObject();
  if (!o)
    return refuse(dir, "metadata.json: a shard of '" + t.name +
                           "' is not an object");
  ShardRecord s;
  std::optional<llvm::StringRef> file = o->getString("file");
  std::optional<int64_t> offset = o->getInteger("offset"),
                         bytes = o->getInteger("bytes"),
                         crc = o->getInteger("crc32");
  if (!file || !offset || !bytes || !crc || *offset < 0 || *bytes < 0 ||
      !isSafeName(*file))
    return refuse(dir, "metadata.json: a shard of '" + t.name +
                           "' lacks a file, offset, bytes or crc32");
  s.file = file->str();
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

llvm::Expected<std::map<std::string, TensorRecord>>
readMetadata(const std::string &dir, int64_t &step) {
  auto bytes = llvm::MemoryBuffer::getFile(dir + "/metadata.json");
  if (!bytes)
    return refuse(dir,
                  "cannot read metadata.json: " + bytes.getError().message());
  llvm::Expected<json::Value> root = json::parse((*bytes)->getBuffer());
  if (!root)
    return refuse(dir, "metadata.json is not JSON: " +
                           llvm::toString(root.takeError()));
  const json::Object *o = root->getAsObject();
  if (!o || o->getString("format") != kFormat)
    return refuse(dir, "metadata.json is not an fsdp-run checkpoint");
  if (o->getInteger("version") != kVersion)
    return refuse(dir, "unsupported checkpoint version (this fsdp-run reads " +
                           llvm::Twine(kVersion) + ")");
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
    std::optional<llvm::StringRef> name =
        t ? t->getString("name") : std::nullopt;
    std::optional<llvm::StringRef> dtype =
        t ? t->getString("dtype") : std::nullopt;
    if (!name || !dtype)
      return refuse(dir, "metadata.json: a tensor has no name or dtype");
    TensorRecord r;
    r.name = name->str();
    r.dtype = dtype->str();
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
llvm::Error checkNames(const std::string &dir,
                       const std::map<std::string, TensorRecord> &tensors,
                       const Program &prog, const std::vector<int64_t> &saved) {
  std::string missing, extra, shapes;
  llvm::StringSet<> wanted;
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
    if (!wanted.contains(name))
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
  return llvm::Error::success();
}

/// One tensor reassembled from its shards.
llvm::Expected<npy::Array>
assemble(const std::string &dir, const TensorRecord &t, const Port &p,
         std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> &files) {
  npy::Array a;
  a.descr = t.dtype;
  a.shape = t.globalShape;
  int64_t bytes = p.elementBytes;
  a.data.assign(size_t(p.globalElements() * bytes), 0);
  for (const ShardRecord &s : t.shards) {
    auto &file = files[s.file];
    if (!file) {
      auto buf = llvm::MemoryBuffer::getFile(dir + "/" + s.file,
                                             /*IsText=*/false,
                                             /*RequiresNullTerminator=*/false);
      if (!buf)
        return refuse(dir, "cannot read shard file " + s.file + ": " +
                               buf.getError().message());
      file = std::move(*buf);
    }
    int64_t slotBytes = bytes;
    bool overflow = false;
    for (int64_t d : s.slotShape)
      overflow |= __builtin_mul_overflow(slotBytes, d, &slotBytes);
    if (overflow || s.bytes != slotBytes)
      return refuse(dir, "metadata.json: the shard of '" + t.name + "' in " +
                             s.file + " has " + llvm::Twine(s.bytes) +
                             " bytes, which is not the size of its slot shape");
    int64_t size = int64_t(file->getBufferSize());
    if (s.offset > size || s.bytes > size - s.offset)
      return refuse(dir, "shard file " + s.file + " is truncated: it holds " +
                             llvm::Twine(size) + " bytes, the shard of '" +
                             t.name + "' ends at byte " +
                             llvm::Twine(s.offset + s.bytes));
    const char *slot = file->getBufferStart() + s.offset;
    llvm::ArrayRef<uint8_t> data(reinterpret_cast<const uint8_t *>(slot),
                                 size_t(s.bytes));
    if (llvm::crc32(data) != s.crc)
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
    crcs.push_back(llvm::crc32(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(b.data()), b.size())));
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
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", json::Value(std::move(root))) << "\n";
  return writeBytes(dir + "/metadata.json", text, error);
}

bool publish(const std::string &partial, const std::string &final,
             std::string &error) {
  std::string old;
  if (llvm::sys::fs::exists(final)) {
    old = final + ".old";
    llvm::sys::fs::remove_directories(old);
    if (std::error_code ec = llvm::sys::fs::rename(final, old)) {
      error = "cannot move " + final + " aside: " + ec.message();
      return false;
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, final)) {
    error = "cannot rename " + partial + " to " + final + ": " + ec.message();
    if (!old.empty())
      llvm::sys::fs::rename(old, final);
    return false;
  }
  if (!old.empty())
    llvm::sys::fs::remove_directories(old);
  return true;
}

llvm::Expected<Loaded> load(const std::string &dirArg, const Program &prog) {
  Loaded out;
  auto dir = chooseStepDir(dirArg);
  if (!dir)
    return dir.takeError();
  out.dir = *dir;
  auto tensors = readMetadata(out.dir, out.step);
  if (!tensors)
    return tensors.takeError();
  std::vector<int64_t> saved = savedArgs(prog);
  if (llvm::Error e = checkNames(out.dir, *tensors, prog, saved))
    return std::move(e);
  out.values.resize(prog.args.size());
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> files;
  for (int64_t i : saved) {
    auto value =
        assemble(out.dir, tensors->at(prog.args[i].name), prog.args[i], files);
    if (!value)
      return value.takeError();
    out.values[i] = std::move(*value);
  }
  return out;
}

} // namespace fsdp::run::checkpoint

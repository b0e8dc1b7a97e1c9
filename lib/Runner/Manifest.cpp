//===- Manifest.cpp - the interface between the compiler and the runner ---===//

#include "Manifest.h"

#include "fsdp/Layout/LayoutMath.h"

#include <set>

namespace lm = ::fsdp::layout;

namespace fsdp::run {

bool isSafeName(std::string_view name) {
  if (name.empty() || name.front() == '.' ||
      name.find("..") != std::string_view::npos)
    return false;
  for (char c : name)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
        c == 0x7f)
      return false;
  return true;
}

int64_t dtypeBytes(std::string_view dtype) {
  if (dtype == "<f4" || dtype == "<i4")
    return 4;
  if (dtype == "<f8" || dtype == "<i8")
    return 8;
  if (dtype == "<u2" || dtype == "<f2")
    return 2;
  if (dtype == "|u1")
    return 1;
  return 0;
}

namespace {

Error error(const std::string &message) { return makeError(message); }

json::Array toJSON(const std::vector<int64_t> &v) {
  json::Array a;
  for (int64_t x : v)
    a.push_back(x);
  return a;
}

bool hasPartial(const lm::Layout &layout) {
  for (const lm::Placement &p : layout.placements)
    if (p.kind == lm::Placement::Kind::Partial)
      return true;
  return false;
}

/// Whether `rank` holds a Partial(sum) value (coordinate 0 on every partial
/// axis), as Shards.cpp decides.
bool ownsPartial(const lm::Layout &layout, int64_t rank) {
  std::vector<int64_t> coords = lm::rankToCoords(layout.meshShape, rank);
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].kind == lm::Placement::Kind::Partial &&
        coords[a] != 0)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

const char *reduceName(lm::ReduceKind r) {
  switch (r) {
  case lm::ReduceKind::Sum:
    return "sum";
  case lm::ReduceKind::Avg:
    return "avg";
  case lm::ReduceKind::Max:
    return "max";
  case lm::ReduceKind::Min:
    return "min";
  }
  return "sum";
}

json::Object layoutJSON(const lm::Layout &layout) {
  json::Array placements;
  for (const lm::Placement &p : layout.placements) {
    switch (p.kind) {
    case lm::Placement::Kind::Replicate:
      placements.push_back(json::Object{{"kind", "replicate"}});
      break;
    case lm::Placement::Kind::TensorParallel: // dim -1: tp_replicate
      placements.push_back(
          json::Object{{"kind", "tensor_parallel"}, {"dim", p.dim}});
      break;
    case lm::Placement::Kind::Shard:
      placements.push_back(json::Object{{"kind", "shard"}, {"dim", p.dim}});
      break;
    case lm::Placement::Kind::StridedShard:
      placements.push_back(json::Object{{"kind", "strided_shard"},
                                        {"dim", p.dim},
                                        {"split_factor", p.splitFactor}});
      break;
    case lm::Placement::Kind::Partial:
      placements.push_back(
          json::Object{{"kind", "partial"}, {"reduce", reduceName(p.reduce)}});
      break;
    }
  }
  return json::Object{
      {"policy", layout.policy == lm::UnevenPolicy::Ceil ? "ceil" : "balanced"},
      {"placements", std::move(placements)}};
}

/// Every rank's owned global ranges per dim, in slot order: what a runner
/// without the layout library needs to cut inputs and assemble results.
json::Object shardsOf(const Port &p, int64_t world) {
  json::Array ranks, owners;
  for (int64_t r = 0; r < world; ++r) {
    lm::LocalShard s = lm::localShard(*p.layout, p.globalShape, r);
    json::Array dims;
    for (const lm::DimShard &d : s.dims) {
      json::Array ranges;
      for (const lm::Range &range : d.ranges)
        ranges.push_back(json::Array{range.begin, range.end});
      dims.push_back(std::move(ranges));
    }
    ranks.push_back(std::move(dims));
    owners.push_back(ownsPartial(*p.layout, r));
  }
  return json::Object{{"partial", hasPartial(*p.layout)},
                      {"owners", std::move(owners)},
                      {"ranks", std::move(ranks)}};
}

json::Object portJSON(const Port &p, int64_t world) {
  json::Object o{
      {"name", p.name},
      {"dtype", p.dtype},
      {"element_bytes", p.elementBytes},
      {"shape", toJSON(p.shape)},
      {"global_shape", toJSON(p.globalShape)},
      {"rank_local", p.rankLocal},
      {"loss", p.isLoss},
      {"read_only", p.readOnly},
      {"starts_at_zero", p.stateOf.has_value() || p.optim == "step"}};
  o["layout"] = p.layout ? json::Value(p.layoutText) : json::Value(nullptr);
  o["layout_spec"] =
      p.layout ? json::Value(layoutJSON(*p.layout)) : json::Value(nullptr);
  o["update_of"] = p.updateOf ? json::Value(*p.updateOf) : nullptr;
  o["state_of"] = p.stateOf ? json::Value(*p.stateOf) : nullptr;
  o["role"] = p.optim.empty() ? json::Value(nullptr) : json::Value(p.optim);
  // Per-rank ranges for the meshes the threads backend runs.
  if (p.layout && world <= 64)
    o["shards"] = shardsOf(p, world);
  return o;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// A reader of one JSON object that records the first problem.
struct Reader {
  const json::Object &o;
  std::string &problem;
  std::string where;

  void fail(const std::string &what) {
    if (problem.empty())
      problem = where + what;
  }
  const json::Value *get(std::string_view key, bool optional = false) {
    const json::Value *v = o.get(key);
    if (!v && !optional)
      fail("no '" + std::string(key) + "'");
    return v;
  }
  std::string string(std::string_view key) {
    const json::Value *v = get(key);
    if (v && !v->getAsString())
      fail("'" + std::string(key) + "' is not a string");
    return v && v->getAsString() ? std::string(*v->getAsString()) : "";
  }
  int64_t integer(std::string_view key, int64_t least = 0) {
    const json::Value *v = get(key);
    std::optional<int64_t> i = v ? v->getAsInteger() : std::nullopt;
    if (v && (!i || *i < least))
      fail("'" + std::string(key) + "' is not an integer of at least " +
           std::to_string(least));
    return i.value_or(least);
  }
  std::optional<int64_t> optionalInteger(std::string_view key) {
    const json::Value *v = get(key, true);
    if (!v || v->getAsNull())
      return std::nullopt;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i < 0)
      fail("'" + std::string(key) + "' is not null or a non-negative integer");
    return i;
  }
  bool boolean(std::string_view key) {
    const json::Value *v = get(key, true);
    if (v && !v->getAsBoolean())
      fail("'" + std::string(key) + "' is not a boolean");
    return v && v->getAsBoolean().value_or(false);
  }
  std::vector<int64_t> integers(std::string_view key) {
    std::vector<int64_t> out;
    const json::Value *v = get(key);
    const json::Array *a = v ? v->getAsArray() : nullptr;
    if (v && !a)
      fail("'" + std::string(key) + "' is not an array");
    if (a)
      for (const json::Value &x : *a) {
        std::optional<int64_t> i = x.getAsInteger();
        if (!i || *i < 0) {
          fail("'" + std::string(key) +
               "' holds a value that is not a "
               "non-negative integer");
          break;
        }
        out.push_back(*i);
      }
    return out;
  }
  const json::Object *object(std::string_view key, bool optional = false) {
    const json::Value *v = get(key, optional);
    if (!v || (optional && v->getAsNull()))
      return nullptr;
    if (!v->getAsObject())
      fail("'" + std::string(key) + "' is not an object");
    return v->getAsObject();
  }
  const json::Array *array(std::string_view key) {
    const json::Value *v = get(key);
    if (v && !v->getAsArray())
      fail("'" + std::string(key) + "' is not an array");
    return v ? v->getAsArray() : nullptr;
  }
};

std::optional<lm::Layout> readLayout(Reader &in, const json::Object &spec,
                                     const std::vector<int64_t> &mesh) {
  Reader r{spec, in.problem, in.where + "layout_spec: "};
  lm::Layout layout;
  layout.meshShape = mesh;
  std::string policy = r.string("policy");
  if (policy == "balanced")
    layout.policy = lm::UnevenPolicy::Balanced;
  else if (policy != "ceil")
    r.fail("unknown policy '" + policy + "'");
  const json::Array *placements = r.array("placements");
  if (!placements)
    return std::nullopt;
  if (placements->size() != mesh.size())
    r.fail("has " + std::to_string(placements->size()) +
           " placements for a mesh of " + std::to_string(mesh.size()) +
           " axes");
  for (const json::Value &v : *placements) {
    const json::Object *po = v.getAsObject();
    if (!po) {
      r.fail("a placement is not an object");
      break;
    }
    Reader pr{*po, in.problem, r.where};
    std::string kind = pr.string("kind");
    lm::Placement p;
    if (kind == "shard") {
      p = lm::Placement::shard(pr.integer("dim"));
    } else if (kind == "strided_shard") {
      p = lm::Placement::stridedShard(pr.integer("dim"),
                                      pr.integer("split_factor", 1));
    } else if (kind == "partial") {
      std::string red = pr.string("reduce");
      lm::ReduceKind k = lm::ReduceKind::Sum;
      if (red == "avg")
        k = lm::ReduceKind::Avg;
      else if (red == "max")
        k = lm::ReduceKind::Max;
      else if (red == "min")
        k = lm::ReduceKind::Min;
      else if (red != "sum")
        pr.fail("unknown reduction '" + red + "'");
      p = lm::Placement::partial(k);
    } else if (kind == "tensor_parallel") {
      p = lm::Placement::tensorParallel(pr.integer("dim", -1));
    } else if (kind != "replicate") {
      pr.fail("unknown placement '" + kind + "'");
    }
    layout.placements.push_back(p);
  }
  if (!in.problem.empty())
    return std::nullopt;
  return layout;
}

/// One port; `problem` gets the first thing wrong with it.
Port readPort(const json::Object &o, const Program &prog, std::string where,
              std::string &problem) {
  Reader in{o, problem, where + ": "};
  Port p;
  p.name = in.string("name");
  p.dtype = in.string("dtype");
  p.elementBytes = in.integer("element_bytes", 1);
  p.shape = in.integers("shape");
  p.globalShape = in.integers("global_shape");
  p.rankLocal = in.boolean("rank_local");
  p.isLoss = in.boolean("loss");
  p.readOnly = in.boolean("read_only");
  p.updateOf = in.optionalInteger("update_of");
  p.stateOf = in.optionalInteger("state_of");
  if (const json::Value *role = in.get("role", true);
      role && !role->getAsNull())
    p.optim = in.string("role");
  if (const json::Value *t = in.get("layout", true); t && t->getAsString())
    p.layoutText = std::string(*t->getAsString());
  if (!problem.empty())
    return p;
  if (!isSafeName(p.name))
    in.fail("the name '" + p.name + "' is not a safe file name");
  else if (dtypeBytes(p.dtype) == 0)
    in.fail("unknown dtype '" + p.dtype + "'");
  else if (dtypeBytes(p.dtype) != p.elementBytes)
    in.fail("element_bytes " + std::to_string(p.elementBytes) +
            " is not the size of " + p.dtype);
  else if (p.shape.size() != p.globalShape.size())
    in.fail("shape and global_shape differ in rank");
  else if (!p.optim.empty() && p.optim != "lr" && p.optim != "step")
    in.fail("unknown role '" + p.optim + "'");
  int64_t bytes = p.elementBytes;
  for (const std::vector<int64_t> *s : {&p.shape, &p.globalShape})
    for (int64_t d : *s)
      if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes))
        in.fail("its size does not fit in 64 bits");
  if (!problem.empty())
    return p;
  if (const json::Object *spec = in.object("layout_spec", true)) {
    p.layout = readLayout(in, *spec, prog.meshShape);
    // A tensor-parallel layout's slot is checked by the compiler only.
    if (!p.layout || !lm::tensorParallelAxes(*p.layout).empty())
      return p;
    if (std::optional<std::string> err =
            lm::validate(*p.layout, p.globalShape, /*isParameter=*/false))
      in.fail("invalid layout: " + *err);
    else if (lm::slotShape(*p.layout, p.globalShape) != p.shape)
      in.fail("its shape is not the slot of its layout");
  } else if (p.shape != p.globalShape) {
    in.fail("shape and global_shape differ without a layout");
  }
  return p;
}

Expected<std::vector<Port>> readPorts(const json::Array &ports,
                                      std::string_view what,
                                      const Program &prog,
                                      const std::string &source) {
  std::vector<Port> out;
  std::set<std::string> names;
  for (size_t i = 0; i < ports.size(); ++i) {
    std::string where = "signature of '" + prog.entry +
                        "': " + std::string(what) + " " + std::to_string(i);
    std::string problem;
    const json::Object *o = ports[i].getAsObject();
    if (!o)
      return error(source + ": corrupt manifest: " + where +
                   " is not an object");
    Port p = readPort(*o, prog, where, problem);
    if (problem.empty() && !names.insert(p.name).second)
      problem = where + ": the name '" + p.name + "' is not unique";
    if (!problem.empty())
      return error(source + ": corrupt manifest: " + problem);
    out.push_back(std::move(p));
  }
  return out;
}

/// Per argument, the result fed back into it, checked: an index in range,
/// the same dtype, shapes and layout, no argument fed twice.
Error linkUpdates(Program &prog, const std::string &source) {
  prog.fedBy.assign(prog.args.size(), -1);
  auto corrupt = [&](size_t i, const std::string &what) {
    return error(source + ": corrupt manifest: signature of '" + prog.entry +
                 "': result " + std::to_string(i) + ": " + what);
  };
  for (size_t i = 0; i < prog.results.size(); ++i) {
    Port &r = prog.results[i];
    if (r.stateOf && *r.stateOf >= int64_t(prog.args.size()))
      return corrupt(i, "state_of is out of range");
    if (!r.updateOf)
      continue;
    if (*r.updateOf >= int64_t(prog.args.size()))
      return corrupt(i, "update_of is out of range");
    Port &arg = prog.args[size_t(*r.updateOf)];
    if (prog.fedBy[*r.updateOf] >= 0)
      return corrupt(i, "updates an argument another result updates");
    if (arg.dtype != r.dtype || arg.shape != r.shape ||
        arg.globalShape != r.globalShape || arg.layoutText != r.layoutText)
      return corrupt(i, "its type or layout is not its argument's");
    prog.fedBy[*r.updateOf] = int64_t(i);
    arg.rankLocal = !arg.layout && arg.rank() > 0;
    r.rankLocal = arg.rankLocal;
  }
  for (const Port &a : prog.args)
    if (a.stateOf && *a.stateOf >= int64_t(prog.args.size()))
      return error(source + ": corrupt manifest: signature of '" + prog.entry +
                   "': '" + a.name + "': state_of is out of range");
  return Error::success();
}

} // namespace

json::Object entryJSON(const Program &prog) {
  json::Array args, results;
  for (const Port &p : prog.args)
    args.push_back(portJSON(p, prog.meshSize()));
  for (const Port &p : prog.results)
    results.push_back(portJSON(p, prog.meshSize()));
  json::Array axes;
  for (const std::string &a : prog.axisNames)
    axes.push_back(a);
  json::Object o{{"name", prog.entry},
                 {"symbol", prog.symbol},
                 {"training", prog.training()},
                 {"mesh", json::Object{{"shape", toJSON(prog.meshShape)},
                                       {"axes", std::move(axes)}}},
                 {"fed_by", toJSON(prog.fedBy)},
                 {"args", std::move(args)},
                 {"results", std::move(results)}};
  if (prog.plan)
    o["memory_plan"] = json::Object{{"arena_bytes", prog.plan->arenaBytes},
                                    {"outside_bytes", prog.plan->outsideBytes},
                                    {"buffers", prog.plan->buffers},
                                    {"largest", toJSON(prog.plan->largest)}};
  else
    o["memory_plan"] = nullptr;
  return o;
}

Expected<StepManifest> parseManifest(std::string_view text,
                                     const std::string &source) {
  StepManifest m;
  auto parsed = json::parse(text);
  if (!parsed)
    return error(source +
                 ": corrupt manifest: " + toString(parsed.takeError()));
  m.json = std::move(*parsed);
  json::Object *o = m.json.getAsObject();
  if (!o || o->getString("format") != "fsdp-step" ||
      !o->getInteger("version") || !o->getInteger("abi_version") ||
      !o->getObject("target") || !o->getArray("entries"))
    return error(source + ": corrupt manifest: not an fsdp-step manifest");
  if (*o->getInteger("version") != kManifestVersion)
    return error(source + ": manifest version " +
                 std::to_string(*o->getInteger("version")) +
                 ", this runner reads version " +
                 std::to_string(kManifestVersion));
  if (const json::Value *gpu = o->get("gpu"); gpu && !gpu->getAsObject())
    return error(source + ": corrupt manifest: 'gpu' is not an object");
  m.abiVersion = *o->getInteger("abi_version");
  json::Object *target = o->getObject("target");
  m.cpu = std::string(target->getString("cpu").value_or(""));
  if (json::Array *f = target->getArray("features"))
    for (const json::Value &v : *f)
      if (auto s = v.getAsString())
        m.features.push_back(std::string(*s));
  for (const json::Value &e : *o->getArray("entries")) {
    const json::Object *eo = e.getAsObject();
    std::optional<std::string_view> name =
        eo ? eo->getString("name") : std::nullopt;
    if (!name)
      return error(source + ": corrupt manifest: an entry without a name");
    m.entries.push_back(std::string(*name));
  }
  return m;
}

Expected<Program> readProgram(const StepManifest &manifest,
                              std::string_view entry,
                              const std::string &source) {
  const json::Object &top = *manifest.json.getAsObject();
  if (manifest.entries.empty())
    return error("the module has no fsdp.signatures; compile it with "
                 "fsdp-opt --fsdp-pipeline=lower=true (or fsdp-lower-to-llvm)");
  Program prog;
  prog.entry = std::string(entry);
  if (prog.entry.empty()) {
    if (manifest.entries.size() != 1)
      return error("the module has several entries; choose one with --entry");
    prog.entry = manifest.entries.front();
  }
  const json::Object *eo = nullptr;
  for (const json::Value &e : *top.getArray("entries"))
    if (e.getAsObject()->getString("name") == prog.entry)
      eo = e.getAsObject();
  if (!eo) {
    std::string known;
    for (const std::string &e : manifest.entries)
      known += " " + e;
    return error("unknown entry '" + prog.entry + "'; the module has:" + known);
  }
  std::string problem;
  Reader in{*eo, problem, "entry '" + prog.entry + "': "};
  prog.symbol = in.string("symbol");
  const json::Object *mesh = in.object("mesh");
  const json::Array *args = in.array("args");
  const json::Array *results = in.array("results");
  if (mesh) {
    Reader mr{*mesh, problem, in.where + "mesh: "};
    prog.meshShape = mr.integers("shape");
    if (const json::Array *axes = mr.array("axes"))
      for (const json::Value &a : *axes)
        prog.axisNames.push_back(std::string(a.getAsString().value_or("")));
    if (problem.empty() && !prog.axisNames.empty() &&
        prog.axisNames.size() != prog.meshShape.size())
      mr.fail("axes and shape differ in length");
  }
  if (const json::Object *plan = in.object("memory_plan", true)) {
    Reader pr{*plan, problem, in.where + "memory_plan: "};
    MemoryPlan p;
    p.arenaBytes = pr.integer("arena_bytes");
    p.outsideBytes = pr.integer("outside_bytes");
    p.buffers = pr.integer("buffers");
    p.largest = pr.integers("largest");
    prog.plan = p;
  }
  if (problem.empty() && prog.symbol.rfind("_mlir_", 0) != 0)
    in.fail("the symbol '" + prog.symbol + "' is not a packed wrapper");
  if (!problem.empty())
    return error(source + ": corrupt manifest: " + problem);
  if (prog.meshShape.empty())
    prog.meshShape = {1};
  if (auto err = lm::validateMesh(prog.meshShape))
    return error("the mesh is invalid: " + *err);
  int64_t size = 1;
  for (int64_t s : prog.meshShape)
    if (__builtin_mul_overflow(size, s, &size))
      return error("the mesh has too many ranks");
  auto a = readPorts(*args, "argument", prog, source);
  if (!a)
    return a.takeError();
  prog.args = std::move(*a);
  auto r = readPorts(*results, "result", prog, source);
  if (!r)
    return r.takeError();
  prog.results = std::move(*r);
  if (Error e = linkUpdates(prog, source))
    return std::move(e);
  if (const json::Object *gpu = top.getObject("gpu")) {
    GpuStep g;
    g.tf32 = gpu->getBoolean("tf32").value_or(false);
    g.emulation = gpu->getBoolean("emulation").value_or(false);
    prog.gpu = g;
  }
  return prog;
}

} // namespace fsdp::run

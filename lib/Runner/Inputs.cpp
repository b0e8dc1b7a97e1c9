//===- Inputs.cpp - the global inputs of a run ----------------------------===//

#include "Inputs.h"
#include "Files.h"
#include "Shards.h"

#include <algorithm>

namespace fsdp::run {

namespace {

Error inputError(const Port &p, const std::string &why) {
  return makeError("input '" + p.name + "'" + why);
}

std::string shapeString(Span<const int64_t> shape) {
  std::string s = "[ ";
  for (int64_t d : shape)
    s += std::to_string(d) + " ";
  return s + "]";
}

/// Where an input's value is: `<dir>/<name>.npy` or `<dir>/<name>/` of the
/// first directory holding either.
struct Location {
  std::string file;    // the .npy (may not exist)
  std::string stepDir; // not empty: a directory of per-step files
};

Expected<Location> locate(const Port &p, const std::vector<std::string> &dirs) {
  for (const std::string &dir : dirs) {
    std::string file = dir + "/" + p.name + ".npy", steps = dir + "/" + p.name;
    bool hasFile = files::exists(file);
    bool hasSteps = files::isDirectory(steps);
    if (hasFile && hasSteps)
      return inputError(p, ": both " + file + " and " + steps +
                               "/ exist; keep one (a file for every step, or "
                               "a directory of per-step files)");
    if (hasFile)
      return Location{file, ""};
    if (hasSteps)
      return Location{file, steps};
  }
  return Location{dirs.empty() ? p.name + ".npy"
                               : dirs.front() + "/" + p.name + ".npy",
                  ""};
}

/// The header of an input file, checked against the port's dtype.
Expected<npy::Header> checkedHeader(const Port &p, const std::string &path) {
  npy::Header h;
  std::string error;
  if (!npy::readHeader(path, h, error))
    return inputError(p, ": " + error);
  std::string want = p.dtype;
  if (h.descr != want && !(want == "<u2" && h.descr == "|V2"))
    return inputError(p, " (" + path + ") has dtype " + h.descr +
                             ", expected " + want);
  return h;
}

npy::Array zeros(const Port &p) {
  npy::Array a;
  a.descr = p.dtype;
  a.shape = p.globalShape;
  a.data.assign(size_t(p.globalElements() * p.elementBytes), 0);
  return a;
}

/// Checks every per-step file of the run (headers and sizes only), so that
/// a missing or wrong one stops the run before its first step.
Error checkStepFiles(const Port &p, const std::string &dir,
                     const std::vector<int64_t> &expect, int64_t firstStep,
                     int64_t endStep) {
  for (int64_t g = firstStep; g < endStep; ++g) {
    std::string file = StepInput::stepFile(dir, g);
    if (!files::exists(file))
      return inputError(p,
                        ": " + file +
                            " is missing; a directory of per-step files needs "
                            "<step>.npy for every step this run reads (" +
                            std::to_string(firstStep) + " to " +
                            std::to_string(endStep - 1) + ", counted from 0)");
    auto h = checkedHeader(p, file);
    if (!h)
      return h.takeError();
    if (h->shape != expect)
      return inputError(p, " (" + file + ") has shape " +
                               shapeString(h->shape) + ", expected " +
                               shapeString(expect));
  }
  return Error::success();
}

/// An input set in memory: its global shape, or one slice per step.
/// A stacked value is indexed by the global step, as a file's is.
Expected<StepInput> fromMemory(const Port &p, const npy::Array &a,
                               bool training, bool fed,
                               const std::vector<int64_t> &expect,
                               int64_t endStep) {
  if (a.shape == expect)
    return StepInput::constant(p.name, a).from("memory");
  bool perStep = training && !fed && a.shape.size() == expect.size() + 1 &&
                 std::equal(expect.begin(), expect.end(), a.shape.begin() + 1);
  if (!perStep)
    return inputError(p, " has shape " + shapeString(a.shape) + ", expected " +
                             shapeString(expect));
  if (a.shape[0] < endStep)
    return inputError(p, " has " + std::to_string(a.shape[0]) +
                             " step slice(s); this run reads steps up to " +
                             std::to_string(endStep - 1) + " (counted from 0)");
  return StepInput::stacked(p.name, a);
}

/// An input read from its file: the global shape, or (not fed back) one
/// slice per step covering [firstStep, endStep).
Expected<StepInput> fromFile(const Port &p, const std::string &path, bool fed,
                             const std::vector<int64_t> &expect,
                             int64_t endStep) {
  auto h = checkedHeader(p, path);
  if (!h)
    return h.takeError();
  bool perStep = !fed && h->shape.size() == expect.size() + 1 &&
                 std::equal(expect.begin(), expect.end(), h->shape.begin() + 1);
  if (!perStep && h->shape != expect)
    return inputError(p, " (" + path + ") has shape " + shapeString(h->shape) +
                             ", expected " + shapeString(expect) +
                             (fed ? " (it is fed back: no step dimension)"
                                  : " or [ steps ... ] with one slice per "
                                    "step"));
  if (perStep && h->shape[0] < endStep)
    return inputError(p, " (" + path + ") has " + std::to_string(h->shape[0]) +
                             " step slice(s); this run reads steps up to " +
                             std::to_string(endStep - 1) + " (counted from 0)");
  npy::Array a;
  std::string error;
  if (!npy::read(path, a, error))
    return inputError(p, ": " + error);
  if (perStep)
    return StepInput::stacked(p.name, std::move(a));
  return StepInput::constant(p.name, std::move(a))
      .fromFile(path, h->dataOffset);
}

/// `<dir>/<name>.npy` of the first directory holding it.
std::string firstFileOf(const Port &p, const std::vector<std::string> &dirs) {
  for (const std::string &dir : dirs) {
    std::string path = dir + "/" + p.name + ".npy";
    if (files::exists(path))
      return path;
  }
  return (dirs.empty() ? std::string(".") : dirs.front()) + "/" + p.name +
         ".npy";
}

/// The input of a step that is not a training step: exactly its global
/// shape, the same every run.
Expected<StepInput> exactFromFile(const Port &p, const std::string &path,
                                  const std::vector<int64_t> &expect) {
  auto h = checkedHeader(p, path);
  if (!h)
    return h.takeError();
  if (h->shape != expect)
    return inputError(p, " (" + path + ") has shape " + shapeString(h->shape) +
                             ", expected " + shapeString(expect) +
                             (p.layout ? ""
                                       : " (this rank's batch times the "
                                         "world size)"));
  npy::Array a;
  std::string error;
  if (!npy::read(path, a, error))
    return inputError(p, ": " + error);
  return StepInput::constant(p.name, std::move(a))
      .fromFile(path, h->dataOffset);
}

Expected<StepInput> loadInput(const Port &p, const InputSources &src,
                              bool training, bool fed, int64_t world,
                              int64_t firstStep, int64_t endStep,
                              int64_t readers) {
  auto expect = globalInputShape(p, world);
  if (!expect)
    return expect.takeError();
  static const std::vector<std::string> none;
  const std::vector<std::string> &dirs = src.dirs ? *src.dirs : none;
  if (dirs.empty()) {
    if (fed && startsAtZero(p))
      return StepInput::constant(p.name, zeros(p)).from("zeros");
    return inputError(p, " is not set (set it in memory, or give a "
                         "directory of inputs)");
  }
  if (!training)
    return exactFromFile(p, firstFileOf(p, dirs), *expect);
  auto where = locate(p, dirs);
  if (!where)
    return where.takeError();
  if (fed && startsAtZero(p) && !files::exists(where->file)) {
    if (!where->stepDir.empty())
      return inputError(p, " is fed back from step to step: it takes " +
                               where->file +
                               " (or nothing: it starts at zeros), not a "
                               "directory of per-step files");
    return StepInput::constant(p.name, zeros(p)).from("zeros");
  }
  if (where->stepDir.empty())
    return fromFile(p, where->file, fed, *expect, endStep);
  if (fed)
    return inputError(p, " is fed back from step to step: it takes " +
                             where->file +
                             ", not a directory of per-step files");
  if (Error e = checkStepFiles(p, where->stepDir, *expect, firstStep, endStep))
    return std::move(e);
  return StepInput::perStepFiles(p.name, where->stepDir, *expect, p.dtype,
                                 readers);
}

} // namespace

bool startsAtZero(const Port &p) {
  return p.stateOf.has_value() || p.optim == "step";
}

Expected<std::vector<int64_t>> globalInputShape(const Port &p, int64_t world) {
  std::vector<int64_t> expect = p.globalShape;
  if (!p.layout && !p.rankLocal && !expect.empty() &&
      __builtin_mul_overflow(expect[0], world, &expect[0]))
    return inputError(p, ": the global batch is too large");
  return expect;
}

StepInput StepInput::constant(std::string name, npy::Array array) {
  StepInput in;
  in.name = std::move(name);
  in.array = std::move(array);
  return in;
}

StepInput StepInput::stacked(std::string name, npy::Array array) {
  StepInput in = constant(std::move(name), std::move(array));
  int64_t steps = in.array.shape.empty() ? 1 : in.array.shape[0];
  in.stepBytes = steps ? int64_t(in.array.data.size()) / steps : 0;
  return in;
}

StepInput StepInput::perStepFiles(std::string name, std::string dir,
                                  std::vector<int64_t> shape, std::string descr,
                                  int64_t readers) {
  StepInput in;
  in.name = std::move(name);
  in.stepDir = std::move(dir);
  in.array.shape = std::move(shape);
  in.array.descr = std::move(descr);
  in.readers = std::max<int64_t>(1, readers);
  in.shared = std::make_shared<Shared>();
  return in;
}

StepInput StepInput::fromFile(const std::string &path, uint64_t offset) && {
  source = files::identity(path);
  if (array.data.mapped()) // C order: the file holds the value as it is
    file = path, fileOffset = offset;
  return std::move(*this);
}

bool StepInput::mapShard(const Port &p, int64_t rank, Bytes &out) const {
  int64_t at = file.empty() ? -1 : contiguousShardOffset(p, rank);
  std::string error;
  return at >= 0 && constantValue() &&
         out.mapFile(file, fileOffset + uint64_t(at), size_t(p.slotBytes()),
                     error);
}

std::string StepInput::stepFile(const std::string &dir, int64_t step) {
  return dir + "/" + std::to_string(step) + ".npy";
}

int64_t StepInput::filesRead() const {
  if (!shared)
    return 0;
  std::lock_guard<std::mutex> lock(shared->mutex);
  return shared->reads;
}

Expected<StepValue> StepInput::readStep(int64_t step) const {
  auto a = std::make_shared<npy::Array>();
  std::string path = stepFile(stepDir, step), error;
  if (!npy::read(path, *a, error) || a->shape != array.shape ||
      npy::elementSize(a->descr) != npy::elementSize(array.descr)) {
    if (error.empty())
      error = path + " changed while the run read it";
    return makeError("input '" + name + "': " + error);
  }
  return StepValue(std::move(a));
}

Expected<const char *> StepInput::at(int64_t step, StepValue &hold) const {
  if (stepDir.empty())
    return array.data.data() + step * stepBytes;
  std::unique_lock<std::mutex> lock(shared->mutex);
  auto [it, fresh] = shared->steps.try_emplace(step);
  Shared::Entry &e = it->second;
  if (fresh) {
    // The first reader reads the file, without the lock held.
    lock.unlock();
    auto value = readStep(step);
    lock.lock();
    if (value)
      e.value = std::move(*value);
    else
      e.error = toString(value.takeError());
    e.loading = false;
    ++shared->reads;
    shared->ready.notify_all();
  }
  shared->ready.wait(lock, [&] { return !e.loading; });
  hold = e.value;
  std::string error = e.error;
  if (++e.taken == readers)
    shared->steps.erase(it);
  if (!hold)
    return makeError(error);
  return hold->data.data();
}

Expected<std::vector<StepInput>> loadInputs(const Program &prog,
                                            const InputSources &sources,
                                            const std::vector<bool> &wanted,
                                            int64_t firstStep, int64_t endStep,
                                            int64_t readers) {
  std::vector<StepInput> inputs;
  bool training = prog.training();
  for (size_t i = 0; i < prog.args.size(); ++i) {
    const Port &p = prog.args[i];
    bool fed = training && prog.fedBy[i] >= 0;
    if (!wanted[i]) {
      inputs.push_back(StepInput::constant(p.name, {}));
      continue;
    }
    if (sources.memory && sources.memory->count(i)) {
      auto expect = globalInputShape(p, prog.meshSize());
      if (!expect)
        return expect.takeError();
      auto in =
          fromMemory(p, sources.memory->at(i), training, fed, *expect, endStep);
      if (!in)
        return in.takeError();
      inputs.push_back(std::move(*in));
      continue;
    }
    auto in = loadInput(p, sources, training, fed, prog.meshSize(), firstStep,
                        endStep, readers);
    if (!in)
      return in.takeError();
    inputs.push_back(std::move(*in));
  }
  return inputs;
}

std::vector<bool> keptArguments(const Program &prog,
                                const std::vector<StepInput> &inputs,
                                std::vector<std::string> &origins,
                                std::vector<bool> &current) {
  size_t n = prog.args.size();
  std::vector<bool> keep(n, false);
  origins.resize(n);
  current.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const std::string &origin = inputs[i].origin();
    keep[i] = prog.args[i].readOnly && prog.fedBy[i] < 0 &&
              inputs[i].constantValue() && !origin.empty();
    current[i] = keep[i] && origins[i] == origin;
    origins[i] = keep[i] ? origin : "";
  }
  return keep;
}

} // namespace fsdp::run

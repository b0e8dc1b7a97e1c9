//===- RankRun.cpp - the steps of one rank --------------------------------===//

#include "RankRun.h"
#include "Checkpoint.h"
#include "Shards.h"

#include "fsdp/Layout/LayoutMath.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

namespace lm = ::fsdp::layout;

namespace fsdp::run {

namespace {

/// The argument buffers and packed pointers of one rank's call.
class RankCall {
public:
  RankCall(const Program &prog, std::vector<std::vector<char>> args)
      : buffers(std::move(args)) {
    for (size_t i = 0; i < prog.args.size(); ++i)
      descs.push_back(Descriptor::forBuffer(buffers[i].data(),
                                            prog.args[i].type.getShape()));
    size_t words = 0;
    for (const Port &p : prog.results) {
      offsets.push_back(words);
      words += p.descriptorWords();
    }
    resultArea.assign(words, 0);
    if (!prog.results.empty())
      pointers.push_back(resultArea.data());
    for (Descriptor &d : descs)
      pointers.push_back(d.words.data());
    for (void *&p : pointers)
      packed.push_back(&p);
  }

  llvm::Error invoke(StepCode &code, const std::string &entry) {
    return code.invokePacked("_mlir_ciface_" + entry, packed);
  }

  /// A copy of result `i`'s elements.
  std::vector<char> result(const Program &prog, size_t i) const {
    return copyResult(prog.results[i], resultArea.data() + offsets[i]);
  }

  /// Frees the buffers the step returned, each once (results may share a
  /// buffer). Only live allocations of the step are freed: a result that is
  /// an argument or a constant is left alone.
  void releaseResults() {
    std::vector<void *> done;
    for (size_t off : offsets) {
      void *allocated = reinterpret_cast<void *>(resultArea[off]);
      if (std::find(done.begin(), done.end(), allocated) != done.end())
        continue;
      done.push_back(allocated);
      memory::release(allocated);
    }
  }

private:
  std::vector<std::vector<char>> buffers;
  std::vector<Descriptor> descs;
  std::vector<int64_t> resultArea;
  std::vector<size_t> offsets;
  std::vector<void *> pointers, packed;
};

/// An f32 or f64 element as a double.
double scalarValue(const Port &p, const char *data) {
  mlir::Type t = p.type.getElementType();
  if (t.isF64())
    return *reinterpret_cast<const double *>(data);
  if (t.isF32())
    return *reinterpret_cast<const float *>(data);
  return std::nan("");
}

/// Rank 0's scalars of the step that just ended (the last slot of each
/// stacked piece).
void reportStep(const RunContext &cx, const RankOutcome &out, int64_t step) {
  std::vector<StepScalar> scalars;
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const Output &o = cx.outputs[k];
    if (!o.stacked)
      continue;
    const char *last = out.pieces[k].data() + out.pieces[k].size() -
                       size_t(o.port->slotBytes());
    scalars.push_back({o.port->name, scalarValue(*o.port, last)});
  }
  cx.options.onStep(step, scalars);
}

/// Whether every rank of `runner` reports `ok`; names the first that did
/// not in `error`.
bool agree(fsdprt_comm_t *runner, bool ok, const std::string &what,
           std::string &error) {
  int64_t size = 1;
  fsdprt_comm_size(runner, &size);
  char mine = ok ? 1 : 0;
  std::vector<char> all(size_t(size), 0);
  if (fsdprt_all_gather(runner, 1, &mine, all.data(), 1, FSDPRT_U8) !=
      FSDPRT_OK) {
    error = what + ": " + fsdprt_comm_error_message(runner);
    return false;
  }
  for (int64_t r = 0; r < size; ++r)
    if (!all[r]) {
      if (error.empty())
        error = what + ": rank " + std::to_string(r) + " failed";
      return false;
    }
  return true;
}

/// Every rank's success flag and CRC-32 list of its checkpoint file, or
/// false with a message.
bool gatherCrcs(const RunContext &cx, fsdprt_comm_t *runner, bool ok,
                const std::vector<uint32_t> &crcs, const std::string &what,
                std::vector<std::vector<uint32_t>> &perRank,
                std::string &error) {
  int64_t size = cx.prog.meshSize();
  std::vector<uint32_t> mine = {ok ? 1u : 0u};
  mine.insert(mine.end(), crcs.begin(), crcs.end());
  mine.resize(checkpoint::savedArgs(cx.prog).size() + 1, 0);
  std::vector<uint32_t> all(mine.size() * size_t(size));
  if (fsdprt_all_gather(runner, 1, mine.data(), all.data(), mine.size() * 4,
                        FSDPRT_U8) != FSDPRT_OK) {
    error = what + ": " + fsdprt_comm_error_message(runner);
    return false;
  }
  for (int64_t r = 0; r < size; ++r) {
    auto first = all.begin() + r * int64_t(mine.size());
    if (!*first) {
      if (error.empty())
        error = what + ": rank " + std::to_string(r) + " could not write";
      return false;
    }
    perRank.emplace_back(first + 1, first + int64_t(mine.size()));
  }
  return true;
}

/// Writes the checkpoint of global step `step` (docs/RUNTIME.md): each
/// rank its own file into the partial directory, then rank 0 the metadata
/// and the rename, once every rank has written.
bool saveCheckpoint(const RunContext &cx, fsdprt_comm_t *runner,
                    const std::vector<std::vector<char>> &fed, int64_t rank,
                    int64_t step, std::string &error) {
  const std::string &saveDir = cx.options.saveDir;
  std::string part = checkpoint::partialDir(saveDir, step),
              done = checkpoint::finalDir(saveDir, step);
  std::string what = "saving " + done;
  bool ok = true;
  if (rank == 0) {
    llvm::sys::fs::remove_directories(part);
    if (std::error_code ec = llvm::sys::fs::create_directories(part)) {
      error = "cannot create " + part + ": " + ec.message();
      ok = false;
    }
  }
  if (!agree(runner, ok, what, error))
    return false;
  std::vector<uint32_t> crcs;
  ok = checkpoint::writeRankFile(part, cx.prog, fed, rank, crcs, error);
  std::vector<std::vector<uint32_t>> perRank;
  if (!gatherCrcs(cx, runner, ok, crcs, what, perRank, error)) {
    if (rank == 0)
      llvm::sys::fs::remove_directories(part);
    return false;
  }
  if (rank == 0) {
    ok = checkpoint::writeMetadata(part, cx.prog, step, perRank, error) &&
         checkpoint::publish(part, done, error);
    if (!ok)
      llvm::sys::fs::remove_directories(part);
    else if (cx.options.onMessage)
      cx.options.onMessage("saved checkpoint " + done);
  }
  return agree(runner, ok, what, error);
}

/// This rank's arguments of global step `g`: its shard of every input,
/// then (once every input could be read) the fed-back buffers, moved.
bool bindArguments(const RunContext &cx, fsdprt_comm_t *runner, int64_t rank,
                   int64_t g, std::vector<std::vector<char>> &fed,
                   std::vector<std::vector<char>> &args, std::string &error) {
  const Program &prog = cx.prog;
  bool training = prog.training();
  args.assign(prog.args.size(), {});
  for (size_t i = 0; i < prog.args.size() && error.empty(); ++i) {
    if (training && prog.fedBy[i] >= 0)
      continue;
    StepValue hold;
    auto global = cx.inputs[i].at(training ? g : 0, hold);
    if (!global)
      error = llvm::toString(global.takeError());
    else
      args[i] = shardInput(prog.args[i], *global, rank);
  }
  // A per-step file that cannot be read stops every rank together, before
  // the step's collectives (a lone rank leaving would make the others wait
  // for it).
  bool stepFiles = llvm::any_of(
      cx.inputs, [](const StepInput &in) { return in.fromFiles(); });
  if (stepFiles && !agree(runner, error.empty(),
                          "step " + std::to_string(g) + " inputs", error))
    return false;
  for (size_t i = 0; i < prog.args.size(); ++i)
    if (training && prog.fedBy[i] >= 0)
      args[i] = std::move(fed[i]);
  return true;
}

/// Keeps what the outputs need of a step's results and feeds the updates
/// back.
void collectResults(const RunContext &cx, RankCall &call, bool last,
                    std::vector<std::vector<char>> &fed, RankOutcome &out) {
  const Program &prog = cx.prog;
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const Output &o = cx.outputs[k];
    if (o.stacked) {
      std::vector<char> v = call.result(prog, size_t(o.result));
      out.pieces[k].insert(out.pieces[k].end(), v.begin(), v.end());
    } else if (last && o.arg < 0) {
      out.pieces[k] = call.result(prog, size_t(o.result));
    }
  }
  if (prog.training())
    for (size_t i = 0; i < prog.results.size(); ++i)
      if (prog.results[i].updateOf)
        fed[*prog.results[i].updateOf] = call.result(prog, i);
  call.releaseResults();
}

/// Page faults (minor and major) the calling thread has taken.
int64_t threadFaults() {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0)
    return 0;
  return int64_t(u.ru_minflt) + int64_t(u.ru_majflt);
}

/// One call of the step; false with `out.error` set when it failed.
bool callStep(const RunContext &cx, fsdprt_comm_t *comm, RankCall &call,
              double &seconds, int64_t &faults, RankOutcome &out) {
  int64_t faults0 = threadFaults();
  auto t0 = std::chrono::steady_clock::now();
  if (llvm::Error err = call.invoke(cx.code, cx.prog.entry)) {
    out.error = llvm::toString(std::move(err));
    return false;
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
  faults = threadFaults() - faults0;
  if (fsdprt_comm_error(comm) != FSDPRT_OK) {
    out.error = fsdprt_comm_error_message(comm);
    return false;
  }
  return true;
}

/// Reserves the step's planned arena on this rank's thread (which touches
/// its pages first) before the first step; when a rank cannot, every rank
/// stops there, before any collective of the step.
bool reserveArena(const RunContext &cx, fsdprt_comm_t *comm,
                  fsdprt_comm_t *runner, std::string &error) {
  const std::optional<MemoryPlan> &plan = cx.prog.plan;
  if (!plan || plan->arenaBytes == 0)
    return true;
  fsdprt_status_t st = fsdprt_arena_reserve(comm, plan->arenaBytes);
  bool ok = st == FSDPRT_OK;
  if (!ok) {
    error = "cannot allocate the arena of '" + cx.prog.entry +
            "': " + std::to_string(plan->arenaBytes) + " bytes for " +
            std::to_string(plan->buffers) + " planned buffers (largest:";
    for (int64_t bytes : plan->largest)
      error += " " + std::to_string(bytes);
    error += " bytes): " + std::string(fsdprt_status_string(st));
  }
  return agree(runner, ok, "the step's arena", error);
}

} // namespace

std::vector<Output> outputsOf(const Program &prog) {
  std::vector<Output> outs;
  bool training = prog.training();
  for (size_t i = 0; i < prog.results.size(); ++i) {
    const Port &r = prog.results[i];
    if (training && r.updateOf)
      outs.push_back({&prog.args[*r.updateOf], int64_t(i), *r.updateOf, false});
    else
      outs.push_back({&r, int64_t(i), -1, training && r.type.getRank() == 0});
  }
  return outs;
}

bool ranksHoldScalars(const std::vector<Output> &outputs) {
  for (const Output &o : outputs)
    if (o.stacked && o.port->layout)
      for (const lm::Placement &p : o.port->layout->placements)
        if (p.kind == lm::Placement::Kind::Partial)
          return false;
  return true;
}

int64_t residentBytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * int64_t(sysconf(_SC_PAGESIZE)) : 0;
}

void runRank(const RunContext &cx, fsdprt_comm_t *comm, fsdprt_comm_t *runner,
             int64_t rank, std::vector<std::vector<char>> &fed,
             RankOutcome &out) {
  fsdprt_set_thread_comm(comm);
  const Program &prog = cx.prog;
  const RunOptions &opt = cx.options;
  bool training = prog.training();
  int64_t total = training ? opt.steps : opt.warmup + opt.steps;
  out.pieces.assign(cx.outputs.size(), {});
  if (!reserveArena(cx, comm, runner, out.error))
    total = 0;
  for (int64_t s = 0; s < total; ++s) {
    int64_t g = cx.firstStep + s;
    std::vector<std::vector<char>> args;
    if (!bindArguments(cx, runner, rank, g, fed, args, out.error))
      break;
    // Every step gets fresh argument buffers (a step may update its
    // arguments in place); only the call is timed.
    RankCall call(prog, std::move(args));
    double seconds = 0;
    int64_t faults = 0;
    if (!callStep(cx, comm, call, seconds, faults, out)) {
      out.stateLost = true;
      break;
    }
    out.stepsDone = s + 1;
    if (training || s >= opt.warmup) {
      out.stepSeconds.push_back(seconds);
      out.stepFaults.push_back(faults);
    }
    bool last = s + 1 == total;
    collectResults(cx, call, last, fed, out);
    if (training && cx.liveSteps && rank == 0 && opt.onStep)
      reportStep(cx, out, g + 1);
    out.heldAfterStep =
        std::max(out.heldAfterStep, memory::current().liveBytes);
    if (opt.measureResidentSet && rank == 0)
      out.rss.push_back(residentBytes());
    bool due = opt.saveEvery > 0 && (g + 1) % opt.saveEvery == 0;
    if (training && !opt.saveDir.empty() && (due || last) &&
        !saveCheckpoint(cx, runner, fed, rank, g + 1, out.error))
      break;
  }
  for (size_t k = 0; k < cx.outputs.size() && out.error.empty(); ++k)
    if (cx.outputs[k].arg >= 0)
      out.pieces[k] = fed[cx.outputs[k].arg];
  out.memory = memory::current();
  out.arenaBytes = fsdprt_arena_bytes(comm);
  fsdprt_comm_get_stats(comm, &out.stats);
}

} // namespace fsdp::run

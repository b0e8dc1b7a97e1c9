//===- fsdp-run.cpp - run a lowered fsdp program on W ranks ---------------===//
//
// The command line of the runner library (include/fsdp/Runner/Runner.h):
// parses the flags into LoadOptions and RunOptions, opens the lowered
// module, runs it on every rank of its mesh (threads of this process, or
// one process per rank under mpirun) and writes the gathered results as
// .npy files, with the reports the flags ask for.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Runner/Runner.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>

using namespace ::fsdp::run;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory runCategory("fsdp-run options");

/// The flags, read once in main into the options structs.
struct Flags {
  cl::opt<std::string> input{cl::Positional, cl::desc("<lowered .mlir>"),
                             cl::Required, cl::cat(runCategory)};
  cl::opt<std::string> entry{"entry", cl::desc("Function to run"), cl::init(""),
                             cl::cat(runCategory)};
  cl::list<std::string> inputs{
      "inputs",
      cl::desc("Directory of global .npy inputs (repeatable: the first "
               "directory holding <name>.npy wins)"),
      cl::OneOrMore, cl::cat(runCategory)};
  cl::opt<std::string> outputs{"outputs",
                               cl::desc("Directory for gathered .npy results"),
                               cl::Required, cl::cat(runCategory)};
  cl::opt<std::string> backend{"backend", cl::desc("threads (default) or mpi"),
                               cl::init("threads"), cl::cat(runCategory)};
  cl::opt<int64_t> world{
      "world",
      cl::desc("Number of ranks; must equal the mesh size (default: mesh "
               "size)"),
      cl::init(0), cl::cat(runCategory)};
  cl::opt<double> timeout{"timeout",
                          cl::desc("Seconds a collective waits for its peers"),
                          cl::init(60.0), cl::cat(runCategory)};
  cl::opt<bool> allRanks{
      "all-ranks",
      cl::desc("Also write every rank's copy of results without a layout as "
               "<name>.rank<r>.npy"),
      cl::init(false), cl::cat(runCategory)};
  cl::opt<bool> stats{"print-comm-stats",
                      cl::desc("Print collectives and bytes per rank"),
                      cl::init(false), cl::cat(runCategory)};
  cl::opt<int64_t> steps{
      "steps",
      cl::desc("A training step (results with fsdp.update_of): run this many "
               "training steps, feeding the updates back. Otherwise: run the "
               "step this many times on the same inputs and print the JIT "
               "time and the median and minimum step time (results: the "
               "last step's)"),
      cl::init(1), cl::cat(runCategory)};
  cl::opt<int64_t> warmup{"warmup",
                          cl::desc("Untimed steps before the --steps timed "
                                   "ones"),
                          cl::init(0), cl::cat(runCategory)};
  cl::opt<bool> json{"json",
                     cl::desc("Print the timings as one JSON object on "
                              "stdout"),
                     cl::init(false), cl::cat(runCategory)};
  cl::opt<bool> memory{
      "print-memory",
      cl::desc("Print each rank's measured allocation high-water mark of the "
               "compiled step and the process's resident set (a compute=gpu "
               "step: the device bytes its GPU context allocated)"),
      cl::init(false), cl::cat(runCategory)};
  cl::opt<std::string> save{
      "save",
      cl::desc("Training: write sharded checkpoints into <dir>/step-<K> (at "
               "the end, and every --save-every steps)"),
      cl::init(""), cl::cat(runCategory)};
  cl::opt<int64_t> saveEvery{
      "save-every",
      cl::desc("Training: also save after every K-th global step"), cl::init(0),
      cl::cat(runCategory)};
  cl::opt<std::string> resume{
      "resume",
      cl::desc("Training: start from a checkpoint (a step-<K> directory, or "
               "the newest complete one in a --save directory), on any mesh"),
      cl::init(""), cl::cat(runCategory)};
  cl::opt<std::string> jitCacheDir{
      "jit-cache-dir",
      cl::desc("Directory of compiled objects (default: $FSDP_JIT_CACHE_DIR, "
               "$XDG_CACHE_HOME/fsdp-run or ~/.cache/fsdp-run)"),
      cl::init(""), cl::cat(runCategory)};
  cl::opt<bool> noJitCache{"no-jit-cache",
                           cl::desc("Neither read nor write the cache"),
                           cl::init(false), cl::cat(runCategory)};
  cl::opt<std::string> cudaGraphs{
      "cuda-graphs",
      cl::desc("on|off: a compute=gpu step captures its third step into a "
               "CUDA graph and replays it for the later steps, when the step "
               "allocates nothing and does not wait on the host (default on; "
               "off runs every step as compiled)"),
      cl::init("on"), cl::cat(runCategory)};
};

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-run: error: " << message << "\n";
  llvm::errs().flush();
  std::exit(1);
}

/// Prints every line of an error with the tool's prefix, and exits.
[[noreturn]] void fail(llvm::Error error) {
  std::string text = llvm::toString(std::move(error));
  llvm::StringRef rest = text;
  while (!rest.empty()) {
    auto [line, tail] = rest.split('\n');
    llvm::errs() << "fsdp-run: error: " << line << "\n";
    rest = tail;
  }
  llvm::errs().flush();
  std::exit(1);
}

LoadOptions loadOptions(const Flags &f) {
  if (f.backend != "threads" && f.backend != "mpi")
    fail("unknown backend '" + f.backend + "' (threads or mpi)");
  LoadOptions o;
  o.entry = f.entry;
  o.backend = f.backend == "mpi" ? Backend::Mpi : Backend::Threads;
  o.timeoutSeconds = f.timeout;
  o.world = f.world;
  if (!f.noJitCache)
    o.jitCacheDir =
        f.jitCacheDir.empty() ? defaultCacheDir() : f.jitCacheDir.getValue();
  return o;
}

RunOptions runOptions(const Flags &f, int64_t &liveSteps) {
  RunOptions o;
  o.inputDirs.assign(f.inputs.begin(), f.inputs.end());
  o.steps = f.steps;
  o.warmup = f.warmup;
  o.saveDir = f.save;
  o.saveEvery = f.saveEvery;
  o.resumeDir = f.resume;
  o.keepAllRanks = f.allRanks;
  o.measureResidentSet = f.memory || f.json;
  if (f.cudaGraphs != "on" && f.cudaGraphs != "off")
    fail("--cuda-graphs takes on or off, not '" + f.cudaGraphs + "'");
  o.cudaGraphs = f.cudaGraphs == "on";
  if (f.json)
    return o;
  o.onStep = [&liveSteps](int64_t step, llvm::ArrayRef<StepScalar> scalars) {
    ++liveSteps;
    llvm::outs() << "step " << step << ":";
    for (const StepScalar &s : scalars)
      llvm::outs() << " " << s.name << " " << llvm::format("%.8g", s.value);
    llvm::outs() << "\n";
    llvm::outs().flush();
  };
  o.onMessage = [](llvm::StringRef message) {
    llvm::outs() << message << "\n";
    llvm::outs().flush();
  };
  return o;
}

/// One line per training step with its scalar results (the loss, ...),
/// when rank 0 could not print them as they ended.
void printSteps(const RunResult &r) {
  std::vector<const HostArray *> scalars;
  for (const HostArray &a : r.outputs)
    if (a.perStep)
      scalars.push_back(&a);
  if (scalars.empty())
    return;
  for (size_t s = 0; s < r.stepSeconds.size(); ++s) {
    llvm::outs() << "step " << r.firstStep + int64_t(s) + 1 << ":";
    for (const HostArray *a : scalars)
      llvm::outs() << " " << a->name << " "
                   << llvm::format("%.8g", a->scalarAt(s));
    llvm::outs() << "\n";
  }
}

void printRankStats(size_t rank, const CommStats &s) {
  llvm::outs() << "  rank " << rank << ": " << s.collectives
               << " collectives (all_gather " << s.allGathers
               << ", reduce_scatter " << s.reduceScatters << ", all_reduce "
               << s.allReduces << "), sent " << s.bytesSent << " B, received "
               << s.bytesReceived << " B\n";
}

/// The static plan and the measured memory of the compiled step per rank
/// (--print-memory).
void printMemory(const RunResult &r, int64_t steps) {
  if (r.gpu) {
    // Every buffer of the step is device memory: the host's counters see
    // nothing, the GPU contexts count what was allocated.
    llvm::outs() << "device memory of the compute=gpu step (its GPU "
                    "context's counters, per rank; the host peak is not "
                    "measured):\n";
    for (size_t k = 0; k < r.memory.size(); ++k) {
      const RankMemory &m = r.memory[k];
      int64_t n = std::max<int64_t>(1, steps);
      llvm::outs() << "  rank " << k << " (GPU " << m.device
                   << "): " << m.deviceAllocatedBytes << " B allocated in "
                   << steps << " step(s), " << m.deviceAllocatedBytes / n
                   << " B per step, peak " << m.devicePeakBytes
                   << " B live at once; " << m.deviceLaunches / n
                   << " kernel launches and " << m.deviceGemms / n
                   << " cuBLAS GEMMs per step; " << m.deviceAllocations
                   << " device allocations in all, arena " << m.deviceArenaBytes
                   << " B\n";
    }
    return;
  }
  if (r.plan.planned)
    llvm::outs() << "static memory plan of the step (per rank): arena "
                 << r.plan.arenaBytes << " B (" << r.plan.buffers
                 << " buffers) + outside " << r.plan.outsideBytes
                 << " B = " << r.plan.peakBytes() << " B\n";
  llvm::outs() << "measured memory of the compiled step (its arena and the "
                  "malloc/free of the JIT'd code, per rank):\n";
  for (size_t k = 0; k < r.memory.size(); ++k) {
    const RankMemory &m = r.memory[k];
    llvm::outs() << "  rank " << k << ": peak " << m.measuredPeakBytes()
                 << " B, " << m.allocations / std::max<int64_t>(1, steps)
                 << " allocations per step, held after a step "
                 << m.heldAfterStepBytes << " B; arena " << m.arenaBytes
                 << " B + outside " << m.peakBytes << " B, " << m.allocations
                 << " allocations in all\n";
  }
  const std::vector<int64_t> &faults = r.stepPageFaults;
  if (faults.size() > 1)
    llvm::outs() << "  page faults per step after the first (this process): "
                 << "max "
                 << *std::max_element(faults.begin() + 1, faults.end())
                 << ", first step " << faults.front() << "\n";
  const std::vector<int64_t> &rss = r.residentBytes;
  if (!rss.empty())
    llvm::outs() << llvm::format(
        "  resident set of the process: %.1f MiB after step 1, %.1f MiB "
        "after step %zu\n",
        rss.front() / 1048576.0, rss.back() / 1048576.0, rss.size());
}

/// The JIT and step times: human-readable or one JSON object.
void printTimings(const Flags &f, const RunResult &r) {
  if (f.json) {
    llvm::outs() << llvm::json::Value(toJSON(r)) << "\n";
    return;
  }
  if (f.steps <= 1 && f.warmup <= 0)
    return;
  llvm::outs() << llvm::format(
      "parse %.3f s, %s %.3f s%s; step over %lld "
      "run(s) after %lld warmup: median %.3f ms, "
      "min %.3f ms\n",
      r.parseSeconds, r.precompiled ? "load" : "jit", r.jitSeconds,
      r.precompiled ? " (precompiled)"
      : r.jitCached ? " (cached)"
                    : "",
      (long long)f.steps.getValue(), (long long)f.warmup.getValue(),
      r.medianStepSeconds() * 1e3, r.minStepSeconds() * 1e3);
  if (r.medianStepSeconds() > 0)
    llvm::outs() << llvm::format(
        "exposed communication (the step's compute waiting for its "
        "collectives): median %.3f ms per step, %.1f%% of the step\n",
        r.medianExposedSeconds() * 1e3,
        100 * r.medianExposedSeconds() / r.medianStepSeconds());
}

/// Everything rank 0 (or the threads process) reports after a run.
void report(const Flags &f, const RunResult &r, bool mpi, int64_t liveSteps) {
  if (llvm::Error e = writeOutputs(r, f.outputs))
    fail(std::move(e));
  if (r.training && !f.json && liveSteps == 0)
    printSteps(r);
  if (f.stats && !mpi) {
    llvm::outs() << "collectives and bytes moved per rank:\n";
    for (size_t k = 0; k < r.stats.size(); ++k)
      printRankStats(k, r.stats[k]);
  }
  if (f.memory && !f.json)
    printMemory(r, r.training ? f.steps : f.steps + f.warmup);
  printTimings(f, r);
  // Statistics under MPI are this process's (rank 0's).
  if (f.stats && mpi && !r.stats.empty())
    printRankStats(0, r.stats.front());
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Flags flags;
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdp-run: run a lowered fsdp program on "
                              "every rank of its mesh\n");
  LoadOptions load = loadOptions(flags);
  int64_t liveSteps = 0;
  RunOptions run = runOptions(flags, liveSteps);
  auto session = Session::openFile(flags.input, load);
  if (!session)
    fail(session.takeError());
  auto result = (*session)->run(run);
  if (!result)
    fail(result.takeError());
  if (result->isReporter)
    report(flags, *result, load.backend == Backend::Mpi, liveSteps);
  return 0;
}

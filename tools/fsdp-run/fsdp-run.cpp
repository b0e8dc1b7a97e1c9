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

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

using namespace ::fsdp::run;

namespace {

/// The flags, read once in main into the options structs.
struct Flags {
  std::string input;
  std::string entry;
  std::vector<std::string> inputs;
  std::string outputs;
  std::string backend = "threads";
  int64_t world = 0;
  double timeout = 60.0;
  bool allRanks = false;
  bool stats = false;
  int64_t steps = 1;
  int64_t warmup = 0;
  bool json = false;
  bool memory = false;
  std::string save;
  int64_t saveEvery = 0;
  std::string resume;
  std::string jitCacheDir;
  bool noJitCache = false;
  std::string cudaGraphs = "on";
};

[[noreturn]] void fail(const std::string &message) {
  std::cout.flush();
  std::cerr << "fsdp-run: error: " << message << "\n";
  std::cerr.flush();
  std::exit(1);
}

/// Prints every line of an error with the tool's prefix, and exits.
[[noreturn]] void fail(Error error) {
  std::string text = toString(std::move(error));
  std::cout.flush();
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::cerr << "fsdp-run: error: " << text.substr(start, end - start) << "\n";
    start = end + 1;
  }
  std::cerr.flush();
  std::exit(1);
}

/// printf into a string.
std::string format(const char *fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

//===----------------------------------------------------------------------===//
// The command line
//===----------------------------------------------------------------------===//

/// One flag: `--name=value`, `--name value` (or one dash); a boolean flag
/// takes no value, or `=true` / `=false`.
struct Option {
  enum Kind { Bool, String, List, Int, Double } kind;
  const char *name, *value, *help;
  void *target;
};

std::vector<Option> optionsOf(Flags &f) {
  return {
      {Option::Bool, "all-ranks", "",
       "Also write every rank's copy of results without a layout as "
       "<name>.rank<r>.npy",
       &f.allRanks},
      {Option::String, "backend", "<string>", "threads (default) or mpi",
       &f.backend},
      {Option::String, "cuda-graphs", "<string>",
       "on|off: a compute=gpu step captures its third step into a CUDA graph "
       "and replays it for the later steps, when the step allocates nothing "
       "and does not wait on the host (default on; off runs every step as "
       "compiled)",
       &f.cudaGraphs},
      {Option::String, "entry", "<string>", "Function to run", &f.entry},
      {Option::List, "inputs", "<string>",
       "Directory of global .npy inputs (repeatable: the first directory "
       "holding <name>.npy wins)",
       &f.inputs},
      {Option::String, "jit-cache-dir", "<string>",
       "Directory of compiled objects (default: $FSDP_JIT_CACHE_DIR, "
       "$XDG_CACHE_HOME/fsdp-run or ~/.cache/fsdp-run)",
       &f.jitCacheDir},
      {Option::Bool, "json", "",
       "Print the timings as one JSON object on stdout", &f.json},
      {Option::Bool, "no-jit-cache", "", "Neither read nor write the cache",
       &f.noJitCache},
      {Option::String, "outputs", "<string>",
       "Directory for gathered .npy results", &f.outputs},
      {Option::Bool, "print-comm-stats", "",
       "Print collectives and bytes per rank", &f.stats},
      {Option::Bool, "print-memory", "",
       "Print each rank's measured allocation high-water mark of the "
       "compiled step and the process's resident set (a compute=gpu step: "
       "the device bytes its GPU context allocated)",
       &f.memory},
      {Option::String, "resume", "<string>",
       "Training: start from a checkpoint (a step-<K> directory, or the "
       "newest complete one in a --save directory), on any mesh",
       &f.resume},
      {Option::String, "save", "<string>",
       "Training: write sharded checkpoints into <dir>/step-<K> (at the end, "
       "and every --save-every steps)",
       &f.save},
      {Option::Int, "save-every", "<long>",
       "Training: also save after every K-th global step", &f.saveEvery},
      {Option::Int, "steps", "<long>",
       "A training step (results with fsdp.update_of): run this many "
       "training steps, feeding the updates back. Otherwise: run the step "
       "this many times on the same inputs and print the JIT time and the "
       "median and minimum step time (results: the last step's)",
       &f.steps},
      {Option::Double, "timeout", "<number>",
       "Seconds a collective waits for its peers", &f.timeout},
      {Option::Int, "warmup", "<long>",
       "Untimed steps before the --steps timed ones", &f.warmup},
      {Option::Int, "world", "<long>",
       "Number of ranks; must equal the mesh size (default: mesh size)",
       &f.world},
  };
}

void printHelp(const std::vector<Option> &options) {
  std::cout << "OVERVIEW: fsdp-run: run a lowered fsdp program (or a step "
               "library built by fsdp-compile) on every rank of its mesh\n\n"
               "USAGE: fsdp-run [options] <lowered .mlir or step .so>\n\n"
               "OPTIONS:\n\n"
               "  --help                   - Display available options\n";
  for (const Option &o : options) {
    std::string flag = std::string("--") + o.name;
    if (*o.value)
      flag += std::string("=") + o.value;
    std::cout << "  " << flag
              << std::string(flag.size() < 23 ? 23 - flag.size() : 1, ' ')
              << "- " << o.help << "\n";
  }
}

[[noreturn]] void usageError(const std::string &message) {
  std::cerr << "fsdp-run: " << message
            << "\nTry: 'fsdp-run --help' for the options\n";
  std::exit(1);
}

void setOption(const Option &o, const std::string &value, bool hasValue) {
  std::string flag = std::string("--") + o.name;
  char *end = nullptr;
  switch (o.kind) {
  case Option::Bool:
    if (!hasValue || value == "true" || value == "1")
      *static_cast<bool *>(o.target) = true;
    else if (value == "false" || value == "0")
      *static_cast<bool *>(o.target) = false;
    else
      usageError("for the " + flag + " option: '" + value +
                 "' is invalid value for boolean argument! Try 0 or 1");
    return;
  case Option::String:
    *static_cast<std::string *>(o.target) = value;
    return;
  case Option::List:
    static_cast<std::vector<std::string> *>(o.target)->push_back(value);
    return;
  case Option::Int: {
    long long v = std::strtoll(value.c_str(), &end, 0);
    if (value.empty() || *end)
      usageError("for the " + flag + " option: '" + value +
                 "' value invalid for long argument!");
    *static_cast<int64_t *>(o.target) = v;
    return;
  }
  case Option::Double: {
    double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end)
      usageError("for the " + flag + " option: '" + value +
                 "' value invalid for floating point argument!");
    *static_cast<double *>(o.target) = v;
    return;
  }
  }
}

Flags parseCommandLine(int argc, char **argv) {
  Flags f;
  std::vector<Option> options = optionsOf(f);
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i)
        positional.push_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    if (name == "help" || name == "h") {
      printHelp(options);
      std::exit(0);
    }
    auto it = std::find_if(options.begin(), options.end(),
                           [&](const Option &o) { return name == o.name; });
    if (it == options.end())
      usageError("Unknown command line argument '" + arg + "'.");
    if (eq != std::string::npos) {
      setOption(*it, body.substr(eq + 1), true);
    } else if (it->kind == Option::Bool) {
      setOption(*it, "", false);
    } else {
      if (i + 1 >= argc)
        usageError(std::string("for the --") + it->name +
                   " option: requires a value!");
      setOption(*it, argv[++i], true);
    }
  }
  if (positional.empty())
    usageError("Not enough positional command line arguments specified!\n"
               "Must specify at least 1 positional argument");
  if (positional.size() > 1)
    usageError("Too many positional arguments specified!\n"
               "Can specify at most 1 positional argument");
  f.input = positional.front();
  if (f.inputs.empty())
    usageError("for the --inputs option: must be specified at least once!");
  if (f.outputs.empty())
    usageError("for the --outputs option: must be specified at least once!");
  return f;
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
    o.jitCacheDir = f.jitCacheDir.empty() ? defaultCacheDir() : f.jitCacheDir;
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
  o.outputsDir = f.outputs;
  o.measureResidentSet = f.memory || f.json;
  if (f.cudaGraphs != "on" && f.cudaGraphs != "off")
    fail("--cuda-graphs takes on or off, not '" + f.cudaGraphs + "'");
  o.cudaGraphs = f.cudaGraphs == "on";
  if (f.json)
    return o;
  o.onStep = [&liveSteps](int64_t step, Span<const StepScalar> scalars) {
    ++liveSteps;
    std::cout << "step " << step << ":";
    for (const StepScalar &s : scalars)
      std::cout << " " << s.name << " " << format("%.8g", s.value);
    std::cout << "\n";
    std::cout.flush();
  };
  o.onMessage = [](std::string_view message) {
    std::cout << message << "\n";
    std::cout.flush();
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
    std::cout << "step " << r.firstStep + int64_t(s) + 1 << ":";
    for (const HostArray *a : scalars)
      std::cout << " " << a->name << " " << format("%.8g", a->scalarAt(s));
    std::cout << "\n";
  }
}

void printRankStats(size_t rank, const CommStats &s) {
  std::cout << "  rank " << rank << ": " << s.collectives
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
    std::cout << "device memory of the compute=gpu step (its GPU "
                 "context's counters, per rank; the host peak is not "
                 "measured):\n";
    for (size_t k = 0; k < r.memory.size(); ++k) {
      const RankMemory &m = r.memory[k];
      int64_t n = std::max<int64_t>(1, steps);
      std::cout << "  rank " << k << " (GPU " << m.device
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
    std::cout << "static memory plan of the step (per rank): arena "
              << r.plan.arenaBytes << " B (" << r.plan.buffers
              << " buffers) + outside " << r.plan.outsideBytes
              << " B = " << r.plan.peakBytes() << " B\n";
  std::cout << "measured memory of the compiled step (its arena and the "
               "malloc/free of the JIT'd code, per rank):\n";
  for (size_t k = 0; k < r.memory.size(); ++k) {
    const RankMemory &m = r.memory[k];
    std::cout << "  rank " << k << ": peak " << m.measuredPeakBytes() << " B, "
              << m.allocations / std::max<int64_t>(1, steps)
              << " allocations per step, held after a step "
              << m.heldAfterStepBytes << " B; arena " << m.arenaBytes
              << " B + outside " << m.peakBytes << " B, " << m.allocations
              << " allocations in all\n";
  }
  const std::vector<int64_t> &faults = r.stepPageFaults;
  if (faults.size() > 1)
    std::cout << "  page faults per step after the first (this process): "
              << "max " << *std::max_element(faults.begin() + 1, faults.end())
              << ", first step " << faults.front() << "\n";
  const std::vector<int64_t> &rss = r.residentBytes;
  if (!rss.empty())
    std::cout << format(
        "  resident set of the process: %.1f MiB after step 1, %.1f MiB "
        "after step %zu\n",
        rss.front() / 1048576.0, rss.back() / 1048576.0, rss.size());
}

/// The JIT and step times: human-readable or one JSON object.
void printTimings(const Flags &f, const RunResult &r) {
  if (f.json) {
    std::cout << toJSON(r) << "\n";
    return;
  }
  if (f.steps <= 1 && f.warmup <= 0)
    return;
  std::cout << format("parse %.3f s, %s %.3f s%s; step over %lld "
                      "run(s) after %lld warmup: median %.3f ms, "
                      "min %.3f ms\n",
                      r.parseSeconds, r.precompiled ? "load" : "jit",
                      r.jitSeconds,
                      r.precompiled ? " (precompiled)"
                      : r.jitCached ? " (cached)"
                                    : "",
                      (long long)f.steps, (long long)f.warmup,
                      r.medianStepSeconds() * 1e3, r.minStepSeconds() * 1e3);
  if (r.medianStepSeconds() > 0)
    std::cout << format(
        "exposed communication (the step's compute waiting for its "
        "collectives): median %.3f ms per step, %.1f%% of the step\n",
        r.medianExposedSeconds() * 1e3,
        100 * r.medianExposedSeconds() / r.medianStepSeconds());
}

/// Everything rank 0 (or the threads process) reports after a run.
void report(const Flags &f, const RunResult &r, bool mpi, int64_t liveSteps) {
  if (Error e = writeOutputs(r, f.outputs))
    fail(std::move(e));
  if (r.training && !f.json && liveSteps == 0)
    printSteps(r);
  if (f.stats && !mpi) {
    std::cout << "collectives and bytes moved per rank:\n";
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
  Flags flags = parseCommandLine(argc, argv);
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

//===- fsdp-run.cpp - run a lowered fsdp program on W ranks ---------------===//
//
// JIT-compiles a module produced by `fsdp-opt --fsdp-pipeline=lower=true`,
// shards the global inputs by the layouts the compiler recorded, runs every
// rank (threads of this process, or one process per rank under mpirun) and
// writes the gathered results as .npy files.
//
//===----------------------------------------------------------------------===//

#include "Jit.h"
#include "Npy.h"
#include "Program.h"
#include "Shards.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdprt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <system_error>
#include <thread>

using namespace mlir;
using namespace ::fsdp::run;
namespace lm = ::fsdp::layout;
namespace npy = ::fsdp::npy;
namespace cl = llvm::cl;

static cl::OptionCategory runCategory("fsdp-run options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<lowered .mlir>"), cl::Required,
                                      cl::cat(runCategory));
static cl::opt<std::string> entryName("entry", cl::desc("Function to run"),
                                      cl::init(""), cl::cat(runCategory));
static cl::list<std::string>
    inputsDirs("inputs",
               cl::desc("Directory of global .npy inputs (repeatable: the "
                        "first directory holding <name>.npy wins)"),
               cl::OneOrMore, cl::cat(runCategory));
static cl::opt<std::string>
    outputsDir("outputs", cl::desc("Directory for gathered .npy results"),
               cl::Required, cl::cat(runCategory));
static cl::opt<std::string> backendName("backend",
                                        cl::desc("threads (default) or mpi"),
                                        cl::init("threads"),
                                        cl::cat(runCategory));
static cl::opt<int64_t> worldSize(
    "world",
    cl::desc("Number of ranks; must equal the mesh size (default: mesh size)"),
    cl::init(0), cl::cat(runCategory));
static cl::opt<double>
    timeoutSeconds("timeout",
                   cl::desc("Seconds a collective waits for its peers"),
                   cl::init(60.0), cl::cat(runCategory));
static cl::opt<bool> writeAllRanks(
    "all-ranks",
    cl::desc("Also write every rank's copy of results without a layout as "
             "<name>.rank<r>.npy"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<bool>
    printStats("print-comm-stats",
               cl::desc("Print collectives and bytes per rank"),
               cl::init(false), cl::cat(runCategory));

static cl::opt<int64_t>
    stepCount("steps",
              cl::desc("Run the step this many times on the same inputs and "
                       "print the JIT time and the median and minimum step "
                       "time (results: the last step's)"),
              cl::init(1), cl::cat(runCategory));
static cl::opt<int64_t>
    warmupCount("warmup",
                cl::desc("Untimed steps before the --steps timed ones"),
                cl::init(0), cl::cat(runCategory));
static cl::opt<bool>
    printJson("json",
              cl::desc("Print the timings as one JSON object on stdout"),
              cl::init(false), cl::cat(runCategory));
static cl::opt<std::string> jitCacheDir(
    "jit-cache-dir",
    cl::desc("Directory of compiled objects (default: $FSDP_JIT_CACHE_DIR, "
             "$XDG_CACHE_HOME/fsdp-run or ~/.cache/fsdp-run)"),
    cl::init(""), cl::cat(runCategory));
static cl::opt<bool> noJitCache("no-jit-cache",
                                cl::desc("Neither read nor write the cache"),
                                cl::init(false), cl::cat(runCategory));

#ifdef FSDP_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int);
#endif

/// Most ranks the threads backend starts (one thread each).
constexpr int64_t kMaxThreadRanks = 16384;

namespace fsdp {
namespace run {
void fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-run: error: " << message << "\n";
  llvm::errs().flush();
  std::exit(1);
}
} // namespace run
} // namespace fsdp

namespace {

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[ ";
  for (int64_t d : shape)
    s += std::to_string(d) + " ";
  return s + "]";
}

/// `<dir>/<name>.npy` of the first --inputs directory holding it.
std::string inputPath(const Port &p) {
  for (const std::string &dir : inputsDirs) {
    std::string path = dir + "/" + p.name + ".npy";
    if (llvm::sys::fs::exists(path))
      return path;
  }
  return inputsDirs.front() + "/" + p.name + ".npy";
}

/// Reads one global input after checking its header against the port.
npy::Array loadInput(const Port &p, int64_t world) {
  std::string path = inputPath(p), error;
  npy::Header h;
  if (!npy::readHeader(path, h, error))
    fail("input '" + p.name + "': " + error);
  std::string want = npyDescr(p.type.getElementType());
  if (h.descr != want && !(want == "<u2" && h.descr == "|V2"))
    fail("input '" + p.name + "' (" + path + ") has dtype " + h.descr +
         ", expected " + want);
  std::vector<int64_t> expect = p.globalType.getShape().vec();
  if (!p.layout && !expect.empty() &&
      __builtin_mul_overflow(expect[0], world, &expect[0]))
    fail("input '" + p.name + "': the global batch is too large");
  if (h.shape != expect)
    fail("input '" + p.name + "' (" + path + ") has shape " +
         shapeString(h.shape) + ", expected " + shapeString(expect) +
         (p.layout ? "" : " (this rank's batch times the world size)"));
  npy::Array a;
  if (!npy::read(path, a, error))
    fail("input '" + p.name + "': " + error);
  return a;
}

std::vector<npy::Array> loadInputs(const Program &prog, int64_t world) {
  std::vector<npy::Array> inputs;
  for (const Port &p : prog.args)
    inputs.push_back(loadInput(p, world));
  return inputs;
}

/// The argument buffers and packed pointers of one rank's call.
class RankCall {
public:
  RankCall(const Program &prog, const std::vector<npy::Array> &inputs,
           int64_t rank) {
    for (size_t i = 0; i < prog.args.size(); ++i) {
      buffers.push_back(shardInput(prog.args[i], inputs[i], rank));
      descs.push_back(Descriptor::forBuffer(buffers.back().data(),
                                            prog.args[i].type.getShape()));
    }
    size_t words = 0;
    for (const Port &p : prog.results)
      words += p.descriptorWords();
    resultStruct.assign(words, 0);
    if (!prog.results.empty())
      pointers.push_back(resultStruct.data());
    for (Descriptor &d : descs)
      pointers.push_back(d.words.data());
    for (void *&p : pointers)
      packed.push_back(&p);
  }

  llvm::Error invoke(Jit &engine, const std::string &entry) {
    return engine.invokePacked("_mlir_ciface_" + entry, packed);
  }

  std::vector<std::vector<char>> results(const Program &prog) const {
    std::vector<std::vector<char>> out;
    size_t w = 0;
    for (const Port &p : prog.results) {
      out.push_back(copyResult(p, resultStruct.data() + w));
      w += p.descriptorWords();
    }
    return out;
  }

private:
  std::vector<std::vector<char>> buffers;
  std::vector<Descriptor> descs;
  std::vector<int64_t> resultStruct;
  std::vector<void *> pointers, packed;
};

struct RankRun {
  std::vector<std::vector<char>> results;
  std::vector<double> stepSeconds; // the timed steps
  fsdprt_stats_t stats{};
  std::string error;
};

void runRank(Jit &engine, const Program &prog,
             const std::vector<npy::Array> &inputs, fsdprt_comm_t *comm,
             int64_t rank, RankRun &out) {
  fsdprt_set_thread_comm(comm);
  // Every step gets fresh copies of the inputs (a step may update its
  // arguments in place); only the call is timed.
  std::unique_ptr<RankCall> call;
  for (int64_t s = 0; s < warmupCount + stepCount; ++s) {
    call = std::make_unique<RankCall>(prog, inputs, rank);
    auto t0 = std::chrono::steady_clock::now();
    if (llvm::Error err = call->invoke(engine, prog.entry)) {
      out.error = llvm::toString(std::move(err));
      return;
    }
    double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (fsdprt_comm_error(comm) != FSDPRT_OK) {
      out.error = fsdprt_comm_error_message(comm);
      return;
    }
    if (s >= warmupCount)
      out.stepSeconds.push_back(dt);
  }
  out.results = call->results(prog);
  fsdprt_comm_get_stats(comm, &out.stats);
}

/// Writes `<outputs>/<name>.npy` (through a temporary file and a rename).
void writeResult(const std::string &stem, const npy::Array &a) {
  std::string error;
  if (!npy::write(outputsDir + "/" + stem + ".npy", a, error))
    fail(error);
}

void writeOutputs(const Program &prog, const std::vector<RankRun> &runs) {
  if (std::error_code ec = llvm::sys::fs::create_directories(outputsDir))
    fail("cannot create " + outputsDir + ": " + ec.message());
  for (size_t i = 0; i < prog.results.size(); ++i) {
    const Port &p = prog.results[i];
    std::vector<const std::vector<char> *> pieces;
    for (const RankRun &run : runs)
      pieces.push_back(&run.results[i]);
    npy::Array a = assembleResult(p, pieces);
    for (size_t r = 0; !p.layout && writeAllRanks && r < runs.size(); ++r) {
      npy::Array copy = a;
      copy.data = *pieces[r];
      writeResult(p.name + ".rank" + std::to_string(r), copy);
    }
    writeResult(p.name, a);
  }
}

void printRankStats(int64_t rank, const fsdprt_stats_t &s) {
  llvm::outs() << "  rank " << rank << ": " << s.total_calls
               << " collectives (all_gather " << s.calls[FSDPRT_KIND_ALL_GATHER]
               << ", reduce_scatter " << s.calls[FSDPRT_KIND_REDUCE_SCATTER]
               << ", all_reduce " << s.calls[FSDPRT_KIND_ALL_REDUCE]
               << "), sent " << s.total_bytes_sent << " B, received "
               << s.total_bytes_received << " B\n";
}

/// Runtime options: the timeout and the mesh's axis names for messages.
struct RuntimeOptions {
  std::vector<const char *> names;
  fsdprt_options_t options;
  explicit RuntimeOptions(const Program &prog, double timeout) {
    for (const std::string &n : prog.axisNames)
      names.push_back(n.c_str());
    fsdprt_options_init(&options);
    options.timeout_s = timeout;
    options.axis_names = names.empty() ? nullptr : names.data();
  }
};

/// Starts one thread per rank; a failure to start one aborts the world so
/// that the started ranks return, then fails.
void startRankThreads(std::vector<std::thread> &threads, fsdprt_world_t *world,
                      int64_t size,
                      const std::function<void(fsdprt_comm_t *, int64_t)> &fn) {
  threads.reserve(size_t(size));
  try {
    for (int64_t r = 0; r < size; ++r) {
      fsdprt_comm_t *comm = nullptr;
      fsdprt_threads_comm(world, r, &comm);
      threads.emplace_back(fn, comm, r);
    }
  } catch (const std::system_error &e) {
    fsdprt_world_abort(world, "fsdp-run could not start every rank");
    for (auto &t : threads)
      t.join();
    fsdprt_world_destroy(world);
    fail("cannot start thread " + llvm::Twine(threads.size()) + " of " +
         llvm::Twine(size) + " for the threads backend (" + e.what() +
         "); use fewer ranks or the mpi backend");
  }
}

std::vector<RankRun> runThreads(Jit &engine, const Program &prog,
                                const std::vector<npy::Array> &inputs,
                                const RuntimeOptions &rt) {
  int64_t size = prog.meshSize();
  if (size > kMaxThreadRanks)
    fail("the mesh has " + llvm::Twine(size) +
         " ranks; the threads backend runs at most " +
         llvm::Twine(kMaxThreadRanks) + " (use the mpi backend)");
  fsdprt_world_t *world = nullptr;
  if (fsdprt_threads_world_create(prog.meshShape.size(), prog.meshShape.data(),
                                  &rt.options, &world) != FSDPRT_OK)
    fail("cannot create the threads world");
  std::vector<RankRun> runs(size);
  std::vector<std::thread> threads;
  startRankThreads(threads, world, size, [&](fsdprt_comm_t *comm, int64_t r) {
    runRank(engine, prog, inputs, comm, r, runs[r]);
  });
  for (auto &t : threads)
    t.join();
  fsdprt_world_destroy(world);
  return runs;
}

/// Every rank's result pieces, gathered on a communicator of the runner's
/// own, so that this exchange never pairs with one of the program's
/// collectives. It waits longer than the program's collectives: a rank that
/// skipped one of those is reported by its peers' timeout first.
std::vector<RankRun> gatherResults(const Program &prog, RankRun &mine,
                                   int64_t rank, const RuntimeOptions &rt) {
  int64_t size = prog.meshSize();
  fsdprt_options_t options = rt.options;
  options.axis_names = nullptr;
  if (options.timeout_s > 0)
    options.timeout_s = 2 * options.timeout_s + 2;
  fsdprt_comm_t *comm = nullptr;
  if (fsdprt_mpi_comm_create(1, &size, &options, &comm) != FSDPRT_OK)
    fail("rank " + llvm::Twine(rank) +
         ": cannot create the communicator for the results");
  std::vector<RankRun> runs(size);
  for (const std::vector<char> &piece : mine.results) {
    std::vector<char> all(piece.size() * size);
    if (fsdprt_all_gather(comm, 1, piece.data(), all.data(), piece.size(),
                          FSDPRT_U8) != FSDPRT_OK)
      fail("rank " + llvm::Twine(rank) + ": gathering the results failed: " +
           fsdprt_comm_error_message(comm));
    for (int64_t r = 0; r < size; ++r)
      runs[r].results.emplace_back(all.begin() + r * piece.size(),
                                   all.begin() + (r + 1) * piece.size());
  }
  runs[rank].stats = mine.stats;
  fsdprt_comm_destroy(comm);
  return runs;
}

/// The JIT and step times: human-readable or one JSON object. A step's
/// time is the slowest rank's (this process's ranks).
void printTimings(const Jit &jit, const std::vector<RankRun> &runs) {
  bool timed = printJson || stepCount > 1 || warmupCount > 0;
  if (!timed)
    return;
  std::vector<double> steps;
  for (size_t s = 0; s < size_t(stepCount); ++s) {
    double worst = 0;
    for (const RankRun &r : runs)
      if (s < r.stepSeconds.size())
        worst = std::max(worst, r.stepSeconds[s]);
    steps.push_back(worst);
  }
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median =
      n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double minimum = sorted.front();
  if (printJson) {
    llvm::outs() << "{\"parse_s\": " << jit.parseSeconds
                 << ", \"jit_s\": " << jit.compileSeconds
                 << ", \"jit_cached\": " << (jit.cacheHit ? "true" : "false")
                 << ", \"warmup\": " << warmupCount.getValue()
                 << ", \"steps\": " << stepCount.getValue()
                 << ", \"step_median_s\": " << median
                 << ", \"step_min_s\": " << minimum << ", \"step_s\": [";
    for (size_t i = 0; i < steps.size(); ++i)
      llvm::outs() << (i ? ", " : "") << steps[i];
    llvm::outs() << "]}\n";
    return;
  }
  llvm::outs() << llvm::format(
      "parse %.3f s, jit %.3f s%s; step over %lld "
      "run(s) after %lld warmup: median %.3f ms, "
      "min %.3f ms\n",
      jit.parseSeconds, jit.compileSeconds, jit.cacheHit ? " (cached)" : "",
      (long long)stepCount.getValue(), (long long)warmupCount.getValue(),
      median * 1e3, minimum * 1e3);
}

int runMpi(Jit &engine, const Program &prog,
           const std::vector<npy::Array> &inputs, const RuntimeOptions &rt) {
  fsdprt_comm_t *comm = nullptr;
  if (fsdprt_mpi_comm_create(prog.meshShape.size(), prog.meshShape.data(),
                             &rt.options, &comm) != FSDPRT_OK)
    fail("cannot create the MPI communicator (is the world size " +
         llvm::Twine(prog.meshSize()) + " under mpirun?)");
  int64_t rank = 0;
  fsdprt_comm_rank(comm, &rank);
  RankRun mine;
  runRank(engine, prog, inputs, comm, rank, mine);
  if (!mine.error.empty())
    fail("rank " + llvm::Twine(rank) + ": " + mine.error);
  std::vector<RankRun> runs = gatherResults(prog, mine, rank, rt);
  if (rank == 0) {
    writeOutputs(prog, runs);
    printTimings(engine, {mine});
    if (printStats)
      printRankStats(0, mine.stats);
  }
  fsdprt_comm_destroy(comm);
  return 0;
}

int reportThreads(const Program &prog, const std::vector<RankRun> &runs) {
  bool failed = false;
  for (size_t r = 0; r < runs.size(); ++r)
    if (!runs[r].error.empty()) {
      llvm::errs() << "fsdp-run: error: rank " << r << ": " << runs[r].error
                   << "\n";
      failed = true;
    }
  if (failed)
    return 1;
  writeOutputs(prog, runs);
  if (printStats) {
    llvm::outs() << "collectives and bytes moved per rank:\n";
    for (size_t r = 0; r < runs.size(); ++r)
      printRankStats(int64_t(r), runs[r].stats);
  }
  return 0;
}

void parseOptions(int argc, char **argv) {
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdp-run: run a lowered fsdp program on "
                              "every rank of its mesh\n");
  if (backendName != "threads" && backendName != "mpi")
    fail("unknown backend '" + backendName + "' (threads or mpi)");
  if (stepCount < 1)
    fail("--steps must be at least 1");
  if (warmupCount < 0)
    fail("--warmup must not be negative");
}

void registerDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registry.insert<mlir::fsdp::FSDPDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  parseOptions(argc, argv);
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
#ifdef FSDP_HAVE_OPENBLAS
  // Ranks are the parallelism: one BLAS thread each.
  openblas_set_num_threads(1);
#endif

  DialectRegistry registry;
  registerDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<Jit> jit =
      Jit::open(inputFile,
                noJitCache ? ""
                           : (jitCacheDir.empty() ? defaultCacheDir()
                                                  : jitCacheDir.getValue()),
                context, module);
  Program prog = loadProgram(*module, entryName);
  int64_t meshSize = prog.meshSize();
  if (worldSize != 0 && worldSize != meshSize)
    fail("world size " + llvm::Twine(worldSize.getValue()) +
         " does not match the mesh size " + llvm::Twine(meshSize));
  std::vector<npy::Array> inputs = loadInputs(prog, meshSize);
  jit->compile(*module);
  RuntimeOptions rt(prog, timeoutSeconds);
  if (backendName == "mpi")
    return runMpi(*jit, prog, inputs, rt);
  std::vector<RankRun> runs = runThreads(*jit, prog, inputs, rt);
  int rc = reportThreads(prog, runs);
  if (rc == 0)
    printTimings(*jit, runs);
  return rc;
}

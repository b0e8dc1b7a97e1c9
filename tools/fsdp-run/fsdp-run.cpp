//===- fsdp-run.cpp - run a lowered fsdp program on W ranks ---------------===//
//
// JIT-compiles a module produced by `fsdp-opt --fsdp-pipeline=lower=true`,
// shards the global inputs by the layouts the compiler recorded, runs every
// rank (threads of this process, or one process per rank under mpirun) and
// writes the gathered results as .npy files.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Jit.h"
#include "Memory.h"
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
#include "llvm/Support/JSON.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <system_error>
#include <thread>
#include <unistd.h>

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

static cl::opt<int64_t> stepCount(
    "steps",
    cl::desc("A training step (results with fsdp.update_of): run this many "
             "training steps, feeding the updates back. Otherwise: run the "
             "step this many times on the same inputs and print the JIT time "
             "and the median and minimum step time (results: the last "
             "step's)"),
    cl::init(1), cl::cat(runCategory));
static cl::opt<int64_t>
    warmupCount("warmup",
                cl::desc("Untimed steps before the --steps timed ones"),
                cl::init(0), cl::cat(runCategory));
static cl::opt<bool>
    printJson("json",
              cl::desc("Print the timings as one JSON object on stdout"),
              cl::init(false), cl::cat(runCategory));
static cl::opt<bool> printMemory(
    "print-memory",
    cl::desc("Print each rank's measured allocation high-water mark of the "
             "compiled step and the process's resident set"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<std::string>
    saveDir("save",
            cl::desc("Training: write sharded checkpoints into "
                     "<dir>/step-<K> (at the end, and every --save-every "
                     "steps)"),
            cl::init(""), cl::cat(runCategory));
static cl::opt<int64_t>
    saveEvery("save-every",
              cl::desc("Training: also save after every K-th global step"),
              cl::init(0), cl::cat(runCategory));
static cl::opt<std::string> resumeDir(
    "resume",
    cl::desc("Training: start from a checkpoint (a step-<K> directory, or "
             "the newest complete one in a --save directory), on any mesh"),
    cl::init(""), cl::cat(runCategory));
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

/// Checks the header of an input file against the port (dtype) and returns
/// it.
npy::Header checkedHeader(const Port &p, const std::string &path) {
  npy::Header h;
  std::string error;
  if (!npy::readHeader(path, h, error))
    fail("input '" + p.name + "': " + error);
  std::string want = npyDescr(p.type.getElementType());
  if (h.descr != want && !(want == "<u2" && h.descr == "|V2"))
    fail("input '" + p.name + "' (" + path + ") has dtype " + h.descr +
         ", expected " + want);
  return h;
}

/// Reads one global input after checking its header against the port.
npy::Array loadInput(const Port &p, int64_t world) {
  std::string path = inputPath(p), error;
  npy::Header h = checkedHeader(p, path);
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

/// A global input: the same value every step, one value per step along a
/// leading dimension (global step g reads slice g), or one file per step
/// (`<name>/<g>.npy`, read when the step runs so a data set need not fit in
/// memory).
struct StepInput {
  npy::Array array;
  int64_t stepBytes = 0; // > 0: a leading step dimension
  std::string stepDir;   // not empty: one file per step in this directory
  std::string name;      // the argument, for messages

  /// The global value of step `step`; a per-step file is read into
  /// `scratch`. Returns null with a message in `error` when it cannot be
  /// read (the file changed since its header was checked).
  const char *at(int64_t step, npy::Array &scratch, std::string &error) const {
    if (stepDir.empty())
      return array.data.data() + step * stepBytes;
    std::string path = stepFile(stepDir, step);
    if (!npy::read(path, scratch, error) || scratch.shape != array.shape ||
        npy::elementSize(scratch.descr) != npy::elementSize(array.descr)) {
      if (error.empty())
        error = path + " changed while the run read it";
      error = "input '" + name + "': " + error;
      return nullptr;
    }
    return scratch.data.data();
  }
  /// The value of a fed-back argument or of an input without steps.
  const char *first() const { return array.data.data(); }

  static std::string stepFile(const std::string &dir, int64_t step) {
    return dir + "/" + std::to_string(step) + ".npy";
  }
};

/// Whether a fed-back argument without a file starts at zeros: optimizer
/// state and the step count (docs/SEMANTICS.md, training).
bool startsAtZero(const Port &p) { return p.stateOf || p.optim == "step"; }

npy::Array zeros(const Port &p) {
  npy::Array a;
  a.descr = npyDescr(p.type.getElementType());
  a.shape = p.globalType.getShape().vec();
  a.data.assign(size_t(p.globalType.getNumElements() * p.elementBytes()), 0);
  return a;
}

/// The directory `<dir>/<name>` of per-step files of `p` in the first
/// --inputs directory that has either it or `<name>.npy`; empty if that
/// directory has the file (or neither exists).
std::string stepDirOf(const Port &p) {
  for (const std::string &dir : inputsDirs) {
    std::string file = dir + "/" + p.name + ".npy", steps = dir + "/" + p.name;
    bool hasFile = llvm::sys::fs::exists(file);
    bool hasSteps = llvm::sys::fs::is_directory(steps);
    if (hasFile && hasSteps)
      fail("input '" + p.name + "': both " + file + " and " + steps +
           "/ exist; keep one (a file for every step, or a directory of "
           "per-step files)");
    if (hasFile)
      return "";
    if (hasSteps)
      return steps;
  }
  return "";
}

/// One input of a training run. A fed-back argument has its global shape
/// (or is zeros, see startsAtZero); any other input may also carry a
/// leading step dimension, or be a directory of one file per step, covering
/// global steps [`firstStep`, `endStep`).
StepInput loadStepInput(const Port &p, int64_t world, bool fed,
                        int64_t firstStep, int64_t endStep) {
  StepInput in;
  in.name = p.name;
  std::string path = inputPath(p), error;
  std::string stepDir = stepDirOf(p);
  if (fed && startsAtZero(p) && !llvm::sys::fs::exists(path)) {
    if (!stepDir.empty())
      fail("input '" + p.name + "' is fed back from step to step: it takes " +
           path +
           " (or nothing: it starts at zeros), not a directory of "
           "per-step files");
    in.array = zeros(p);
    return in;
  }
  std::vector<int64_t> expect = p.globalType.getShape().vec();
  if (!p.layout && !expect.empty() &&
      __builtin_mul_overflow(expect[0], world, &expect[0]))
    fail("input '" + p.name + "': the global batch is too large");
  if (!stepDir.empty()) {
    if (fed)
      fail("input '" + p.name + "' is fed back from step to step: it takes " +
           path + ", not a directory of per-step files");
    // Every file of the run is checked now (headers and sizes only), so a
    // missing or wrong one stops the run before its first step.
    for (int64_t g = firstStep; g < endStep; ++g) {
      std::string file = StepInput::stepFile(stepDir, g);
      if (!llvm::sys::fs::exists(file))
        fail("input '" + p.name + "': " + file +
             " is missing; a directory "
             "of per-step files needs <step>.npy for every step this run "
             "reads (" +
             llvm::Twine(firstStep) + " to " + llvm::Twine(endStep - 1) +
             ", counted from 0)");
      npy::Header h = checkedHeader(p, file);
      if (h.shape != expect)
        fail("input '" + p.name + "' (" + file + ") has shape " +
             shapeString(h.shape) + ", expected " + shapeString(expect));
    }
    in.stepDir = stepDir;
    in.array.shape = expect;
    in.array.descr = npyDescr(p.type.getElementType());
    return in;
  }
  npy::Header h = checkedHeader(p, path);
  bool perStep = !fed && h.shape.size() == expect.size() + 1 &&
                 std::equal(expect.begin(), expect.end(), h.shape.begin() + 1);
  if (!perStep && h.shape != expect)
    fail("input '" + p.name + "' (" + path + ") has shape " +
         shapeString(h.shape) + ", expected " + shapeString(expect) +
         (fed ? " (it is fed back: no step dimension)"
              : " or [ steps ... ] with one slice per step"));
  if (perStep && h.shape[0] < endStep)
    fail("input '" + p.name + "' (" + path + ") has " +
         llvm::Twine(h.shape[0]) +
         " step slice(s); this run reads steps up "
         "to " +
         llvm::Twine(endStep - 1) + " (counted from 0)");
  if (!npy::read(path, in.array, error))
    fail("input '" + p.name + "': " + error);
  if (perStep)
    in.stepBytes = int64_t(in.array.data.size()) / h.shape[0];
  return in;
}

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

  /// A copy of result `i`'s elements.
  std::vector<char> result(const Program &prog, size_t i) const {
    return copyResult(prog.results[i], resultStruct.data() + offsets[i]);
  }

  /// Frees the buffers the step returned, each once (results may share a
  /// buffer). Only live allocations of the step are freed: a result that is
  /// an argument or a constant is left alone.
  void releaseResults() {
    std::vector<void *> done;
    for (size_t off : offsets) {
      void *allocated = reinterpret_cast<void *>(resultStruct[off]);
      if (std::find(done.begin(), done.end(), allocated) != done.end())
        continue;
      done.push_back(allocated);
      memory::release(allocated);
    }
  }

private:
  std::vector<std::vector<char>> buffers;
  std::vector<Descriptor> descs;
  std::vector<int64_t> resultStruct;
  std::vector<size_t> offsets;
  std::vector<void *> pointers, packed;
};

/// A file written at the end: a result (its last step's value), the final
/// value of a fed-back argument, or a scalar result of every step stacked
/// along a leading dimension (the loss of a training run).
struct Output {
  const Port *port;
  int64_t result;
  int64_t arg; // >= 0: the fed-back argument
  bool stacked;
};

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

struct RankRun {
  std::vector<std::vector<char>> pieces; // per output
  std::vector<double> stepSeconds;       // the timed steps
  fsdprt_stats_t stats{};
  memory::Counters memory;
  int64_t heldAfterStep = 0; // most bytes still allocated after a step
  std::vector<int64_t> rss;  // rank 0: resident bytes after each step
  std::string error;
};

/// The process's resident set size in bytes (0 where unknown).
int64_t residentBytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * int64_t(sysconf(_SC_PAGESIZE)) : 0;
}

/// What every rank of a run shares.
struct RunContext {
  Jit &engine;
  const Program &prog;
  const std::vector<StepInput> &inputs;
  const std::vector<Output> &outputs;
  int64_t firstStep; // global steps taken before this run (--resume)
  bool liveSteps;    // rank 0 prints each step's scalars as it ends
};

/// Whether rank 0's copy of every per-step scalar is its global value (no
/// partial sums), so that rank 0 can print each step as it ends.
bool ranksHoldScalars(const std::vector<Output> &outputs) {
  for (const Output &o : outputs)
    if (o.stacked && o.port->layout)
      for (const lm::Placement &p : o.port->layout->placements)
        if (p.kind == lm::Placement::Kind::Partial)
          return false;
  return true;
}

/// An f32 or f64 element as a double.
double scalarValue(const Port &p, const char *data) {
  mlir::Type t = p.type.getElementType();
  if (t.isF64())
    return *reinterpret_cast<const double *>(data);
  if (t.isF32())
    return *reinterpret_cast<const float *>(data);
  return std::nan("");
}

/// `step 3: loss 2.345 grad_norm 0.5`: rank 0's scalars of the step that
/// just ended (the last slot of each stacked piece).
void printStepLine(const RunContext &cx, const RankRun &out, int64_t step) {
  llvm::outs() << "step " << step << ":";
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const Output &o = cx.outputs[k];
    if (!o.stacked)
      continue;
    const char *last = out.pieces[k].data() + out.pieces[k].size() -
                       size_t(o.port->slotBytes());
    llvm::outs() << " " << o.port->name << " "
                 << llvm::format("%.8g", scalarValue(*o.port, last));
  }
  llvm::outs() << "\n";
  llvm::outs().flush();
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

/// Writes the checkpoint of global step `step` (docs/RUNTIME.md): each
/// rank its own file into the partial directory, then rank 0 the metadata
/// and the rename, once every rank has written.
bool saveCheckpoint(const RunContext &cx, fsdprt_comm_t *runner,
                    const std::vector<std::vector<char>> &fed, int64_t rank,
                    int64_t step, std::string &error) {
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
  std::vector<std::vector<uint32_t>> perRank;
  for (int64_t r = 0; r < size; ++r) {
    auto first = all.begin() + r * int64_t(mine.size());
    if (!*first) {
      if (error.empty())
        error = what + ": rank " + std::to_string(r) + " could not write";
      if (rank == 0)
        llvm::sys::fs::remove_directories(part);
      return false;
    }
    perRank.emplace_back(first + 1, first + int64_t(mine.size()));
  }
  if (rank == 0) {
    ok = checkpoint::writeMetadata(part, cx.prog, step, perRank, error) &&
         checkpoint::publish(part, done, error);
    if (!ok)
      llvm::sys::fs::remove_directories(part);
    else if (!printJson)
      llvm::outs() << "saved checkpoint " << done << "\n";
  }
  return agree(runner, ok, what, error);
}

/// Runs the steps of one rank: a training run feeds the update_of results
/// back into their arguments (kept in this rank's memory); otherwise the
/// same inputs every step (--warmup, --steps timing).
void runRank(const RunContext &cx, fsdprt_comm_t *comm, fsdprt_comm_t *runner,
             int64_t rank, RankRun &out) {
  fsdprt_set_thread_comm(comm);
  const Program &prog = cx.prog;
  bool training = prog.training();
  int64_t total = training ? stepCount : warmupCount + stepCount;
  bool trackRss = rank == 0 && (printMemory || printJson);
  std::vector<std::vector<char>> fed(prog.args.size());
  for (size_t i = 0; i < prog.args.size(); ++i)
    if (prog.fedBy[i] >= 0)
      fed[i] = shardInput(prog.args[i], cx.inputs[i].first(), rank);
  bool stepFiles = llvm::any_of(
      cx.inputs, [](const StepInput &in) { return !in.stepDir.empty(); });
  npy::Array scratch;
  out.pieces.assign(cx.outputs.size(), {});
  for (int64_t s = 0; s < total; ++s) {
    int64_t g = cx.firstStep + s;
    std::vector<std::vector<char>> args;
    std::string readError;
    for (size_t i = 0; i < prog.args.size() && readError.empty(); ++i) {
      if (prog.fedBy[i] >= 0) {
        args.push_back(std::move(fed[i]));
        continue;
      }
      const char *global =
          cx.inputs[i].at(training ? g : 0, scratch, readError);
      if (global)
        args.push_back(shardInput(prog.args[i], global, rank));
    }
    // A per-step file that cannot be read stops every rank together, before
    // the step's collectives (a lone rank leaving would make the others
    // wait for it).
    if (stepFiles &&
        !agree(runner, readError.empty(),
               "step " + std::to_string(g) + " inputs", readError)) {
      out.error = readError;
      return;
    }
    // Every step gets fresh input buffers (a step may update its arguments
    // in place); only the call is timed.
    RankCall call(prog, std::move(args));
    auto t0 = std::chrono::steady_clock::now();
    if (llvm::Error err = call.invoke(cx.engine, prog.entry)) {
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
    if (training || s >= warmupCount)
      out.stepSeconds.push_back(dt);
    bool last = s + 1 == total;
    for (size_t k = 0; k < cx.outputs.size(); ++k) {
      const Output &o = cx.outputs[k];
      if (o.stacked) {
        std::vector<char> v = call.result(prog, size_t(o.result));
        out.pieces[k].insert(out.pieces[k].end(), v.begin(), v.end());
      } else if (last && o.arg < 0) {
        out.pieces[k] = call.result(prog, size_t(o.result));
      }
    }
    if (training && cx.liveSteps && rank == 0 && !printJson)
      printStepLine(cx, out, g + 1);
    for (size_t i = 0; i < prog.results.size(); ++i)
      if (prog.results[i].updateOf)
        fed[*prog.results[i].updateOf] = call.result(prog, i);
    call.releaseResults();
    out.heldAfterStep =
        std::max(out.heldAfterStep, memory::current().liveBytes);
    if (trackRss)
      out.rss.push_back(residentBytes());
    bool due = saveEvery > 0 && (g + 1) % saveEvery == 0;
    if (training && !saveDir.empty() && (due || last) &&
        !saveCheckpoint(cx, runner, fed, rank, g + 1, out.error))
      return;
  }
  for (size_t k = 0; k < cx.outputs.size(); ++k)
    if (cx.outputs[k].arg >= 0)
      out.pieces[k] = std::move(fed[cx.outputs[k].arg]);
  out.memory = memory::current();
  fsdprt_comm_get_stats(comm, &out.stats);
}

/// Writes `<outputs>/<name>.npy` (through a temporary file and a rename).
void writeResult(const std::string &stem, const npy::Array &a) {
  std::string error;
  if (!npy::write(outputsDir + "/" + stem + ".npy", a, error))
    fail(error);
}

/// The global value of an output from every rank's piece; a stacked
/// output gets a leading step dimension.
npy::Array
assembleOutput(const Output &o,
               const std::vector<const std::vector<char> *> &pieces) {
  if (!o.stacked)
    return assembleResult(*o.port, pieces);
  size_t slot = size_t(o.port->slotBytes());
  size_t steps = slot ? pieces.front()->size() / slot : 0;
  npy::Array all;
  for (size_t s = 0; s < steps; ++s) {
    std::vector<std::vector<char>> slices;
    for (const std::vector<char> *p : pieces)
      slices.emplace_back(p->begin() + s * slot, p->begin() + (s + 1) * slot);
    std::vector<const std::vector<char> *> ptrs;
    for (const std::vector<char> &v : slices)
      ptrs.push_back(&v);
    npy::Array a = assembleResult(*o.port, ptrs);
    if (s == 0) {
      all.descr = a.descr;
      all.shape = a.shape;
      all.shape.insert(all.shape.begin(), int64_t(steps));
    }
    all.data.insert(all.data.end(), a.data.begin(), a.data.end());
  }
  if (steps == 0) {
    all.descr = npyDescr(o.port->type.getElementType());
    all.shape = o.port->globalType.getShape().vec();
    all.shape.insert(all.shape.begin(), 0);
  }
  return all;
}

std::vector<npy::Array> assembleOutputs(const std::vector<Output> &outputs,
                                        const std::vector<RankRun> &runs) {
  std::vector<npy::Array> arrays;
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::vector<const std::vector<char> *> pieces;
    for (const RankRun &run : runs)
      pieces.push_back(&run.pieces[k]);
    arrays.push_back(assembleOutput(outputs[k], pieces));
  }
  return arrays;
}

void writeOutputs(const std::vector<Output> &outputs,
                  const std::vector<npy::Array> &arrays,
                  const std::vector<RankRun> &runs) {
  if (std::error_code ec = llvm::sys::fs::create_directories(outputsDir))
    fail("cannot create " + outputsDir + ": " + ec.message());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Port &p = *outputs[k].port;
    for (size_t r = 0;
         !p.layout && !outputs[k].stacked && writeAllRanks && r < runs.size();
         ++r) {
      npy::Array copy = arrays[k];
      copy.data = runs[r].pieces[k];
      writeResult(p.name + ".rank" + std::to_string(r), copy);
    }
    writeResult(p.name, arrays[k]);
  }
}

/// An f32 or f64 scalar as a double.
double scalarAt(const npy::Array &a, size_t i) {
  if (a.descr == "<f8")
    return reinterpret_cast<const double *>(a.data.data())[i];
  if (a.descr == "<f4")
    return reinterpret_cast<const float *>(a.data.data())[i];
  return std::nan("");
}

/// One line per training step with its scalar results (the loss, ...).
void printSteps(const std::vector<Output> &outputs,
                const std::vector<npy::Array> &arrays, int64_t firstStep) {
  std::vector<size_t> scalars;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].stacked)
      scalars.push_back(k);
  if (scalars.empty())
    return;
  for (int64_t s = 0; s < stepCount; ++s) {
    llvm::outs() << "step " << firstStep + s + 1 << ":";
    for (size_t k : scalars)
      llvm::outs() << " " << outputs[k].port->name << " "
                   << llvm::format("%.8g", scalarAt(arrays[k], size_t(s)));
    llvm::outs() << "\n";
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

/// The measured memory of the compiled step per rank (--print-memory).
void printMemoryReport(const std::vector<RankRun> &runs, int64_t steps) {
  llvm::outs() << "measured memory of the compiled step (malloc/free of the "
                  "JIT'd code, per rank):\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const RankRun &run = runs[r];
    llvm::outs() << "  rank " << r << ": peak " << run.memory.peakBytes
                 << " B, "
                 << run.memory.allocations / std::max<int64_t>(1, steps)
                 << " allocations per step, held after a step "
                 << run.heldAfterStep << " B\n";
  }
  const std::vector<int64_t> &rss = runs.front().rss;
  if (!rss.empty())
    llvm::outs() << llvm::format(
        "  resident set of the process: %.1f MiB after step 1, %.1f MiB "
        "after step %zu\n",
        rss.front() / 1048576.0, rss.back() / 1048576.0, rss.size());
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
  /// The runner's own exchanges (checkpoints, results) wait longer than the
  /// program's collectives: a rank that skipped one of those is reported by
  /// its peers' timeout first.
  fsdprt_options_t runnerOptions() const {
    fsdprt_options_t o = options;
    o.axis_names = nullptr;
    if (o.timeout_s > 0)
      o.timeout_s = 2 * o.timeout_s + 2;
    return o;
  }
};

/// Starts one thread per rank; a failure to start one aborts the world so
/// that the started ranks return, then fails.
void startRankThreads(
    std::vector<std::thread> &threads, fsdprt_world_t *world,
    fsdprt_world_t *runnerWorld, int64_t size,
    const std::function<void(fsdprt_comm_t *, fsdprt_comm_t *, int64_t)> &fn) {
  threads.reserve(size_t(size));
  try {
    for (int64_t r = 0; r < size; ++r) {
      fsdprt_comm_t *comm = nullptr, *runner = nullptr;
      fsdprt_threads_comm(world, r, &comm);
      fsdprt_threads_comm(runnerWorld, r, &runner);
      threads.emplace_back(fn, comm, runner, r);
    }
  } catch (const std::system_error &e) {
    fsdprt_world_abort(world, "fsdp-run could not start every rank");
    fsdprt_world_abort(runnerWorld, "fsdp-run could not start every rank");
    for (auto &t : threads)
      t.join();
    fsdprt_world_destroy(world);
    fsdprt_world_destroy(runnerWorld);
    fail("cannot start thread " + llvm::Twine(threads.size()) + " of " +
         llvm::Twine(size) + " for the threads backend (" + e.what() +
         "); use fewer ranks or the mpi backend");
  }
}

std::vector<RankRun> runThreads(const RunContext &cx,
                                const RuntimeOptions &rt) {
  const Program &prog = cx.prog;
  int64_t size = prog.meshSize();
  if (size > kMaxThreadRanks)
    fail("the mesh has " + llvm::Twine(size) +
         " ranks; the threads backend runs at most " +
         llvm::Twine(kMaxThreadRanks) + " (use the mpi backend)");
  fsdprt_world_t *world = nullptr, *runnerWorld = nullptr;
  fsdprt_options_t runnerOptions = rt.runnerOptions();
  if (fsdprt_threads_world_create(prog.meshShape.size(), prog.meshShape.data(),
                                  &rt.options, &world) != FSDPRT_OK ||
      fsdprt_threads_world_create(1, &size, &runnerOptions, &runnerWorld) !=
          FSDPRT_OK)
    fail("cannot create the threads world");
  std::vector<RankRun> runs(size);
  std::vector<std::thread> threads;
  startRankThreads(threads, world, runnerWorld, size,
                   [&](fsdprt_comm_t *comm, fsdprt_comm_t *runner, int64_t r) {
                     runRank(cx, comm, runner, r, runs[r]);
                   });
  for (auto &t : threads)
    t.join();
  fsdprt_world_destroy(world);
  fsdprt_world_destroy(runnerWorld);
  return runs;
}

/// Every rank's output pieces and memory counters, gathered on the
/// runner's communicator, so that this exchange never pairs with one of
/// the program's collectives.
std::vector<RankRun> gatherResults(RankRun &mine, int64_t rank, int64_t size,
                                   fsdprt_comm_t *comm) {
  std::vector<RankRun> runs(size);
  auto gather = [&](const void *data, void *all, size_t bytes) {
    if (fsdprt_all_gather(comm, 1, data, all, bytes, FSDPRT_U8) != FSDPRT_OK)
      fail("rank " + llvm::Twine(rank) + ": gathering the results failed: " +
           fsdprt_comm_error_message(comm));
  };
  for (const std::vector<char> &piece : mine.pieces) {
    std::vector<char> all(piece.size() * size);
    gather(piece.data(), all.data(), piece.size());
    for (int64_t r = 0; r < size; ++r)
      runs[r].pieces.emplace_back(all.begin() + r * piece.size(),
                                  all.begin() + (r + 1) * piece.size());
  }
  int64_t counters[3] = {mine.memory.peakBytes, mine.memory.allocations,
                         mine.heldAfterStep};
  std::vector<int64_t> all(3 * size_t(size));
  gather(counters, all.data(), sizeof(counters));
  for (int64_t r = 0; r < size; ++r) {
    runs[r].memory.peakBytes = all[3 * r];
    runs[r].memory.allocations = all[3 * r + 1];
    runs[r].heldAfterStep = all[3 * r + 2];
  }
  runs[rank].stats = mine.stats;
  runs[rank].rss = mine.rss;
  runs[rank].stepSeconds = mine.stepSeconds;
  return runs;
}

/// The JIT and step times: human-readable or one JSON object. A step's
/// time is the slowest rank's (this process's ranks).
void printTimings(const Jit &jit, const std::vector<RankRun> &runs,
                  const std::vector<Output> &outputs,
                  const std::vector<npy::Array> &arrays, bool training) {
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
    auto list = [](const auto &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        llvm::raw_string_ostream os(s);
        os << (i ? ", " : "") << v[i];
      }
      return s + "]";
    };
    std::vector<int64_t> peaks, held, allocs;
    for (const RankRun &r : runs) {
      peaks.push_back(r.memory.peakBytes);
      held.push_back(r.heldAfterStep);
      allocs.push_back(r.memory.allocations);
    }
    llvm::outs() << "{\"parse_s\": " << jit.parseSeconds
                 << ", \"jit_s\": " << jit.compileSeconds
                 << ", \"jit_cached\": " << (jit.cacheHit ? "true" : "false");
    if (!jit.compilePhases.empty()) {
      llvm::outs() << ", \"jit_phases_s\": {";
      for (auto [i, p] : llvm::enumerate(jit.compilePhases))
        llvm::outs() << (i ? ", " : "") << "\"" << p.first
                     << "\": " << p.second;
      llvm::outs() << "}";
    }
    llvm::outs() << ", \"warmup\": " << warmupCount.getValue()
                 << ", \"steps\": " << stepCount.getValue()
                 << ", \"step_median_s\": " << median
                 << ", \"step_min_s\": " << minimum
                 << ", \"step_s\": " << list(steps)
                 << ", \"training\": " << (training ? "true" : "false")
                 << ", \"jit_peak_bytes\": " << list(peaks)
                 << ", \"jit_held_after_step_bytes\": " << list(held)
                 << ", \"jit_allocations\": " << list(allocs)
                 << ", \"rss_bytes\": " << list(runs.front().rss);
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!outputs[k].stacked)
        continue;
      std::vector<double> values;
      for (int64_t s = 0; s < arrays[k].shape[0]; ++s)
        values.push_back(scalarAt(arrays[k], size_t(s)));
      llvm::outs() << ", \"" << llvm::json::fixUTF8(outputs[k].port->name)
                   << "\": " << list(values);
    }
    llvm::outs() << "}\n";
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

/// Everything rank 0 (or the threads process) reports after a run.
void report(const RunContext &cx, const std::vector<RankRun> &runs,
            bool withStats) {
  std::vector<npy::Array> arrays = assembleOutputs(cx.outputs, runs);
  writeOutputs(cx.outputs, arrays, runs);
  if (cx.prog.training() && !printJson && !cx.liveSteps)
    printSteps(cx.outputs, arrays, cx.firstStep);
  if (withStats && printStats) {
    llvm::outs() << "collectives and bytes moved per rank:\n";
    for (size_t r = 0; r < runs.size(); ++r)
      printRankStats(int64_t(r), runs[r].stats);
  }
  if (printMemory && !printJson)
    printMemoryReport(runs, cx.prog.training() ? stepCount.getValue()
                                               : stepCount.getValue() +
                                                     warmupCount.getValue());
  printTimings(cx.engine, runs, cx.outputs, arrays, cx.prog.training());
}

int runMpi(const RunContext &cx, const RuntimeOptions &rt) {
  const Program &prog = cx.prog;
  fsdprt_comm_t *comm = nullptr, *runner = nullptr;
  if (fsdprt_mpi_comm_create(prog.meshShape.size(), prog.meshShape.data(),
                             &rt.options, &comm) != FSDPRT_OK)
    fail("cannot create the MPI communicator (is the world size " +
         llvm::Twine(prog.meshSize()) + " under mpirun?)");
  int64_t rank = 0, size = prog.meshSize();
  fsdprt_comm_rank(comm, &rank);
  fsdprt_options_t runnerOptions = rt.runnerOptions();
  if (fsdprt_mpi_comm_create(1, &size, &runnerOptions, &runner) != FSDPRT_OK)
    fail("rank " + llvm::Twine(rank) +
         ": cannot create the communicator for the results");
  RankRun mine;
  runRank(cx, comm, runner, rank, mine);
  if (!mine.error.empty())
    fail("rank " + llvm::Twine(rank) + ": " + mine.error);
  std::vector<RankRun> runs = gatherResults(mine, rank, size, runner);
  if (rank == 0) {
    // Timings and statistics are this process's (rank 0's).
    bool stats = printStats;
    printStats = false;
    report(cx, runs, false);
    if (stats)
      printRankStats(0, mine.stats);
  }
  fsdprt_comm_destroy(runner);
  fsdprt_comm_destroy(comm);
  return 0;
}

int reportThreads(const RunContext &cx, const std::vector<RankRun> &runs) {
  bool failed = false;
  for (size_t r = 0; r < runs.size(); ++r)
    if (!runs[r].error.empty()) {
      llvm::errs() << "fsdp-run: error: rank " << r << ": " << runs[r].error
                   << "\n";
      failed = true;
    }
  if (failed)
    return 1;
  report(cx, runs, true);
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
  if (saveEvery < 0)
    fail("--save-every must not be negative");
  if (saveEvery > 0 && saveDir.empty())
    fail("--save-every needs --save DIR");
}

/// Training-only options on a module that is not a training step, and
/// fed-back arguments fsdp-run cannot keep.
void checkTraining(const Program &prog) {
  if (!prog.training()) {
    if (!saveDir.empty() || !resumeDir.empty())
      fail("--save and --resume need a training step (a result with "
           "fsdp.update_of); '" +
           prog.entry + "' has none");
    return;
  }
  if (warmupCount > 0)
    fail("--warmup times a step on the same inputs; a training step "
         "feeds its updates back (use --steps)");
  for (size_t i = 0; i < prog.args.size(); ++i) {
    const Port &p = prog.args[i];
    if (prog.fedBy[i] >= 0 && !p.layout && p.type.getRank() > 0 &&
        prog.meshSize() > 1)
      fail("argument '" + p.name +
           "' is fed back but has no layout; give it one (a replicated "
           "layout for a value every rank holds)");
  }
}

/// The inputs of every step: from --inputs, or from the checkpoint for
/// the fed-back arguments with --resume.
std::vector<StepInput> loadRunInputs(const Program &prog, int64_t &firstStep) {
  std::vector<StepInput> inputs;
  firstStep = 0;
  if (!prog.training()) {
    for (npy::Array &a : loadInputs(prog, prog.meshSize()))
      inputs.push_back(StepInput{std::move(a), 0});
    return inputs;
  }
  std::optional<checkpoint::Loaded> loaded;
  if (!resumeDir.empty()) {
    loaded = checkpoint::load(resumeDir, prog);
    firstStep = loaded->step;
    if (!printJson)
      llvm::outs() << "resumed from " << loaded->dir << " after step "
                   << firstStep << "\n";
  }
  for (size_t i = 0; i < prog.args.size(); ++i) {
    bool fed = prog.fedBy[i] >= 0;
    if (fed && loaded)
      inputs.push_back(StepInput{std::move(loaded->values[i]), 0});
    else
      inputs.push_back(loadStepInput(prog.args[i], prog.meshSize(), fed,
                                     firstStep, firstStep + stepCount));
  }
  return inputs;
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
#ifdef __GLIBC__
  // Every step allocates and frees the same buffers: keep freed memory in
  // the process (no munmap or heap trim after a step, whose next step
  // would fault every page in again).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
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
  llvm::Expected<Program> loaded = loadProgram(*module, entryName);
  if (!loaded)
    fail(llvm::toString(loaded.takeError()));
  Program prog = std::move(*loaded);
  int64_t meshSize = prog.meshSize();
  if (worldSize != 0 && worldSize != meshSize)
    fail("world size " + llvm::Twine(worldSize.getValue()) +
         " does not match the mesh size " + llvm::Twine(meshSize));
  checkTraining(prog);
  int64_t firstStep = 0;
  std::vector<StepInput> inputs = loadRunInputs(prog, firstStep);
  std::vector<Output> outputs = outputsOf(prog);
  jit->compile(*module);
  RuntimeOptions rt(prog, timeoutSeconds);
  RunContext cx{*jit,    prog,      inputs,
                outputs, firstStep, ranksHoldScalars(outputs)};
  if (backendName == "mpi")
    return runMpi(cx, rt);
  std::vector<RankRun> runs = runThreads(cx, rt);
  return reportThreads(cx, runs);
}

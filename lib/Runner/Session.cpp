//===- Session.cpp - a loaded program and its runs ------------------------===//

#include "Blas.h"
#include "Checkpoint.h"
#include "Device.h"
#include "Files.h"
#include "Inputs.h"
#include "JitSeam.h"
#include "Manifest.h"
#include "Program.h"
#include "RankRun.h"
#include "Results.h"
#include "Shards.h"
#include "StepLibrary.h"
#include "fsdp/Runner/Runner.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace fsdp::run {

namespace {

/// Most ranks the threads backend starts (one thread each).
constexpr int64_t kMaxThreadRanks = 16384;

/// One MPI program per process: its communicators are the process's.
std::atomic<bool> mpiSessionOpen{false};

Error error(const std::string &message) { return makeError(message); }

} // namespace

void initializeProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef __GLIBC__
    // Every step allocates and frees the same buffers: keep freed memory in
    // the process (no munmap or heap trim after a step, whose next step
    // would fault every page in again).
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    // Ranks are the parallelism: one BLAS thread each (set when it opens).
    blas::library();
  });
}

namespace {

/// Runtime options: the timeout and the mesh's axis names for messages.
struct RuntimeOptions {
  std::vector<const char *> names;
  fsdprt_options_t options;
  RuntimeOptions(const Program &prog, double timeout) {
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

/// Training-only options on a step that is not one, and the other checks
/// of a run's options.
Error checkRunOptions(const Program &prog, const RunOptions &o) {
  if (o.steps < 1)
    return error("--steps must be at least 1");
  if (o.warmup < 0)
    return error("--warmup must not be negative");
  if (o.saveEvery < 0)
    return error("--save-every must not be negative");
  if (o.saveEvery > 0 && o.saveDir.empty())
    return error("--save-every needs --save DIR");
  if (!prog.training()) {
    if (!o.saveDir.empty() || !o.resumeDir.empty())
      return error("--save and --resume need a training step (a result with "
                   "fsdp.update_of); '" +
                   prog.entry + "' has none");
    return Error::success();
  }
  if (o.warmup > 0)
    return error("--warmup times a step on the same inputs; a training step "
                 "feeds its updates back (use --steps)");
  return Error::success();
}

/// Every rank's output pieces and memory counters, gathered on the
/// runner's communicator, so that this exchange never pairs with one of
/// the program's collectives.
Expected<std::vector<RankOutcome>> gatherOutcomes(RankOutcome &mine,
                                                  int64_t rank, int64_t size,
                                                  fsdprt_comm_t *comm) {
  std::vector<RankOutcome> runs(size);
  auto gather = [&](const void *data, void *all, size_t bytes) {
    return fsdprt_all_gather(comm, 1, data, all, bytes, FSDPRT_U8) == FSDPRT_OK;
  };
  for (const Bytes &piece : mine.pieces) {
    Bytes all(piece.size() * size);
    if (!gather(piece.data(), all.data(), piece.size()))
      return error(
          "rank " + std::to_string(rank) +
          ": gathering the results failed: " + fsdprt_comm_error_message(comm));
    for (int64_t r = 0; r < size; ++r)
      runs[r].pieces.emplace_back(all.begin() + r * piece.size(),
                                  all.begin() + (r + 1) * piece.size());
  }
  constexpr size_t n = 12;
  int64_t counters[n] = {mine.memory.peakBytes,
                         mine.memory.allocations,
                         mine.heldAfterStep,
                         mine.arenaBytes,
                         mine.deviceIndex,
                         int64_t(mine.device.bytes_allocated),
                         int64_t(mine.device.launches),
                         int64_t(mine.device.gemms),
                         int64_t(mine.device.bytes_peak),
                         int64_t(mine.device.allocations),
                         int64_t(mine.device.arena_bytes),
                         int64_t(mine.device.graph_launches)};
  std::vector<int64_t> all(n * size_t(size));
  if (!gather(counters, all.data(), sizeof(counters)))
    return error(
        "rank " + std::to_string(rank) +
        ": gathering the results failed: " + fsdprt_comm_error_message(comm));
  for (int64_t r = 0; r < size; ++r) {
    const int64_t *c = all.data() + n * r;
    runs[r].memory.peakBytes = c[0];
    runs[r].memory.allocations = c[1];
    runs[r].heldAfterStep = c[2];
    runs[r].arenaBytes = c[3];
    runs[r].gpu = mine.gpu;
    runs[r].deviceIndex = int32_t(c[4]);
    runs[r].device.bytes_allocated = uint64_t(c[5]);
    runs[r].device.launches = uint64_t(c[6]);
    runs[r].device.gemms = uint64_t(c[7]);
    runs[r].device.bytes_peak = uint64_t(c[8]);
    runs[r].device.allocations = uint64_t(c[9]);
    runs[r].device.arena_bytes = uint64_t(c[10]);
    runs[r].device.graph_launches = uint64_t(c[11]);
  }
  runs[rank].stats = mine.stats;
  runs[rank].cudaGraph = mine.cudaGraph;
  runs[rank].rss = mine.rss;
  runs[rank].stepSeconds = mine.stepSeconds;
  runs[rank].stepFaults = mine.stepFaults;
  runs[rank].stepExposed = mine.stepExposed;
  runs[rank].inputSlices = mine.inputSlices;
  runs[rank].arenaSeconds = mine.arenaSeconds;
  return runs;
}

/// A step's time is the slowest rank's (this process's ranks).
/// A step's page faults are those of every rank of this process.
std::vector<int64_t> stepFaults(const std::vector<RankOutcome> &runs) {
  std::vector<int64_t> faults;
  for (const RankOutcome &r : runs) {
    faults.resize(std::max(faults.size(), r.stepFaults.size()), 0);
    for (size_t s = 0; s < r.stepFaults.size(); ++s)
      faults[s] += r.stepFaults[s];
  }
  return faults;
}

/// Per step, the most of `field` of any rank (the slowest rank's time).
std::vector<double> mostPerStep(const std::vector<RankOutcome> &runs,
                                std::vector<double> RankOutcome::*field) {
  size_t n = 0;
  for (const RankOutcome &r : runs)
    n = std::max(n, (r.*field).size());
  std::vector<double> steps(n, 0.0);
  for (const RankOutcome &r : runs)
    for (size_t s = 0; s < (r.*field).size(); ++s)
      steps[s] = std::max(steps[s], (r.*field)[s]);
  return steps;
}

} // namespace

//===----------------------------------------------------------------------===//
// Session::Impl
//===----------------------------------------------------------------------===//

struct Session::Impl {
  LoadOptions load;
  /// Where the step's code comes from: a step library or the JIT's.
  std::unique_ptr<StepCode> code;
  /// What the compiler says about the code.
  StepManifest manifest;
  Program prog;
  std::vector<Output> outputs;
  /// Inputs set in memory, by argument index.
  std::map<size_t, npy::Array> memoryInputs;
  /// Training state: per rank of this process, per argument, the rank's
  /// buffer of each fed-back argument. Empty until the first run.
  std::vector<std::vector<Bytes>> state;
  std::set<size_t> reset; // fed-back arguments set since the last run
  /// Per local rank, the kept shards of read-only arguments (keptArguments),
  /// and per argument the origin of the value they hold.
  std::vector<std::vector<Bytes>> kept;
  std::vector<std::string> keptOrigins;
  int64_t stepsTaken = 0;
  bool usable = true;
  std::string lostReason;
  fsdprt_comm_t *mpiComm = nullptr, *mpiRunner = nullptr;
  int64_t mpiRank = 0;
  std::unique_ptr<RuntimeOptions> runtime;

  ~Impl();
  Error open(std::string_view bytes, const std::string &name);
  Error openCode(std::string_view bytes, const std::string &name);
  Error openMpi();
  Expected<RunResult> run(const RunOptions &o);
  Error prepareState(const RunOptions &o, int64_t &firstStep);
  void initState(const std::vector<StepInput> &inputs);
  Expected<std::vector<StepInput>> bindInputs(const RunOptions &o,
                                              int64_t firstStep);
  Expected<std::vector<RankOutcome>> runRanks(const RunContext &cx,
                                              RunResult &result);
  Expected<std::vector<RankOutcome>> runThreads(const RunContext &cx);
  Expected<std::vector<RankOutcome>> runMpi(const RunContext &cx,
                                            bool &reporter);
  void runMpiGpu(const RunContext &cx, RankOutcome &mine);
  int64_t localRanks() const {
    return load.backend == Backend::Mpi ? 1 : prog.meshSize();
  }
  int64_t rankOf(size_t local) const {
    return load.backend == Backend::Mpi ? mpiRank : int64_t(local);
  }
};

Session::Impl::~Impl() {
  if (mpiRunner)
    fsdprt_comm_destroy(mpiRunner);
  if (mpiComm) {
    fsdprt_comm_destroy(mpiComm);
    mpiSessionOpen = false;
  }
}

Error Session::Impl::open(std::string_view bytes, const std::string &name) {
  initializeProcess();
  if (Error e = openCode(bytes, name))
    return e;
  auto loaded = readProgram(manifest, load.entry, name);
  if (!loaded)
    return loaded.takeError();
  prog = std::move(*loaded);
  int64_t meshSize = prog.meshSize();
  if (load.world != 0 && load.world != meshSize)
    return error("world size " + std::to_string(load.world) +
                 " does not match the mesh size " + std::to_string(meshSize));
  if (load.backend == Backend::Threads && meshSize > kMaxThreadRanks)
    return error("the mesh has " + std::to_string(meshSize) +
                 " ranks; the threads backend runs at most " +
                 std::to_string(kMaxThreadRanks) + " (use the mpi backend)");
  outputs = outputsOf(prog);
  // A GPU step that cannot run here fails now, not after compiling it.
  if (prog.gpu)
    if (Error e = device::checkRunnable(prog))
      return e;
  if (Error e = code->compile())
    return e;
  runtime = std::make_unique<RuntimeOptions>(prog, load.timeoutSeconds);
  if (load.backend == Backend::Mpi)
    return openMpi();
  return Error::success();
}

/// The code and the manifest of a step library (fsdp-compile), else the
/// JIT's.
Error Session::Impl::openCode(std::string_view bytes, const std::string &name) {
  if (isSharedObject(bytes)) {
    if (name == "<memory>")
      return error("a step library is opened from its file, not from memory");
    auto opened = SharedLibraryStepCode::open(name);
    if (!opened)
      return opened.takeError();
    code = std::move(opened->code);
    manifest = std::move(opened->manifest);
    return Error::success();
  }
  auto opened = openWithJit(bytes, name, load.entry, load.jitCacheDir);
  if (!opened)
    return opened.takeError();
  code = std::move(opened->code);
  auto parsed = parseManifest(opened->manifest, name);
  if (!parsed)
    return parsed.takeError();
  manifest = std::move(*parsed);
  return Error::success();
}

Error Session::Impl::openMpi() {
  if (mpiSessionOpen.exchange(true))
    return makeError(
        std::errc::device_or_resource_busy,
        "another program of this process already runs on the MPI world; "
        "destroy it first");
  if (fsdprt_mpi_comm_create(prog.meshShape.size(), prog.meshShape.data(),
                             &runtime->options, &mpiComm) != FSDPRT_OK) {
    mpiSessionOpen = false;
    return error("cannot create the MPI communicator (is the world size " +
                 std::to_string(prog.meshSize()) + " under mpirun?)");
  }
  fsdprt_comm_rank(mpiComm, &mpiRank);
  int64_t size = prog.meshSize();
  fsdprt_options_t runnerOptions = runtime->runnerOptions();
  if (fsdprt_mpi_comm_create(1, &size, &runnerOptions, &mpiRunner) != FSDPRT_OK)
    return error("rank " + std::to_string(mpiRank) +
                 ": cannot create the communicator for the results");
  return Error::success();
}

/// The state of every fed-back argument not held yet (or reset): each
/// rank's shard of its global value.
void Session::Impl::initState(const std::vector<StepInput> &inputs) {
  bool fresh = state.empty();
  if (fresh)
    state.assign(size_t(localRanks()), std::vector<Bytes>(prog.args.size()));
  for (size_t i = 0; i < prog.args.size(); ++i) {
    if (prog.fedBy[i] < 0 || !(fresh || reset.count(i)))
      continue;
    for (size_t l = 0; l < state.size(); ++l)
      state[l][i] = shardInput(prog.args[i], inputs[i].first(), rankOf(l));
  }
  reset.clear();
}

/// With --resume, the fed-back state comes from the checkpoint.
Error Session::Impl::prepareState(const RunOptions &o, int64_t &firstStep) {
  firstStep = stepsTaken;
  if (o.resumeDir.empty())
    return Error::success();
  auto loaded = checkpoint::load(o.resumeDir, prog);
  if (!loaded)
    return loaded.takeError();
  firstStep = loaded->step;
  if (o.onMessage)
    o.onMessage("resumed from " + loaded->dir + " after step " +
                std::to_string(firstStep));
  for (size_t i = 0; i < prog.args.size(); ++i)
    if (prog.fedBy[i] >= 0)
      memoryInputs[i] = std::move(loaded->values[i]);
  state.clear(); // every fed-back argument starts from the checkpoint
  return Error::success();
}

Expected<std::vector<RankOutcome>>
Session::Impl::runThreads(const RunContext &cx) {
  int64_t size = prog.meshSize();
  fsdprt_world_t *world = nullptr, *runnerWorld = nullptr;
  fsdprt_options_t runnerOptions = runtime->runnerOptions();
  // A GPU step's ranks make their nccl communicators (one id for all) on
  // rank r mod count's GPU; the threads world is the runner's only.
  fsdprt_nccl_id_t ncclId{};
  int32_t gpus = 0;
  if (prog.gpu) {
    auto id = device::uniqueId();
    if (!id)
      return id.takeError();
    ncclId = *id;
    gpus = device::deviceCount();
    if (gpus < 1)
      return error("no GPU for the compute=gpu step: " +
                   std::string(fsdprt_gpu_last_error_message()));
  }
  if (!prog.gpu &&
      fsdprt_threads_world_create(prog.meshShape.size(), prog.meshShape.data(),
                                  &runtime->options, &world) != FSDPRT_OK)
    return error("cannot create the threads world");
  if (fsdprt_threads_world_create(1, &size, &runnerOptions, &runnerWorld) !=
      FSDPRT_OK) {
    if (world)
      fsdprt_world_destroy(world);
    return error("cannot create the threads world");
  }
  std::vector<RankOutcome> runs(size);
  std::vector<std::thread> threads;
  threads.reserve(size_t(size));
  std::string startError;
  try {
    for (int64_t r = 0; r < size; ++r) {
      fsdprt_comm_t *comm = nullptr, *runner = nullptr;
      if (world)
        fsdprt_threads_comm(world, r, &comm);
      fsdprt_threads_comm(runnerWorld, r, &runner);
      threads.emplace_back([&, comm, runner, r] {
        RankOutcome &out = runs[size_t(r)];
        if (!prog.gpu) {
          runRank(cx, comm, runner, r, state[size_t(r)], kept[size_t(r)], out);
          return;
        }
        device::RankDevice gpu;
        out.gpu = true;
        out.deviceIndex = int32_t(r % gpus);
        if (gpu.open(prog, runtime->options, runner, r, out.deviceIndex, ncclId,
                     size > gpus, out.error))
          runRank(cx, gpu.comm, runner, r, state[size_t(r)], kept[size_t(r)],
                  out);
      });
    }
  } catch (const std::system_error &e) {
    // The started ranks return once the world is aborted.
    if (world)
      fsdprt_world_abort(world, "the runner could not start every rank");
    fsdprt_world_abort(runnerWorld, "the runner could not start every rank");
    startError = "cannot start thread " + std::to_string(threads.size()) +
                 " of " + std::to_string(size) + " for the threads backend (" +
                 e.what() + "); use fewer ranks or the mpi backend";
  }
  for (auto &t : threads)
    t.join();
  if (world)
    fsdprt_world_destroy(world);
  fsdprt_world_destroy(runnerWorld);
  if (!startError.empty()) {
    usable = false;
    return error(startError);
  }
  return runs;
}

Expected<std::vector<RankOutcome>> Session::Impl::runMpi(const RunContext &cx,
                                                         bool &reporter) {
  fsdprt_comm_reset_stats(mpiComm);
  RankOutcome mine;
  if (prog.gpu)
    runMpiGpu(cx, mine);
  else
    runRank(cx, mpiComm, mpiRunner, mpiRank, state[0], kept[0], mine);
  if (!mine.error.empty()) {
    if (mine.stateLost)
      usable = false;
    return error(onRank(mpiRank, mine.error));
  }
  stepsTaken = cx.firstStep + mine.stepsDone;
  reporter = mpiRank == 0;
  return gatherOutcomes(mine, mpiRank, prog.meshSize(), mpiRunner);
}

/// The MPI backend's GPU rank: one process per GPU (its local rank on the
/// host mod the GPUs it sees), an nccl communicator from rank 0's id.
void Session::Impl::runMpiGpu(const RunContext &cx, RankOutcome &mine) {
  mine.gpu = true;
  // Its NCCL joins the ranks of one process only: processes would wait
  // for each other forever.
  if (fsdprt_gpu_emulated()) {
    mine.error = "the emulated GPUs of one process cannot be joined across "
                 "processes: run a step on the emulated runtime with the "
                 "threads backend";
    return;
  }
  int64_t local = 0, onHost = 1;
  fsdprt_nccl_id_t id{};
  bool ok = device::localRank(mpiRunner, mpiRank, local, onHost, mine.error);
  int32_t gpus = device::deviceCount();
  if (ok && gpus < 1) {
    mine.error = std::string("no GPU for the compute=gpu step: ") +
                 fsdprt_gpu_last_error_message();
    ok = false;
  }
  if (!agree(mpiRunner, ok, "choosing the GPUs", mine.error) ||
      !device::shareUniqueId(mpiRunner, mpiRank, id, mine.error))
    return;
  mine.deviceIndex = int32_t(local % gpus);
  device::RankDevice gpu;
  if (gpu.open(prog, runtime->options, mpiRunner, mpiRank, mine.deviceIndex, id,
               onHost > gpus, mine.error))
    runRank(cx, gpu.comm, mpiRunner, mpiRank, state[0], kept[0], mine);
}

/// The first failing rank's error; the session's state follows the ranks'.
static Error rankErrors(std::vector<RankOutcome> &runs, bool &lost) {
  std::string message;
  for (size_t r = 0; r < runs.size(); ++r) {
    lost |= runs[r].stateLost;
    if (!runs[r].error.empty())
      message +=
          (message.empty() ? "" : "\n") + onRank(int64_t(r), runs[r].error);
  }
  return message.empty() ? Error::success() : error(message);
}

/// The inputs of this run; the fed-back state set up from them.
Expected<std::vector<StepInput>> Session::Impl::bindInputs(const RunOptions &o,
                                                           int64_t firstStep) {
  bool training = prog.training();
  std::vector<bool> wanted(prog.args.size(), true);
  for (size_t i = 0; training && !state.empty() && i < prog.args.size(); ++i)
    wanted[i] = prog.fedBy[i] < 0 || reset.count(i);
  InputSources sources{&o.inputDirs, &memoryInputs};
  auto inputs = loadInputs(prog, sources, wanted, firstStep,
                           firstStep + o.steps, localRanks());
  if (!inputs)
    return inputs.takeError();
  if (!training) {
    state.assign(size_t(localRanks()), std::vector<Bytes>(prog.args.size()));
    return inputs;
  }
  for (size_t i = 0; i < prog.args.size(); ++i)
    if (prog.fedBy[i] >= 0)
      memoryInputs.erase(i); // the state holds them from now on
  initState(*inputs);
  return inputs;
}

/// Every rank's outcome (threads: all of this process's; MPI: gathered).
Expected<std::vector<RankOutcome>> Session::Impl::runRanks(const RunContext &cx,
                                                           RunResult &result) {
  if (load.backend == Backend::Mpi) {
    auto gathered = runMpi(cx, result.isReporter);
    if (!gathered)
      lostReason = "a step failed";
    return gathered;
  }
  auto runs = runThreads(cx);
  if (!runs)
    return runs.takeError();
  bool lost = false;
  if (Error e = rankErrors(*runs, lost)) {
    if (lost) {
      usable = false;
      lostReason = "a step failed on some rank";
    }
    return std::move(e);
  }
  stepsTaken = cx.firstStep + runs->front().stepsDone;
  return runs;
}

Expected<RunResult> Session::Impl::run(const RunOptions &o) {
  if (!usable)
    return error("the program is no longer usable: " + lostReason);
  if (Error e = checkRunOptions(prog, o))
    return std::move(e);
  bool training = prog.training();
  int64_t firstStep = 0;
  if (training)
    if (Error e = prepareState(o, firstStep))
      return std::move(e);
  auto inputs = bindInputs(o, firstStep);
  if (!inputs)
    return inputs.takeError();
  RunContext cx{
      *code, prog, o, *inputs, outputs, firstStep, ranksHoldScalars(outputs)};
  std::vector<bool> current,
      keep = keptArguments(prog, *inputs, keptOrigins, current);
  kept.resize(size_t(localRanks()));
  cx.keep = &keep;
  cx.kept = &current;
  // The threads backend's ranks place their results into the global
  // arrays themselves (no per-rank copy to assemble from).
  // With an output directory, into their files (OutputFiles).
  std::vector<Bytes> placed(outputs.size());
  OutputFiles outputFiles;
  if (load.backend == Backend::Threads && !prog.gpu) {
    if (!o.outputsDir.empty())
      if (std::error_code ec = files::createDirectories(o.outputsDir))
        return error("cannot create " + o.outputsDir + ": " + ec.message());
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Port &p = *outputs[k].port;
      if (outputs[k].stacked || outputs[k].arg >= 0 || !placeable(p))
        continue;
      if (o.outputsDir.empty())
        placed[k].resize(size_t(p.globalElements() * p.elementBytes));
      else if (Error e = outputFiles.create(k, o.outputsDir, p))
        return std::move(e);
    }
    cx.placed = &placed;
    cx.files = &outputFiles;
  }
  // Process-wide: the step's own setting for the run.
  if (prog.gpu)
    fsdprt_gpu_set_tf32(prog.gpu->tf32 ? 1 : 0);
  RunResult result;
  result.gpu = prog.gpu.has_value();
  result.training = training;
  result.firstStep = firstStep;
  result.warmup = o.warmup;
  if (prog.plan)
    result.plan = {true, prog.plan->arenaBytes, prog.plan->outsideBytes,
                   prog.plan->buffers};
  result.parseSeconds = code->parseSeconds;
  result.jitSeconds = code->compileSeconds;
  result.jitCached = code->cacheHit;
  result.precompiled = code->precompiled;
  result.jitPhases = code->compilePhases;
  // Step libraries link OpenBLAS; JIT-compiled steps call library().
  if (const blas::Library *blas =
          code->precompiled ? blas::openblas() : blas::library()) {
    result.blas = blas->name;
    result.blasCore = blas->core;
    result.blasDetectedCore = blas->detectedCore;
  }
  auto runs = runRanks(cx, result);
  if (!runs) {
    keptOrigins.clear(); // a rank may have stopped before cutting its shard
    return runs.takeError();
  }
  for (const RankOutcome &r : *runs) {
    result.inputSlices += r.inputSlices;
    result.arenaSeconds = std::max(result.arenaSeconds, r.arenaSeconds);
  }
  if (!training)
    stepsTaken = 0;
  result.stepSeconds = mostPerStep(*runs, &RankOutcome::stepSeconds);
  result.stepExposedSeconds = mostPerStep(*runs, &RankOutcome::stepExposed);
  result.stepPageFaults = stepFaults(*runs);
  result.residentBytes =
      (*runs)[size_t(load.backend == Backend::Mpi ? mpiRank : 0)].rss;
  if (!result.isReporter)
    return result;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputFiles.has(k))
      if (Error e = outputFiles.map(k, placed[k]))
        return std::move(e);
  if (Error e = assembleResult(outputs, *runs, o.keepAllRanks, placed, result))
    return std::move(e);
  if (Error e = outputFiles.publish())
    return std::move(e);
  for (size_t k = 0; k < outputs.size(); ++k)
    result.outputs[k].writtenTo = outputFiles.path(k);
  return result;
}

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

Session::Session(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Session::~Session() = default;

Expected<std::unique_ptr<Session>>
Session::openFile(const std::string &path, const LoadOptions &options) {
  auto bytes = files::read(path);
  if (!bytes)
    return bytes.takeError();
  auto impl = std::make_unique<Impl>();
  impl->load = options;
  if (Error e =
          impl->open(std::string_view(bytes->data(), bytes->size()), path))
    return std::move(e);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Expected<std::unique_ptr<Session>>
Session::openBuffer(std::string_view bytes, const LoadOptions &options) {
  auto impl = std::make_unique<Impl>();
  impl->load = options;
  if (Error e = impl->open(bytes, "<memory>"))
    return std::move(e);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const Program &Session::program() const { return impl->prog; }
int64_t Session::worldSize() const { return impl->prog.meshSize(); }
bool Session::training() const { return impl->prog.training(); }
int64_t Session::stepsTaken() const { return impl->stepsTaken; }
bool Session::usable() const { return impl->usable; }

static PortInfo portInfo(const Port &p) {
  PortInfo info;
  info.name = p.name;
  info.dtype = p.dtype;
  info.globalShape = p.globalShape;
  info.sharded = p.layout.has_value();
  info.startsAtZero = startsAtZero(p);
  return info;
}

std::vector<PortInfo> Session::inputs() const {
  std::vector<PortInfo> out;
  for (size_t i = 0; i < impl->prog.args.size(); ++i) {
    out.push_back(portInfo(impl->prog.args[i]));
    out.back().fedBack = impl->prog.training() && impl->prog.fedBy[i] >= 0;
    if (!out.back().sharded && !impl->prog.args[i].rankLocal &&
        !out.back().globalShape.empty())
      out.back().globalShape[0] *= impl->prog.meshSize();
  }
  return out;
}

std::vector<PortInfo> Session::outputs() const {
  std::vector<PortInfo> out;
  for (const Output &o : impl->outputs) {
    out.push_back(portInfo(*o.port));
    out.back().fedBack = o.arg >= 0;
  }
  return out;
}

Error Session::setInput(std::string_view nameArg, std::string_view dtypeArg,
                        Span<const int64_t> shape, std::string_view bytes) {
  const Program &prog = impl->prog;
  std::string name(nameArg), dtype(dtypeArg);
  auto it = std::find_if(prog.args.begin(), prog.args.end(),
                         [&](const Port &p) { return p.name == name; });
  if (it == prog.args.end())
    return error("'" + prog.entry + "' has no argument '" + name + "'");
  size_t i = size_t(it - prog.args.begin());
  std::string want = it->dtype;
  if (dtype != want)
    return error("input '" + name + "' has dtype " + dtype + ", expected " +
                 want);
  int64_t elements = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
      return error("input '" + name + "': bad shape");
  if (int64_t(bytes.size()) != elements * it->elementBytes)
    return error("input '" + name + "': " + std::to_string(bytes.size()) +
                 " bytes do not hold its shape");
  npy::Array a;
  a.descr = want;
  a.shape = shape.vec();
  a.data.assign(bytes.begin(), bytes.end());
  impl->memoryInputs[i] = std::move(a);
  if (i < impl->keptOrigins.size())
    impl->keptOrigins[i].clear(); // the kept shards hold the old value
  if (prog.training() && prog.fedBy[i] >= 0)
    impl->reset.insert(i);
  return Error::success();
}

Expected<RunResult> Session::run(const RunOptions &options) {
  return impl->run(options);
}

} // namespace fsdp::run

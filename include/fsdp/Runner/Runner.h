//===- Runner.h - run a lowered fsdp step on every rank of its mesh -*- C++
//-*-===//
//
// The runner library: loads a module lowered by `fsdp-opt
// --fsdp-pipeline=lower=true`, binds the global inputs (from .npy files or
// from memory), runs one or N steps on every rank of the mesh (threads of
// this process, or one process per rank under mpirun), and hands back the
// gathered results, the timings and the measured memory. A training step
// (results with `fsdp.update_of`) keeps its fed-back state (parameter and
// optimizer shards) in the session between runs.
//
// Errors are Error values (Support.h); nothing here exits or aborts the
// process. tools/fsdp-run is a command line over this API, and fsdprun.h (C)
// wraps it for embedding and for Python.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_RUNNER_H
#define FSDP_RUNNER_RUNNER_H

#include "fsdp/Runner/Bytes.h"
#include "fsdp/Runner/Support.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::run {

struct Program;
class Session;

/// How the ranks run.
enum class Backend { Threads, Mpi };

/// The default JIT cache directory: $FSDP_JIT_CACHE_DIR, else
/// $XDG_CACHE_HOME/fsdp-run, else ~/.cache/fsdp-run.
std::string defaultCacheDir();

/// How a module is opened (once per session).
struct LoadOptions {
  /// The entry to run; empty: the module's only entry.
  std::string entry;
  /// Directory of compiled objects; empty: no cache.
  std::string jitCacheDir;
  Backend backend = Backend::Threads;
  /// Seconds a collective waits for its peers (0: forever).
  double timeoutSeconds = 60.0;
  /// Number of ranks the caller expects; 0: the mesh size.
  int64_t world = 0;
};

/// One value per step of a run (the loss, ...) as a rank reports it when
/// the step ends.
struct StepScalar {
  std::string name;
  double value;
};

/// What one run does. Plain values, passed by const reference; the command
/// line of fsdp-run maps onto it one flag per field.
struct RunOptions {
  /// Directories of global .npy inputs: the first holding <name>.npy (or a
  /// <name>/ directory of per-step files) wins. Inputs set in memory
  /// (Session::setInput) take precedence.
  std::vector<std::string> inputDirs;
  /// A training step: this many training steps. Otherwise: the step this
  /// many times on the same inputs (the results are the last step's).
  int64_t steps = 1;
  /// Untimed steps before the timed ones (not for training steps).
  int64_t warmup = 0;
  /// Training: write sharded checkpoints into <saveDir>/step-<K> at the end
  /// and every `saveEvery` global steps (0: only at the end).
  std::string saveDir;
  int64_t saveEvery = 0;
  /// Training: start from a checkpoint (a step-<K> directory, or the newest
  /// complete one in a save directory), on any mesh.
  std::string resumeDir;
  /// Keep every rank's copy of results without a layout.
  bool keepAllRanks = false;
  /// Where writeOutputs will write the results (fsdp-run --outputs), or
  /// empty. With the threads backend, the ranks then write each sharded
  /// result's elements straight into its file as the run ends, which
  /// writeOutputs leaves as it is (HostArray::writtenTo).
  std::string outputsDir;
  /// Read the process's resident set after every step (residentBytes).
  bool measureResidentSet = false;
  /// A compute=gpu step: capture one step into a CUDA graph and replay it
  /// for the later steps, when the step allows it (no device allocation and
  /// no host synchronization inside; RunResult::cudaGraph says why not).
  bool cudaGraphs = true;
  /// Called on rank 0 when a training step ends, with the step's scalars
  /// (only when rank 0 holds their global values).
  std::function<void(int64_t step, Span<const StepScalar>)> onStep;
  /// Progress messages ("resumed from ...", "saved checkpoint ...").
  std::function<void(std::string_view)> onMessage;
};

/// Collective calls and bytes of one rank.
struct CommStats {
  int64_t collectives = 0, allGathers = 0, reduceScatters = 0, allReduces = 0;
  int64_t bytesSent = 0, bytesReceived = 0;
};

/// The measured allocations of one rank's compiled step.
struct RankMemory {
  /// High-water mark of the JIT'd code's malloc/free (what stays outside
  /// the arena), and its fresh allocations (a freed buffer of the same size
  /// is reused without one).
  int64_t peakBytes = 0;
  int64_t allocations = 0;
  int64_t heldAfterStepBytes = 0; // most bytes still allocated after a step
  int64_t arenaBytes = 0;         // the rank's arena, held by the runtime
  /// A compute=gpu step (fsdprt_gpu_context_stats of the rank's GPU): the
  /// device bytes allocated in the run (arguments uploaded and the step's
  /// own buffers, every step), kernel launches and cuBLAS GEMMs.
  int32_t device = -1;
  int64_t deviceAllocatedBytes = 0, deviceLaunches = 0, deviceGemms = 0;
  /// The most device bytes the rank's allocations held at once (stream
  /// order of the compute stream).
  int64_t devicePeakBytes = 0;
  /// Device allocations in the run (arguments uploaded, the step's own
  /// buffers outside its arena, the arena once) and the rank's device arena.
  int64_t deviceAllocations = 0, deviceArenaBytes = 0;
  int64_t deviceGraphLaunches = 0; // steps replayed from a CUDA graph
  /// The step's measured high-water mark: its arena and what is outside.
  int64_t measuredPeakBytes() const { return arenaBytes + peakBytes; }
};

/// The static memory plan of the step on every rank (fsdp-assign-buffers):
/// the arena and the peak of the static buffers outside it.
struct MemoryPlanSummary {
  bool planned = false;
  int64_t arenaBytes = 0, outsideBytes = 0, buffers = 0;
  int64_t peakBytes() const { return arenaBytes + outsideBytes; }
};

/// A global array: numpy's dtype string, shape and row-major bytes.
struct HostArray {
  std::string name;
  std::string dtype; // "<f4", "<f8", "<u2" (bf16), "<i8", ...
  std::vector<int64_t> shape;
  Bytes data;
  /// A scalar result of a training step, one value per step (shape [steps]).
  bool perStep = false;
  /// For a result without a layout: every rank's copy (keepAllRanks).
  std::vector<Bytes> perRank;
  /// The file the run wrote it to already (RunOptions::outputsDir; `data`
  /// maps it), or empty.
  std::string writtenTo;
  /// Element `i` of an f32 or f64 array as a double (NaN otherwise).
  double scalarAt(size_t i) const;
};

/// What a run produced. With the MPI backend, outputs, memory and stats of
/// every rank are on rank 0 only (`isReporter`); timings are this process's.
struct RunResult {
  bool isReporter = true;
  bool training = false;
  int64_t firstStep = 0; // global steps taken before this run
  /// The results (last step's), the final value of every fed-back argument
  /// under its argument's name, and per-step scalars of a training run
  /// stacked along a leading step dimension.
  std::vector<HostArray> outputs;
  /// Seconds of each timed step (the slowest rank of this process).
  std::vector<double> stepSeconds;
  /// Page faults of each timed step (every rank thread of this process).
  std::vector<int64_t> stepPageFaults;
  /// Shards cut from global inputs into argument buffers in this run (every
  /// rank of this process): one per argument and step, except a read-only
  /// argument's, cut once and kept from run to run while its value stays.
  int64_t inputSlices = 0;
  /// Seconds a rank took to reserve the step's arena before the first step
  /// (the kernel faulting in and zeroing its pages), the most of any rank
  /// of this process: part of the time outside the steps that grows with
  /// the plan, not with the runner.
  double arenaSeconds = 0;
  /// Exposed communication of each timed step: the communication the
  /// step's compute waited for (fsdprt_stats_t::exposed_ns), the most of
  /// any rank of this process.
  std::vector<double> stepExposedSeconds;
  std::vector<RankMemory> memory;     // per rank
  MemoryPlanSummary plan;             // the same on every rank
  std::vector<CommStats> stats;       // per rank (MPI: rank 0's only)
  std::vector<int64_t> residentBytes; // the process after each step
  double parseSeconds = 0, jitSeconds = 0;
  bool jitCached = false;
  /// The step came from a library built by fsdp-compile: jitSeconds is the
  /// time to load it.
  bool precompiled = false;
  std::vector<std::pair<std::string, double>> jitPhases;
  /// The BLAS compute=fast steps call ("MKL" or "OpenBLAS", "" without
  /// one), its kernels (OpenBLAS's core, MKL's reproducibility branch), and
  /// the core OpenBLAS chose itself when the runner replaced it.
  std::string blas, blasCore, blasDetectedCore;
  int64_t warmup = 0;
  /// A compute=gpu step: it ran on GPUs (memory holds device counters; the
  /// host's are not measured).
  bool gpu = false;
  /// A compute=gpu step: "replayed" when later steps replayed a CUDA graph
  /// of one step, else why not ("off: ..." when disabled or not capturable).
  std::string cudaGraph;

  const HostArray *output(std::string_view name) const;
  double medianStepSeconds() const;
  double medianExposedSeconds() const;
  double minStepSeconds() const;
};

/// The timings, memory and per-step scalars as one JSON object (the
/// `fsdp-run --json` report).
std::string toJSON(const RunResult &result, int indent = 0);

/// Writes every output as <dir>/<name>.npy (and <name>.rank<r>.npy for the
/// per-rank copies), each through a temporary file and a rename.
Error writeOutputs(const RunResult &result, const std::string &dir);

/// A description of an argument or result, for callers that bind inputs
/// from memory.
struct PortInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> globalShape; // an input without a layout: per rank
  bool sharded = false;             // has a layout
  bool fedBack = false;             // an argument a training step updates
  bool startsAtZero = false;        // optimizer state, the step count
};

/// A loaded program: the module parsed, its signature checked and its code
/// compiled (or taken from the JIT cache).
class Session {
public:
  ~Session();
  /// Opens a lowered module from a file (text or bytecode), or a step
  /// library built by fsdp-compile (loaded without compiling).
  static Expected<std::unique_ptr<Session>>
  openFile(const std::string &path, const LoadOptions &options);
  /// Opens a lowered module held in memory.
  static Expected<std::unique_ptr<Session>>
  openBuffer(std::string_view bytes, const LoadOptions &options);

  const Program &program() const;
  std::vector<PortInfo> inputs() const;
  std::vector<PortInfo> outputs() const;
  int64_t worldSize() const;
  /// Whether the entry is a training step.
  bool training() const;
  /// Global steps taken so far (a training step; resumed ones included).
  int64_t stepsTaken() const;

  /// Sets the global value of input `name` (shape: the argument's global
  /// shape; an input without a layout: the batch of every rank, rank r's
  /// rows r*B..(r+1)*B-1). For a training step, setting a fed-back argument
  /// resets its state to this value at the next run.
  Error setInput(std::string_view name, std::string_view dtype,
                 Span<const int64_t> shape, std::string_view bytes);

  /// Runs `options.steps` steps on every rank. A training step continues
  /// from the state the previous run left (unless inputs reset it). A run
  /// that fails leaves the session usable when `usable()` says so.
  Expected<RunResult> run(const RunOptions &options);

  /// False once a run failed in a way that leaves the ranks' state unknown
  /// (a collective failed or timed out); every later call fails.
  bool usable() const;

  struct Impl;

private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace fsdp::run

#endif

//===- RankRun.h - the steps of one rank -------------------------*- C++
//-*-===//
//
// What one rank does in a run: bind its shard of every input, call the
// compiled step, keep the results it reports and feed the updates of a
// training step back, checkpointing on the way. The threads backend runs
// this on one thread per rank, the MPI backend on each process's own rank.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_RANKRUN_H
#define FSDP_RUNNER_RANKRUN_H

#include "Inputs.h"
#include "Memory.h"
#include "Program.h"
#include "StepCode.h"
#include "fsdp/Runner/Runner.h"
#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include <string>
#include <vector>

namespace fsdp::run {

class OutputFiles;

/// A result written at the end: a result (its last step's value), the
/// final value of a fed-back argument, or a scalar result of every step
/// stacked along a leading dimension (the loss of a training run).
struct Output {
  const Port *port;
  int64_t result;
  int64_t arg; // >= 0: the fed-back argument
  bool stacked;
};

std::vector<Output> outputsOf(const Program &prog);

/// Whether rank 0's copy of every per-step scalar is its global value (no
/// partial sums), so that rank 0 can report each step as it ends.
bool ranksHoldScalars(const std::vector<Output> &outputs);

/// What one rank produced.
struct RankOutcome {
  std::vector<Bytes> pieces;       // per output
  std::vector<double> stepSeconds; // the timed steps
  std::vector<int64_t> stepFaults; // page faults of the timed steps
  std::vector<double> stepExposed; // exposed communication (seconds)
  fsdprt_stats_t stats{};
  memory::Counters memory;
  int64_t heldAfterStep = 0; // most bytes still allocated after a step
  int64_t arenaBytes = 0;    // the step's arena the runtime holds
  double arenaSeconds = 0;   // reserving it (faulting its pages in)
  std::vector<int64_t> rss;  // rank 0: resident bytes after each step
  int64_t inputSlices = 0;   // shards cut into the rank's argument buffers
  int64_t stepsDone = 0;     // steps whose call returned
  bool stateLost = false;    // a call or collective failed mid-step
  bool gpu = false;          // a compute=gpu step on GPU `deviceIndex`
  int32_t deviceIndex = -1;
  fsdprt_gpu_stats_t device{}; // its counters at the end of the run
  std::string cudaGraph;       // RunResult::cudaGraph
  std::string error;
};

/// What every rank of a run shares.
struct RunContext {
  StepCode &code;
  const Program &prog;
  const RunOptions &options;
  const std::vector<StepInput> &inputs;
  const std::vector<Output> &outputs;
  int64_t firstStep; // global steps taken before this run
  bool liveSteps;    // rank 0 reports each step's scalars as it ends
  /// Threads backend: per output, the global array its first replicas
  /// place their elements into at the last step (empty: gathered from
  /// pieces instead).
  std::vector<Bytes> *placed = nullptr;
  /// Threads backend with RunOptions::outputsDir: the outputs whose first
  /// replicas write their elements into the output's file instead.
  OutputFiles *files = nullptr;
  /// Per argument: its shard is cut once and kept between steps and runs
  /// (a read-only argument with the same value every step), and whether
  /// the kept shard already holds this run's value.
  const std::vector<bool> *keep = nullptr, *kept = nullptr;
};

/// Whether every rank of `runner` reports `ok`; names the first that did
/// not in `error` (unless it holds this rank's own message).
bool agree(fsdprt_comm_t *runner, bool ok, const std::string &what,
           std::string &error);

/// Runs the steps of rank `rank`. A GPU step's `comm` is the rank's nccl
/// communicator, whose context is current on the calling thread. `fed` holds
/// the rank's buffer of every fed-back argument (indexed by argument) and is
/// updated step by step; `kept` the rank's buffers of the arguments
/// RunContext::keep names, from run to run.
void runRank(const RunContext &cx, fsdprt_comm_t *comm, fsdprt_comm_t *runner,
             int64_t rank, std::vector<Bytes> &fed, std::vector<Bytes> &kept,
             RankOutcome &out);

/// `message` of rank `rank`, prefixed with "rank R: " unless it already
/// names the rank so (the runtime's messages do).
std::string onRank(int64_t rank, const std::string &message);

/// A rank's collective calls and bytes from the runtime's statistics.
CommStats commStats(const fsdprt_stats_t &s);

/// The process's resident set size in bytes (0 where unknown).
int64_t residentBytes();

} // namespace fsdp::run

#endif

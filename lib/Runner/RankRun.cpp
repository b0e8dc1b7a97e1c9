//===- RankRun.cpp - the steps of one rank --------------------------------===//

#include "RankRun.h"
#include "Checkpoint.h"
#include "Device.h"
#include "Files.h"
#include "Results.h"
#include "Shards.h"

#include "fsdp/Layout/LayoutMath.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>
#include <utility>

namespace lm = ::fsdp::layout;

namespace fsdp::run {

namespace {

/// The argument buffers and packed pointers of one rank's call.
class RankCall {
public:
  /// A call on the rank's argument buffers, which stay the caller's (they
  /// are reused from step to step).
  RankCall(const Program &prog, std::vector<Bytes> &args) {
    for (size_t i = 0; i < prog.args.size(); ++i)
      descs.push_back(
          Descriptor::forBuffer(args[i].data(), prog.args[i].shape));
    pack(prog);
  }

  /// A GPU step's call on device buffers, which the rank's DeviceState
  /// owns (the call frees only the results the step allocated).
  RankCall(const Program &prog, std::vector<device::Buffer> args)
      : deviceArgs(std::move(args)), onDevice(true) {
    for (size_t i = 0; i < prog.args.size(); ++i)
      descs.push_back(
          Descriptor::forBuffer(deviceArgs[i].ptr, prog.args[i].shape));
    pack(prog);
  }

  RankCall(const RankCall &) = delete;
  RankCall &operator=(const RankCall &) = delete;
  ~RankCall() { releaseDevice(); }

  Error invoke(StepCode &code, const std::string &symbol) {
    return code.invokePacked(symbol, packed);
  }

  /// Copies result `i`'s elements into `out`, reusing its allocation.
  void result(const Program &prog, size_t i, Bytes &out) const {
    copyResult(prog.results[i], resultArea.data() + offsets[i], out);
  }

  /// Copies the elements rank `rank` owns of result `i` into `global`.
  void placeResult(const Program &prog, size_t i, int64_t rank,
                   Bytes &global) const {
    placeShard(prog.results[i], rank, resultArea.data() + offsets[i],
               global.data());
  }

  /// The same into output `k`'s file.
  void writeResult(const Program &prog, size_t i, int64_t rank,
                   OutputFiles &files, size_t k) const {
    placeShard(prog.results[i], rank, resultArea.data() + offsets[i],
               [&](int64_t at, const char *data, int64_t bytes) {
                 files.write(k, at, data, bytes);
               });
  }

  /// The same from the device.
  bool deviceResult(const Program &prog, size_t i, Bytes &out,
                    std::string &error) const {
    return device::download(prog.results[i], resultArea.data() + offsets[i],
                            out, error);
  }

  /// Result `i` copied into the device buffer `to` (a fed-back argument's):
  /// a device-to-device copy in stream order (no allocation, no wait),
  /// through the host only for a strided view.
  bool copyResultTo(const Program &prog, size_t i, const device::Buffer &to,
                    std::string &error) const {
    const Port &p = prog.results[i];
    const int64_t *words = resultArea.data() + offsets[i];
    if (isRowMajor(p, words)) {
      const char *first =
          reinterpret_cast<const char *>(words[1]) + words[2] * p.elementBytes;
      if (fsdprt_gpu_copy_on_device(to.ptr, first, p.slotBytes()) == FSDPRT_OK)
        return true;
      error = "cannot copy '" + p.name +
              "' on the device: " + fsdprt_gpu_last_error_message();
      return false;
    }
    Bytes host;
    if (!device::download(p, words, host, error))
      return false;
    if (!host.empty() &&
        fsdprt_gpu_copy_to_device(to.ptr, host.data(), int64_t(host.size())) !=
            FSDPRT_OK) {
      error = "cannot copy '" + p.name +
              "' to the device: " + fsdprt_gpu_last_error_message();
      return false;
    }
    return true;
  }

  /// The result descriptors the step wrote (kept from a captured step for
  /// its replays, which do not run the host code that writes them).
  const std::vector<int64_t> &resultWords() const { return resultArea; }
  void setResultWords(const std::vector<int64_t> &words) { resultArea = words; }

  /// Frees, each once, the device buffers of the results the step
  /// allocated (not the arguments, which the rank's state owns; results in
  /// the context's arena are left alone by fsdprt_gpu_free).
  void releaseDevice() {
    if (!onDevice)
      return;
    std::vector<void *> done;
    for (const device::Buffer &b : deviceArgs)
      done.push_back(b.ptr);
    if (called)
      for (size_t off : offsets) {
        void *p = reinterpret_cast<void *>(resultArea[off]);
        if (!p || std::find(done.begin(), done.end(), p) != done.end())
          continue;
        done.push_back(p);
        device::release(p);
      }
    deviceArgs.clear();
    called = false;
    onDevice = false;
  }

  /// Set once the step returned: its results are live allocations.
  bool called = false;

private:
  void pack(const Program &prog) {
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

public:
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
  std::vector<device::Buffer> deviceArgs;
  bool onDevice = false;
  std::vector<Descriptor> descs;
  std::vector<int64_t> resultArea;
  std::vector<size_t> offsets;
  std::vector<void *> pointers, packed;
};

/// An f32 or f64 element as a double.
double scalarValue(const Port &p, const char *data) {
  if (p.isF64())
    return *reinterpret_cast<const double *>(data);
  if (p.isF32())
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

} // namespace

bool agree(fsdprt_comm_t *runner, bool ok, const std::string &what,
           std::string &error) {
  int64_t size = 1;
  fsdprt_comm_size(runner, &size);
  char mine = ok ? 1 : 0;
  Bytes all(size_t(size), 0);
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

namespace {

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
                    const std::vector<Bytes> &fed, int64_t rank, int64_t step,
                    std::string &error) {
  const std::string &saveDir = cx.options.saveDir;
  std::string part = checkpoint::partialDir(saveDir, step),
              done = checkpoint::finalDir(saveDir, step);
  std::string what = "saving " + done;
  bool ok = true;
  if (rank == 0) {
    files::removeAll(part);
    if (std::error_code ec = files::createDirectories(part)) {
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
      files::removeAll(part);
    return false;
  }
  if (rank == 0) {
    ok = checkpoint::writeMetadata(part, cx.prog, step, perRank, error) &&
         checkpoint::publish(part, done, error);
    if (!ok)
      files::removeAll(part);
    else if (cx.options.onMessage)
      cx.options.onMessage("saved checkpoint " + done);
  }
  return agree(runner, ok, what, error);
}

/// This rank's arguments of global step `g`: its shard of every input,
/// copied into the rank's buffer of the argument (kept from the last step:
/// a step may write its arguments; one it never writes and that `holds`
/// says has its value is not copied again), then (once every input could
/// be read) the fed-back buffers, swapped in: `fed` then holds last step's
/// buffers, into which the step's updates are copied.
bool bindArguments(const RunContext &cx, fsdprt_comm_t *runner, int64_t rank,
                   int64_t g, std::vector<Bytes> &fed, std::vector<Bytes> &args,
                   std::vector<bool> &holds, RankOutcome &out) {
  const Program &prog = cx.prog;
  bool training = prog.training();
  std::string &error = out.error;
  for (size_t i = 0; i < prog.args.size() && error.empty(); ++i) {
    if ((training && prog.fedBy[i] >= 0) || holds[i])
      continue;
    StepValue hold;
    bool keep = cx.keep && (*cx.keep)[i];
    auto global = cx.inputs[i].at(training ? g : 0, hold);
    // A kept (read-only) shard is mapped from its file where it can be.
    if (!global)
      error = toString(global.takeError());
    else if (!(keep && cx.inputs[i].mapShard(prog.args[i], rank, args[i])))
      shardInput(prog.args[i], *global, rank, args[i]);
    ++out.inputSlices;
    holds[i] = keep;
  }
  // A per-step file that cannot be read stops every rank together, before
  // the step's collectives (a lone rank leaving would make the others wait
  // for it).
  bool stepFiles =
      std::any_of(cx.inputs.begin(), cx.inputs.end(),
                  [](const StepInput &in) { return in.fromFiles(); });
  if (stepFiles && !agree(runner, error.empty(),
                          "step " + std::to_string(g) + " inputs", error))
    return false;
  // A GPU step's fed-back state stays on the device (uploadArguments).
  for (size_t i = 0; i < prog.args.size() && !prog.gpu; ++i)
    if (training && prog.fedBy[i] >= 0)
      args[i].swap(fed[i]);
  return true;
}

/// A GPU step's device buffers, allocated by the first step and reused by
/// every later one (a step allocates nothing, and a captured step's replays
/// find its arguments where they were): the training state -- each fed-back
/// argument, into which the step's update is copied --, and whether the
/// host copy (`fed`) is behind it; and the other arguments, uploaded into
/// their buffers before each step.
struct DeviceState {
  std::vector<device::Buffer> fed, inputs;
  bool hostStale = false;
  ~DeviceState() {
    for (device::Buffer &b : fed)
      device::release(b.ptr);
    for (device::Buffer &b : inputs)
      device::release(b.ptr);
  }
};

/// The device buffers of a GPU step's call: the fed-back state where it is
/// on the device, everything else uploaded into the rank's buffers (the
/// first step allocates them). The copies are complete when it returns, so
/// that the step's time does not include them.
bool uploadArguments(const RunContext &cx, fsdprt_gpu_context_t *context,
                     std::vector<Bytes> &args, const std::vector<Bytes> &fed,
                     DeviceState &state, std::vector<device::Buffer> &out,
                     std::string &error) {
  const Program &prog = cx.prog;
  out.assign(prog.args.size(), {});
  bool ok = true;
  for (size_t i = 0; i < prog.args.size() && ok; ++i) {
    bool fedBack = prog.training() && prog.fedBy[i] >= 0;
    device::Buffer &slot = fedBack ? state.fed[i] : state.inputs[i];
    const Bytes &host = fedBack ? fed[i] : args[i];
    std::string what = "argument '" + prog.args[i].name + "'";
    if (!(fedBack && slot.ptr)) {
      if (slot.ptr && slot.bytes == int64_t(host.size())) {
        if (!host.empty() &&
            fsdprt_gpu_copy_to_device(slot.ptr, host.data(), slot.bytes) !=
                FSDPRT_OK) {
          error =
              "cannot upload " + what + ": " + fsdprt_gpu_last_error_message();
          ok = false;
        }
      } else {
        device::release(slot.ptr);
        slot = device::upload(host, what, error);
        ok = slot.ptr != nullptr;
      }
    }
    out[i] = slot; // the host buffer stays, for the next step's copy
  }
  return ok && device::synchronize(context, "uploading the arguments", error);
}

/// Brings the fed-back state of a GPU step to the host (a checkpoint, the
/// end of a run); the device buffers stay.
bool downloadState(const RunContext &cx, DeviceState &state,
                   std::vector<Bytes> &fed, std::string &error) {
  if (!state.hostStale)
    return true;
  for (size_t i = 0; i < state.fed.size(); ++i) {
    if (!state.fed[i].ptr)
      continue;
    Bytes host(size_t(state.fed[i].bytes));
    if (!host.empty() &&
        fsdprt_gpu_copy_to_host(host.data(), state.fed[i].ptr,
                                state.fed[i].bytes) != FSDPRT_OK) {
      error = "cannot download '" + cx.prog.args[i].name +
              "': " + fsdprt_gpu_last_error_message();
      return false;
    }
    fed[i] = std::move(host);
  }
  state.hostStale = false;
  return true;
}

/// collectResults for a GPU step: what the outputs need is downloaded, the
/// updates stay on the device as the next step's arguments.
bool collectDeviceResults(const RunContext &cx, RankCall &call, bool last,
                          DeviceState &state, RankOutcome &out) {
  const Program &prog = cx.prog;
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const Output &o = cx.outputs[k];
    if (!o.stacked && !(last && o.arg < 0))
      continue;
    Bytes v;
    if (!call.deviceResult(prog, size_t(o.result), v, out.error))
      return false;
    if (o.stacked)
      out.pieces[k].insert(out.pieces[k].end(), v.begin(), v.end());
    else
      out.pieces[k] = std::move(v);
  }
  if (prog.training())
    for (size_t i = 0; i < prog.results.size(); ++i)
      if (prog.results[i].updateOf) {
        const device::Buffer &slot =
            state.fed[size_t(*prog.results[i].updateOf)];
        if (!call.copyResultTo(prog, i, slot, out.error))
          return false;
        state.hostStale = true;
      }
  call.releaseDevice();
  return true;
}

/// Keeps what the outputs need of a step's results and feeds the updates
/// back.
void collectResults(const RunContext &cx, RankCall &call, bool last,
                    int64_t rank, std::vector<Bytes> &fed, RankOutcome &out) {
  const Program &prog = cx.prog;
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const Output &o = cx.outputs[k];
    if (o.stacked) {
      Bytes v;
      call.result(prog, size_t(o.result), v);
      out.pieces[k].insert(out.pieces[k].end(), v.begin(), v.end());
    } else if (last && o.arg < 0) {
      bool place = cx.placed && !(*cx.placed)[k].empty();
      bool toFile = cx.files && cx.files->has(k);
      if (toFile && isPrimaryReplica(*o.port, rank))
        call.writeResult(prog, size_t(o.result), rank, *cx.files, k);
      else if (place && isPrimaryReplica(*o.port, rank))
        call.placeResult(prog, size_t(o.result), rank, (*cx.placed)[k]);
      else
        call.result(prog, size_t(o.result), out.pieces[k]);
    }
  }
  // Into last step's buffers (bindArguments), which no result can alias.
  if (prog.training())
    for (size_t i = 0; i < prog.results.size(); ++i)
      if (prog.results[i].updateOf)
        call.result(prog, i, fed[*prog.results[i].updateOf]);
  call.releaseResults();
}

/// Page faults (minor and major) the calling thread has taken.
int64_t threadFaults() {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0)
    return 0;
  return int64_t(u.ru_minflt) + int64_t(u.ru_majflt);
}

/// The CUDA graph of a compute=gpu run (RunOptions::cudaGraphs). The first
/// step runs as compiled (it loads the kernels, creates the cuBLAS handle
/// and the scratch buffer, checks the collectives against the peers); the
/// second runs as compiled too, watched for what a capture forbids (device
/// allocations, host waits); the third is captured into a graph, which is
/// launched for it and every later step.
struct StepGraph {
  enum class Phase { Off, Warmup, Probe, Capture, Replay };
  Phase phase = Phase::Off;
  fsdprt_gpu_graph_t *exec = nullptr;
  std::vector<int64_t> results; // the captured call's result descriptors
  std::string note;             // RunResult::cudaGraph
  StepGraph() = default;
  StepGraph(const StepGraph &) = delete;
  StepGraph &operator=(const StepGraph &) = delete;
  ~StepGraph() { fsdprt_gpu_graph_destroy(exec); }
};

/// Runs the step's host code (or its graph): captured into `graph.exec`
/// and launched in the capture phase, launched alone in the replay phase.
bool enqueueStep(const RunContext &cx, fsdprt_gpu_context_t *context,
                 RankCall &call, StepGraph &graph, RankOutcome &out) {
  using Phase = StepGraph::Phase;
  auto failed = [&](const std::string &what) {
    out.error = what + ": " + fsdprt_gpu_context_error_message(context);
    return false;
  };
  if (graph.phase == Phase::Replay) {
    call.setResultWords(graph.results);
    call.called = true;
    if (fsdprt_gpu_graph_launch(graph.exec) != FSDPRT_OK)
      return failed("replaying the step's CUDA graph");
    return true;
  }
  bool capture = graph.phase == Phase::Capture;
  if (capture && fsdprt_gpu_capture_begin(context) != FSDPRT_OK)
    return failed("capturing the step into a CUDA graph");
  Error err = call.invoke(cx.code, cx.prog.symbol);
  if (capture) {
    fsdprt_status_t st = fsdprt_gpu_capture_end(context, &graph.exec);
    if (!err && st != FSDPRT_OK)
      return failed("capturing the step into a CUDA graph");
  }
  if (err) {
    out.error = toString(std::move(err));
    return false;
  }
  call.called = true;
  if (capture) {
    graph.results = call.resultWords();
    if (fsdprt_gpu_graph_launch(graph.exec) != FSDPRT_OK)
      return failed("launching the step's CUDA graph");
  }
  return true;
}

/// One call of the step: its time (until its device work is done), page
/// faults and exposed communication (fsdprt_stats_t::exposed_ns); false
/// with `out.error` set when it failed.
bool callStep(const RunContext &cx, fsdprt_comm_t *comm, RankCall &call,
              StepGraph &graph, double &seconds, int64_t &faults,
              double &exposed, RankOutcome &out) {
  fsdprt_stats_t stats0, stats1;
  fsdprt_comm_get_stats(comm, &stats0);
  fsdprt_gpu_context_t *context =
      cx.prog.gpu ? fsdprt_nccl_comm_context(comm) : nullptr;
  fsdprt_gpu_stats_t device0{}, device1{};
  if (context)
    fsdprt_gpu_context_stats(context, &device0);
  int64_t faults0 = threadFaults();
  auto t0 = std::chrono::steady_clock::now();
  if (!context) {
    if (Error err = call.invoke(cx.code, cx.prog.symbol)) {
      out.error = toString(std::move(err));
      return false;
    }
    call.called = true;
  } else if (!enqueueStep(cx, context, call, graph, out)) {
    return false;
  }
  if (context && graph.phase == StepGraph::Phase::Probe) {
    // What the step's host code did besides enqueueing device work.
    fsdprt_gpu_context_stats(context, &device1);
    uint64_t allocations = device1.allocations - device0.allocations;
    uint64_t waits = device1.host_waits - device0.host_waits;
    if (allocations == 0 && waits == 0) {
      graph.phase = StepGraph::Phase::Capture;
    } else {
      graph.phase = StepGraph::Phase::Off;
      graph.note = "off: the step allocated device memory " +
                   std::to_string(allocations) +
                   " times and waited on the "
                   "host " +
                   std::to_string(waits) +
                   " times (a captured step must do neither)";
    }
  }
  // The step only enqueues its device work: its time is until it is done.
  if (fsdprt_gpu_context_t *context = fsdprt_nccl_comm_context(comm);
      cx.prog.gpu &&
      !device::synchronize(context, "the step failed on the GPU", out.error))
    return false;
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
  faults = threadFaults() - faults0;
  // After the synchronization: a GPU step's timed waits have all passed.
  fsdprt_comm_get_stats(comm, &stats1);
  exposed = double(stats1.exposed_ns - stats0.exposed_ns) * 1e-9;
  if (fsdprt_comm_error(comm) != FSDPRT_OK) {
    out.error = fsdprt_comm_error_message(comm);
    return false;
  }
  return true;
}

/// Reserves the step's planned arena on this rank's thread (which touches
/// its pages first) before the first step -- for a compute=gpu step the
/// rank's device arena (`context`) --; when a rank cannot, every rank stops
/// there, before any collective of the step.
bool reserveArena(const RunContext &cx, fsdprt_comm_t *comm,
                  fsdprt_gpu_context_t *context, fsdprt_comm_t *runner,
                  double &seconds, std::string &error) {
  const std::optional<MemoryPlan> &plan = cx.prog.plan;
  if (!plan || plan->arenaBytes == 0)
    return true;
  bool ok;
  std::string why;
  auto start = std::chrono::steady_clock::now();
  if (context) {
    ok = fsdprt_gpu_arena(plan->arenaBytes) != nullptr;
    if (!ok)
      why = fsdprt_gpu_context_error_message(context);
  } else {
    fsdprt_status_t st = fsdprt_arena_reserve(comm, plan->arenaBytes);
    ok = st == FSDPRT_OK;
    if (!ok)
      why = fsdprt_status_string(st);
  }
  seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!ok) {
    error = "cannot allocate the arena of '" + cx.prog.entry +
            "': " + std::to_string(plan->arenaBytes) + " bytes for " +
            std::to_string(plan->buffers) + " planned buffers (largest:";
    for (int64_t bytes : plan->largest)
      error += " " + std::to_string(bytes);
    error += " bytes): " + why;
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
      outs.push_back({&r, int64_t(i), -1, training && r.rank() == 0});
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

std::string onRank(int64_t rank, const std::string &message) {
  std::string prefix = "rank " + std::to_string(rank) + ": ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message
                                                        : prefix + message;
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
             int64_t rank, std::vector<Bytes> &fed, std::vector<Bytes> &kept,
             RankOutcome &out) {
  fsdprt_set_thread_comm(comm);
  const Program &prog = cx.prog;
  const RunOptions &opt = cx.options;
  bool training = prog.training();
  bool gpu = prog.gpu.has_value();
  fsdprt_gpu_context_t *context =
      gpu ? fsdprt_nccl_comm_context(comm) : nullptr;
  DeviceState state;
  state.fed.assign(prog.args.size(), {});
  state.inputs.assign(prog.args.size(), {});
  int64_t total = training ? opt.steps : opt.warmup + opt.steps;
  out.pieces.assign(cx.outputs.size(), {});
  out.gpu = gpu;
  if (!reserveArena(cx, comm, context, runner, out.arenaSeconds, out.error))
    total = 0;
  StepGraph graph;
  if (gpu && !opt.cudaGraphs)
    graph.note = "off: disabled";
  else if (gpu && total < 3)
    graph.note = "off: fewer than 3 steps (the third is the one captured)";
  else if (gpu)
    graph.phase = StepGraph::Phase::Warmup;
  // The rank's argument buffers, reused by every step; those kept from
  // run to run swapped in (and back out at the end).
  std::vector<Bytes> args(prog.args.size());
  std::vector<bool> holds(prog.args.size(), false);
  kept.resize(prog.args.size());
  for (size_t i = 0; cx.keep && i < prog.args.size(); ++i)
    if ((*cx.keep)[i]) {
      args[i].swap(kept[i]);
      holds[i] = (*cx.kept)[i];
    }
  for (int64_t s = 0; s < total; ++s) {
    int64_t g = cx.firstStep + s;
    if (!bindArguments(cx, runner, rank, g, fed, args, holds, out))
      break;
    std::vector<device::Buffer> deviceArgs;
    // A rank that cannot upload its arguments stops every rank before the
    // step's collectives.
    if (gpu && !agree(runner,
                      uploadArguments(cx, context, args, fed, state, deviceArgs,
                                      out.error),
                      "step " + std::to_string(g) + " arguments", out.error))
      break;
    // Every step gets its arguments afresh (copied again into the rank's
    // host buffers, or uploaded again into its device buffers): a step may
    // update its arguments in place. Only the call is timed.
    RankCall call =
        gpu ? RankCall(prog, std::move(deviceArgs)) : RankCall(prog, args);
    double seconds = 0, exposed = 0;
    int64_t faults = 0;
    StepGraph::Phase phase = graph.phase;
    if (!callStep(cx, comm, call, graph, seconds, faults, exposed, out)) {
      out.stateLost = true;
      break;
    }
    // (The probe step itself decides between Capture and Off.)
    if (phase == StepGraph::Phase::Warmup)
      graph.phase = StepGraph::Phase::Probe;
    else if (phase == StepGraph::Phase::Capture)
      graph.phase = StepGraph::Phase::Replay;
    out.stepsDone = s + 1;
    if (training || s >= opt.warmup) {
      out.stepSeconds.push_back(seconds);
      out.stepFaults.push_back(faults);
      out.stepExposed.push_back(exposed);
    }
    bool last = s + 1 == total;
    if (!gpu) {
      collectResults(cx, call, last, rank, fed, out);
    } else if (!collectDeviceResults(cx, call, last, state, out)) {
      out.stateLost = true;
      break;
    }
    // The first step checked every collective against its peers.
    if (gpu && s == 0 && !std::getenv("FSDPRT_NCCL_DESYNC_CHECKS"))
      fsdprt_nccl_comm_set_desync_checks(comm, 0);
    if (training && cx.liveSteps && rank == 0 && opt.onStep)
      reportStep(cx, out, g + 1);
    out.heldAfterStep =
        std::max(out.heldAfterStep, memory::current().liveBytes);
    if (opt.measureResidentSet && rank == 0)
      out.rss.push_back(residentBytes());
    bool due = opt.saveEvery > 0 && (g + 1) % opt.saveEvery == 0;
    bool save = training && !opt.saveDir.empty() && (due || last);
    if (save && gpu && !downloadState(cx, state, fed, out.error)) {
      out.stateLost = true;
      break;
    }
    if (save && !saveCheckpoint(cx, runner, fed, rank, g + 1, out.error))
      break;
  }
  if (graph.phase == StepGraph::Phase::Replay)
    graph.note = "replayed: step " + std::to_string(cx.firstStep + 3) +
                 " captured, " + std::to_string(out.stepsDone - 2) +
                 (out.stepsDone == 3 ? " step" : " steps") +
                 " launched from the graph";
  out.cudaGraph = graph.note;
  for (size_t i = 0; cx.keep && i < prog.args.size(); ++i)
    if ((*cx.keep)[i])
      kept[i].swap(args[i]);
  // The state the session keeps, and the outputs, are host copies.
  if (gpu && !out.stateLost && !downloadState(cx, state, fed, out.error))
    out.stateLost = true;
  for (size_t k = 0; k < cx.outputs.size() && out.error.empty(); ++k)
    if (cx.outputs[k].arg >= 0)
      out.pieces[k] = fed[cx.outputs[k].arg];
  out.memory = memory::current();
  if (gpu)
    fsdprt_gpu_context_stats(context, &out.device);
  out.arenaBytes = gpu ? 0 : fsdprt_arena_bytes(comm);
  fsdprt_comm_get_stats(comm, &out.stats);
}

} // namespace fsdp::run

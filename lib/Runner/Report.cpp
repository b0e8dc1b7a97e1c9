//===- Report.cpp - what a run reports: JSON, .npy files ------------------===//

#include "Files.h"
#include "Json.h"
#include "Npy.h"
#include "RankRun.h"
#include "fsdp/Runner/Runner.h"

#include <algorithm>
#include <cmath>

namespace fsdp::run {

namespace {

template <typename T> json::Array listOf(const std::vector<T> &values) {
  json::Array a;
  for (const T &v : values)
    a.push_back(v);
  return a;
}

Error writeArray(const std::string &path, const HostArray &h,
                 const Bytes &data) {
  std::string error;
  if (!npy::write(path, h.dtype, h.shape, data.data(), data.size(), error))
    return makeError(error);
  return Error::success();
}

} // namespace

CommStats commStats(const fsdprt_stats_t &s) {
  CommStats c;
  c.collectives = s.total_calls;
  c.allGathers = s.calls[FSDPRT_KIND_ALL_GATHER];
  c.reduceScatters = s.calls[FSDPRT_KIND_REDUCE_SCATTER];
  c.allReduces = s.calls[FSDPRT_KIND_ALL_REDUCE];
  c.bytesSent = s.total_bytes_sent;
  c.bytesReceived = s.total_bytes_received;
  return c;
}

double HostArray::scalarAt(size_t i) const {
  if (dtype == "<f8")
    return reinterpret_cast<const double *>(data.data())[i];
  if (dtype == "<f4")
    return reinterpret_cast<const float *>(data.data())[i];
  return std::nan("");
}

const HostArray *RunResult::output(std::string_view name) const {
  for (const HostArray &a : outputs)
    if (a.name == name)
      return &a;
  return nullptr;
}

static double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double RunResult::medianStepSeconds() const { return median(stepSeconds); }

double RunResult::medianExposedSeconds() const {
  return median(stepExposedSeconds);
}

double RunResult::minStepSeconds() const {
  return stepSeconds.empty()
             ? 0
             : *std::min_element(stepSeconds.begin(), stepSeconds.end());
}

static json::Object reportObject(const RunResult &r) {
  json::Object o{{"parse_s", r.parseSeconds},
                 {"jit_s", r.jitSeconds},
                 {"jit_cached", r.jitCached},
                 {"precompiled", r.precompiled}};
  if (!r.jitPhases.empty()) {
    json::Object phases;
    for (const auto &[name, seconds] : r.jitPhases)
      phases[name] = seconds;
    o["jit_phases_s"] = std::move(phases);
  }
  std::vector<int64_t> peaks, held, allocs, arenas, measured;
  for (const RankMemory &m : r.memory) {
    peaks.push_back(m.peakBytes);
    held.push_back(m.heldAfterStepBytes);
    allocs.push_back(m.allocations);
    arenas.push_back(m.arenaBytes);
    measured.push_back(m.measuredPeakBytes());
  }
  if (!r.blas.empty())
    o["blas"] = r.blas;
  if (!r.blasCore.empty())
    o["blas_core"] = r.blasCore;
  if (!r.blasDetectedCore.empty())
    o["blas_detected_core"] = r.blasDetectedCore;
  o["warmup"] = r.warmup;
  o["steps"] = int64_t(r.stepSeconds.size());
  o["step_median_s"] = r.medianStepSeconds();
  o["step_min_s"] = r.minStepSeconds();
  o["step_s"] = listOf(r.stepSeconds);
  o["step_page_faults"] = listOf(r.stepPageFaults);
  o["input_slices"] = r.inputSlices;
  o["arena_reserve_s"] = r.arenaSeconds;
  o["step_exposed_comm_s"] = listOf(r.stepExposedSeconds);
  o["exposed_comm_median_s"] = r.medianExposedSeconds();
  o["training"] = r.training;
  o["jit_peak_bytes"] = listOf(peaks);
  o["jit_held_after_step_bytes"] = listOf(held);
  o["jit_allocations"] = listOf(allocs);
  o["jit_arena_bytes"] = listOf(arenas);
  o["measured_peak_bytes"] = listOf(measured);
  if (r.plan.planned)
    o["plan"] = json::Object{{"arena_bytes", r.plan.arenaBytes},
                             {"outside_bytes", r.plan.outsideBytes},
                             {"peak_bytes", r.plan.peakBytes()},
                             {"buffers", r.plan.buffers}};
  o["rss_bytes"] = listOf(r.residentBytes);
  // Collectives and bytes of each rank (MPI: rank 0's only).
  json::Array comm;
  for (const CommStats &s : r.stats)
    comm.push_back(json::Object{{"calls", s.collectives},
                                {"all_gathers", s.allGathers},
                                {"reduce_scatters", s.reduceScatters},
                                {"all_reduces", s.allReduces},
                                {"bytes_sent", s.bytesSent},
                                {"bytes_received", s.bytesReceived}});
  o["comm"] = std::move(comm);
  // A GPU step: the jit_* counters above are the host's (nothing there);
  // these are the device's.
  o["gpu"] = r.gpu;
  if (r.gpu) {
    std::vector<int64_t> devices, bytes, peaks, launches, gemms, allocations,
        arenas, graphLaunches;
    for (const RankMemory &m : r.memory) {
      devices.push_back(m.device);
      bytes.push_back(m.deviceAllocatedBytes);
      peaks.push_back(m.devicePeakBytes);
      launches.push_back(m.deviceLaunches);
      gemms.push_back(m.deviceGemms);
      allocations.push_back(m.deviceAllocations);
      arenas.push_back(m.deviceArenaBytes);
      graphLaunches.push_back(m.deviceGraphLaunches);
    }
    o["devices"] = listOf(devices);
    o["device_allocated_bytes"] = listOf(bytes);
    o["device_peak_bytes"] = listOf(peaks);
    o["device_launches"] = listOf(launches);
    o["device_gemms"] = listOf(gemms);
    o["device_allocations"] = listOf(allocations);
    o["device_arena_bytes"] = listOf(arenas);
    o["device_graph_launches"] = listOf(graphLaunches);
    o["cuda_graph"] = r.cudaGraph;
  }
  // The per-step scalars of a training run (the loss, ...).
  for (const HostArray &a : r.outputs) {
    if (!a.perStep)
      continue;
    std::vector<double> values;
    for (int64_t s = 0; s < a.shape[0]; ++s)
      values.push_back(a.scalarAt(size_t(s)));
    o[json::fixUTF8(a.name)] = listOf(values);
  }
  return o;
}

std::string toJSON(const RunResult &r, int indent) {
  return json::write(reportObject(r), indent);
}

Error writeOutputs(const RunResult &result, const std::string &dir) {
  if (std::error_code ec = files::createDirectories(dir))
    return makeError("cannot create " + dir + ": " + ec.message());
  for (const HostArray &h : result.outputs) {
    for (size_t r = 0; r < h.perRank.size(); ++r)
      if (Error e = writeArray(dir + "/" + h.name + ".rank" +
                                   std::to_string(r) + ".npy",
                               h, h.perRank[r]))
        return e;
    std::string path = dir + "/" + h.name + ".npy";
    if (path == h.writtenTo)
      continue;
    if (Error e = writeArray(path, h, h.data))
      return e;
  }
  return Error::success();
}

} // namespace fsdp::run

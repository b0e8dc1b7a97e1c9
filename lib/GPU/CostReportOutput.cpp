//===- CostReportOutput.cpp - the cost report's totals, text and JSON -----===//
//
// What fsdp-gpu-cost-report prints for one function on one GPU: every
// device operation with its count and cost, the largest sinks, and the
// totals (launches, gemms, copies, allocations, synchronizations,
// collectives, bytes, FLOPs, the estimate and the ideal), as text or JSON.
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <vector>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpucost;

Totals gpucost::totalsOf(const Sites &sites, const Trace &trace,
                         const GpuCeilings &g) {
  Totals t;
  t.timeline = timelineOf(trace, sites, g);
  for (const auto &[op, site] : sites) {
    const OpCost &c = site.cost;
    double n = site.count;
    t.bytes += n * c.bytes;
    t.flops += n * c.flops;
    t.seconds += n * c.seconds;
    t.idealSeconds += n * c.idealSeconds;
    t.secondsByKind[c.kind] += n * c.seconds;
    if (c.syncs)
      t.syncs += n;
    switch (c.kind) {
    case Kind::Launch:
      t.launches += n * c.launches;
      break;
    case Kind::Gemm:
      t.gemms += n;
      t.launches += n * c.launches; // a split gemm's reduction kernel
      (c.f32Gemm ? t.f32Gemms : t.bf16Gemms) += n;
      t.gemmFlops += n * c.flops;
      t.idealBf16Seconds += n * c.flops / (kIdealFlopFraction * g.bf16Peak);
      continue;
    case Kind::Memcpy:
      t.memcpys += n;
      t.memcpyBytes += n * c.copyBytes;
      if (c.hostCopy)
        t.hostCopies += n;
      break;
    case Kind::Memset:
      t.memsets += n;
      break;
    case Kind::Alloc:
      t.allocs += n;
      t.allocBytes += n * c.allocBytes;
      break;
    case Kind::Free:
      t.frees += n;
      break;
    case Kind::Sync:
      break;
    case Kind::Collective:
      t.collectives += n;
      t.collectiveBytes += n * c.bytes;
      break;
    }
    t.idealBf16Seconds += n * c.idealSeconds;
  }
  return t;
}

static std::string locationOf(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Location loc = op->getLoc();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << llvm::sys::path::filename(file.getFilename().getValue()) << ":"
       << file.getLine();
  else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      if (auto file = dyn_cast<FileLineColLoc>(inner)) {
        os << llvm::sys::path::filename(file.getFilename().getValue()) << ":"
           << file.getLine();
        break;
      }
  }
  return text;
}

void gpucost::printText(llvm::raw_ostream &os, StringRef function,
                        const Sites &sites, const Totals &t,
                        const GpuCeilings &g, bool listOps, int64_t top) {
  os << "gpu cost report: @" << function << " on " << g.key << " (" << g.name
     << ")\n";
  std::vector<const Site *> order;
  for (const auto &[op, site] : sites)
    order.push_back(&site);
  auto line = [&](const Site &s) {
    const OpCost &c = s.cost;
    os << "  " << kindName(c.kind) << " " << c.name << " x"
       << llvm::format("%.0f", s.count) << ": " << llvm::format("%.0f", c.bytes)
       << " B, " << llvm::format("%.0f", c.flops) << " FLOP, "
       << formatSeconds(c.seconds) << " each, "
       << formatSeconds(s.count * c.seconds) << " total";
    if (c.issueSeconds > 0)
      os << ", host issue " << formatSeconds(c.issueSeconds) << " each";
    if (!c.why.empty())
      os << " (" << c.why << ")";
    std::string loc = locationOf(s.op);
    if (!loc.empty())
      os << " at " << loc;
    os << "\n";
  };
  if (listOps) {
    os << "operations (in the order the step first runs them):\n";
    for (const Site *s : order)
      line(*s);
  }
  std::vector<const Site *> largest = order;
  llvm::stable_sort(largest, [](const Site *a, const Site *b) {
    return a->count * a->cost.seconds > b->count * b->cost.seconds;
  });
  if (largest.size() > size_t(std::max<int64_t>(0, top)))
    largest.resize(std::max<int64_t>(0, top));
  if (!largest.empty()) {
    os << "largest:\n";
    for (const Site *s : largest) {
      os << llvm::format(
          "  %5.1f%% ",
          t.seconds > 0 ? 100 * s->count * s->cost.seconds / t.seconds : 0.0);
      line(*s);
    }
  }
  auto n = [](double x) { return llvm::format("%.0f", x); };
  os << "launches: " << n(t.launches) << "\n";
  os << "gemm calls: " << n(t.gemms) << " (f32 " << n(t.f32Gemms) << ", bf16 "
     << n(t.bf16Gemms) << ")\n";
  os << "memcpys: " << n(t.memcpys) << " (" << n(t.memcpyBytes) << " B, "
     << formatBytes(t.memcpyBytes) << "; " << n(t.hostCopies)
     << " host copies)\n";
  os << "memsets: " << n(t.memsets) << "\n";
  os << "device allocations: " << n(t.allocs) << " (" << n(t.allocBytes)
     << " B, " << formatBytes(t.allocBytes) << "), frees: " << n(t.frees)
     << "\n";
  os << "host synchronizations: " << n(t.syncs) << "\n";
  os << "collectives: " << n(t.collectives) << " (" << n(t.collectiveBytes)
     << " B)\n";
  os << "bytes: " << n(t.bytes) << " (" << formatBytes(t.bytes) << ")\n";
  os << "flops: " << n(t.flops) << " (" << llvm::format("%.3f", t.flops / 1e12)
     << " TFLOP, gemms " << llvm::format("%.3f", t.gemmFlops / 1e12) << ")\n";
  os << "time by kind:";
  for (auto [kind, seconds] : t.secondsByKind)
    os << " " << kindName(kind) << " " << llvm::format("%.3f", seconds * 1e3)
       << " ms;";
  os << "\n";
  const Timeline &tl = t.timeline;
  os << "device work: " << formatSeconds(t.seconds) << "\n";
  os << "host issue: " << formatSeconds(tl.hostIssueSeconds) << "\n";
  os << "streamed (first steps): " << formatSeconds(tl.streamedSeconds)
     << " (device gaps " << formatSeconds(tl.streamedGapSeconds)
     << ", the device waiting for the host "
     << formatSeconds(tl.hostBoundSeconds) << ")\n";
  os << "graph replay: ";
  if (t.capturable())
    os << formatSeconds(tl.graphSeconds) << " (device gaps "
       << formatSeconds(tl.graphGapSeconds) << ", the graph launch "
       << formatSeconds(g.graphLaunchS) << ")\n";
  else
    os << "none (a step that allocates device memory or synchronizes the "
          "host is not captured)\n";
  os << "ideal with bf16 contractions: "
     << llvm::format("%.3f", t.idealBf16Seconds * 1e3) << " ms\n";
  os << "estimate: " << llvm::format("%.3f", t.estimateSeconds() * 1e3) << " ms"
     << (t.capturable() ? " (graph replay)" : " (streamed)") << "\n";
  os << "ideal: " << llvm::format("%.3f", t.idealSeconds * 1e3) << " ms\n";
}

void gpucost::writeJson(llvm::json::OStream &j, StringRef function,
                        const Sites &sites, const Totals &t) {
  j.object([&] {
    j.attribute("function", function);
    j.attributeArray("operations", [&] {
      for (const auto &[op, s] : sites)
        j.object([&] {
          j.attribute("kind", kindName(s.cost.kind));
          j.attribute("name", s.cost.name);
          j.attribute("count", s.count);
          j.attribute("bytes", s.cost.bytes);
          j.attribute("flops", s.cost.flops);
          j.attribute("seconds", s.cost.seconds);
          j.attribute("issue_seconds", s.cost.issueSeconds);
          j.attribute("gap_seconds", s.cost.gapSeconds);
          j.attribute("graph_gap_seconds", s.cost.graphGapSeconds);
          j.attribute("ideal_seconds", s.cost.idealSeconds);
          j.attribute("why", s.cost.why);
          j.attribute("location", locationOf(op));
        });
    });
    j.attribute("launches", t.launches);
    j.attribute("gemm_calls", t.gemms);
    j.attribute("f32_gemm_calls", t.f32Gemms);
    j.attribute("bf16_gemm_calls", t.bf16Gemms);
    j.attribute("memcpys", t.memcpys);
    j.attribute("memcpy_bytes", t.memcpyBytes);
    j.attribute("host_copies", t.hostCopies);
    j.attribute("memsets", t.memsets);
    j.attribute("device_allocations", t.allocs);
    j.attribute("device_allocation_bytes", t.allocBytes);
    j.attribute("device_frees", t.frees);
    j.attribute("host_synchronizations", t.syncs);
    j.attribute("collectives", t.collectives);
    j.attribute("collective_bytes", t.collectiveBytes);
    j.attribute("bytes", t.bytes);
    j.attribute("flops", t.flops);
    j.attribute("gemm_flops", t.gemmFlops);
    j.attributeObject("ms_by_kind", [&] {
      for (auto [kind, seconds] : t.secondsByKind)
        j.attribute(kindName(kind), seconds * 1e3);
    });
    j.attribute("ideal_bf16_ms", t.idealBf16Seconds * 1e3);
    j.attribute("device_ms", t.seconds * 1e3);
    j.attribute("host_issue_ms", t.timeline.hostIssueSeconds * 1e3);
    j.attribute("streamed_ms", t.timeline.streamedSeconds * 1e3);
    j.attribute("streamed_gap_ms", t.timeline.streamedGapSeconds * 1e3);
    j.attribute("host_bound_ms", t.timeline.hostBoundSeconds * 1e3);
    j.attribute("capturable", t.capturable());
    j.attribute("graph_ms", t.timeline.graphSeconds * 1e3);
    j.attribute("graph_gap_ms", t.timeline.graphGapSeconds * 1e3);
    j.attribute("estimate_ms", t.estimateSeconds() * 1e3);
    j.attribute("ideal_ms", t.idealSeconds * 1e3);
  });
}

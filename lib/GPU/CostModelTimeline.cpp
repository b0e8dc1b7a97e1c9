//===- CostModelTimeline.cpp - the step on the host's and device's clocks -===//
//
// fsdp-gpu-cost-report's step time from its device operations in the order
// the step runs them (docs/GPU.md, "Cost model"). Streamed, as the first
// steps run: the host issues each call (its issue cost) and runs ahead of
// the device; the device starts a node once the previous one has ended and
// its gap has passed, and not before the host has issued it; a host
// synchronization makes the host wait for the device. Replayed from a CUDA
// graph, as every later step of a capturable step runs: one graph launch,
// then the nodes back to back, each after its graph gap.
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpucost;

namespace {

/// Loop iterations run one by one; later ones repeat the last one's
/// advance (every clock and sum moves by the same amount each iteration
/// once the pattern settles).
constexpr double kExactIterations = 3;

/// The streamed timeline's state.
struct Clocks {
  double host = 0, device = 0;
  double issue = 0, gaps = 0, hostBound = 0;

  Clocks operator-(const Clocks &o) const {
    return {host - o.host, device - o.device, issue - o.issue, gaps - o.gaps,
            hostBound - o.hostBound};
  }
  void advance(const Clocks &d, double times) {
    host += times * d.host;
    device += times * d.device;
    issue += times * d.issue;
    gaps += times * d.gaps;
    hostBound += times * d.hostBound;
  }
};

struct Streamed {
  const Sites &sites;
  const GpuCeilings &g;
  Clocks c;

  /// One execution of an operation: each of its nodes issued by the host,
  /// then started by the device once the host has issued it and the
  /// device's gap after the previous node has passed.
  void run(const OpCost &cost) {
    double nodes = std::max(1.0, std::round(cost.nodes));
    if (cost.nodes <= 0) {
      c.host += cost.issueSeconds;
      c.issue += cost.issueSeconds;
    } else {
      double issue = cost.issueSeconds / nodes, gap = cost.gapSeconds / nodes,
             work = cost.seconds / nodes;
      for (double i = 0; i < nodes; ++i) {
        c.host += issue;
        c.issue += issue;
        double ready = c.device + gap;
        c.gaps += gap;
        double start = std::max(ready, c.host);
        c.hostBound += start - ready;
        c.device = start + work;
      }
    }
    // A synchronization (a blocking wait or collective) or a copy into
    // pageable host memory: the host waits until the device is done.
    if (cost.syncs || cost.hostCopy)
      c.host = std::max(c.host, c.device) + (cost.syncs ? g.syncS : 0);
  }

  void walk(const Trace &trace) {
    for (const TraceItem &item : trace) {
      if (item.op) {
        run(sites.find(item.op)->second.cost);
        continue;
      }
      double exact = std::min(item.trips, kExactIterations);
      Clocks last;
      for (double i = 0; i < exact; ++i) {
        Clocks before = c;
        walk(item.body);
        last = c - before;
      }
      if (item.trips > exact)
        c.advance(last, item.trips - exact);
    }
  }
};

} // namespace

Timeline gpucost::timelineOf(const Trace &trace, const Sites &sites,
                             const GpuCeilings &g) {
  Timeline t;
  Streamed s{sites, g, {}};
  s.walk(trace);
  t.streamedSeconds = std::max(s.c.host, s.c.device);
  t.hostIssueSeconds = s.c.issue;
  t.streamedGapSeconds = s.c.gaps;
  t.hostBoundSeconds = s.c.hostBound;
  // Replayed: nothing waits for the host; each node runs after its gap.
  t.graphSeconds = g.graphLaunchS;
  for (const auto &[op, site] : sites) {
    t.graphGapSeconds += site.count * site.cost.graphGapSeconds;
    t.graphSeconds +=
        site.count * (site.cost.graphGapSeconds + site.cost.seconds);
  }
  return t;
}

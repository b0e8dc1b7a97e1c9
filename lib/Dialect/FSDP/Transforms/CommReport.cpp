//===- CommReport.cpp - collectives, bytes, padding and peak memory -------===//
//
// A static account of what every rank of a function's mesh communicates, so
// that bucketing and scheduling choices can be compared without running the
// program: collectives by kind, bytes sent and received, the zero padding of
// the parameter slots, and the peak bytes of gathered parameters alive at
// once. The byte counts follow the runtime's own statistics
// (`fsdp-run --print-comm-stats`).
//
//===----------------------------------------------------------------------===//

#include "ReportUtils.h"
#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCOMMREPORT
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;
using mlir::fsdp::detail::addSlotPadding;
using mlir::fsdp::detail::bytesOf;
using mlir::fsdp::detail::openReport;
using mlir::fsdp::detail::ReportMesh;
using mlir::fsdp::detail::writePerRankJson;

namespace {

using mlir::fsdp::detail::derivesGathered;

enum Kind { AllGather, ReduceScatter, AllReduce, NumKinds };
constexpr const char *kKindNames[NumKinds] = {"all_gather", "reduce_scatter",
                                              "all_reduce"};

/// A collective as one rank sees it: what it sends and what it receives.
/// Quantized gathers are counted by addQuantizedGather.
struct Collective {
  Kind kind;
  Value input, output;
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
};

std::optional<Collective> asCollective(Operation *op) {
  auto c = dyn_cast<CollectiveOpInterface>(op);
  if (!c)
    return std::nullopt;
  Kind kind;
  switch (c.getCollectiveKind()) {
  case CollectiveKind::all_gather:
    kind = AllGather;
    break;
  case CollectiveKind::reduce_scatter:
    kind = ReduceScatter;
    break;
  case CollectiveKind::all_reduce:
    kind = AllReduce;
    break;
  case CollectiveKind::quantized_all_gather:
    return std::nullopt;
  }
  return Collective{kind, c.getCollectiveInput(), c.getCollectiveOutput(),
                    c.getMeshAttr(), c.getAxes()};
}

struct Counts {
  int64_t count = 0, sent = 0, received = 0;
};

struct FunctionReport {
  std::string name;
  ReportMesh mesh;
  Counts kinds[NumKinds];
  Counts total;
  /// Of the total, the collectives over tensor-parallel axes only (the
  /// all-reduces fsdp-tensor-parallel inserts); shown when the function
  /// has a tensor-parallel axis; and per kind.
  Counts tensorParallel;
  Counts tensorParallelKinds[NumKinds];
  bool hasTensorParallelAxis = false;
  int64_t peakBytes = 0, peakBuffers = 0;
  std::vector<int64_t> padding; // per rank
};

/// Peak bytes of gathered tensors alive at once over the entry block: a
/// gathered buffer is alive from its (start) op to the last op that uses it
/// or a value derived from it.
std::pair<int64_t, int64_t> peakLiveGathered(Block &block) {
  DenseMap<Operation *, int64_t> index;
  for (Operation &op : block)
    index[&op] = index.size();
  int64_t n = index.size();
  std::vector<int64_t> bytesDelta(n + 1, 0), buffersDelta(n + 1, 0);
  block.walk([&](Operation *op) {
    // Tensor gathers only: a buffer gather's output is an operand.
    auto c = dyn_cast<CollectiveOpInterface>(op);
    if (!c || c.isOnBuffers() ||
        (c.getCollectiveKind() != CollectiveKind::all_gather &&
         c.getCollectiveKind() != CollectiveKind::quantized_all_gather))
      return;
    Operation *top = block.findAncestorOpInBlock(*op);
    Value gathered = c.getCollectiveOutput();
    int64_t begin = index.lookup(top), end = begin;
    SmallVector<Value> worklist = {gathered};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      for (Operation *user : v.getUsers()) {
        if (Operation *userTop = block.findAncestorOpInBlock(*user))
          end = std::max(end, index.lookup(userTop));
        if (derivesGathered(user))
          llvm::append_range(worklist, user->getResults());
      }
    }
    int64_t bytes = bytesOf(gathered.getType());
    bytesDelta[begin] += bytes;
    bytesDelta[end + 1] -= bytes;
    buffersDelta[begin] += 1;
    buffersDelta[end + 1] -= 1;
  });
  int64_t live = 0, buffers = 0, peak = 0, peakBuffers = 0;
  for (int64_t i = 0; i < n; ++i) {
    live += bytesDelta[i];
    buffers += buffersDelta[i];
    if (live > peak) {
      peak = live;
      peakBuffers = buffers;
    }
  }
  return {peak, peakBuffers};
}

/// A quantized gather counted as the runtime runs it
/// (fsdprt_jit_quantized_all_gather): an all-gather of every rank's packed
/// shard (the format's wire bytes) after a 4-byte amax all-reduce for the
/// per-tensor formats and NVFP4, tensor-parallel when its axes are all
/// in `tpAxes` (a quantized sequence-parallel gather). False if `op` is
/// not one.
bool addQuantizedGather(Operation *op, FunctionReport &report,
                        SymbolTableCollection &tables,
                        const llvm::StringSet<> &tpAxes) {
  QuantFormat format;
  ArrayRef<int64_t> shape;
  if (auto q = dyn_cast<QuantizedAllGatherOp>(op)) {
    format = q.getFormat();
    shape = q.getShape();
  } else if (auto q = dyn_cast<BufferQuantizedAllGatherOp>(op)) {
    format = q.getFormat();
    shape = q.getShape();
  } else {
    return false;
  }
  FailureOr<int64_t> k = cast<CollectiveOpInterface>(op).getGroupSize(tables);
  if (failed(k) || shape.size() != 2)
    return true; // the verifier reports it
  int64_t wire = quantWireBytes(format, shape[0], shape[1]);
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  bool tensorParallel =
      axes && !axes.empty() && llvm::all_of(axes, [&](Attribute a) {
        auto name = dyn_cast<StringAttr>(a);
        return name && tpAxes.contains(name.getValue());
      });
  auto add = [&](Kind kind, int64_t sent, int64_t received) {
    SmallVector<Counts *, 4> all = {&report.kinds[kind], &report.total};
    if (tensorParallel)
      all.append({&report.tensorParallelKinds[kind], &report.tensorParallel});
    for (Counts *counts : all) {
      counts->count += 1;
      counts->sent += sent;
      counts->received += received;
    }
  };
  if (needsGroupAmax(format))
    add(AllReduce, 4, 4);
  add(AllGather, wire, *k * wire);
  return true;
}

FunctionReport analyze(func::FuncOp func, SymbolTableCollection &tables) {
  FunctionReport report;
  report.name = func.getName().str();
  // The mesh: the parameters' one, else the first collective's.
  MeshOp funcMesh;
  for (unsigned i = 0; i < func.getNumArguments() && !funcMesh; ++i)
    if (auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName))
      funcMesh = lookupMesh(func, layout.getMesh(), &tables);
  // The tensor-parallel axes, by name, from the parameters' layouts.
  llvm::StringSet<> tpAxes;
  for (unsigned i = 0; i < func.getNumArguments() && funcMesh; ++i)
    if (auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName))
      for (int64_t a :
           lm::tensorParallelAxes(layout.toLayout(funcMesh.getAxisSizes())))
        tpAxes.insert(cast<StringAttr>(funcMesh.getAxisNames()[a]).getValue());
  report.hasTensorParallelAxis = !tpAxes.empty();
  func.walk([&](Operation *op) {
    if (addQuantizedGather(op, report, tables, tpAxes))
      return;
    std::optional<Collective> c = asCollective(op);
    if (!c)
      return;
    if (!funcMesh && c->mesh)
      funcMesh = lookupMesh(op, c->mesh, &tables);
    Counts &k = report.kinds[c->kind];
    int64_t sent = bytesOf(c->input.getType());
    int64_t received = bytesOf(c->output.getType());
    bool tensorParallel =
        c->axes && !c->axes.empty() && llvm::all_of(c->axes, [&](Attribute a) {
          auto name = dyn_cast<StringAttr>(a);
          return name && tpAxes.contains(name.getValue());
        });
    for (Counts *counts : {&k, &report.total}) {
      counts->count += 1;
      counts->sent += sent;
      counts->received += received;
    }
    if (tensorParallel) {
      for (Counts *counts :
           {&report.tensorParallelKinds[c->kind], &report.tensorParallel}) {
        counts->count += 1;
        counts->sent += sent;
        counts->received += received;
      }
    }
  });
  report.mesh = ReportMesh::of(funcMesh);
  report.padding.assign(report.mesh.ranks, 0);

  // Padding: slot minus true shard of every sharded parameter, per rank.
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    addSlotPadding(func, i, tables, report.padding);

  std::tie(report.peakBytes, report.peakBuffers) =
      peakLiveGathered(func.getBody().front());
  return report;
}

void printCounts(llvm::raw_ostream &os, const FunctionReport &r) {
  os << r.total.count << " collectives (";
  for (int k = 0; k < NumKinds; ++k)
    os << (k ? ", " : "") << kKindNames[k] << " " << r.kinds[k].count;
  os << "), sent " << r.total.sent << " B, received " << r.total.received
     << " B";
}

void printText(llvm::raw_ostream &os, ArrayRef<FunctionReport> reports) {
  for (const FunctionReport &r : reports) {
    os << "@" << r.name << ": ";
    r.mesh.print(os);
    os << "\n";
    os << "  every rank: ";
    printCounts(os, r);
    os << "\n";
    for (int k = 0; k < NumKinds; ++k)
      os << "    " << kKindNames[k] << ": " << r.kinds[k].count << ", sent "
         << r.kinds[k].sent << " B, received " << r.kinds[k].received << " B\n";
    if (r.hasTensorParallelAxis) {
      os << "    of which tensor-parallel: " << r.tensorParallel.count
         << ", sent " << r.tensorParallel.sent << " B, received "
         << r.tensorParallel.received << " B\n";
      for (int k = 0; k < NumKinds; ++k)
        os << "      " << kKindNames[k] << ": "
           << r.tensorParallelKinds[k].count << ", sent "
           << r.tensorParallelKinds[k].sent << " B, received "
           << r.tensorParallelKinds[k].received << " B\n";
    }
    os << "  peak live gathered: " << r.peakBytes << " B (" << r.peakBuffers
       << " buffer" << (r.peakBuffers == 1 ? "" : "s") << ")\n";
    for (int64_t rank = 0; rank < r.mesh.ranks; ++rank) {
      os << "  rank " << rank << ": ";
      printCounts(os, r);
      os << ", padding " << r.padding[rank] << " B\n";
    }
  }
}

void printJson(llvm::raw_ostream &os, ArrayRef<FunctionReport> reports) {
  llvm::json::OStream j(os, /*IndentSize=*/2);
  auto fields = [&](const Counts &c) {
    j.attribute("count", c.count);
    j.attribute("bytes_sent", c.sent);
    j.attribute("bytes_received", c.received);
  };
  auto counts = [&](const Counts &c) { j.object([&] { fields(c); }); };
  j.object([&] {
    j.attributeArray("functions", [&] {
      for (const FunctionReport &r : reports)
        j.object([&] {
          j.attribute("name", r.name);
          r.mesh.writeJson(j);
          j.attributeObject("collectives", [&] {
            for (int k = 0; k < NumKinds; ++k) {
              j.attributeBegin(kKindNames[k]);
              counts(r.kinds[k]);
              j.attributeEnd();
            }
          });
          j.attributeBegin("total");
          counts(r.total);
          j.attributeEnd();
          if (r.hasTensorParallelAxis) {
            j.attributeObject("tensor_parallel", [&] {
              fields(r.tensorParallel);
              j.attributeObject("collectives", [&] {
                for (int k = 0; k < NumKinds; ++k) {
                  j.attributeBegin(kKindNames[k]);
                  counts(r.tensorParallelKinds[k]);
                  j.attributeEnd();
                }
              });
            });
          }
          j.attribute("peak_live_gathered_bytes", r.peakBytes);
          j.attribute("peak_live_gathered_buffers", r.peakBuffers);
          writePerRankJson(j, r.mesh.ranks, r.padding, [&] {
            j.attribute("collectives", r.total.count);
            j.attribute("bytes_sent", r.total.sent);
            j.attribute("bytes_received", r.total.received);
          });
        });
    });
  });
  os << "\n";
}

struct CommReportPass
    : public mlir::fsdp::impl::FSDPCommReportBase<CommReportPass> {
  using Base::Base;

  void runOnOperation() override {
    auto out = openReport(getOperation(), outputFile);
    if (!out)
      return signalPassFailure();
    SymbolTableCollection tables;
    std::vector<FunctionReport> reports;
    getOperation().walk([&](func::FuncOp func) {
      if (!func.isExternal())
        reports.push_back(analyze(func, tables));
    });
    if (format == ReportFormat::json)
      printJson(out->os(), reports);
    else
      printText(out->os(), reports);
    out->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace

//===- MemoryReport.cpp - static peak memory per rank, by kind ------------===//
//
// A static account of what one rank holds while its step runs, from the
// liveness of the partitioned tensor program: parameter shards, gathered
// parameters, activations kept for the backward, gradients, optimizer state,
// inputs and temporaries. Sibling of fsdp-comm-report; the runtime measures
// the same step's allocation high-water mark.
//
//===----------------------------------------------------------------------===//

#include "ReportUtils.h"
#include "TransformUtils.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMEMORYREPORT
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

enum Kind {
  ParamShards,
  Gathered,
  Activations,
  Gradients,
  OptimizerState,
  Inputs,
  Temporaries,
  NumKinds
};
constexpr const char *kKindNames[NumKinds] = {
    "parameter shards", "gathered parameters", "activations",
    "gradients",        "optimizer state",     "inputs",
    "temporaries"};
constexpr const char *kKindKeys[NumKinds] = {
    "parameter_shards", "gathered_parameters", "activations",
    "gradients",        "optimizer_state",     "inputs",
    "temporaries"};

/// Ops whose result is a view of their first operand (no new bytes).
bool isView(Operation *op) {
  return isa<WaitOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ReshapeOp, tensor::CastOp, tensor::ExtractSliceOp>(op);
}

/// Ops that only move or convert data on its way to or from a collective
/// (packs and unpacks).
bool isRearrange(Operation *op) {
  return isView(op) || derivesGathered(op) ||
         isa<tensor::PadOp, tensor::EmptyOp, linalg::FillOp, linalg::CopyOp>(
             op);
}

bool isGather(Operation *op) {
  auto c = dyn_cast<CollectiveOpInterface>(op);
  return c && !c.isOnBuffers() &&
         (c.getCollectiveKind() == CollectiveKind::all_gather ||
          c.getCollectiveKind() == CollectiveKind::quantized_all_gather);
}

/// A gradient collective: a reduce-scatter or an all-reduce the passes
/// created for a gradient (it has an origin; the loss's has none).
bool isGradientCollective(Operation *op) {
  auto c = dyn_cast<CollectiveOpInterface>(op);
  return c && !c.isOnBuffers() && op->hasAttr(kOriginAttrName) &&
         (c.getCollectiveKind() == CollectiveKind::reduce_scatter ||
          c.getCollectiveKind() == CollectiveKind::all_reduce);
}

struct Buffer {
  int64_t bytes = 0;
  int64_t begin = 0, end = 0;
  Kind kind = Temporaries;
  SmallVector<Value, 2> values; // the values sharing it, definition first
};

struct FunctionReport {
  std::string name;
  ReportMesh mesh;
  int64_t peak[NumKinds] = {};
  int64_t total = 0;
  int64_t atTotal[NumKinds] = {};
  int64_t peakOp = -1;
  std::string peakOpName;
  std::vector<int64_t> padding; // per rank, in the parameter shards
};

class Analysis {
public:
  Analysis(func::FuncOp func, SymbolTableCollection &tables)
      : func(func), tables(tables), body(func.getBody().front()) {}

  FunctionReport run() {
    FunctionReport report;
    report.name = func.getName().str();
    for (Operation &op : body)
      index[&op] = numOps++;
    findForward();
    buildBuffers();
    classify();
    measure(report);
    describeMesh(report);
    return report;
  }

private:
  func::FuncOp func;
  SymbolTableCollection &tables;
  Block &body;
  DenseMap<Operation *, int64_t> index;
  int64_t numOps = 0;
  llvm::SetVector<Operation *> forward;
  std::vector<Buffer> buffers;
  DenseMap<Value, int64_t> bufferOf;

  Operation *top(Operation *op) { return body.findAncestorOpInBlock(*op); }

  void findForward() {
    auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
    if (!ret)
      return;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      if (!func.getResultAttr(i, kLossAttrName))
        continue;
      if (Operation *def = ret.getOperand(i).getDefiningOp()) {
        BackwardSliceOptions options;
        options.inclusive = true;
        options.omitUsesFromAbove = false;
        (void)getBackwardSlice(def, &forward, options);
      }
    }
  }

  bool isForward(Operation *op) {
    Operation *t = top(op);
    return t && forward.contains(t);
  }

  int64_t newBuffer(Value v, int64_t begin) {
    Buffer b;
    // An empty tensor holds no data (each op writing into it gets its own
    // buffer); constants are static data, not allocations.
    Operation *def = v.getDefiningOp();
    bool noData = def && (isa<tensor::EmptyOp>(def) ||
                          def->hasTrait<OpTrait::ConstantLike>());
    b.bytes = noData ? 0 : bytesOf(v.getType());
    b.begin = begin;
    b.end = begin;
    b.values.push_back(v);
    buffers.push_back(std::move(b));
    bufferOf[v] = buffers.size() - 1;
    return buffers.size() - 1;
  }

  void share(Value v, int64_t buffer) {
    bufferOf[v] = buffer;
    buffers[buffer].values.push_back(v);
  }

  /// The last top-level position at which `v` is used (-1: unused).
  int64_t lastUse(Value v) {
    int64_t last = -1;
    for (Operation *user : v.getUsers())
      if (Operation *t = top(user))
        last = std::max(last, index.lookup(t));
    return last;
  }

  void buildBuffers() {
    for (BlockArgument arg : body.getArguments())
      if (isa<RankedTensorType>(arg.getType())) {
        int64_t b = newBuffer(arg, 0);
        buffers[b].end = numOps;
      }
    for (Operation &op : body) {
      int64_t at = index.lookup(&op);
      auto dps = dyn_cast<DestinationStyleOpInterface>(&op);
      for (OpResult result : op.getResults()) {
        if (!isa<RankedTensorType>(result.getType()))
          continue;
        std::optional<int64_t> shared;
        if (isView(&op)) {
          // The wait hands over the started collective's tensor.
          Value source = isa<WaitOp>(op) ? cast<WaitOp>(op).getPending()
                                         : op.getOperand(0);
          auto it = bufferOf.find(source);
          if (it != bufferOf.end())
            shared = it->second;
        } else if (dps && dps.hasPureTensorSemantics()) {
          // Written in place into its init when nothing reads the init
          // later (what one-shot bufferization does); never into an
          // argument or an empty tensor (a new buffer).
          Value init = dps.getTiedOpOperand(result)->get();
          auto it = bufferOf.find(init);
          if (it != bufferOf.end() && !isa<BlockArgument>(init) &&
              !isa_and_nonnull<tensor::EmptyOp>(init.getDefiningOp()) &&
              bytesOf(init.getType()) == bytesOf(result.getType()) &&
              lastUse(init) <= at &&
              !isa<BlockArgument>(buffers[it->second].values.front()))
            shared = it->second;
        }
        if (shared)
          share(result, *shared);
        else
          newBuffer(result, at);
      }
    }
    // Each buffer lives to the last use of any of its values; returned
    // values to the end.
    for (Buffer &b : buffers)
      for (Value v : b.values)
        for (Operation *user : v.getUsers()) {
          Operation *t = top(user);
          if (!t)
            continue;
          b.end = std::max(b.end,
                           isa<func::ReturnOp>(t) ? numOps : index.lookup(t));
        }
  }

  Kind argumentKind(unsigned i) {
    if (func.getArgAttr(i, kStateOfAttrName) ||
        func.getArgAttr(i, kOptimAttrName))
      return OptimizerState;
    if (func.getArgAttr(i, kAccumulatorAttrName))
      return Gradients;
    if (func.getArgAttr(i, kLayoutAttrName))
      return ParamShards;
    return Inputs;
  }

  bool hasKind(Value v, Kind kind) {
    auto it = bufferOf.find(v);
    return it != bufferOf.end() && buffers[it->second].kind == kind;
  }

  void setKind(Value v, Kind kind) {
    auto it = bufferOf.find(v);
    if (it != bufferOf.end() && buffers[it->second].kind == Temporaries)
      buffers[it->second].kind = kind;
  }

  /// The buffers a value was packed from: back through rearranging ops to
  /// the computed values.
  void markPackedFrom(Value v, Kind kind) {
    SmallVector<Value> worklist = {v};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value x = worklist.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      setKind(x, kind);
      Operation *def = x.getDefiningOp();
      if (def && isRearrange(def))
        for (Value operand : def->getOperands())
          if (isa<RankedTensorType>(operand.getType()))
            worklist.push_back(operand);
    }
  }

  void classify() {
    for (BlockArgument arg : body.getArguments())
      if (bufferOf.count(arg))
        buffers[bufferOf[arg]].kind = argumentKind(arg.getArgNumber());
    // Returned results: updated parameters and state, gradients.
    if (auto ret = dyn_cast<func::ReturnOp>(body.getTerminator()))
      for (unsigned r = 0; r < func.getNumResults(); ++r) {
        Value v = ret.getOperand(r);
        if (auto of =
                func.getResultAttrOfType<IntegerAttr>(r, kUpdateOfAttrName)) {
          int64_t arg = of.getInt();
          if (arg >= 0 && arg < func.getNumArguments())
            setKind(v, argumentKind(arg));
        } else if (func.getResultAttr(r, kGradOfAttrName)) {
          setKind(v, Gradients);
        }
      }
    classifyByFlow();
    classifyActivations();
  }

  /// Gathered parameters and gradients, through the collectives and what
  /// derives from their results alone.
  void classifyByFlow() {
    // Program order: an op's operands are classified before its results.
    for (Operation &op : body) {
      if (isGather(&op)) {
        auto c = cast<CollectiveOpInterface>(&op);
        setKind(c.getCollectiveOutput(), Gathered);
        markPackedFrom(c.getCollectiveInput(), Gathered);
        continue;
      }
      if (isGradientCollective(&op)) {
        auto c = cast<CollectiveOpInterface>(&op);
        setKind(c.getCollectiveOutput(), Gradients);
        markPackedFrom(c.getCollectiveInput(), Gradients);
        continue;
      }
      // Unpacking a gathered parameter; values computed from gradients
      // only (scales, casts, splits of a bucket).
      bool anyTensor = false, allGathered = true, allGradients = true;
      for (Value operand : op.getOperands()) {
        if (!isa<RankedTensorType>(operand.getType()) ||
            isa_and_nonnull<tensor::EmptyOp>(operand.getDefiningOp()))
          continue;
        anyTensor = true;
        allGathered &= hasKind(operand, Gathered);
        allGradients &= hasKind(operand, Gradients);
      }
      if (anyTensor && allGathered && derivesGathered(&op)) {
        for (Value r : op.getResults())
          setKind(r, Gathered);
        continue;
      }
      if (anyTensor && allGradients) {
        for (Value r : op.getResults())
          setKind(r, Gradients);
        continue;
      }
    }
  }

  /// Activations: what the forward computes for the backward, and what the
  /// backward recomputes.
  void classifyActivations() {
    for (Operation &op : body) {
      bool recomputed = op.hasAttr(kRecomputeAttrName);
      if (!recomputed && !forward.contains(&op))
        continue;
      for (Value r : op.getResults()) {
        auto it = bufferOf.find(r);
        if (it == bufferOf.end())
          continue;
        bool kept = recomputed;
        for (Value v : buffers[it->second].values)
          for (Operation *user : v.getUsers()) {
            Operation *t = top(user);
            if (t && !isa<func::ReturnOp>(t) && !forward.contains(t))
              kept = true;
          }
        if (kept)
          setKind(r, Activations);
      }
    }
  }

  void measure(FunctionReport &report) {
    int64_t n = numOps + 1;
    std::vector<std::array<int64_t, NumKinds>> delta(
        n + 1, std::array<int64_t, NumKinds>{});
    for (const Buffer &b : buffers) {
      delta[b.begin][b.kind] += b.bytes;
      delta[b.end + 1][b.kind] -= b.bytes;
    }
    std::array<int64_t, NumKinds> live{};
    for (int64_t i = 0; i < n; ++i) {
      int64_t total = 0;
      for (int k = 0; k < NumKinds; ++k) {
        live[k] += delta[i][k];
        report.peak[k] = std::max(report.peak[k], live[k]);
        total += live[k];
      }
      if (total > report.total) {
        report.total = total;
        std::copy(live.begin(), live.end(), report.atTotal);
        report.peakOp = i;
      }
    }
    if (report.peakOp >= 0) {
      Operation *op = nullptr;
      for (auto [o, i] : index)
        if (i == report.peakOp)
          op = o;
      report.peakOpName =
          op ? op->getName().getStringRef().str() : std::string("return");
    }
  }

  void describeMesh(FunctionReport &report) {
    MeshOp mesh;
    for (unsigned i = 0; i < func.getNumArguments() && !mesh; ++i)
      if (auto layout = func.getArgAttrOfType<LayoutAttr>(i, kLayoutAttrName))
        mesh = lookupMesh(func, layout.getMesh(), &tables);
    report.mesh = ReportMesh::of(mesh);
    report.padding.assign(report.mesh.ranks, 0);
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (argumentKind(i) == ParamShards)
        addSlotPadding(func, i, tables, report.padding);
  }
};

void printText(llvm::raw_ostream &os, ArrayRef<FunctionReport> reports) {
  for (const FunctionReport &r : reports) {
    os << "@" << r.name << ": ";
    r.mesh.print(os);
    os << "\n";
    os << "  every rank, peak of each kind:\n";
    for (int k = 0; k < NumKinds; ++k)
      os << "    " << kKindNames[k] << ": " << r.peak[k] << " B\n";
    os << "  peak total: " << r.total << " B";
    if (r.peakOp >= 0)
      os << " (at op #" << r.peakOp << ", " << r.peakOpName << ")";
    os << "\n";
    for (int k = 0; k < NumKinds; ++k)
      os << "    " << kKindNames[k] << ": " << r.atTotal[k] << " B\n";
    for (int64_t rank = 0; rank < r.mesh.ranks; ++rank)
      os << "  rank " << rank << ": peak total " << r.total
         << " B, parameter shards " << r.peak[ParamShards] << " B (padding "
         << r.padding[rank] << " B)\n";
  }
}

void printJson(llvm::raw_ostream &os, ArrayRef<FunctionReport> reports) {
  llvm::json::OStream j(os, /*IndentSize=*/2);
  auto kinds = [&](const int64_t *bytes) {
    j.object([&] {
      for (int k = 0; k < NumKinds; ++k)
        j.attribute(kKindKeys[k], bytes[k]);
    });
  };
  j.object([&] {
    j.attributeArray("functions", [&] {
      for (const FunctionReport &r : reports)
        j.object([&] {
          j.attribute("name", r.name);
          r.mesh.writeJson(j);
          j.attributeBegin("peak_bytes");
          kinds(r.peak);
          j.attributeEnd();
          j.attribute("peak_total_bytes", r.total);
          j.attribute("peak_total_op", r.peakOp);
          j.attributeBegin("at_peak_total_bytes");
          kinds(r.atTotal);
          j.attributeEnd();
          writePerRankJson(j, r.mesh.ranks, r.padding, [&] {
            j.attribute("peak_total_bytes", r.total);
            j.attributeBegin("peak_bytes");
            kinds(r.peak);
            j.attributeEnd();
          });
        });
    });
  });
  os << "\n";
}

struct MemoryReportPass
    : public mlir::fsdp::impl::FSDPMemoryReportBase<MemoryReportPass> {
  using Base::Base;

  void runOnOperation() override {
    auto out = openReport(getOperation(), outputFile);
    if (!out)
      return signalPassFailure();
    SymbolTableCollection tables;
    std::vector<FunctionReport> reports;
    WalkResult walk = getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return WalkResult::advance();
      if (!func.getBody().hasOneBlock()) {
        func.emitError() << "fsdp-memory-report needs a function body with "
                            "a single block; this one has "
                         << func.getBody().getBlocks().size() << " blocks";
        return WalkResult::interrupt();
      }
      reports.push_back(Analysis(func, tables).run());
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (format == ReportFormat::json)
      printJson(out->os(), reports);
    else
      printText(out->os(), reports);
    out->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace

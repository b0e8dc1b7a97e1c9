//===- GpuCostReport.cpp - a compute=gpu step's time on a named GPU -------===//
//
// A static cost model of a lowered GPU step, at the stage where every device
// operation is explicit (after fsdp-gpu-stream-order): kernel launches with
// their grid, block and body, cuBLAS calls with m, n, k and batch, device
// copies, allocations, host synchronizations and collectives. Each gets a
// time on a GPU from one table of ceilings; the sum is the estimate, and the
// ideal is what the step's contractions and bytes would take at 70% of the
// GPU's dense peak and 80% of its memory bandwidth. The rules are in
// docs/GPU.md ("Cost model"); they are deliberately few, so that every
// line of the report can be explained by hand.
//
// This file walks the step's host code and prints one report per function
// and GPU; the ceilings, the costs and the report's text are in
// CostModel*.cpp and CostReportOutput.cpp (CostModel.h).
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <optional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUCOSTREPORT
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpucost;

namespace {

struct FSDPGpuCostReportPass
    : public mlir::fsdp::impl::FSDPGpuCostReportBase<FSDPGpuCostReportPass> {
  using Base::Base;

  /// The GPU, the module's settings and the warnings given.
  CostContext ctx;
  /// Per report: the sites in the order the step first runs them.
  Sites sites;
  /// Per report: the order in which the step runs the sites, and where
  /// the walk appends (the step's trace or a host loop's body).
  Trace trace;
  Trace *tail = &trace;
  /// The functions being walked (the call stack).
  SmallVector<func::FuncOp> stack;

  void add(Operation *op, double count, const OpCost &cost) {
    auto [it, inserted] = sites.try_emplace(op, Site{op, cost, 0});
    it->second.count += count;
    tail->push_back(TraceItem{op, 1, {}});
  }

  //--- walking the host code ---------------------------------------------

  /// Adds `op` if it is a device operation of the gpu dialect; false for
  /// other ops.
  bool addDeviceOp(Operation &op, double count) {
    if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
      if (sites.count(&op))
        add(&op, count, sites[&op].cost);
      else if (std::optional<OpCost> c = costLaunch(ctx, launch))
        add(&op, count, *c);
      return true;
    }
    if (isa<gpu::LaunchOp>(op)) {
      ctx.warnOnce(&op, "cannot cost a gpu.launch that is not outlined; run "
                        "the report after gpu-kernel-outlining");
      return true;
    }
    if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
      if (std::optional<OpCost> c = costMemcpy(ctx, copy))
        add(&op, count, *c);
      return true;
    }
    if (auto set = dyn_cast<gpu::MemsetOp>(op)) {
      if (std::optional<OpCost> c = costMemset(ctx, set))
        add(&op, count, *c);
      return true;
    }
    if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
      addAlloc(alloc, count);
      return true;
    }
    if (isa<gpu::DeallocOp>(op)) {
      OpCost c;
      c.kind = Kind::Free;
      c.name = "gpu.dealloc";
      c.issueSeconds = ctx.g->freeS;
      c.why = "stream-ordered free";
      add(&op, count, c);
      return true;
    }
    if (auto wait = dyn_cast<gpu::WaitOp>(op)) {
      // `gpu.wait async` only starts a chain; the blocking form waits.
      if (!wait.getAsyncToken())
        add(&op, count, costSync(ctx, "gpu.wait"));
      return true;
    }
    return false;
  }

  void addAlloc(gpu::AllocOp alloc, double count) {
    std::optional<double> bytes = memrefBytes(alloc.getType());
    if (!bytes) {
      ctx.warnOnce(alloc, "cannot cost a dynamically shaped allocation");
      return;
    }
    OpCost c;
    c.kind = Kind::Alloc;
    c.name = "gpu.alloc";
    c.allocBytes = *bytes;
    c.issueSeconds = ctx.g->allocS;
    c.why = "stream-ordered pool allocation";
    add(alloc, count, c);
  }

  /// A host loop: its body times its constant trip count.
  void walkHostLoop(scf::ForOp loop, double count) {
    std::optional<int64_t> lb = constantInt(loop.getLowerBound());
    std::optional<int64_t> ub = constantInt(loop.getUpperBound());
    std::optional<int64_t> step = constantInt(loop.getStep());
    double trips = 1;
    if (lb && ub && step && *step > 0)
      trips = std::max<int64_t>(0, (*ub - *lb + *step - 1) / *step);
    else if (containsDeviceWork(loop))
      ctx.warnOnce(loop, "host loop without constant bounds around device "
                         "operations; costed as run once");
    // The body's trace is the loop's, run `trips` times.
    Trace *outer = tail;
    outer->push_back(TraceItem{nullptr, trips, {}});
    tail = &outer->back().body;
    walkHostBlock(*loop.getBody(), count * trips);
    tail = outer;
  }

  void walkHostBlock(Block &block, double count) {
    for (Operation &op : block) {
      if (addDeviceOp(op, count))
        continue;
      if (auto call = dyn_cast<func::CallOp>(op)) {
        walkCall(call, count);
        continue;
      }
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        walkHostLoop(loop, count);
        continue;
      }
      if (isa<linalg::LinalgOp>(op)) {
        ctx.warnOnce(&op, "cannot cost a linalg op left in host code");
        continue;
      }
      if (isa<scf::WhileOp>(op) && containsDeviceWork(&op))
        ctx.warnOnce(&op, "host while loop around device operations; costed "
                          "as run once");
      for (Region &region : op.getRegions())
        for (Block &inner : region)
          walkHostBlock(inner, count);
    }
  }

  static bool containsDeviceWork(Operation *root) {
    bool found = false;
    root->walk([&](Operation *op) {
      if (isa<gpu::LaunchFuncOp, gpu::MemcpyOp, func::CallOp>(op))
        found = true;
    });
    return found;
  }

  void walkCall(func::CallOp call, double count) {
    StringRef callee = call.getCallee();
    auto fn = ctx.symbols->lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (fn && !fn.isExternal()) {
      if (llvm::is_contained(stack, fn)) {
        ctx.warnOnce(call, "recursive call; not followed");
        return;
      }
      stack.push_back(fn);
      walkHostBlock(fn.getBody().front(), count);
      for (Block &b : llvm::drop_begin(fn.getBody().getBlocks()))
        walkHostBlock(b, count);
      stack.pop_back();
      return;
    }
    if (callee == "fsdprt_gpu_gemm_f32" || callee == "fsdprt_gpu_gemm_bf16" ||
        callee == "fsdprt_gpu_gemm_bf16_f32") {
      // bf16_f32: bf16 operands on the tensor cores, an f32 C.
      if (std::optional<OpCost> c =
              costGemm(ctx, call, callee != "fsdprt_gpu_gemm_f32",
                       callee == "fsdprt_gpu_gemm_bf16_f32"))
        add(call, count, *c);
      return;
    }
    if (callee.starts_with("fsdprt_gpu_attention_fwd_") ||
        callee.starts_with("fsdprt_gpu_attention_bwd_")) {
      if (std::optional<OpCost> c = costAttention(
              ctx, call, callee.contains("_bwd_"), callee.ends_with("_bf16")))
        add(call, count, *c);
      return;
    }
    if (callee == "fsdprt_gpu_scatter_add_rows_f32" ||
        callee == "fsdprt_gpu_scatter_add_rows_bf16") {
      if (std::optional<OpCost> c =
              costScatter(ctx, call, callee.ends_with("bf16") ? 2 : 4))
        add(call, count, *c);
      return;
    }
    if (callee == "fsdprt_gpu_grouped_matmul_f32" ||
        callee == "fsdprt_gpu_grouped_matmul_bf16") {
      if (std::optional<OpCost> c =
              costGroupedMatmul(ctx, call, callee.ends_with("bf16")))
        add(call, count, *c);
      return;
    }
    if (callee == "mgpuStreamSynchronize" || callee == "mgpuEventSynchronize") {
      add(call, count, costSync(ctx, callee));
      return;
    }
    StringRef kind = callee;
    if (kind.consume_front("fsdprt_jit_")) {
      bool started = kind.consume_back("_start");
      // A member layout moves the same bytes as the plain collective.
      bool members = kind.consume_back("_members");
      if (kind == "all_gather" || kind == "reduce_scatter" ||
          (kind == "all_reduce" && !members)) {
        if (std::optional<OpCost> c = costCollective(ctx, call, kind, !started))
          add(call, count, *c);
        return;
      }
      // A wait orders the compute stream after a started collective: no
      // host wait on a GPU backend.
      if (kind == "wait")
        return;
    }
    // The rank's device arena and scratch buffer are allocated on the first
    // step and reused: nothing per step. A guard checks a host value.
    if (callee == "fsdprt_gpu_arena" || callee == "fsdprt_gpu_scratch" ||
        callee == "fsdprt_jit_guard")
      return;
    if (callee.starts_with("fsdprt_") || callee.starts_with("mgpu"))
      ctx.warnOnce(call, "cannot cost a call of @" + callee);
  }

  //--- the report ------------------------------------------------------

  //--- the reports -------------------------------------------------------

  /// The GPUs `gpu=` names; failure (with an error) for an unknown one or
  /// none.
  LogicalResult parseGpus(ModuleOp module,
                          SmallVectorImpl<const GpuCeilings *> &gpus) {
    SmallVector<StringRef> names;
    StringRef(gpuName).split(names, ',', -1, /*KeepEmpty=*/false);
    for (StringRef name : names) {
      const GpuCeilings *found = lookupGpu(name.trim());
      if (!found) {
        std::string known;
        for (const GpuCeilings &c : knownGpus())
          known += (known.empty() ? "" : ", ") + std::string(c.key);
        return module.emitError()
               << "fsdp-gpu-cost-report: unknown GPU '" << name.trim()
               << "' (known: " << known << ")";
      }
      gpus.push_back(found);
    }
    if (gpus.empty())
      return module.emitError()
             << "fsdp-gpu-cost-report: no GPU named (gpu=h200, "
                "or several: gpu=h100,h200)";
    return success();
  }

  /// The step: every host function with a body that no call reaches.
  static SmallVector<func::FuncOp> stepRoots(ModuleOp module) {
    DenseSet<StringRef> called;
    module.walk([&](func::CallOp call) { called.insert(call.getCallee()); });
    SmallVector<func::FuncOp> roots;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && !called.contains(fn.getSymName()))
        roots.push_back(fn);
    return roots;
  }

  /// One report per root on the GPU in `ctx` (into `j` when JSON).
  void reportOn(ArrayRef<func::FuncOp> roots, llvm::raw_ostream &os,
                std::optional<llvm::json::OStream> &j) {
    const GpuCeilings *g = ctx.g;
    if (j) {
      j->objectBegin();
      j->attribute("gpu", g->key);
      j->attribute("gpu_name", g->name);
      j->attributeBegin("functions");
      j->arrayBegin();
    }
    for (func::FuncOp root : roots) {
      sites.clear();
      trace.clear();
      tail = &trace;
      stack.assign({root});
      for (Block &b : root.getBody())
        walkHostBlock(b, 1.0);
      if (sites.empty() && roots.size() > 1)
        continue;
      Totals t = totalsOf(sites, trace, *g);
      if (j)
        writeJson(*j, root.getSymName(), sites, t);
      else
        printText(os, root.getSymName(), sites, t, *g, listOps, top);
    }
    if (j) {
      j->arrayEnd();
      j->attributeEnd();
      j->objectEnd();
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<const GpuCeilings *> gpus;
    if (failed(parseGpus(module, gpus)))
      return signalPassFailure();
    ctx.tf32 = module->hasAttr("fsdp.gpu_tf32");
    ctx.ranks = ranks;
    SymbolTableCollection tables;
    ctx.symbols = &tables;
    auto meshes = module.getOps<MeshOp>();
    ctx.mesh = meshes.empty() ? MeshOp() : *meshes.begin();
    SmallVector<func::FuncOp> roots = stepRoots(module);

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> out =
        openOutputFile(outputFile, &error);
    if (!out) {
      module.emitError() << "cannot open report file: " << error;
      return signalPassFailure();
    }
    llvm::raw_ostream &os = out->os();
    std::optional<llvm::json::OStream> j;
    if (json) {
      j.emplace(os, 2);
      j->objectBegin();
      if (ranks > 0)
        j->attribute("ranks", ranks.getValue());
      j->attributeBegin("reports");
      j->arrayBegin();
    }
    for (const GpuCeilings *g : gpus) {
      ctx.g = g;
      reportOn(roots, os, j);
    }
    if (j) {
      j->arrayEnd();
      j->attributeEnd();
      j->objectEnd();
      os << "\n";
    }
    out->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace

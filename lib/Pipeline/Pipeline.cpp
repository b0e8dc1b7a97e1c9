//===- Pipeline.cpp - the fsdp pass pipeline ------------------------------===//

#include "fsdp/Pipeline/Pipeline.h"
#include "fsdp/Conversion/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
// Upstream passes by name: their textual names are the stable interface.
// The compute between collectives is outlined into deduplicated segment
// functions before bufferization, and every linalg op into a small
// deduplicated kernel function before loop lowering, so no upstream pass
// and no part of LLVM sees one function that grows with the model.
// compute=fast also folds transposes, fuses elementwise chains and turns
// contractions into BLAS calls (docs/COMPUTE.md).
// Every canonicalization runs without region simplification: the step is
// one block whose size grows with the model, and region simplification
// (dead-argument and unreachable-block elimination, block merging) walks all
// of it on every iteration for nothing to simplify (0.4 s of 2.2 s at 1,000
// parameters); op folding and dead-op erasure are unchanged.
#define FSDP_CANONICALIZE "canonicalize{region-simplify=disabled}"
constexpr const char *kLowerToLLVMHead =
    "func.func(convert-elementwise-to-linalg)";
constexpr const char *kLowerToLLVMFastTensor =
    "func.func(fsdp-fold-transposes,fsdp-fuse-elementwise," FSDP_CANONICALIZE
    ")";
// Ownership-based deallocation frees every buffer the step allocates or
// gets from a segment call in one dealloc op at the end of its block (after
// every collective's wait); results are handed to the caller, which owns
// them (fsdp-run frees them). It runs before the collectives become runtime
// calls on raw pointers, which it cannot see.
// This is upstream's buffer-deallocation-pipeline without
// buffer-deallocation-simplification: that pass compares every pair of
// memrefs of a dealloc op, and the step's last one holds every buffer the
// segments return (326 s at 300 parameters). fsdp-early-dealloc instead
// takes each buffer it can follow (an allocation, or a segment's result:
// segments return only buffers they allocate) out of those ops, walking its
// uses once, and frees it right after its last use (after the wait of a
// collective that uses it), before the ops are lowered; a step result is
// never freed. Only what it cannot follow keeps the run-time alias checks.
// Outlining comes first: the tensor-level passes after it (elementwise to
// linalg, the fast path's folding and fusion) then run on the deduplicated
// segment functions, about ten for a transformer of any depth, instead of
// on one step that grows with the model.
constexpr const char *kLowerToLLVMOutline = "fsdp-outline-segments";
constexpr const char *kLowerToLLVMBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "expand-realloc{emit-deallocs=false}," FSDP_CANONICALIZE
    ",ownership-based-buffer-deallocation," FSDP_CANONICALIZE
    ",fsdp-early-dealloc,bufferization-lower-deallocations,"
    "cse," FSDP_CANONICALIZE ","
    "convert-bufferization-to-memref,"
    "convert-fsdp-to-runtime,fsdp-outline-kernels";
constexpr const char *kLowerToLLVMFastBuffer =
    "fsdp-linalg-to-blas,fsdp-copies-to-loops,fsdp-reduction-loops,"
    "fsdp-approximate-math";
// fsdp-lower-ifs lowers the scf.if ops of the functions' bodies (one per
// run-time alias check of the step's deallocations) in linear time: the
// dialect conversion of convert-scf-to-cf moves every operation after each
// one, quadratic in the length of the step (1.7 s of 5 s at 1,000
// parameters). The dialect conversions run without pattern rollback, which
// records every change for a rollback nothing here needs.
constexpr const char *kLowerToLLVMTail =
    "func.func(convert-linalg-to-loops),"
    "arith-expand{include-bf16=true},"
    "expand-strided-metadata,lower-affine,func.func(fsdp-lower-ifs),"
    "convert-scf-to-cf{allow-pattern-rollback=false},"
    "convert-math-to-llvm,convert-math-to-libm,"
    "convert-to-llvm{allow-pattern-rollback=false},"
    "reconcile-unrealized-casts";

constexpr const char *kPipelineName = "fsdp-pipeline";
constexpr const char *kPipelineSummary =
    "Partition a training step, expand its collectives and optionally "
    "lower it to LLVM with runtime calls";
constexpr const char *kLowerName = "fsdp-lower-to-llvm";
constexpr const char *kLowerSummary =
    "Bufferize an expanded fsdp program and lower it to the LLVM dialect "
    "with fsdprt runtime calls";
} // namespace

FSDPRecomputeOptions FSDPPipelineOptions::recomputeOptions() const {
  FSDPRecomputeOptions o;
  o.units.assign(recompute.begin(), recompute.end());
  return o;
}

FSDPPartitionOptions FSDPPipelineOptions::partitionOptions() const {
  FSDPPartitionOptions o;
  o.reduceOp = reduceOp;
  o.gradScale = gradScale;
  o.paramDtype = paramDtype;
  o.reduceDtype = reduceDtype;
  o.reshardAfterForward = reshardAfterForward;
  o.allReduceLoss = allReduceLoss;
  o.unevenPolicy = unevenPolicy;
  o.accumulationSteps = accumulationSteps;
  return o;
}

FSDPQuantizeGathersOptions FSDPPipelineOptions::quantizeOptions() const {
  FSDPQuantizeGathersOptions o;
  if (const std::optional<QuantFormat> &format = quantize.getValue())
    o.format = *format;
  o.minElements = quantizeMinElements;
  o.split = quantizeSplit;
  return o;
}

FSDPBucketCollectivesOptions FSDPPipelineOptions::bucketOptions() const {
  FSDPBucketCollectivesOptions o;
  o.mode = bucket;
  o.bucketBytes = bucketBytes;
  o.alignment = bucketAlignment;
  return o;
}

FSDPScheduleOptions FSDPPipelineOptions::scheduleOptions() const {
  FSDPScheduleOptions o;
  o.prefetch = prefetch;
  o.memoryLimit = memoryLimit;
  return o;
}

FSDPOptimizerOptions FSDPPipelineOptions::optimizerOptions() const {
  FSDPOptimizerOptions o;
  o.optimizer = optimizer;
  o.momentum = momentum;
  o.dampening = dampening;
  o.nesterov = nesterov;
  o.weightDecay = weightDecay;
  o.betas.assign(betas.begin(), betas.end());
  o.eps = eps;
  o.maxGradNorm = maxGradNorm;
  o.keepGrads = keepGrads;
  return o;
}

bool FSDPPipelineOptions::wantsOptimizer() const {
  FSDPOptimizerOptions d;
  return optimizer != OptimizerKind::none || momentum != d.momentum ||
         dampening != d.dampening || nesterov != d.nesterov ||
         weightDecay != d.weightDecay || !betas.empty() || eps != d.eps ||
         maxGradNorm != d.maxGradNorm || keepGrads != d.keepGrads;
}

void mlir::fsdp::buildFSDPLowerToLLVM(OpPassManager &pm, ComputeMode compute) {
  bool fast = compute == ComputeMode::Fast;
  std::string pipeline = kLowerToLLVMOutline;
  pipeline += std::string(",") + kLowerToLLVMHead;
  if (fast)
    pipeline += std::string(",") + kLowerToLLVMFastTensor;
  pipeline += std::string(",") + kLowerToLLVMBufferize;
  if (fast)
    pipeline += std::string(",") + kLowerToLLVMFastBuffer;
  pipeline += std::string(",") + kLowerToLLVMTail;
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("fsdp: malformed built-in lowering pipeline");
}

/// The canonicalizer of FSDP_CANONICALIZE.
static std::unique_ptr<Pass> createStepCanonicalizer() {
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true); // the canonicalize pass's default
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  return createCanonicalizerPass(config);
}

void mlir::fsdp::buildFSDPPipeline(OpPassManager &pm,
                                   const FSDPPipelineOptions &o) {
  // Upstream `shard` annotations become layouts (nothing to do without them).
  pm.addPass(createFSDPImportShard());
  // Before partitioning: the recomputed forward reads the parameters in the
  // backward, so fsdp-partition gathers them there.
  if (!o.recompute.empty())
    pm.addPass(createFSDPRecompute(o.recomputeOptions()));
  pm.addPass(createFSDPPartition(o.partitionOptions()));
  pm.addNestedPass<func::FuncOp>(createFSDPExpandCollectives());
  pm.addPass(createStepCanonicalizer());
  if (o.quantize.getValue())
    pm.addNestedPass<func::FuncOp>(
        createFSDPQuantizeGathers(o.quantizeOptions()));
  pm.addNestedPass<func::FuncOp>(
      createFSDPBucketCollectives(o.bucketOptions()));
  pm.addPass(createStepCanonicalizer());
  if (o.schedule)
    pm.addNestedPass<func::FuncOp>(createFSDPSchedule(o.scheduleOptions()));
  // The update reads the reduced gradient slots, after their waits.
  if (o.wantsOptimizer())
    pm.addPass(createFSDPOptimizer(o.optimizerOptions()));
  if (o.lower)
    buildFSDPLowerToLLVM(pm, o.compute);
}

void mlir::fsdp::registerFSDPPipelines() {
  PassPipelineRegistration<FSDPPipelineOptions>(kPipelineName, kPipelineSummary,
                                                buildFSDPPipeline);
  PassPipelineRegistration<FSDPLowerToLLVMOptions>(
      kLowerName, kLowerSummary,
      [](OpPassManager &pm, const FSDPLowerToLLVMOptions &o) {
        buildFSDPLowerToLLVM(pm, o.compute);
      });
}

void mlir::fsdp::registerFSDPPassesAndPipelines() {
  registerFSDPPasses();
  registerFSDPConversionPasses();
  registerFSDPPipelines();
}

std::string mlir::fsdp::describeFSDPPassesAndPipelines() {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto line = [&](StringRef name, StringRef summary) {
    os << "  --" << name << ": " << summary << "\n";
  };
  os << "FSDP pipelines (options: --<name>=\"opt=value ...\"):\n";
  line(kPipelineName, kPipelineSummary);
  line(kLowerName, kLowerSummary);
  os << "FSDP passes:\n";
  std::unique_ptr<Pass> passes[] = {
      createFSDPLayoutReport(),      createFSDPImportShard(),
      createFSDPRecompute(),         createFSDPPartition(),
      createFSDPExpandCollectives(), createFSDPQuantizeGathers(),
      createFSDPBucketCollectives(), createFSDPSchedule(),
      createFSDPOptimizer(),         createFSDPCommReport(),
      createFSDPMemoryReport(),      createConvertFSDPToRuntime(),
      createFSDPFoldTransposes(),    createFSDPFuseElementwise(),
      createFSDPOutlineSegments(),   createFSDPOutlineKernels(),
      createFSDPLinalgToBlas(),      createFSDPEarlyDealloc(),
      createFSDPLowerIfs()};
  for (const std::unique_ptr<Pass> &pass : passes)
    line(pass->getArgument(), pass->getDescription());
  return text;
}

//===- Pipeline.cpp - the fsdp pass pipeline ------------------------------===//

#include "fsdp/Pipeline/Pipeline.h"
#include "fsdp/Compute/ExpertPasses.h"
#include "fsdp/Compute/Passes.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/GPU/Passes.h"
#include "fsdp/Memory/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
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

FSDPTensorParallelOptions FSDPPipelineOptions::tensorParallelOptions() const {
  FSDPTensorParallelOptions o;
  o.reduceDtype = reduceDtype; // FSDP2 does not: its TP reductions stay f32
  o.sequenceParallel = sequenceParallel;
  o.sequenceGatherQuant = sequenceGatherQuant;
  return o;
}

FSDPPartitionOptions FSDPPipelineOptions::partitionOptions() const {
  FSDPPartitionOptions o;
  o.reduceOp = reduceOp;
  o.gradScale = gradScale;
  o.paramDtype = paramDtype;
  o.reduceDtype = reduceDtype;
  o.reshardAfterForward = reshardAfterForward;
  o.rootUnit = rootUnit;
  o.allReduceLoss = allReduceLoss;
  o.unevenPolicy = unevenPolicy;
  o.accumulationSteps = accumulationSteps;
  return o;
}

std::optional<AutocastDtype> FSDPPipelineOptions::autocastDtype() const {
  if (mixedPrecision != MixedPrecisionMode::compute)
    return std::nullopt;
  if (paramDtype == FloatDtype::bf16)
    return AutocastDtype::bf16;
  if (paramDtype == FloatDtype::f16)
    return AutocastDtype::f16;
  return std::nullopt;
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
  // Every backend runs the member layout (nccl as one NCCL group of
  // per-member collectives; docs/RUNTIME.md).
  o.memberLayout = bucketMemberLayout;
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
  // On a GPU the optimizer's scalars stay device values: host code that
  // read them would wait for the stream.
  o.deviceScalars = lower && compute == ComputeMode::Gpu;
  return o;
}

bool FSDPPipelineOptions::wantsOptimizer() const {
  FSDPOptimizerOptions d;
  return optimizer != OptimizerKind::none || momentum != d.momentum ||
         dampening != d.dampening || nesterov != d.nesterov ||
         weightDecay != d.weightDecay || !betas.empty() || eps != d.eps ||
         maxGradNorm != d.maxGradNorm || keepGrads != d.keepGrads;
}

//===----------------------------------------------------------------------===//
// fsdp-pipeline stages
//===----------------------------------------------------------------------===//

// Every canonicalization runs without region simplification: the step is
// one block whose size grows with the model, and region simplification
// (dead-argument and unreachable-block elimination, block merging) walks all
// of it on every iteration for nothing to simplify (0.4 s of 2.2 s at 1,000
// parameters); op folding and dead-op erasure are unchanged.
std::unique_ptr<Pass> mlir::fsdp::createFSDPCanonicalizer() {
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true); // the canonicalize pass's default
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  return createCanonicalizerPass(config);
}

void mlir::fsdp::populateFSDPPartition(OpPassManager &pm,
                                       const FSDPPipelineOptions &o) {
  // Upstream `shard` annotations become layouts (nothing to do without them).
  pm.addPass(createFSDPImportShard());
  // A global tensor-parallel step becomes TP-local first (nothing to do
  // without tp_shard / tp_replicate placements); the rest of the pipeline
  // shards the TP-local parameters over the data-parallel axes.
  pm.addNestedPass<func::FuncOp>(
      createFSDPTensorParallel(o.tensorParallelOptions()));
  // A 16-bit param-dtype computes in it (docs/SEMANTICS.md §5.7). Before
  // recompute, so that recomputed ops are clones of already decided ones
  // (the values stay bit-identical), and before partitioning: each
  // contraction's rounding of a parameter, truncf(extf(gathered)) once
  // partitioned, folds to the gathered 16-bit value.
  if (std::optional<AutocastDtype> dtype = o.autocastDtype()) {
    FSDPAutocastOptions autocast;
    autocast.dtype = *dtype;
    pm.addNestedPass<func::FuncOp>(createFSDPAutocast(autocast));
  }
  // Before partitioning: the recomputed forward reads the parameters in the
  // backward, so fsdp-partition gathers them there.
  if (!o.recompute.empty())
    pm.addPass(createFSDPRecompute(o.recomputeOptions()));
  pm.addPass(createFSDPPartition(o.partitionOptions()));
  pm.addNestedPass<func::FuncOp>(createFSDPExpandCollectives());
  pm.addPass(createFSDPCanonicalizer());
}

void mlir::fsdp::populateFSDPCollectives(OpPassManager &pm,
                                         const FSDPPipelineOptions &o) {
  if (o.quantize.getValue())
    pm.addNestedPass<func::FuncOp>(
        createFSDPQuantizeGathers(o.quantizeOptions()));
  pm.addNestedPass<func::FuncOp>(
      createFSDPBucketCollectives(o.bucketOptions()));
  pm.addPass(createFSDPCanonicalizer());
  if (o.schedule)
    pm.addNestedPass<func::FuncOp>(createFSDPSchedule(o.scheduleOptions()));
}

void mlir::fsdp::populateFSDPOptimizer(OpPassManager &pm,
                                       const FSDPPipelineOptions &o) {
  // The update reads the reduced gradient slots, after their waits.
  if (o.wantsOptimizer())
    pm.addPass(createFSDPOptimizer(o.optimizerOptions()));
}

void mlir::fsdp::buildFSDPPipeline(OpPassManager &pm,
                                   const FSDPPipelineOptions &o) {
  populateFSDPPartition(pm, o);
  populateFSDPCollectives(pm, o);
  populateFSDPOptimizer(pm, o);
  if (o.lower)
    buildFSDPLowerToLLVM(pm, o.compute, o.arena, o.gpuOptions());
}

//===----------------------------------------------------------------------===//
// fsdp-lower-to-llvm stages
//===----------------------------------------------------------------------===//

// The compute between collectives is outlined into deduplicated segment
// functions before bufferization, and every linalg op into a small
// deduplicated kernel function before loop lowering, so no upstream pass
// and no part of LLVM sees one function that grows with the model.
// compute=fast also folds transposes, fuses elementwise chains and turns
// contractions into BLAS calls (docs/COMPUTE.md).

void mlir::fsdp::populateFSDPTensorCompute(OpPassManager &pm,
                                           ComputeMode compute,
                                           bool fuseAttention,
                                           bool fuseCrossEntropy) {
  // Outlining comes first: the tensor-level passes after it (elementwise to
  // linalg, the fast path's folding and fusion) then run on the deduplicated
  // segment functions, about ten for a transformer of any depth, instead of
  // on one step that grows with the model.
  // One-hot products (the frontend's embedding backward) become scatter-adds
  // first: the summation order is aten's, and the one-hot matrix is never
  // built. On the CPU paths they are loops; compute=gpu gets one
  // fsdp.scatter_add_rows each (host loops cannot read device buffers),
  // which fsdp-gpu-scatter-add turns into the runtime's device scatter-add
  // with the loops' order.
  FSDPOneHotScatterOptions oneHot;
  oneHot.device = compute == ComputeMode::Gpu;
  pm.addNestedPass<func::FuncOp>(createFSDPOneHotScatter(oneHot));
  // Grouped products (sparse experts) become one contraction per group;
  // compute=gpu keeps them for the device grouped gemm
  // (fsdp-gpu-grouped-matmul), which reads the offsets on the device.
  FSDPGroupedMatmulOptions grouped;
  grouped.device = compute == ComputeMode::Gpu;
  pm.addNestedPass<func::FuncOp>(createFSDPGroupedMatmul(grouped));
  // topk indices as aten's CPU kernel picks them (ties, NaN): the runtime's
  // kernel on the CPU paths, the frontend's stable form under compute=gpu.
  FSDPTopkOptions topk;
  topk.device = compute == ComputeMode::Gpu;
  pm.addNestedPass<func::FuncOp>(createFSDPTopk(topk));
  // On a GPU no collective blocks the host: a blocking one would wait for
  // the device work before it (the loss all-reduce, for the whole backward).
  if (compute == ComputeMode::Gpu)
    pm.addPass(createFSDPGpuAsyncCollectives());
  // Attention as the fused kernels, on the whole step: its forward and
  // backward are matched together, before segments separate them.
  if (compute == ComputeMode::Gpu && fuseAttention)
    pm.addPass(createFSDPGpuFuseAttention());
  // Cross-entropy likewise: its forward and backward share the row
  // statistics.
  if (compute == ComputeMode::Gpu && fuseCrossEntropy)
    pm.addPass(createFSDPGpuFuseCrossEntropy());
  // One value per elementwise computation (autocast rounds a value once per
  // product that reads it), and elementwise values the backward reads next
  // to their inputs (GELU's) recomputed there from those inputs instead of
  // kept from the forward.
  if (compute == ComputeMode::Gpu)
    pm.addNestedPass<func::FuncOp>(createFSDPRematElementwise());
  pm.addPass(createFSDPOutlineSegments());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  // x ** 3 as multiplications on every path (no __nv_powif in a kernel, no
  // libm call in a loop), in llvm.powi's order.
  pm.addNestedPass<func::FuncOp>(createFSDPExpandPowers());
  // compute=gpu folds and fuses as the fast path does: a fused chain is one
  // kernel launch.
  if (compute != ComputeMode::Loops) {
    OpPassManager &fn = pm.nest<func::FuncOp>();
    fn.addPass(createFSDPFoldTransposes());
    FSDPFuseElementwiseOptions fuse;
    fuse.multiUse = compute == ComputeMode::Gpu;
    fn.addPass(createFSDPFuseElementwise(fuse));
    fn.addPass(createFSDPCanonicalizer());
  }
  // Contractions start from zeros of their own (beta = 0, no copy of a
  // passed-in accumulator), and the ones whose f32 sum is only rounded to
  // bf16 write bf16 directly. After the fusion, which decides the readers;
  // nothing may merge the fills again before bufferization.
  if (compute == ComputeMode::Gpu) {
    pm.addPass(createFSDPGpuGemmResults());
    pm.addPass(createFSDPCanonicalizer());
  }
  // A bucket's members written into their slots by their producers, not
  // copied in. Last before bufferization: a canonicalization would fold the
  // slices of the empty bucket back into empty tensors of their own.
  pm.addNestedPass<func::FuncOp>(createFSDPPackInPlace());
}

void mlir::fsdp::populateFSDPBufferization(OpPassManager &pm, bool arena,
                                           bool deviceArena) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // The constants' globals in program order: one-shot-bufferize would
  // create them in an order that changes from run to run.
  FSDPConstantGlobalsOptions constants;
  constants.alignment = bufferize.bufferAlignment;
  pm.addPass(createFSDPConstantGlobals(constants));
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  memref::ExpandReallocPassOptions expandRealloc;
  expandRealloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(expandRealloc));
  pm.addPass(createFSDPCanonicalizer());
  // The in-place members of a bucket (fsdp-pack-in-place) leave copies of
  // their slots onto themselves.
  pm.addPass(createFSDPFoldSelfCopies());
  // Ownership-based deallocation frees every buffer the step allocates or
  // gets from a segment call in one dealloc op at the end of its block
  // (after every collective's wait); results are handed to the caller, which
  // owns them (fsdp-run frees them). It runs before the collectives become
  // runtime calls on raw pointers, which it cannot see.
  // This is upstream's buffer-deallocation-pipeline without
  // buffer-deallocation-simplification: that pass compares every pair of
  // memrefs of a dealloc op, and the step's last one holds every buffer the
  // segments return (326 s at 300 parameters). fsdp-early-dealloc instead
  // takes each buffer it can follow (an allocation, or a segment's result:
  // segments return only buffers they allocate) out of those ops, walking
  // its uses once, and frees it right after its last use (after the wait of
  // a collective that uses it), before the ops are lowered; a step result is
  // never freed. Only what it cannot follow keeps the run-time alias checks.
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createFSDPCanonicalizer());
  pm.addPass(createFSDPEarlyDealloc());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createFSDPCanonicalizer());
  pm.addPass(createConvertBufferizationToMemRefPass());
  // Every buffer freed in its own block now has its lifetime, from its
  // allocation to its free: the arena plan packs them (docs/RUNTIME.md,
  // "Static memory"). Clones are allocations by now.
  if (arena && deviceArena) {
    // fsdp-gpu-device-memory turns the arena call into fsdprt_gpu_arena.
    // The step's results are planned too: the runners copy them out (or
    // into the fed-back state's buffers) before the next call, so a step
    // allocates no device memory.
    FSDPAssignBuffersOptions device;
    device.poison = false;
    pm.addPass(createFSDPAssignBuffers(device));
  } else if (arena) {
    pm.addPass(createFSDPAssignBuffers());
  }
}

void mlir::fsdp::populateFSDPRuntimeCalls(OpPassManager &pm,
                                          ComputeMode compute) {
  // compute=gpu leaves the device scatter-add to fsdp-gpu-scatter-add.
  ConvertFSDPToRuntimeOptions toRuntime;
  toRuntime.device = compute == ComputeMode::Gpu;
  // Which arguments the step never writes: their ports say read_only.
  pm.addPass(createFSDPMarkReadOnlyArgs());
  pm.addPass(createConvertFSDPToRuntime(toRuntime));
  if (compute != ComputeMode::Gpu)
    pm.addPass(createFSDPTopkToRuntime());
  pm.addPass(createFSDPOutlineKernels());
  if (compute == ComputeMode::Fast) {
    pm.addPass(createFSDPGroupedMatmulToBlas());
    pm.addPass(createFSDPLinalgToBlas());
    pm.addPass(createFSDPCopiesToLoops());
    pm.addPass(createFSDPReductionLoops());
    pm.addPass(createFSDPApproximateMath());
  } else if (compute == ComputeMode::Loops) {
    // The reference sums its reductions in the same blocks of 16 as the fast
    // path: summed element after element, a long sum's error grows with its
    // length (docs/COMPUTE.md, "Summation order of reductions").
    pm.addPass(createFSDPReductionLoops());
  }
}

void mlir::fsdp::populateFSDPGpuKernels(OpPassManager &pm,
                                        const FSDPGpuOptions &gpu) {
  pm.addPass(createFSDPGpuScatterAdd());
  pm.addPass(createFSDPGpuGroupedMatmul());
  FSDPLinalgToCublasOptions cublas;
  cublas.tf32 = gpu.tf32;
  pm.addPass(createFSDPLinalgToCublas(cublas));
  // The optimizer's per-parameter kernels, launched together.
  pm.addPass(createFSDPGpuMultiTensor());
  pm.addPass(createFSDPGpuKernels());
  pm.addPass(createFSDPGpuDeviceMemory());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createFSDPGpuMergeModules());
  pm.addPass(createFSDPGpuStreamOrder());
  // Every device operation is explicit here and the kernels are still
  // loops over buffers: the stage the cost model reads.
  if (!gpu.costReport.empty()) {
    FSDPGpuCostReportOptions report;
    report.gpuName = gpu.costReport;
    report.json = gpu.costReportJson;
    pm.addPass(createFSDPGpuCostReport(report));
  }
  // gpu-emulation: the kernels become host functions that the host lowering
  // compiles with the step; the binary names their table (no NVVM, no
  // toolkit).
  if (gpu.emulation) {
    pm.addPass(createFSDPGpuHostKernels());
    return;
  }
  // The kernels to NVVM here, before the host lowering: its math-to-libm
  // would otherwise turn their math ops into host libm calls. Bare pointers:
  // every kernel argument is a statically shaped buffer, so one pointer
  // each instead of a descriptor of 3 + 2 x rank words.
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createLowerAffinePass());
  device.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = gpu.chip;
  target.features = gpu.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createStripDebugInfoPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::fsdp::populateFSDPGpuBinary(OpPassManager &pm,
                                       const FSDPGpuOptions &gpu) {
  std::string toolkit = gpu.cudaPath.empty() ? defaultCudaPath() : gpu.cudaPath;
  FSDPGpuCheckToolkitOptions check;
  check.cudaPath = toolkit;
  check.format = gpu.format;
  pm.addPass(createFSDPGpuCheckToolkit(check));
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = toolkit;
  binary.compilationTarget = gpu.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::fsdp::populateFSDPLowerToLLVMDialect(OpPassManager &pm,
                                                ComputeMode compute) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createFSDPExpandBf16Casts());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // fsdp-lower-ifs lowers the scf.if ops of the functions' bodies (one per
  // run-time alias check of the step's deallocations) in linear time: the
  // dialect conversion of convert-scf-to-cf moves every operation after each
  // one, quadratic in the length of the step (1.7 s of 5 s at 1,000
  // parameters). The dialect conversions run without pattern rollback, which
  // records every change for a rollback nothing here needs.
  pm.addNestedPass<func::FuncOp>(createFSDPLowerIfs());
  SCFToControlFlowPassOptions scfToCf;
  scfToCf.allowPatternRollback = false;
  pm.addPass(createSCFToControlFlowPass(scfToCf));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  ConvertToLLVMPassOptions toLLVM;
  toLLVM.allowPatternRollback = false;
  pm.addPass(createConvertToLLVMPass(toLLVM));
  if (compute == ComputeMode::Gpu) {
    GpuToLLVMConversionPassOptions gpuToLLVM;
    gpuToLLVM.kernelBarePtrCallConv = true;
    pm.addPass(createGpuToLLVMConversionPass(gpuToLLVM));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::fsdp::buildFSDPLowerToLLVM(OpPassManager &pm, ComputeMode compute,
                                      bool arena, const FSDPGpuOptions &gpu) {
  populateFSDPTensorCompute(pm, compute, gpu.fuseAttention,
                            gpu.fuseCrossEntropy);
  // A compute=gpu step's arena is the rank's device arena (fsdprt_gpu_arena).
  populateFSDPBufferization(pm, arena, compute == ComputeMode::Gpu);
  populateFSDPRuntimeCalls(pm, compute);
  if (compute == ComputeMode::Gpu)
    populateFSDPGpuKernels(pm, gpu);
  populateFSDPLowerToLLVMDialect(pm, compute);
  if (compute == ComputeMode::Gpu && !gpu.emulation)
    populateFSDPGpuBinary(pm, gpu);
}

void mlir::fsdp::registerFSDPPipelines() {
  PassPipelineRegistration<FSDPPipelineOptions>(kPipelineName, kPipelineSummary,
                                                buildFSDPPipeline);
  PassPipelineRegistration<FSDPLowerToLLVMOptions>(
      kLowerName, kLowerSummary,
      [](OpPassManager &pm, const FSDPLowerToLLVMOptions &o) {
        buildFSDPLowerToLLVM(pm, o.compute, o.arena, o.gpuOptions());
      });
}

void mlir::fsdp::registerFSDPPassesAndPipelines() {
  registerFSDPPasses();
  registerFSDPConversionPasses();
  registerFSDPMemoryPasses();
  registerFSDPComputePasses();
  registerFSDPGPUPasses();
  registerFSDPExpertsPasses();
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
  std::unique_ptr<Pass> passes[] = {createFSDPLayoutReport(),
                                    createFSDPImportShard(),
                                    createFSDPRecompute(),
                                    createFSDPPartition(),
                                    createFSDPExpandCollectives(),
                                    createFSDPQuantizeGathers(),
                                    createFSDPBucketCollectives(),
                                    createFSDPSchedule(),
                                    createFSDPOptimizer(),
                                    createFSDPCommReport(),
                                    createFSDPMemoryReport(),
                                    createConvertFSDPToRuntime(),
                                    createFSDPFoldTransposes(),
                                    createFSDPFuseElementwise(),
                                    createFSDPExpandPowers(),
                                    createFSDPPackInPlace(),
                                    createFSDPOneHotScatter(),
                                    createFSDPOutlineSegments(),
                                    createFSDPOutlineKernels(),
                                    createFSDPLinalgToBlas(),
                                    createFSDPEarlyDealloc(),
                                    createFSDPFoldSelfCopies(),
                                    createFSDPGroupedMatmul(),
                                    createFSDPGroupedMatmulToBlas(),
                                    createFSDPTopk(),
                                    createFSDPTopkToRuntime(),
                                    createFSDPAssignBuffers(),
                                    createFSDPLowerIfs(),
                                    createFSDPGpuAsyncCollectives(),
                                    createFSDPGpuFuseAttention(),
                                    createFSDPGpuFuseCrossEntropy(),
                                    createFSDPGpuGemmResults(),
                                    createFSDPGpuScatterAdd(),
                                    createFSDPGpuGroupedMatmul(),
                                    createFSDPLinalgToCublas(),
                                    createFSDPGpuMultiTensor(),
                                    createFSDPGpuKernels(),
                                    createFSDPGpuDeviceMemory(),
                                    createFSDPGpuMergeModules(),
                                    createFSDPGpuStreamOrder(),
                                    createFSDPGpuCheckToolkit(),
                                    createFSDPGpuHostKernels(),
                                    createFSDPGpuCostReport(),
                                    createFSDPExpandBf16Casts()};
  for (const std::unique_ptr<Pass> &pass : passes)
    line(pass->getArgument(), pass->getDescription());
  return text;
}

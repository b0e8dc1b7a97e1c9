//===- PassRegistration.cpp - fsdp passes and pipelines -------------------===//

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/BufferizableOpInterfaceImpl.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// How fsdp-lower-to-llvm lowers the arithmetic (docs/COMPUTE.md).
enum class ComputeMode { Fast, Loops };

#define FSDP_COMPUTE_OPTION_VALUES                                             \
  llvm::cl::values(                                                            \
      clEnumValN(ComputeMode::Fast, "fast",                                    \
                 "BLAS contractions, fused elementwise ops"),                  \
      clEnumValN(ComputeMode::Loops, "loops", "scalar loops (reference)"))

struct FSDPPipelineOptions : public PassPipelineOptions<FSDPPipelineOptions> {
  Option<std::string> reduceOp{*this, "reduce-op",
                               llvm::cl::desc("Gradient reduction: avg or sum"),
                               llvm::cl::init("avg")};
  Option<double> gradScale{
      *this, "grad-scale",
      llvm::cl::desc("Multiply summed gradients by this factor (0 = off)"),
      llvm::cl::init(0.0)};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Gather parameters in this element type (e.g. bf16)"),
      llvm::cl::init("")};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Reduce gradients in this element type (e.g. f32)"),
      llvm::cl::init("")};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("Free gathered parameters after forward, re-gather "
                     "for backward"),
      llvm::cl::init(true)};
  Option<bool> allReduceLoss{
      *this, "all-reduce-loss",
      llvm::cl::desc("All-reduce the loss to the global mean"),
      llvm::cl::init(false)};
  Option<std::string> unevenPolicy{
      *this, "uneven-policy",
      llvm::cl::desc("Override every layout's uneven policy (ceil|balanced)"),
      llvm::cl::init("")};
  Option<int64_t> accumulationSteps{
      *this, "accumulation-steps",
      llvm::cl::desc("Gradient accumulation over this many micro-steps "
                     "(also emits @<step>_accumulate)"),
      llvm::cl::init(1)};
  Option<std::string> bucket{
      *this, "bucket",
      llvm::cl::desc("Bucketing: unit (one per FSDP unit and phase), greedy "
                     "(program order up to bucket-bytes) or none"),
      llvm::cl::init("unit")};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::desc("Largest bucket in bytes"),
                              llvm::cl::init(30 * 1024 * 1024)};
  Option<int64_t> bucketAlignment{
      *this, "bucket-alignment",
      llvm::cl::desc("Align every bucket member to this many elements"),
      llvm::cl::init(1)};
  Option<bool> schedule{*this, "schedule",
                        llvm::cl::desc("Overlap collectives with compute"),
                        llvm::cl::init(true)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("All-gathers started ahead"),
                           llvm::cl::init(1)};
  Option<int64_t> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Bytes of gathered parameters alive at once (0 = no "
                     "limit)"),
      llvm::cl::init(0)};
  Option<std::string> quantize{
      *this, "quantize",
      llvm::cl::desc("Quantize parameter all-gathers in this format (e.g. "
                     "fp8_e4m3_tensor, mxfp8_rowwise, nvfp4; empty = off)"),
      llvm::cl::init("")};
  Option<int64_t> quantizeMinElements{
      *this, "quantize-min-elements",
      llvm::cl::desc("Leave parameters with fewer elements unquantized"),
      llvm::cl::init(1024)};
  Option<bool> lower{*this, "lower",
                     llvm::cl::desc("Bufferize and lower to the LLVM dialect "
                                    "with fsdprt runtime calls"),
                     llvm::cl::init(false)};
  Option<ComputeMode> compute{
      *this, "compute",
      llvm::cl::desc("With lower=true: fast (BLAS contractions, fused "
                     "elementwise ops) or loops (scalar reference)"),
      llvm::cl::init(ComputeMode::Fast), FSDP_COMPUTE_OPTION_VALUES};
};

struct LowerToLLVMOptions : public PassPipelineOptions<LowerToLLVMOptions> {
  Option<ComputeMode> compute{
      *this, "compute",
      llvm::cl::desc("fast (BLAS contractions, fused elementwise ops) or "
                     "loops (scalar reference)"),
      llvm::cl::init(ComputeMode::Fast), FSDP_COMPUTE_OPTION_VALUES};
};

// Upstream passes by name: their textual names are the stable interface.
// Every linalg op is outlined into a small deduplicated kernel function
// before loop lowering, so no upstream pass sees one huge function.
// compute=fast also folds transposes, fuses elementwise chains and turns
// contractions into BLAS calls (docs/COMPUTE.md).
constexpr const char *kLowerToLLVMHead =
    "func.func(convert-elementwise-to-linalg)";
constexpr const char *kLowerToLLVMFastTensor =
    "func.func(fsdp-fold-transposes,fsdp-fuse-elementwise,canonicalize)";
constexpr const char *kLowerToLLVMBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "convert-fsdp-to-runtime,fsdp-outline-kernels";
constexpr const char *kLowerToLLVMFastBuffer = "fsdp-linalg-to-blas";
constexpr const char *kLowerToLLVMTail =
    "func.func(convert-linalg-to-loops),"
    "arith-expand{include-bf16=true},"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,"
    "reconcile-unrealized-casts";

void buildLowerToLLVM(OpPassManager &pm, ComputeMode compute) {
  bool fast = compute == ComputeMode::Fast;
  std::string pipeline = kLowerToLLVMHead;
  if (fast)
    pipeline += std::string(",") + kLowerToLLVMFastTensor;
  pipeline += std::string(",") + kLowerToLLVMBufferize;
  if (fast)
    pipeline += std::string(",") + kLowerToLLVMFastBuffer;
  pipeline += std::string(",") + kLowerToLLVMTail;
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("fsdp: malformed built-in lowering pipeline");
}

void buildFSDPPipeline(OpPassManager &pm, const FSDPPipelineOptions &o) {
  FSDPPartitionOptions partition;
  partition.reduceOp = o.reduceOp;
  partition.gradScale = o.gradScale;
  partition.paramDtype = o.paramDtype;
  partition.reduceDtype = o.reduceDtype;
  partition.reshardAfterForward = o.reshardAfterForward;
  partition.allReduceLoss = o.allReduceLoss;
  partition.unevenPolicy = o.unevenPolicy;
  partition.accumulationSteps = o.accumulationSteps;
  pm.addPass(createFSDPPartition(partition));
  pm.addPass(createFSDPExpandCollectives());
  pm.addPass(createCanonicalizerPass());
  if (!o.quantize.empty()) {
    FSDPQuantizeGathersOptions quantize;
    quantize.format = o.quantize;
    quantize.minElements = o.quantizeMinElements;
    pm.addPass(createFSDPQuantizeGathers(quantize));
  }
  FSDPBucketCollectivesOptions bucket;
  bucket.mode = o.bucket;
  bucket.bucketBytes = o.bucketBytes;
  bucket.alignment = o.bucketAlignment;
  pm.addPass(createFSDPBucketCollectives(bucket));
  pm.addPass(createCanonicalizerPass());
  if (o.schedule) {
    FSDPScheduleOptions schedule;
    schedule.prefetch = o.prefetch;
    schedule.memoryLimit = o.memoryLimit;
    pm.addPass(createFSDPSchedule(schedule));
  }
  if (o.lower)
    buildLowerToLLVM(pm, o.compute);
}
} // namespace

void mlir::fsdp::registerFSDPPassesAndPipelines() {
  registerFSDPPasses();
  registerFSDPConversionPasses();
  PassPipelineRegistration<FSDPPipelineOptions>(
      "fsdp-pipeline",
      "Partition a training step, expand its collectives and optionally "
      "lower it to LLVM with runtime calls",
      buildFSDPPipeline);
  PassPipelineRegistration<LowerToLLVMOptions>(
      "fsdp-lower-to-llvm",
      "Bufferize an expanded fsdp program and lower it to the LLVM dialect "
      "with fsdprt runtime calls",
      [](OpPassManager &pm, const LowerToLLVMOptions &o) {
        buildLowerToLLVM(pm, o.compute);
      });
}

void mlir::fsdp::registerFSDPExtensions(DialectRegistry &registry) {
  registerBufferizableOpInterfaceExternalModels(registry);
}

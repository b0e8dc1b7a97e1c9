//===- Pipeline.h - the fsdp pass pipeline ----------------------*- C++ -*-===//
//
// The whole compilation, from one rank's training step to the sharded SPMD
// program (optionally lowered to LLVM with runtime calls), for compilers
// that embed fsdp-opt: fill FSDPPipelineOptions and call buildFSDPPipeline.
// `fsdp-opt --fsdp-pipeline=...` parses the same options.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PIPELINE_PIPELINE_H
#define FSDP_PIPELINE_PIPELINE_H

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::fsdp {

/// How fsdp-lower-to-llvm lowers the arithmetic (docs/COMPUTE.md).
enum class ComputeMode { Fast, Loops, Gpu };

#define FSDP_COMPUTE_OPTION_VALUES                                             \
  llvm::cl::values(                                                            \
      clEnumValN(::mlir::fsdp::ComputeMode::Fast, "fast",                      \
                 "BLAS contractions, fused elementwise ops"),                  \
      clEnumValN(::mlir::fsdp::ComputeMode::Loops, "loops",                    \
                 "scalar loops (reference)"),                                  \
      clEnumValN(                                                              \
          ::mlir::fsdp::ComputeMode::Gpu, "gpu",                               \
          "NVIDIA GPU: cuBLAS contractions, CUDA kernels (docs/GPU.md)"))

/// How compute=gpu compiles the kernels (docs/GPU.md).
struct FSDPGpuOptions {
  /// The target GPU (nvvm-attach-target chip).
  std::string chip = "sm_90";
  /// PTX features; sm_90 needs PTX 8.0.
  std::string features = "+ptx80";
  /// CUDA toolkit root; empty: $CUDA_HOME, else /usr/local/cuda.
  std::string cudaPath;
  /// gpu-module-to-binary format: fatbin, bin (cubin) or isa (PTX text).
  std::string format = "fatbin";
  /// Allow TF32 tensor-core math in f32 gemms.
  bool tf32 = false;
  /// Compile the kernels for the host emulation of CUDA instead of NVVM
  /// (fsdp-gpu-host-kernels): no toolkit, runs on the emulated runtime only.
  bool emulation = false;
  /// Print fsdp-gpu-cost-report's estimate for this GPU (h100, h200, ...)
  /// after the device operations are ordered; empty: no report.
  std::string costReport;
  /// The cost report as JSON.
  bool costReportJson = false;
  /// Replace attention chains by the fused kernels
  /// (fsdp-gpu-fuse-attention).
  bool fuseAttention = true;
  /// Rewrite torch's cross-entropy chains into row passes over the logits
  /// (fsdp-gpu-fuse-cross-entropy).
  bool fuseCrossEntropy = true;
};

/// The pipeline options of compute=gpu, shared by both pipelines.
#define FSDP_GPU_PIPELINE_OPTIONS                                              \
  Option<std::string> gpuChip{*this, "gpu-chip",                               \
                              llvm::cl::desc("compute=gpu: target GPU"),       \
                              llvm::cl::init(FSDPGpuOptions().chip)};          \
  Option<std::string> gpuFeatures{                                             \
      *this, "gpu-features",                                                   \
      llvm::cl::desc("compute=gpu: PTX features (sm_90 needs +ptx80)"),        \
      llvm::cl::init(FSDPGpuOptions().features)};                              \
  Option<std::string> cudaPath{                                                \
      *this, "cuda-path",                                                      \
      llvm::cl::desc("compute=gpu: CUDA toolkit root (default $CUDA_HOME, "    \
                     "else /usr/local/cuda)"),                                 \
      llvm::cl::init(FSDPGpuOptions().cudaPath)};                              \
  Option<std::string> gpuFormat{                                               \
      *this, "gpu-format",                                                     \
      llvm::cl::desc("compute=gpu: kernels as fatbin, bin (cubin) or isa "     \
                     "(PTX)"),                                                 \
      llvm::cl::init(FSDPGpuOptions().format)};                                \
  Option<bool> tf32{*this, "tf32",                                             \
                    llvm::cl::desc("compute=gpu: allow TF32 tensor-core "      \
                                   "math in f32 gemms"),                       \
                    llvm::cl::init(FSDPGpuOptions().tf32)};                    \
  Option<bool> gpuEmulation{                                                   \
      *this, "gpu-emulation",                                                  \
      llvm::cl::desc("compute=gpu: compile the kernels for the host "          \
                     "emulation of CUDA (no toolkit; emulated runtime only)"), \
      llvm::cl::init(FSDPGpuOptions().emulation)};                             \
  Option<std::string> gpuCostReport{                                           \
      *this, "gpu-cost-report",                                                \
      llvm::cl::desc("compute=gpu: print the step's estimated time on this "   \
                     "GPU (h100, h200, a100; fsdp-gpu-cost-report)"),          \
      llvm::cl::init(FSDPGpuOptions().costReport)};                            \
  Option<bool> gpuCostReportJson{                                              \
      *this, "gpu-cost-report-json",                                           \
      llvm::cl::desc("compute=gpu: the cost report as JSON"),                  \
      llvm::cl::init(FSDPGpuOptions().costReportJson)};                        \
  Option<bool> gpuFuseAttention{                                               \
      *this, "gpu-fuse-attention",                                             \
      llvm::cl::desc("compute=gpu: replace attention chains by the fused "     \
                     "attention kernels (fsdp-gpu-fuse-attention)"),           \
      llvm::cl::init(FSDPGpuOptions().fuseAttention)};                         \
  Option<bool> gpuFuseCrossEntropy{                                            \
      *this, "gpu-fuse-cross-entropy",                                         \
      llvm::cl::desc("compute=gpu: rewrite cross-entropy chains into row "     \
                     "passes over the logits (fsdp-gpu-fuse-cross-entropy)"),  \
      llvm::cl::init(FSDPGpuOptions().fuseCrossEntropy)};                      \
  FSDPGpuOptions gpuOptions() const {                                          \
    FSDPGpuOptions o;                                                          \
    o.chip = gpuChip;                                                          \
    o.features = gpuFeatures;                                                  \
    o.cudaPath = cudaPath;                                                     \
    o.format = gpuFormat;                                                      \
    o.tf32 = tf32;                                                             \
    o.emulation = gpuEmulation;                                                \
    o.costReport = gpuCostReport;                                              \
    o.costReportJson = gpuCostReportJson;                                      \
    o.fuseAttention = gpuFuseAttention;                                        \
    o.fuseCrossEntropy = gpuFuseCrossEntropy;                                  \
    return o;                                                                  \
  }

/// Options of `fsdp-lower-to-llvm`.
struct FSDPLowerToLLVMOptions
    : public PassPipelineOptions<FSDPLowerToLLVMOptions> {
  Option<ComputeMode> compute{
      *this, "compute",
      llvm::cl::desc("fast (BLAS contractions, fused elementwise ops) or "
                     "loops (scalar reference)"),
      llvm::cl::init(ComputeMode::Fast), FSDP_COMPUTE_OPTION_VALUES};
  FSDP_GPU_PIPELINE_OPTIONS
  Option<bool> arena{
      *this, "arena",
      llvm::cl::desc("Plan one arena per rank for the step's statically "
                     "sized buffers (fsdp-assign-buffers); false keeps "
                     "malloc/free"),
      llvm::cl::init(true)};
};

/// Options of `fsdp-pipeline`. Each forwards to the option of one pass; its
/// default and accepted values are that pass option's (Passes.td,
/// PassOptions.h).
struct FSDPPipelineOptions : public PassPipelineOptions<FSDPPipelineOptions> {
  // fsdp-recompute
  ListOption<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Recompute these FSDP units' forward in the backward "
                     "(unit names, or all; default none)")};
  // fsdp-partition
  Option<ReduceKind> reduceOp{*this, "reduce-op",
                              llvm::cl::desc("Gradient reduction"),
                              llvm::cl::init(FSDPPartitionOptions().reduceOp),
                              FSDP_GRADIENT_REDUCE_VALUES};
  Option<double> gradScale{
      *this, "grad-scale",
      llvm::cl::desc("Multiply summed gradients by this finite factor "
                     "(0 = off)"),
      llvm::cl::init(FSDPPartitionOptions().gradScale)};
  Option<FloatDtype> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Gather float parameters in this element type"),
      llvm::cl::init(FSDPPartitionOptions().paramDtype),
      FSDP_FLOAT_DTYPE_VALUES};
  // fsdp-autocast (with a 16-bit param-dtype)
  Option<MixedPrecisionMode> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("With param-dtype=bf16 or f16: compute (contractions "
                     "on 16-bit operands with f32 accumulation, activations "
                     "in 16 bits, fsdp-autocast) or traffic (only the "
                     "gathers in 16 bits, compute in f32)"),
      llvm::cl::init(MixedPrecisionMode::compute), FSDP_MIXED_PRECISION_VALUES};
  Option<FloatDtype> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Reduce gradients in this element type"),
      llvm::cl::init(FSDPPartitionOptions().reduceDtype),
      FSDP_FLOAT_DTYPE_VALUES};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("Free gathered parameters after forward, re-gather "
                     "for backward"),
      llvm::cl::init(FSDPPartitionOptions().reshardAfterForward)};
  Option<std::string> rootUnit{
      *this, "root-unit",
      llvm::cl::desc("FSDP unit kept unsharded from the forward to the "
                     "backward, as FSDP2's root module (empty: none)"),
      llvm::cl::init(FSDPPartitionOptions().rootUnit)};
  // fsdp-tensor-parallel
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Sequence parallelism on the tensor-parallel axis "
                     "(fsdp-tensor-parallel)"),
      llvm::cl::init(false)};
  Option<std::string> sequenceGatherQuant{
      *this, "sequence-gather-quant",
      llvm::cl::desc("Quantize the sequence-parallel all-gathers of "
                     "activations in this format (fsdp-tensor-parallel)"),
      llvm::cl::init("")};
  Option<bool> allReduceLoss{
      *this, "all-reduce-loss",
      llvm::cl::desc("All-reduce the loss to the global mean"),
      llvm::cl::init(FSDPPartitionOptions().allReduceLoss)};
  Option<PolicyOverride> unevenPolicy{
      *this, "uneven-policy",
      llvm::cl::desc("Override every layout's uneven policy"),
      llvm::cl::init(FSDPPartitionOptions().unevenPolicy),
      FSDP_POLICY_OVERRIDE_VALUES};
  Option<int64_t> accumulationSteps{
      *this, "accumulation-steps",
      llvm::cl::desc("Gradient accumulation over this many micro-steps "
                     "(also emits @<step>_accumulate; 1 to 2^20)"),
      llvm::cl::init(FSDPPartitionOptions().accumulationSteps)};
  // fsdp-quantize-gathers
  Option<std::optional<QuantFormat>> quantize{
      *this, "quantize",
      llvm::cl::desc("Quantize parameter all-gathers in this format"),
      llvm::cl::init(std::optional<QuantFormat>())};
  Option<int64_t> quantizeMinElements{
      *this, "quantize-min-elements",
      llvm::cl::desc("Leave parameters with fewer elements unquantized"),
      llvm::cl::init(FSDPQuantizeGathersOptions().minElements)};
  Option<bool> quantizeSplit{
      *this, "quantize-split",
      llvm::cl::desc("Quantized gathers as quantize + byte all-gather + "
                     "dequantize, bucketed and scheduled (false: one "
                     "synchronous fsdp.quantized_all_gather each)"),
      llvm::cl::init(FSDPQuantizeGathersOptions().split)};
  // fsdp-bucket-collectives
  Option<BucketMode> bucket{*this, "bucket",
                            llvm::cl::desc("How collectives are bucketed"),
                            llvm::cl::init(FSDPBucketCollectivesOptions().mode),
                            FSDP_BUCKET_MODE_VALUES};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes", llvm::cl::desc("Largest bucket in bytes"),
      llvm::cl::init(FSDPBucketCollectivesOptions().bucketBytes)};
  Option<int64_t> bucketAlignment{
      *this, "bucket-alignment",
      llvm::cl::desc("Align every bucket member to this many elements "
                     "(1 to 2^20)"),
      llvm::cl::init(FSDPBucketCollectivesOptions().alignment)};
  Option<bool> bucketMemberLayout{
      *this, "bucket-member-layout",
      llvm::cl::desc("Gathered parameters and packed gradients member after "
                     "member (contiguous, no unpack or pack copies)"),
      llvm::cl::init(true)};
  // fsdp-schedule
  Option<bool> schedule{*this, "schedule",
                        llvm::cl::desc("Overlap collectives with compute"),
                        llvm::cl::init(true)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("All-gathers started ahead"),
                           llvm::cl::init(FSDPScheduleOptions().prefetch)};
  Option<int64_t> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Bytes of gathered parameters alive at once (0 = no "
                     "limit)"),
      llvm::cl::init(FSDPScheduleOptions().memoryLimit)};
  // fsdp-optimizer
  Option<OptimizerKind> optimizer{
      *this, "optimizer",
      llvm::cl::desc("Append the optimizer update of every parameter shard "
                     "(none: return the gradients)"),
      llvm::cl::init(OptimizerKind::none), FSDP_PIPELINE_OPTIMIZER_VALUES};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("SGD momentum factor (>= 0)"),
                          llvm::cl::init(FSDPOptimizerOptions().momentum)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::desc("SGD dampening of the momentum"),
                           llvm::cl::init(FSDPOptimizerOptions().dampening)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(FSDPOptimizerOptions().nesterov)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (SGD: L2 on the gradient; AdamW: "
                     "decoupled)"),
      llvm::cl::init(FSDPOptimizerOptions().weightDecay)};
  ListOption<double> betas{*this, "betas",
                           llvm::cl::desc("AdamW beta1,beta2 (default "
                                          "0.9,0.999)")};
  Option<double> eps{*this, "eps",
                     llvm::cl::desc("AdamW denominator term (>= 0)"),
                     llvm::cl::init(FSDPOptimizerOptions().eps)};
  Option<double> maxGradNorm{
      *this, "max-grad-norm",
      llvm::cl::desc("Clip gradients to this global 2-norm (0 = off)"),
      llvm::cl::init(FSDPOptimizerOptions().maxGradNorm)};
  Option<bool> keepGrads{
      *this, "keep-grads",
      llvm::cl::desc("With an optimizer, keep the gradient results"),
      llvm::cl::init(FSDPOptimizerOptions().keepGrads)};
  // fsdp-lower-to-llvm
  Option<bool> lower{*this, "lower",
                     llvm::cl::desc("Bufferize and lower to the LLVM dialect "
                                    "with fsdprt runtime calls"),
                     llvm::cl::init(false)};
  Option<ComputeMode> compute{
      *this, "compute",
      llvm::cl::desc("With lower=true: fast (BLAS contractions, fused "
                     "elementwise ops), loops (scalar reference) or gpu "
                     "(NVIDIA GPU)"),
      llvm::cl::init(ComputeMode::Fast), FSDP_COMPUTE_OPTION_VALUES};
  FSDP_GPU_PIPELINE_OPTIONS
  Option<bool> arena{
      *this, "arena",
      llvm::cl::desc(
          "With lower=true: plan one arena per rank for the step's statically "
          "sized buffers (fsdp-assign-buffers); false keeps "
          "malloc/free"),
      llvm::cl::init(true)};

  FSDPRecomputeOptions recomputeOptions() const;
  FSDPPartitionOptions partitionOptions() const;
  FSDPTensorParallelOptions tensorParallelOptions() const;
  /// The 16-bit type fsdp-autocast computes in, if it runs.
  std::optional<AutocastDtype> autocastDtype() const;
  FSDPQuantizeGathersOptions quantizeOptions() const;
  FSDPBucketCollectivesOptions bucketOptions() const;
  FSDPScheduleOptions scheduleOptions() const;
  FSDPOptimizerOptions optimizerOptions() const;
  /// Whether an optimizer runs or an optimizer option was set (which then
  /// needs optimizer=sgd|adamw).
  bool wantsOptimizer() const;
};

/// Appends the fsdp pipeline to `pm` (a pass manager on builtin.module):
/// its stages below in order, then fsdp-lower-to-llvm with `lower`.
void buildFSDPPipeline(OpPassManager &pm, const FSDPPipelineOptions &options);

/// Appends the lowering of an expanded fsdp program to the LLVM dialect
/// with fsdprt runtime calls: its stages below in order.
/// With `arena`, the step's statically sized buffers live in one planned
/// arena per rank (fsdp-assign-buffers).
void buildFSDPLowerToLLVM(OpPassManager &pm,
                          ComputeMode compute = ComputeMode::Fast,
                          bool arena = true, const FSDPGpuOptions &gpu = {});

// The stages, each appending its passes to `pm` (on builtin.module), for
// compilers that run part of the pipeline or add passes between stages.

/// The canonicalizer every stage runs (without region simplification).
std::unique_ptr<Pass> createFSDPCanonicalizer();

/// import-shard, [recompute], partition, expand, canonicalize.
void populateFSDPPartition(OpPassManager &pm,
                           const FSDPPipelineOptions &options);
/// [quantize], bucket, canonicalize, [schedule].
void populateFSDPCollectives(OpPassManager &pm,
                             const FSDPPipelineOptions &options);
/// [optimizer] (when an optimizer or one of its options is given).
void populateFSDPOptimizer(OpPassManager &pm,
                           const FSDPPipelineOptions &options);

/// Outline segments, elementwise ops to linalg, and with compute=fast fold
/// transposes and fuse elementwise ops (on tensors). With compute=gpu and
/// `fuseAttention`, attention chains become the fused kernels first, with
/// `fuseCrossEntropy` cross-entropy chains row passes.
void populateFSDPTensorCompute(OpPassManager &pm, ComputeMode compute,
                               bool fuseAttention = true,
                               bool fuseCrossEntropy = true);
/// One-shot bufferization and deallocation (early frees, then the
/// ownership-based rest), and with `arena` the buffer assignment. With
/// `deviceArena` (compute=gpu) the arena is the rank's device arena: no
/// sanitizer marks (its addresses are not host memory) and the entry's
/// results stay allocations of their own, which the runner frees.
void populateFSDPBufferization(OpPassManager &pm, bool arena = true,
                               bool deviceArena = false);
/// Collectives to fsdprt calls, kernel outlining, and with compute=fast the
/// BLAS calls and specialized loops.
void populateFSDPRuntimeCalls(OpPassManager &pm, ComputeMode compute);
/// compute=gpu: contractions to cuBLAS calls, every other kernel to a
/// gpu.launch, buffers on the device, kernels outlined into gpu.modules,
/// device ops ordered on the compute stream, kernels lowered to NVVM.
void populateFSDPGpuKernels(OpPassManager &pm, const FSDPGpuOptions &gpu);
/// Loops, control flow and everything else to the LLVM dialect (with
/// compute=gpu the GPU ops' host side too).
void populateFSDPLowerToLLVMDialect(OpPassManager &pm,
                                    ComputeMode compute = ComputeMode::Fast);
/// compute=gpu: the toolkit check and the kernels to a binary.
void populateFSDPGpuBinary(OpPassManager &pm, const FSDPGpuOptions &gpu);

/// Registers the `fsdp-pipeline` and `fsdp-lower-to-llvm` pipelines.
void registerFSDPPipelines();

/// Registers every fsdp pass (transforms and conversion) and both pipelines.
void registerFSDPPassesAndPipelines();

/// One line per fsdp pass and pipeline (`--name: summary`), for tool help.
std::string describeFSDPPassesAndPipelines();

} // namespace mlir::fsdp

#endif

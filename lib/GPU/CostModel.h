//===- CostModel.h - the GPU cost model's ceilings and per-op costs -*- C++
//-*-===//
//
// The pieces of fsdp-gpu-cost-report (GpuCostReport.cpp): one table of
// ceilings per GPU (CostModelCeilings.cpp), the cost of one kernel launch
// from its body (CostModelKernels.cpp), of each runtime call, copy and
// synchronization (CostModelCalls.cpp), and the report's totals, text and
// JSON (CostReportOutput.cpp). The rules are in docs/GPU.md ("Cost model").
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_GPU_COSTMODEL_H
#define FSDP_GPU_COSTMODEL_H

#include "fsdp/GPU/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::fsdp::gpucost {

//===----------------------------------------------------------------------===//
// The ceilings (docs/GPU.md, "Cost model", keeps the table's copy)
//===----------------------------------------------------------------------===//

/// One GPU's ceilings. Peaks are datasheet figures (dense, no sparsity);
/// "achieved" ones are measured where noted in docs/GPU.md.
struct GpuCeilings {
  const char *key;
  const char *name;
  double hbmBytesPerS;  ///< datasheet memory bandwidth
  double copyBytesPerS; ///< achieved device copy bandwidth (read + write)
  int64_t sms;          ///< streaming multiprocessors
  int64_t threadsPerSM; ///< most resident threads per SM
  int64_t blocksPerSM;  ///< most resident blocks per SM
  double l2Bytes;       ///< L2 cache size
  double bf16Peak;      ///< dense bf16/f16 tensor-core FLOP/s
  double tf32Peak;      ///< dense TF32 tensor-core FLOP/s
  double fp32Peak;      ///< FP32 SIMT FLOP/s
  double cublasBf16;    ///< achieved bf16 cuBLAS FLOP/s on large gemms
  double cublasTf32;    ///< achieved TF32 cuBLAS FLOP/s
  double sgemm;         ///< achieved FP32 (SIMT) cuBLAS FLOP/s
  double dramLatencyS;  ///< a dependent load from HBM under load
  double l2LatencyS;    ///< a dependent load served by L2
  // The host's issue cost of each call (the host runs ahead of the device
  // and overlaps it), and the device's gap before each node it runs.
  double kernelIssueS;    ///< host: one kernel launch (cuLaunchKernel)
  double gemmIssueS;      ///< host: one cuBLAS gemm call
  double memcpyIssueS;    ///< host: one memcpy call
  double kernelGapS;      ///< device: before a kernel issued to a stream
  double memcpyGapS;      ///< device: before a copy issued to a stream
  double graphLaunchS;    ///< one cudaGraphLaunch of the step, until it runs
  double graphKernelGapS; ///< device: before a kernel node of a graph
  double graphMemcpyGapS; ///< device: before a memcpy node of a graph
  double graphGemmGapS;   ///< device: before a cuBLAS kernel in a graph
  double allocS;          ///< host: one stream-ordered device allocation
  double freeS;           ///< host: one stream-ordered device free
  double syncS;           ///< host: waking up once the stream has drained
  double collectiveS;     ///< host: one collective call (NCCL launch)
  double pcieBytesPerS;   ///< host <-> device copies (pageable)
  double linkBytesPerS;   ///< NVLink bus bandwidth a ring collective gets
};

constexpr double kTB = 1e12, kGB = 1e9, kMB = 1e6, kUs = 1e-6, kNs = 1e-9;

/// Every GPU the report knows, and the one named `key` (any case; null if
/// unknown).
ArrayRef<GpuCeilings> knownGpus();
const GpuCeilings *lookupGpu(StringRef key);

/// The fraction of the GPU's peak that the ideal assumes.
constexpr double kIdealFlopFraction = 0.7, kIdealBandwidthFraction = 0.8;
/// The fraction of the FP32 peak the fused attention kernels' f32 products
/// (fmaf from shared memory) are assumed to reach; unmeasured.
constexpr double kAttentionFp32Fraction = 0.5;
/// The fraction of the dense bf16 tensor-core peak the tensor-core attention
/// kernels (mma.sync m16n8k16, bf16 at head dims 64 and 128) are assumed to
/// reach: FlashAttention-2's, which also issues mma.sync, measured at about
/// 35% of an H100's peak (FlashAttention-3, Shah et al. 2024); unmeasured
/// here.
constexpr double kAttentionMmaFraction = 0.35;
/// Whether the runtime runs an attention call on the tensor cores
/// (runtime/cuda/attention_mma_kernels.cu: bf16, head dim 64 or 128).
inline bool attentionOnTensorCores(bool bf16, int64_t headDim) {
  return bf16 && (headDim == 64 || headDim == 128);
}
/// The output tile whose count sets a gemm's wave efficiency.
constexpr int64_t kGemmTile = 128;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t elementBytes(Type type);
/// Bytes of a statically shaped memref; nullopt otherwise.
std::optional<double> memrefBytes(Type type);
/// The buffer a view is taken of (through subviews, reshapes, casts).
Value rootBuffer(Value v);
std::optional<int64_t> constantInt(Value v);
std::string formatSeconds(double s);
std::string formatBytes(double b);

//===----------------------------------------------------------------------===//
// One device operation's cost
//===----------------------------------------------------------------------===//

enum class Kind { Launch, Gemm, Memcpy, Memset, Alloc, Free, Sync, Collective };

const char *kindName(Kind k);

/// One execution of a device operation.
struct OpCost {
  Kind kind;
  std::string name;
  double bytes = 0, flops = 0, seconds = 0, idealSeconds = 0;
  /// Device memory allocated (alloc) or copied (memcpy) per execution.
  double allocBytes = 0, copyBytes = 0;
  /// Kernel launches per execution (a runtime call may launch several).
  double launches = 1;
  bool hostCopy = false, syncs = false, f32Gemm = false;
  /// Per execution: device nodes (kernels, copies, cuBLAS kernels) it puts
  /// in the stream, the host's cost of issuing them, the device's gaps
  /// before them when issued to a stream and when replayed from a graph
  /// (docs/GPU.md, "Cost model": `seconds` is the device's work alone).
  double nodes = 0, issueSeconds = 0, gapSeconds = 0, graphGapSeconds = 0;
  std::string why;
};

/// The overheads of `kernels` kernel launches, of one cuBLAS gemm (its
/// kernels: `kernels`), of one memcpy, of one collective call.
void addKernelOverheads(OpCost &c, const GpuCeilings &g, double kernels = 1);
void addGemmOverheads(OpCost &c, const GpuCeilings &g, double kernels = 1);
void addMemcpyOverheads(OpCost &c, const GpuCeilings &g);
void addCollectiveOverheads(OpCost &c, const GpuCeilings &g);

/// What costing an operation reads: the GPU, the module's settings, and the
/// operations already warned about (one warning each).
struct CostContext {
  const GpuCeilings *g = nullptr;
  bool tf32 = false;
  /// The module's device mesh (the collectives' groups), if it has one.
  MeshOp mesh;
  /// Ranks every collective runs over (0: its group in the mesh).
  int64_t ranks = 0;
  SymbolTableCollection *symbols = nullptr;
  DenseSet<Operation *> warned;

  void warnOnce(Operation *op, const Twine &message) {
    if (warned.insert(op).second)
      op->emitWarning() << "gpu cost report: " << message;
  }
};

/// A launch of an outlined kernel, from what one thread of it does.
std::optional<OpCost> costLaunch(CostContext &ctx, gpu::LaunchFuncOp launch);
/// fsdprt_gpu_gemm_*: bf16 operands (else f32), an f32 C.
std::optional<OpCost> costGemm(CostContext &ctx, func::CallOp call, bool bf16,
                               bool f32Output = false);
/// fsdprt_gpu_attention_{fwd,bwd}_*.
std::optional<OpCost> costAttention(CostContext &ctx, func::CallOp call,
                                    bool backward, bool bf16);
/// fsdprt_gpu_scatter_add_rows_* with `eb` bytes per element.
std::optional<OpCost> costScatter(CostContext &ctx, func::CallOp call,
                                  double eb);
/// fsdprt_gpu_grouped_matmul_* (CostModelGrouped.cpp).
std::optional<OpCost> costGroupedMatmul(CostContext &ctx, func::CallOp call,
                                        bool bf16);
std::optional<OpCost> costMemcpy(CostContext &ctx, gpu::MemcpyOp copy);
std::optional<OpCost> costMemset(CostContext &ctx, gpu::MemsetOp set);
OpCost costSync(CostContext &ctx, StringRef what);
/// fsdprt_jit_<kind>[_members][_start]: `blocking` when the host waits for
/// it.
std::optional<OpCost> costCollective(CostContext &ctx, func::CallOp call,
                                     StringRef kind, bool blocking);

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

/// A device operation of the IR with how often the step runs it.
struct Site {
  Operation *op;
  OpCost cost;
  double count = 0;
};

/// The sites in the order the step first runs them.
using Sites = llvm::MapVector<Operation *, Site>;

/// The order in which the step runs its device operations: a site, or a
/// host loop's body run `trips` times (CostModelTimeline.cpp).
struct TraceItem {
  Operation *op = nullptr;
  double trips = 1;
  std::vector<TraceItem> body;
};
using Trace = std::vector<TraceItem>;

/// The step on two timelines, the host's and the device's (docs/GPU.md,
/// "Cost model"): streamed (every call issued by the host, as the first
/// steps run) and replayed from a CUDA graph (no host issue, one graph
/// launch, each node's gap on the device).
struct Timeline {
  double streamedSeconds = 0, graphSeconds = 0;
  /// Streamed: the host's issue time, the device's gaps and the time the
  /// device waited for the host (an op issued after the previous ended).
  double hostIssueSeconds = 0, streamedGapSeconds = 0, hostBoundSeconds = 0;
  double graphGapSeconds = 0;
};
Timeline timelineOf(const Trace &trace, const Sites &sites,
                    const GpuCeilings &g);

struct Totals {
  double launches = 0, gemms = 0, f32Gemms = 0, bf16Gemms = 0, memcpys = 0,
         memcpyBytes = 0, hostCopies = 0, memsets = 0, allocs = 0,
         allocBytes = 0, frees = 0, syncs = 0, collectives = 0,
         collectiveBytes = 0, bytes = 0, flops = 0, gemmFlops = 0, seconds = 0,
         idealSeconds = 0, idealBf16Seconds = 0;
  std::map<Kind, double> secondsByKind;
  Timeline timeline;
  /// A CUDA graph can replay the step: no device allocation, no host
  /// synchronization inside (docs/GPU.md, "CUDA graphs").
  bool capturable() const { return allocs == 0 && syncs == 0; }
  /// The step's time: the graph replay when capturable, else streamed.
  double estimateSeconds() const {
    return capturable() ? timeline.graphSeconds : timeline.streamedSeconds;
  }
};

/// The totals of `sites`; `seconds` is the device's work, the timeline
/// adds the overheads.
Totals totalsOf(const Sites &sites, const Trace &trace, const GpuCeilings &g);
/// The report of `function` as text: every site when `listOps`, the `top`
/// largest, the totals.
void printText(llvm::raw_ostream &os, StringRef function, const Sites &sites,
               const Totals &t, const GpuCeilings &g, bool listOps,
               int64_t top);
void writeJson(llvm::json::OStream &j, StringRef function, const Sites &sites,
               const Totals &t);

} // namespace mlir::fsdp::gpucost

#endif // FSDP_GPU_COSTMODEL_H

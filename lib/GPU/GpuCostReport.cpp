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
//===----------------------------------------------------------------------===//

#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUCOSTREPORT
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

//===----------------------------------------------------------------------===//
// The ceilings (docs/GPU.md, "Cost model", keeps this table's copy)
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
  double launchS;       ///< one kernel launch (host issue + device gap)
  double gemmCallS;     ///< one cuBLAS call's fixed cost
  double memcpyS;       ///< one memcpy call's fixed cost
  double allocS;        ///< one stream-ordered device allocation
  double freeS;         ///< one stream-ordered device free
  double syncS;         ///< one host synchronization (stream drained)
  double collectiveS;   ///< one collective's fixed cost (NCCL launch)
  double pcieBytesPerS; ///< host <-> device copies (pageable)
  double linkBytesPerS; ///< NVLink bus bandwidth a ring collective gets
};

constexpr double kTB = 1e12, kGB = 1e9, kMB = 1e6, kUs = 1e-6, kNs = 1e-9;

// H100 and H200 SXM share the GH100 compute (132 SMs, same clocks): their
// gemm rates are the H200's measured ones; they differ in memory. The H100's
// copy bandwidth is the H200's measured fraction of its datasheet (0.9).
constexpr GpuCeilings kGpus[] = {
    {"h200",    "NVIDIA H200 SXM 141GB",
     4.8 * kTB, 4.3 * kTB,
     132,       2048,
     32,        50 * kMB,
     989 * kTB, 494 * kTB,
     67 * kTB,  790 * kTB,
     395 * kTB, 52 * kTB,
     500 * kNs, 200 * kNs,
     3 * kUs,   4 * kUs,
     4 * kUs,   2 * kUs,
     1 * kUs,   10 * kUs,
     10 * kUs,  20 * kGB,
     370 * kGB},
    {"h100",     "NVIDIA H100 SXM 80GB",
     3.35 * kTB, 3.0 * kTB,
     132,        2048,
     32,         50 * kMB,
     989 * kTB,  494 * kTB,
     67 * kTB,   790 * kTB,
     395 * kTB,  52 * kTB,
     500 * kNs,  200 * kNs,
     3 * kUs,    4 * kUs,
     4 * kUs,    2 * kUs,
     1 * kUs,    10 * kUs,
     10 * kUs,   20 * kGB,
     370 * kGB},
    {"a100",     "NVIDIA A100 SXM 80GB",
     2.04 * kTB, 1.8 * kTB,
     108,        2048,
     32,         40 * kMB,
     312 * kTB,  156 * kTB,
     19.5 * kTB, 250 * kTB,
     125 * kTB,  18 * kTB,
     500 * kNs,  200 * kNs,
     3 * kUs,    4 * kUs,
     4 * kUs,    2 * kUs,
     1 * kUs,    10 * kUs,
     10 * kUs,   20 * kGB,
     230 * kGB},
};

const GpuCeilings *lookupGpu(StringRef key) {
  for (const GpuCeilings &g : kGpus)
    if (key.equals_insensitive(g.key))
      return &g;
  return nullptr;
}

/// The fraction of the GPU's peak that the ideal assumes.
constexpr double kIdealFlopFraction = 0.7, kIdealBandwidthFraction = 0.8;
/// The fraction of the FP32 peak the fused attention kernels' f32 products
/// (fmaf from shared memory) are assumed to reach; unmeasured.
constexpr double kAttentionFp32Fraction = 0.5;
/// The output tile whose count sets a gemm's wave efficiency.
constexpr int64_t kGemmTile = 128;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t elementBytes(Type type) {
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
  return 0;
}

/// Bytes of a statically shaped memref; nullopt otherwise.
std::optional<double> memrefBytes(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return std::nullopt;
  int64_t eb = elementBytes(memref.getElementType());
  if (!eb)
    return std::nullopt;
  return double(memref.getNumElements()) * double(eb);
}

/// The buffer a view is taken of (through subviews, reshapes, casts).
Value rootBuffer(Value v) {
  for (int i = 0; i < 64; ++i) {
    auto view = v.getDefiningOp<ViewLikeOpInterface>();
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

std::optional<int64_t> constantInt(Value v) {
  APInt value;
  if (v && matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

std::string formatSeconds(double s) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (s >= 1e-3)
    os << llvm::format("%.3f ms", s * 1e3);
  else
    os << llvm::format("%.2f us", s * 1e6);
  return text;
}

std::string formatBytes(double b) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (b >= 1e9)
    os << llvm::format("%.2f GB", b / 1e9);
  else if (b >= 1e6)
    os << llvm::format("%.2f MB", b / 1e6);
  else if (b >= 1e3)
    os << llvm::format("%.2f kB", b / 1e3);
  else
    os << llvm::format("%.0f B", b);
  return text;
}

//===----------------------------------------------------------------------===//
// Kernel bodies: what one thread does
//===----------------------------------------------------------------------===//

/// The indices of one thread of a launch, and the values of the loop
/// induction variables on the way to the op being evaluated (their first
/// value: the thread's first iteration).
struct ThreadEnv {
  int64_t thread[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int64_t blockDim[3] = {1, 1, 1}, gridDim[3] = {1, 1, 1};
  DenseMap<Value, int64_t> known;
};

std::optional<int64_t> evaluate(Value v, const ThreadEnv &env, int depth = 0);

std::optional<int64_t> evaluateOp(Operation *op, const ThreadEnv &env,
                                  int depth) {
  auto operand = [&](unsigned i) {
    return evaluate(op->getOperand(i), env, depth + 1);
  };
  auto dim = [](gpu::Dimension d) { return static_cast<unsigned>(d); };
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return i.getValue().getSExtValue();
    return std::nullopt;
  }
  if (auto t = dyn_cast<gpu::ThreadIdOp>(op))
    return env.thread[dim(t.getDimension())];
  if (auto b = dyn_cast<gpu::BlockIdOp>(op))
    return env.block[dim(b.getDimension())];
  if (auto b = dyn_cast<gpu::BlockDimOp>(op))
    return env.blockDim[dim(b.getDimension())];
  if (auto g = dyn_cast<gpu::GridDimOp>(op))
    return env.gridDim[dim(g.getDimension())];
  if (auto g = dyn_cast<gpu::GlobalIdOp>(op)) {
    unsigned d = dim(g.getDimension());
    return env.block[d] * env.blockDim[d] + env.thread[d];
  }
  if (isa<gpu::LaneIdOp>(op))
    return env.thread[0] % 32;
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op))
    return operand(0);
  if (auto select = dyn_cast<arith::SelectOp>(op)) {
    std::optional<int64_t> c = operand(0);
    if (!c)
      return std::nullopt;
    return *c ? operand(1) : operand(2);
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    std::optional<int64_t> a = operand(0), b = operand(1);
    if (!a || !b)
      return std::nullopt;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return *a == *b;
    case arith::CmpIPredicate::ne:
      return *a != *b;
    case arith::CmpIPredicate::slt:
    case arith::CmpIPredicate::ult:
      return *a < *b;
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::ule:
      return *a <= *b;
    case arith::CmpIPredicate::sgt:
    case arith::CmpIPredicate::ugt:
      return *a > *b;
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::uge:
      return *a >= *b;
    }
    return std::nullopt;
  }
  if (auto apply = dyn_cast<affine::AffineApplyOp>(op)) {
    SmallVector<int64_t> operands;
    for (Value v : apply.getMapOperands()) {
      std::optional<int64_t> x = evaluate(v, env, depth + 1);
      if (!x)
        return std::nullopt;
      operands.push_back(*x);
    }
    SmallVector<int64_t> results = apply.getAffineMap().compose(operands);
    if (results.size() != 1)
      return std::nullopt;
    return results.front();
  }
  if (op->getNumOperands() != 2 || op->getNumResults() != 1)
    return std::nullopt;
  std::optional<int64_t> a = operand(0), b = operand(1);
  if (!a || !b)
    return std::nullopt;
  int64_t x = *a, y = *b;
  if (isa<arith::AddIOp>(op))
    return x + y;
  if (isa<arith::SubIOp>(op))
    return x - y;
  if (isa<arith::MulIOp>(op))
    return x * y;
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::FloorDivSIOp>(op))
    return y ? std::optional<int64_t>(x / y) : std::nullopt;
  if (isa<arith::CeilDivUIOp, arith::CeilDivSIOp>(op))
    return y ? std::optional<int64_t>((x + y - 1) / y) : std::nullopt;
  if (isa<arith::RemUIOp, arith::RemSIOp>(op))
    return y ? std::optional<int64_t>(x % y) : std::nullopt;
  if (isa<arith::MinSIOp, arith::MinUIOp>(op))
    return std::min(x, y);
  if (isa<arith::MaxSIOp, arith::MaxUIOp>(op))
    return std::max(x, y);
  if (isa<arith::AndIOp>(op))
    return x & y;
  if (isa<arith::OrIOp>(op))
    return x | y;
  if (isa<arith::ShLIOp>(op))
    return x << y;
  if (isa<arith::ShRUIOp, arith::ShRSIOp>(op))
    return x >> y;
  return std::nullopt;
}

std::optional<int64_t> evaluate(Value v, const ThreadEnv &env, int depth) {
  if (depth > 64)
    return std::nullopt;
  auto it = env.known.find(v);
  if (it != env.known.end())
    return it->second;
  if (Operation *op = v.getDefiningOp())
    return evaluateOp(op, env, depth);
  return std::nullopt;
}

/// What one (average) thread of a launch does, and the longest chain of
/// dependent loads any thread waits for.
struct ThreadWork {
  double loadBytes = 0, storeBytes = 0, flops = 0;
  /// Rounds of dependent loads (loop iterations whose loads the thread
  /// waits for) of the first thread: the latency chain.
  double chain = 0;
  /// Bytes each buffer argument sees (per thread, average).
  DenseMap<Value, double> bufferBytes;
  /// Ops whose trip count or branch could not be evaluated.
  SmallVector<Operation *> unknown;
};

bool isFloatArith(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  Type type = getElementTypeOrSelf(op->getResult(0).getType());
  if (!isa<FloatType>(type))
    return false;
  if (isa<math::MathDialect>(op->getDialect()))
    return true;
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
             arith::MinNumFOp, arith::NegFOp, arith::RemFOp>(op);
}

/// Walks `block` for one thread: `avg` is the average number of times the
/// thread runs it. Returns the block's latency chain (one round if it loads
/// directly, plus its loops' rounds).
double walkKernelBlock(Block &block, ThreadEnv &env, double avg,
                       ThreadWork &work) {
  double chain = 0;
  bool loads = false;
  for (Operation &op : block) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      double b = elementBytes(load.getType()) * avg;
      work.loadBytes += b;
      work.bufferBytes[rootBuffer(load.getMemref())] += b;
      loads = true;
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      double b = elementBytes(store.getValueToStore().getType()) * avg;
      work.storeBytes += b;
      work.bufferBytes[rootBuffer(store.getMemref())] += b;
      continue;
    }
    if (auto vload = dyn_cast<vector::LoadOp>(op)) {
      VectorType t = vload.getVectorType();
      double b = t.getNumElements() * elementBytes(t.getElementType()) * avg;
      work.loadBytes += b;
      work.bufferBytes[rootBuffer(vload.getBase())] += b;
      loads = true;
      continue;
    }
    if (auto vstore = dyn_cast<vector::StoreOp>(op)) {
      VectorType t = vstore.getVectorType();
      double b = t.getNumElements() * elementBytes(t.getElementType()) * avg;
      work.storeBytes += b;
      work.bufferBytes[rootBuffer(vstore.getBase())] += b;
      continue;
    }
    if (isFloatArith(&op)) {
      work.flops += (isa<math::FmaOp>(op) ? 2 : 1) * avg;
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> lb = evaluate(loop.getLowerBound(), env);
      std::optional<int64_t> ub = evaluate(loop.getUpperBound(), env);
      std::optional<int64_t> step = evaluate(loop.getStep(), env);
      double trips = 1, maxTrips = 1;
      if (lb && ub && step && *step > 0) {
        // The average over threads of a loop strided by the thread count
        // (grid-stride, lane-stride) is the fractional count of the first
        // thread; the longest thread runs its ceiling.
        trips = std::max(0.0, double(*ub - *lb) / double(*step));
        maxTrips = std::ceil(trips);
        env.known[loop.getInductionVar()] = *lb;
      } else {
        work.unknown.push_back(&op);
      }
      chain +=
          maxTrips * walkKernelBlock(*loop.getBody(), env, avg * trips, work);
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      // The fraction of the first warp's lanes that take the branch (a
      // `lane == 0` store is one lane in 32, a bounds check all of them).
      int64_t taken = 0;
      bool known = true;
      int64_t saved = env.thread[0];
      for (int64_t lane = 0; lane < 32 && known; ++lane) {
        env.thread[0] = saved + lane;
        std::optional<int64_t> c = evaluate(branch.getCondition(), env);
        if (!c)
          known = false;
        else
          taken += *c != 0;
      }
      env.thread[0] = saved;
      double fraction = known ? taken / 32.0 : 1.0;
      if (!known)
        work.unknown.push_back(&op);
      double then = 0, other = 0;
      if (fraction > 0 || !known)
        then = walkKernelBlock(branch.getThenRegion().front(), env,
                               avg * fraction, work);
      if (!branch.getElseRegion().empty() && (fraction < 1 || !known))
        other = walkKernelBlock(branch.getElseRegion().front(), env,
                                avg * (known ? 1 - fraction : 1.0), work);
      chain += std::max(then, other);
      continue;
    }
    for (Region &region : op.getRegions()) {
      if (isa<scf::WhileOp>(op))
        work.unknown.push_back(&op);
      for (Block &inner : region)
        chain += walkKernelBlock(inner, env, avg, work);
    }
  }
  return chain + (loads ? 1 : 0);
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

enum class Kind { Launch, Gemm, Memcpy, Memset, Alloc, Free, Sync, Collective };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Launch:
    return "launch";
  case Kind::Gemm:
    return "gemm";
  case Kind::Memcpy:
    return "memcpy";
  case Kind::Memset:
    return "memset";
  case Kind::Alloc:
    return "alloc";
  case Kind::Free:
    return "free";
  case Kind::Sync:
    return "sync";
  case Kind::Collective:
    return "collective";
  }
  return "?";
}

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
  std::string why;
};

/// A device operation of the IR with how often the step runs it.
struct Site {
  Operation *op;
  OpCost cost;
  double count = 0;
};

struct Totals {
  double launches = 0, gemms = 0, f32Gemms = 0, bf16Gemms = 0, memcpys = 0,
         memcpyBytes = 0, hostCopies = 0, memsets = 0, allocs = 0,
         allocBytes = 0, frees = 0, syncs = 0, collectives = 0,
         collectiveBytes = 0, bytes = 0, flops = 0, gemmFlops = 0, seconds = 0,
         idealSeconds = 0, idealBf16Seconds = 0;
  std::map<Kind, double> secondsByKind;
};

struct FSDPGpuCostReportPass
    : public mlir::fsdp::impl::FSDPGpuCostReportBase<FSDPGpuCostReportPass> {
  using Base::Base;

  const GpuCeilings *g = nullptr;
  bool tf32 = false;
  /// The run's symbol tables (the pass is copied when cloned: a pointer).
  SymbolTableCollection *symbols = nullptr;
  /// The module's device mesh (the collectives' groups), if it has one.
  MeshOp mesh;
  /// Per report: the sites in the order the step first runs them.
  llvm::MapVector<Operation *, Site> sites;
  DenseSet<Operation *> warned;
  /// Launch costs by (launch op), computed once per site.
  SmallVector<func::FuncOp> stack;

  void warnOnce(Operation *op, const Twine &message) {
    if (warned.insert(op).second)
      op->emitWarning() << "gpu cost report: " << message;
  }

  void add(Operation *op, double count, const OpCost &cost) {
    auto [it, inserted] = sites.try_emplace(op, Site{op, cost, 0});
    it->second.count += count;
  }

  //--- per operation -----------------------------------------------------

  std::optional<OpCost> costLaunch(gpu::LaunchFuncOp launch) {
    auto kernel = symbols->lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    if (!kernel || kernel.getBody().empty()) {
      warnOnce(launch, "cannot cost a launch of a kernel without a body");
      return std::nullopt;
    }
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    ThreadEnv env;
    Value gridValues[3] = {grid.x, grid.y, grid.z};
    Value blockValues[3] = {block.x, block.y, block.z};
    for (int d = 0; d < 3; ++d) {
      std::optional<int64_t> gd = constantInt(gridValues[d]);
      std::optional<int64_t> bd = constantInt(blockValues[d]);
      if (!gd || !bd || *gd < 1 || *bd < 1) {
        warnOnce(launch, "cannot cost a launch whose grid and block sizes "
                         "are not positive constants");
        return std::nullopt;
      }
      env.gridDim[d] = *gd;
      env.blockDim[d] = *bd;
    }
    // Kernel arguments stand for the launch's operands.
    Block &entry = kernel.getBody().front();
    ThreadWork work;
    double chain = walkKernelBlock(entry, env, 1.0, work);
    for (Operation *op : work.unknown)
      warnOnce(op, "trip count or branch not known for the first thread of "
                   "a launch; costed as run once");

    double blocks = double(env.gridDim[0]) * env.gridDim[1] * env.gridDim[2];
    double threadsPerBlock =
        double(env.blockDim[0]) * env.blockDim[1] * env.blockDim[2];
    double threads = blocks * threadsPerBlock;

    OpCost c;
    c.kind = Kind::Launch;
    c.name = (launch.getKernelModuleName().getValue() +
              "::" + launch.getKernelName().getValue())
                 .str();
    c.bytes = (work.loadBytes + work.storeBytes) * threads;
    c.flops = work.flops * threads;

    // Resident blocks per SM: the thread and block limits.
    double perSM = std::max(
        1.0, std::min<double>(g->blocksPerSM,
                              std::floor(g->threadsPerSM / threadsPerBlock)));
    double waves = std::ceil(blocks / (g->sms * perSM));
    // Everything the kernel touches fits in L2: dependent loads wait for L2.
    double footprint = 0, ideal = 0;
    for (auto [buffer, perThread] : work.bufferBytes) {
      double total = perThread * threads;
      std::optional<double> size = memrefBytes(buffer.getType());
      footprint += size ? *size : total;
      ideal += size ? std::min(*size, total) : total;
    }
    bool inL2 = footprint <= g->l2Bytes;
    double latency = inL2 ? g->l2LatencyS : g->dramLatencyS;
    double tBandwidth = c.bytes / g->copyBytesPerS;
    double tLatency = waves * chain * latency;
    double tCompute = c.flops / g->fp32Peak;
    double t = std::max({tBandwidth, tLatency, tCompute});
    c.seconds = g->launchS + t;
    c.idealSeconds = ideal / (kIdealBandwidthFraction * g->hbmBytesPerS);

    std::string why;
    llvm::raw_string_ostream os(why);
    os << llvm::format("%.0f", blocks) << " blocks x "
       << llvm::format("%.0f", threadsPerBlock) << " threads, "
       << llvm::format("%.0f", waves) << (waves == 1 ? " wave" : " waves")
       << ", " << llvm::format("%.0f", chain) << " dependent loads per thread ("
       << (inL2 ? "L2" : "HBM") << "), ";
    if (t == tCompute && tCompute > 0)
      os << "compute-bound";
    else if (t == tLatency && tLatency > tBandwidth)
      os << "latency-bound";
    else
      os << "bandwidth-bound";
    double fraction = t > 0 ? tBandwidth / t : 0;
    os << " at " << llvm::format("%.1f", 100 * fraction) << "% of "
       << llvm::format("%.2f", g->copyBytesPerS / kTB) << " TB/s";
    c.why = why;
    return c;
  }

  std::optional<OpCost> costGemm(func::CallOp call, bool bf16,
                                 bool f32Output = false) {
    // (trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
    //  stride_b, beta, c, ldc, stride_c, batch)
    if (call.getNumOperands() != 17) {
      warnOnce(call, "cannot cost a gemm call with " +
                         Twine(call.getNumOperands()) +
                         " operands (17 expected)");
      return std::nullopt;
    }
    std::optional<int64_t> m = constantInt(call.getOperand(2));
    std::optional<int64_t> n = constantInt(call.getOperand(3));
    std::optional<int64_t> k = constantInt(call.getOperand(4));
    std::optional<int64_t> batch = constantInt(call.getOperand(16));
    if (!m || !n || !k || !batch) {
      warnOnce(call, "cannot cost a gemm whose m, n, k and batch are not "
                     "constants");
      return std::nullopt;
    }
    bool accumulates = true;
    FloatAttr beta;
    if (matchPattern(call.getOperand(12), m_Constant(&beta)))
      accumulates = !beta.getValue().isZero();
    double eb = bf16 ? 2 : 4;
    double ebC = f32Output ? 4 : eb;
    double M = *m, N = *n, K = *k, B = *batch;
    OpCost c;
    c.kind = Kind::Gemm;
    c.name = call.getCallee().str();
    c.f32Gemm = !bf16;
    c.flops = 2 * M * N * K * B;
    c.bytes = ((M * K + K * N) * eb + M * N * (accumulates ? 2 : 1) * ebC) * B;
    double tiles = std::ceil(M / kGemmTile) * std::ceil(N / kGemmTile) * B;
    double waves = std::ceil(tiles / g->sms);
    double efficiency = tiles / (waves * g->sms);
    double rate = bf16 ? g->cublasBf16 : tf32 ? g->cublasTf32 : g->sgemm;
    double peak = bf16 ? g->bf16Peak : tf32 ? g->tf32Peak : g->fp32Peak;
    double tCompute = c.flops / (rate * efficiency);
    double tBandwidth = c.bytes / g->copyBytesPerS;
    c.seconds = g->gemmCallS + std::max(tCompute, tBandwidth);
    c.idealSeconds = c.flops / (kIdealFlopFraction * peak);
    std::string why;
    llvm::raw_string_ostream os(why);
    os << llvm::format("m %lld n %lld k %lld batch %lld", (long long)*m,
                       (long long)*n, (long long)*k, (long long)*batch)
       << ", "
       << (bf16   ? "bf16 tensor cores"
           : tf32 ? "TF32"
                  : "SGEMM")
       << " at " << llvm::format("%.0f", rate / kTB) << " TFLOP/s x "
       << llvm::format("%.0f", tiles) << " tiles on "
       << llvm::format("%.0f", waves) << (waves == 1 ? " wave" : " waves")
       << " (" << llvm::format("%.0f", 100 * efficiency) << "% filled), "
       << (tCompute >= tBandwidth ? "compute-bound" : "bandwidth-bound");
    c.why = why;
    return c;
  }

  /// The fused attention kernels (fsdp-gpu-fuse-attention): the forward
  /// reads Q, K, V and writes O and the row log-sum-exp; the backward (three
  /// launches) reads Q, K, V, O, dO and the log-sum-exp and writes dQ, dK,
  /// dV. Products run on the CUDA cores in f32 (no tensor cores): 4 x B H
  /// Tq Tk d FLOPs forward, 14 x backward (the scores recomputed twice),
  /// half of it under a causal mask; nothing of size T x T is stored.
  std::optional<OpCost> costAttention(func::CallOp call, bool backward,
                                      bool bf16) {
    unsigned n = call.getNumOperands();
    unsigned dims = backward ? 14 : 10;
    if (n != (backward ? 21u : 17u)) {
      warnOnce(call,
               "cannot cost an attention call with " + Twine(n) + " operands");
      return std::nullopt;
    }
    std::array<std::optional<int64_t>, 5> d;
    for (unsigned i = 0; i < 5; ++i)
      d[i] = constantInt(call.getOperand(dims + i));
    std::optional<int64_t> causal = constantInt(call.getOperand(n - 1));
    if (!d[0] || !d[1] || !d[2] || !d[3] || !d[4] || !causal) {
      warnOnce(call, "cannot cost an attention call whose shapes are not "
                     "constants");
      return std::nullopt;
    }
    double bh = double(*d[0]) * double(*d[1]), tq = *d[2], tk = *d[3],
           hd = *d[4];
    double eb = bf16 ? 2 : 4;
    double pairs = bh * tq * tk * (*causal ? 0.5 : 1.0);
    OpCost c;
    c.kind = Kind::Launch;
    c.name = call.getCallee().str();
    c.flops = (backward ? 14 : 4) * pairs * hd;
    double qo = bh * tq * hd * eb, kv = bh * tk * hd * eb, lse = bh * tq * 4;
    // Backward: Q, O, dO, dQ; K, V, dK, dV; lse read twice, delta written.
    c.bytes = backward ? 4 * qo + 4 * kv + 3 * lse : 2 * qo + 2 * kv + lse;
    double launches = backward ? 3 : 1;
    double tCompute = c.flops / (kAttentionFp32Fraction * g->fp32Peak);
    double tBandwidth = c.bytes / g->copyBytesPerS;
    c.seconds = launches * g->launchS + std::max(tCompute, tBandwidth);
    c.idealSeconds =
        c.flops / (kIdealFlopFraction * (bf16 ? g->bf16Peak : g->fp32Peak));
    std::string why;
    llvm::raw_string_ostream os(why);
    os << llvm::format("batch x heads %.0f, tq %.0f, tk %.0f, d %.0f", bh, tq,
                       tk, hd)
       << (*causal ? ", causal" : "")
       << (backward ? ", 3 launches" : ", 1 launch")
       << ", f32 CUDA-core products at "
       << llvm::format("%.0f", 100 * kAttentionFp32Fraction)
       << "% of the FP32 peak, "
       << (tCompute >= tBandwidth ? "compute-bound" : "bandwidth-bound");
    c.why = why;
    return c;
  }

  /// fsdprt_gpu_scatter_add_rows_* (runtime/cuda/scatter_kernels.cu): the
  /// sort keys written, a bitonic sort of them (one pass over the keys per
  /// launch: tiles of 1024 in shared memory, then each merge size beyond a
  /// tile as its global steps and one tile pass), the segments' rows read
  /// and the touched output rows read and written, and each launch's
  /// overhead. The keys live in the context's scratch buffer (no
  /// allocation).
  std::optional<OpCost> costScatter(func::CallOp call, double eb) {
    // (indices, index_bits, index_stride, tokens, source, source strides x2,
    //  output, output strides x2, slots, width)
    if (call.getNumOperands() != 12) {
      warnOnce(call, "cannot cost a scatter-add call with " +
                         Twine(call.getNumOperands()) +
                         " operands (12 expected)");
      return std::nullopt;
    }
    std::optional<int64_t> bits = constantInt(call.getOperand(1));
    std::optional<int64_t> tokens = constantInt(call.getOperand(3));
    std::optional<int64_t> slots = constantInt(call.getOperand(10));
    std::optional<int64_t> width = constantInt(call.getOperand(11));
    if (!bits || !tokens || !slots || !width) {
      warnOnce(call, "cannot cost a scatter-add whose tokens, slots and "
                     "width are not constants");
      return std::nullopt;
    }
    double T = *tokens, W = *width;
    double capacity = 1;
    while (capacity < T)
      capacity *= 2;
    constexpr double kTile = 1024;
    double tile = std::min(capacity, kTile);
    // Keys, the tile sort, then per merge size k > tile: log2(k / tile)
    // global steps and one tile pass; the segments.
    double sortPasses = capacity > 1 ? 1 : 0;
    for (double k = 2 * tile; k <= capacity; k *= 2)
      sortPasses += std::log2(k / tile) + 1;
    double launches = 2 + sortPasses;
    double keyBytes = 8 * capacity;
    double touched = std::min(T, double(*slots)) * W * eb;
    double dataBytes = T * (*bits / 8.0) + T * W * eb + 2 * touched;
    OpCost c;
    c.kind = Kind::Launch;
    c.name = call.getCallee().str();
    c.launches = launches;
    c.bytes = dataBytes + keyBytes * (1 + 2 * sortPasses + 1);
    c.flops = T * W;
    c.seconds = launches * g->launchS + c.bytes / g->copyBytesPerS;
    c.idealSeconds = dataBytes / (kIdealBandwidthFraction * g->hbmBytesPerS);
    std::string why;
    llvm::raw_string_ostream os(why);
    os << llvm::format("%lld tokens into %lld rows of %lld", (long long)T,
                       (long long)*slots, (long long)W)
       << ", " << llvm::format("%.0f", launches)
       << " launches (keys, bitonic sort of " << llvm::format("%.0f", capacity)
       << " keys in " << llvm::format("%.0f", sortPasses)
       << " passes, segments), bandwidth-bound, " << formatBytes(keyBytes)
       << " of keys in the scratch buffer";
    c.why = why;
    return c;
  }

  /// A buffer that lives on the host (a host copy's end).
  static bool isHostBuffer(Value v) {
    Value root = rootBuffer(v);
    return isa_and_nonnull<memref::AllocaOp, memref::GetGlobalOp,
                           memref::AllocOp>(root.getDefiningOp());
  }

  std::optional<OpCost> costMemcpy(gpu::MemcpyOp copy) {
    std::optional<double> bytes = memrefBytes(copy.getDst().getType());
    if (!bytes) {
      warnOnce(copy, "cannot cost a memcpy of a dynamically shaped buffer");
      return std::nullopt;
    }
    OpCost c;
    c.kind = Kind::Memcpy;
    c.name = "gpu.memcpy";
    c.copyBytes = *bytes;
    c.hostCopy = isHostBuffer(copy.getDst()) || isHostBuffer(copy.getSrc());
    if (c.hostCopy) {
      c.bytes = *bytes;
      c.seconds = g->memcpyS + *bytes / g->pcieBytesPerS;
      c.idealSeconds = *bytes / g->pcieBytesPerS;
      c.why = "host copy over PCIe";
    } else {
      c.bytes = 2 * *bytes;
      c.seconds = g->memcpyS + c.bytes / g->copyBytesPerS;
      c.idealSeconds = c.bytes / (kIdealBandwidthFraction * g->hbmBytesPerS);
      c.why = "device copy: read and write at the copy bandwidth";
    }
    return c;
  }

  std::optional<OpCost> costMemset(gpu::MemsetOp set) {
    std::optional<double> bytes = memrefBytes(set.getDst().getType());
    if (!bytes) {
      warnOnce(set, "cannot cost a memset of a dynamically shaped buffer");
      return std::nullopt;
    }
    OpCost c;
    c.kind = Kind::Memset;
    c.name = "gpu.memset";
    c.bytes = *bytes;
    c.seconds = g->launchS + *bytes / g->copyBytesPerS;
    c.idealSeconds = *bytes / (kIdealBandwidthFraction * g->hbmBytesPerS);
    c.why = "a fill kernel: write at the copy bandwidth";
    return c;
  }

  OpCost costSync(StringRef what) {
    OpCost c;
    c.kind = Kind::Sync;
    c.name = what.str();
    c.syncs = true;
    c.seconds = g->syncS;
    c.why = "the host waits for the stream to drain";
    return c;
  }

  std::optional<OpCost> costCollective(func::CallOp call, StringRef kind,
                                       bool blocking) {
    // (send, recv, count, dtype, ...)
    std::optional<int64_t> count = call.getNumOperands() > 3
                                       ? constantInt(call.getOperand(2))
                                       : std::nullopt;
    std::optional<int64_t> dtype = call.getNumOperands() > 3
                                       ? constantInt(call.getOperand(3))
                                       : std::nullopt;
    // fsdprt_dtype_t: f32, f64, f16, bf16, i32, i64, u8, i8.
    static constexpr double kDtypeBytes[] = {4, 8, 2, 2, 4, 8, 1, 1};
    if (!count || !dtype || *dtype < 0 || *dtype > 7) {
      warnOnce(call, "cannot cost a collective whose count and dtype are "
                     "not constants");
      return std::nullopt;
    }
    double bytes = *count * kDtypeBytes[*dtype];
    // The group: `ranks` when given, else the mesh axes of the group mask.
    double n = 1;
    if (ranks > 0) {
      n = ranks;
    } else if (mesh) {
      std::optional<int64_t> mask = constantInt(call.getOperands().back());
      for (auto [i, size] : llvm::enumerate(mesh.getAxisSizes()))
        if (mask && (*mask & (int64_t(1) << i)))
          n *= size;
    }
    OpCost c;
    c.kind = Kind::Collective;
    c.name = call.getCallee().str();
    c.syncs = blocking;
    double link = 0;
    if (kind == "all_gather" || kind == "reduce_scatter")
      link = (n - 1) * bytes; // count is one rank's part
    else
      link = 2 * (n - 1) / n * bytes;
    std::string why;
    llvm::raw_string_ostream os(why);
    if (n == 1) {
      c.bytes = 2 * bytes;
      c.seconds = g->collectiveS + c.bytes / g->copyBytesPerS;
      os << "one rank: a local copy";
    } else {
      c.bytes = link;
      c.seconds = g->collectiveS + link / g->linkBytesPerS;
      c.idealSeconds = link / g->linkBytesPerS;
      os << "ring over " << llvm::format("%.0f", n) << " ranks at "
         << llvm::format("%.0f", g->linkBytesPerS / kGB) << " GB/s";
    }
    if (blocking) {
      c.seconds += g->syncS;
      os << "; blocking: the host waits";
    }
    c.why = why;
    return c;
  }

  //--- walking the host code ---------------------------------------------

  void walkHostBlock(Block &block, double count) {
    for (Operation &op : block) {
      if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        if (sites.count(&op))
          sites[&op].count += count;
        else if (std::optional<OpCost> c = costLaunch(launch))
          add(&op, count, *c);
        continue;
      }
      if (isa<gpu::LaunchOp>(op)) {
        warnOnce(&op, "cannot cost a gpu.launch that is not outlined; run "
                      "the report after gpu-kernel-outlining");
        continue;
      }
      if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        if (std::optional<OpCost> c = costMemcpy(copy))
          add(&op, count, *c);
        continue;
      }
      if (auto set = dyn_cast<gpu::MemsetOp>(op)) {
        if (std::optional<OpCost> c = costMemset(set))
          add(&op, count, *c);
        continue;
      }
      if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        std::optional<double> bytes = memrefBytes(alloc.getType());
        if (!bytes) {
          warnOnce(&op, "cannot cost a dynamically shaped allocation");
          continue;
        }
        OpCost c;
        c.kind = Kind::Alloc;
        c.name = "gpu.alloc";
        c.allocBytes = *bytes;
        c.seconds = g->allocS;
        c.why = "stream-ordered pool allocation";
        add(&op, count, c);
        continue;
      }
      if (isa<gpu::DeallocOp>(op)) {
        OpCost c;
        c.kind = Kind::Free;
        c.name = "gpu.dealloc";
        c.seconds = g->freeS;
        c.why = "stream-ordered free";
        add(&op, count, c);
        continue;
      }
      if (auto wait = dyn_cast<gpu::WaitOp>(op)) {
        // `gpu.wait async` only starts a chain; the blocking form waits.
        if (!wait.getAsyncToken())
          add(&op, count, costSync("gpu.wait"));
        continue;
      }
      if (auto call = dyn_cast<func::CallOp>(op)) {
        walkCall(call, count);
        continue;
      }
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        std::optional<int64_t> lb = constantInt(loop.getLowerBound());
        std::optional<int64_t> ub = constantInt(loop.getUpperBound());
        std::optional<int64_t> step = constantInt(loop.getStep());
        double trips = 1;
        if (lb && ub && step && *step > 0)
          trips = std::max<int64_t>(0, (*ub - *lb + *step - 1) / *step);
        else if (containsDeviceWork(loop))
          warnOnce(&op, "host loop without constant bounds around device "
                        "operations; costed as run once");
        walkHostBlock(*loop.getBody(), count * trips);
        continue;
      }
      if (isa<linalg::LinalgOp>(op)) {
        warnOnce(&op, "cannot cost a linalg op left in host code");
        continue;
      }
      if (isa<scf::WhileOp>(op) && containsDeviceWork(&op))
        warnOnce(&op, "host while loop around device operations; costed as "
                      "run once");
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
    auto fn = symbols->lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (fn && !fn.isExternal()) {
      if (llvm::is_contained(stack, fn)) {
        warnOnce(call, "recursive call; not followed");
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
              costGemm(call, callee != "fsdprt_gpu_gemm_f32",
                       callee == "fsdprt_gpu_gemm_bf16_f32"))
        add(call, count, *c);
      return;
    }
    if (callee.starts_with("fsdprt_gpu_attention_fwd_") ||
        callee.starts_with("fsdprt_gpu_attention_bwd_")) {
      if (std::optional<OpCost> c = costAttention(
              call, callee.contains("_bwd_"), callee.ends_with("_bf16")))
        add(call, count, *c);
      return;
    }
    if (callee == "fsdprt_gpu_scatter_add_rows_f32" ||
        callee == "fsdprt_gpu_scatter_add_rows_bf16") {
      if (std::optional<OpCost> c =
              costScatter(call, callee.ends_with("bf16") ? 2 : 4))
        add(call, count, *c);
      return;
    }
    if (callee == "mgpuStreamSynchronize" || callee == "mgpuEventSynchronize") {
      add(call, count, costSync(callee));
      return;
    }
    StringRef kind = callee;
    if (kind.consume_front("fsdprt_jit_")) {
      bool started = kind.consume_back("_start");
      if (kind == "all_gather" || kind == "reduce_scatter" ||
          kind == "all_reduce") {
        if (std::optional<OpCost> c = costCollective(call, kind, !started))
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
      warnOnce(call, "cannot cost a call of @" + callee);
  }

  //--- the report ------------------------------------------------------

  Totals totalsOf() const {
    Totals t;
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
        (c.f32Gemm ? t.f32Gemms : t.bf16Gemms) += n;
        t.gemmFlops += n * c.flops;
        t.idealBf16Seconds += n * c.flops / (kIdealFlopFraction * g->bf16Peak);
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

  std::string locationOf(Operation *op) const {
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

  void printText(llvm::raw_ostream &os, StringRef function, const Totals &t) {
    os << "gpu cost report: @" << function << " on " << g->key << " ("
       << g->name << ")\n";
    std::vector<const Site *> order;
    for (const auto &[op, site] : sites)
      order.push_back(&site);
    auto line = [&](const Site &s) {
      const OpCost &c = s.cost;
      os << "  " << kindName(c.kind) << " " << c.name << " x"
         << llvm::format("%.0f", s.count) << ": "
         << llvm::format("%.0f", c.bytes) << " B, "
         << llvm::format("%.0f", c.flops) << " FLOP, "
         << formatSeconds(c.seconds) << " each, "
         << formatSeconds(s.count * c.seconds) << " total";
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
    os << "flops: " << n(t.flops) << " ("
       << llvm::format("%.3f", t.flops / 1e12) << " TFLOP, gemms "
       << llvm::format("%.3f", t.gemmFlops / 1e12) << ")\n";
    os << "time by kind:";
    for (auto [kind, seconds] : t.secondsByKind)
      os << " " << kindName(kind) << " " << llvm::format("%.3f", seconds * 1e3)
         << " ms;";
    os << "\n";
    os << "ideal with bf16 contractions: "
       << llvm::format("%.3f", t.idealBf16Seconds * 1e3) << " ms\n";
    os << "estimate: " << llvm::format("%.3f", t.seconds * 1e3) << " ms\n";
    os << "ideal: " << llvm::format("%.3f", t.idealSeconds * 1e3) << " ms\n";
  }

  void writeJson(llvm::json::OStream &j, StringRef function, const Totals &t) {
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
      j.attribute("estimate_ms", t.seconds * 1e3);
      j.attribute("ideal_ms", t.idealSeconds * 1e3);
    });
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<const GpuCeilings *> gpus;
    SmallVector<StringRef> names;
    StringRef(gpuName).split(names, ',', -1, /*KeepEmpty=*/false);
    for (StringRef name : names) {
      const GpuCeilings *found = lookupGpu(name.trim());
      if (!found) {
        std::string known;
        for (const GpuCeilings &c : kGpus)
          known += (known.empty() ? "" : ", ") + std::string(c.key);
        module.emitError() << "fsdp-gpu-cost-report: unknown GPU '"
                           << name.trim() << "' (known: " << known << ")";
        return signalPassFailure();
      }
      gpus.push_back(found);
    }
    if (gpus.empty()) {
      module.emitError() << "fsdp-gpu-cost-report: no GPU named (gpu=h200, "
                            "or several: gpu=h100,h200)";
      return signalPassFailure();
    }
    tf32 = module->hasAttr("fsdp.gpu_tf32");
    SymbolTableCollection tables;
    symbols = &tables;
    auto meshes = module.getOps<MeshOp>();
    mesh = meshes.empty() ? MeshOp() : *meshes.begin();

    // The step: every host function with a body that no call reaches.
    DenseSet<StringRef> called;
    module.walk([&](func::CallOp call) { called.insert(call.getCallee()); });
    SmallVector<func::FuncOp> roots;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && !called.contains(fn.getSymName()))
        roots.push_back(fn);

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
    for (const GpuCeilings *ceilings : gpus) {
      g = ceilings;
      if (j) {
        j->objectBegin();
        j->attribute("gpu", g->key);
        j->attribute("gpu_name", g->name);
        j->attributeBegin("functions");
        j->arrayBegin();
      }
      for (func::FuncOp root : roots) {
        sites.clear();
        stack.assign({root});
        for (Block &b : root.getBody())
          walkHostBlock(b, 1.0);
        if (sites.empty() && roots.size() > 1)
          continue;
        Totals t = totalsOf();
        if (j)
          writeJson(*j, root.getSymName(), t);
        else
          printText(os, root.getSymName(), t);
      }
      if (j) {
        j->arrayEnd();
        j->attributeEnd();
        j->objectEnd();
      }
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

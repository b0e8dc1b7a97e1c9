//===- CostModelKernels.cpp - a kernel launch's cost from its body --------===//
//
// fsdp-gpu-cost-report's cost of one gpu.launch_func: the kernel's body is
// walked for one thread (its indices, and the loops' first iterations,
// evaluated where they are constants), counting the bytes it loads and
// stores, its floating-point operations and the longest chain of dependent
// loads; the launch takes the longest of its bandwidth, latency and compute
// times (docs/GPU.md, "Cost model").
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"
#include "KernelLowering.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp::gpucost;

namespace {

//===----------------------------------------------------------------------===//
// Index arithmetic of one thread
//===----------------------------------------------------------------------===//

/// The indices of one thread of a launch, and the values of the loop
/// induction variables on the way to the op being evaluated (their first
/// value: the thread's first iteration).
struct ThreadEnv {
  int64_t thread[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int64_t blockDim[3] = {1, 1, 1}, gridDim[3] = {1, 1, 1};
  DenseMap<Value, int64_t> known;
  /// The enclosing loops' induction variables, outermost first, with their
  /// lower bounds: a lane's first iteration of each (warpDistinctFraction).
  SmallVector<std::pair<Value, Value>> loops;
};

std::optional<int64_t> evaluate(Value v, const ThreadEnv &env, int depth = 0);

/// The thread, block and grid queries of the gpu dialect.
std::optional<int64_t> evaluateGpuIndex(Operation *op, const ThreadEnv &env) {
  auto dim = [](gpu::Dimension d) { return static_cast<unsigned>(d); };
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
  return std::nullopt;
}

std::optional<int64_t> compare(arith::CmpIPredicate predicate, int64_t a,
                               int64_t b) {
  switch (predicate) {
  case arith::CmpIPredicate::eq:
    return a == b;
  case arith::CmpIPredicate::ne:
    return a != b;
  case arith::CmpIPredicate::slt:
  case arith::CmpIPredicate::ult:
    return a < b;
  case arith::CmpIPredicate::sle:
  case arith::CmpIPredicate::ule:
    return a <= b;
  case arith::CmpIPredicate::sgt:
  case arith::CmpIPredicate::ugt:
    return a > b;
  case arith::CmpIPredicate::sge:
  case arith::CmpIPredicate::uge:
    return a >= b;
  }
  return std::nullopt;
}

/// A binary integer op of the arith dialect on known operands.
std::optional<int64_t> evaluateBinary(Operation *op, int64_t x, int64_t y) {
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

std::optional<int64_t> evaluateAffineApply(affine::AffineApplyOp apply,
                                           const ThreadEnv &env, int depth) {
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

std::optional<int64_t> evaluateOp(Operation *op, const ThreadEnv &env,
                                  int depth) {
  auto operand = [&](unsigned i) {
    return evaluate(op->getOperand(i), env, depth + 1);
  };
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return i.getValue().getSExtValue();
    return std::nullopt;
  }
  if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
          gpu::GlobalIdOp, gpu::LaneIdOp>(op))
    return evaluateGpuIndex(op, env);
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
    return compare(cmp.getPredicate(), *a, *b);
  }
  if (auto apply = dyn_cast<affine::AffineApplyOp>(op))
    return evaluateAffineApply(apply, env, depth);
  if (op->getNumOperands() != 2 || op->getNumResults() != 1)
    return std::nullopt;
  std::optional<int64_t> a = operand(0), b = operand(1);
  if (!a || !b)
    return std::nullopt;
  return evaluateBinary(op, *a, *b);
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

//===----------------------------------------------------------------------===//
// What one thread does
//===----------------------------------------------------------------------===//

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

/// The fraction of a warp's lanes whose load reaches memory: the number of
/// distinct elements the lanes of a warp address, over 32, averaged over
/// the warps of the first block (a value indexed by the row only, read by
/// every thread of a row-wise elementwise kernel, is one element per warp:
/// the lanes share one transaction). 1 when an index cannot be evaluated
/// (it depends on loaded data) or the block has no full warp.
double warpDistinctFraction(ValueRange indices, ThreadEnv &env) {
  if (indices.empty())
    return 1.0 / 32;
  int64_t bx = env.blockDim[0], by = env.blockDim[1], bz = env.blockDim[2];
  int64_t threads = bx * by * bz;
  if (threads < 32)
    return 1.0;
  int64_t saved[3] = {env.thread[0], env.thread[1], env.thread[2]};
  int64_t warps = threads / 32;
  double distinct = 0;
  bool known = true;
  for (int64_t w = 0; w < warps && known; ++w) {
    std::vector<SmallVector<int64_t, 4>> lanes;
    for (int64_t l = 0; l < 32 && known; ++l) {
      int64_t linear = w * 32 + l;
      env.thread[0] = saved[0] + linear % bx;
      env.thread[1] = saved[1] + (linear / bx) % by;
      env.thread[2] = saved[2] + linear / (bx * by);
      // The lane's first iteration of every enclosing loop.
      for (auto [iv, lb] : env.loops) {
        env.known.erase(iv);
        if (std::optional<int64_t> x = evaluate(lb, env))
          env.known[iv] = *x;
      }
      SmallVector<int64_t, 4> at;
      for (Value index : indices) {
        std::optional<int64_t> x = evaluate(index, env);
        if (!x) {
          known = false;
          break;
        }
        at.push_back(*x);
      }
      if (known && llvm::find(lanes, at) == lanes.end())
        lanes.push_back(at);
    }
    distinct += double(lanes.size());
  }
  env.thread[0] = saved[0];
  env.thread[1] = saved[1];
  env.thread[2] = saved[2];
  for (auto [iv, lb] : env.loops) {
    env.known.erase(iv);
    if (std::optional<int64_t> x = evaluate(lb, env))
      env.known[iv] = *x;
  }
  if (!known)
    return 1.0;
  return distinct / (32.0 * double(warps));
}

/// Counts a load or store (scalar or vector) `avg` times; false for other
/// ops. `loads` is set for a load. A load counts the elements its warp
/// addresses (warpDistinctFraction); a store counts every lane.
bool countAccess(Operation &op, ThreadEnv &env, double avg, ThreadWork &work,
                 bool &loads) {
  auto count = [&](double bytes, Value memref, bool load) {
    double b = bytes * avg;
    (load ? work.loadBytes : work.storeBytes) += b;
    work.bufferBytes[rootBuffer(memref)] += b;
    loads |= load;
    return true;
  };
  auto vectorBytes = [](VectorType t) {
    return double(t.getNumElements() * elementBytes(t.getElementType()));
  };
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return count(elementBytes(load.getType()) *
                     warpDistinctFraction(load.getIndices(), env),
                 load.getMemref(), true);
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return count(elementBytes(store.getValueToStore().getType()),
                 store.getMemref(), false);
  if (auto vload = dyn_cast<vector::LoadOp>(op))
    return count(vectorBytes(vload.getVectorType()) *
                     warpDistinctFraction(vload.getIndices(), env),
                 vload.getBase(), true);
  if (auto vstore = dyn_cast<vector::StoreOp>(op))
    return count(vectorBytes(vstore.getVectorType()), vstore.getBase(), false);
  return false;
}

double walkKernelBlock(Block &block, ThreadEnv &env, double avg,
                       ThreadWork &work);

/// A loop of the kernel: its body `trips` times on average (the ceiling for
/// the latency chain).
double walkKernelLoop(scf::ForOp loop, ThreadEnv &env, double avg,
                      ThreadWork &work) {
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
    work.unknown.push_back(loop);
  }
  env.loops.push_back({loop.getInductionVar(), loop.getLowerBound()});
  double chain =
      maxTrips * walkKernelBlock(*loop.getBody(), env, avg * trips, work);
  env.loops.pop_back();
  return chain;
}

/// A branch of the kernel: each side weighted by the fraction of the first
/// warp's lanes that take it.
double walkKernelIf(scf::IfOp branch, ThreadEnv &env, double avg,
                    ThreadWork &work) {
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
    work.unknown.push_back(branch);
  double then = 0, other = 0;
  if (fraction > 0 || !known)
    then = walkKernelBlock(branch.getThenRegion().front(), env, avg * fraction,
                           work);
  if (!branch.getElseRegion().empty() && (fraction < 1 || !known))
    other = walkKernelBlock(branch.getElseRegion().front(), env,
                            avg * (known ? 1 - fraction : 1.0), work);
  return std::max(then, other);
}

/// Walks `block` for one thread: `avg` is the average number of times the
/// thread runs it. Returns the block's latency chain (one round if it loads
/// directly, plus its loops' rounds).
double walkKernelBlock(Block &block, ThreadEnv &env, double avg,
                       ThreadWork &work) {
  double chain = 0;
  bool loads = false;
  for (Operation &op : block) {
    if (countAccess(op, env, avg, work, loads))
      continue;
    if (isFloatArith(&op)) {
      work.flops += (isa<math::FmaOp>(op) ? 2 : 1) * avg;
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      chain += walkKernelLoop(loop, env, avg, work);
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      chain += walkKernelIf(branch, env, avg, work);
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
// The launch
//===----------------------------------------------------------------------===//

/// The launch's grid and block sizes in a fresh thread environment;
/// nullopt (with a warning) unless they are positive constants.
std::optional<ThreadEnv> launchEnv(CostContext &ctx, gpu::LaunchFuncOp launch) {
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  ThreadEnv env;
  Value gridValues[3] = {grid.x, grid.y, grid.z};
  Value blockValues[3] = {block.x, block.y, block.z};
  for (int d = 0; d < 3; ++d) {
    std::optional<int64_t> gd = constantInt(gridValues[d]);
    std::optional<int64_t> bd = constantInt(blockValues[d]);
    if (!gd || !bd || *gd < 1 || *bd < 1) {
      ctx.warnOnce(launch, "cannot cost a launch whose grid and block sizes "
                           "are not positive constants");
      return std::nullopt;
    }
    env.gridDim[d] = *gd;
    env.blockDim[d] = *bd;
  }
  return env;
}

/// The times a launch could be bound by, and what bounds it.
struct LaunchTimes {
  double blocks, threadsPerBlock, waves, chain;
  bool inL2;
  double bandwidth, latency, compute, t;
};

std::string describeLaunch(const GpuCeilings &g, const LaunchTimes &l) {
  std::string why;
  llvm::raw_string_ostream os(why);
  os << llvm::format("%.0f", l.blocks) << " blocks x "
     << llvm::format("%.0f", l.threadsPerBlock) << " threads, "
     << llvm::format("%.0f", l.waves) << (l.waves == 1 ? " wave" : " waves")
     << ", " << llvm::format("%.0f", l.chain) << " dependent loads per thread ("
     << (l.inL2 ? "L2" : "HBM") << "), ";
  if (l.t == l.compute && l.compute > 0)
    os << "compute-bound";
  else if (l.t == l.latency && l.latency > l.bandwidth)
    os << "latency-bound";
  else
    os << "bandwidth-bound";
  double fraction = l.t > 0 ? l.bandwidth / l.t : 0;
  os << " at " << llvm::format("%.1f", 100 * fraction) << "% of "
     << llvm::format("%.2f", g.copyBytesPerS / kTB) << " TB/s";
  return why;
}

/// The `scf.index_switch` that selects the parts of a multi-tensor launch
/// (fsdp-gpu-kernels), if `entry` has one.
scf::IndexSwitchOp partsSwitch(Block &entry) {
  for (Operation &op : entry)
    if (auto sw = dyn_cast<scf::IndexSwitchOp>(op);
        sw && sw->hasAttr(mlir::fsdp::gpukernels::kMultiTensorPartsAttrName))
      return sw;
  return {};
}

/// A multi-tensor launch: each part's work as the launch of its own blocks
/// and threads would do it (its case walked for its first block), its bytes
/// and FLOPs summed; the parts' blocks share the device, so the latency
/// chain is their block-rounds over the resident blocks, at least the
/// longest part's chain.
void walkParts(scf::IndexSwitchOp sw, const ThreadEnv &env, double perSM,
               const GpuCeilings &g, ThreadWork &work, double &threads,
               double &chain) {
  ArrayRef<int64_t> parts =
      sw->getAttrOfType<DenseI64ArrayAttr>(
            mlir::fsdp::gpukernels::kMultiTensorPartsAttrName)
          .asArrayRef();
  double rounds = 0, longest = 0;
  int64_t first = 0;
  threads = 0;
  for (unsigned i = 0; i + 1 < parts.size() && i / 2 < sw.getNumCases();
       i += 2) {
    ThreadEnv part = env;
    part.block[0] = first;
    ThreadWork w;
    double c = walkKernelBlock(sw.getCaseBlock(i / 2), part, 1.0, w);
    double n = double(parts[i]) * double(parts[i + 1]);
    threads += n;
    work.loadBytes += w.loadBytes * n;
    work.storeBytes += w.storeBytes * n;
    work.flops += w.flops * n;
    for (auto [buffer, perThread] : w.bufferBytes)
      work.bufferBytes[buffer] += perThread * n;
    llvm::append_range(work.unknown, w.unknown);
    rounds += double(parts[i]) * c;
    longest = std::max(longest, c);
    first += parts[i];
  }
  chain = std::max(longest, rounds / (g.sms * perSM));
}

} // namespace

std::optional<OpCost>
mlir::fsdp::gpucost::costLaunch(CostContext &ctx, gpu::LaunchFuncOp launch) {
  const GpuCeilings *g = ctx.g;
  auto kernel = ctx.symbols->lookupNearestSymbolFrom<gpu::GPUFuncOp>(
      launch, launch.getKernel());
  if (!kernel || kernel.getBody().empty()) {
    ctx.warnOnce(launch, "cannot cost a launch of a kernel without a body");
    return std::nullopt;
  }
  std::optional<ThreadEnv> env = launchEnv(ctx, launch);
  if (!env)
    return std::nullopt;
  // Kernel arguments stand for the launch's operands.
  Block &entry = kernel.getBody().front();
  ThreadWork work;
  LaunchTimes l;
  l.blocks = double(env->gridDim[0]) * env->gridDim[1] * env->gridDim[2];
  l.threadsPerBlock =
      double(env->blockDim[0]) * env->blockDim[1] * env->blockDim[2];
  double threads = l.blocks * l.threadsPerBlock;
  // Resident blocks per SM: the thread and block limits.
  double perSM = std::max(
      1.0, std::min<double>(g->blocksPerSM,
                            std::floor(g->threadsPerSM / l.threadsPerBlock)));
  l.waves = std::ceil(l.blocks / (g->sms * perSM));
  // A multi-tensor launch's work is per part (the parts' threads, not the
  // launch's, and each part's own chain); `scale` turns the walk's
  // per-thread figures into the launch's.
  double scale = threads;
  double rounds = l.waves;
  if (scf::IndexSwitchOp sw = partsSwitch(entry)) {
    walkParts(sw, *env, perSM, *g, work, threads, l.chain);
    scale = 1;
    rounds = 1;
  } else {
    l.chain = walkKernelBlock(entry, *env, 1.0, work);
  }
  for (Operation *op : work.unknown)
    ctx.warnOnce(op, "trip count or branch not known for the first thread of "
                     "a launch; costed as run once");

  OpCost c;
  c.kind = Kind::Launch;
  c.name = (launch.getKernelModuleName().getValue() +
            "::" + launch.getKernelName().getValue())
               .str();
  c.bytes = (work.loadBytes + work.storeBytes) * scale;
  c.flops = work.flops * scale;

  // Everything the kernel touches fits in L2: dependent loads wait for L2.
  double footprint = 0, ideal = 0;
  for (auto [buffer, perThread] : work.bufferBytes) {
    double total = perThread * scale;
    std::optional<double> size = memrefBytes(buffer.getType());
    footprint += size ? *size : total;
    ideal += size ? std::min(*size, total) : total;
  }
  l.inL2 = footprint <= g->l2Bytes;
  double latency = l.inL2 ? g->l2LatencyS : g->dramLatencyS;
  l.bandwidth = c.bytes / g->copyBytesPerS;
  l.latency = rounds * l.chain * latency;
  l.compute = c.flops / g->fp32Peak;
  l.t = std::max({l.bandwidth, l.latency, l.compute});
  c.seconds = l.t;
  addKernelOverheads(c, *g);
  c.idealSeconds = ideal / (kIdealBandwidthFraction * g->hbmBytesPerS);
  c.why = describeLaunch(*g, l);
  return c;
}

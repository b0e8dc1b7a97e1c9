//===- CostModelCalls.cpp - runtime calls, copies and syncs costed --------===//
//
// fsdp-gpu-cost-report's cost of each device operation that is not a
// kernel of the step's own: the cuBLAS gemms, the fused attention and
// scatter-add kernels of the runtime, device and host copies, fills, host
// synchronizations and collectives (docs/GPU.md, "Cost model").
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"

#include "fsdprt_gpu_split_k.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpucost;

std::optional<OpCost> gpucost::costGemm(CostContext &ctx, func::CallOp call,
                                        bool bf16, bool f32Output) {
  const GpuCeilings *g = ctx.g;
  // (trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
  //  stride_b, beta, c, ldc, stride_c, batch)
  if (call.getNumOperands() != 17) {
    ctx.warnOnce(call, "cannot cost a gemm call with " +
                           Twine(call.getNumOperands()) +
                           " operands (17 expected)");
    return std::nullopt;
  }
  std::optional<int64_t> m = constantInt(call.getOperand(2));
  std::optional<int64_t> n = constantInt(call.getOperand(3));
  std::optional<int64_t> k = constantInt(call.getOperand(4));
  std::optional<int64_t> batch = constantInt(call.getOperand(16));
  if (!m || !n || !k || !batch) {
    ctx.warnOnce(call, "cannot cost a gemm whose m, n, k and batch are not "
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
  c.launches = 0; // cuBLAS's kernels are counted as its calls
  c.flops = 2 * M * N * K * B;
  double rate = bf16 ? g->cublasBf16 : ctx.tf32 ? g->cublasTf32 : g->sgemm;
  double peak = bf16 ? g->bf16Peak : ctx.tf32 ? g->tf32Peak : g->fp32Peak;
  c.idealSeconds = c.flops / (kIdealFlopFraction * peak);
  // The output tiles of one call over the whole K (all of the batch).
  double tiles = std::ceil(M / kGemmTile) * std::ceil(N / kGemmTile) * B;
  // A call's time over `callTiles` tiles: its FLOPs at the rate over its
  // waves' fill, or its bytes at the copy bandwidth when longer.
  auto fillOf = [&](double callTiles) {
    return callTiles / (std::ceil(callTiles / g->sms) * g->sms);
  };
  auto timeOf = [&](double flops, double callTiles, double bytes) {
    return std::max(flops / (rate * fillOf(callTiles)),
                    bytes / g->copyBytesPerS);
  };
  auto describe = [](llvm::raw_ostream &os, double callTiles, double sms) {
    double waves = std::ceil(callTiles / sms);
    os << llvm::format("%.0f", callTiles) << " tiles on "
       << llvm::format("%.0f", waves) << (waves == 1 ? " wave" : " waves")
       << " (" << llvm::format("%.0f", 100 * callTiles / (waves * sms))
       << "% filled)";
  };
  std::string why;
  llvm::raw_string_ostream os(why);
  os << llvm::format("m %lld n %lld k %lld batch %lld", (long long)*m,
                     (long long)*n, (long long)*k, (long long)*batch)
     << ", "
     << (bf16       ? "bf16 tensor cores"
         : ctx.tf32 ? "TF32"
                    : "SGEMM")
     << " at " << llvm::format("%.0f", rate / kTB) << " TFLOP/s x ";
  // The runtime splits a bf16 gemm along K as the shared policy says
  // (runtime/include/fsdprt_gpu_split_k.h): its cuBLAS calls over the
  // slices write f32 partials, one kernel sums them.
  fsdprt_gpu_split_k_t split = {1, *k, 0, 0, 1};
  if (bf16)
    split = fsdprt_gpu_split_k_plan(*m, *n, *k, *batch, g->sms);
  double partial = M * N * B * 4;
  if (split.slices <= 1) {
    double cBytes = M * N * (accumulates ? 2 : 1) * ebC * B;
    c.bytes = (M * K + K * N) * eb * B + cBytes;
    double tCompute = c.flops / (rate * fillOf(tiles));
    double tBandwidth = c.bytes / g->copyBytesPerS;
    c.seconds = std::max(tCompute, tBandwidth);
    addGemmOverheads(c, *g);
    describe(os, tiles, g->sms);
    os << ", "
       << (tCompute >= tBandwidth ? "compute-bound" : "bandwidth-bound");
    c.why = why;
    return c;
  }
  double sliceK = split.slice_k, restK = split.rest_k;
  double operands = (M * K + K * N) * eb * B;
  double reduction =
      split.partials * partial + M * N * B * ebC * (accumulates ? 2 : 1);
  c.bytes = operands + split.partials * partial + reduction;
  // The slices: one call over all of them (batch 1), else one per slice;
  // each writes its f32 partials. The rest: one more call.
  double calls = B == 1 ? 1 : split.slices;
  double perCall = B == 1 ? split.slices : 1;
  double sliceTiles = tiles * perCall;
  double tSlices = calls * timeOf(2 * M * N * sliceK * B * perCall, sliceTiles,
                                  (operands * sliceK / K + partial) * perCall);
  double tRest = restK > 0 ? timeOf(2 * M * N * restK * B, tiles,
                                    operands * restK / K + partial)
                           : 0;
  double tReduce = reduction / g->copyBytesPerS;
  c.seconds = tSlices + tRest + tReduce;
  for (int64_t i = 0; i < split.gemms; ++i)
    addGemmOverheads(c, *g);
  c.launches = 1;
  addKernelOverheads(c, *g);
  describe(os, tiles, g->sms);
  os << ", split K: " << split.slices << " slices of " << split.slice_k;
  if (restK > 0)
    os << " and a rest of " << split.rest_k;
  os << " (" << split.gemms
     << (split.gemms == 1 ? " cuBLAS call, " : " cuBLAS calls, ");
  describe(os, sliceTiles, g->sms);
  os << ") " << formatSeconds(tSlices + tRest) << ", the reduction of "
     << split.partials << " f32 partials ("
     << formatBytes(split.partials * partial) << " in the scratch buffer) "
     << formatSeconds(tReduce);
  c.why = why;
  return c;
}

/// The fused attention kernels (fsdp-gpu-fuse-attention): the forward
/// reads Q, K, V and writes O and the row log-sum-exp; the backward (three
/// launches) reads Q, K, V, O, dO and the log-sum-exp and writes dQ, dK,
/// dV. 4 x B H Tq Tk d FLOPs forward, 14 x backward (the scores recomputed
/// twice), half of it under a causal mask; nothing of size T x T is stored.
/// bf16 at head dims 64 and 128 runs on the tensor cores (a fraction of the
/// bf16 peak), the rest on the CUDA cores in f32 (a fraction of FP32's).
std::optional<OpCost> gpucost::costAttention(CostContext &ctx,
                                             func::CallOp call, bool backward,
                                             bool bf16) {
  const GpuCeilings *g = ctx.g;
  unsigned n = call.getNumOperands();
  unsigned dims = backward ? 14 : 10;
  if (n != (backward ? 21u : 17u)) {
    ctx.warnOnce(call, "cannot cost an attention call with " + Twine(n) +
                           " operands");
    return std::nullopt;
  }
  std::array<std::optional<int64_t>, 5> d;
  for (unsigned i = 0; i < 5; ++i)
    d[i] = constantInt(call.getOperand(dims + i));
  std::optional<int64_t> causal = constantInt(call.getOperand(n - 1));
  if (!d[0] || !d[1] || !d[2] || !d[3] || !d[4] || !causal) {
    ctx.warnOnce(call, "cannot cost an attention call whose shapes are not "
                       "constants");
    return std::nullopt;
  }
  double bh = double(*d[0]) * double(*d[1]), tq = *d[2], tk = *d[3], hd = *d[4];
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
  const bool mma = attentionOnTensorCores(bf16, *d[4]);
  const double rate = mma ? kAttentionMmaFraction * g->bf16Peak
                          : kAttentionFp32Fraction * g->fp32Peak;
  double tCompute = c.flops / rate;
  double tBandwidth = c.bytes / g->copyBytesPerS;
  c.seconds = std::max(tCompute, tBandwidth);
  addKernelOverheads(c, *g, launches);
  c.idealSeconds =
      c.flops / (kIdealFlopFraction * (bf16 ? g->bf16Peak : g->fp32Peak));
  std::string why;
  llvm::raw_string_ostream os(why);
  os << llvm::format("batch x heads %.0f, tq %.0f, tk %.0f, d %.0f", bh, tq, tk,
                     hd)
     << (*causal ? ", causal" : "")
     << (backward ? ", 3 launches" : ", 1 launch")
     << (mma ? ", bf16 tensor-core products (mma.sync) at "
             : ", f32 CUDA-core products at ")
     << llvm::format("%.0f", 100 * (mma ? kAttentionMmaFraction
                                        : kAttentionFp32Fraction))
     << (mma ? "% of the bf16 peak, " : "% of the FP32 peak, ")
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
std::optional<OpCost> gpucost::costScatter(CostContext &ctx, func::CallOp call,
                                           double eb) {
  const GpuCeilings *g = ctx.g;
  // (indices, index_bits, index_stride, tokens, source, source strides x2,
  //  output, output strides x2, slots, width)
  if (call.getNumOperands() != 12) {
    ctx.warnOnce(call, "cannot cost a scatter-add call with " +
                           Twine(call.getNumOperands()) +
                           " operands (12 expected)");
    return std::nullopt;
  }
  std::optional<int64_t> bits = constantInt(call.getOperand(1));
  std::optional<int64_t> tokens = constantInt(call.getOperand(3));
  std::optional<int64_t> slots = constantInt(call.getOperand(10));
  std::optional<int64_t> width = constantInt(call.getOperand(11));
  if (!bits || !tokens || !slots || !width) {
    ctx.warnOnce(call, "cannot cost a scatter-add whose tokens, slots and "
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
  c.seconds = c.bytes / g->copyBytesPerS;
  addKernelOverheads(c, *g, launches);
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

std::optional<OpCost> gpucost::costMemcpy(CostContext &ctx,
                                          gpu::MemcpyOp copy) {
  const GpuCeilings *g = ctx.g;
  std::optional<double> bytes = memrefBytes(copy.getDst().getType());
  if (!bytes) {
    ctx.warnOnce(copy, "cannot cost a memcpy of a dynamically shaped buffer");
    return std::nullopt;
  }
  OpCost c;
  c.kind = Kind::Memcpy;
  c.name = "gpu.memcpy";
  c.copyBytes = *bytes;
  c.hostCopy = isHostBuffer(copy.getDst()) || isHostBuffer(copy.getSrc());
  if (c.hostCopy) {
    c.bytes = *bytes;
    c.seconds = *bytes / g->pcieBytesPerS;
    c.idealSeconds = *bytes / g->pcieBytesPerS;
    c.why = "host copy over PCIe";
  } else {
    c.bytes = 2 * *bytes;
    c.seconds = c.bytes / g->copyBytesPerS;
    c.idealSeconds = c.bytes / (kIdealBandwidthFraction * g->hbmBytesPerS);
    c.why = "device copy: read and write at the copy bandwidth";
  }
  addMemcpyOverheads(c, *g);
  return c;
}

std::optional<OpCost> gpucost::costMemset(CostContext &ctx, gpu::MemsetOp set) {
  const GpuCeilings *g = ctx.g;
  std::optional<double> bytes = memrefBytes(set.getDst().getType());
  if (!bytes) {
    ctx.warnOnce(set, "cannot cost a memset of a dynamically shaped buffer");
    return std::nullopt;
  }
  OpCost c;
  c.kind = Kind::Memset;
  c.name = "gpu.memset";
  c.bytes = *bytes;
  c.seconds = *bytes / g->copyBytesPerS;
  addKernelOverheads(c, *g);
  c.idealSeconds = *bytes / (kIdealBandwidthFraction * g->hbmBytesPerS);
  c.why = "a fill kernel: write at the copy bandwidth";
  return c;
}

OpCost gpucost::costSync(CostContext &ctx, StringRef what) {
  const GpuCeilings *g = ctx.g;
  OpCost c;
  c.kind = Kind::Sync;
  c.name = what.str();
  c.syncs = true;
  c.why = "the host waits for the stream to drain";
  return c;
}

std::optional<OpCost> gpucost::costCollective(CostContext &ctx,
                                              func::CallOp call, StringRef kind,
                                              bool blocking) {
  const GpuCeilings *g = ctx.g;
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
    ctx.warnOnce(call, "cannot cost a collective whose count and dtype are "
                       "not constants");
    return std::nullopt;
  }
  double bytes = *count * kDtypeBytes[*dtype];
  // The group: `ranks` when given, else the mesh axes of the group mask,
  // the last operand, or for a member layout (fsdprt_jit_*_members[_start])
  // the one before (n_members, counts): 4 for an all-gather's, 5 for a
  // reduce-scatter's.
  double n = 1;
  if (ctx.ranks > 0) {
    n = ctx.ranks;
  } else if (ctx.mesh) {
    unsigned maskOperand = call.getNumOperands() - 1;
    if (call.getCallee().contains("_members"))
      maskOperand = kind == "all_gather" ? 4 : 5;
    std::optional<int64_t> mask =
        maskOperand < call.getNumOperands()
            ? constantInt(call.getOperand(maskOperand))
            : std::nullopt;
    for (auto [i, size] : llvm::enumerate(ctx.mesh.getAxisSizes()))
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
    c.seconds = c.bytes / g->copyBytesPerS;
    os << "one rank: a local copy";
  } else {
    c.bytes = link;
    c.seconds = link / g->linkBytesPerS;
    c.idealSeconds = link / g->linkBytesPerS;
    os << "ring over " << llvm::format("%.0f", n) << " ranks at "
       << llvm::format("%.0f", g->linkBytesPerS / kGB) << " GB/s";
  }
  addCollectiveOverheads(c, *g);
  if (blocking)
    os << "; blocking: the host waits";
  c.why = why;
  return c;
}

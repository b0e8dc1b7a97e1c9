//===- CostModelGrouped.cpp - the device grouped gemm's cost --------------===//
//
// fsdprt_gpu_grouped_matmul_* (runtime/cuda/grouped_kernels.cu, from
// fsdp-gpu-grouped-matmul): one launch of 64 x 64 output tiles, 256 threads
// each, f32 products on the CUDA cores from shared memory (bf16 operands
// widened when staged). The groups' sizes are read on the device, so the
// cost takes what does not depend on them: the groups partition the rows,
// so the products are 2 x rows x k x n FLOPs in either form, and every row
// is read once and every expert's matrix once; only the number of tiles
// (at most one partial tile per group) varies, and it is bounded.
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpucost;

namespace {
/// The fraction of the FP32 peak the grouped kernel's f32 products (fmaf
/// from shared memory, 4 x 4 per thread) are assumed to reach; unmeasured,
/// the attention kernels' assumption.
constexpr double kGroupedFp32Fraction = kAttentionFp32Fraction;
constexpr double kGroupedTile = 64;
} // namespace

std::optional<OpCost> gpucost::costGroupedMatmul(CostContext &ctx,
                                                 func::CallOp call, bool bf16) {
  const GpuCeilings *g = ctx.g;
  // (form, offsets, offset_bits, offset_stride, groups, lhs, 2 strides,
  //  rhs, 3 strides, out, 3 strides, rows, k, n)
  if (call.getNumOperands() != 19) {
    ctx.warnOnce(call, "cannot cost a grouped gemm call with " +
                           Twine(call.getNumOperands()) +
                           " operands (19 expected)");
    return std::nullopt;
  }
  std::optional<int64_t> form = constantInt(call.getOperand(0));
  std::optional<int64_t> groups = constantInt(call.getOperand(4));
  std::optional<int64_t> rows = constantInt(call.getOperand(16));
  std::optional<int64_t> k = constantInt(call.getOperand(17));
  std::optional<int64_t> n = constantInt(call.getOperand(18));
  if (!form || !groups || !rows || !k || !n) {
    ctx.warnOnce(call, "cannot cost a grouped gemm whose form, groups, rows, "
                       "k and n are not constants");
    return std::nullopt;
  }
  double E = *groups, S = *rows, K = *k, N = *n, eb = bf16 ? 2 : 4;
  bool transposed = *form != 0;
  double colTiles = std::ceil(N / kGroupedTile);
  // Rows form: row tiles group after group (at most one partial per group,
  // plus the rows after the last); transposed: one tile grid per group.
  double tiles = transposed ? E * std::ceil(K / kGroupedTile) * colTiles
                            : (std::ceil(S / kGroupedTile) + E) * colTiles;
  OpCost c;
  c.kind = Kind::Launch;
  c.name = call.getCallee().str();
  c.flops = 2 * S * K * N;
  // Every row of lhs and rhs (or out) once, every expert's matrix once,
  // and the offsets.
  std::optional<int64_t> bits = constantInt(call.getOperand(2));
  c.bytes = (S * K + S * N + E * K * N) * eb + E * (bits ? *bits / 8 : 8);
  // 64 registers x 256 threads (ptxas, sm_90): 4 blocks an SM.
  double blocksPerWave = double(g->sms) * 4;
  double waves = std::max(1.0, std::ceil(tiles / blocksPerWave));
  double efficiency = std::min(1.0, tiles / (waves * blocksPerWave));
  double tCompute = c.flops / (kGroupedFp32Fraction * g->fp32Peak *
                               std::max(efficiency, 1e-9));
  double tBandwidth = c.bytes / g->copyBytesPerS;
  c.seconds = std::max(tCompute, tBandwidth);
  addKernelOverheads(c, *g);
  c.idealSeconds =
      c.flops / (kIdealFlopFraction * (bf16 ? g->bf16Peak : g->fp32Peak));
  std::string why;
  llvm::raw_string_ostream os(why);
  os << (transposed ? "transpose_lhs, " : "rows, ")
     << llvm::format("%lld groups, rows %lld k %lld n %lld", (long long)E,
                     (long long)S, (long long)K, (long long)N)
     << ", at most " << llvm::format("%.0f", tiles)
     << " tiles of 64 x 64, f32 CUDA-core products at "
     << llvm::format("%.0f", 100 * kGroupedFp32Fraction)
     << "% of the FP32 peak, "
     << (tCompute >= tBandwidth ? "compute-bound" : "bandwidth-bound");
  c.why = why;
  return c;
}

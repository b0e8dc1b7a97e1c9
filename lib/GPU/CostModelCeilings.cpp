//===- CostModelCeilings.cpp - the GPUs the cost report knows -------------===//
//
// The table of ceilings fsdp-gpu-cost-report costs a step with (one row per
// GPU, docs/GPU.md "Cost model" keeps its copy), and the helpers shared by
// the cost model's files: sizes of types and buffers, constants, formatting.
//
//===----------------------------------------------------------------------===//

#include "CostModel.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp::gpucost;

namespace {

// H100 and H200 SXM share the GH100 compute (132 SMs, same clocks): their
// gemm rates are the H200's measured ones; they differ in memory. The H100's
// copy bandwidth is the H200's measured fraction of its datasheet (0.9).
//
// The overheads (docs/GPU.md, "The ceilings", gives the sources) are public
// figures, not measured here; bench/gpu/check.sh's first device run
// calibrates them: a kernel launch's host issue 2.5 us, a cuBLAS call's and
// a memcpy call's (cudaPointerGetAttributes + cudaMemcpyAsync) 4 us; the
// device's gap before a kernel issued to a stream 1 us, before a copy
// 1.5 us; a graph launch 5 us, the gap before a graph's kernel node (a
// cuBLAS kernel too) 0.6 us, before its memcpy node 1 us.
constexpr GpuCeilings kGpus[] = {
    {"h200",    "NVIDIA H200 SXM 141GB",
     4.8 * kTB, 4.3 * kTB,
     132,       2048,
     32,        50 * kMB,
     989 * kTB, 494 * kTB,
     67 * kTB,  790 * kTB,
     395 * kTB, 52 * kTB,
     500 * kNs, 200 * kNs,
     2.5 * kUs, 4 * kUs,
     4 * kUs,   1 * kUs,
     1.5 * kUs, 5 * kUs,
     0.6 * kUs, 1 * kUs,
     0.6 * kUs, 2 * kUs,
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
     2.5 * kUs,  4 * kUs,
     4 * kUs,    1 * kUs,
     1.5 * kUs,  5 * kUs,
     0.6 * kUs,  1 * kUs,
     0.6 * kUs,  2 * kUs,
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
     2.5 * kUs,  4 * kUs,
     4 * kUs,    1 * kUs,
     1.5 * kUs,  5 * kUs,
     0.6 * kUs,  1 * kUs,
     0.6 * kUs,  2 * kUs,
     1 * kUs,    10 * kUs,
     10 * kUs,   20 * kGB,
     230 * kGB},
};

} // namespace

ArrayRef<GpuCeilings> mlir::fsdp::gpucost::knownGpus() { return kGpus; }

const GpuCeilings *mlir::fsdp::gpucost::lookupGpu(StringRef key) {
  for (const GpuCeilings &g : kGpus)
    if (key.equals_insensitive(g.key))
      return &g;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace mlir::fsdp::gpucost {

void addKernelOverheads(OpCost &c, const GpuCeilings &g, double kernels) {
  c.nodes += kernels;
  c.issueSeconds += kernels * g.kernelIssueS;
  c.gapSeconds += kernels * g.kernelGapS;
  c.graphGapSeconds += kernels * g.graphKernelGapS;
}

void addGemmOverheads(OpCost &c, const GpuCeilings &g, double kernels) {
  c.nodes += kernels;
  c.issueSeconds += g.gemmIssueS;
  c.gapSeconds += kernels * g.kernelGapS;
  c.graphGapSeconds += kernels * g.graphGemmGapS;
}

void addMemcpyOverheads(OpCost &c, const GpuCeilings &g) {
  c.nodes += 1;
  c.issueSeconds += g.memcpyIssueS;
  c.gapSeconds += g.memcpyGapS;
  c.graphGapSeconds += g.graphMemcpyGapS;
}

void addCollectiveOverheads(OpCost &c, const GpuCeilings &g) {
  c.nodes += 1;
  c.issueSeconds += g.collectiveS;
  c.gapSeconds += g.kernelGapS;
  c.graphGapSeconds += g.graphKernelGapS;
}

int64_t elementBytes(Type type) {
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
  return 0;
}

std::optional<double> memrefBytes(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return std::nullopt;
  int64_t eb = elementBytes(memref.getElementType());
  if (!eb)
    return std::nullopt;
  return double(memref.getNumElements()) * double(eb);
}

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

} // namespace mlir::fsdp::gpucost

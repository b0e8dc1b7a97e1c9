//===- KernelMultiTensor.cpp - the parts of a multi-tensor kernel at once -===//
//
// fsdp-gpu-kernels lowers each op of a multi-tensor kernel function
// (fsdp-gpu-multi-tensor) to its launches as usual, then merges them: the
// first launch of every part into one launch, the second ones (split
// reductions' second passes) into another. Each part keeps its own blocks
// (a contiguous range of the merged grid), its block size (threads beyond
// it idle) and its body, which sees its own block index and grid size: each
// part computes exactly what its own launch would, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/ABI/RuntimeFunctions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

namespace {

/// Every part's split reductions take their partials from one scratch
/// request, made first: a larger request later would replace the buffer
/// that earlier parts' views point into. The parts' offsets are disjoint
/// (fsdp-gpu-kernels gives each part its own range).
void shareScratch(func::FuncOp func) {
  StringRef name = getRuntimeFunctionName(RuntimeFunction::gpu_scratch);
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) {
    if (call.getCallee() == name)
      calls.push_back(call);
  });
  if (calls.size() < 2)
    return;
  auto bytesOf = [](func::CallOp call) -> int64_t {
    auto c = call.getOperand(0).getDefiningOp<LLVM::ConstantOp>();
    auto attr = c ? dyn_cast<IntegerAttr>(c.getValue()) : nullptr;
    return attr ? attr.getInt() : 0;
  };
  func::CallOp largest = *std::max_element(
      calls.begin(), calls.end(),
      [&](func::CallOp a, func::CallOp b) { return bytesOf(a) < bytesOf(b); });
  Block &entry = func.getBody().front();
  largest->moveBefore(&entry, entry.begin());
  if (Operation *size = largest.getOperand(0).getDefiningOp())
    size->moveBefore(largest);
  for (func::CallOp call : calls) {
    if (call == largest)
      continue;
    call.getResult(0).replaceAllUsesWith(largest.getResult(0));
    call.erase();
  }
}

int64_t constantOf(Value v) { return *getConstantIntValue(v); }

/// One launch for `launches` (part, launch) at `b`.
LogicalResult mergeStage(OpBuilder &b,
                         ArrayRef<std::pair<int64_t, gpu::LaunchOp>> launches,
                         bool report, int64_t stage) {
  Location loc = gpu::LaunchOp(launches.front().second).getLoc();
  int64_t blocks = 0, threads = 0;
  SmallVector<int64_t> offsets, parts;
  for (const auto &entry : launches) {
    gpu::LaunchOp l = entry.second;
    if (!l.getBody().hasOneBlock())
      return l.emitOpError("cannot be part of a multi-tensor launch: its body "
                           "has several blocks");
    int64_t g = constantOf(l.getGridSizeX());
    int64_t t = constantOf(l.getBlockSizeX());
    offsets.push_back(blocks);
    blocks += g;
    threads = std::max(threads, t);
    parts.append({g, t});
  }
  Value one = constIndex(b, loc, 1);
  auto merged =
      gpu::LaunchOp::create(b, loc, constIndex(b, loc, blocks), one, one,
                            constIndex(b, loc, threads), one, one);
  OpBuilder kb = OpBuilder::atBlockEnd(&merged.getBody().front());
  Value bid = merged.getBlockIds().x, tid = merged.getThreadIds().x;
  // The part of block `bid`: the last whose first block is at most bid.
  Value which = constIndex(kb, loc, 0);
  for (int64_t i = 1; i < int64_t(offsets.size()); ++i) {
    Value past = arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::uge, bid,
                                       constIndex(kb, loc, offsets[i]));
    which =
        arith::SelectOp::create(kb, loc, past, constIndex(kb, loc, i), which);
  }
  SmallVector<int64_t> cases =
      llvm::to_vector(llvm::seq<int64_t>(0, offsets.size()));
  auto sw = scf::IndexSwitchOp::create(kb, loc, TypeRange{}, which, cases,
                                       cases.size());
  sw->setAttr(kMultiTensorPartsAttrName, kb.getDenseI64ArrayAttr(parts));
  {
    Block &d = sw.getDefaultRegion().emplaceBlock();
    OpBuilder db = OpBuilder::atBlockEnd(&d);
    scf::YieldOp::create(db, loc);
  }
  for (auto [i, entry] : llvm::enumerate(launches)) {
    gpu::LaunchOp l = entry.second;
    Block &caseBlock = sw.getCaseRegions()[i].emplaceBlock();
    OpBuilder cb = OpBuilder::atBlockEnd(&caseBlock);
    int64_t g = parts[2 * i], t = parts[2 * i + 1];
    OpBuilder body = cb;
    if (t < threads) {
      Value inside = arith::CmpIOp::create(cb, loc, arith::CmpIPredicate::ult,
                                           tid, constIndex(cb, loc, t));
      auto guard = scf::IfOp::create(cb, loc, inside, /*withElse=*/false);
      body = guard.getThenBodyBuilder();
    }
    IRMapping map;
    map.map(l.getBlockIds().x,
            arith::SubIOp::create(body, loc, bid,
                                  constIndex(body, loc, offsets[i])));
    map.map(l.getBlockIds().y, merged.getBlockIds().y);
    map.map(l.getBlockIds().z, merged.getBlockIds().z);
    map.map(l.getThreadIds().x, tid);
    map.map(l.getThreadIds().y, merged.getThreadIds().y);
    map.map(l.getThreadIds().z, merged.getThreadIds().z);
    map.map(l.getGridSize().x, constIndex(body, loc, g));
    map.map(l.getGridSize().y, merged.getGridSize().y);
    map.map(l.getGridSize().z, merged.getGridSize().z);
    map.map(l.getBlockSize().x, constIndex(body, loc, t));
    map.map(l.getBlockSize().y, merged.getBlockSize().y);
    map.map(l.getBlockSize().z, merged.getBlockSize().z);
    for (Operation &op : l.getBody().front().without_terminator())
      body.clone(op, map);
    scf::YieldOp::create(cb, loc);
  }
  gpu::TerminatorOp::create(kb, loc);
  if (report)
    merged->emitRemark() << "GPU kernel: multi-tensor launch " << stage + 1
                         << " of " << launches.size() << " parts on " << blocks
                         << " blocks";
  for (const auto &entry : launches) {
    gpu::LaunchOp l = entry.second;
    l.erase();
  }
  return success();
}

} // namespace

LogicalResult
gpukernels::mergeMultiTensorLaunches(func::FuncOp func,
                                     ArrayRef<SmallVector<gpu::LaunchOp>> parts,
                                     bool report) {
  shareScratch(func);
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(ret);
  size_t stages = 0;
  for (const auto &launches : parts)
    stages = std::max(stages, launches.size());
  for (size_t s = 0; s < stages; ++s) {
    SmallVector<std::pair<int64_t, gpu::LaunchOp>> stage;
    for (auto [i, launches] : llvm::enumerate(parts))
      if (s < launches.size())
        stage.emplace_back(i, launches[s]);
    if (stage.size() == 1) {
      stage.front().second->moveBefore(ret);
      continue;
    }
    if (failed(mergeStage(b, stage, report, s)))
      return failure();
  }
  return success();
}

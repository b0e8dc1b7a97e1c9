//===- KernelVectorized.cpp - elementwise kernels in 16-byte chunks -------===//
//
// The vectorized elementwise mapping of fsdp-gpu-kernels: each thread takes
// chunks of `width` consecutive elements (16 bytes of the widest element
// type: 8 bf16, 4 f32, 2 f64), and reads and writes each operand that is
// contiguous along the chunk with one aligned vector access (ld.global.v4
// / st.global.v4 for 16 bytes) instead of `width` scalar ones. The body
// still runs once per element on scalars, exactly as the scalar mapping
// does, so the results are the same bit for bit.
//
// A chunk is either part of one row (the last loop's size is a multiple of
// `width`: an operand that does not depend on the last loop, a bias of a
// column or a row's maximum, is loaded once for the chunk) or, for rows of
// another length, a flat range of the op's elements: then every vector
// operand is the whole contiguous buffer in the loops' order, and a value
// per row is loaded per element. Vector accesses need their operand's base
// aligned to the access (BufferAlignment) and the chunk's element offset a
// multiple of `width`.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "fsdp/Compute/LinalgLoops.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::gpukernels;

static int64_t elementBytesOf(Type t) {
  return getElementTypeOrSelf(t).getIntOrFloatBitWidth() / 8;
}

/// Whether every operand allows chunks of 16 bytes of the widest element
/// type (`vector`): contiguous along the last loop with aligned chunks, or
/// independent of it.
void KernelLowering::planVector(BufferAlignment &alignment) {
  if (ranges.empty() || op.hasIndexSemantics())
    return;
  int64_t widest = 0;
  for (Value v : op->getOperands()) {
    if (!isa<MemRefType>(v.getType()))
      continue;
    unsigned bits = getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth();
    if (bits < 8 || bits > 64 || !llvm::isPowerOf2_32(bits))
      return;
    widest = std::max<int64_t>(widest, bits / 8);
  }
  if (!widest)
    return;
  int64_t width = kVectorBytes / widest;
  if (product(ranges) < width * kWarpSize)
    return;
  unsigned last = ranges.size() - 1;
  bool flat = ranges.back() % width != 0;
  VectorPlan plan;
  plan.width = width;
  plan.flat = flat;
  for (OpOperand &o : op->getOpOperands()) {
    auto t = dyn_cast<MemRefType>(o.get().getType());
    if (!t) {
      plan.access.push_back(ChunkAccess::Scalar);
      vectorAlign.push_back(0);
      continue;
    }
    AffineMap map = op.getMatchingIndexingMap(&o);
    bool init = op.isDpsInit(&o);
    if (!init && !map.isFunctionOfDim(last)) {
      plan.access.push_back(flat ? ChunkAccess::PerElement
                                 : ChunkAccess::Invariant);
      vectorAlign.push_back(0);
      continue;
    }
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(t.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset) || map.getNumResults() == 0)
      return;
    int64_t bytes = width * elementBytesOf(t);
    // The chunk's first element is `width`-aligned within the operand's
    // span (checked below), so its address is aligned when the base and
    // the static offset are.
    if (alignment.of(o.get()) < bytes || (offset * elementBytesOf(t)) % bytes)
      return;
    if (flat) {
      if (!map.isIdentity() || !memref::isStaticShapeAndContiguousRowMajor(t))
        return;
    } else {
      auto lastDim = dyn_cast<AffineDimExpr>(map.getResults().back());
      if (!lastDim || lastDim.getPosition() != last || strides.back() != 1)
        return;
      for (unsigned r = 0; r + 1 < map.getNumResults(); ++r)
        if (map.getResult(r).isFunctionOfDim(last) ||
            ShapedType::isDynamic(strides[r]) || strides[r] % width)
          return;
    }
    plan.access.push_back(ChunkAccess::Vector);
    vectorAlign.push_back(bytes);
  }
  vector = std::move(plan);
}

/// One thread per chunk of `vector.width` elements, grid-stride,
/// kElementwiseUnroll chunks a grid apart per iteration (all loaded and
/// computed before the first is stored), then the rest of the chunks one
/// at a time, then the elements past the last whole chunk one at a time
/// (scalar, as the scalar mapping).
void KernelLowering::vectorElementwise(OpBuilder &b) {
  int64_t total = product(ranges), width = vector.width;
  int64_t chunks = total / width;
  int64_t blocks, threads;
  std::tie(blocks, threads) = oneWaveGrid(chunks);
  launch(
      b, blocks, threads,
      [&](OpBuilder &kb, Value bid, Value tid, Value nblocks) {
        // Flat chunks read each vector operand as one contiguous range.
        SmallVector<Value> views;
        for (auto [o, access] : llvm::zip(op->getOpOperands(), vector.access)) {
          Value v = o.get();
          auto t = dyn_cast<MemRefType>(v.getType());
          if (vector.flat && access == ChunkAccess::Vector &&
              t.getRank() != 1) {
            SmallVector<ReassociationIndices> all(1);
            for (int64_t d = 0; d < t.getRank(); ++d)
              all[0].push_back(d);
            v = memref::CollapseShapeOp::create(kb, loc, v, all);
          }
          views.push_back(v);
        }
        Value start, step;
        std::tie(start, step) = unrolledGridStride(
            kb, bid, tid, nblocks, threads, chunks,
            [&](OpBuilder &gb, Value c, Value grid, int64_t count) {
              chunkGroup(gb, views, c, grid, count);
            });
        if (chunks * width < total)
          stride(kb,
                 arith::AddIOp::create(
                     kb, loc, constIndex(kb, loc, chunks * width), start),
                 step, total,
                 [&](OpBuilder &lb, Value i) { elementGroup(lb, i, step, 1); });
      });
}

/// The chunks c, c + step, ..., c + (count - 1) x step: all loaded and
/// computed, then stored.
void KernelLowering::chunkGroup(OpBuilder &b, ArrayRef<Value> views, Value c,
                                Value step, int64_t count) {
  int64_t width = vector.width;
  unsigned numInputs = op.getNumDpsInputs();
  struct Store {
    Value value, view;
    SmallVector<Value> indices;
    int64_t align;
  };
  SmallVector<Store> stores;
  for (int64_t u = 0; u < count; ++u) {
    Value chunk = stridedIndex(b, c, step, u);
    Value first =
        arith::MulIOp::create(b, loc, chunk, constIndex(b, loc, width));
    // The loop indices of element k of the chunk.
    SmallVector<Value> ivs0 =
        vector.flat ? SmallVector<Value>() : delinearize(b, loc, first, ranges);
    // (Only flat chunks need them per element: the body has no
    // linalg.index, and a chunk within a row loads its invariant inputs
    // once.)
    auto ivsAt = [&](int64_t k) -> SmallVector<Value> {
      Value at = first;
      if (k)
        at = arith::AddIOp::create(b, loc, first, constIndex(b, loc, k));
      return delinearize(b, loc, at, ranges);
    };
    auto indices = [&](OpOperand &o) -> SmallVector<Value> {
      if (vector.flat)
        return {first};
      return indicesAt(b, loc, op, o, ivs0);
    };
    // The loads of the chunk: a vector per vector operand (an output only
    // where the body reads it and no fill was folded), one value per
    // invariant input.
    SmallVector<Value> loaded(op->getNumOperands());
    for (OpOperand &o : op->getOpOperands()) {
      unsigned n = o.getOperandNumber();
      bool init = n >= numInputs;
      if (init &&
          (fillValues.count(n) || op.getMatchingBlockArgument(&o).use_empty()))
        continue;
      auto t = dyn_cast<MemRefType>(o.get().getType());
      if (vector.access[n] == ChunkAccess::Vector)
        loaded[n] = vector::LoadOp::create(
            b, loc, VectorType::get({width}, t.getElementType()), views[n],
            indices(o), /*nontemporal=*/false,
            llvm::MaybeAlign(vectorAlign[n]));
      else if (vector.access[n] == ChunkAccess::Invariant)
        loaded[n] = memref::LoadOp::create(b, loc, o.get(), indices(o));
    }
    bool needIvs = vector.flat &&
                   llvm::is_contained(vector.access, ChunkAccess::PerElement);
    SmallVector<SmallVector<Value>> results(op.getNumDpsInits());
    for (int64_t k = 0; k < width; ++k) {
      SmallVector<Value> ivs = needIvs ? ivsAt(k) : ivs0;
      auto element = [&](OpOperand &o) -> Value {
        unsigned n = o.getOperandNumber();
        switch (vector.access[n]) {
        case ChunkAccess::Scalar:
          return o.get();
        case ChunkAccess::Invariant:
          return loaded[n];
        case ChunkAccess::PerElement:
          return memref::LoadOp::create(b, loc, o.get(),
                                        indicesAt(b, loc, op, o, ivs));
        case ChunkAccess::Vector:
          return vector::ExtractOp::create(b, loc, loaded[n],
                                           ArrayRef<int64_t>{k});
        }
        llvm_unreachable("access");
      };
      SmallVector<Value> inputs, accs;
      for (OpOperand *input : op.getDpsInputOperands())
        inputs.push_back(element(*input));
      for (OpOperand &init : op.getDpsInitsMutable()) {
        unsigned n = init.getOperandNumber();
        auto it = fillValues.find(n);
        Type t = getElementTypeOrSelf(init.get().getType());
        if (it != fillValues.end())
          accs.push_back(it->second);
        else if (loaded[n])
          accs.push_back(element(init));
        else
          accs.push_back(arith::ConstantOp::create(
              b, loc, cast<TypedAttr>(b.getZeroAttr(t))));
      }
      for (auto [o, v] :
           llvm::enumerate(bodyAt(b, loc, op, ivs, accs, {}, inputs)))
        results[o].push_back(v);
    }
    for (auto [o, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      unsigned n = init.getOperandNumber();
      auto t = VectorType::get({width}, getElementTypeOrSelf(init.get()));
      stores.push_back({vector::FromElementsOp::create(b, loc, t, results[o]),
                        views[n], indices(init), vectorAlign[n]});
    }
  }
  for (Store &s : stores)
    vector::StoreOp::create(b, loc, s.value, s.view, s.indices,
                            /*nontemporal=*/false, llvm::MaybeAlign(s.align));
}

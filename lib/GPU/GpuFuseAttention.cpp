//===- GpuFuseAttention.cpp - attention chains to the fused kernels -------===//
//
// Recognizes attention as the frontends export it (scores, a softmax written
// out, the product with V, and the backward of the same) on tensors, before
// the segments are outlined, and replaces forward and backward by the
// runtime's FlashAttention kernels (runtime/cuda/attention_kernels.cu). The
// forward's row log-sum-exp replaces the probabilities between forward and
// backward: nothing of size T x T is left. Each kernel call sits in a
// private function on tensors (`__fsdp_attention_{fwd,bwd}_<n>`, marked
// `fsdp.segment` so that fsdp-outline-segments leaves it alone) whose body
// takes its operands' buffers read-only and returns freshly allocated
// results: one-shot bufferization and the deallocation passes then treat the
// call like any other producer, and the operands stay alive across it.
//
// A chain is replaced only when it matches exactly (every intermediate used
// by the chain alone, constants checked); anything else stays as it is.
// The chains and their matchers are in AttentionChain.h; this file writes
// the calls and replaces the chains.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"
#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Compute/GemmPlan.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUFUSEATTENTION
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::attention;

namespace {

//===----------------------------------------------------------------------===//
// The calls
//===----------------------------------------------------------------------===//

struct Emitter {
  ModuleOp module;
  llvm::StringMap<func::FuncOp> helpers;
  unsigned counter = 0;

  static RuntimeFunction runtime(bool backward, bool bf16) {
    if (backward)
      return bf16 ? RuntimeFunction::gpu_attention_bwd_bf16
                  : RuntimeFunction::gpu_attention_bwd_f32;
    return bf16 ? RuntimeFunction::gpu_attention_fwd_bf16
                : RuntimeFunction::gpu_attention_fwd_f32;
  }

  static std::string key(const Attention &a, bool backward) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << (backward ? "bwd" : "fwd") << a.q.getType() << a.k.getType()
       << a.v.getType() << (a.mask ? a.mask.getType() : Type()) << ' '
       << a.maskStrides[0] << ',' << a.maskStrides[1] << ',' << a.maskStrides[2]
       << ',' << a.maskStrides[3] << ' ' << a.causal << ' '
       << llvm::formatv("{0:e}", a.scale);
    return s;
  }

  /// The helper's type: forward (q, k, v[, mask]) -> (o, lse), backward
  /// (q, k, v[, mask], o, dout, lse) -> (dq, dk, dv).
  static FunctionType helperType(const Attention &a, bool backward) {
    MLIRContext *ctx = a.q.getContext();
    auto qt = cast<RankedTensorType>(a.q.getType());
    auto kt = cast<RankedTensorType>(a.k.getType());
    auto vt = cast<RankedTensorType>(a.v.getType());
    auto lse =
        RankedTensorType::get({a.batch, a.heads, a.tq}, Float32Type::get(ctx));
    SmallVector<Type> args = {qt, kt, vt};
    if (a.mask)
      args.push_back(a.mask.getType());
    SmallVector<Type> results;
    if (backward) {
      args.append({qt, qt, lse});
      results = {qt, kt, vt};
    } else {
      results = {qt, lse};
    }
    return FunctionType::get(ctx, args, results);
  }

  /// The private function on tensors around one kernel call.
  func::FuncOp helper(const Attention &a, bool backward) {
    func::FuncOp &f = helpers[key(a, backward)];
    if (f)
      return f;
    MLIRContext *ctx = module.getContext();
    Location loc = a.forwardAt->getLoc();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    std::string name = llvm::formatv("__fsdp_attention_{0}_{1}",
                                     backward ? "bwd" : "fwd", counter++);
    f = func::FuncOp::create(b, loc, name, helperType(a, backward));
    f.setPrivate();
    f->setAttr(kSegmentAttrName, UnitAttr::get(ctx));
    emitBody(f, a, backward);
    return f;
  }

  /// The helper's body: its arguments' buffers, fresh result buffers, the
  /// kernel call with the shape, the scale and the causal flag, the
  /// results returned as tensors.
  void emitBody(func::FuncOp f, const Attention &a, bool backward) {
    MLIRContext *ctx = module.getContext();
    Location loc = f.getLoc();
    ArrayRef<Type> results = f.getFunctionType().getResults();
    Block *entry = f.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(entry);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    auto bytes = [](Type t) {
      return int64_t(cast<ShapedType>(t).getElementTypeBitWidth() / 8);
    };
    auto memrefOf = [](Type t) {
      auto tt = cast<RankedTensorType>(t);
      return MemRefType::get(tt.getShape(), tt.getElementType());
    };
    auto input = [&](Value tensor) -> Value {
      Value buffer = bufferization::ToBufferOp::create(
          b, loc, memrefOf(tensor.getType()), tensor, b.getUnitAttr());
      return elementPointer(b, loc, buffer, zero, bytes(tensor.getType()));
    };
    SmallVector<Value> buffers;
    auto output = [&](Type t) -> Value {
      Value buffer = memref::AllocOp::create(b, loc, memrefOf(t));
      buffers.push_back(buffer);
      return elementPointer(b, loc, buffer, zero, bytes(t));
    };
    auto i64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, v, 64);
    };
    unsigned n = 0;
    SmallVector<Value> call = {input(entry->getArgument(n++)),
                               input(entry->getArgument(n++)),
                               input(entry->getArgument(n++))};
    call.push_back(
        a.mask ? input(entry->getArgument(n++))
               : LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(ctx))
                     .getResult());
    for (int64_t stride : a.maskStrides)
      call.push_back(i64(stride));
    if (backward) {
      for (unsigned i = 0; i < 3; ++i)
        call.push_back(input(entry->getArgument(n++)));
    }
    for (Type t : results)
      call.push_back(output(t));
    for (int64_t v : {a.batch, a.heads, a.tq, a.tk, a.dim})
      call.push_back(i64(v));
    call.push_back(
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(a.scale)));
    call.push_back(arith::ConstantIntOp::create(b, loc, a.causal, 32));
    func::FuncOp callee =
        declareRuntimeFunction(module, runtime(backward, a.element.isBF16()));
    func::CallOp::create(b, loc, callee, call);
    SmallVector<Value> returned;
    for (auto [buffer, t] : llvm::zip(buffers, results))
      returned.push_back(bufferization::ToTensorOp::create(
          b, loc, t, buffer, /*restrict=*/true, /*writable=*/true));
    func::ReturnOp::create(b, loc, returned);
  }
};

/// `fresh` ([batch, heads, T, d]) in the shape `form` says.
Value reshaped(OpBuilder &b, Value fresh, Attention::Form form) {
  Location loc = fresh.getLoc();
  auto type = cast<RankedTensorType>(fresh.getType());
  if (form == Attention::Form::Collapsed)
    return tensor::CollapseShapeOp::create(
        b, loc, fresh, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  if (form == Attention::Form::Transposed) {
    ArrayRef<int64_t> s = type.getShape();
    Value init = tensor::EmptyOp::create(b, loc, {s[0], s[1], s[3], s[2]},
                                         type.getElementType());
    return linalg::TransposeOp::create(b, loc, fresh, init,
                                       ArrayRef<int64_t>{0, 1, 3, 2})
        ->getResult(0);
  }
  return fresh;
}

/// Replaces `old` by `fresh` in `form`, in `old`'s element type (a
/// widening where the chain computed in f32 what the kernel writes in
/// bf16; a rounding of it back to bf16 is then `fresh` itself).
void replace(Value old, Value fresh, Attention::Form form) {
  OpBuilder b(fresh.getContext());
  b.setInsertionPointAfterValue(fresh);
  fresh = reshaped(b, fresh, form);
  if (old.getType() == fresh.getType()) {
    old.replaceAllUsesWith(fresh);
    return;
  }
  for (Operation *user : llvm::make_early_inc_range(old.getUsers()))
    if (isa<arith::TruncFOp>(user) &&
        user->getResult(0).getType() == fresh.getType())
      user->getResult(0).replaceAllUsesWith(fresh);
  if (old.use_empty())
    return;
  Value wide = arith::ExtFOp::create(b, fresh.getLoc(), old.getType(), fresh);
  old.replaceAllUsesWith(wide);
}

struct FSDPGpuFuseAttentionPass
    : public mlir::fsdp::impl::FSDPGpuFuseAttentionBase<
          FSDPGpuFuseAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Emitter emit{module, {}, 0};
    SmallVector<Operation *> candidates;
    module.walk([&](Operation *op) {
      auto fn = op->getParentOfType<func::FuncOp>();
      if (isa<linalg::GenericOp, linalg::BatchMatmulOp>(op) && fn &&
          !fn->hasAttr(kSegmentAttrName))
        candidates.push_back(op);
    });
    DenseSet<Operation *> erased;
    for (Operation *g : candidates) {
      if (erased.contains(g))
        continue;
      Miss m;
      FailureOr<Attention> a = failure();
      if (auto generic = dyn_cast<linalg::GenericOp>(g))
        a = matchGenerator(generic, m);
      // fsdp-autocast writes torch's batch matmuls as generics.
      if (failed(a) && !m.at)
        a = matchTorch(cast<linalg::LinalgOp>(g), m);
      if (failed(a)) {
        if (report && m.at)
          m.at->emitRemark() << "attention stays unfused: " << m.why;
        continue;
      }
      if (llvm::any_of(a->chain, [&](Operation *op) {
            return op->getBlock() != g->getBlock();
          })) {
        if (report)
          g->emitRemark() << "attention stays unfused: the chain spans blocks";
        continue;
      }
      fuse(emit, *a, erased);
    }
  }

  /// Replaces the chain by the calls; every op erased goes into `erased`.
  void fuse(Emitter &emit, Attention &a, DenseSet<Operation *> &erased) {
    Location loc = a.forwardAt->getLoc();
    if (report) {
      InFlightDiagnostic d = a.forwardAt->emitRemark();
      d << "attention fused: batch " << a.batch << ", heads " << a.heads
        << ", tq " << a.tq << ", tk " << a.tk << ", head dim " << a.dim
        << ", scale " << a.scale << (a.causal ? ", causal" : "")
        << (a.mask ? ", additive mask" : "")
        << (a.element.isBF16() ? ", bf16" : ", f32")
        << (a.dout ? ", forward and backward" : ", forward only");
    }
    OpBuilder b(a.forwardAt);
    if (a.kT)
      a.k = reshaped(b, a.kT, Attention::Form::Transposed);
    SmallVector<Value> operands = {a.q, a.k, a.v};
    if (a.mask)
      operands.push_back(a.mask);
    auto forward =
        func::CallOp::create(b, loc, emit.helper(a, false), operands);
    Value o = forward.getResult(0), lse = forward.getResult(1);
    ++numForward;
    if (a.dout) {
      b.setInsertionPoint(a.backwardAt);
      operands.append({o, a.dout, lse});
      auto backward = func::CallOp::create(b, a.backwardAt->getLoc(),
                                           emit.helper(a, true), operands);
      replace(a.dq, backward.getResult(0), Attention::Form::Same);
      replace(a.dk, backward.getResult(1), a.dkForm);
      replace(a.dv, backward.getResult(2), a.dvForm);
      ++numBackward;
    }
    replace(a.out, o, a.outForm);
    // Users before definitions: the chain erased from its end.
    SmallVector<Operation *> ops(a.chain.begin(), a.chain.end());
    llvm::sort(
        ops, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
    // Then what only the chain used (its fills, empty tensors, scalings).
    SmallVector<Operation *> dead;
    for (Operation *op : ops) {
      if (!op->use_empty())
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && !a.chain.contains(def))
          dead.push_back(def);
      erased.insert(op);
      op->erase();
    }
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      if (!op->use_empty() || !isMemoryEffectFree(op) ||
          op->hasTrait<OpTrait::ConstantLike>() || llvm::is_contained(dead, op))
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          dead.push_back(def);
      erased.insert(op);
      op->erase();
    }
  }
};

} // namespace

//===- FSDPToRuntime.cpp - buffer collectives to fsdprt calls -------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdp/Dialect/FSDP/IR/FSDPSignature.h"
#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"
#include "fsdp/Memory/ReadOnlyArgs.h"
#include "fsdprt_types.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTFSDPTORUNTIME
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

// The runtime's codes (fsdprt_types.h): the ODS enums share its values
// (QuantFormat's are checked in QuantFormat.h).
static_assert(static_cast<int32_t>(ReduceKind::sum) == FSDPRT_SUM &&
                  static_cast<int32_t>(ReduceKind::avg) == FSDPRT_AVG &&
                  static_cast<int32_t>(ReduceKind::max) == FSDPRT_MAX &&
                  static_cast<int32_t>(ReduceKind::min) == FSDPRT_MIN,
              "ReduceKind must match fsdprt_reduce_op");

int32_t reduceCode(ReduceKind kind) { return static_cast<int32_t>(kind); }

struct ConvertFSDPToRuntimePass
    : public mlir::fsdp::impl::ConvertFSDPToRuntimeBase<
          ConvertFSDPToRuntimePass> {
  using Base::Base;

  /// Rejects, at the op, what no lowering after this pass lowers on the
  /// step's target: left in place it would reach the LLVM conversion
  /// unlowered.
  LogicalResult checkLowerable(Operation *op) {
    // The lowering writes the step's device code itself (compute=gpu, after
    // this pass); device code in its input would be left unlowered on the
    // CPU paths and unplanned on the GPU path.
    if (op->getDialect() && op->getDialect()->getNamespace() == "gpu")
      return op->emitOpError()
             << "is device code in the step: the lowering generates all "
                "device code itself (compute=gpu), so its input must not "
                "contain gpu dialect operations";
    // Only fsdp-gpu-scatter-add lowers the device scatter-add; the CPU
    // lowering writes a one-hot product as host loops instead.
    if (isa<BufferScatterAddRowsOp>(op) && !device)
      return op->emitOpError()
             << "is the device scatter-add, which only the GPU lowering "
                "(compute=gpu) lowers; the CPU lowering (compute=fast or "
                "loops) cannot lower it";
    // Likewise the device grouped gemm (fsdp-gpu-grouped-matmul); the CPU
    // lowering writes the grouped products as loops over the groups.
    if (isa<BufferGroupedMatmulOp>(op) && !device)
      return op->emitOpError()
             << "is the device grouped gemm, which only the GPU lowering "
                "(compute=gpu) lowers; the CPU lowering (compute=fast or "
                "loops) runs fsdp-grouped-matmul before bufferization instead";
    return success();
  }

  void runOnOperation() override {
    memberGlobals.clear();
    symbols.reset();
    ModuleOp module = getOperation();
    if (failed(recordSignatures(module)))
      return signalPassFailure();
    SymbolTableCollection tables;
    // Collect first: lowering a start also rewrites its (later) waits.
    SmallVector<CollectiveOpInterface> collectives;
    SmallVector<Operation *> quantSteps;
    SmallVector<AxisIndexOp> axisIndices;
    WalkResult result = module.walk([&](Operation *op) {
      auto collective = dyn_cast<CollectiveOpInterface>(op);
      if (collective && collective.isOnBuffers())
        collectives.push_back(collective);
      else if (auto index = dyn_cast<AxisIndexOp>(op))
        axisIndices.push_back(index);
      else if (isa<BufferQuantAmaxOp, BufferQuantizeOp, BufferDequantizeOp>(op))
        quantSteps.push_back(op);
      else if (collective || isa<ParamGatherOp, GradReduceOp, WaitOp,
                                 QuantAmaxOp, QuantizeOp, DequantizeOp>(op)) {
        op->emitOpError() << "must be expanded and bufferized before "
                             "convert-fsdp-to-runtime";
        return WalkResult::interrupt();
      } else if (failed(checkLowerable(op))) {
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    for (CollectiveOpInterface op : collectives)
      if (failed(lower(op, tables)))
        return signalPassFailure();
    for (Operation *op : quantSteps)
      if (failed(lowerQuantStep(op)))
        return signalPassFailure();
    for (AxisIndexOp op : axisIndices)
      if (failed(lowerAxisIndex(op, tables)))
        return signalPassFailure();
    lowerAsserts(module);
  }

  /// `cf.assert %ok, "message"` (a run-time check of the step, e.g. the
  /// PyTorch frontend's guard on a value read from a tensor) to
  /// `fsdprt_jit_guard(ok, message)`: a failed check is recorded on the
  /// rank's comm and reported by the runner instead of aborting the
  /// process (cf.assert's own lowering prints and calls abort()). An
  /// assert inside a kernel's body (torch-mlir's index bounds checks in an
  /// embedding gather) stays: a call per element would keep the loop from
  /// vectorizing, and with compute=gpu the body is device code, which
  /// cannot call the host runtime.
  void lowerAsserts(ModuleOp module) {
    SmallVector<cf::AssertOp> asserts;
    module.walk([&](cf::AssertOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>())
        asserts.push_back(op);
    });
    unsigned next = 0;
    for (cf::AssertOp op : asserts) {
      std::string name;
      do
        name = "fsdp_guard_message_" + std::to_string(next++);
      while (module.lookupSymbol(name));
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value ok = arith::ExtUIOp::create(b, loc, b.getI32Type(), op.getArg());
      std::string text = op.getMsg().str();
      text.push_back('\0');
      Value message =
          LLVM::createGlobalString(loc, b, name, text, LLVM::Linkage::Internal);
      createRuntimeCall(b, loc, RuntimeFunction::guard, {ok, message});
      op.erase();
    }
  }

  /// fsdp.axis_index to fsdprt_jit_axis_index(mask): the rank's index in
  /// its group over the axes, read from the mesh (no communication).
  LogicalResult lowerAxisIndex(AxisIndexOp op, SymbolTableCollection &tables) {
    MeshOp mesh = lookupMesh(op, op.getMeshAttr(), &tables);
    if (!mesh)
      return op->emitOpError() << "refers to unknown mesh " << op.getMeshAttr();
    FailureOr<int64_t> mask = mesh.getAxisMask(op.getAxes());
    if (failed(mask))
      return op->emitOpError()
             << "has an invalid mesh axis list " << op.getAxes();
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value index =
        createRuntimeCall(b, loc, RuntimeFunction::axis_index, {*mask})
            .getResult(0);
    op.replaceAllUsesWith(
        arith::IndexCastOp::create(b, loc, b.getIndexType(), index)
            .getResult());
    op->erase();
    return success();
  }

  /// fsdp.buffer.quant_amax / quantize / dequantize to their fsdprt_jit_*
  /// entry points (local work, no communication).
  LogicalResult lowerQuantStep(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto count = [](Value v) {
      return cast<MemRefType>(v.getType()).getNumElements();
    };
    auto dtypeOf = [](Value v) -> int64_t {
      return *runtimeDtypeCode(cast<MemRefType>(v.getType()).getElementType());
    };
    if (auto a = dyn_cast<BufferQuantAmaxOp>(op)) {
      createRuntimeCall(b, loc, RuntimeFunction::quant_amax,
                        {pointerOf(b, loc, a.getInput()),
                         pointerOf(b, loc, a.getOutput()), count(a.getInput()),
                         dtypeOf(a.getInput())});
    } else if (auto q = dyn_cast<BufferQuantizeOp>(op)) {
      Type ptr = LLVM::LLVMPointerType::get(b.getContext());
      Value amax = q.getAmax() ? pointerOf(b, loc, q.getAmax())
                               : LLVM::ZeroOp::create(b, loc, ptr).getResult();
      createRuntimeCall(b, loc, RuntimeFunction::quantize,
                        {pointerOf(b, loc, q.getInput()), amax,
                         pointerOf(b, loc, q.getOutput()), count(q.getInput()),
                         dtypeOf(q.getInput()), runtimeCode(q.getFormat()),
                         q.getShape()[0], q.getShape()[1]});
    } else {
      auto d = cast<BufferDequantizeOp>(op);
      int64_t k = count(d.getOutput()) / (d.getShape()[0] * d.getShape()[1]);
      createRuntimeCall(b, loc, RuntimeFunction::dequantize,
                        {pointerOf(b, loc, d.getInput()),
                         pointerOf(b, loc, d.getOutput()), k,
                         dtypeOf(d.getOutput()), runtimeCode(d.getFormat()),
                         d.getShape()[0], d.getShape()[1]});
    }
    op->erase();
    return success();
  }

  /// Address of the first element of a (possibly offset) memref as !llvm.ptr.
  Value pointerOf(OpBuilder &b, Location loc, Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value offset = meta.getOffset();
    int64_t bytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    Value scaled = arith::MulIOp::create(
        b, loc, offset, arith::ConstantIndexOp::create(b, loc, bytes));
    Value addr = arith::AddIOp::create(b, loc, base, scaled);
    Value asInt = arith::IndexCastOp::create(b, loc, b.getI64Type(), addr);
    return LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), asInt);
  }

  /// The address of a constant array of a bucket's member counts (the
  /// runtime reads it while the collective runs): one private global per
  /// distinct list.
  Value memberCountsPointer(OpBuilder &b, Location loc, Operation *op,
                            DenseI64ArrayAttr members) {
    LLVM::GlobalOp &global = memberGlobals[members];
    if (!global) {
      auto module = op->getParentOfType<ModuleOp>();
      OpBuilder mb(module.getContext()); // detached: the table inserts it
      auto type = LLVM::LLVMArrayType::get(mb.getI64Type(), members.size());
      auto value = DenseIntElementsAttr::get(
          RankedTensorType::get({int64_t(members.size())}, mb.getI64Type()),
          members.asArrayRef());
      global = LLVM::GlobalOp::create(mb, loc, type, /*isConstant=*/true,
                                      LLVM::Linkage::Private,
                                      "__fsdp_bucket_members", value);
      if (!symbols)
        symbols.emplace(module);
      symbols->insert(global, module.getBody()->begin()); // a unique name
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }
  llvm::DenseMap<Attribute, LLVM::GlobalOp> memberGlobals;
  std::optional<SymbolTable> symbols;

  /// A runtime entry point with its arguments.
  struct RuntimeCall {
    RuntimeFunction callee;
    SmallVector<RuntimeArg> args;
  };

  /// The call to the runtime entry for `op` (its `_start` form when `op`
  /// only starts): (send, recv, count, dtype, [kind-specific...], mask).
  RuntimeCall buildRuntimeCall(OpBuilder &b, Location loc,
                               CollectiveOpInterface op, int32_t dtype,
                               int64_t mask) {
    using RF = RuntimeFunction;
    Value in = op.getCollectiveInput(), out = op.getCollectiveOutput();
    int64_t inCount = cast<MemRefType>(in.getType()).getNumElements();
    int64_t outCount = cast<MemRefType>(out.getType()).getNumElements();
    bool started = op.isAsync();
    RuntimeCall call;
    call.args = {pointerOf(b, loc, in), pointerOf(b, loc, out)};
    CollectiveKind kind = op.getCollectiveKind();
    DenseI64ArrayAttr members = op.getMemberCounts();
    if (kind == CollectiveKind::all_gather && members) {
      call.callee =
          started ? RF::all_gather_members_start : RF::all_gather_members;
      call.args.append({inCount, dtype, mask, int64_t(members.size()),
                        memberCountsPointer(b, loc, op, members)});
      return call;
    }
    if (kind == CollectiveKind::reduce_scatter && members) {
      call.callee = started ? RF::reduce_scatter_members_start
                            : RF::reduce_scatter_members;
      call.args.append({outCount, dtype, reduceCode(*op.getReduction()), mask,
                        int64_t(members.size()),
                        memberCountsPointer(b, loc, op, members)});
      return call;
    }
    if (kind == CollectiveKind::all_gather) {
      call.callee = started ? RF::all_gather_start : RF::all_gather;
      call.args.append({inCount, dtype});
    } else if (auto q = dyn_cast<BufferQuantizedAllGatherOp>(*op)) {
      call.callee = RF::quantized_all_gather;
      call.args.append({inCount, dtype, runtimeCode(q.getFormat()),
                        q.getShape()[0], q.getShape()[1]});
    } else if (kind == CollectiveKind::reduce_scatter) {
      call.callee = started ? RF::reduce_scatter_start : RF::reduce_scatter;
      call.args.append({outCount, dtype, reduceCode(*op.getReduction())});
    } else {
      call.callee = started ? RF::all_reduce_start : RF::all_reduce;
      call.args.append({inCount, dtype, reduceCode(*op.getReduction())});
    }
    call.args.push_back(mask);
    return call;
  }

  /// Replaces a started collective by its `_start` entry, whose handle each
  /// fsdp.buffer.wait on the request hands back to fsdprt_jit_wait.
  LogicalResult lowerStarted(CollectiveOpInterface op, OpBuilder &b,
                             Location loc, ModuleOp module,
                             const RuntimeCall &call) {
    Value handle =
        createRuntimeCall(b, loc, call.callee, call.args).getResult(0);
    declareRuntimeFunction(module, RuntimeFunction::wait);
    for (Operation *user : llvm::to_vector(op->getResult(0).getUsers())) {
      auto wait = dyn_cast<BufferWaitOp>(user);
      if (!wait)
        return user->emitOpError()
               << "uses a collective request; only fsdp.buffer.wait may";
      OpBuilder wb(wait);
      createRuntimeCall(wb, wait.getLoc(), RuntimeFunction::wait, {handle});
      wait.erase();
    }
    op->erase();
    return success();
  }

  LogicalResult lower(CollectiveOpInterface op, SymbolTableCollection &tables) {
    FlatSymbolRefAttr meshRef = op.getMeshAttr();
    ArrayAttr axes = op.getAxes();
    MeshOp mesh = lookupMesh(op, meshRef, &tables);
    if (!mesh)
      return op->emitOpError() << "refers to unknown mesh " << meshRef;
    FailureOr<int64_t> mask = mesh.getAxisMask(axes);
    if (failed(mask))
      return op->emitOpError() << "has an invalid mesh axis list " << axes;
    Type elementType =
        cast<MemRefType>(op.getCollectiveInput().getType()).getElementType();
    std::optional<int32_t> dtype = runtimeDtypeCode(elementType);
    if (!dtype)
      return op->emitOpError()
             << "element type " << elementType << " has no runtime dtype";

    OpBuilder b(op);
    Location loc = op->getLoc();
    auto module = op->getParentOfType<ModuleOp>();
    RuntimeCall call = buildRuntimeCall(b, loc, op, *dtype, *mask);
    if (op.isAsync())
      return lowerStarted(op, b, loc, module, call);
    createRuntimeCall(b, loc, call.callee, call.args);
    op->erase();
    return success();
  }

  /// Drops the fsdp.* attributes of the function's arguments and results:
  /// the signature now lives in fsdp.signatures, and the lowered function's
  /// arguments are no longer the tensors the attributes describe.
  void stripFsdpAttrs(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    auto withoutFsdp = [&](DictionaryAttr attrs) {
      SmallVector<NamedAttribute> kept;
      if (attrs)
        for (NamedAttribute a : attrs)
          if (!a.getName().getValue().starts_with(kAttrPrefix))
            kept.push_back(a);
      return DictionaryAttr::get(ctx, kept);
    };
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      func.setArgAttrs(i, withoutFsdp(func.getArgAttrDict(i)));
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      func.setResultAttrs(i, withoutFsdp(func.getResultAttrDict(i)));
  }

  /// The LLVM struct of a memref descriptor (MemRefDescriptor's layout).
  static Type descriptorType(MemRefType type) {
    MLIRContext *ctx = type.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    SmallVector<Type> fields{ptr, ptr, i64};
    if (type.getRank() > 0) {
      Type sizes = LLVM::LLVMArrayType::get(i64, type.getRank());
      fields.append({sizes, sizes});
    }
    return LLVM::LLVMStructType::getLiteral(ctx, fields);
  }

  /// Makes `func` store its results through a pointer it takes first: the
  /// descriptor of each result, 3 + 2 x rank words, one after the other in
  /// result order, and return nothing. Returned as values, the results
  /// would become one LLVM struct whose whole type the text form prints on
  /// each of its insertvalues (quadratic in the number of results). The C
  /// interface `_mlir_ciface_<step>(results, arguments...)` is unchanged.
  LogicalResult returnThroughMemory(func::FuncOp func) {
    if (func.getNumResults() == 0)
      return success();
    if (!llvm::all_of(func.getResultTypes(), [](Type t) {
          auto m = dyn_cast<MemRefType>(t);
          return m && !m.getMemorySpace();
        }))
      return func.emitOpError()
             << "must return only memrefs once bufferized (a step's results "
                "are stored through a pointer for the runner)";
    MLIRContext *ctx = func.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    if (failed(func.insertArgument(0, ptr, DictionaryAttr::get(ctx),
                                   func.getLoc())))
      return failure();
    Value out = func.getArgument(0);
    Type i64 = IntegerType::get(ctx, 64);
    func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      int32_t words = 0;
      for (Value v : ret.getOperands()) {
        auto type = cast<MemRefType>(v.getType());
        Value desc = UnrealizedConversionCastOp::create(b, ret.getLoc(),
                                                        descriptorType(type), v)
                         .getResult(0);
        Value at = words == 0
                       ? out
                       : LLVM::GEPOp::create(b, ret.getLoc(), ptr, i64, out,
                                             ArrayRef<LLVM::GEPArg>{words})
                             .getResult();
        LLVM::StoreOp::create(b, ret.getLoc(), desc, at);
        words += 3 + 2 * int32_t(type.getRank());
      }
      ret->setOperands({});
    });
    return func.eraseResults(llvm::BitVector(func.getNumResults(), true));
  }

  /// Records each step's signature for the runner, which sees only the
  /// lowered LLVM function, and makes the step return through memory.
  LogicalResult recordSignatures(ModuleOp module) {
    MLIRContext *ctx = module.getContext();
    SmallVector<NamedAttribute> entries, readOnly;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<SignatureAttr> signature = buildSignature(func);
      if (failed(signature))
        return failure();
      if (!*signature)
        continue;
      if (!SymbolTable::symbolKnownUseEmpty(func, module))
        return func.emitOpError()
               << "is an entry of the runner (its arguments or results have "
                  "fsdp attributes) and must not be called or referenced";
      // fsdp-mark-read-only-args' marks, before they are stripped.
      SmallVector<int64_t> marked;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (func.getArgAttr(i, kReadOnlyAttrName))
          marked.push_back(i);
      if (!marked.empty())
        readOnly.emplace_back(func.getSymNameAttr(),
                              DenseI64ArrayAttr::get(ctx, marked));
      stripFsdpAttrs(func);
      func->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
      if (failed(returnThroughMemory(func)))
        return failure();
      entries.emplace_back(func.getSymNameAttr(), *signature);
    }
    if (!entries.empty())
      setSignatures(module, entries);
    if (!readOnly.empty())
      module->setAttr(kReadOnlyArgsAttrName,
                      DictionaryAttr::get(ctx, readOnly));
    return success();
  }
};
} // namespace

//===- GpuHostKernels.cpp - the kernels of a step for the CUDA emulation --===//
//
// With gpu-emulation=true the kernels of a compute=gpu step are compiled for
// the host emulation of CUDA instead of NVVM, so that a step runs without a
// GPU and its kernels can be checked against the CPU paths. Everything else
// stays as on a GPU: the host code launches them through mgpuModuleLoad /
// mgpuModuleGetFunction / mgpuLaunchKernel on the same streams, next to the
// same cuBLAS calls and device allocations.
//
// Each kernel becomes a host function whose thread and block indices come
// from the emulation (fsdprt_gpu_emu_index), plus a wrapper with the launch
// ABI `void(void *const *params)`. The kernels' gpu.module becomes a
// gpu.binary whose object is a small image naming the step's kernel table;
// a global constructor registers that table with the runtime.
//
//===----------------------------------------------------------------------===//

#include "fsdp/ABI/RuntimeFunctions.h"
#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUHOSTKERNELS
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

// The image's header: "FSHK" (little endian), version 1, then the table's
// id, NUL-terminated. runtime/include/fsdprt_gpu.h has the same constants.
constexpr uint32_t kImageMagic = 0x4b485346;
constexpr uint32_t kImageVersion = 1;
// fsdprt_gpu_host_kernel_t.flags: the threads of a warp (a block, with
// barriers) run in lock step.
constexpr int32_t kLockstepFlag = 1;

// fsdprt_gpu_emu_index(which): which = 3 * kind + dimension.
enum IndexKind { ThreadId = 0, BlockId = 1, BlockDim = 2, GridDim = 3 };

/// Why the emulation cannot run `op` ("" when it can).
std::string unsupported(Operation *op) {
  if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
          gpu::BarrierOp, gpu::ReturnOp>(op))
    return "";
  if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
    if (shuffle.getMode() != gpu::ShuffleMode::XOR)
      return "only xor shuffles are emulated";
    Type t = shuffle.getValue().getType();
    if (!t.isF32() && !t.isInteger(32))
      return "only 32-bit shuffles (i32, f32) are emulated";
    if (!shuffle.getValid().use_empty())
      return "the shuffle's validity result is not emulated";
    return "";
  }
  StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
  if (ns == "gpu" || ns == "nvvm" || ns == "rocdl" || ns == "nvgpu" ||
      ns == "amdgpu" || isa<LLVM::InlineAsmOp>(op))
    return "the host emulation of CUDA cannot run it";
  return "";
}

/// Kernel arguments the wrapper can read from `params`: statically shaped
/// buffers in the default memory space (one pointer each, bare-pointer
/// convention) and scalars.
LogicalResult checkArgument(gpu::GPUFuncOp func, unsigned i, Type t) {
  if (auto m = dyn_cast<MemRefType>(t)) {
    int64_t offset;
    SmallVector<int64_t> strides;
    if (m.hasStaticShape() && !m.getMemorySpace() &&
        succeeded(m.getStridesAndOffset(strides, offset)) &&
        !ShapedType::isDynamic(offset) &&
        llvm::none_of(strides, ShapedType::isDynamic))
      return success();
    return func.emitOpError("argument ")
           << i << " of type " << t
           << " cannot be passed to the host emulation: buffers need static "
              "shapes, strides and offsets in the default memory space";
  }
  if (t.isIndex() || t.isIntOrFloat())
    return success();
  return func.emitOpError("argument ")
         << i << " of type " << t << " cannot be passed to the host emulation";
}

/// Bytes of argument `t` as mgpuLaunchKernel passes it.
int64_t paramBytes(Type t) {
  if (isa<MemRefType>(t) || t.isIndex())
    return 8;
  return (t.getIntOrFloatBitWidth() + 7) / 8;
}

void setInternal(Operation *op) {
  op->setAttr("llvm.linkage", LLVM::LinkageAttr::get(op->getContext(),
                                                     LLVM::Linkage::Internal));
}

/// The memref descriptor of a bare pointer to a buffer of type `m` (static
/// shape, strides and offset), as the NVVM lowering rebuilds it.
Value descriptorOf(OpBuilder &b, Location loc, Value ptr, MemRefType m) {
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> fields = {ptrTy, ptrTy, i64};
  int64_t rank = m.getRank();
  if (rank > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
  }
  auto structTy = LLVM::LLVMStructType::getLiteral(ctx, fields);
  int64_t offset;
  SmallVector<int64_t> strides;
  (void)m.getStridesAndOffset(strides, offset);
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  Value desc = LLVM::PoisonOp::create(b, loc, structTy);
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
  desc = LLVM::InsertValueOp::create(b, loc, desc, constant(offset),
                                     ArrayRef<int64_t>{2});
  for (int64_t d = 0; d < rank; ++d) {
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(m.getDimSize(d)),
                                       ArrayRef<int64_t>{3, d});
    desc = LLVM::InsertValueOp::create(b, loc, desc, constant(strides[d]),
                                       ArrayRef<int64_t>{4, d});
  }
  return UnrealizedConversionCastOp::create(b, loc, m, desc).getResult(0);
}

struct HostKernel {
  std::string name;
  mutable func::FuncOp wrapper;
  SmallVector<int64_t> paramSizes;
  bool lockstep = false;
};

struct FSDPGpuHostKernelsPass
    : public mlir::fsdp::impl::FSDPGpuHostKernelsBase<FSDPGpuHostKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernelModules(
        module.getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp kernels : kernelModules)
      if (failed(check(kernels)))
        return signalPassFailure();
    for (gpu::GPUModuleOp kernels : kernelModules)
      convert(module, kernels);
    module->setAttr("fsdp.gpu_emulation", UnitAttr::get(&getContext()));
  }

  LogicalResult check(gpu::GPUModuleOp kernels) {
    for (Operation &op : kernels.getBodyRegion().front()) {
      auto func = dyn_cast<gpu::GPUFuncOp>(op);
      if (!func) {
        return op.emitOpError("cannot be compiled for the host emulation of "
                              "CUDA (only kernels can)");
      }
      if (!func.isKernel())
        return func.emitOpError("is not a kernel: the host emulation of "
                                "CUDA compiles kernels only");
      if (func.getNumWorkgroupAttributions() ||
          func.getNumPrivateAttributions())
        return func.emitOpError("has workgroup or private memory, which the "
                                "host emulation of CUDA does not model");
      for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
        if (failed(checkArgument(func, i, t)))
          return failure();
      WalkResult walk = func.walk([&](Operation *inner) {
        if (inner == func.getOperation())
          return WalkResult::advance();
        std::string why = unsupported(inner);
        if (why.empty())
          return WalkResult::advance();
        inner->emitOpError("in kernel @")
            << func.getName() << ": " << why << " (gpu-emulation=true)";
        return WalkResult::interrupt();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    return success();
  }

  /// The id of the step's kernel table: the module's name and a hash of its
  /// kernels, so that two steps in one process differ (their kernels have
  /// the same names) while one step loaded twice registers equal tables.
  static std::string tableId(gpu::GPUModuleOp kernels) {
    std::string text;
    llvm::raw_string_ostream os(text);
    kernels->print(os, OpPrintingFlags().enableDebugInfo(false));
    return (kernels.getName() + "." +
            llvm::utohexstr(llvm::xxh3_64bits(text), /*LowerCase=*/true,
                            /*Width=*/16))
        .str();
  }

  /// The emulation's entry points that kernel bodies call, declared on
  /// first use.
  struct EmulationCalls {
    ModuleOp module;
    func::FuncOp index, shuffle, barrier;

    func::FuncOp getIndex() {
      if (!index)
        index = declareRuntimeFunction(module, RuntimeFunction::gpu_emu_index);
      return index;
    }
    func::FuncOp getShuffle() {
      if (!shuffle)
        shuffle = declareRuntimeFunction(module,
                                         RuntimeFunction::gpu_emu_shuffle_xor);
      return shuffle;
    }
    func::FuncOp getBarrier() {
      if (!barrier)
        barrier =
            declareRuntimeFunction(module, RuntimeFunction::gpu_emu_barrier);
      return barrier;
    }
  };

  void convert(ModuleOp module, gpu::GPUModuleOp kernels) {
    std::string id = tableId(kernels);
    SymbolTable symbols(module);
    EmulationCalls calls{module, {}, {}, {}};
    // The index function is declared even when no kernel reads an id.
    calls.getIndex();

    std::vector<HostKernel> table;
    for (auto func : llvm::make_early_inc_range(
             kernels.getBodyRegion().front().getOps<gpu::GPUFuncOp>())) {
      HostKernel kernel;
      kernel.name = func.getName().str();
      std::string prefix = (kernels.getName() + "_host_" + kernel.name).str();
      func::FuncOp body =
          hostBody(kernels, func, prefix + "_body", symbols, calls, kernel);
      kernel.wrapper = launchWrapper(kernels, body, prefix, symbols, kernel);
      func.erase();
      table.push_back(std::move(kernel));
      ++numKernels;
      if (table.back().lockstep)
        ++numLockstep;
    }
    emitTable(module, kernels, id, table);
    emitBinary(kernels, id);
    kernels.erase();
  }

  /// The body of `func`, moved into a private host function `name` of the
  /// kernel's signature: its gpu ops become calls of the emulation (ids,
  /// shuffles, barriers; `kernel.lockstep` when it shuffles or waits).
  func::FuncOp hostBody(gpu::GPUModuleOp kernels, gpu::GPUFuncOp func,
                        StringRef name, SymbolTable &symbols,
                        EmulationCalls &calls, HostKernel &kernel) {
    MLIRContext *ctx = &getContext();
    Type i32 = IntegerType::get(ctx, 32);
    OpBuilder b(ctx);
    b.setInsertionPoint(kernels);
    auto body =
        func::FuncOp::create(b, func.getLoc(), name, func.getFunctionType());
    body.setPrivate();
    setInternal(body);
    body.getBody().takeBody(func.getBody());
    symbols.insert(body);
    SmallVector<Operation *> gpuOps;
    body.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "gpu")
        gpuOps.push_back(op);
    });
    for (Operation *op : gpuOps) {
      b.setInsertionPoint(op);
      Location l = op->getLoc();
      auto index = [&](IndexKind kind, gpu::Dimension dim) {
        if (op->getResult(0).use_empty())
          return;
        Value which = arith::ConstantIntOp::create(
            b, l, i32, 3 * int64_t(kind) + int64_t(dim));
        Value v =
            func::CallOp::create(b, l, calls.getIndex(), ValueRange{which})
                .getResult(0);
        op->getResult(0).replaceAllUsesWith(
            arith::IndexCastUIOp::create(b, l, b.getIndexType(), v));
      };
      if (auto o = dyn_cast<gpu::ThreadIdOp>(op))
        index(ThreadId, o.getDimension());
      else if (auto o = dyn_cast<gpu::BlockIdOp>(op))
        index(BlockId, o.getDimension());
      else if (auto o = dyn_cast<gpu::BlockDimOp>(op))
        index(BlockDim, o.getDimension());
      else if (auto o = dyn_cast<gpu::GridDimOp>(op))
        index(GridDim, o.getDimension());
      else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
        Value v = shuffle.getValue();
        bool isFloat = v.getType().isF32();
        if (isFloat)
          v = arith::BitcastOp::create(b, l, i32, v);
        Value r = func::CallOp::create(
                      b, l, calls.getShuffle(),
                      ValueRange{v, shuffle.getOffset(), shuffle.getWidth()})
                      .getResult(0);
        if (isFloat)
          r = arith::BitcastOp::create(b, l, b.getF32Type(), r);
        shuffle.getShuffleResult().replaceAllUsesWith(r);
        kernel.lockstep = true;
      } else if (isa<gpu::BarrierOp>(op)) {
        func::CallOp::create(b, l, calls.getBarrier(), ValueRange{});
        kernel.lockstep = true;
      } else if (isa<gpu::ReturnOp>(op)) {
        func::ReturnOp::create(b, l);
      }
      op->erase();
    }
    return body;
  }

  /// The launch wrapper `name`, `void(void *const *params)`: params[i]
  /// points at argument i (a buffer's pointer, a scalar's value), as
  /// mgpuLaunchKernel gets them; records the arguments' sizes.
  func::FuncOp launchWrapper(gpu::GPUModuleOp kernels, func::FuncOp body,
                             StringRef name, SymbolTable &symbols,
                             HostKernel &kernel) {
    MLIRContext *ctx = &getContext();
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    Location loc = body.getLoc();
    OpBuilder b(kernels);
    auto wrapper =
        func::FuncOp::create(b, loc, name, FunctionType::get(ctx, {ptrTy}, {}));
    wrapper.setPrivate();
    setInternal(wrapper);
    symbols.insert(wrapper);
    Block *entry = wrapper.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value params = entry->getArgument(0);
    SmallVector<Value> args;
    for (auto [i, t] : llvm::enumerate(body.getFunctionType().getInputs())) {
      Value slot = LLVM::GEPOp::create(b, loc, ptrTy, ptrTy, params,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      Value p = LLVM::LoadOp::create(b, loc, ptrTy, slot);
      kernel.paramSizes.push_back(paramBytes(t));
      if (auto m = dyn_cast<MemRefType>(t)) {
        Value bare = LLVM::LoadOp::create(b, loc, ptrTy, p);
        args.push_back(descriptorOf(b, loc, bare, m));
      } else if (t.isIndex()) {
        Value v = LLVM::LoadOp::create(b, loc, b.getI64Type(), p);
        args.push_back(arith::IndexCastOp::create(b, loc, t, v));
      } else {
        args.push_back(LLVM::LoadOp::create(b, loc, t, p));
      }
    }
    func::CallOp::create(b, loc, body, args);
    func::ReturnOp::create(b, loc);
    return wrapper;
  }

  /// The binary the launches name, in place of the kernels' module: an
  /// image that only the emulated runtime loads (it looks the table up by
  /// id).
  void emitBinary(gpu::GPUModuleOp kernels, StringRef id) {
    MLIRContext *ctx = &getContext();
    std::string image;
    auto word = [&](uint32_t v) {
      for (int i = 0; i < 4; ++i)
        image.push_back(char((v >> (8 * i)) & 0xff));
    };
    word(kImageMagic);
    word(kImageVersion);
    image += id;
    image.push_back('\0');
    OpBuilder b(kernels);
    auto object = gpu::ObjectAttr::get(
        ctx, NVVM::NVVMTargetAttr::get(ctx), gpu::CompilationTarget::Binary,
        StringAttr::get(ctx, image),
        DictionaryAttr::get(
            ctx, {NamedAttribute(StringAttr::get(ctx, "fsdp.host_kernels"),
                                 StringAttr::get(ctx, id))}),
        nullptr);
    gpu::BinaryOp::create(b, kernels.getLoc(), kernels.getName(),
                          /*offloadingHandler=*/nullptr,
                          ArrayRef<Attribute>{object});
  }

  /// Globals with the table's strings and argument sizes, and the
  /// constructor and destructor that register and unregister it.
  void emitTable(ModuleOp module, gpu::GPUModuleOp kernels, StringRef id,
                 ArrayRef<HostKernel> table) {
    MLIRContext *ctx = &getContext();
    Location loc = kernels.getLoc();
    SymbolTable symbols(module);
    Type i8 = IntegerType::get(ctx, 8), i32 = IntegerType::get(ctx, 32),
         i64 = IntegerType::get(ctx, 64);
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    std::string prefix = (kernels.getName() + "_host").str();
    OpBuilder b(kernels);
    auto string = [&](StringRef symbol, StringRef value) {
      std::string bytes = value.str();
      bytes.push_back('\0');
      auto global = LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(i8, bytes.size()),
          /*isConstant=*/true, LLVM::Linkage::Internal, symbol,
          b.getStringAttr(bytes));
      symbols.insert(global);
      return global;
    };
    LLVM::GlobalOp idGlobal = string(prefix + "_id", id);
    SmallVector<LLVM::GlobalOp> names, sizes;
    for (const HostKernel &k : table) {
      names.push_back(string(k.wrapper.getName().str() + "_name", k.name));
      if (k.paramSizes.empty()) {
        sizes.push_back(nullptr);
        continue;
      }
      auto n = int64_t(k.paramSizes.size());
      auto global = LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(i64, n), /*isConstant=*/true,
          LLVM::Linkage::Internal, k.wrapper.getName().str() + "_sizes",
          DenseElementsAttr::get(RankedTensorType::get({n}, i64),
                                 ArrayRef<int64_t>(k.paramSizes)));
      symbols.insert(global);
      sizes.push_back(global);
    }

    LLVM::LLVMFuncOp registerFn = declareLLVMRuntimeFunction(
        module, RuntimeFunction::gpu_register_host_kernels);
    LLVM::LLVMFuncOp unregisterFn = declareLLVMRuntimeFunction(
        module, RuntimeFunction::gpu_unregister_host_kernels);

    // fsdprt_gpu_host_kernel_t: name, function, argument sizes, count, flags.
    auto entryTy =
        LLVM::LLVMStructType::getLiteral(ctx, {ptrTy, ptrTy, ptrTy, i32, i32});
    auto voidFn = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {});
    b.setInsertionPoint(kernels);
    auto ctor = LLVM::LLVMFuncOp::create(b, loc, prefix + "_register", voidFn,
                                         LLVM::Linkage::Internal);
    symbols.insert(ctor);
    b.setInsertionPointToStart(ctor.addEntryBlock(b));
    auto i32c = [&](int64_t v) -> Value {
      return LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(v));
    };
    Value count = i32c(int64_t(table.size()));
    Value entries = LLVM::AllocaOp::create(
        b, loc, ptrTy, entryTy,
        i32c(std::max<int64_t>(int64_t(table.size()), 1)));
    for (auto [i, k] : llvm::enumerate(table)) {
      Value entry = LLVM::PoisonOp::create(b, loc, entryTy);
      Value name = LLVM::AddressOfOp::create(b, loc, names[i]);
      // The wrapper is a func.func until the host lowering: its address as
      // a function value, which that lowering turns into llvm.mlir.addressof.
      Value fn = func::ConstantOp::create(b, loc, k.wrapper.getFunctionType(),
                                          k.wrapper.getName());
      Value fnPtr =
          UnrealizedConversionCastOp::create(b, loc, ptrTy, fn).getResult(0);
      Value sizesPtr = sizes[i]
                           ? Value(LLVM::AddressOfOp::create(b, loc, sizes[i]))
                           : Value(LLVM::ZeroOp::create(b, loc, ptrTy));
      entry = LLVM::InsertValueOp::create(b, loc, entry, name,
                                          ArrayRef<int64_t>{0});
      entry = LLVM::InsertValueOp::create(b, loc, entry, fnPtr,
                                          ArrayRef<int64_t>{1});
      entry = LLVM::InsertValueOp::create(b, loc, entry, sizesPtr,
                                          ArrayRef<int64_t>{2});
      entry = LLVM::InsertValueOp::create(b, loc, entry,
                                          i32c(int64_t(k.paramSizes.size())),
                                          ArrayRef<int64_t>{3});
      entry = LLVM::InsertValueOp::create(b, loc, entry,
                                          i32c(k.lockstep ? kLockstepFlag : 0),
                                          ArrayRef<int64_t>{4});
      Value slot = LLVM::GEPOp::create(b, loc, ptrTy, entryTy, entries,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(b, loc, entry, slot);
    }
    Value idPtr = LLVM::AddressOfOp::create(b, loc, idGlobal);
    // The status is the runtime's to report (at the first launch): a
    // constructor has no caller to return it to.
    LLVM::CallOp::create(b, loc, registerFn, ValueRange{idPtr, entries, count});
    LLVM::ReturnOp::create(b, loc, ValueRange{});

    b.setInsertionPoint(kernels);
    auto dtor = LLVM::LLVMFuncOp::create(b, loc, prefix + "_unregister", voidFn,
                                         LLVM::Linkage::Internal);
    symbols.insert(dtor);
    b.setInsertionPointToStart(dtor.addEntryBlock(b));
    LLVM::CallOp::create(
        b, loc, unregisterFn,
        ValueRange{LLVM::AddressOfOp::create(b, loc, idGlobal)});
    LLVM::ReturnOp::create(b, loc, ValueRange{});

    appendStructors<LLVM::GlobalCtorsOp>(module, ctor);
    appendStructors<LLVM::GlobalDtorsOp>(module, dtor);
  }

  template <typename OpTy>
  static void appendStructors(ModuleOp module, LLVM::LLVMFuncOp fn) {
    MLIRContext *ctx = module.getContext();
    SmallVector<Attribute> fns, priorities, data;
    OpTy existing = nullptr;
    for (OpTy op : module.getOps<OpTy>())
      existing = op;
    auto names = [](OpTy op) {
      if constexpr (std::is_same_v<OpTy, LLVM::GlobalCtorsOp>)
        return op.getCtors();
      else
        return op.getDtors();
    };
    if (existing) {
      llvm::append_range(fns, names(existing));
      llvm::append_range(priorities, existing.getPriorities());
      llvm::append_range(data, existing.getData());
    }
    fns.push_back(FlatSymbolRefAttr::get(fn));
    priorities.push_back(IntegerAttr::get(IntegerType::get(ctx, 32), 65535));
    data.push_back(LLVM::ZeroAttr::get(ctx));
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    OpTy::create(b, module.getLoc(), ArrayAttr::get(ctx, fns),
                 ArrayAttr::get(ctx, priorities), ArrayAttr::get(ctx, data));
    if (existing)
      existing.erase();
  }
};

} // namespace

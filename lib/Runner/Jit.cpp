//===- Jit.cpp - compile a lowered module, or load it from the cache ------===//

#include "Jit.h"
#include "Memory.h"
#include "Program.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Pipeline/InputGuard.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/Local.h"

#include <chrono>
#include <functional>
#include <thread>

using namespace mlir;

namespace fsdp::run {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// Hash of the file's bytes and of everything the object depends on. The
/// version tag changes whenever the code generation does (v3: kernels at -O2
/// again; v2 objects hold kernels compiled at -O0).
std::string cacheKey(llvm::StringRef bytes) {
  std::string salt = "fsdp-run-jit-v5 " LLVM_VERSION_STRING " " +
                     llvm::sys::getHostCPUName().str();
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    if (f.second)
      salt += " " + f.first().str();
  uint64_t h = llvm::xxh3_64bits(bytes);
  uint64_t s = llvm::xxh3_64bits(llvm::StringRef(salt));
  char out[40];
  snprintf(out, sizeof(out), "%016llx%016llx", (unsigned long long)h,
           (unsigned long long)s);
  return out;
}

/// A module with what loadProgram reads: the module's attributes, the
/// meshes and bodiless copies of the entries and their C wrappers.
OwningOpRef<ModuleOp> makeStub(ModuleOp module) {
  OpBuilder b(module.getContext());
  OwningOpRef<ModuleOp> stub = ModuleOp::create(module.getLoc());
  stub.get()->setAttrs(module->getAttrDictionary());
  b.setInsertionPointToEnd(stub->getBody());
  for (auto mesh : module.getOps<mlir::fsdp::MeshOp>())
    b.clone(*mesh);
  auto sigs =
      module->getAttrOfType<DictionaryAttr>(mlir::fsdp::kSignaturesAttrName);
  if (!sigs)
    return stub;
  for (NamedAttribute e : sigs)
    for (std::string name :
         {e.getName().str(), "_mlir_ciface_" + e.getName().str()})
      if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name)) {
        Operation *decl = f->cloneWithoutRegions();
        b.insert(decl);
        decl->getRegion(0).getBlocks().clear();
      }
  return stub;
}

bool writeFile(const std::string &path, llvm::StringRef bytes) {
  std::string tmp =
      path + ".tmp" + std::to_string(llvm::sys::Process::getProcessId());
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return false;
    os << bytes;
  }
  return !llvm::sys::fs::rename(tmp, path);
}

/// The JIT'd code's malloc and free, bound to the counting wrappers of
/// Memory.h (they take precedence over the process's own).
llvm::orc::SymbolMap allocatorSymbols(llvm::orc::MangleAndInterner mangle) {
  llvm::orc::SymbolMap map;
  auto bind = [&](llvm::StringRef name, void *fn) {
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                         llvm::JITSymbolFlags::Exported};
  };
  bind("malloc", reinterpret_cast<void *>(&memory::fsdp_run_jit_malloc));
  bind("free", reinterpret_cast<void *>(&memory::fsdp_run_jit_free));
  return map;
}

void addRunnerLibraries(llvm::orc::LLJIT &jit) {
  llvm::orc::JITDylib &dylib = jit.getMainJITDylib();
  char prefix = jit.getDataLayout().getGlobalPrefix();
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (process)
    dylib.addGenerator(std::move(*process));
#ifdef FSDP_C_RUNNER_UTILS
  auto utils = llvm::orc::DynamicLibrarySearchGenerator::Load(
      FSDP_C_RUNNER_UTILS, prefix);
  if (utils)
    dylib.addGenerator(std::move(*utils));
  else
    llvm::consumeError(utils.takeError());
#endif
}

/// A target machine for the host CPU, at -O2 or -O0.
std::unique_ptr<llvm::TargetMachine> hostTargetMachine(bool optimize) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    fail("JIT: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(optimize ? llvm::CodeGenOptLevel::Default
                                    : llvm::CodeGenOptLevel::None);
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    fail("JIT: " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

/// For each C interface function `_mlir_ciface_<f>`, the packed wrapper
/// `_mlir__mlir_ciface_<f>(void **args)` the runner calls (as the
/// ExecutionEngine defines it: args[i] points to argument i, the result
/// is stored through args[n]).
void addPackedWrappers(llvm::Module &m) {
  SmallVector<llvm::Function *> entries;
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && f.getName().starts_with("_mlir_ciface_"))
      entries.push_back(&f);
  llvm::LLVMContext &ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  for (llvm::Function *f : entries) {
    auto *type = llvm::FunctionType::get(b.getVoidTy(), b.getPtrTy(), false);
    auto *wrapper = llvm::Function::Create(
        type, llvm::GlobalValue::ExternalLinkage, "_mlir_" + f->getName(), m);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    llvm::Value *list = wrapper->getArg(0);
    SmallVector<llvm::Value *> args;
    for (auto [i, arg] : llvm::enumerate(f->args())) {
      llvm::Value *slot = b.CreateGEP(b.getPtrTy(), list, b.getInt64(i));
      llvm::Value *ptr = b.CreateLoad(b.getPtrTy(), slot);
      args.push_back(b.CreateLoad(arg.getType(), ptr));
    }
    llvm::Value *result = b.CreateCall(f, args);
    if (!result->getType()->isVoidTy()) {
      llvm::Value *slot =
          b.CreateGEP(b.getPtrTy(), list, b.getInt64(f->arg_size()));
      b.CreateStore(result, b.CreateLoad(b.getPtrTy(), slot));
    }
    b.CreateRetVoid();
  }
}

/// Splits the basic blocks of `f` into pieces of at most `limit`
/// instructions. At -O0, an instruction FastISel cannot select sends its
/// whole block to SelectionDAG, whose cost grows faster than the block.
/// Splits from the end of a block, so that each split moves one piece.
void splitLongBlocks(llvm::Function &f, unsigned limit) {
  SmallVector<llvm::BasicBlock *> work;
  for (llvm::BasicBlock &bb : f)
    work.push_back(&bb);
  SmallVector<llvm::Instruction *> cuts;
  for (llvm::BasicBlock *bb : work) {
    // Allocas and phis stay in their block (the entry's are static).
    llvm::Instruction *start = nullptr;
    for (llvm::Instruction &i : *bb)
      if (isa<llvm::AllocaInst, llvm::PHINode>(i))
        start = nullptr;
      else if (!start)
        start = &i;
    cuts.clear();
    unsigned count = 0;
    for (llvm::Instruction *i = start; i && !i->isTerminator();
         i = i->getNextNode())
      if (++count == limit) {
        cuts.push_back(i);
        count = 0;
      }
    for (llvm::Instruction *cut : llvm::reverse(cuts))
      bb->splitBasicBlock(cut);
  }
}

/// Rewrites each function of `names` that returns an aggregate (the
/// segments return every result's descriptor in one struct) to store it
/// through a pointer argument instead, and each call to read the fields
/// it uses from that memory. -O0's FastISel selects neither a call that
/// returns a large aggregate nor an extractvalue of one, and sends their
/// whole block to SelectionDAG.
void returnThroughMemory(llvm::Module &m, const llvm::StringSet<> &names) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  SmallVector<llvm::Function *> work;
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && names.contains(f.getName()) &&
        f.getReturnType()->isAggregateType() && !f.isVarArg() &&
        llvm::all_of(f.users(), [&](llvm::User *u) {
          auto *call = dyn_cast<llvm::CallInst>(u);
          return call && call->getCalledFunction() == &f;
        }))
      work.push_back(&f);
  for (llvm::Function *f : work) {
    llvm::Type *resultType = f->getReturnType();
    SmallVector<llvm::Type *> params{b.getPtrTy()};
    llvm::append_range(params, f->getFunctionType()->params());
    auto *nf = llvm::Function::Create(
        llvm::FunctionType::get(b.getVoidTy(), params, false), f->getLinkage(),
        f->getAddressSpace(), "", &m);
    nf->copyAttributesFrom(f);
    nf->setAttributes(llvm::AttributeList::get(
        ctx, f->getAttributes().getFnAttrs(), llvm::AttributeSet(), [&] {
          SmallVector<llvm::AttributeSet> args{llvm::AttributeSet()};
          for (unsigned i = 0; i < f->arg_size(); ++i)
            args.push_back(f->getAttributes().getParamAttrs(i));
          return args;
        }()));
    nf->takeName(f);
    nf->splice(nf->begin(), f);
    llvm::Argument *out = nf->getArg(0);
    for (auto [from, to] : llvm::zip(f->args(), llvm::drop_begin(nf->args())))
      from.replaceAllUsesWith(&to);
    for (llvm::BasicBlock &bb : *nf)
      if (auto *ret = dyn_cast<llvm::ReturnInst>(bb.getTerminator())) {
        b.SetInsertPoint(ret);
        b.CreateStore(ret->getReturnValue(), out);
        b.CreateRetVoid();
        ret->eraseFromParent();
      }
    // One result slot per caller: every field is read right after the call.
    llvm::DenseMap<llvm::Function *, llvm::AllocaInst *> slots;
    for (llvm::User *u : llvm::make_early_inc_range(f->users())) {
      auto *call = cast<llvm::CallInst>(u);
      llvm::Function *caller = call->getFunction();
      llvm::AllocaInst *&slot = slots[caller];
      if (!slot) {
        b.SetInsertPoint(&caller->getEntryBlock(),
                         caller->getEntryBlock().begin());
        slot = b.CreateAlloca(resultType);
      }
      b.SetInsertPoint(call);
      SmallVector<llvm::Value *> args{slot};
      llvm::append_range(args, call->args());
      llvm::CallInst *nc = b.CreateCall(nf, args);
      nc->setCallingConv(call->getCallingConv());
      // Fields used through (nested) extractvalues become loads; any other
      // use reads the whole aggregate.
      b.SetInsertPoint(nc->getNextNode());
      auto load = [&](llvm::Type *type, ArrayRef<unsigned> path) {
        if (path.empty())
          return b.CreateLoad(type, slot);
        SmallVector<llvm::Value *> indices{b.getInt32(0)};
        for (unsigned i : path)
          indices.push_back(b.getInt32(i));
        return b.CreateLoad(type,
                            b.CreateInBoundsGEP(resultType, slot, indices));
      };
      std::function<void(llvm::Value *, SmallVector<unsigned>)> replace =
          [&](llvm::Value *v, SmallVector<unsigned> path) {
            llvm::Value *whole = nullptr;
            for (llvm::Use &use : llvm::make_early_inc_range(v->uses())) {
              auto *ev = dyn_cast<llvm::ExtractValueInst>(use.getUser());
              if (!ev) {
                if (!whole)
                  whole = load(v->getType(), path);
                use.set(whole);
                continue;
              }
              SmallVector<unsigned> sub = path;
              llvm::append_range(sub, ev->getIndices());
              if (ev->getType()->isAggregateType())
                replace(ev, sub);
              else
                ev->replaceAllUsesWith(load(ev->getType(), sub));
              ev->eraseFromParent();
            }
          };
      replace(call, {});
      call->eraseFromParent();
    }
    f->eraseFromParent();
  }
}

/// Moves the body of the callee of `call`, which has no other caller,
/// into the caller at the call: no copy, linear in the callee's size.
void inlineBySplice(llvm::CallInst *call) {
  llvm::Function *callee = call->getCalledFunction();
  llvm::Function *caller = call->getFunction();
  llvm::BasicBlock *head = call->getParent();
  llvm::BasicBlock *tail = head->splitBasicBlock(call);
  for (auto [formal, actual] : llvm::zip(callee->args(), call->args()))
    formal.replaceAllUsesWith(actual);
  llvm::BasicBlock *body = &callee->getEntryBlock();
  llvm::BasicBlock &entry = caller->getEntryBlock();
  for (llvm::Instruction &i : llvm::make_early_inc_range(*body))
    if (auto *alloca = dyn_cast<llvm::AllocaInst>(&i);
        alloca && alloca->isStaticAlloca())
      alloca->moveBefore(entry, entry.getFirstInsertionPt());
  SmallVector<llvm::ReturnInst *> returns;
  for (llvm::BasicBlock &bb : *callee)
    if (auto *ret = dyn_cast<llvm::ReturnInst>(bb.getTerminator()))
      returns.push_back(ret);
  caller->splice(tail->getIterator(), callee);
  head->getTerminator()->setSuccessor(0, body);
  if (!call->getType()->isVoidTy()) {
    llvm::Value *result;
    if (returns.size() == 1) {
      result = returns.front()->getReturnValue();
    } else {
      auto *phi = llvm::PHINode::Create(call->getType(), returns.size(), "",
                                        tail->begin());
      for (llvm::ReturnInst *ret : returns)
        phi->addIncoming(ret->getReturnValue(), ret->getParent());
      result = phi;
    }
    call->replaceAllUsesWith(result);
  }
  for (llvm::ReturnInst *ret : returns) {
    llvm::BranchInst::Create(tail, ret->getIterator());
    ret->eraseFromParent();
  }
  call->eraseFromParent();
  callee->eraseFromParent();
}

/// Inlines each entry into its C interface wrapper. The entry takes every
/// memref as 3 + 2 x rank scalars and returns all results as one
/// aggregate; the wrapper loads the arguments and stores the aggregate.
/// Code generation of those calls and of the aggregate return grows faster
/// than their size; once inlined (and scalarizeAggregates has run), every
/// field is one load or one store.
void inlineEntries(llvm::Module &m) {
  SmallVector<llvm::CallInst *> calls;
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || !f.getName().starts_with("_mlir_ciface_"))
      continue;
    llvm::Function *entry =
        m.getFunction(f.getName().drop_front(strlen("_mlir_ciface_")));
    if (!entry || entry->isDeclaration() || entry->isVarArg() ||
        !entry->hasOneUse())
      continue;
    auto *call = dyn_cast<llvm::CallInst>(entry->user_back());
    if (call && call->getFunction() == &f && call->getCalledOperand() == entry)
      calls.push_back(call);
  }
  for (llvm::CallInst *call : calls)
    inlineBySplice(call);
}

/// Stores the aggregate `v` field by field through `ptr` (of type
/// `type`, at `path`): the fields of an insertvalue chain directly, in the
/// order they were inserted, the others through extractvalue.
void storeFields(llvm::IRBuilder<> &b, llvm::Value *v, llvm::Type *type,
                 llvm::Value *ptr, SmallVector<unsigned> path) {
  if (!v->getType()->isAggregateType()) {
    SmallVector<llvm::Value *> indices{b.getInt32(0)};
    for (unsigned i : path)
      indices.push_back(b.getInt32(i));
    b.CreateStore(v,
                  path.empty() ? ptr : b.CreateInBoundsGEP(type, ptr, indices));
    return;
  }
  if (isa<llvm::UndefValue>(v)) // and poison: nothing defined to store
    return;
  if (isa<llvm::InsertValueInst>(v)) {
    SmallVector<llvm::InsertValueInst *> chain;
    llvm::Value *base = v;
    while (auto *insert = dyn_cast<llvm::InsertValueInst>(base)) {
      chain.push_back(insert);
      base = insert->getAggregateOperand();
    }
    storeFields(b, base, type, ptr, path);
    for (llvm::InsertValueInst *insert : llvm::reverse(chain)) {
      SmallVector<unsigned> sub = path;
      llvm::append_range(sub, insert->getIndices());
      storeFields(b, insert->getInsertedValueOperand(), type, ptr, sub);
    }
    return;
  }
  unsigned n = isa<llvm::StructType>(v->getType())
                   ? v->getType()->getStructNumElements()
                   : v->getType()->getArrayNumElements();
  for (unsigned i = 0; i < n; ++i) {
    SmallVector<unsigned> sub = path;
    sub.push_back(i);
    llvm::Value *field = nullptr;
    if (auto *c = dyn_cast<llvm::Constant>(v))
      field = c->getAggregateElement(i);
    else
      field = b.CreateExtractValue(v, i);
    storeFields(b, field, type, ptr, sub);
  }
}

/// The value an extractvalue reads from an insertvalue chain, or null.
llvm::Value *insertedValue(llvm::ExtractValueInst *extract) {
  llvm::Value *v = extract->getAggregateOperand();
  SmallVector<unsigned> path(extract->getIndices());
  // Descriptors are short chains; the bound keeps this linear.
  for (int steps = 0; steps < 64; ++steps) {
    auto *insert = dyn_cast<llvm::InsertValueInst>(v);
    if (!insert)
      return nullptr;
    ArrayRef<unsigned> at = insert->getIndices();
    size_t common = std::min(at.size(), path.size());
    if (!llvm::equal(at.take_front(common),
                     ArrayRef(path).take_front(common))) {
      v = insert->getAggregateOperand();
      continue;
    }
    if (at.size() > path.size())
      return nullptr; // reads an aggregate that holds the inserted field
    v = insert->getInsertedValueOperand();
    path.erase(path.begin(), path.begin() + at.size());
    if (path.empty())
      return v;
  }
  return nullptr;
}

/// Replaces the loads and stores of aggregates in `f` (descriptors and
/// result structs) by loads and stores of their fields, which -O0's
/// FastISel selects; an aggregate value sends its block to SelectionDAG.
void scalarizeAggregates(llvm::Function &f) {
  SmallVector<llvm::StoreInst *> stores;
  SmallVector<llvm::LoadInst *> loads;
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *store = dyn_cast<llvm::StoreInst>(&i);
        store && store->isSimple() &&
        store->getValueOperand()->getType()->isAggregateType())
      stores.push_back(store);
  llvm::IRBuilder<> b(f.getContext());
  for (llvm::StoreInst *store : stores) {
    b.SetInsertPoint(store);
    llvm::Value *v = store->getValueOperand();
    storeFields(b, v, v->getType(), store->getPointerOperand(), {});
    store->eraseFromParent();
    llvm::RecursivelyDeleteTriviallyDeadInstructions(v);
  }
  // Fields of descriptors built in the function are read directly.
  SmallVector<llvm::ExtractValueInst *> extracts;
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *extract = dyn_cast<llvm::ExtractValueInst>(&i))
      extracts.push_back(extract);
  SmallVector<llvm::WeakTrackingVH> dead;
  for (llvm::ExtractValueInst *extract : extracts)
    if (llvm::Value *v = insertedValue(extract)) {
      dead.push_back(extract->getAggregateOperand());
      extract->replaceAllUsesWith(v);
      extract->eraseFromParent();
    }
  llvm::RecursivelyDeleteTriviallyDeadInstructionsPermissive(dead);
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *load = dyn_cast<llvm::LoadInst>(&i);
        load && load->isSimple() && load->getType()->isAggregateType())
      loads.push_back(load);
  while (!loads.empty()) {
    llvm::LoadInst *load = loads.pop_back_val();
    if (!llvm::all_of(load->users(), [](llvm::User *u) {
          return isa<llvm::ExtractValueInst>(u);
        }))
      continue;
    b.SetInsertPoint(load);
    for (llvm::User *u : llvm::make_early_inc_range(load->users())) {
      auto *extract = cast<llvm::ExtractValueInst>(u);
      SmallVector<llvm::Value *> indices{b.getInt32(0)};
      for (unsigned i : extract->getIndices())
        indices.push_back(b.getInt32(i));
      llvm::LoadInst *field =
          b.CreateLoad(extract->getType(),
                       b.CreateInBoundsGEP(load->getType(),
                                           load->getPointerOperand(), indices));
      if (field->getType()->isAggregateType())
        loads.push_back(field);
      extract->replaceAllUsesWith(field);
      extract->eraseFromParent();
    }
    load->eraseFromParent();
  }
}

/// An LLJIT for the host holding `objects`, or null.
std::unique_ptr<llvm::orc::LLJIT>
makeJit(llvm::MutableArrayRef<std::unique_ptr<llvm::MemoryBuffer>> objects) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    llvm::consumeError(jtmb.takeError());
    return nullptr;
  }
  auto lljit = llvm::orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(std::move(*jtmb))
                   .create();
  if (!lljit) {
    llvm::consumeError(lljit.takeError());
    return nullptr;
  }
  addRunnerLibraries(**lljit);
  llvm::orc::MangleAndInterner mangle((*lljit)->getExecutionSession(),
                                      (*lljit)->getDataLayout());
  if (llvm::Error err = (*lljit)->getMainJITDylib().define(
          llvm::orc::absoluteSymbols(allocatorSymbols(mangle))))
    fail("cannot bind the JIT's allocator: " + llvm::toString(std::move(err)));
  for (std::unique_ptr<llvm::MemoryBuffer> &object : objects)
    if (llvm::Error e = (*lljit)->addObjectFile(std::move(object))) {
      llvm::consumeError(std::move(e));
      return nullptr;
    }
  return std::move(*lljit);
}

} // namespace

Jit::Jit() = default;
Jit::~Jit() = default;

std::string defaultCacheDir() {
  if (const char *d = getenv("FSDP_JIT_CACHE_DIR"))
    return d;
  if (const char *x = getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/fsdp-run";
  if (const char *h = getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/fsdp-run";
  return "";
}

llvm::Error Jit::invokePacked(llvm::StringRef name,
                              llvm::MutableArrayRef<void *> args) {
  auto sym = lljit->lookup(("_mlir_" + name).str());
  if (!sym)
    return sym.takeError();
  sym->toPtr<void (*)(void **)>()(args.data());
  return llvm::Error::success();
}

std::unique_ptr<Jit> Jit::open(const std::string &inputFile,
                               const std::string &cacheDir,
                               MLIRContext &context,
                               OwningOpRef<ModuleOp> &module) {
  std::unique_ptr<Jit> jit(new Jit);
  auto t0 = std::chrono::steady_clock::now();
  auto bytes = llvm::MemoryBuffer::getFile(inputFile);
  if (!bytes)
    fail("cannot read " + inputFile + ": " + bytes.getError().message());
  std::string base;
  if (!cacheDir.empty())
    base = cacheDir + "/" + cacheKey((*bytes)->getBuffer());

  // A hit: the stub and the objects, no compilation.
  if (!base.empty() && llvm::sys::fs::exists(base + ".o") &&
      llvm::sys::fs::exists(base + ".glue.o") &&
      llvm::sys::fs::exists(base + ".stub.mlirbc")) {
    module = parseSourceFile<ModuleOp>(base + ".stub.mlirbc", &context);
    auto kernels = llvm::MemoryBuffer::getFile(base + ".o");
    auto glue = llvm::MemoryBuffer::getFile(base + ".glue.o");
    if (module && kernels && glue) {
      jit->parseSeconds = secondsSince(t0);
      auto t1 = std::chrono::steady_clock::now();
      std::unique_ptr<llvm::MemoryBuffer> objects[] = {std::move(*kernels),
                                                       std::move(*glue)};
      if ((jit->lljit = makeJit(objects))) {
        jit->cacheHit = true;
        jit->compileSeconds = secondsSince(t1);
        return jit;
      }
    }
    // An unusable entry: compile as if it were not there.
    t0 = std::chrono::steady_clock::now();
  }

  {
    // Inputs that crash upstream parsers get an error (InputGuard.h).
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer((*bytes)->getMemBufferRef(),
                                         /*RequiresNullTerminator=*/false),
        llvm::SMLoc());
    if (failed(mlir::fsdp::checkParserHazards(sourceMgr)))
      fail("cannot parse " + inputFile);
  }
  module =
      parseSourceString<ModuleOp>((*bytes)->getBuffer(), &context, inputFile);
  if (!module)
    fail("cannot parse " + inputFile);
  jit->parseSeconds = secondsSince(t0);
  // Which functions are kernels, the only code worth optimizing: recorded
  // now, the runner strips the `fsdp.kernel` attributes before compile().
  module->walk([&](LLVM::LLVMFuncOp f) {
    if (f->hasAttr(mlir::fsdp::kKernelAttrName) && !f.isExternal())
      jit->kernelNames.insert(f.getSymName());
  });
  if (!base.empty()) {
    jit->stub = makeStub(*module);
    jit->cacheDir = cacheDir;
    jit->cacheBase = base;
  }
  return jit;
}

void Jit::compile(ModuleOp module) {
  if (lljit)
    return;
  auto t1 = std::chrono::steady_clock::now();
  auto tPhase = t1;
  auto phase = [&](const char *name) {
    compilePhases.emplace_back(name, secondsSince(tPhase));
    tPhase = std::chrono::steady_clock::now();
  };
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> glue =
      translateModuleToLLVMIR(module, llvmContext);
  if (!glue)
    fail("JIT compilation failed: cannot translate the module to LLVM IR");
  phase("translate");
  std::unique_ptr<llvm::TargetMachine> tmO2 = hostTargetMachine(true);
  std::unique_ptr<llvm::TargetMachine> tmO0 = hostTargetMachine(false);
  glue->setDataLayout(tmO2->createDataLayout());
  glue->setTargetTriple(tmO2->getTargetTriple());

  // Two objects: the kernels at -O2 for the host CPU, everything else (the
  // step, the segments and the wrappers: calls, allocations and argument
  // shuffling, one long basic block each) at -O0, whose instruction
  // selection and register allocation are linear in the function's size;
  // -O2's schedulers are quadratic in a basic block's length. The kernels
  // move to a context of their own and compile on a second thread.
  for (llvm::GlobalValue &g : glue->global_values())
    if (g.hasLocalLinkage() && !g.isDeclaration()) {
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      g.setVisibility(llvm::GlobalValue::DefaultVisibility);
    }
  llvm::SmallString<0> kernelBitcode;
  {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> kernels =
        llvm::CloneModule(*glue, map, [&](const llvm::GlobalValue *g) {
          return isa<llvm::Function>(g) && kernelNames.contains(g->getName());
        });
    llvm::raw_svector_ostream os(kernelBitcode);
    llvm::WriteBitcodeToFile(*kernels, os);
  }
  for (llvm::Function &f : *glue)
    if (kernelNames.contains(f.getName()))
      f.deleteBody();
  phase("split_kernels");
  std::unique_ptr<llvm::MemoryBuffer> objects[2];
  std::string kernelError;
  double kernelSeconds = 0;
  std::thread kernelThread([&] {
    auto t = std::chrono::steady_clock::now();
    llvm::LLVMContext context;
    auto kernels = llvm::parseBitcodeFile(
        llvm::MemoryBufferRef(kernelBitcode, "kernels"), context);
    if (!kernels) {
      kernelError = llvm::toString(kernels.takeError());
      return;
    }
    std::function<llvm::Error(llvm::Module *)> optimize =
        makeOptimizingTransformer(2, 0, tmO2.get());
    if (llvm::Error e = optimize(kernels->get())) {
      kernelError = llvm::toString(std::move(e));
      return;
    }
    llvm::orc::SimpleCompiler compiler(*tmO2);
    auto object = compiler(**kernels);
    if (!object) {
      kernelError = llvm::toString(object.takeError());
      return;
    }
    objects[0] = std::move(*object);
    kernelSeconds = secondsSince(t);
  });

  addPackedWrappers(*glue);
  inlineEntries(*glue);
  llvm::StringSet<> internal;
  for (llvm::Function &f : *glue)
    if (!f.isDeclaration() && !f.use_empty() &&
        !f.getName().starts_with("_mlir_"))
      internal.insert(f.getName());
  returnThroughMemory(*glue, internal);
  for (llvm::Function &f : *glue)
    if (!f.isDeclaration()) {
      scalarizeAggregates(f);
      splitLongBlocks(f, 256);
    }
  phase("prepare_glue");
  {
    llvm::orc::SimpleCompiler compiler(*tmO0);
    auto object = compiler(*glue);
    if (!object) {
      kernelThread.join();
      fail("JIT compilation failed: " + llvm::toString(object.takeError()));
    }
    objects[1] = std::move(*object);
  }
  phase("codegen_glue");
  kernelThread.join();
  if (!objects[0])
    fail("JIT compilation failed: " + kernelError);
  phase("wait_kernels");
  compilePhases.emplace_back("kernels_beside", kernelSeconds);
  std::string names[] = {cacheBase + ".o", cacheBase + ".glue.o"};
  std::string copies[2];
  if (!cacheBase.empty())
    for (int i = 0; i < 2; ++i)
      copies[i] = objects[i]->getBuffer().str();
  lljit = makeJit(objects);
  if (!lljit)
    fail("JIT compilation failed: cannot load the compiled objects");
  // Resolve the entries now, so that the time includes linking them.
  module.walk([&](LLVM::LLVMFuncOp f) {
    if (!f.getSymName().starts_with("_mlir_ciface_") || f.isExternal())
      return;
    auto fn = lljit->lookup(("_mlir_" + f.getSymName()).str());
    if (!fn)
      llvm::consumeError(fn.takeError()); // reported when it is called
  });
  phase("link");
  compileSeconds = secondsSince(t1);
  if (!cacheBase.empty() && !llvm::sys::fs::create_directories(cacheDir)) {
    std::string stubBytes;
    llvm::raw_string_ostream os(stubBytes);
    // The kernels' object last: the entry is a hit only when it exists.
    if (succeeded(writeBytecodeToFile(*stub, os)) &&
        writeFile(cacheBase + ".stub.mlirbc", stubBytes) &&
        writeFile(names[1], copies[1]))
      writeFile(names[0], copies[0]);
  }
}

} // namespace fsdp::run

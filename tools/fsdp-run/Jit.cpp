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
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <chrono>
#include <functional>

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
  std::string salt = "fsdp-run-jit-v3 " LLVM_VERSION_STRING " " +
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
  auto sigs = module->getAttrOfType<DictionaryAttr>("fsdp.signatures");
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
void splitLongBlocks(llvm::Function &f, unsigned limit) {
  SmallVector<llvm::BasicBlock *> work;
  for (llvm::BasicBlock &bb : f)
    work.push_back(&bb);
  for (llvm::BasicBlock *bb : work) {
    // Allocas stay in their block (the entry's are static).
    unsigned count = 0;
    llvm::Instruction *start = nullptr;
    for (llvm::Instruction &i : *bb)
      if (isa<llvm::AllocaInst, llvm::PHINode>(i))
        start = nullptr, count = 0;
      else if (!start)
        start = &i;
    for (llvm::Instruction *i = start; i && !i->isTerminator();) {
      if (++count < limit) {
        i = i->getNextNode();
        continue;
      }
      bb = bb->splitBasicBlock(i);
      count = 0;
      i = i->getNextNode();
    }
  }
}

/// Inlines each entry into its C interface wrapper and folds the
/// descriptor traffic between them. The entry takes every memref as 3 + 2 x
/// rank scalars and returns all results as one aggregate; the wrapper
/// loads the arguments and stores the aggregate. Code generation of those
/// calls and of the aggregate return grows faster than their size; once
/// inlined, every field is one load or one store.
void inlineEntries(llvm::Module &m, llvm::TargetMachine &tm) {
  SmallVector<llvm::Function *> wrappers;
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || !f.getName().starts_with("_mlir_ciface_"))
      continue;
    llvm::Function *entry =
        m.getFunction(f.getName().drop_front(strlen("_mlir_ciface_")));
    if (!entry || entry->isDeclaration() ||
        !llvm::all_of(entry->users(), [&](llvm::User *u) {
          auto *call = dyn_cast<llvm::CallInst>(u);
          return call && call->getFunction() == &f;
        }))
      continue;
    entry->removeFnAttr(llvm::Attribute::OptimizeNone);
    entry->removeFnAttr(llvm::Attribute::NoInline);
    entry->addFnAttr(llvm::Attribute::AlwaysInline);
    f.removeFnAttr(llvm::Attribute::OptimizeNone);
    wrappers.push_back(&f);
  }
  if (wrappers.empty())
    return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager inliner;
  inliner.addPass(llvm::AlwaysInlinerPass(/*InsertLifetime=*/false));
  inliner.run(m, mam);
  llvm::FunctionPassManager fold;
  fold.addPass(llvm::InstCombinePass());
  for (llvm::Function *f : wrappers)
    fold.run(*f, fam);
  // The entries themselves are not called any more.
  for (llvm::Function *f : wrappers)
    if (llvm::Function *entry =
            m.getFunction(f->getName().drop_front(strlen("_mlir_ciface_"))))
      if (entry->use_empty())
        entry->eraseFromParent();
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
    if (f->hasAttr("fsdp.kernel") && !f.isExternal())
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
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> glue =
      translateModuleToLLVMIR(module, llvmContext);
  if (!glue)
    fail("JIT compilation failed: cannot translate the module to LLVM IR");
  std::unique_ptr<llvm::TargetMachine> tmO2 = hostTargetMachine(true);
  std::unique_ptr<llvm::TargetMachine> tmO0 = hostTargetMachine(false);
  glue->setDataLayout(tmO2->createDataLayout());
  glue->setTargetTriple(tmO2->getTargetTriple());
  addPackedWrappers(*glue);
  inlineEntries(*glue, *tmO0);

  // Two objects: the kernels at -O2 for the host CPU, everything else (the
  // step, the segments and the wrappers: calls, allocations and argument
  // shuffling, one long basic block each) at -O0, whose instruction
  // selection and register allocation are linear in the function's size;
  // -O2's schedulers are quadratic in a basic block's length.
  for (llvm::GlobalValue &g : glue->global_values())
    if (g.hasLocalLinkage() && !g.isDeclaration()) {
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      g.setVisibility(llvm::GlobalValue::DefaultVisibility);
    }
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> kernels =
      llvm::CloneModule(*glue, map, [&](const llvm::GlobalValue *g) {
        return isa<llvm::Function>(g) && kernelNames.contains(g->getName());
      });
  for (llvm::Function &f : *glue) {
    if (kernelNames.contains(f.getName()))
      f.deleteBody();
    else if (!f.isDeclaration())
      splitLongBlocks(f, 256);
  }
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(2, 0, tmO2.get());
  if (llvm::Error e = optimize(kernels.get()))
    fail("JIT compilation failed: " + llvm::toString(std::move(e)));
  std::unique_ptr<llvm::MemoryBuffer> objects[2];
  for (auto [i, m, tm] : {std::tuple(0, kernels.get(), tmO2.get()),
                          std::tuple(1, glue.get(), tmO0.get())}) {
    llvm::orc::SimpleCompiler compiler(*tm);
    auto object = compiler(*m);
    if (!object)
      fail("JIT compilation failed: " + llvm::toString(object.takeError()));
    objects[i] = std::move(*object);
  }
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

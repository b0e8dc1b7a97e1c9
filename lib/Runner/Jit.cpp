//===- Jit.cpp - compile a lowered module, or load it from the cache ------===//

#include "Jit.h"
#include "JitRewrites.h"
#include "ManifestWriter.h"
#include "fsdprt.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Pipeline/InputGuard.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
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
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/Local.h"

#include <chrono>
#include <dlfcn.h>
#include <functional>
#include <mutex>
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
/// again; v2 objects hold kernels compiled at -O0; v6: global constructors
/// gathered into a function the JIT calls; v7: a manifest of the entry
/// instead of a stub module).
std::string cacheKey(llvm::StringRef bytes, const std::string &entry) {
  std::string salt = "fsdp-run-jit-v7 " LLVM_VERSION_STRING " " +
                     llvm::sys::getHostCPUName().str() + " entry=" + entry;
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

} // namespace

namespace {

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

/// The JIT'd code's malloc and free, bound to the runner's counting
/// wrappers (Memory.h; they take precedence over the process's own).
llvm::orc::SymbolMap allocatorSymbols(llvm::orc::MangleAndInterner mangle,
                                      const JitHost &host) {
  llvm::orc::SymbolMap map;
  auto bind = [&](llvm::StringRef name, void *fn) {
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                         llvm::JITSymbolFlags::Exported};
  };
  bind("malloc", reinterpret_cast<void *>(host.malloc));
  bind("free", reinterpret_cast<void *>(host.free));
  return map;
}

/// The symbols of the shared object at `path`, opened RTLD_LOCAL: LLVM's
/// own loader opens RTLD_GLOBAL, which would put the libLLVM this library
/// depends on into the process's global scope, where it interposes on
/// another LLVM loaded later (torch's triton).
void addLibraryHandle(llvm::orc::JITDylib &dylib, void *handle, char prefix) {
  dylib.addGenerator(std::make_unique<llvm::orc::DynamicLibrarySearchGenerator>(
      llvm::sys::DynamicLibrary(handle), prefix));
}

void addLocalLibrary(llvm::orc::JITDylib &dylib, const char *path,
                     char prefix) {
  if (void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL))
    addLibraryHandle(dylib, handle, prefix);
}

/// The symbols of the shared object that defines `symbol`: the process's
/// global symbols are not enough when this library was itself loaded
/// RTLD_LOCAL (Python's ctypes default).
void addLibraryOf(llvm::orc::JITDylib &dylib, const void *symbol, char prefix) {
  Dl_info info;
  if (dladdr(symbol, &info) && info.dli_fname)
    addLocalLibrary(dylib, info.dli_fname, prefix);
}

void addRunnerLibraries(llvm::orc::LLJIT &jit, const JitHost &host) {
  llvm::orc::JITDylib &dylib = jit.getMainJITDylib();
  char prefix = jit.getDataLayout().getGlobalPrefix();
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (process)
    dylib.addGenerator(std::move(*process));
  addLibraryOf(dylib, reinterpret_cast<const void *>(&fsdprt_options_init),
               prefix);
  if (host.blasHandle)
    addLibraryHandle(dylib, host.blasHandle, prefix);
#ifdef FSDP_C_RUNNER_UTILS
  addLocalLibrary(dylib, FSDP_C_RUNNER_UTILS, prefix);
#endif
}

/// A target machine for `target`, at -O2 or -O0.
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
targetMachine(const CodeTarget &target, bool optimize) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return jtmb.takeError();
  if (!target.isHost()) {
    // A named CPU: its own features only, not the host's.
    jtmb->setCPU(target.cpu);
    jtmb->getFeatures() = llvm::SubtargetFeatures(target.features);
  }
  if (target.positionIndependent)
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
  jtmb->setCodeGenOptLevel(optimize ? llvm::CodeGenOptLevel::Default
                                    : llvm::CodeGenOptLevel::None);
  return jtmb->createTargetMachine();
}

llvm::Error jitError(const llvm::Twine &what, llvm::Error cause) {
  return llvm::createStringError(what + ": " +
                                 llvm::toString(std::move(cause)));
}

/// An LLJIT for the host holding `objects`.
llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>>
makeJit(llvm::MutableArrayRef<std::unique_ptr<llvm::MemoryBuffer>> objects,
        const JitHost &host) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return jtmb.takeError();
  auto lljit = llvm::orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(std::move(*jtmb))
                   .create();
  if (!lljit)
    return lljit.takeError();
  addRunnerLibraries(**lljit, host);
  llvm::orc::MangleAndInterner mangle((*lljit)->getExecutionSession(),
                                      (*lljit)->getDataLayout());
  if (llvm::Error err = (*lljit)->getMainJITDylib().define(
          llvm::orc::absoluteSymbols(allocatorSymbols(mangle, host))))
    return jitError("cannot bind the JIT's allocator", std::move(err));
  for (std::unique_ptr<llvm::MemoryBuffer> &object : objects)
    if (llvm::Error e = (*lljit)->addObjectFile(std::move(object)))
      return e;
  return std::move(*lljit);
}

/// The kernels of the translated module as bitcode (they compile in a
/// context of their own, on a second thread); their bodies leave `glue`.
llvm::SmallString<0> splitKernels(llvm::Module &glue,
                                  const llvm::StringSet<> &kernelNames) {
  for (llvm::GlobalValue &g : glue.global_values())
    if (g.hasLocalLinkage() && !g.isDeclaration()) {
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      g.setVisibility(llvm::GlobalValue::DefaultVisibility);
    }
  llvm::SmallString<0> bitcode;
  {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> kernels =
        llvm::CloneModule(glue, map, [&](const llvm::GlobalValue *g) {
          return isa<llvm::Function>(g) && kernelNames.contains(g->getName());
        });
    llvm::raw_svector_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*kernels, os);
  }
  for (llvm::Function &f : glue)
    if (kernelNames.contains(f.getName()))
      f.deleteBody();
  return bitcode;
}

/// Optimizes the kernels at -O2 and compiles them.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
compileKernels(llvm::StringRef bitcode, llvm::TargetMachine &tm) {
  llvm::LLVMContext context;
  auto kernels = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(bitcode, "kernels"), context);
  if (!kernels)
    return kernels.takeError();
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(2, 0, &tm);
  if (llvm::Error e = optimize(kernels->get()))
    return e;
  llvm::orc::SimpleCompiler compiler(tm);
  return compiler(**kernels);
}

/// The glue in the form -O0 compiles in linear time (JitRewrites.h).
void prepareGlue(llvm::Module &glue) {
  addPackedWrappers(glue);
  inlineEntries(glue);
  llvm::StringSet<> internal;
  for (llvm::Function &f : glue)
    if (!f.isDeclaration() && !f.use_empty() &&
        !f.getName().starts_with("_mlir_"))
      internal.insert(f.getName());
  returnThroughMemory(glue, internal);
  for (llvm::Function &f : glue)
    if (!f.isDeclaration()) {
      scalarizeAggregates(f);
      splitLongBlocks(f, 256);
    }
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
parseLoweredModule(llvm::MemoryBufferRef bytes, const std::string &name,
                   MLIRContext &context) {
  if (bytes.getBufferSize() == 0)
    return llvm::createStringError(name + " is empty: no step module");
  // MLIR's lexer stops at the NUL that a MemoryBuffer guarantees after its
  // last byte; a mapped file has none when its size fills its last page, so
  // the parser reads a NUL-terminated copy.
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(bytes.getBuffer(), name),
      llvm::SMLoc());
  // Inputs that crash upstream parsers get an error (InputGuard.h).
  if (failed(mlir::fsdp::checkParserHazards(sourceMgr)))
    return llvm::createStringError("cannot parse " + name);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return llvm::createStringError("cannot parse " + name);
  return std::move(module);
}

llvm::StringSet<> kernelNamesOf(ModuleOp module) {
  llvm::StringSet<> names;
  module->walk([&](LLVM::LLVMFuncOp f) {
    if (f->hasAttr(mlir::fsdp::kKernelAttrName) && !f.isExternal())
      names.insert(f.getSymName());
  });
  return names;
}

void initializeJit() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

DialectRegistry runnerRegistry() {
  DialectRegistry registry;
  registerAllDialects(registry);
  registry.insert<mlir::fsdp::FSDPDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // A compute=gpu step: its gpu.binary becomes an embedded image loaded by
  // mgpuModuleLoad, its gpu.launch_func calls mgpuLaunchKernel.
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  return registry;
}

Jit::Jit(const JitHost &host) : host(host) {}

Jit::~Jit() {
  if (lljit)
    callIfDefined(kDestructorsFunction);
}

void Jit::callIfDefined(llvm::StringRef name) {
  auto fn = lljit->lookup(name);
  if (!fn) {
    llvm::consumeError(fn.takeError()); // the module has none
    return;
  }
  fn->toPtr<void (*)()>()();
}

Error Jit::invokePacked(std::string_view symbol, Span<void *> args) {
  auto sym = lljit->lookup(llvm::StringRef(symbol.data(), symbol.size()));
  if (!sym)
    return makeError(llvm::toString(sym.takeError()));
  sym->toPtr<void (*)(void **)>()(args.data());
  return Error::success();
}

bool Jit::openFromCache() {
  if (cacheBase.empty() || !llvm::sys::fs::exists(cacheBase + ".o") ||
      !llvm::sys::fs::exists(cacheBase + ".glue.o") ||
      !llvm::sys::fs::exists(cacheBase + ".manifest.json"))
    return false;
  auto t0 = std::chrono::steady_clock::now();
  auto text = llvm::MemoryBuffer::getFile(cacheBase + ".manifest.json");
  auto kernels = llvm::MemoryBuffer::getFile(cacheBase + ".o");
  auto glue = llvm::MemoryBuffer::getFile(cacheBase + ".glue.o");
  if (!text || !kernels || !glue)
    return false;
  manifest = (*text)->getBuffer().str();
  parseSeconds = secondsSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  std::unique_ptr<llvm::MemoryBuffer> objects[] = {std::move(*kernels),
                                                   std::move(*glue)};
  auto loaded = makeJit(objects, host);
  if (!loaded) {
    // An unusable entry: compile as if it were not there.
    llvm::consumeError(loaded.takeError());
    return false;
  }
  lljit = std::move(*loaded);
  callIfDefined(kConstructorsFunction);
  cacheHit = true;
  compileSeconds = secondsSince(t1);
  return true;
}

llvm::Expected<Jit::Opened> Jit::open(llvm::StringRef bytes,
                                      const std::string &name,
                                      const std::string &entry,
                                      const std::string &cacheDir,
                                      const JitHost &host) {
  initializeJit();
  std::unique_ptr<Jit> jit(new Jit(host));
  if (!cacheDir.empty()) {
    jit->cacheDir = cacheDir;
    jit->cacheBase = cacheDir + "/" + cacheKey(bytes, entry);
  }
  if (jit->openFromCache()) {
    std::string manifest = jit->manifest;
    return Opened{std::move(jit), std::move(manifest)};
  }
  auto t0 = std::chrono::steady_clock::now();
  jit->context = std::make_unique<MLIRContext>(runnerRegistry());
  auto parsed = parseLoweredModule(llvm::MemoryBufferRef(bytes, name), name,
                                   *jit->context);
  if (!parsed)
    return parsed.takeError();
  jit->module = std::move(*parsed);
  jit->parseSeconds = secondsSince(t0);
  // Which functions are kernels, the only code worth optimizing: recorded
  // now, writing the manifest strips the `fsdp.kernel` attributes.
  jit->kernelNames = kernelNamesOf(*jit->module);
  ManifestOptions options;
  options.entry = entry;
  options.source = name;
  options.cpu = llvm::sys::getHostCPUName().str();
  auto manifest = writeManifest(*jit->module, options);
  if (!manifest)
    return manifest.takeError();
  jit->manifest = json::write(std::move(*manifest));
  std::string text = jit->manifest;
  return Opened{std::move(jit), std::move(text)};
}

llvm::Expected<StepObjects>
compileStep(ModuleOp module, const llvm::StringSet<> &kernelNames,
            const CodeTarget &target,
            const std::function<void(llvm::Module &)> &rewrite) {
  StepObjects out;
  auto tPhase = std::chrono::steady_clock::now();
  auto phase = [&](const char *name) {
    out.phases.emplace_back(name, secondsSince(tPhase));
    tPhase = std::chrono::steady_clock::now();
  };
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> glue =
      translateModuleToLLVMIR(module, llvmContext);
  if (!glue)
    return llvm::createStringError("cannot translate the module to LLVM IR");
  phase("translate");
  auto tmO2 = targetMachine(target, true);
  if (!tmO2)
    return tmO2.takeError();
  auto tmO0 = targetMachine(target, false);
  if (!tmO0)
    return tmO0.takeError();
  glue->setDataLayout((*tmO2)->createDataLayout());
  glue->setTargetTriple((*tmO2)->getTargetTriple());
  if (rewrite)
    rewrite(*glue);

  // Two objects: the kernels at -O2 for the target CPU, everything else (the
  // step, the segments and the wrappers: calls, allocations and argument
  // shuffling, one long basic block each) at -O0, whose instruction
  // selection and register allocation are linear in the function's size;
  // -O2's schedulers are quadratic in a basic block's length.
  llvm::SmallString<0> kernelBitcode = splitKernels(*glue, kernelNames);
  phase("split_kernels");
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> kernelObject =
      std::unique_ptr<llvm::MemoryBuffer>();
  double kernelSeconds = 0;
  std::thread kernelThread([&] {
    auto t = std::chrono::steady_clock::now();
    kernelObject = compileKernels(kernelBitcode, **tmO2);
    kernelSeconds = secondsSince(t);
  });
  prepareGlue(*glue);
  phase("prepare_glue");
  auto glueObject = llvm::orc::SimpleCompiler(**tmO0)(*glue);
  phase("codegen_glue");
  kernelThread.join();
  if (!glueObject) {
    llvm::consumeError(kernelObject.takeError());
    return glueObject.takeError();
  }
  if (!kernelObject)
    return kernelObject.takeError();
  phase("wait_kernels");
  out.phases.emplace_back("kernels_beside", kernelSeconds);
  out.kernels = std::move(*kernelObject);
  out.glue = std::move(*glueObject);
  return std::move(out);
}

Error Jit::compile() {
  if (lljit)
    return Error::success();
  ModuleOp module = *this->module;
  auto t1 = std::chrono::steady_clock::now();
  // The JIT links objects, whose global constructors nothing would run:
  // they become one function that link() calls (gatherConstructors).
  auto compiled = compileStep(module, kernelNames, CodeTarget::host(),
                              [](llvm::Module &m) { gatherConstructors(m); });
  if (!compiled)
    return makeError(llvm::toString(
        jitError("JIT compilation failed", compiled.takeError())));
  compilePhases = std::move(compiled->phases);
  auto tPhase = std::chrono::steady_clock::now();
  auto phase = [&](const char *name) {
    compilePhases.emplace_back(name, secondsSince(tPhase));
    tPhase = std::chrono::steady_clock::now();
  };
  std::unique_ptr<llvm::MemoryBuffer> objects[2] = {
      std::move(compiled->kernels), std::move(compiled->glue)};
  llvm::Error e = link(module, objects, t1, phase);
  this->module = nullptr; // the code holds what the runner needs
  if (e)
    return makeError(llvm::toString(std::move(e)));
  return Error::success();
}

llvm::Error
Jit::link(ModuleOp module,
          llvm::MutableArrayRef<std::unique_ptr<llvm::MemoryBuffer>> objects,
          std::chrono::steady_clock::time_point start,
          const std::function<void(const char *)> &phase) {
  std::string copies[2];
  if (!cacheBase.empty())
    for (int i = 0; i < 2; ++i)
      copies[i] = objects[i]->getBuffer().str();
  auto loaded = makeJit(objects, host);
  if (!loaded)
    return jitError("JIT compilation failed: cannot load the compiled objects",
                    loaded.takeError());
  lljit = std::move(*loaded);
  callIfDefined(kConstructorsFunction);
  // Resolve the entries now, so that the time includes linking them.
  module.walk([&](LLVM::LLVMFuncOp f) {
    if (!f.getSymName().starts_with("_mlir_ciface_") || f.isExternal())
      return;
    auto fn = lljit->lookup(("_mlir_" + f.getSymName()).str());
    if (!fn)
      llvm::consumeError(fn.takeError()); // reported when it is called
  });
  phase("link");
  compileSeconds = secondsSince(start);
  if (!cacheBase.empty())
    writeCache(copies[0], copies[1]);
  return llvm::Error::success();
}

void Jit::writeCache(llvm::StringRef kernels, llvm::StringRef glue) {
  if (llvm::sys::fs::create_directories(cacheDir))
    return;
  // The kernels' object last: the entry is a hit only when it exists.
  if (writeFile(cacheBase + ".manifest.json", manifest) &&
      writeFile(cacheBase + ".glue.o", glue))
    writeFile(cacheBase + ".o", kernels);
}

} // namespace fsdp::run

//===- Jit.cpp - compile a lowered module, or load it from the cache ------===//

#include "Jit.h"
#include "Memory.h"
#include "Program.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Pipeline/InputGuard.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <functional>

using namespace mlir;

namespace fsdp::run {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// Hash of the file's bytes and of everything the object depends on.
std::string cacheKey(llvm::StringRef bytes) {
  std::string salt = "fsdp-run-jit-v1 " LLVM_VERSION_STRING " " +
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
  if (engine)
    return engine->invokePacked(name, args);
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

  // A hit: the stub and the object, no compilation.
  if (!base.empty() && llvm::sys::fs::exists(base + ".o") &&
      llvm::sys::fs::exists(base + ".stub.mlirbc")) {
    module = parseSourceFile<ModuleOp>(base + ".stub.mlirbc", &context);
    auto object = llvm::MemoryBuffer::getFile(base + ".o");
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (module && object && jtmb) {
      jit->parseSeconds = secondsSince(t0);
      auto t1 = std::chrono::steady_clock::now();
      auto lljit = llvm::orc::LLJITBuilder()
                       .setJITTargetMachineBuilder(std::move(*jtmb))
                       .create();
      if (lljit) {
        addRunnerLibraries(**lljit);
        llvm::orc::MangleAndInterner mangle((*lljit)->getExecutionSession(),
                                            (*lljit)->getDataLayout());
        if (llvm::Error err = (*lljit)->getMainJITDylib().define(
                llvm::orc::absoluteSymbols(allocatorSymbols(mangle))))
          fail("cannot bind the JIT's allocator: " +
               llvm::toString(std::move(err)));
        if (!(*lljit)->addObjectFile(std::move(*object))) {
          jit->lljit = std::move(*lljit);
          jit->cacheHit = true;
          jit->compileSeconds = secondsSince(t1);
          return jit;
        }
      } else {
        llvm::consumeError(lljit.takeError());
      }
    }
    if (!jtmb)
      llvm::consumeError(jtmb.takeError());
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
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  std::unique_ptr<llvm::TargetMachine> tm;
  if (jtmb) {
    auto made = jtmb->createTargetMachine();
    if (made)
      tm = std::move(*made);
    else
      llvm::consumeError(made.takeError());
  } else {
    llvm::consumeError(jtmb.takeError());
  }
  // The options hold a function_ref: the transformer must outlive create().
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(2, 0, tm.get());
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.enableObjectDump = !cacheBase.empty();
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
#ifdef FSDP_C_RUNNER_UTILS
  SmallVector<StringRef> libs = {FSDP_C_RUNNER_UTILS};
  options.sharedLibPaths = libs;
#endif
  auto engineOr = ExecutionEngine::create(module, options);
  if (!engineOr)
    fail("JIT compilation failed: " + llvm::toString(engineOr.takeError()));
  engine = std::move(*engineOr);
  engine->registerSymbols(allocatorSymbols);
  // Compile now (lookups are lazy), so that the time and the cache see it.
  module.walk([&](LLVM::LLVMFuncOp f) {
    if (!f.getSymName().starts_with("_mlir_ciface_") || f.isExternal())
      return;
    auto fn = engine->lookupPacked(f.getSymName());
    if (!fn)
      llvm::consumeError(fn.takeError()); // reported when it is called
  });
  compileSeconds = secondsSince(t1);
  if (!cacheBase.empty() && !llvm::sys::fs::create_directories(cacheDir)) {
    std::string stubBytes;
    llvm::raw_string_ostream os(stubBytes);
    if (succeeded(writeBytecodeToFile(*stub, os))) {
      std::string obj = cacheBase + ".o";
      engine->dumpToObjectFile(obj + ".partial");
      // The object last: a stub without its object is never a hit.
      if (writeFile(cacheBase + ".stub.mlirbc", stubBytes))
        llvm::sys::fs::rename(obj + ".partial", obj);
      llvm::sys::fs::remove(obj + ".partial");
    }
  }
}

} // namespace fsdp::run

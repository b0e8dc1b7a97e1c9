//===- StepCompiler.cpp - a lowered step compiled ahead of time ----------===//

#include "StepCompiler.h"
#include "Jit.h"
#include "Manifest.h"
#include "ManifestWriter.h"
#include "fsdprt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>

using namespace mlir;

namespace fsdp::run {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(message);
}

//===----------------------------------------------------------------------===//
// Code generation
//===----------------------------------------------------------------------===//

/// The target fsdp-compile generates code for, and the ISA features the
/// code may use that a loader can check (those this LLVM detects on a
/// host).
llvm::Expected<CodeTarget> resolveTarget(const CompileOptions &o,
                                         CompileReport &report) {
  CodeTarget target;
  target.positionIndependent = true;
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  if (o.cpu == "native" || o.cpu.empty()) {
    target.cpu = llvm::sys::getHostCPUName().str();
    // The features the host has, and not those its CPU name implies but a
    // virtual machine may hide.
    for (const auto &f : host)
      target.features += (target.features.empty() ? "" : ",") +
                         std::string(f.second ? "+" : "-") + f.first().str();
  } else {
    target.cpu = o.cpu;
  }
  if (!o.features.empty())
    target.features += (target.features.empty() ? "" : ",") + o.features;
  auto machine = [](const std::string &cpu, const std::string &features)
      -> llvm::Expected<std::unique_ptr<llvm::TargetMachine>> {
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb)
      return jtmb.takeError();
    jtmb->setCPU(cpu);
    jtmb->getFeatures() = llvm::SubtargetFeatures(features);
    return jtmb->createTargetMachine();
  };
  // The CPU is checked on a generic machine first: LLVM only warns about an
  // unknown one when it creates a machine for it.
  auto generic = machine("", "");
  if (!generic)
    return generic.takeError();
  if (!(*generic)->getMCSubtargetInfo()->isCPUStringValid(target.cpu))
    return error("unknown CPU '" + target.cpu + "' (--mcpu)");
  auto tm = machine(target.cpu, target.features);
  if (!tm)
    return tm.takeError();
  const llvm::MCSubtargetInfo *sti = (*tm)->getMCSubtargetInfo();
  report.cpu = target.cpu;
  for (const llvm::SubtargetFeatureKV &kv : sti->getAllProcessorFeatures())
    if (sti->getFeatureBits().test(kv.Value) && host.count(kv.Key))
      report.features.push_back(kv.Key);
  return target;
}

/// Sends the step's malloc and free through fsdp_step_malloc / _free, so
/// that a runner can install its own allocator (the manifest object
/// defines them), and strided copies to the runtime's copy instead of
/// MLIR's C runner utils, which a machine without LLVM lacks.
void redirectCalls(llvm::Module &m) {
  if (llvm::Function *f = m.getFunction("malloc"))
    f->setName("fsdp_step_malloc");
  if (llvm::Function *f = m.getFunction("free"))
    f->setName("fsdp_step_free");
  if (llvm::Function *f = m.getFunction("memrefCopy"))
    f->setName("fsdprt_memref_copy");
}

llvm::GlobalVariable *addBytes(llvm::Module &m, llvm::StringRef name,
                               llvm::StringRef bytes, llvm::StringRef section) {
  llvm::Constant *init = llvm::ConstantDataArray::getString(
      m.getContext(), bytes, /*AddNull=*/true);
  auto *g =
      new llvm::GlobalVariable(m, init->getType(), /*isConstant=*/true,
                               llvm::GlobalValue::ExternalLinkage, init, name);
  g->setSection(section);
  g->setAlignment(llvm::Align(8));
  return g;
}

/// `void *(*name)(...) = @initial` and a function `fn` that calls through
/// it with `fnType`.
void addHook(llvm::Module &m, llvm::StringRef slot, llvm::StringRef fn,
             llvm::FunctionType *fnType, llvm::StringRef initial) {
  llvm::PointerType *ptr = llvm::PointerType::getUnqual(m.getContext());
  llvm::FunctionCallee libc = m.getOrInsertFunction(initial, fnType);
  auto *g = new llvm::GlobalVariable(
      m, ptr, false, llvm::GlobalValue::InternalLinkage,
      cast<llvm::Constant>(libc.getCallee()), slot);
  auto *f =
      llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage, fn, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "", f));
  llvm::SmallVector<llvm::Value *> args;
  for (llvm::Argument &a : f->args())
    args.push_back(&a);
  llvm::Value *callee = b.CreateLoad(ptr, g);
  llvm::Value *r = b.CreateCall(fnType, callee, args);
  if (fnType->getReturnType()->isVoidTy())
    b.CreateRetVoid();
  else
    b.CreateRet(r);
}

/// The third object: the manifest section, the ABI version and the
/// allocator hooks.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
manifestObject(llvm::StringRef manifest, const CodeTarget &target) {
  llvm::LLVMContext ctx;
  llvm::Module m("fsdp_step_manifest", ctx);
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return jtmb.takeError();
  jtmb->setCPU(target.cpu);
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    return tm.takeError();
  m.setDataLayout((*tm)->createDataLayout());
  m.setTargetTriple((*tm)->getTargetTriple());
  addBytes(m, "fsdp_step_manifest", manifest, kManifestSection);
  auto *i64 = llvm::Type::getInt64Ty(ctx);
  auto *i32 = llvm::Type::getInt32Ty(ctx);
  new llvm::GlobalVariable(m, i32, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i32, FSDPRT_ABI_VERSION),
                           "fsdp_step_abi_version");
  llvm::PointerType *ptr = llvm::PointerType::getUnqual(ctx);
  auto *voidTy = llvm::Type::getVoidTy(ctx);
  auto *mallocTy = llvm::FunctionType::get(ptr, {i64}, false);
  auto *freeTy = llvm::FunctionType::get(voidTy, {ptr}, false);
  addHook(m, "fsdp_step_alloc_fn", "fsdp_step_malloc", mallocTy, "malloc");
  addHook(m, "fsdp_step_free_fn", "fsdp_step_free", freeTy, "free");
  // void fsdp_step_set_allocator(malloc, free): null keeps libc's.
  auto *setTy = llvm::FunctionType::get(voidTy, {ptr, ptr}, false);
  auto *set = llvm::Function::Create(setTy, llvm::GlobalValue::ExternalLinkage,
                                     "fsdp_step_set_allocator", m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "", set));
  for (auto [arg, slot, initial] :
       {std::tuple{set->getArg(0), "fsdp_step_alloc_fn", "malloc"},
        std::tuple{set->getArg(1), "fsdp_step_free_fn", "free"}}) {
    llvm::Value *isNull = b.CreateIsNull(arg);
    llvm::Value *v = b.CreateSelect(isNull, m.getFunction(initial), arg);
    b.CreateStore(v, m.getGlobalVariable(slot, /*AllowInternal=*/true));
  }
  b.CreateRetVoid();
  return llvm::orc::SimpleCompiler(**tm)(m);
}

//===----------------------------------------------------------------------===//
// Linking
//===----------------------------------------------------------------------===//

/// The external functions the module calls.
llvm::StringSet<> externalCalls(ModuleOp module) {
  llvm::StringSet<> names;
  module.walk([&](LLVM::LLVMFuncOp f) {
    if (f.isExternal())
      names.insert(f.getSymName());
  });
  return names;
}

/// The libraries the step needs, by path (the linker records sonames).
std::vector<std::string> neededLibraries(const llvm::StringSet<> &calls,
                                         const CompileOptions &o) {
  std::vector<std::string> libs;
  libs.push_back(!o.runtimeLibrary.empty() ? o.runtimeLibrary
                                           : FSDP_RUNTIME_LIBRARY);
  bool blas = llvm::any_of(
      calls.keys(), [](llvm::StringRef n) { return n.starts_with("cblas_"); });
#ifdef FSDP_OPENBLAS_PATH
  if (blas)
    libs.push_back(FSDP_OPENBLAS_PATH);
#else
  if (blas)
    libs.push_back("-lopenblas");
#endif
  libs.insert(libs.end(), o.libraries.begin(), o.libraries.end());
  return libs;
}

llvm::Expected<std::string> findLinker(const CompileOptions &o) {
  std::string name = o.linker;
  if (name.empty())
    if (const char *cc = getenv("CC"); cc && *cc)
      name = cc;
  if (name.empty())
    name = "cc";
  auto path = llvm::sys::findProgramByName(name);
  if (!path)
    return error("cannot find the linker driver '" + name +
                 "' (set CC or --linker)");
  return *path;
}

llvm::Error writeObject(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return error("cannot write " + path + ": " + ec.message());
  os << bytes;
  return llvm::Error::success();
}

/// Links the objects in `dir` into `output` with the C compiler driver.
llvm::Error linkLibrary(const std::string &dir,
                        const std::vector<std::string> &objects,
                        const std::vector<std::string> &libs,
                        const std::string &output, const CompileOptions &o) {
  auto linker = findLinker(o);
  if (!linker)
    return linker.takeError();
  std::vector<std::string> argv = {*linker, "-shared", "-o", output};
  argv.insert(argv.end(), objects.begin(), objects.end());
  argv.push_back("-Wl,-soname," + llvm::sys::path::filename(output).str());
  argv.push_back("-Wl,-z,noexecstack");
  if (!o.allowUndefined)
    argv.push_back("-Wl,-z,defs");
  argv.push_back("-Wl,-rpath,$ORIGIN");
  for (const std::string &lib : libs) {
    argv.push_back(lib);
    if (!llvm::StringRef(lib).starts_with("-"))
      argv.push_back("-Wl,-rpath," + llvm::sys::path::parent_path(lib).str());
  }
  argv.push_back("-lm");
  std::vector<llvm::StringRef> refs(argv.begin(), argv.end());
  std::string log = dir + "/link.log", message;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  int rc = llvm::sys::ExecuteAndWait(*linker, refs, std::nullopt, redirects, 0,
                                     0, &message);
  if (rc == 0)
    return llvm::Error::success();
  auto text = llvm::MemoryBuffer::getFile(log);
  return error("linking " + output + " failed" +
               (message.empty() ? "" : ": " + message) + "\n" +
               (text ? (*text)->getBuffer() : "") +
               "(a GPU step needs its CUDA runtime library: --link=PATH)");
}

} // namespace

llvm::Expected<CompileReport> compileStepLibrary(llvm::MemoryBufferRef bytes,
                                                 const std::string &name,
                                                 const std::string &output,
                                                 const CompileOptions &options,
                                                 MLIRContext &context) {
  CompileReport report;
  auto t0 = std::chrono::steady_clock::now();
  auto module = parseLoweredModule(bytes, name, context);
  if (!module)
    return module.takeError();
  report.parseSeconds = secondsSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  llvm::StringSet<> kernels = kernelNamesOf(**module);
  auto target = resolveTarget(options, report);
  if (!target)
    return target.takeError();
  ManifestOptions mo;
  mo.source = name;
  mo.cpu = report.cpu;
  mo.features = report.features;
  // Every entry, checked against its function; the module is left with the
  // LLVM dialect only.
  auto manifest = writeManifest(**module, mo);
  if (!manifest)
    return manifest.takeError();
  for (const json::Value &e : *manifest->getArray("entries"))
    report.entries.push_back(
        std::string(e.getAsObject()->getString("name").value_or("")));
  llvm::StringSet<> calls = externalCalls(**module);
  report.needed = neededLibraries(calls, options);
  json::Array needed;
  for (const std::string &lib : report.needed)
    needed.push_back(llvm::sys::path::filename(lib).str());
  (*manifest)["needed"] = std::move(needed);
  std::string manifestText = json::write(std::move(*manifest), 2);
  // What the runner will read: every entry through the runner's checks.
  auto parsed = parseManifest(manifestText, name);
  if (!parsed)
    return error(toString(parsed.takeError()));
  for (const std::string &entry : report.entries)
    if (auto prog = readProgram(*parsed, entry, name); !prog)
      return error(toString(prog.takeError()));

  auto objects = compileStep(**module, kernels, *target, redirectCalls);
  if (!objects)
    return error("compiling " + name +
                 " failed: " + llvm::toString(objects.takeError()));
  report.phases = std::move(objects->phases);
  auto third = manifestObject(manifestText, *target);
  if (!third)
    return third.takeError();
  report.compileSeconds = secondsSince(t1);

  auto t2 = std::chrono::steady_clock::now();
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("fsdp-compile", dir))
    return error("cannot create a temporary directory: " + ec.message());
  std::vector<std::string> paths = {(dir + "/kernels.o").str(),
                                    (dir + "/glue.o").str(),
                                    (dir + "/manifest.o").str()};
  llvm::StringRef contents[] = {objects->kernels->getBuffer(),
                                objects->glue->getBuffer(),
                                (*third)->getBuffer()};
  llvm::Error e = llvm::Error::success();
  for (size_t i = 0; i < paths.size() && !e; ++i)
    e = writeObject(paths[i], contents[i]);
  if (!e)
    e = linkLibrary(dir.str().str(), paths, report.needed, output, options);
  llvm::sys::fs::remove_directories(dir);
  if (e)
    return std::move(e);
  report.linkSeconds = secondsSince(t2);
  return report;
}

} // namespace fsdp::run

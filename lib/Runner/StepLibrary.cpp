//===- StepLibrary.cpp - a lowered step compiled ahead of time -----------===//

#include "StepLibrary.h"
#include "Blas.h"
#include "Inputs.h"
#include "Jit.h"
#include "Memory.h"
#include "Program.h"
#include "fsdprt.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Layout/LayoutMath.h"

#include "mlir/Bytecode/BytecodeWriter.h"
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
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <cstring>
#include <dlfcn.h>

using namespace mlir;
namespace lm = ::fsdp::layout;
namespace json = llvm::json;

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
// The manifest
//===----------------------------------------------------------------------===//

json::Array toJSON(const std::vector<int64_t> &v) {
  json::Array a;
  for (int64_t x : v)
    a.push_back(x);
  return a;
}

bool hasPartial(const lm::Layout &layout) {
  for (const lm::Placement &p : layout.placements)
    if (p.kind == lm::Placement::Kind::Partial)
      return true;
  return false;
}

/// Whether `rank` holds a Partial(sum) value (coordinate 0 on every partial
/// axis), as Shards.cpp decides.
bool ownsPartial(const lm::Layout &layout, int64_t rank) {
  std::vector<int64_t> coords = lm::rankToCoords(layout.meshShape, rank);
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].kind == lm::Placement::Kind::Partial &&
        coords[a] != 0)
      return false;
  return true;
}

/// Every rank's owned global ranges per dim, in slot order: what a runner
/// without the layout library needs to cut inputs and assemble results.
json::Object shardsOf(const Port &p, int64_t world) {
  json::Array ranks, owners;
  std::vector<int64_t> shape = p.globalType.getShape().vec();
  for (int64_t r = 0; r < world; ++r) {
    lm::LocalShard s = lm::localShard(*p.layout, shape, r);
    json::Array dims;
    for (const lm::DimShard &d : s.dims) {
      json::Array ranges;
      for (const lm::Range &range : d.ranges)
        ranges.push_back(json::Array{range.begin, range.end});
      dims.push_back(std::move(ranges));
    }
    ranks.push_back(std::move(dims));
    owners.push_back(ownsPartial(*p.layout, r));
  }
  return json::Object{{"partial", hasPartial(*p.layout)},
                      {"owners", std::move(owners)},
                      {"ranks", std::move(ranks)}};
}

json::Object portJSON(const Port &p, int64_t world) {
  json::Object o{{"name", p.name},
                 {"dtype", npyDescr(p.type.getElementType())},
                 {"element_bytes", p.elementBytes()},
                 {"shape", toJSON(p.type.getShape().vec())},
                 {"global_shape", toJSON(p.globalType.getShape().vec())},
                 {"rank_local", p.rankLocal},
                 {"loss", p.isLoss},
                 {"starts_at_zero", startsAtZero(p)}};
  o["layout"] = p.layout ? json::Value(p.layoutText) : json::Value(nullptr);
  o["update_of"] = p.updateOf ? json::Value(*p.updateOf) : nullptr;
  o["state_of"] = p.stateOf ? json::Value(*p.stateOf) : nullptr;
  o["role"] = p.optim.empty() ? json::Value(nullptr) : json::Value(p.optim);
  // Per-rank ranges for the meshes the threads backend runs.
  if (p.layout && world <= 64)
    o["shards"] = shardsOf(p, world);
  return o;
}

json::Object entryJSON(const Program &prog) {
  json::Array args, results;
  for (const Port &p : prog.args)
    args.push_back(portJSON(p, prog.meshSize()));
  for (const Port &p : prog.results)
    results.push_back(portJSON(p, prog.meshSize()));
  json::Array axes;
  for (const std::string &a : prog.axisNames)
    axes.push_back(a);
  return json::Object{{"name", prog.entry},
                      {"symbol", "_mlir__mlir_ciface_" + prog.entry},
                      {"training", prog.training()},
                      {"mesh", json::Object{{"shape", toJSON(prog.meshShape)},
                                            {"axes", std::move(axes)}}},
                      {"fed_by", toJSON(prog.fedBy)},
                      {"args", std::move(args)},
                      {"results", std::move(results)}};
}

json::Array meshesJSON(ModuleOp stub) {
  json::Array meshes;
  for (auto mesh : stub.getOps<mlir::fsdp::MeshOp>()) {
    json::Array axes;
    for (Attribute a : mesh.getAxisNames())
      axes.push_back(cast<StringAttr>(a).getValue().str());
    meshes.push_back(
        json::Object{{"name", mesh.getSymName().str()},
                     {"axes", std::move(axes)},
                     {"shape", toJSON(mesh.getAxisSizes().vec())}});
  }
  return meshes;
}

/// The manifest of every entry of `stub` (read from a copy each: reading a
/// program strips the module).
llvm::Expected<json::Object> buildManifest(ModuleOp stub,
                                           const CompileReport &target,
                                           const std::string &source) {
  auto sigs =
      stub->getAttrOfType<DictionaryAttr>(mlir::fsdp::kSignaturesAttrName);
  if (!sigs || sigs.empty())
    return error(source + " has no entry (no fsdp.signatures: is it lowered "
                          "with --fsdp-pipeline=\"lower=true ...\"?)");
  json::Array entries;
  for (NamedAttribute e : sigs) {
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>(stub->clone());
    auto prog = loadProgram(*copy, e.getName().getValue());
    if (!prog)
      return prog.takeError();
    entries.push_back(entryJSON(*prog));
  }
  json::Array features;
  for (const std::string &f : target.features)
    features.push_back(f);
  // A compute=gpu step (the same module attributes the runner reads).
  bool gpu = stub->hasAttr(kGpuAttrName);
  json::Object manifest{
      {"format", "fsdp-step"},
      {"version", kManifestVersion},
      {"abi_version", FSDPRT_ABI_VERSION},
      {"source", llvm::sys::path::filename(source).str()},
      {"target", json::Object{{"triple", llvm::sys::getProcessTriple()},
                              {"cpu", target.cpu},
                              {"features", std::move(features)}}},
      {"meshes", meshesJSON(stub)},
      {"entries", std::move(entries)}};
  if (gpu)
    manifest["gpu"] =
        json::Object{{"tf32", stub->hasAttr(kGpuTf32AttrName)},
                     {"emulation", stub->hasAttr(kGpuEmulationAttrName)}};
  return manifest;
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

/// The third object: the manifest and stub sections, the ABI version and
/// the allocator hooks.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
manifestObject(llvm::StringRef manifest, llvm::StringRef stub,
               const CodeTarget &target) {
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
  addBytes(m, "fsdp_step_stub", stub, kStubSection);
  auto *i64 = llvm::Type::getInt64Ty(ctx);
  new llvm::GlobalVariable(m, i64, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i64, stub.size()),
                           "fsdp_step_stub_size");
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
  OwningOpRef<ModuleOp> stub = makeStub(**module);
  auto target = resolveTarget(options, report);
  if (!target)
    return target.takeError();
  auto manifest = buildManifest(*stub, report, name);
  if (!manifest)
    return manifest.takeError();
  for (const json::Value &e : *manifest->getArray("entries"))
    report.entries.push_back(
        e.getAsObject()->getString("name").value_or("").str());
  // The entries were checked on the stub; the module itself only needs the
  // fsdp attributes removed (the first entry's check does it).
  auto prog = loadProgram(**module, report.entries.front());
  if (!prog)
    return prog.takeError();
  llvm::StringSet<> calls = externalCalls(**module);
  report.needed = neededLibraries(calls, options);
  json::Array needed;
  for (const std::string &lib : report.needed)
    needed.push_back(llvm::sys::path::filename(lib).str());
  (*manifest)["needed"] = std::move(needed);

  auto objects = compileStep(**module, kernels, *target, redirectCalls);
  if (!objects)
    return error("compiling " + name +
                 " failed: " + llvm::toString(objects.takeError()));
  report.phases = std::move(objects->phases);
  std::string stubBytes, manifestText;
  llvm::raw_string_ostream stubOs(stubBytes);
  if (failed(writeBytecodeToFile(*stub, stubOs)))
    return error("cannot write the stub module of " + name);
  manifestText = llvm::formatv("{0:2}", json::Value(std::move(*manifest)));
  auto third = manifestObject(manifestText, stubBytes, *target);
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

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

bool isSharedObject(llvm::StringRef bytes) {
  return bytes.starts_with("\x7f"
                           "ELF");
}

llvm::Expected<StepManifest> readStepManifest(const std::string &path) {
  auto bytes = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!bytes)
    return error("cannot read " + path + ": " + bytes.getError().message());
  auto object = llvm::object::ObjectFile::createObjectFile(**bytes);
  if (!object) {
    llvm::consumeError(object.takeError());
    return error(path + " is not a step library (not an object file)");
  }
  std::optional<llvm::StringRef> manifestText, stub;
  for (const llvm::object::SectionRef &s : (*object)->sections()) {
    auto name = s.getName();
    auto contents = s.getContents();
    if (!name || !contents) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(contents.takeError());
      continue;
    }
    if (*name == kManifestSection)
      manifestText = *contents;
    else if (*name == kStubSection)
      stub = *contents;
  }
  if (!manifestText)
    return error(path + " is not a step library (no " +
                 llvm::Twine(kManifestSection) +
                 " section; build one with fsdp-compile)");
  StepManifest m;
  llvm::StringRef text = manifestText->split('\0').first;
  auto parsed = json::parse(text);
  if (!parsed)
    return error(path +
                 ": corrupt manifest: " + llvm::toString(parsed.takeError()));
  m.json = std::move(*parsed);
  json::Object *o = m.json.getAsObject();
  if (!o || o->getString("format") != "fsdp-step" ||
      !o->getInteger("version") || !o->getInteger("abi_version") ||
      !o->getObject("target") || !o->getArray("entries"))
    return error(path + ": corrupt manifest: not an fsdp-step manifest");
  if (*o->getInteger("version") != kManifestVersion)
    return error(
        path + ": manifest version " + llvm::Twine(*o->getInteger("version")) +
        ", this runner reads version " + llvm::Twine(kManifestVersion));
  if (const json::Value *gpu = o->get("gpu"); gpu && !gpu->getAsObject())
    return error(path + ": corrupt manifest: 'gpu' is not an object");
  if (!stub || stub->size() < 2)
    return error(path + ": corrupt manifest: no stub module");
  m.stub = stub->drop_back().str(); // its terminating NUL
  m.abiVersion = *o->getInteger("abi_version");
  json::Object *target = o->getObject("target");
  m.cpu = target->getString("cpu").value_or("").str();
  if (json::Array *f = target->getArray("features"))
    for (const json::Value &v : *f)
      if (auto s = v.getAsString())
        m.features.push_back(s->str());
  return m;
}

llvm::Error checkLoadable(const StepManifest &m, const std::string &path) {
  if (m.abiVersion != fsdprt_abi_version())
    return error(path + " was built for runtime ABI version " +
                 llvm::Twine(m.abiVersion) + "; this runtime has version " +
                 llvm::Twine(fsdprt_abi_version()) + " (rebuild it with " +
                 "fsdp-compile)");
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::string missing;
  for (const std::string &f : m.features) {
    auto it = host.find(f);
    if (it == host.end() || !it->second)
      missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty())
    return error(path + " was built for CPU '" + m.cpu +
                 "' and uses features this host lacks: " + missing +
                 " (build it with --mcpu=x86-64 to run anywhere)");
  return llvm::Error::success();
}

SharedLibraryStepCode::~SharedLibraryStepCode() {
  if (handle)
    dlclose(handle);
}

llvm::Expected<SharedLibraryStepCode::Opened>
SharedLibraryStepCode::open(const std::string &path, MLIRContext &context) {
  auto t0 = std::chrono::steady_clock::now();
  auto manifest = readStepManifest(path);
  if (!manifest)
    return manifest.takeError();
  if (llvm::Error e = checkLoadable(*manifest, path))
    return std::move(e);
  OwningOpRef<ModuleOp> stub =
      parseSourceString<ModuleOp>(manifest->stub, ParserConfig(&context), path);
  if (!stub)
    return error(path + ": corrupt manifest: cannot parse its stub module");
  std::unique_ptr<SharedLibraryStepCode> code(new SharedLibraryStepCode);
  code->parseSeconds = secondsSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  // A relative name would be searched for on the library path.
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  // A compute=fast step needs OpenBLAS: opened first, so that the step's
  // dependency resolves to the runner's copy (Blas.h).
  blas::library();
  code->handle = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!code->handle)
    return error("cannot load " + path + ": " + dlerror());
  using SetAllocator = void (*)(void *, void *);
  auto set = reinterpret_cast<SetAllocator>(
      dlsym(code->handle, "fsdp_step_set_allocator"));
  if (!set)
    return error(path + " is not a step library (no fsdp_step_set_allocator)");
  set(reinterpret_cast<void *>(&memory::fsdp_run_jit_malloc),
      reinterpret_cast<void *>(&memory::fsdp_run_jit_free));
  // Resolved now: the rank threads then only read the table.
  for (const json::Value &e :
       *manifest->json.getAsObject()->getArray("entries"))
    if (auto symbol = e.getAsObject()->getString("symbol")) {
      auto fn = reinterpret_cast<void (*)(void **)>(
          dlsym(code->handle, symbol->str().c_str()));
      if (!fn)
        return error(path + ": corrupt manifest: no function " + *symbol);
      code->wrappers[symbol->drop_front(strlen("_mlir_"))] = fn;
    }
  code->compileSeconds = secondsSince(t1);
  code->cacheHit = true;
  code->precompiled = true;
  return Opened{std::move(code), std::move(stub)};
}

llvm::Error
SharedLibraryStepCode::invokePacked(llvm::StringRef name,
                                    llvm::MutableArrayRef<void *> args) {
  auto it = wrappers.find(name);
  if (it == wrappers.end())
    return error("the step library has no function _mlir_" + name);
  it->second(args.data());
  return llvm::Error::success();
}

} // namespace fsdp::run

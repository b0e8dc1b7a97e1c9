//===- ManifestWriter.cpp - the manifest of a lowered module --------------===//

#include "ManifestWriter.h"
#include "Manifest.h"
#include "fsdprt.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/FSDPSignature.h"
#include "fsdp/Memory/ReadOnlyArgs.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Path.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
namespace lm = ::fsdp::layout;

namespace fsdp::run {

namespace {

/// The module attributes of a compute=gpu step (set by the lowering).
constexpr llvm::StringLiteral kGpuAttrName = "fsdp.gpu";
constexpr llvm::StringLiteral kGpuTf32AttrName = "fsdp.gpu_tf32";
constexpr llvm::StringLiteral kGpuEmulationAttrName = "fsdp.gpu_emulation";

std::string npyDescr(Type t) {
  if (t.isF32())
    return "<f4";
  if (t.isF64())
    return "<f8";
  if (t.isBF16())
    return "<u2";
  if (t.isF16())
    return "<f2";
  if (t.isInteger(32))
    return "<i4";
  if (t.isInteger(64))
    return "<i8";
  if (t.isIntOrFloat() && t.getIntOrFloatBitWidth() == 8)
    return "|u1";
  return "";
}

llvm::Error error(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The dialect's checks of `fsdp.signatures` (a module that was parsed has
/// passed them), with the first diagnostic as the error.
llvm::Error verifySignatureAttr(ModuleOp module, Attribute attr) {
  std::string message;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return success();
  });
  if (failed(mlir::fsdp::verifySignatures(module, attr)))
    return error(message);
  return llvm::Error::success();
}

/// The signature of the chosen entry (the only one when `entry` is empty).
llvm::Expected<mlir::fsdp::SignatureAttr>
chooseEntry(ModuleOp module, StringRef entry, Program &prog) {
  Attribute attr = module->getAttr(mlir::fsdp::kSignaturesAttrName);
  auto sigs = dyn_cast_or_null<DictionaryAttr>(attr);
  if (!attr || (sigs && sigs.empty()))
    return error("the module has no fsdp.signatures; compile it with "
                 "fsdp-opt --fsdp-pipeline=lower=true (or fsdp-lower-to-llvm)");
  if (llvm::Error err = verifySignatureAttr(module, attr))
    return std::move(err);
  prog.entry = entry.str();
  if (prog.entry.empty()) {
    if (sigs.size() != 1)
      return error("the module has several entries; choose one with --entry");
    prog.entry = sigs.begin()->getName().str();
  }
  auto sig = sigs.getAs<mlir::fsdp::SignatureAttr>(prog.entry);
  if (!sig) {
    std::string known;
    for (NamedAttribute e : sigs)
      known += " " + e.getName().str();
    return error("unknown entry '" + prog.entry + "'; the module has:" + known);
  }
  return sig;
}

/// The mesh of a layout; every port of an entry must use the same one.
llvm::Error recordMesh(Program &prog, ModuleOp module,
                       mlir::fsdp::LayoutAttr layout, const Twine &where) {
  auto mesh = mlir::fsdp::lookupMesh(module, layout.getMesh());
  if (!mesh)
    return error(where + ": its layout refers to an unknown mesh");
  std::vector<int64_t> shape(mesh.getAxisSizes().begin(),
                             mesh.getAxisSizes().end());
  if (!prog.meshShape.empty() && prog.meshShape != shape)
    return error("the entry uses more than one mesh");
  prog.meshShape = shape;
  prog.axisNames.clear();
  for (Attribute n : mesh.getAxisNames())
    prog.axisNames.push_back(cast<StringAttr>(n).str());
  return llvm::Error::success();
}

/// One port as the runner keeps it; the dialect has checked its rules.
llvm::Expected<Port> readPort(mlir::fsdp::PortAttr attr, Program &prog,
                              ModuleOp module, const Twine &where) {
  Port p;
  p.name = attr.getName().str();
  RankedTensorType type = attr.getType();
  p.dtype = npyDescr(type.getElementType());
  p.elementBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  p.shape = type.getShape().vec();
  p.globalShape = attr.getGlobalType().getShape().vec();
  p.updateOf = attr.getUpdateOf();
  p.stateOf = attr.getStateOf();
  if (std::optional<mlir::fsdp::OptimRole> role = attr.getRole())
    p.optim = mlir::fsdp::stringifyOptimRole(*role).str();
  p.isLoss = attr.getLoss();
  mlir::fsdp::LayoutAttr layout = attr.getLayout();
  if (!layout)
    return p;
  if (llvm::Error err = recordMesh(prog, module, layout, where))
    return std::move(err);
  p.layout = layout.toLayout(prog.meshShape);
  // The signature records the TP-local type as the global one; inputs,
  // results and checkpoints are the whole tensor.
  if (!lm::tensorParallelAxes(*p.layout).empty())
    p.globalShape = lm::tensorParallelGlobalShape(*p.layout, p.globalShape);
  llvm::raw_string_ostream os(p.layoutText);
  os << layout;
  return p;
}

llvm::Expected<std::vector<Port>>
readPorts(ArrayRef<mlir::fsdp::PortAttr> attrs, StringRef what, Program &prog,
          ModuleOp module) {
  std::vector<Port> ports;
  for (auto [i, a] : llvm::enumerate(attrs)) {
    std::string where = "signature of '" + prog.entry + "': " + what.str() +
                        " " + std::to_string(i);
    llvm::Expected<Port> port = readPort(a, prog, module, where);
    if (!port)
      return port.takeError();
    ports.push_back(std::move(*port));
  }
  return ports;
}

/// Without a layout in the signature, the module's first mesh (or one rank).
void defaultMesh(ModuleOp module, Program &prog) {
  if (!prog.meshShape.empty())
    return;
  auto meshes = module.getOps<mlir::fsdp::MeshOp>();
  if (meshes.empty()) {
    prog.meshShape = {1};
    return;
  }
  auto mesh = *meshes.begin();
  prog.meshShape.assign(mesh.getAxisSizes().begin(), mesh.getAxisSizes().end());
  for (Attribute n : mesh.getAxisNames())
    prog.axisNames.push_back(cast<StringAttr>(n).str());
}

llvm::Error checkMesh(const Program &prog) {
  if (auto err = lm::validateMesh(prog.meshShape))
    return error("the mesh is invalid: " + *err);
  int64_t size = 1;
  for (int64_t s : prog.meshShape)
    if (__builtin_mul_overflow(size, s, &size))
      return error("the mesh has too many ranks");
  return llvm::Error::success();
}

/// The rank of an LLVM memref descriptor struct, or -1.
int64_t descriptorRank(Type t) {
  auto s = dyn_cast<LLVM::LLVMStructType>(t);
  if (!s || (s.getBody().size() != 3 && s.getBody().size() != 5))
    return -1;
  if (s.getBody().size() == 3)
    return 0;
  auto sizes = dyn_cast<LLVM::LLVMArrayType>(s.getBody()[3]);
  return sizes ? int64_t(sizes.getNumElements()) : -1;
}

/// The word offset a use of the result pointer stores at: the pointer
/// itself, or a constant i64 getelementptr of it. -1 for any other use.
int64_t storeOffset(Value results, OpOperand &use) {
  if (auto store = dyn_cast<LLVM::StoreOp>(use.getOwner()))
    return store.getAddr() == results && store.getValue() != results ? 0 : -1;
  auto gep = dyn_cast<LLVM::GEPOp>(use.getOwner());
  if (!gep || gep.getBase() != results || !gep.getElemType().isInteger(64) ||
      gep.getIndices().size() != 1)
    return -1;
  auto index = llvm::dyn_cast_if_present<IntegerAttr>(gep.getIndices()[0]);
  return index ? index.getInt() : -1;
}

/// The stores through a use of the result pointer (a store, or a
/// getelementptr all of whose uses store through it); false for any other.
bool storesThrough(Operation *user, SmallVectorImpl<LLVM::StoreOp> &stores) {
  if (auto store = dyn_cast<LLVM::StoreOp>(user)) {
    stores.push_back(store);
    return true;
  }
  for (Operation *u : user->getUsers()) {
    auto store = dyn_cast<LLVM::StoreOp>(u);
    if (!store || store.getAddr() != user->getResult(0) ||
        store.getValue() == user->getResult(0))
      return false;
    stores.push_back(store);
  }
  return true;
}

/// Whether the body of `fn` stores, through its first argument, one
/// descriptor of each result's rank at the result's word offset, and uses
/// that pointer for nothing else. A bodiless copy (the JIT cache's stub of
/// a module already checked) passes.
bool storesResults(LLVM::LLVMFuncOp fn, const Program &prog) {
  if (fn.isExternal())
    return true;
  llvm::DenseMap<int64_t, int64_t> rankAt; // word offset -> rank
  int64_t words = 0;
  for (const Port &p : prog.results) {
    rankAt[words] = p.rank();
    words += p.descriptorWords();
  }
  llvm::DenseSet<int64_t> stored;
  Value results = fn.getArgument(0);
  for (OpOperand &use : results.getUses()) {
    auto it = rankAt.find(storeOffset(results, use));
    SmallVector<LLVM::StoreOp> stores;
    if (it == rankAt.end() || !storesThrough(use.getOwner(), stores))
      return false;
    for (LLVM::StoreOp store : stores)
      if (descriptorRank(store.getValue().getType()) != it->second)
        return false;
    if (!stores.empty())
      stored.insert(it->first);
  }
  return stored.size() == rankAt.size();
}

/// The lowered function must take and return what the signature says: its
/// C interface one pointer per argument (plus one for the results area),
/// its expanded form the results area and one descriptor of the recorded
/// rank per argument, returning nothing and storing one descriptor of the
/// recorded rank per result.
llvm::Error checkFunction(ModuleOp module, const Program &prog) {
  auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(prog.entry);
  auto ciface =
      module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + prog.entry);
  if (!fn || !ciface)
    return error("the module has no lowered function '" + prog.entry +
                 "' with a C interface");
  size_t resultsArea = prog.results.empty() ? 0 : 1;
  size_t want = prog.args.size() + resultsArea;
  if (ciface.getNumArguments() != want)
    return error("'" + prog.entry + "' takes " +
                 Twine(ciface.getNumArguments()) +
                 " pointer(s) but its signature implies " + Twine(want));
  int64_t words = resultsArea;
  for (const Port &p : prog.args)
    words += p.descriptorWords();
  if (int64_t(fn.getNumArguments()) != words ||
      (resultsArea && !isa<LLVM::LLVMPointerType>(fn.getArgumentTypes()[0])))
    return error("the arguments of '" + prog.entry +
                 "' do not match the ranks of its signature");
  if (!isa<LLVM::LLVMVoidType>(fn.getFunctionType().getReturnType()) ||
      (resultsArea && !storesResults(fn, prog)))
    return error("the results of '" + prog.entry +
                 "' do not match the ranks of its signature");
  return llvm::Error::success();
}

ArrayAttr withoutFSDPAttrs(ArrayAttr attrs) {
  if (!attrs)
    return attrs;
  SmallVector<Attribute> out;
  for (Attribute a : attrs) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute n : cast<DictionaryAttr>(a))
      if (!n.getName().getValue().starts_with(mlir::fsdp::kAttrPrefix))
        kept.push_back(n);
    out.push_back(DictionaryAttr::get(attrs.getContext(), kept));
  }
  return ArrayAttr::get(attrs.getContext(), out);
}

/// Removes meshes and fsdp attributes: translation knows only LLVM.
void stripFSDP(ModuleOp module) {
  for (auto mesh : llvm::to_vector(module.getOps<mlir::fsdp::MeshOp>()))
    mesh.erase();
  auto strip = [](Operation *op) {
    for (NamedAttribute a : llvm::to_vector(op->getDiscardableAttrs()))
      if (a.getName().getValue().starts_with(mlir::fsdp::kAttrPrefix))
        op->removeDiscardableAttr(a.getName());
  };
  strip(module);
  module.walk([&](LLVM::LLVMFuncOp f) {
    strip(f);
    if (auto a = f.getArgAttrsAttr())
      f.setArgAttrsAttr(withoutFSDPAttrs(a));
    if (auto r = f.getResAttrsAttr())
      f.setResAttrsAttr(withoutFSDPAttrs(r));
  });
}

/// Per argument, the result fed back into it (the dialect has checked that
/// it has the argument's types and layout, and that no argument is fed
/// twice).
void linkUpdates(Program &prog) {
  prog.fedBy.assign(prog.args.size(), -1);
  for (auto [i, r] : llvm::enumerate(prog.results))
    if (r.updateOf) {
      prog.fedBy[*r.updateOf] = int64_t(i);
      Port &arg = prog.args[size_t(*r.updateOf)];
      arg.rankLocal = !arg.layout && arg.rank() > 0;
      r.rankLocal = arg.rankLocal;
    }
}

/// With tensor-parallel axes, every rank of such an axis reads the same
/// batch: a data argument is split along dim 0 over the other axes only,
/// which it says as a layout (Shard(0) on each data-parallel axis, nested,
/// Replicate on the tensor-parallel ones) over the global batch.
void splitBatchOverDataParallelAxes(Program &prog) {
  std::vector<bool> tensorParallel(prog.meshShape.size(), false);
  for (const std::vector<Port> *ports : {&prog.args, &prog.results})
    for (const Port &p : *ports)
      if (p.layout)
        for (int64_t a : lm::tensorParallelAxes(*p.layout))
          tensorParallel[size_t(a)] = true;
  if (llvm::none_of(tensorParallel, [](bool b) { return b; }))
    return;
  lm::Layout batch;
  batch.meshShape = prog.meshShape;
  int64_t parts = 1;
  for (auto [a, tp] : llvm::enumerate(tensorParallel)) {
    batch.placements.push_back(tp ? lm::Placement::replicate()
                                  : lm::Placement::shard(0));
    parts *= tp ? 1 : prog.meshShape[a];
  }
  for (Port &p : prog.args) {
    if (p.layout || p.rankLocal || p.rank() == 0)
      continue;
    p.globalShape = p.shape;
    p.globalShape[0] *= parts;
    p.layout = batch;
  }
}

/// The ports and mesh of the entry `sig`.
llvm::Error readSignature(mlir::fsdp::SignatureAttr sig, ModuleOp module,
                          Program &prog) {
  llvm::Expected<std::vector<Port>> args =
      readPorts(sig.getArgs(), "argument", prog, module);
  if (!args)
    return args.takeError();
  prog.args = std::move(*args);
  llvm::Expected<std::vector<Port>> results =
      readPorts(sig.getResults(), "result", prog, module);
  if (!results)
    return results.takeError();
  prog.results = std::move(*results);
  linkUpdates(prog);
  splitBatchOverDataParallelAxes(prog);
  defaultMesh(module, prog);
  return checkMesh(prog);
}

} // namespace

/// The entry's `#fsdp.memory_plan`, when the module has one (the dialect
/// verified its form).
static std::optional<MemoryPlan> readMemoryPlan(ModuleOp module,
                                                StringRef entry) {
  auto plans = module->getAttrOfType<mlir::DictionaryAttr>(
      mlir::fsdp::kMemoryPlansAttrName);
  auto attr = plans ? plans.getAs<mlir::fsdp::MemoryPlanAttr>(entry) : nullptr;
  if (!attr)
    return std::nullopt;
  MemoryPlan plan;
  plan.arenaBytes = attr.getArena();
  plan.outsideBytes = attr.getOutside();
  plan.buffers = attr.getBuffers();
  plan.largest.assign(attr.getLargest().asArrayRef().begin(),
                      attr.getLargest().asArrayRef().end());
  return plan;
}

/// The program of entry `name`, its function checked against it.
static llvm::Expected<Program>
readEntry(ModuleOp module, mlir::fsdp::SignatureAttr sig, StringRef name) {
  Program prog;
  prog.entry = name.str();
  prog.symbol = "_mlir__mlir_ciface_" + prog.entry;
  if (llvm::Error err = readSignature(sig, module, prog))
    return std::move(err);
  if (llvm::Error err = checkFunction(module, prog))
    return std::move(err);
  prog.plan = readMemoryPlan(module, prog.entry);
  // fsdp-mark-read-only-args' arguments (convert-fsdp-to-runtime's record).
  auto readOnly = module->getAttrOfType<mlir::DictionaryAttr>(
      mlir::fsdp::kReadOnlyArgsAttrName);
  if (auto args =
          readOnly ? readOnly.getAs<mlir::DenseI64ArrayAttr>(name) : nullptr)
    for (int64_t i : args.asArrayRef())
      if (i >= 0 && i < int64_t(prog.args.size()))
        prog.args[size_t(i)].readOnly = true;
  return prog;
}

static json::Array toJSON(ArrayRef<int64_t> v) {
  json::Array a;
  for (int64_t x : v)
    a.push_back(x);
  return a;
}

static json::Array meshesJSON(ModuleOp module) {
  json::Array meshes;
  for (auto mesh : module.getOps<mlir::fsdp::MeshOp>()) {
    json::Array axes;
    for (Attribute a : mesh.getAxisNames())
      axes.push_back(cast<StringAttr>(a).getValue().str());
    meshes.push_back(json::Object{{"name", mesh.getSymName().str()},
                                  {"axes", std::move(axes)},
                                  {"shape", toJSON(mesh.getAxisSizes())}});
  }
  return meshes;
}

llvm::Expected<json::Object> writeManifest(ModuleOp module,
                                           const ManifestOptions &o) {
  std::vector<std::pair<std::string, mlir::fsdp::SignatureAttr>> chosen;
  if (o.entry) {
    Program prog;
    auto sig = chooseEntry(module, *o.entry, prog);
    if (!sig)
      return sig.takeError();
    chosen.emplace_back(prog.entry, *sig);
  } else {
    auto sigs =
        module->getAttrOfType<DictionaryAttr>(mlir::fsdp::kSignaturesAttrName);
    if (!sigs || sigs.empty())
      return error(o.source +
                   " has no entry (no fsdp.signatures: is it lowered "
                   "with --fsdp-pipeline=\"lower=true ...\"?)");
    if (llvm::Error err = verifySignatureAttr(module, sigs))
      return std::move(err);
    for (NamedAttribute e : sigs)
      chosen.emplace_back(e.getName().str(),
                          cast<mlir::fsdp::SignatureAttr>(e.getValue()));
  }
  json::Array entries;
  for (auto &[name, sig] : chosen) {
    auto prog = readEntry(module, sig, name);
    if (!prog)
      return prog.takeError();
    entries.push_back(entryJSON(*prog));
  }
  json::Array features;
  for (const std::string &f : o.features)
    features.push_back(f);
  json::Object manifest{
      {"format", "fsdp-step"},
      {"version", kManifestVersion},
      {"abi_version", FSDPRT_ABI_VERSION},
      {"source", llvm::sys::path::filename(o.source).str()},
      {"target", json::Object{{"triple", llvm::sys::getProcessTriple()},
                              {"cpu", o.cpu},
                              {"features", std::move(features)}}},
      {"meshes", meshesJSON(module)},
      {"entries", std::move(entries)}};
  // A compute=gpu step.
  if (module->hasAttr(kGpuAttrName))
    manifest["gpu"] =
        json::Object{{"tf32", module->hasAttr(kGpuTf32AttrName)},
                     {"emulation", module->hasAttr(kGpuEmulationAttrName)}};
  stripFSDP(module);
  return manifest;
}

} // namespace fsdp::run

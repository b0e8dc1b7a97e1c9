//===- Program.cpp - the entry of a lowered module ------------------------===//

#include "Program.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
namespace lm = ::fsdp::layout;

namespace fsdp::run {

int64_t Port::elementBytes() const {
  return std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

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

bool isSafeName(StringRef name) {
  if (name.empty() || name.starts_with(".") || name.contains(".."))
    return false;
  for (char c : name)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
        c == 0x7f)
      return false;
  return true;
}

namespace {

/// The static, ranked tensor type of a signature field, or a failure.
RankedTensorType tensorField(DictionaryAttr dict, StringRef key,
                             const Twine &where) {
  auto attr = dict.getAs<TypeAttr>(key);
  if (!attr)
    fail(where + " has no '" + key + "' type");
  auto type = dyn_cast<RankedTensorType>(attr.getValue());
  if (!type || !type.hasStaticShape())
    fail(where + ": '" + key + "' must be a tensor type of static shape");
  if (npyDescr(type.getElementType()).empty())
    fail(where + ": element type of '" + key +
         "' is not supported (f16, "
         "bf16, f32, f64, 8-bit, i32, "
         "i64)");
  return type;
}

/// The mesh of a layout; every port of an entry must use the same one.
void recordMesh(Program &prog, ModuleOp module, mlir::fsdp::LayoutAttr layout,
                const Twine &where) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<mlir::fsdp::MeshOp>(
      module, layout.getMesh().getAttr());
  if (!mesh)
    fail(where + ": its layout refers to an unknown mesh");
  std::vector<int64_t> shape(mesh.getAxisSizes().begin(),
                             mesh.getAxisSizes().end());
  if (!prog.meshShape.empty() && prog.meshShape != shape)
    fail("the entry uses more than one mesh");
  prog.meshShape = shape;
  prog.axisNames.clear();
  for (Attribute n : mesh.getAxisNames())
    prog.axisNames.push_back(cast<StringAttr>(n).str());
}

/// The layout of a port, checked against its global and slot types.
void attachLayout(Port &p, Program &prog, ModuleOp module,
                  mlir::fsdp::LayoutAttr layout, const Twine &where) {
  recordMesh(prog, module, layout, where);
  p.layout = layout.toLayout(prog.meshShape);
  if (!lm::tensorParallelAxes(*p.layout).empty())
    fail("'" + p.name +
         "' has a tensor-parallel layout; fsdp-run runs "
         "data-parallel meshes only");
  std::vector<int64_t> global = p.globalType.getShape().vec();
  if (auto err = lm::validate(*p.layout, global, /*isParameter=*/false))
    fail(where + ": " + *err);
  if (lm::slotShape(*p.layout, global) != p.type.getShape().vec())
    fail(where + ": 'type' is not the slot of 'global_type' under its layout");
}

/// An optional non-negative integer field (an index).
std::optional<int64_t> indexField(DictionaryAttr dict, StringRef key,
                                  const Twine &where) {
  Attribute a = dict.get(key);
  if (!a)
    return std::nullopt;
  auto i = dyn_cast<IntegerAttr>(a);
  if (!i || i.getValue().isNegative() || i.getValue().getActiveBits() > 62)
    fail(where + ": '" + key + "' must be a non-negative integer");
  return i.getInt();
}

/// update_of, state_of, optim and loss (docs/SEMANTICS.md, training).
void readTrainingFields(Port &p, DictionaryAttr dict, const Twine &where) {
  p.updateOf = indexField(dict, "update_of", where);
  p.stateOf = indexField(dict, "state_of", where);
  if (Attribute o = dict.get("optim")) {
    auto s = dyn_cast<StringAttr>(o);
    if (!s)
      fail(where + ": 'optim' must be a string");
    p.optim = s.str();
  }
  p.isLoss = dict.get("loss") != nullptr;
}

Port readPort(Attribute attr, Program &prog, ModuleOp module,
              const Twine &where) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    fail(where + " is not a dictionary");
  auto name = dict.getAs<StringAttr>("name");
  if (!name)
    fail(where + " has no string 'name'");
  Port p;
  p.name = name.str();
  if (!isSafeName(p.name))
    fail(where + ": name '" + p.name +
         "' is not a safe file stem (no '/', no '..', no leading '.')");
  p.type = tensorField(dict, "type", where);
  p.globalType = p.type;
  if (dict.get("global_type"))
    p.globalType = tensorField(dict, "global_type", where);
  if (p.globalType.getElementType() != p.type.getElementType() ||
      p.globalType.getRank() != p.type.getRank())
    fail(where + ": 'global_type' and 'type' differ in element type or rank");
  readTrainingFields(p, dict, where);
  if (Attribute l = dict.get("layout")) {
    auto layout = dyn_cast<mlir::fsdp::LayoutAttr>(l);
    if (!layout)
      fail(where + ": 'layout' is not an #fsdp.layout");
    attachLayout(p, prog, module, layout, where);
    llvm::raw_string_ostream os(p.layoutText);
    os << layout;
  } else if (p.globalType != p.type) {
    fail(where + ": 'global_type' differs from 'type' without a layout");
  }
  return p;
}

std::vector<Port> readPorts(DictionaryAttr sig, StringRef key, Program &prog,
                            ModuleOp module) {
  auto list = sig.getAs<ArrayAttr>(key);
  if (!list)
    fail("the signature of '" + prog.entry + "' has no '" + key + "' list");
  std::vector<Port> ports;
  llvm::StringSet<> seen;
  StringRef what = key == "args" ? "argument" : "result";
  for (auto [i, a] : llvm::enumerate(list)) {
    std::string where = "signature of '" + prog.entry + "': " + what.str() +
                        " " + std::to_string(i);
    ports.push_back(readPort(a, prog, module, where));
    if (!seen.insert(ports.back().name).second)
      fail(where + ": name '" + ports.back().name + "' is used by another " +
           what + " of the entry");
  }
  return ports;
}

/// The signature dictionary of the chosen entry.
DictionaryAttr chooseEntry(ModuleOp module, StringRef entry, Program &prog) {
  Attribute attr = module->getAttr("fsdp.signatures");
  auto sigs = dyn_cast_or_null<DictionaryAttr>(attr);
  if (!attr || (sigs && sigs.empty()))
    fail("the module has no fsdp.signatures; compile it with "
         "fsdp-opt --fsdp-pipeline=lower=true (or fsdp-lower-to-llvm)");
  if (!sigs)
    fail("fsdp.signatures is not a dictionary");
  prog.entry = entry.str();
  if (prog.entry.empty()) {
    if (sigs.size() != 1)
      fail("the module has several entries; choose one with --entry");
    prog.entry = sigs.begin()->getName().str();
  }
  Attribute sig = sigs.get(prog.entry);
  if (!sig) {
    std::string known;
    for (NamedAttribute e : sigs)
      known += " " + e.getName().str();
    fail("unknown entry '" + prog.entry + "'; the module has:" + known);
  }
  if (!isa<DictionaryAttr>(sig))
    fail("the signature of '" + prog.entry + "' is not a dictionary");
  return cast<DictionaryAttr>(sig);
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

void checkMesh(const Program &prog) {
  if (auto err = lm::validateMesh(prog.meshShape))
    fail("the mesh is invalid: " + *err);
  int64_t size = 1;
  for (int64_t s : prog.meshShape)
    if (__builtin_mul_overflow(size, s, &size))
      fail("the mesh has too many ranks");
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

/// The lowered function must take and return what the signature says: its
/// C interface one pointer per argument (plus one for the results), its
/// expanded form one descriptor of the recorded rank per tensor.
void checkFunction(ModuleOp module, const Program &prog) {
  auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(prog.entry);
  auto ciface =
      module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + prog.entry);
  if (!fn || !ciface)
    fail("the module has no lowered function '" + prog.entry +
         "' with a C interface");
  size_t want = prog.args.size() + (prog.results.empty() ? 0 : 1);
  if (ciface.getNumArguments() != want)
    fail("'" + prog.entry + "' takes " + Twine(ciface.getNumArguments()) +
         " pointer(s) but its signature implies " + Twine(want));
  int64_t words = 0;
  for (const Port &p : prog.args)
    words += p.descriptorWords();
  if (int64_t(fn.getNumArguments()) != words)
    fail("the arguments of '" + prog.entry +
         "' do not match the ranks of its signature");
  Type result = fn.getFunctionType().getReturnType();
  auto fields = dyn_cast<LLVM::LLVMStructType>(result);
  bool ok = prog.results.empty() ? isa<LLVM::LLVMVoidType>(result) : !!fields;
  if (ok && prog.results.size() == 1)
    ok = descriptorRank(result) == prog.results[0].type.getRank();
  else if (ok && prog.results.size() > 1) {
    ok = fields.getBody().size() == prog.results.size();
    for (size_t i = 0; ok && i < prog.results.size(); ++i)
      ok =
          descriptorRank(fields.getBody()[i]) == prog.results[i].type.getRank();
  }
  if (!ok)
    fail("the results of '" + prog.entry +
         "' do not match the ranks of its signature");
}

ArrayAttr withoutFSDPAttrs(ArrayAttr attrs) {
  if (!attrs)
    return attrs;
  SmallVector<Attribute> out;
  for (Attribute a : attrs) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute n : cast<DictionaryAttr>(a))
      if (!n.getName().getValue().starts_with("fsdp."))
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
      if (a.getName().getValue().starts_with("fsdp."))
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

/// Each fsdp.update_of result names an argument of the same slot type,
/// global type and layout; no argument is fed by two results.
void linkUpdates(Program &prog) {
  prog.fedBy.assign(prog.args.size(), -1);
  for (auto [i, r] : llvm::enumerate(prog.results)) {
    if (!r.updateOf)
      continue;
    std::string where = "signature of '" + prog.entry + "': result " +
                        std::to_string(i) + " ('" + r.name + "')";
    int64_t j = *r.updateOf;
    if (j >= int64_t(prog.args.size()))
      fail(where + ": update_of = " + Twine(j) + " is not an argument index");
    const Port &a = prog.args[j];
    if (a.type != r.type || a.globalType != r.globalType ||
        a.layoutText != r.layoutText)
      fail(where + ": its type or layout differs from argument " + Twine(j) +
           " ('" + a.name + "') that it updates");
    if (prog.fedBy[j] >= 0)
      fail(where + ": argument " + Twine(j) + " ('" + a.name +
           "') is already updated by result " + Twine(prog.fedBy[j]));
    prog.fedBy[j] = int64_t(i);
  }
}

} // namespace

llvm::Expected<Program> loadProgram(ModuleOp module, StringRef entry) {
  Program prog;
  DictionaryAttr sig = chooseEntry(module, entry, prog);
  prog.args = readPorts(sig, "args", prog, module);
  prog.results = readPorts(sig, "results", prog, module);
  linkUpdates(prog);
  defaultMesh(module, prog);
  checkMesh(prog);
  checkFunction(module, prog);
  stripFSDP(module);
  return prog;
}

} // namespace fsdp::run

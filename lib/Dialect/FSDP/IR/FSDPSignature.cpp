//===- FSDPSignature.cpp - #fsdp.port, #fsdp.signature --------------------===//
//
// The typed contract between convert-fsdp-to-runtime and the runner: the
// ports' syntax and rules, the module attribute's mesh checks, and the one
// reader and writer.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPSignature.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

bool mlir::fsdp::isSafeName(StringRef name) {
  if (name.empty() || name.starts_with(".") || name.contains(".."))
    return false;
  return llvm::none_of(name, [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
           c == 0x7f;
  });
}

bool mlir::fsdp::isPortElementType(Type t) {
  return t.isF16() || t.isBF16() || t.isF32() || t.isF64() || t.isInteger(32) ||
         t.isInteger(64) ||
         (t.isIntOrFloat() && t.getIntOrFloatBitWidth() == 8);
}

//===----------------------------------------------------------------------===//
// #fsdp.port
//===----------------------------------------------------------------------===//

namespace {
/// The fields of a port while it is parsed.
struct PortFields {
  RankedTensorType type, globalType;
  LayoutAttr layout;
  std::optional<int64_t> updateOf, stateOf;
  std::optional<OptimRole> role;
  bool loss = false;
};
} // namespace

/// Parses `key = value` (or `loss`) after the name and type of a port.
static ParseResult parsePortField(AsmParser &p, StringRef key, PortFields &f) {
  if (key == "loss") {
    f.loss = true;
    return success();
  }
  SMLoc at = p.getCurrentLocation();
  if (p.parseEqual())
    return failure();
  if (key == "global_type") {
    Type t;
    if (p.parseType(t))
      return failure();
    f.globalType = dyn_cast<RankedTensorType>(t);
    if (!f.globalType)
      return p.emitError(at) << "a port's global_type must be a ranked "
                                "tensor, got "
                             << t;
    return success();
  }
  if (key == "layout")
    return p.parseAttribute(f.layout);
  if (key == "update_of" || key == "state_of") {
    int64_t index;
    if (p.parseInteger(index))
      return failure();
    (key == "update_of" ? f.updateOf : f.stateOf) = index;
    return success();
  }
  StringRef role;
  if (p.parseKeyword(&role))
    return failure();
  f.role = symbolizeOptimRole(role);
  if (!f.role)
    return p.emitError(at) << "a port's role is 'lr' or 'step', got '" << role
                           << "'";
  return success();
}

/// `"name" : tensor<...>`, the start of every port.
static ParseResult parsePortHead(AsmParser &p, std::string &name,
                                 RankedTensorType &type) {
  if (p.parseLess())
    return failure();
  SMLoc at = p.getCurrentLocation();
  if (p.parseOptionalString(&name))
    return p.emitError(at, "a port starts with its name, a string");
  Type t;
  at = p.getCurrentLocation();
  if (p.parseColon() || p.parseType(t))
    return failure();
  type = dyn_cast<RankedTensorType>(t);
  if (!type)
    return p.emitError(at) << "port \"" << name
                           << "\": its type must be a ranked tensor, got " << t;
  return success();
}

Attribute PortAttr::parse(AsmParser &p, Type) {
  SMLoc loc = p.getCurrentLocation();
  std::string name;
  PortFields f;
  if (parsePortHead(p, name, f.type))
    return {};
  llvm::StringSet<> seen;
  while (succeeded(p.parseOptionalComma())) {
    SMLoc at = p.getCurrentLocation();
    StringRef key;
    if (p.parseKeyword(&key))
      return {};
    if (!llvm::is_contained(
            {"global_type", "layout", "update_of", "state_of", "role", "loss"},
            key)) {
      p.emitError(at) << "unknown port field '" << key
                      << "' (expected global_type, layout, update_of, "
                         "state_of, role or loss)";
      return {};
    }
    if (!seen.insert(key).second) {
      p.emitError(at) << "port field '" << key << "' is given twice";
      return {};
    }
    if (parsePortField(p, key, f))
      return {};
  }
  if (p.parseGreater())
    return {};
  return p.getChecked<PortAttr>(loc, p.getContext(),
                                StringAttr::get(p.getContext(), name), f.type,
                                f.globalType ? f.globalType : f.type, f.layout,
                                f.updateOf, f.stateOf, f.role, f.loss);
}

void PortAttr::print(AsmPrinter &p) const {
  p << "<";
  p.printString(getName().getValue());
  p << " : " << getType();
  if (getGlobalType() != getType())
    p << ", global_type = " << getGlobalType();
  if (getLayout())
    p << ", layout = " << getLayout();
  if (getUpdateOf())
    p << ", update_of = " << *getUpdateOf();
  if (getStateOf())
    p << ", state_of = " << *getStateOf();
  if (getRole())
    p << ", role = " << stringifyOptimRole(*getRole());
  if (getLoss())
    p << ", loss";
  p << ">";
}

/// A port's own tensor type: static and of a supported element type.
static LogicalResult verifyPortType(function_ref<InFlightDiagnostic()> emit,
                                    StringRef name, StringRef what,
                                    RankedTensorType type) {
  if (!type || !type.hasStaticShape())
    return emit() << "port \"" << name << "\": its " << what
                  << " must be a tensor of static shape, got " << type;
  if (!isPortElementType(type.getElementType()))
    return emit() << "port \"" << name << "\": the element type of its " << what
                  << " " << type
                  << " is not supported (f16, bf16, f32, f64, 8-bit, i32, "
                     "i64)";
  return success();
}

LogicalResult PortAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringAttr name, RankedTensorType type,
                               RankedTensorType globalType, LayoutAttr layout,
                               std::optional<int64_t> updateOf,
                               std::optional<int64_t> stateOf,
                               std::optional<OptimRole> role, bool loss) {
  StringRef stem = name ? name.getValue() : StringRef();
  if (!isSafeName(stem))
    return emitError() << "port name \"" << stem << "\" is unsafe; "
                       << kSafeNameRule;
  if (failed(verifyPortType(emitError, stem, "type", type)) ||
      failed(verifyPortType(emitError, stem, "global_type", globalType)))
    return failure();
  if (globalType.getElementType() != type.getElementType() ||
      globalType.getRank() != type.getRank())
    return emitError() << "port \"" << stem << "\": global_type " << globalType
                       << " and type " << type
                       << " differ in element type or rank";
  if (!layout && globalType != type)
    return emitError() << "port \"" << stem << "\": global_type " << globalType
                       << " differs from type " << type << " without a layout";
  for (auto [key, index] :
       {std::pair{"update_of", updateOf}, std::pair{"state_of", stateOf}})
    if (index && *index < 0)
      return emitError() << "port \"" << stem << "\": " << key
                         << " must be a non-negative argument index, got "
                         << *index;
  if (loss && type.getRank() != 0)
    return emitError() << "port \"" << stem
                       << "\": the loss must be a scalar, got " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// #fsdp.signature
//===----------------------------------------------------------------------===//

static ParseResult parsePorts(AsmParser &p, StringRef key,
                              SmallVectorImpl<PortAttr> &ports) {
  if (p.parseKeyword(key) || p.parseEqual())
    return failure();
  return p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    PortAttr port;
    if (p.parseCustomAttributeWithFallback(port))
      return failure();
    ports.push_back(port);
    return success();
  });
}

Attribute SignatureAttr::parse(AsmParser &p, Type) {
  SMLoc loc = p.getCurrentLocation();
  SmallVector<PortAttr> args, results;
  if (p.parseLess() || parsePorts(p, "args", args) || p.parseComma() ||
      parsePorts(p, "results", results) || p.parseGreater())
    return {};
  return p.getChecked<SignatureAttr>(loc, p.getContext(),
                                     ArrayRef<PortAttr>(args),
                                     ArrayRef<PortAttr>(results));
}

static void printPorts(AsmPrinter &p, StringRef key, ArrayRef<PortAttr> ports) {
  p << key << " = [";
  llvm::interleaveComma(
      ports, p, [&](PortAttr port) { p.printStrippedAttrOrType(port); });
  p << "]";
}

void SignatureAttr::print(AsmPrinter &p) const {
  p << "<";
  printPorts(p, "args", getArgs());
  p << ", ";
  printPorts(p, "results", getResults());
  p << ">";
}

/// Names are unique among `ports`; each port has only the fields of its
/// side (`state_of` and `role` on arguments, `update_of` and `loss` on
/// results), and `state_of` names an argument of its type.
static LogicalResult verifySide(function_ref<InFlightDiagnostic()> emitError,
                                ArrayRef<PortAttr> ports,
                                ArrayRef<PortAttr> args, bool isArgument) {
  StringRef what = isArgument ? "argument" : "result";
  llvm::DenseMap<StringAttr, size_t> first;
  for (auto [i, port] : llvm::enumerate(ports)) {
    auto [it, inserted] = first.try_emplace(port.getName(), i);
    if (!inserted)
      return emitError() << what << " #" << i << " is named \""
                         << port.getName().getValue() << "\" like " << what
                         << " #" << it->second << "; names must be unique";
    bool wrongSide = isArgument ? port.getUpdateOf() || port.getLoss()
                                : port.getStateOf() || port.getRole();
    if (wrongSide)
      return emitError() << what << " #" << i << " (\""
                         << port.getName().getValue() << "\"): "
                         << (isArgument ? "update_of and loss are for results"
                                        : "state_of and role are for "
                                          "arguments");
    std::optional<int64_t> ref =
        isArgument ? port.getStateOf() : port.getUpdateOf();
    if (!ref)
      continue;
    if (*ref >= int64_t(args.size()))
      return emitError() << what << " #" << i << " (\""
                         << port.getName().getValue() << "\") refers to "
                         << "argument #" << *ref << ", but there are "
                         << args.size() << " argument(s)";
    if (args[*ref].getType() != port.getType())
      return emitError() << what << " #" << i << " (\""
                         << port.getName().getValue() << "\") refers to "
                         << "argument #" << *ref << " and must have its type "
                         << args[*ref].getType() << ", got " << port.getType();
  }
  return success();
}

/// Each result with `update_of = j` has argument j's global type and
/// layout; no argument is updated by two results.
static LogicalResult verifyUpdates(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<PortAttr> args,
                                   ArrayRef<PortAttr> results) {
  llvm::DenseMap<int64_t, size_t> updatedBy;
  for (auto [i, r] : llvm::enumerate(results)) {
    if (!r.getUpdateOf())
      continue;
    int64_t j = *r.getUpdateOf();
    PortAttr a = args[j];
    if (a.getGlobalType() != r.getGlobalType() ||
        a.getLayout() != r.getLayout())
      return emitError() << "result #" << i << " (\"" << r.getName().getValue()
                         << "\") updates argument #" << j << " (\""
                         << a.getName().getValue()
                         << "\") but differs from it in global type or layout";
    auto [it, inserted] = updatedBy.try_emplace(j, i);
    if (!inserted)
      return emitError() << "result #" << i << " (\"" << r.getName().getValue()
                         << "\") updates argument #" << j << ", which result #"
                         << it->second << " already updates";
  }
  return success();
}

LogicalResult
SignatureAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ArrayRef<PortAttr> args, ArrayRef<PortAttr> results) {
  if (failed(verifySide(emitError, args, args, /*isArgument=*/true)) ||
      failed(verifySide(emitError, results, args, /*isArgument=*/false)))
    return failure();
  return verifyUpdates(emitError, args, results);
}

//===----------------------------------------------------------------------===//
// fsdp.signatures: the mesh checks
//===----------------------------------------------------------------------===//

/// The layout of `port` names a visible mesh, is valid for its global
/// type and has the port's type as its slot.
static LogicalResult verifyPortLayout(Operation *op, StringRef entry,
                                      StringRef what, size_t index,
                                      PortAttr port) {
  LayoutAttr layout = port.getLayout();
  if (!layout)
    return success();
  auto emit = [&]() {
    return op->emitOpError() << "'" << kSignaturesAttrName << "': entry '"
                             << entry << "', " << what << " #" << index
                             << " (\"" << port.getName().getValue() << "\"): ";
  };
  MeshOp mesh = lookupMesh(op, layout.getMesh());
  if (!mesh)
    return emit() << "its layout refers to unknown mesh " << layout.getMesh();
  lm::Layout model = layout.toLayout(mesh.getAxisSizes());
  std::vector<int64_t> global = port.getGlobalType().getShape().vec();
  // With tensor-parallel axes the global type is TP-local: its slot is
  // the data-parallel part's.
  if (auto err =
          lm::validate(model, lm::tensorParallelGlobalShape(model, global),
                       /*isParameter=*/false))
    return emit() << "its layout " << layout << " is invalid for "
                  << port.getGlobalType() << ": " << *err;
  if (lm::slotShape(lm::dataParallelView(model), global) !=
      port.getType().getShape().vec())
    return emit() << "its type " << port.getType()
                  << " is not the slot of its global_type "
                  << port.getGlobalType() << " under " << layout;
  return success();
}

LogicalResult mlir::fsdp::verifySignatures(Operation *op, Attribute value) {
  auto entries = dyn_cast<DictionaryAttr>(value);
  if (!entries)
    return op->emitOpError() << "'" << kSignaturesAttrName
                             << "' must be a dictionary of #fsdp.signature";
  for (NamedAttribute entry : entries) {
    auto sig = dyn_cast<SignatureAttr>(entry.getValue());
    if (!sig)
      return op->emitOpError()
             << "'" << kSignaturesAttrName << "': entry '"
             << entry.getName().getValue()
             << "' must be a #fsdp.signature<args = [...], results = [...]>";
    for (auto [what, ports] : {std::pair{"argument", sig.getArgs()},
                               std::pair{"result", sig.getResults()}})
      for (auto [i, port] : llvm::enumerate(ports))
        if (failed(verifyPortLayout(op, entry.getName().getValue(), what, i,
                                    port)))
          return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reader and writer
//===----------------------------------------------------------------------===//

DictionaryAttr mlir::fsdp::getSignatures(ModuleOp module) {
  return module->getAttrOfType<DictionaryAttr>(kSignaturesAttrName);
}

void mlir::fsdp::setSignatures(ModuleOp module,
                               ArrayRef<NamedAttribute> entries) {
  module->setAttr(kSignaturesAttrName,
                  DictionaryAttr::get(module.getContext(), entries));
}

/// The port of one argument or result from its type and fsdp attributes;
/// null (reported at `func`) when it cannot be one.
static PortAttr describe(FunctionOpInterface func, Type type,
                         DictionaryAttr attrs, StringRef what, unsigned index) {
  MLIRContext *ctx = func.getContext();
  auto emit = [&]() {
    return func.emitOpError()
           << what << " #" << index << " cannot be recorded for the runner: ";
  };
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape()) {
    emit() << "a step's arguments and results must be tensors or memrefs of "
              "static shape, got "
           << type;
    return {};
  }
  auto tensor =
      RankedTensorType::get(shaped.getShape(), shaped.getElementType());
  auto get = [&](StringRef name) {
    return attrs ? attrs.get(name) : Attribute();
  };
  if (get(kAttrPrefix)) {
    emit() << "'" << kAttrPrefix
           << "' names no fsdp attribute (nothing follows the prefix)";
    return {};
  }
  auto name = dyn_cast_or_null<StringAttr>(get(kNameAttrName));
  if (!name)
    name = StringAttr::get(ctx, what == "argument" ? "arg" + Twine(index)
                                                   : "result" + Twine(index));
  RankedTensorType global = tensor;
  if (auto g = dyn_cast_or_null<TypeAttr>(get(kGlobalTypeAttrName)))
    global = dyn_cast<RankedTensorType>(g.getValue());
  auto index64 = [&](StringRef key) -> std::optional<int64_t> {
    if (auto i = dyn_cast_or_null<IntegerAttr>(get(key)))
      return i.getInt();
    return std::nullopt;
  };
  std::optional<OptimRole> role;
  if (auto r = dyn_cast_or_null<StringAttr>(get(kOptimAttrName)))
    role = symbolizeOptimRole(r.getValue());
  return PortAttr::getChecked(
      emit, ctx, name, tensor, global,
      dyn_cast_or_null<LayoutAttr>(get(kLayoutAttrName)),
      index64(kUpdateOfAttrName), index64(kStateOfAttrName), role,
      get(kLossAttrName) != nullptr);
}

/// Whether some argument or result of `func` has an fsdp attribute.
static bool isAnnotated(FunctionOpInterface func) {
  auto annotated = [](ArrayAttr all) {
    return all && llvm::any_of(all, [](Attribute a) {
             auto dict = dyn_cast_or_null<DictionaryAttr>(a);
             return dict && llvm::any_of(dict, [](NamedAttribute n) {
                      return n.getName().getValue().starts_with(kAttrPrefix);
                    });
           });
  };
  return annotated(func.getArgAttrsAttr()) || annotated(func.getResAttrsAttr());
}

FailureOr<SignatureAttr> mlir::fsdp::buildSignature(FunctionOpInterface func) {
  if (!isAnnotated(func))
    return SignatureAttr();
  SmallVector<PortAttr> args, results;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    args.push_back(describe(func, type, func.getArgAttrDict(i), "argument", i));
    if (!args.back())
      return failure();
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    results.push_back(
        describe(func, type, func.getResultAttrDict(i), "result", i));
    if (!results.back())
      return failure();
  }
  auto emit = [&]() {
    return func.emitOpError() << "cannot be recorded for the runner: ";
  };
  SignatureAttr sig = SignatureAttr::getChecked(emit, func.getContext(),
                                                ArrayRef<PortAttr>(args),
                                                ArrayRef<PortAttr>(results));
  if (!sig)
    return failure();
  return sig;
}

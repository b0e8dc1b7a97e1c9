//===- FSDPDialect.cpp - fsdp dialect and argument attributes -------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/FSDPSignature.h"
#include "fsdp/Memory/ReadOnlyArgs.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"

void FSDPDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"
      >();
}

void FSDPDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.cpp.inc"
      >();
}

MeshOp mlir::fsdp::lookupMesh(Operation *from, FlatSymbolRefAttr mesh,
                              SymbolTableCollection *tables) {
  if (tables)
    return tables->lookupNearestSymbolFrom<MeshOp>(from, mesh.getAttr());
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, mesh.getAttr());
}

/// The discardable attributes the passes put on operations.
LogicalResult FSDPDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kOriginAttrName) {
    if (!isa<OriginAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' must be a #fsdp.origin attribute";
    if (!isa<CollectiveOpInterface>(op))
      return op->emitOpError()
             << "'" << name << "' is only meaningful on fsdp collectives";
    return success();
  }
  if (name == kBucketSizeAttrName || name == kWireBytesAttrName) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be an integer";
    return success();
  }
  if (name == kMovableAttrName) {
    auto c = dyn_cast<CollectiveOpInterface>(op);
    if (!isa<UnitAttr>(attr.getValue()) || !c || c.isAsync() ||
        op->hasAttr(kOriginAttrName))
      return op->emitOpError()
             << "'" << name << "' must be a unit attribute on a blocking "
             << "collective without an origin";
    return success();
  }
  if (name == kSignaturesAttrName)
    return verifySignatures(op, attr.getValue());
  if (name == kMemoryPlansAttrName) {
    auto plans = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!plans || !isa<ModuleOp>(op) ||
        !llvm::all_of(plans, [](NamedAttribute entry) {
          return isa<MemoryPlanAttr>(entry.getValue());
        }))
      return op->emitOpError()
             << "'" << name
             << "' must be a module's dictionary of #fsdp.memory_plan";
    return success();
  }
  return success();
}

/// Checks `layout` against its mesh and the shape of the value carrying it.
static LogicalResult verifyLayoutFor(Operation *op, LayoutAttr layout,
                                     Type type, bool isParameter,
                                     StringRef what) {
  // Memrefs appear once the program is bufferized.
  auto tensorType = dyn_cast<ShapedType>(type);
  if (!tensorType || !tensorType.hasStaticShape())
    return op->emitOpError() << what << " with a layout must be a statically "
                             << "shaped ranked tensor, got " << type;
  // Collectives move integers and floats; padding needs a zero.
  if (!tensorType.getElementType().isIntOrFloat())
    return op->emitOpError()
           << what << " with a layout must have integer or float elements, "
           << "got " << tensorType.getElementType();
  MeshOp mesh = lookupMesh(op, layout.getMesh());
  if (!mesh)
    return op->emitOpError()
           << what << " refers to unknown mesh " << layout.getMesh()
           << " (no fsdp.mesh with that name is visible)";
  lm::Layout model = layout.toLayout(mesh.getAxisSizes());
  // With tensor-parallel axes the value is TP-local; the layout describes
  // the global tensor. Under `tp_shard<d>` it is TP-local only once
  // fsdp-tensor-parallel has partitioned the function (`fsdp.tp_local`).
  bool tpLocal = !isa<FunctionOpInterface>(op) || op->hasAttr(kTPLocalAttrName);
  if (auto err = lm::validate(model,
                              lm::tensorParallelGlobalShape(
                                  model, tensorType.getShape().vec(), tpLocal),
                              isParameter))
    return op->emitOpError()
           << what << " has an invalid layout " << layout << ": " << *err;
  return success();
}

static FunctionOpInterface asFunction(Operation *op) {
  return dyn_cast<FunctionOpInterface>(op);
}

static bool haveSameShape(Type a, Type b);

/// `fsdp.name` names the runner's `<name>.npy`: a file stem that stays in
/// its directory, unique among the arguments (or among the results).
static LogicalResult verifyName(Operation *op, Attribute value, StringRef what,
                                bool isArgument, unsigned index) {
  auto name = dyn_cast<StringAttr>(value);
  if (!name)
    return op->emitOpError()
           << "'" << kNameAttrName << "' on " << what << " must be a string";
  StringRef stem = name.getValue();
  if (!isSafeName(stem))
    return op->emitOpError() << "'" << kNameAttrName << "' on " << what
                             << " is \"" << stem << "\"; " << kSafeNameRule;
  auto func = asFunction(op);
  if (!func)
    return success();
  // Uniqueness is checked once, while verifying the first named argument
  // (result): linear in their number, where comparing each name with the
  // earlier ones made every verification of a 1,000-parameter step
  // quadratic. A duplicate is reported on the later of the two.
  ArrayAttr all = isArgument ? func.getArgAttrsAttr() : func.getResAttrsAttr();
  if (!all)
    return success();
  auto nameAt = [&](unsigned i) -> StringAttr {
    auto dict = dyn_cast_or_null<DictionaryAttr>(all[i]);
    return dict ? dict.getAs<StringAttr>(kNameAttrName) : StringAttr();
  };
  for (unsigned other = 0; other < index; ++other)
    if (nameAt(other))
      return success();
  llvm::DenseMap<StringAttr, unsigned> first;
  for (unsigned i = index, e = all.size(); i < e; ++i) {
    StringAttr other = nameAt(i);
    if (!other)
      continue;
    auto [it, inserted] = first.try_emplace(other, i);
    if (!inserted)
      return op->emitOpError()
             << "'" << kNameAttrName << "' \"" << other.getValue() << "\" on "
             << (isArgument ? "argument #" : "result #") << i
             << " is also the name of " << (isArgument ? "argument" : "result")
             << " #" << it->second << "; names must be unique";
  }
  return success();
}

/// `fsdp.optim` names the role of an optimizer input: "lr" or "step".
static LogicalResult verifyOptimArg(Operation *op, NamedAttribute attr,
                                    StringRef what) {
  auto role = dyn_cast<StringAttr>(attr.getValue());
  if (!role || !symbolizeOptimRole(role.getValue()))
    return op->emitOpError() << "'" << attr.getName().getValue() << "' on "
                             << what << " must be \"lr\" or \"step\"";
  return success();
}

/// An argument index (`fsdp.state_of`, `fsdp.update_of`) that must name an
/// argument of `func` whose type `type` shares.
static LogicalResult verifyArgIndex(Operation *op, FunctionOpInterface func,
                                    NamedAttribute attr, Type type,
                                    StringRef what, bool needsLayout) {
  StringRef name = attr.getName().getValue();
  auto index = dyn_cast<IntegerAttr>(attr.getValue());
  if (!index)
    return op->emitOpError() << "'" << name << "' on " << what
                             << " must be an integer argument index";
  if (!func)
    return success();
  int64_t arg = index.getInt();
  if (arg < 0 || arg >= (int64_t)func.getNumArguments())
    return op->emitOpError()
           << "'" << name << "' on " << what << " refers to argument #" << arg
           << ", but the function has " << func.getNumArguments()
           << " argument(s)";
  if (needsLayout && !func.getArgAttr(arg, kLayoutAttrName))
    return op->emitOpError()
           << "'" << name << "' on " << what << " refers to argument #" << arg
           << ", which has no fsdp.layout (not a parameter)";
  Type argType = func.getArgumentTypes()[arg];
  if (!haveSameShape(argType, type))
    return op->emitOpError()
           << "'" << name << "' on " << what << " refers to argument #" << arg
           << " and must have its type " << argType << ", got " << type;
  return success();
}

/// `fsdp.` alone names no attribute, and MLIR hands it to no dialect (its
/// name has nothing after the prefix): it is rejected while the other fsdp
/// attributes of the same argument or result are verified.
static LogicalResult verifyNoBarePrefix(Operation *op, DictionaryAttr attrs,
                                        StringRef what) {
  if (attrs && attrs.get(kAttrPrefix))
    return op->emitOpError() << "'" << kAttrPrefix << "' on " << what
                             << " names no fsdp attribute (nothing follows "
                                "the prefix)";
  return success();
}

static bool isShardAnnotated(FunctionOpInterface func, unsigned arg);

/// `fsdp.frozen` marks a parameter without a gradient: it needs a layout
/// (or a `shard.shard` annotation that --fsdp-import-shard turns into one).
/// That no result is its gradient is checked at the gradient.
static LogicalResult verifyFrozenArg(Operation *op, FunctionOpInterface func,
                                     unsigned argIndex, NamedAttribute attr,
                                     StringRef what) {
  StringRef name = attr.getName().getValue();
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError() << "'" << name << "' is a unit attribute";
  if (func && !func.getArgAttr(argIndex, kLayoutAttrName) &&
      !isShardAnnotated(func, argIndex))
    return op->emitOpError()
           << "'" << name << "' on " << what
           << " marks a frozen parameter, but the argument has no fsdp.layout "
              "and no shard.shard annotation";
  return success();
}

LogicalResult FSDPDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto func = asFunction(op);
  std::string what = "argument #" + std::to_string(argIndex);
  StringRef name = attr.getName().getValue();
  if (func &&
      failed(verifyNoBarePrefix(op, func.getArgAttrDict(argIndex), what)))
    return failure();
  if (name == kLayoutAttrName) {
    auto layout = dyn_cast<LayoutAttr>(attr.getValue());
    if (!layout)
      return op->emitOpError() << "'" << name << "' on " << what
                               << " must be a #fsdp.layout attribute";
    if (!func)
      return op->emitOpError()
             << "'" << name << "' is only meaningful on function arguments";
    Type type = func.getArgumentTypes()[argIndex];
    // After partitioning, the argument holds a shard; its layout is checked
    // against the recorded global type.
    if (auto global =
            func.getArgAttrOfType<TypeAttr>(argIndex, kGlobalTypeAttrName))
      type = global.getValue();
    // Gradient accumulators are partial sums, not parameters.
    bool isParameter = !func.getArgAttr(argIndex, kAccumulatorAttrName);
    return verifyLayoutFor(op, layout, type, isParameter, what);
  }
  if (name == kAccumulatorAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' is a unit attribute";
    return success();
  }
  if (name == kFrozenAttrName)
    return verifyFrozenArg(op, func, argIndex, attr, what);
  if (name == kReadOnlyAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' is a unit attribute";
    if (func && !isa<BaseMemRefType>(func.getArgumentTypes()[argIndex]))
      return op->emitOpError()
             << "'" << name << "' on " << what
             << " marks a buffer argument of a bufferized step "
                "(fsdp-mark-read-only-args sets it), not a "
             << func.getArgumentTypes()[argIndex];
    return success();
  }
  if (name == kNameAttrName)
    return verifyName(op, attr.getValue(), what, /*isArgument=*/true, argIndex);
  if (name == kUnitAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' on " << what << " must be a string";
    return success();
  }
  if (name == kGlobalTypeAttrName) {
    if (!isa<TypeAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' on " << what << " must be a type";
    return success();
  }
  if (name == kOptimAttrName)
    return verifyOptimArg(op, attr, what);
  if (name == kStateOfAttrName)
    return verifyArgIndex(op, func, attr,
                          func ? func.getArgumentTypes()[argIndex] : Type(),
                          what, /*needsLayout=*/true);
  return op->emitOpError() << "unknown fsdp argument attribute '" << name
                           << "' on " << what;
}

/// `fsdp.loss` marks the scalar the step minimizes.
static LogicalResult verifyLossResult(Operation *op, NamedAttribute attr,
                                      Type type, StringRef what) {
  StringRef name = attr.getName().getValue();
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError() << "'" << name << "' is a unit attribute";
  auto tensorType = dyn_cast<ShapedType>(type);
  bool scalar =
      (tensorType && tensorType.hasRank() && tensorType.getRank() == 0) ||
      isa<FloatType>(type);
  if (!scalar)
    return op->emitOpError()
           << "the loss (" << what << ") must be a scalar, got " << type;
  return success();
}

/// An argument still annotated with upstream `shard.shard` gets its layout
/// from --fsdp-import-shard.
static bool isShardAnnotated(FunctionOpInterface func, unsigned arg) {
  return !func.isExternal() &&
         llvm::any_of(func.getArgument(arg).getUsers(), [](Operation *user) {
           return user->getName().getStringRef() == "shard.shard";
         });
}

/// Same type, or ranked shaped types (tensor or memref) with equal shape
/// and element type.
static bool haveSameShape(Type a, Type b) {
  auto sa = dyn_cast<ShapedType>(a), sb = dyn_cast<ShapedType>(b);
  return a == b || (sa && sb && sa.hasRank() && sb.hasRank() &&
                    sa.getShape() == sb.getShape() &&
                    sa.getElementType() == sb.getElementType());
}

/// `fsdp.grad_of = N` says this result is the gradient of parameter #N.
static LogicalResult verifyGradOfResult(Operation *op, FunctionOpInterface func,
                                        NamedAttribute attr, Type type,
                                        StringRef what) {
  StringRef name = attr.getName().getValue();
  auto index = dyn_cast<IntegerAttr>(attr.getValue());
  if (!index)
    return op->emitOpError() << "'" << name << "' on " << what
                             << " must be an integer argument index";
  int64_t arg = index.getInt();
  if (arg < 0 || arg >= (int64_t)func.getNumArguments())
    return op->emitOpError()
           << what << " is marked as the gradient of argument #" << arg
           << ", but the function has " << func.getNumArguments()
           << " argument(s)";
  if (!func.getArgAttr(arg, kLayoutAttrName) && !isShardAnnotated(func, arg))
    return op->emitOpError() << what << " is marked as the gradient of "
                             << "argument #" << arg
                             << ", which has no fsdp.layout (not a parameter)";
  if (func.getArgAttr(arg, kFrozenAttrName))
    return op->emitOpError()
           << what << " is marked as the gradient of "
           << "argument #" << arg << ", which is frozen (fsdp.frozen)";
  Type argType = func.getArgumentTypes()[arg];
  if (!haveSameShape(argType, type))
    return op->emitOpError()
           << what << " is the gradient of argument #" << arg
           << " and must have its type " << argType << ", got " << type;
  return success();
}

/// A result layout is checked against the recorded global type once the
/// result has been partitioned into a shard.
static LogicalResult verifyResultLayout(Operation *op, FunctionOpInterface func,
                                        unsigned resultIndex,
                                        NamedAttribute attr, Type type,
                                        StringRef what) {
  StringRef name = attr.getName().getValue();
  auto layout = dyn_cast<LayoutAttr>(attr.getValue());
  if (!layout)
    return op->emitOpError() << "'" << name << "' on " << what
                             << " must be a #fsdp.layout attribute";
  Type global = type;
  if (auto g =
          func.getResultAttrOfType<TypeAttr>(resultIndex, kGlobalTypeAttrName))
    global = g.getValue();
  return verifyLayoutFor(op, layout, global, /*isParameter=*/false, what);
}

LogicalResult FSDPDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto func = asFunction(op);
  std::string what = "result #" + std::to_string(resultIndex);
  StringRef name = attr.getName().getValue();
  if (!func)
    return op->emitOpError()
           << "'" << name << "' is only meaningful on function results";
  if (failed(verifyNoBarePrefix(op, func.getResultAttrDict(resultIndex), what)))
    return failure();
  Type type = func.getResultTypes()[resultIndex];
  if (name == kLossAttrName)
    return verifyLossResult(op, attr, type, what);
  if (name == kGradOfAttrName)
    return verifyGradOfResult(op, func, attr, type, what);
  if (name == kNameAttrName)
    return verifyName(op, attr.getValue(), what, /*isArgument=*/false,
                      resultIndex);
  if (name == kLayoutAttrName)
    return verifyResultLayout(op, func, resultIndex, attr, type, what);
  if (name == kGlobalTypeAttrName) {
    if (!isa<TypeAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' on " << what << " must be a type";
    return success();
  }
  if (name == kUpdateOfAttrName)
    return verifyArgIndex(op, func, attr, type, what, /*needsLayout=*/false);
  return op->emitOpError() << "unknown fsdp result attribute '" << name
                           << "' on " << what;
}

//===- FSDPAttrs.cpp - placements and layouts -----------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsAttributes.cpp.inc"

void FSDPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOpsAttributes.cpp.inc"
      >();
}

static lm::ReduceKind toLayoutReduce(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::sum:
    return lm::ReduceKind::Sum;
  case ReduceKind::avg:
    return lm::ReduceKind::Avg;
  case ReduceKind::max:
    return lm::ReduceKind::Max;
  case ReduceKind::min:
    return lm::ReduceKind::Min;
  }
  return lm::ReduceKind::Sum;
}

std::optional<lm::Placement> mlir::fsdp::toPlacement(Attribute attr) {
  return llvm::TypeSwitch<Attribute, std::optional<lm::Placement>>(attr)
      .Case([](ReplicateAttr) { return lm::Placement::replicate(); })
      .Case([](ShardAttr a) { return lm::Placement::shard(a.getDim()); })
      .Case([](StridedShardAttr a) {
        return lm::Placement::stridedShard(a.getDim(), a.getSplitFactor());
      })
      .Case([](TPShardAttr a) {
        return lm::Placement::tensorParallel(a.getDim());
      })
      .Case([](TPReplicateAttr) { return lm::Placement::tensorParallel(-1); })
      .Case([](PartialAttr a) {
        return lm::Placement::partial(toLayoutReduce(a.getReduce()));
      })
      .Default([](Attribute) { return std::nullopt; });
}

LogicalResult
StridedShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t dim, int64_t splitFactor) {
  if (dim < 0)
    return emitError() << "strided_shard dim must be non-negative, got " << dim;
  if (splitFactor < 1 || splitFactor > lm::kMaxSplitFactor)
    return emitError() << "strided_shard split factor must be between 1 and "
                       << lm::kMaxSplitFactor << ", got " << splitFactor;
  return success();
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 FlatSymbolRefAttr mesh, ArrayAttr placements,
                                 UnevenPolicy policy) {
  if (!mesh)
    return emitError() << "layout needs a mesh symbol";
  for (Attribute p : placements) {
    if (!toPlacement(p))
      return emitError() << "layout placement must be replicate, shard<d>, "
                            "strided_shard<d, sf>, partial<op>, tp_shard<d> "
                            "or tp_replicate, got "
                         << p;
    if (auto shard = dyn_cast<ShardAttr>(p); shard && shard.getDim() < 0)
      return emitError() << "shard dim must be non-negative, got "
                         << shard.getDim();
    if (auto shard = dyn_cast<TPShardAttr>(p); shard && shard.getDim() < 0)
      return emitError() << "tp_shard dim must be non-negative, got "
                         << shard.getDim();
  }
  return success();
}

lm::Layout LayoutAttr::toLayout(ArrayRef<int64_t> meshShape) const {
  lm::Layout layout;
  layout.meshShape.assign(meshShape.begin(), meshShape.end());
  for (Attribute p : getPlacements())
    layout.placements.push_back(*toPlacement(p));
  layout.policy = getPolicy() == UnevenPolicy::balanced
                      ? lm::UnevenPolicy::Balanced
                      : lm::UnevenPolicy::Ceil;
  return layout;
}

/// placement ::= `replicate` | `shard` `<` d `>` | `strided_shard` `<` d `,`
/// sf `>` | `partial` `<` op `>` | a full `#fsdp.` attribute.
static Attribute parsePlacement(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (failed(parser.parseOptionalKeyword(&keyword))) {
    Attribute attr;
    if (parser.parseAttribute(attr))
      return {};
    return attr;
  }
  if (keyword == "replicate")
    return ReplicateAttr::get(ctx);
  if (keyword == "shard")
    return ShardAttr::parse(parser, Type());
  if (keyword == "strided_shard")
    return StridedShardAttr::parse(parser, Type());
  if (keyword == "partial")
    return PartialAttr::parse(parser, Type());
  if (keyword == "tp_shard")
    return TPShardAttr::parse(parser, Type());
  if (keyword == "tp_replicate")
    return TPReplicateAttr::get(ctx);
  parser.emitError(loc) << "unknown placement '" << keyword
                        << "'; expected replicate, shard, strided_shard, "
                           "partial, tp_shard or tp_replicate";
  return {};
}

Attribute LayoutAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<Attribute> placements;
  UnevenPolicy policy = UnevenPolicy::ceil;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() -> ParseResult {
                                       Attribute p = parsePlacement(parser);
                                       if (!p)
                                         return failure();
                                       placements.push_back(p);
                                       return success();
                                     }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    StringRef name;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword("policy") || parser.parseEqual() ||
        parser.parseKeyword(&name))
      return {};
    std::optional<UnevenPolicy> p = symbolizeUnevenPolicy(name);
    if (!p) {
      parser.emitError(loc) << "unknown uneven policy '" << name
                            << "'; expected ceil or balanced";
      return {};
    }
    policy = *p;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<LayoutAttr>(
      parser.getContext(), mesh,
      ArrayAttr::get(parser.getContext(), placements), policy);
}

void LayoutAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(getPlacements(), printer, [&](Attribute p) {
    if (isa<ReplicateAttr>(p)) {
      printer << "replicate";
    } else if (auto s = dyn_cast<ShardAttr>(p)) {
      printer << "shard";
      s.print(printer);
    } else if (auto s = dyn_cast<StridedShardAttr>(p)) {
      printer << "strided_shard";
      s.print(printer);
    } else if (auto s = dyn_cast<PartialAttr>(p)) {
      printer << "partial";
      s.print(printer);
    } else if (auto s = dyn_cast<TPShardAttr>(p)) {
      printer << "tp_shard";
      s.print(printer);
    } else if (isa<TPReplicateAttr>(p)) {
      printer << "tp_replicate";
    } else {
      printer.printAttribute(p);
    }
  });
  printer << "]";
  if (getPolicy() != UnevenPolicy::ceil)
    printer << ", policy = " << stringifyUnevenPolicy(getPolicy());
  printer << ">";
}

LogicalResult
MemoryPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t arena, int64_t outside, int64_t buffers,
                       DenseI64ArrayAttr largest) {
  if (arena < 0 || outside < 0 || buffers < 0)
    return emitError() << "memory plan sizes and counts must be non-negative";
  if (!largest)
    return emitError() << "memory plan needs its largest buffers";
  for (int64_t bytes : largest.asArrayRef())
    if (bytes < 0 || bytes > arena)
      return emitError() << "memory plan buffer of " << bytes
                         << " bytes does not fit its arena of " << arena
                         << " bytes";
  return success();
}

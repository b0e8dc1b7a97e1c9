//===- FSDPOps.cpp - fsdp operations --------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace lm = ::fsdp::layout;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

/// mesh-axes ::= `[` (name `=` size) (`,` name `=` size)* `]`
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &sizes) {
  SmallVector<Attribute> nameAttrs;
  SmallVector<int64_t> sizeValues;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            int64_t size;
            if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
                parser.parseInteger(size))
              return failure();
            nameAttrs.push_back(parser.getBuilder().getStringAttr(name));
            sizeValues.push_back(size);
            return success();
          }))
    return failure();
  names = parser.getBuilder().getArrayAttr(nameAttrs);
  sizes = parser.getBuilder().getDenseI64ArrayAttr(sizeValues);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, MeshOp, ArrayAttr names,
                          DenseI64ArrayAttr sizes) {
  printer << "[";
  for (auto [i, name] : llvm::enumerate(names)) {
    if (i)
      printer << ", ";
    printer.printKeywordOrString(cast<StringAttr>(name).getValue());
    printer << " = " << sizes[i];
  }
  printer << "]";
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError() << "has " << getAxisNames().size()
                         << " axis names but " << getAxisSizes().size()
                         << " axis sizes";
  if (getAxisSizes().empty())
    return emitOpError() << "needs at least one axis";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes())) {
    StringRef n = cast<StringAttr>(name).getValue();
    if (n.empty())
      return emitOpError() << "axis names must not be empty";
    if (!seen.insert(n).second)
      return emitOpError() << "duplicate axis name '" << n << "'";
    if (size <= 0)
      return emitOpError() << "axis '" << n
                           << "' must have a positive size, got " << size;
  }
  // The documented limits (axis count, ranks), as layout math checks them.
  if (auto err = lm::validateMesh(getAxisSizes().vec()))
    return emitOpError() << *err;
  return success();
}

int64_t MeshOp::getWorldSize() {
  int64_t w = 1;
  for (int64_t s : getAxisSizes())
    w *= s;
  return w;
}

int64_t MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, n] : llvm::enumerate(getAxisNames()))
    if (cast<StringAttr>(n).getValue() == name)
      return i;
  return -1;
}

FailureOr<int64_t> MeshOp::getAxisMask(ArrayAttr axisNames) {
  int64_t mask = 0;
  for (Attribute a : axisNames) {
    auto s = dyn_cast<StringAttr>(a);
    int64_t index = s ? getAxisIndex(s.getValue()) : -1;
    if (index < 0 || (mask & (int64_t(1) << index)))
      return failure();
    mask |= int64_t(1) << index;
  }
  return mask;
}

FailureOr<int64_t> MeshOp::getGroupSize(ArrayAttr axisNames) {
  FailureOr<int64_t> mask = getAxisMask(axisNames);
  if (failed(mask))
    return failure();
  int64_t k = 1;
  for (auto [i, s] : llvm::enumerate(getAxisSizes()))
    if (*mask & (int64_t(1) << i))
      k *= s;
  return k;
}

//===----------------------------------------------------------------------===//
// Semantic collectives
//===----------------------------------------------------------------------===//

/// Resolves the layout's mesh and checks the layout against `globalType`;
/// returns the slot (padded shard) type.
static FailureOr<RankedTensorType>
verifyParamLayout(Operation *op, LayoutAttr layout, RankedTensorType globalType,
                  bool isParameter, SymbolTableCollection &tables) {
  MeshOp mesh = lookupMesh(op, layout.getMesh(), &tables);
  if (!mesh)
    return op->emitOpError() << "refers to unknown mesh " << layout.getMesh();
  if (!globalType.hasStaticShape())
    return op->emitOpError()
           << "needs a statically shaped full tensor, got " << globalType;
  if (!globalType.getElementType().isIntOrFloat())
    return op->emitOpError() << "needs integer or float elements, got "
                             << globalType.getElementType();
  lm::Layout model = layout.toDataParallelLayout(mesh.getAxisSizes());
  if (auto err = lm::validate(model, globalType.getShape().vec(), isParameter))
    return op->emitOpError() << "has an invalid layout: " << *err;
  return RankedTensorType::get(
      lm::slotShape(model, globalType.getShape().vec()),
      globalType.getElementType());
}

LogicalResult ParamGatherOp::verify() {
  if (getPhase() != Phase::forward && getPhase() != Phase::backward)
    return emitOpError() << "phase must be forward or backward, got "
                         << stringifyPhase(getPhase());
  return success();
}

LogicalResult ParamGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto full = cast<RankedTensorType>(getResult().getType());
  FailureOr<RankedTensorType> slot =
      verifyParamLayout(*this, getLayout(), full, true, tables);
  if (failed(slot))
    return failure();
  if (getShard().getType() != *slot)
    return emitOpError() << "shard must have the padded slot type " << *slot
                         << " for a full tensor of type " << full << ", got "
                         << getShard().getType();
  return success();
}

LogicalResult GradReduceOp::verify() {
  if (getAccumulator() && getAccumulator().getType() != getResult().getType())
    return emitOpError() << "accumulator must have the result type "
                         << getResult().getType() << ", got "
                         << getAccumulator().getType();
  return success();
}

LogicalResult GradReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto full = cast<RankedTensorType>(getGrad().getType());
  FailureOr<RankedTensorType> slot =
      verifyParamLayout(*this, getLayout(), full, true, tables);
  if (failed(slot))
    return failure();
  if (getResult().getType() != *slot)
    return emitOpError() << "result must have the padded slot type " << *slot
                         << ", got " << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Flat collectives
//===----------------------------------------------------------------------===//

/// Checks the mesh and axes of a flat collective; returns the group size.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                      ArrayAttr axes,
                                      SymbolTableCollection &tables) {
  MeshOp mesh = lookupMesh(op, meshRef, &tables);
  if (!mesh)
    return op->emitOpError() << "refers to unknown mesh " << meshRef;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (mesh.getAxisIndex(name) < 0)
      return op->emitOpError()
             << "mesh " << meshRef << " has no axis '" << name << "'";
  }
  FailureOr<int64_t> k = mesh.getGroupSize(axes);
  if (failed(k))
    return op->emitOpError() << "lists a mesh axis twice in " << axes;
  return k;
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (getAxes().empty())
    return emitOpError() << "needs at least one mesh axis";
  return failure(failed(verifyGroup(*this, getMeshAttr(), getAxes(), tables)));
}

/// all_gather: out.dim0 = k * in.dim0; reduce_scatter: in.dim0 = k * out.dim0.
static LogicalResult verifyGatherShapes(Operation *op, ShapedType small,
                                        ShapedType large, int64_t k,
                                        StringRef smallName,
                                        StringRef largeName) {
  if (small.getElementType() != large.getElementType())
    return op->emitOpError()
           << "element types differ: " << small.getElementType() << " vs "
           << large.getElementType();
  if (small.getRank() != large.getRank() || small.getRank() == 0)
    return op->emitOpError() << smallName << " and " << largeName
                             << " must have the same non-zero rank";
  for (int64_t d = 1; d < small.getRank(); ++d)
    if (small.getDimSize(d) != large.getDimSize(d))
      return op->emitOpError()
             << smallName << " and " << largeName << " differ in dim " << d;
  if (small.isDynamicDim(0) || large.isDynamicDim(0))
    return success();
  int64_t expected = 0;
  if (llvm::MulOverflow(k, small.getDimSize(0), expected))
    return op->emitOpError()
           << "over a group of " << k << " ranks, " << largeName << " dim 0 ("
           << k << " x " << small.getDimSize(0) << ") overflows 64 bits";
  if (large.getDimSize(0) != expected)
    return op->emitOpError()
           << "over a group of " << k << " ranks, " << largeName
           << " dim 0 must be " << k << " x " << small.getDimSize(0) << " = "
           << expected << ", got " << large.getDimSize(0);
  return success();
}

FailureOr<int64_t> mlir::fsdp::groupSizeOf(Operation *op,
                                           FlatSymbolRefAttr meshRef,
                                           ArrayAttr axes,
                                           SymbolTableCollection &tables) {
  MeshOp mesh = lookupMesh(op, meshRef, &tables);
  if (!mesh)
    return failure();
  return mesh.getGroupSize(axes);
}

/// An all-gather's group and shapes: `large` concatenates the group's
/// `small` along dim 0. A reduce-scatter is the same with the roles swapped.
/// `members`, when present, splits the per-rank 1-D buffer `small` into
/// consecutive members: non-negative counts that add up to its length.
static LogicalResult verifyMembers(Operation *op, DenseI64ArrayAttr members,
                                   ShapedType small, StringRef smallName) {
  if (!members)
    return success();
  if (small.getRank() != 1 || !small.hasStaticShape())
    return op->emitOpError() << "with members needs a static 1-D " << smallName
                             << ", got " << small;
  if (members.empty())
    return op->emitOpError() << "members must list at least one count";
  int64_t sum = 0;
  for (auto [i, c] : llvm::enumerate(members.asArrayRef())) {
    if (c < 0)
      return op->emitOpError() << "member " << i << " has negative count " << c;
    if (llvm::AddOverflow(sum, c, sum))
      return op->emitOpError() << "members' counts overflow 64 bits";
  }
  if (sum != small.getDimSize(0))
    return op->emitOpError()
           << "members' counts add up to " << sum << " but the " << smallName
           << " has " << small.getDimSize(0) << " elements per rank";
  return success();
}

static LogicalResult verifyGatherUses(Operation *op, FlatSymbolRefAttr mesh,
                                      ArrayAttr axes, Value small, Value large,
                                      StringRef smallName, StringRef largeName,
                                      DenseI64ArrayAttr members,
                                      SymbolTableCollection &tables) {
  FailureOr<int64_t> k = verifyGroup(op, mesh, axes, tables);
  if (failed(k))
    return failure();
  auto smallType = cast<ShapedType>(small.getType());
  if (failed(verifyGatherShapes(op, smallType,
                                cast<ShapedType>(large.getType()), *k,
                                smallName, largeName)))
    return failure();
  return verifyMembers(op, members, smallType, smallName);
}

/// An all-reduce's group and matching shapes.
static LogicalResult verifyReduceUses(Operation *op, FlatSymbolRefAttr mesh,
                                      ArrayAttr axes, Value in, Value out,
                                      SymbolTableCollection &tables) {
  if (failed(verifyGroup(op, mesh, axes, tables)))
    return failure();
  auto a = cast<ShapedType>(in.getType()), b = cast<ShapedType>(out.getType());
  if (a.getShape() != b.getShape() || a.getElementType() != b.getElementType())
    return op->emitOpError() << "input and result must have the same shape "
                                "and element type";
  return success();
}

#define FSDP_GATHER_USES(OP, IN, OUT, INNAME, OUTNAME)                         \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &tables) {          \
    return verifyGatherUses(*this, getMeshAttr(), getAxes(), IN, OUT, INNAME,  \
                            OUTNAME, getMemberCounts(), tables);               \
  }
#define FSDP_REDUCE_USES(OP, IN, OUT)                                          \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &tables) {          \
    return verifyReduceUses(*this, getMeshAttr(), getAxes(), IN, OUT, tables); \
  }

FSDP_GATHER_USES(AllGatherOp, getInput(), getResult(), "input", "result")
FSDP_GATHER_USES(ReduceScatterOp, getResult(), getInput(), "result", "input")
FSDP_REDUCE_USES(AllReduceOp, getInput(), getResult())
FSDP_GATHER_USES(AllGatherStartOp, getInput(), getResult(), "input", "result")
FSDP_GATHER_USES(ReduceScatterStartOp, getResult(), getInput(), "result",
                 "input")
FSDP_REDUCE_USES(AllReduceStartOp, getInput(), getResult())

Operation *mlir::fsdp::createStartedCollective(OpBuilder &b,
                                               CollectiveOpInterface op) {
  Location loc = op.getLoc();
  Value in = op.getCollectiveInput();
  Type resultType = op.getCollectiveOutput().getType();
  FlatSymbolRefAttr mesh = op.getMeshAttr();
  ArrayAttr axes = op.getAxes();
  Type request = RequestType::get(op->getContext());
  ReduceKindAttr reduce;
  if (std::optional<ReduceKind> r = op.getReduction())
    reduce = ReduceKindAttr::get(b.getContext(), *r);
  if (isa<AllGatherOp>(op))
    return AllGatherStartOp::create(b, loc, request, resultType, in, mesh, axes,
                                    op.getMemberCounts());
  if (isa<ReduceScatterOp>(op))
    return ReduceScatterStartOp::create(b, loc, request, resultType, in, mesh,
                                        axes, reduce, op.getMemberCounts());
  if (isa<AllReduceOp>(op))
    return AllReduceStartOp::create(b, loc, request, resultType, in, mesh, axes,
                                    reduce);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Buffer collectives
//===----------------------------------------------------------------------===//

template <typename OpTy> static LogicalResult verifyBufferOp(OpTy op) {
  for (Value v : {op.getInput(), op.getOutput()})
    if (!cast<MemRefType>(v.getType()).isLastDimUnitStride() &&
        cast<MemRefType>(v.getType()).getRank() > 0)
      return op.emitOpError() << "buffers must be contiguous";
  return success();
}

LogicalResult BufferAllGatherOp::verify() { return verifyBufferOp(*this); }
LogicalResult BufferReduceScatterOp::verify() { return verifyBufferOp(*this); }
LogicalResult BufferAllReduceOp::verify() { return verifyBufferOp(*this); }

FSDP_GATHER_USES(BufferAllGatherOp, getInput(), getOutput(), "input", "output")
FSDP_GATHER_USES(BufferReduceScatterOp, getOutput(), getInput(), "output",
                 "input")
FSDP_REDUCE_USES(BufferAllReduceOp, getInput(), getOutput())

LogicalResult BufferAllGatherStartOp::verify() { return verifyBufferOp(*this); }
LogicalResult BufferReduceScatterStartOp::verify() {
  return verifyBufferOp(*this);
}
LogicalResult BufferAllReduceStartOp::verify() { return verifyBufferOp(*this); }
FSDP_GATHER_USES(BufferAllGatherStartOp, getInput(), getOutput(), "input",
                 "output")
FSDP_GATHER_USES(BufferReduceScatterStartOp, getOutput(), getInput(), "output",
                 "input")
FSDP_REDUCE_USES(BufferAllReduceStartOp, getInput(), getOutput())

//===----------------------------------------------------------------------===//
// Quantized all-gather
//===----------------------------------------------------------------------===//

/// The [rows, cols] view of `m` elements in `format`: its packet size (bytes
/// of one rank's fsdp.quantize result).
static FailureOr<int64_t> checkQuantView(Operation *op, int64_t m,
                                         QuantFormat format,
                                         ArrayRef<int64_t> shape,
                                         StringRef elements = "elements") {
  if (shape.size() != 2)
    return op->emitOpError()
           << "shape must be [rows, cols], got " << shape.size() << " entries";
  int64_t rows = shape[0], cols = shape[1], n = 0;
  if (rows <= 0 || cols <= 0)
    return op->emitOpError() << "shape entries must be positive, got [" << rows
                             << ", " << cols << "]";
  if (llvm::MulOverflow(rows, cols, n) || n != m)
    return op->emitOpError() << "shape [" << rows << ", " << cols
                             << "] does not view the " << m << " " << elements;
  if (auto err = quantShapeError(format, rows, cols))
    return op->emitOpError()
           << "cannot block shape [" << rows << ", " << cols << "]: " << *err;
  // Packets are at most a little over the data (1 byte per element at most,
  // plus scales): keep every size far from overflow.
  if (n > (int64_t(1) << 60))
    return op->emitOpError() << "shape [" << rows << ", " << cols
                             << "] is too large (at most 2^60 elements)";
  return quantWireBytes(format, rows, cols);
}

/// Element type, 1-D static types, the [rows, cols] view and the format's
/// blocking rules; `in` and `out` are tensor or memref types.
static LogicalResult verifyQuantizedGather(Operation *op, ShapedType in,
                                           ShapedType out, QuantFormat format,
                                           ArrayRef<int64_t> shape,
                                           StringRef outName) {
  Type elem = in.getElementType();
  if (!elem.isF32() && !elem.isBF16())
    return op->emitOpError() << "quantizes f32 or bf16 elements, got " << elem;
  if (out.getElementType() != elem)
    return op->emitOpError()
           << outName << " element type " << out.getElementType()
           << " must equal the input's " << elem;
  if (in.getRank() != 1 || out.getRank() != 1 || !in.hasStaticShape() ||
      !out.hasStaticShape())
    return op->emitOpError()
           << "input and " << outName << " must be statically shaped and 1-D";
  return checkQuantView(op, in.getDimSize(0), format, shape, "input elements");
}

LogicalResult QuantizedAllGatherOp::verify() {
  return verifyQuantizedGather(*this, getInput().getType(),
                               getResult().getType(), getFormat(), getShape(),
                               "result");
}

FSDP_GATHER_USES(QuantizedAllGatherOp, getInput(), getResult(), "input",
                 "result")

LogicalResult BufferQuantizedAllGatherOp::verify() {
  if (failed(verifyBufferOp(*this)))
    return failure();
  return verifyQuantizedGather(*this, getInput().getType(),
                               getOutput().getType(), getFormat(), getShape(),
                               "output");
}

FSDP_GATHER_USES(BufferQuantizedAllGatherOp, getInput(), getOutput(), "input",
                 "output")

//===----------------------------------------------------------------------===//
// Local quantization steps
//===----------------------------------------------------------------------===//

/// A 1-D static f32 or bf16 type (`what` names it in the message).
static LogicalResult checkQuantValues(Operation *op, ShapedType t,
                                      StringRef what) {
  if (!t.getElementType().isF32() && !t.getElementType().isBF16())
    return op->emitOpError() << what << " must hold f32 or bf16 elements, got "
                             << t.getElementType();
  if (t.getRank() != 1 || !t.hasStaticShape())
    return op->emitOpError() << what << " must be statically shaped and 1-D";
  return success();
}

static LogicalResult checkAmaxType(Operation *op, ShapedType t,
                                   StringRef what) {
  if (!t.getElementType().isF32() || t.getRank() != 1 || !t.hasStaticShape() ||
      t.getDimSize(0) != 1)
    return op->emitOpError() << what << " must be 1xf32, got " << t;
  return success();
}

static LogicalResult checkPacketType(Operation *op, ShapedType t,
                                     StringRef what) {
  if (!t.getElementType().isInteger(8) || t.getRank() != 1 ||
      !t.hasStaticShape())
    return op->emitOpError()
           << what << " must be statically shaped 1-D i8 bytes, got " << t;
  return success();
}

static LogicalResult verifyAmax(Operation *op, ShapedType in, ShapedType out) {
  if (failed(checkQuantValues(op, in, "input")))
    return failure();
  return checkAmaxType(op, out, "result");
}

static LogicalResult verifyQuantize(Operation *op, ShapedType in,
                                    ShapedType amax, ShapedType out,
                                    QuantFormat format,
                                    ArrayRef<int64_t> shape) {
  if (failed(checkQuantValues(op, in, "input")))
    return failure();
  FailureOr<int64_t> wire = checkQuantView(op, in.getDimSize(0), format, shape);
  if (failed(wire))
    return failure();
  bool needs = needsGroupAmax(format);
  if (needs && !amax)
    return op->emitOpError() << stringifyQuantFormat(format)
                             << " scales with the group's amax: it needs an "
                                "amax operand";
  if (!needs && amax)
    return op->emitOpError() << stringifyQuantFormat(format)
                             << " has per-block scales only: it takes no amax";
  if (amax && failed(checkAmaxType(op, amax, "amax")))
    return failure();
  if (failed(checkPacketType(op, out, "result")))
    return failure();
  if (out.getDimSize(0) != *wire)
    return op->emitOpError()
           << "result must hold the " << *wire << "-byte packet of shape ["
           << shape[0] << ", " << shape[1] << "] in "
           << stringifyQuantFormat(format) << ", got " << out.getDimSize(0);
  return success();
}

static LogicalResult verifyDequantize(Operation *op, ShapedType in,
                                      ShapedType out, QuantFormat format,
                                      ArrayRef<int64_t> shape) {
  if (failed(checkPacketType(op, in, "input")) ||
      failed(checkQuantValues(op, out, "result")))
    return failure();
  if (shape.size() != 2)
    return op->emitOpError()
           << "shape must be [rows, cols], got " << shape.size() << " entries";
  int64_t m = 0;
  if (llvm::MulOverflow(shape[0], shape[1], m))
    m = -1;
  FailureOr<int64_t> wire = checkQuantView(op, m, format, shape);
  if (failed(wire))
    return failure();
  int64_t bytes = in.getDimSize(0), k = bytes / *wire, total = 0;
  if (k < 1 || bytes % *wire)
    return op->emitOpError() << "input must be a whole number of " << *wire
                             << "-byte packets, got " << bytes << " bytes";
  if (llvm::MulOverflow(k, m, total) || out.getDimSize(0) != total)
    return op->emitOpError()
           << "result must hold the " << k << " x " << m
           << " dequantized elements, got " << out.getDimSize(0);
  return success();
}

LogicalResult QuantAmaxOp::verify() {
  return verifyAmax(*this, getInput().getType(), getResult().getType());
}
LogicalResult QuantizeOp::verify() {
  return verifyQuantize(*this, getInput().getType(),
                        getAmax() ? cast<ShapedType>(getAmax().getType())
                                  : ShapedType(),
                        getResult().getType(), getFormat(), getShape());
}
LogicalResult DequantizeOp::verify() {
  return verifyDequantize(*this, getInput().getType(), getResult().getType(),
                          getFormat(), getShape());
}

/// Contiguous buffers, as the runtime reads and writes them.
static LogicalResult checkContiguous(Operation *op, ValueRange buffers) {
  for (Value v : buffers)
    if (!cast<MemRefType>(v.getType()).isLastDimUnitStride() &&
        cast<MemRefType>(v.getType()).getRank() > 0)
      return op->emitOpError() << "buffers must be contiguous";
  return success();
}

LogicalResult BufferQuantAmaxOp::verify() {
  if (failed(checkContiguous(*this, {getInput(), getOutput()})))
    return failure();
  return verifyAmax(*this, getInput().getType(), getOutput().getType());
}
LogicalResult BufferQuantizeOp::verify() {
  if (failed(checkContiguous(*this, getOperands())))
    return failure();
  return verifyQuantize(*this, getInput().getType(),
                        getAmax() ? cast<ShapedType>(getAmax().getType())
                                  : ShapedType(),
                        getOutput().getType(), getFormat(), getShape());
}
LogicalResult BufferDequantizeOp::verify() {
  if (failed(checkContiguous(*this, {getInput(), getOutput()})))
    return failure();
  return verifyDequantize(*this, getInput().getType(), getOutput().getType(),
                          getFormat(), getShape());
}

#undef FSDP_GATHER_USES
#undef FSDP_REDUCE_USES

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Scatter-add of rows
//===----------------------------------------------------------------------===//

/// 2-D source and output of one float type, 1-D integer indices with one
/// per token, and the same row width on the other dim.
static LogicalResult verifyScatterAddRows(Operation *op, ShapedType source,
                                          ShapedType indices, ShapedType output,
                                          bool columns) {
  if (source.getRank() != 2 || output.getRank() != 2)
    return op->emitOpError() << "source and output must be 2-D, got " << source
                             << " and " << output;
  if (indices.getRank() != 1 ||
      !isa<IntegerType, IndexType>(indices.getElementType()))
    return op->emitOpError()
           << "indices must be a 1-D integer tensor or buffer, got " << indices;
  if (!isa<FloatType>(source.getElementType()) ||
      source.getElementType() != output.getElementType())
    return op->emitOpError()
           << "source and output must have one float element type, got "
           << source.getElementType() << " and " << output.getElementType();
  unsigned tokenDim = columns ? 1 : 0;
  unsigned widthDim = 1 - tokenDim;
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (mismatch(source.getDimSize(tokenDim), indices.getDimSize(0)))
    return op->emitOpError()
           << "source has " << source.getDimSize(tokenDim)
           << " tokens along dim " << tokenDim << " but there are "
           << indices.getDimSize(0) << " indices";
  if (mismatch(source.getDimSize(widthDim), output.getDimSize(widthDim)))
    return op->emitOpError()
           << "source and output rows differ in width along dim " << widthDim
           << ": " << source.getDimSize(widthDim) << " and "
           << output.getDimSize(widthDim);
  return success();
}

LogicalResult ScatterAddRowsOp::verify() {
  return verifyScatterAddRows(*this, getSource().getType(),
                              getIndices().getType(), getInit().getType(),
                              getColumns());
}

LogicalResult BufferScatterAddRowsOp::verify() {
  return verifyScatterAddRows(*this, getSource().getType(),
                              getIndices().getType(), getOutput().getType(),
                              getColumns());
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"

//===- FSDPBase.td - fsdp dialect definition ---------------*- tablegen -*-===//

#ifndef FSDP_BASE_TD
#define FSDP_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::mlir::fsdp";
  let summary = "Fully sharded data parallelism: meshes, layouts and collectives";
  let description = [{
    The `fsdp` dialect describes how the parameters of a training step are
    sharded over a device mesh (`fsdp.mesh`, `#fsdp.layout`) and the
    collectives that move them: semantic parameter gathers and gradient
    reductions, which know the layout, and flat NCCL-style collectives over
    contiguous buffers, which do not.

    Layouts travel as discardable attributes (`fsdp.layout`) on function
    arguments rather than as tensor types, so every upstream op, folder and
    pass sees ordinary builtin tensors.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
    // The names of the discardable attributes are in FSDPConstants.h.
  }];
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

class FSDP_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<FSDP_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def FSDP_RequestType : FSDP_Type<"Request", "request"> {
  let summary = "an asynchronous collective in flight";
  let description = [{
    Returned by the `*_start` collectives and consumed by `fsdp.wait`; the
    runtime's request handle once lowered.
  }];
}

class FSDP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<FSDP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def FSDP_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ReduceKindAttr : EnumAttr<FSDP_Dialect, FSDP_ReduceKind, "reduce">;

def FSDP_UnevenPolicy : I32EnumAttr<"UnevenPolicy", "uneven shard policy", [
    I32EnumAttrCase<"ceil", 0>, I32EnumAttrCase<"balanced", 1>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_UnevenPolicyAttr : EnumAttr<FSDP_Dialect, FSDP_UnevenPolicy, "policy">;

// Formats of the quantized all-gather; the codes equal fsdprt_quant_format.
def FSDP_QuantFormat : I32EnumAttr<"QuantFormat", "quantized all-gather format", [
    I32EnumAttrCase<"fp8_e4m3_tensor", 0>, I32EnumAttrCase<"fp8_e5m2_tensor", 1>,
    I32EnumAttrCase<"mxfp8_rowwise", 2>, I32EnumAttrCase<"mxfp8_colwise", 3>,
    I32EnumAttrCase<"nvfp4", 4>, I32EnumAttrCase<"fp8_block_1x128", 5>,
    I32EnumAttrCase<"fp8_block_128x128", 6>, I32EnumAttrCase<"nvfp4_2d", 7>,
    I32EnumAttrCase<"fp8_block_1x128_t", 8>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_QuantFormatAttr
    : EnumAttr<FSDP_Dialect, FSDP_QuantFormat, "quant_format">;

// The part of a training step a collective serves.
def FSDP_Phase : I32EnumAttr<"Phase", "training phase of a collective", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"optimizer", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_PhaseAttr : EnumAttr<FSDP_Dialect, FSDP_Phase, "phase">;

// The optimizer input an argument is (`fsdp.optim`, a port's `role`).
def FSDP_OptimRole : I32EnumAttr<"OptimRole", "optimizer input of a step", [
    I32EnumAttrCase<"lr", 0>, I32EnumAttrCase<"step", 1>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

// What a collective does, whatever its form (tensor, started, buffer).
def FSDP_CollectiveKind : I32EnumAttr<"CollectiveKind", "kind of collective", [
    I32EnumAttrCase<"all_gather", 0>, I32EnumAttrCase<"reduce_scatter", 1>,
    I32EnumAttrCase<"all_reduce", 2>, I32EnumAttrCase<"quantized_all_gather", 3>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

#endif // FSDP_BASE_TD

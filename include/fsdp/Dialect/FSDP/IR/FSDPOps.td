//===- FSDPOps.td - fsdp operations ------------------------*- tablegen -*-===//

#ifndef FSDP_OPS_TD
#define FSDP_OPS_TD

include "fsdp/Dialect/FSDP/IR/FSDPAttrs.td"
include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Collectives synchronize with other ranks: they must not be merged, moved
// across each other or dropped by generic rewrites.
def FSDP_CollectiveResource
    : Resource<"::mlir::fsdp::CollectiveResource">;
def FSDP_CollectiveEffect : MemoryEffects<[MemRead<FSDP_CollectiveResource>,
                                           MemWrite<FSDP_CollectiveResource>]>;

// The CollectiveOpInterface methods every collective op defines: its kind,
// its reduction (if any), what it writes and whether it only starts.
class FSDP_CollectiveDecl<string kind, string output, bit async> {
  bit hasReduce = !or(!eq(kind, "reduce_scatter"), !eq(kind, "all_reduce"));
  string decl = !strconcat(
    "::mlir::fsdp::CollectiveKind getCollectiveKind() {\n"
    "  return ::mlir::fsdp::CollectiveKind::", kind, ";\n}\n",
    "std::optional<::mlir::fsdp::ReduceKind> getReduction() {\n  return ",
    !if(hasReduce, "getReduce()", "std::nullopt"), ";\n}\n",
    "::mlir::Value getCollectiveOutput() { return ", output, "; }\n",
    "bool isAsync() { return ", !if(async, "true", "false"), "; }\n");
}

// The member-major bucket layout (`members [c_0, ...]`) of all-gathers and
// reduce-scatters in their started and buffer forms; all-reduces (and the
// quantized gather) have one layout only.
class FSDP_MembersArg<string kind> {
  bit has = !or(!eq(kind, "all_gather"), !eq(kind, "reduce_scatter"));
  dag arg = !if(has, (ins OptionalAttr<DenseI64ArrayAttr>:$members), (ins));
  string fmt = !if(has, " (`members` $members^)?", "");
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def FSDP_MeshOp : FSDP_Op<"mesh", [Symbol]> {
  let summary = "a device mesh with named axes and static sizes";
  let description = [{
    ```mlir
    fsdp.mesh @mesh [replicate = 2, shard = 4]
    ```
    Ranks are numbered row-major over the axes (last axis fastest). The
    group of a rank over a set of axes is the set of ranks that differ only
    in those axes' coordinates, ordered row-major over them.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $axis_sizes) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumAxes() { return getAxisSizes().size(); }
    int64_t getWorldSize();
    /// Index of the axis called `name`, or -1.
    int64_t getAxisIndex(::llvm::StringRef name);
    /// Group size over the named axes; failure if a name is unknown.
    ::mlir::FailureOr<int64_t> getGroupSize(::mlir::ArrayAttr axisNames);
    /// Converts an axis-name list into a bit mask (bit i = axis i).
    ::mlir::FailureOr<int64_t> getAxisMask(::mlir::ArrayAttr axisNames);
  }];
}

//===----------------------------------------------------------------------===//
// Semantic collectives: they know the layout of the parameter.
//===----------------------------------------------------------------------===//

def FSDP_ParamGatherOp : FSDP_Op<"param_gather", [
    FSDP_CollectiveEffect, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "all-gather a parameter shard into the full tensor";
  let description = [{
    `shard` is this rank's padded slot of the parameter (its true rows
    followed by zero padding); the result is the full tensor of the layout.
    `phase` records whether the gather feeds forward or backward uses (a
    backward re-gather exists when the forward copy was freed); with `unit`
    it becomes the `#fsdp.origin` of the flat collectives it expands to.
    `fsdp-expand-collectives` rewrites it into pads, a flat `fsdp.all_gather`
    and the unpack (view, per-slot narrow, chunk-cat or strided swap).
    ```mlir
    %w = fsdp.param_gather %w_shard layout <@mesh, [shard<0>]> phase forward
        : tensor<3x16xf32> -> tensor<10x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$shard, FSDP_LayoutAttr:$layout,
                       FSDP_PhaseAttr:$phase, OptionalAttr<StrAttr>:$unit);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $shard `layout` $layout `phase` $phase attr-dict `:` type($shard) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_GradReduceOp : FSDP_Op<"grad_reduce", [
    FSDP_CollectiveEffect, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reduce a rank's partial gradient into its shard";
  let description = [{
    `grad` is this rank's partial gradient at full size (Partial over every
    data-parallel axis). The result is the reduced gradient's padded slot:
    reduce-scatter over the shard axes, then all-reduce over the replicate
    axes (HSDP); a layout without shard axes is all-reduced (DDP). `avg`
    divides by the product of the data-parallel group sizes; `scale`, when
    present, multiplies the result. `reduce_dtype` runs the reduction in
    another element type (cast before, cast back after).

    Gradient accumulation: with `accumulate %acc` the reduce-scattered
    gradient is added to `%acc` (this rank's running partial sum, still
    Partial over the replicate axes) before the all-reduce; `partial` skips
    the replicate all-reduce, as every micro-step but the last does.
    ```mlir
    %g = fsdp.grad_reduce %dw layout <@mesh, [replicate, shard<0>]> avg
        : tensor<10x16xf32> -> tensor<3x16xf32>
    %a = fsdp.grad_reduce %dw accumulate %acc layout <@mesh, [replicate, shard<0>]> avg {partial}
        : tensor<10x16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad,
                       Optional<AnyRankedTensor>:$accumulator,
                       FSDP_LayoutAttr:$layout,
                       FSDP_ReduceKindAttr:$reduce, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<TypeAttr>:$reduce_dtype,
                       OptionalAttr<StrAttr>:$unit, UnitAttr:$partial);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $grad (`accumulate` $accumulator^)? `layout` $layout `` $reduce attr-dict
    `:` type($grad) (`,` type($accumulator)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Flat collectives (NCCL semantics, docs/SEMANTICS.md §4).
//===----------------------------------------------------------------------===//

class FSDP_FlatCollectiveOp<string mnemonic, FSDP_CollectiveDecl collective,
                            list<Trait> traits = []>
    : FSDP_Op<mnemonic, !listconcat(traits, [FSDP_CollectiveEffect,
          FSDP_CollectiveOpInterface,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let extraClassDeclaration = collective.decl;
}

def FSDP_AllGatherOp : FSDP_FlatCollectiveOp<"all_gather",
    FSDP_CollectiveDecl<"all_gather", "getResult()", 0>> {
  let summary = "concatenate every group rank's buffer along dim 0";
  let description = [{
    Every rank of the group over `axes` of `mesh` sends its tensor; every
    rank receives the concatenation along dim 0 in group order (for a
    contiguous tensor this is NCCL's flat all-gather).
    ```mlir
    %all = fsdp.all_gather %x over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
    ```

    `members [c_0, ..., c_(n-1)]` (a bucket of n members, 1-D tensors,
    `sum c_i` elements per rank) orders the result member after member
    instead of rank after rank: member `i`'s block starts at `k * off_i`
    (`off_i = c_0 + ... + c_{i-1}`) and holds the group's pieces
    `x_j[off_i : off_i + c_i]` in group order, so each member's gathered
    tensor is contiguous. The same bytes move; only their order differs.
    ```mlir
    %all = fsdp.all_gather %x over @mesh ["shard"] members [16, 32]
        : tensor<48xf32> -> tensor<192xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       OptionalAttr<DenseI64ArrayAttr>:$members);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes (`members` $members^)? attr-dict `:` type($input)
    `->` type($result)
  }];
}

def FSDP_ReduceScatterOp : FSDP_FlatCollectiveOp<"reduce_scatter",
    FSDP_CollectiveDecl<"reduce_scatter", "getResult()", 0>> {
  let summary = "reduce over the group, rank j keeps block j of dim 0";
  let description = [{
    With `members [c_0, ..., c_(n-1)]` the input is ordered member after
    member (member `i`'s block starts at `k * off_i`, its slot for group
    rank `j` at `k * off_i + j * c_i`) and rank `r`'s result is
    `concat_i(reduce over the group of slot r of member i)`: each member's
    full input is contiguous, so its producer can write it in place.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, FSDP_ReduceKindAttr:$reduce,
                       OptionalAttr<DenseI64ArrayAttr>:$members);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `` $reduce (`members` $members^)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

def FSDP_AllReduceOp : FSDP_FlatCollectiveOp<"all_reduce",
    FSDP_CollectiveDecl<"all_reduce", "getResult()", 0>> {
  let summary = "element-wise reduction over the group";
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, FSDP_ReduceKindAttr:$reduce);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `` $reduce attr-dict `:` type($input) `->` type($result)
  }];
}

def FSDP_QuantizedAllGatherOp : FSDP_FlatCollectiveOp<"quantized_all_gather",
    FSDP_CollectiveDecl<"quantized_all_gather", "getResult()", 0>> {
  let summary = "all-gather of quantized shards, dequantized on arrival";
  let description = [{
    Same result as `fsdp.all_gather` of a 1-D f32 or bf16 tensor, up to the
    quantization error: every rank views its `M` input elements as the
    row-major matrix `shape = [rows, cols]`, quantizes it in `format`,
    all-gathers the compact bytes and scales, and dequantizes every group
    rank's slot into its place in the result (`k * M` elements). Per-tensor
    formats (`fp8_e4m3_tensor`, `fp8_e5m2_tensor`) and `nvfp4` first
    all-reduce (max) the amax over the group, so all ranks share one scale;
    the op includes that all-reduce. Formats and bytes on the wire:
    docs/QUANTIZATION.md.
    ```mlir
    %all = fsdp.quantized_all_gather %x over @mesh ["shard"] format mxfp8_rowwise
        shape [4, 64] : tensor<256xf32> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, FSDP_QuantFormatAttr:$format,
                       DenseI64ArrayAttr:$shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `format` `` $format `shape` $shape attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_AxisIndexOp : FSDP_Op<"axis_index", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "this rank's index in its group over mesh axes";
  let description = [{
    The calling rank's index in its group over `axes` of `mesh`: for one
    axis, its coordinate on that axis; for several, the row-major index
    over them. It is the block a `fsdp.reduce_scatter` over the same axes
    leaves this rank and the slot an `fsdp.all_gather` fills with this
    rank's input. Every rank knows it locally: no communication.
    ```mlir
    %t = fsdp.axis_index @mesh ["tp"]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Index:$result);
  let assemblyFormat = "$mesh $axes attr-dict";
}

//===----------------------------------------------------------------------===//
// Local quantization steps: a quantized gather as a plain byte all-gather
// (bucketed and scheduled like any other) between quantize and dequantize.
//===----------------------------------------------------------------------===//

def FSDP_QuantAmaxOp : FSDP_Op<"quant_amax", [Pure]> {
  let summary = "largest magnitude of a shard (the quantization amax)";
  let description = [{
    `max |x|` over the 1-D f32 or bf16 input as the quantization reference
    computes it (NaN propagates), as a `tensor<1xf32>`. Before a per-tensor
    format or NVFP4 is quantized it is all-reduced (max) over the group, so
    every rank scales with one value (`fsdp-quantize-gathers`).
    ```mlir
    %a = fsdp.quant_amax %x : tensor<4096xf32> -> tensor<1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_QuantizeOp : FSDP_Op<"quantize", [Pure]> {
  let summary = "one rank's shard as the bytes of a quantized gather";
  let description = [{
    Views the `M` input elements (f32 or bf16) as the row-major matrix
    `shape = [rows, cols]`, quantizes it in `format` and returns the packet
    `fsdp.quantized_all_gather` sends: data, scales and per-tensor value
    (`W = fsdprt_quant_wire_bytes` bytes, `i8`). Formats that scale with the
    group's amax (per-tensor FP8, NVFP4) take it as `amax`
    (`tensor<1xf32>`); the others take none.
    ```mlir
    %q = fsdp.quantize %x amax %g format fp8_e4m3_tensor shape [64, 64]
        : tensor<4096xf32>, tensor<1xf32> -> tensor<4100xi8>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       Optional<AnyRankedTensor>:$amax,
                       FSDP_QuantFormatAttr:$format, DenseI64ArrayAttr:$shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input (`amax` $amax^)? `format` `` $format `shape` $shape attr-dict `:`
    type($input) (`,` type($amax)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_DequantizeOp : FSDP_Op<"dequantize", [Pure]> {
  let summary = "the gathered packets of a quantized gather, dequantized";
  let description = [{
    The input is `k` packets of `fsdp.quantize` (`k * W` bytes, group order),
    the result the `k * M` dequantized elements (f32 or bf16), slot after
    slot: exactly what `fsdp.quantized_all_gather` returns for the same
    shards. `fp8_block_1x128_t` swaps the gathered scale arrays into the
    full tensor's layout first, as TransformerEngine does.
    ```mlir
    %y = fsdp.dequantize %all format fp8_e4m3_tensor shape [64, 64]
        : tensor<16400xi8> -> tensor<16384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FSDP_QuantFormatAttr:$format,
                       DenseI64ArrayAttr:$shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `format` `` $format `shape` $shape attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives (after fsdp-schedule).
//===----------------------------------------------------------------------===//

class FSDP_StartCollectiveOp<string mnemonic, string kind, dag reduceArg,
                             string reduceFmt>
    : FSDP_Op<mnemonic, [FSDP_CollectiveEffect, FSDP_CollectiveOpInterface,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let extraClassDeclaration =
      FSDP_CollectiveDecl<kind, "getResult()", 1>.decl;
  let arguments = !con((ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                            StrArrayAttr:$axes), reduceArg,
                       FSDP_MembersArg<kind>.arg);
  let results = (outs FSDP_RequestType:$request, AnyRankedTensor:$result);
  let assemblyFormat = "$input `over` $mesh $axes " # reduceFmt #
      FSDP_MembersArg<kind>.fmt #
      " attr-dict `:` type($input) `->` type($result)";
  let description = [{
    Starts the collective and returns its request and the tensor it will
    produce. The tensor must only be read through `fsdp.wait`, which
    returns it once the collective has completed; everything between the
    start and the wait overlaps with the communication.
  }];
}

def FSDP_AllGatherStartOp
    : FSDP_StartCollectiveOp<"all_gather_start", "all_gather", (ins), ""> {
  let summary = "start an all-gather";
}
def FSDP_ReduceScatterStartOp
    : FSDP_StartCollectiveOp<"reduce_scatter_start", "reduce_scatter",
                             (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "start a reduce-scatter";
}
def FSDP_AllReduceStartOp
    : FSDP_StartCollectiveOp<"all_reduce_start", "all_reduce",
                             (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "start an all-reduce";
}

def FSDP_WaitOp : FSDP_Op<"wait", [FSDP_CollectiveEffect,
                                   AllTypesMatch<["pending", "result"]>]> {
  let summary = "wait for a started collective and get its result";
  let description = [{
    ```mlir
    %req, %pending = fsdp.all_gather_start %x over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
    ... compute that overlaps ...
    %all = fsdp.wait %req, %pending : tensor<192xf32>
    ```
  }];
  let arguments = (ins FSDP_RequestType:$request, AnyRankedTensor:$pending);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$request `,` $pending attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Buffer forms (after bufferization), lowered to runtime calls.
//===----------------------------------------------------------------------===//

class FSDP_BufferCollectiveOp<string mnemonic, string kind, dag reduceArg,
                              string reduceFmt>
    : FSDP_Op<mnemonic, [FSDP_CollectiveEffect, FSDP_CollectiveOpInterface,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let extraClassDeclaration =
      FSDP_CollectiveDecl<kind, "getOutput()", 0>.decl;
  let arguments = !con((ins AnyStridedMemRef:$input, AnyStridedMemRef:$output,
                            FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes),
                       reduceArg, FSDP_MembersArg<kind>.arg);
  let assemblyFormat = "$input `into` $output `over` $mesh $axes " # reduceFmt #
      FSDP_MembersArg<kind>.fmt # " attr-dict `:` type($input) `,` type($output)";
  let hasVerifier = 1;
}

class FSDP_BufferStartOp<string mnemonic, string kind, dag reduceArg,
                         string reduceFmt>
    : FSDP_Op<mnemonic, [FSDP_CollectiveEffect, FSDP_CollectiveOpInterface,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let extraClassDeclaration =
      FSDP_CollectiveDecl<kind, "getOutput()", 1>.decl;
  let arguments = !con((ins AnyStridedMemRef:$input, AnyStridedMemRef:$output,
                            FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes),
                       reduceArg, FSDP_MembersArg<kind>.arg);
  let results = (outs FSDP_RequestType:$request);
  let assemblyFormat = "$input `into` $output `over` $mesh $axes " # reduceFmt #
      FSDP_MembersArg<kind>.fmt # " attr-dict `:` type($input) `,` type($output)";
  let hasVerifier = 1;
}

def FSDP_BufferAllGatherStartOp
    : FSDP_BufferStartOp<"buffer.all_gather_start", "all_gather", (ins), ""> {
  let summary = "start an all-gather between contiguous buffers";
}
def FSDP_BufferReduceScatterStartOp
    : FSDP_BufferStartOp<"buffer.reduce_scatter_start", "reduce_scatter",
                         (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "start a reduce-scatter between contiguous buffers";
}
def FSDP_BufferAllReduceStartOp
    : FSDP_BufferStartOp<"buffer.all_reduce_start", "all_reduce",
                         (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "start an all-reduce between contiguous buffers";
}
def FSDP_BufferWaitOp : FSDP_Op<"buffer.wait", [FSDP_CollectiveEffect]> {
  let summary = "wait for a started buffer collective";
  let arguments = (ins FSDP_RequestType:$request);
  let assemblyFormat = "$request attr-dict";
}

def FSDP_BufferAllGatherOp
    : FSDP_BufferCollectiveOp<"buffer.all_gather", "all_gather", (ins), ""> {
  let summary = "all-gather between contiguous buffers";
}
def FSDP_BufferReduceScatterOp
    : FSDP_BufferCollectiveOp<"buffer.reduce_scatter", "reduce_scatter",
                              (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "reduce-scatter between contiguous buffers";
}
def FSDP_BufferAllReduceOp
    : FSDP_BufferCollectiveOp<"buffer.all_reduce", "all_reduce",
                              (ins FSDP_ReduceKindAttr:$reduce), "`` $reduce"> {
  let summary = "all-reduce between contiguous buffers (may be in place)";
}

def FSDP_BufferQuantizedAllGatherOp
    : FSDP_BufferCollectiveOp<"buffer.quantized_all_gather", "quantized_all_gather",
          (ins FSDP_QuantFormatAttr:$format, DenseI64ArrayAttr:$shape),
          "`format` `` $format `shape` $shape"> {
  let summary = "quantized all-gather between contiguous buffers";
}

def FSDP_BufferQuantAmaxOp : FSDP_Op<"buffer.quant_amax"> {
  let summary = "fsdp.quant_amax between contiguous buffers";
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$input,
                       Arg<AnyStridedMemRef, "", [MemWrite]>:$output);
  let assemblyFormat = [{
    $input `into` $output attr-dict `:` type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

def FSDP_BufferQuantizeOp : FSDP_Op<"buffer.quantize"> {
  let summary = "fsdp.quantize between contiguous buffers";
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$input,
                       Arg<Optional<AnyStridedMemRef>, "", [MemRead]>:$amax,
                       Arg<AnyStridedMemRef, "", [MemWrite]>:$output,
                       FSDP_QuantFormatAttr:$format, DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $input (`amax` $amax^)? `into` $output `format` `` $format `shape` $shape
    attr-dict `:` type($input) (`,` type($amax)^)? `->` type($output)
  }];
  let hasVerifier = 1;
}

def FSDP_BufferDequantizeOp : FSDP_Op<"buffer.dequantize"> {
  let summary = "fsdp.dequantize between contiguous buffers";
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$input,
                       Arg<AnyStridedMemRef, "", [MemWrite]>:$output,
                       FSDP_QuantFormatAttr:$format, DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $input `into` $output `format` `` $format `shape` $shape attr-dict `:`
    type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Scatter-add of rows (the embedding backward on a device).
//===----------------------------------------------------------------------===//

def FSDP_ScatterAddRowsOp : FSDP_Op<"scatter_add_rows", [Pure,
    AllTypesMatch<["init", "result"]>]> {
  let summary = "rows of a matrix added to the rows their indices name";
  let description = [{
    `init` plus every row of `source` added to the row of `init` that the
    token's index names, token after token:

    ```
    result = init;  result[indices[t], :] += source[t, :]   for t = 0, 1, ..., T - 1
    ```

    With `columns` the second dim is the slot and token dim instead
    (`result[:, indices[t]] += source[:, t]`). An index outside
    `[0, slots)` adds nothing. Each output element is summed in token order
    (what `fsdp-one-hot-scatter`'s loop computes, and aten's CPU embedding
    backward), whatever runs it: the one-hot matrix product it replaces
    (`one_hot(indices)^T @ source`) without the one-hot matrix.
    `fsdp-one-hot-scatter{device=true}` emits it for compute=gpu, where it
    becomes `fsdprt_gpu_scatter_add_rows_*` (`fsdp-gpu-scatter-add`).
    ```mlir
    %g = fsdp.scatter_add_rows %rows, %ids into %zeros
        : tensor<256x32xf32>, tensor<256xi64> -> tensor<50x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source, AnyRankedTensor:$indices,
                       AnyRankedTensor:$init, UnitAttr:$columns);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $source `,` $indices `into` $init attr-dict `:` type($source) `,`
    type($indices) `->` type($init)
  }];
  let hasVerifier = 1;
}

def FSDP_BufferScatterAddRowsOp : FSDP_Op<"buffer.scatter_add_rows"> {
  let summary = "fsdp.scatter_add_rows in place on a buffer";
  let description = [{
    `output[indices[t], :] += source[t, :]` in token order (`columns`:
    `output[:, indices[t]] += source[:, t]`), in place; the buffers may be
    strided views.
  }];
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$source,
                       Arg<AnyStridedMemRef, "", [MemRead]>:$indices,
                       Arg<AnyStridedMemRef, "", [MemRead, MemWrite]>:$output,
                       UnitAttr:$columns);
  let assemblyFormat = [{
    $source `,` $indices `into` $output attr-dict `:` type($source) `,`
    type($indices) `,` type($output)
  }];
  let hasVerifier = 1;
}

#endif // FSDP_OPS_TD

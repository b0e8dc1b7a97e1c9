//===- FSDPExpertOps.td - sparse mixture-of-experts ops ----*- tablegen -*-===//
//
// The grouped matrix products of a sparse mixture of experts: one product
// per group of consecutive rows (the rows of one expert). In the fsdp
// dialect, generated apart from FSDPOps.td (FSDPExpertOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_EXPERT_OPS_TD
#define FSDP_EXPERT_OPS_TD

include "fsdp/Dialect/FSDP/IR/FSDPBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FSDP_GroupedMatmulOp : FSDP_Op<"grouped_matmul", [Pure]> {
  let summary = "one matrix product per group of consecutive rows";
  let description = [{
    The rows of `lhs` are in groups of consecutive rows; group `g` ends
    (exclusively) at `offsets[g]` and starts where group `g - 1` ends (group
    0 at row 0). Each group is multiplied by its own matrix of `rhs`:

    ```
    result[r, :] = lhs[r, :] @ rhs[g, :, :]    for offsets[g-1] <= r < offsets[g]
    ```

    Rows at or after `offsets[E - 1]` are zero. This is a sparse mixture of
    experts' expert layer, once its (token, expert) rows are sorted by
    expert: `E` products whose sizes add up to the rows, instead of every
    expert on every row (`torch.nn.functional.grouped_mm` with a 3-D
    `mat2`). The offsets are read at run time (clamped to `[start, S]`, so
    decreasing or too large offsets give empty groups, never an access out
    of bounds). `fsdp-grouped-matmul` lowers it.
    ```mlir
    %y = fsdp.grouped_matmul %x, %w, %offsets
        : tensor<64x16xf32>, tensor<8x16x32xf32>, tensor<8xi32> -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       AnyRankedTensor:$offsets);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $offsets attr-dict `:` type($lhs) `,` type($rhs) `,`
    type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_GroupedMatmulTransposeLhsOp
    : FSDP_Op<"grouped_matmul_transpose_lhs", [Pure]> {
  let summary = "per group of consecutive rows, lhs transposed times rhs";
  let description = [{
    With the groups of rows of `fsdp.grouped_matmul` (group `g` is rows
    `offsets[g-1] <= r < offsets[g]`, group 0 starting at row 0), one
    product per group, summed over the group's rows:

    ```
    result[g, :, :] = sum over r in group g of  lhs[r, :]^T rhs[r, :]
    ```

    An empty group gives zeros. This is the gradient of
    `fsdp.grouped_matmul` for its `rhs` (`lhs` the forward's input, `rhs`
    the result's gradient): each expert's weight gradient from its own
    rows only.
    ```mlir
    %dw = fsdp.grouped_matmul_transpose_lhs %x, %dy, %offsets
        : tensor<64x16xf32>, tensor<64x32xf32>, tensor<8xi32> -> tensor<8x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       AnyRankedTensor:$offsets);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $offsets attr-dict `:` type($lhs) `,` type($rhs) `,`
    type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_BufferGroupedMatmulOp : FSDP_Op<"buffer.grouped_matmul"> {
  let summary = "a grouped product on buffers, into its output";
  let description = [{
    `fsdp.grouped_matmul` (or, with `transpose_lhs`,
    `fsdp.grouped_matmul_transpose_lhs`) on buffers, writing every element
    of `output`: what bufferization makes of the tensor ops under
    compute=gpu, where `fsdp-grouped-matmul` keeps them and
    `fsdp-gpu-grouped-matmul` turns each into the runtime's device grouped
    gemm (the offsets stay on the device). The buffers may be strided
    views.
    ```mlir
    fsdp.buffer.grouped_matmul %x, %w, %offsets into %y
        : memref<64x16xf32>, memref<8x16x32xf32>, memref<8xi32>, memref<64x32xf32>
    ```
  }];
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$lhs,
                       Arg<AnyStridedMemRef, "", [MemRead]>:$rhs,
                       Arg<AnyStridedMemRef, "", [MemRead]>:$offsets,
                       Arg<AnyStridedMemRef, "", [MemWrite]>:$output,
                       UnitAttr:$transpose_lhs);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $offsets `into` $output attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($offsets) `,` type($output)
  }];
  let hasVerifier = 1;
}

def FSDP_TopkIndicesOp : FSDP_Op<"topk_indices", [Pure]> {
  let summary = "the indices torch.topk picks on the CPU, ties included";
  let description = [{
    For each row along the last dim of `input` (`n` elements), the
    positions of its `k` largest elements (`largest`; else the smallest),
    `k` the result's last size, exactly as aten's CPU topk kernel picks
    and orders them: values are compared only, NaN above every number, and
    equal values come in the order aten's algorithm leaves them
    (`std::partial_sort` when `k * 64 <= n`, else `std::nth_element` and,
    with `sorted`, `std::sort` of the first `k - 1`), which is not position
    order. A Mixtral-style router whose logits tie then picks the experts
    torch picks. The values are `input` gathered at the indices.

    With `sort`, the op is torch.sort / argsort with `stable=False` instead:
    every position of the row (`k == n`), in the order aten's CPU sort
    kernel leaves them, `std::sort` (introsort) of the row's (value,
    position) pairs with the same comparator, the largest first with
    `largest` (descending); `sorted` has no effect. Equal values keep
    position order up to 16 elements per row (insertion sort) and come in
    the partitions' order above.

    `stable`, when present, holds the same selection with equal values in
    position order (what a stable sort gives; the frontend computes it with
    elementwise ops): `fsdp-topk` uses it where the CPU kernel cannot run
    (compute=gpu) and drops it otherwise. `fsdp-topk-to-runtime` makes the
    bufferized op (`fsdp.buffer.topk_indices`) a call of the runtime's
    `fsdprt_jit_topk_indices`.
    ```mlir
    %ids = fsdp.topk_indices %probs stable %ids_stable {largest, sorted}
        : tensor<64x8xf32>, tensor<64x2xi64> -> tensor<64x2xi64>
    %order = fsdp.topk_indices %x stable %order_stable {sort}
        : tensor<4x100xbf16>, tensor<4x100xi64> -> tensor<4x100xi64>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       Optional<AnyRankedTensor>:$stable,
                       UnitAttr:$largest, UnitAttr:$sorted, UnitAttr:$sort);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input (`stable` $stable^)? attr-dict `:` type($input)
    (`,` type($stable)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_BufferTopkIndicesOp : FSDP_Op<"buffer.topk_indices"> {
  let summary = "fsdp.topk_indices on buffers, into its output";
  let description = [{
    `fsdp.topk_indices` (without its `stable` form) on buffers, writing
    every element of `output` (i64): what bufferization makes of the tensor
    op. `fsdp-topk-to-runtime` makes it a call of `fsdprt_jit_topk_indices`
    (`fsdprt_jit_sort_indices` with `sort`).
    ```mlir
    fsdp.buffer.topk_indices %probs into %ids {largest, sorted}
        : memref<64x8xf32>, memref<64x2xi64>
    ```
  }];
  let arguments = (ins Arg<AnyStridedMemRef, "", [MemRead]>:$input,
                       Arg<AnyStridedMemRef, "", [MemWrite]>:$output,
                       UnitAttr:$largest, UnitAttr:$sorted, UnitAttr:$sort);
  let assemblyFormat = [{
    $input `into` $output attr-dict `:` type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

#endif // FSDP_EXPERT_OPS_TD

//===- Passes.td - GPU compute lowering --------------------*- tablegen -*-===//

#ifndef FSDP_GPU_PASSES_TD
#define FSDP_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPGpuScatterAdd : Pass<"fsdp-gpu-scatter-add", "ModuleOp"> {
  let summary = "Lower fsdp.buffer.scatter_add_rows on device buffers to the "
                "runtime's deterministic device scatter-add";
  let description = [{
    Runs on buffers under compute=gpu, before `fsdp-gpu-kernels`. Every
    `fsdp.buffer.scatter_add_rows` (the embedding backward, from
    `fsdp-one-hot-scatter{device=true}`) becomes one call on the calling
    rank's compute stream:

    ```
    void fsdprt_gpu_scatter_add_rows_f32(const void *indices,
        int32_t index_bits, int64_t index_stride, int64_t tokens,
        const float *source, int64_t source_token_stride,
        int64_t source_col_stride, float *output, int64_t output_slot_stride,
        int64_t output_col_stride, int64_t slots, int64_t width);
    ```

    (`_bf16` takes `uint16_t` buffers), with the buffers' strides
    (a `columns` scatter swaps them). The runtime sorts the tokens by
    (index, position) and adds each index's rows in token order: every
    output element is the same sum as the host loop's, bit for bit, from
    run to run, without float atomics (docs/GPU.md). Indices of other
    widths than 32 and 64 bits, other float types and unknown strides are
    located errors.
  }];
  let statistics = [
    Statistic<"numScatters", "scatters", "Scatter-adds lowered to calls">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FSDPGpuGroupedMatmul : Pass<"fsdp-gpu-grouped-matmul", "ModuleOp"> {
  let summary = "Lower fsdp.buffer.grouped_matmul on device buffers to the "
                "runtime's device grouped gemm";
  let description = [{
    Runs on buffers under compute=gpu, before `fsdp-gpu-kernels`. Every
    `fsdp.buffer.grouped_matmul` (a sparse mixture of experts' grouped
    product, kept by `fsdp-grouped-matmul{device=true}` and bufferized)
    becomes one call on the calling rank's compute stream:

    ```
    void fsdprt_gpu_grouped_matmul_f32(int32_t transpose_lhs,
        const void *offsets, int32_t offset_bits, int64_t offset_stride,
        int64_t groups, const float *lhs, int64_t lhs_row, int64_t lhs_col,
        const float *rhs, int64_t rhs_group, int64_t rhs_row,
        int64_t rhs_col, float *out, int64_t out_group, int64_t out_row,
        int64_t out_col, int64_t rows, int64_t k, int64_t n);
    ```

    (`_bf16` takes `uint16_t` buffers and accumulates in f32), with the
    buffers' strides (static ones as constants, which the cost report
    reads). The kernel reads the groups' offsets on the device, so the
    step never waits for the routing; each block finds its group's rows
    from them (docs/GPU.md, "Grouped products"). Offsets of other widths
    than 32 and 64 bits and other element types are located errors.
  }];
  let statistics = [
    Statistic<"numCalls", "grouped-gemms", "Grouped products lowered to calls">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FSDPLinalgToCublas : Pass<"fsdp-linalg-to-cublas", "ModuleOp"> {
  let summary = "Lower contractions on device buffers to the runtime's "
                "cuBLAS entry points (strided-batched gemms)";
  let description = [{
    The device counterpart of `fsdp-linalg-to-blas`, with the same plan
    (GemmPlan.h): a linalg op on buffers whose body is a single
    multiply-accumulate with M, N and K dimensions (several contiguous ones
    collapsed) and batch dimensions becomes a call to
    `fsdprt_gpu_gemm_f32` (f32), `fsdprt_gpu_gemm_bf16` (bf16 operands
    and output, f32 accumulation) or `fsdprt_gpu_gemm_bf16_f32` (bf16
    operands widened in the body, f32 output: fsdp-autocast's
    contractions), row-major, on the calling rank's compute stream:

    ```
    void fsdprt_gpu_gemm_f32(int32_t trans_a, int32_t trans_b, int64_t m,
        int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
        int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b,
        float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch);
    ```

    The innermost batch dimensions whose strides nest in all three operands
    (attention's (batch, head) pairs) are one strided-batched call; an
    outer batch dimension that does not nest is an `scf.for` around it. A
    zero `linalg.fill` of the output right before becomes beta = 0. With
    `tf32`, the module gets `fsdp.gpu_tf32`: the runtime may then run f32
    gemms on TF32 tensor cores. Other contractions stay linalg ops for
    `fsdp-gpu-kernels`; with `report`, every contraction gets a remark.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per contraction: a cuBLAS call, or why not">,
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Allow TF32 tensor-core math in f32 gemms (module attribute "
           "fsdp.gpu_tf32)">
  ];
  let statistics = [
    Statistic<"numGemms", "gemms", "Contractions that became cuBLAS calls">,
    Statistic<"numBatched", "batched-gemms",
              "cuBLAS calls with a batch of more than one">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def FSDPGpuMultiTensor : Pass<"fsdp-gpu-multi-tensor", "ModuleOp"> {
  let summary = "Put consecutive independent per-tensor kernels of one kind "
                "(the optimizer's) into one kernel function, launched once";
  let description = [{
    Runs after `fsdp-outline-kernels`, before `fsdp-gpu-kernels`. A kernel
    function whose linalg ops carry `fsdp.multi_tensor = "<kind>"` (the
    optimizer's per-parameter updates and sums of squares under
    `device-scalars`) is one part of a multi-tensor launch: a run of calls
    of such functions in one block, of one kind, with only side-effect-free
    ops between them (views, constants), becomes one call of a new kernel
    function `__fsdp_multi_tensor_<n>` that holds every part's ops, marked
    `fsdp.multi_tensor = "<kind>"`; `fsdp-gpu-kernels` launches its parts
    together (one launch per stage: the second pass of split reductions is
    a second launch). The parts must be independent: no part writes a
    buffer another part reads or writes (views of one arena at constant
    offsets are compared by their byte ranges, a written buffer that is a
    function argument conflicts with every other argument). A run is cut
    where a part would conflict or the kernel would take more than
    `max-args` buffer arguments (kernel parameters: 8 bytes each, CUDA's
    4 KB limit by default). torch's `_foreach` / fused AdamW and apex's
    multi_tensor_apply group the same way.
  }];
  let options = [
    Option<"maxArgs", "max-args", "int64_t", /*default=*/"400",
           "The most buffer arguments of one multi-tensor kernel">,
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Multi-tensor kernel functions built">,
    Statistic<"numParts", "parts", "Kernel calls grouped into them">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def FSDPGpuKernels : Pass<"fsdp-gpu-kernels", "ModuleOp"> {
  let summary = "Lower the linalg ops and copies of the outlined kernels to "
                "gpu.launch with a mapping per kind of op";
  let description = [{
    Runs after `fsdp-outline-kernels` and `fsdp-linalg-to-cublas`, in every
    `fsdp.kernel` function: each linalg op on buffers becomes one
    `gpu.launch` of `block-size` threads, its iteration space chosen by
    the kind of op:

    - no reduction loop (elementwise ops, fills, strided copies): one
      thread per element in row-major order of the loops, grid-stride (at
      most one wave of blocks, `sm-count` x 2048 / `block-size`, and
      `max-blocks`), so consecutive threads touch consecutive elements of
      the output; each iteration loads and computes 4 elements a grid
      apart before it stores them. Where every operand is contiguous along
      the last loop in chunks of 16 bytes whose addresses are known to be
      aligned (arena views, runtime allocations, the step's arguments,
      followed through calls), or independent of that loop, each thread
      takes chunks of 16 bytes of the widest element type instead (8 bf16,
      4 f32), one aligned vector load or store per operand and chunk, the
      body per element as before;
    - reduction loops innermost, every output `acc <op> x` (sum, product,
      max, min, float or integer; also and, or, xor) and rows at least one warp long (softmax, norms, losses,
      dot products): one warp per output element; each lane combines the
      row's elements lane, lane + 32, ... from the identity, the warp
      combines the 32 partials with `gpu.shuffle xor` (16, 8, 4, 2, 1) and
      lane 0 combines the output's initial value with the total;
    - other reductions (a column sum, a row shorter than a warp, other
      combiners): one thread per output element over its reduction loops,
      accumulators in registers;
    - a reduction of at least `split-min-elements` elements, every output
      `acc <op> x`, whose one warp (or one thread) per output element would
      launch fewer blocks than `sm-count` (a global norm, a scalar loss, a
      column sum over many rows): split over blocks in two launches. Pass 1
      aims at one full wave (`sm-count` x 2048 / `block-size` blocks): rows
      innermost, each warp reduces a contiguous segment of its row (at
      least 256 elements; a block's warps take consecutive segments) and
      stores its partial; otherwise each thread reduces a contiguous chunk
      of rows (at least 8) of one output element, consecutive threads on
      consecutive output elements. Pass 2 is one warp per output element:
      the lanes combine its partials (contiguous) in strides of 32, then
      the shuffles, then lane 0 its initial value. The partials are views
      of the rank's device scratch buffer (`fsdprt_gpu_scratch(bytes)`,
      allocated on its first request, reused by every split reduction of
      every step: they run in stream order), not an allocation per step.
      The results do not depend on the run: a fixed order, no atomics;
    - an output indexed by a reduction loop: one thread runs the op.

    A `linalg.fill` right before an op that accumulates into the filled
    buffer is folded into that op's kernel (the initial value is the fill
    value, no load and no second launch). A `memref.copy` between
    contiguous buffers becomes a device `gpu.memcpy`; other copies are
    elementwise kernels. Ops need static shapes; anything else is
    diagnosed at the op.

    In a multi-tensor kernel function (`fsdp-gpu-multi-tensor`) each op is
    a part: it is lowered as above (a split reduction's partials at its own
    offset of the scratch buffer, one scratch request for all), then the
    parts' first launches become one launch and their second launches
    (split reductions' pass 2) another. Each part runs on a contiguous
    range of the merged grid's blocks, which an `scf.index_switch` on the
    block index selects (`fsdp.multi_tensor_parts` lists each part's
    blocks and threads per block); its body sees its own block index, grid
    size and block size (threads past its block size idle), so it computes
    what its own launch would, bit for bit.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32, at most 1024)">,
    Option<"maxBlocks", "max-blocks", "int64_t", /*default=*/"65535",
           "Most blocks of one launch (the kernels are grid-stride loops)">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Multiprocessors of the target GPU (132: H100 and H200 SXM); a "
           "reduction that launches fewer blocks is split over blocks">,
    Option<"splitMinElements", "split-min-elements", "int64_t",
           /*default=*/"65536",
           "Smallest reduction (elements of its iteration space) that is "
           "split over blocks when it would not fill the GPU">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per op: the mapping it got (for a split "
           "reduction, its blocks and partials)">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Elementwise kernels in 16-byte chunks per thread where the "
           "operands are contiguous and aligned (false: one thread per "
           "element everywhere, to compare)">
  ];
  let statistics = [
    Statistic<"numElementwise", "elementwise", "Elementwise kernels">,
    Statistic<"numWarpReductions", "warp-reductions",
              "Reductions with one warp per output element">,
    Statistic<"numThreadReductions", "thread-reductions",
              "Reductions with one thread per output element">,
    Statistic<"numSplitReductions", "split-reductions",
              "Reductions split over blocks (two launches)">,
    Statistic<"numSerial", "serial", "Ops run by one thread">,
    Statistic<"numMemcpy", "memcpy", "Copies that became device memcpys">,
    Statistic<"numFoldedFills", "folded-fills",
              "Fills folded into the kernel that accumulates into them">,
    Statistic<"numMultiTensor", "multi-tensor",
              "Multi-tensor kernel functions launched together">,
    Statistic<"numVectorized", "vectorized",
              "Elementwise kernels with 16-byte chunks per thread">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def FSDPGpuFuseAttention : Pass<"fsdp-gpu-fuse-attention", "ModuleOp"> {
  let summary = "Replace attention's scores, softmax and products, forward "
                "and backward, by the runtime's fused attention kernels "
                "(compute=gpu)";
  let description = [{
    Recognizes, on tensors before the segments are outlined, the attention
    chains the frontends export and replaces each by calls of the runtime's
    FlashAttention kernels (`fsdprt_gpu_attention_fwd_f32 / _bf16`,
    `fsdprt_gpu_attention_bwd_f32 / _bf16`, docs/GPU.md "Fused
    attention"): no `T x T` scores or probabilities are materialized.

    - The generator's attention (`fsdp_mlir.dev.gen transformer --attention`):
      `[batch, seq, dim]` scores `q k^T`, a row maximum, `exp((s - max) *
      scale)`, its row sum and the quotient, then `P V`; causal when the
      maximum and the exponential skip `j > i`. Its hand-written backward
      (`dP = dO V^T`, `dV = P^T dO`, `dS = P (dP - rowsum(dP P)) scale`,
      `dQ = dS K`, `dK = dS^T Q`) is replaced together with it.
    - The PyTorch frontend's `scaled_dot_product_attention` (math backend):
      `[batch * heads]` batch matmuls of `sqrt(scale)`-scaled Q and K, an
      optional additive mask (the causal `[T, T]` mask of `is_causal`
      becomes the kernels' causal flag), the softmax with torch's
      `_safe_softmax` guard, `P V`, and autograd's backward of the same.

    The forward returns the row log-sum-exp (`[batch, heads, T]`, f32),
    which the backward takes in place of the probabilities (across the
    forward/backward boundary of a segmented step). Under fsdp-autocast the
    chain's operands are bf16 and the `_bf16` kernels run (f32
    accumulation; on the tensor cores at head dims 64 and 128).
    A chain is fused only when every intermediate is used by the chain
    alone, the scale is a positive constant, the head dimension has a
    kernel (16, 32, 64, 96, 128), Q, K, V share one element type (f32 or
    bf16) and an additive mask has that type too; anything else stays as it is (with `report`, a remark says why).
    Each call is in a private function of its own (marked `fsdp.segment`)
    that takes and returns tensors, so bufferization allocates its outputs
    and keeps its inputs alive until it returns.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per fused chain, and per attention-like chain "
           "left unfused with the reason">
  ];
  let statistics = [
    Statistic<"numForward", "forward", "Attention forwards fused">,
    Statistic<"numBackward", "backward", "Attention backwards fused">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPGpuFuseCrossEntropy : Pass<"fsdp-gpu-fuse-cross-entropy", "ModuleOp"> {
  let summary = "Rewrite torch's exported cross-entropy (log_softmax, NLL "
                "gather and their backward) into row reductions and one "
                "gradient pass over the logits (compute=gpu)";
  let description = [{
    Recognizes, on tensors before the segments are outlined, the chain
    torch exports for `F.cross_entropy(logits, targets)`: the row maximum
    (with its unused argmax), `x - m`, its exponential, the row sum, its
    log and `log_softmax = (x - m) - log(sum)`, the NLL's gather of
    `log_softmax[n, t[n]]`, and autograd's backward `q - exp(log_softmax)
    rowsum(q)` with `q = -onehot(t) * c`. It becomes two row reductions
    of the logits (`m = max x`, `ls = log(sum exp(x - m))`, the
    exponential fused into the sum), a gather that reads the logits, `m`
    and `ls`, and one elementwise pass that writes the gradient in its
    element type from the logits, `m`, `ls`, the targets and `c` (the
    one-hot computed in place, `rowsum(q)` as `-c` for a class in `[0,
    V)`). Nothing of the logits' size is materialized but the gradient:
    for GPT-2 small that is seven `[8192, 50257]` f32 buffers fewer.

    Under fsdp-autocast the logits are bf16 (widened in the bodies) and
    the gradient bf16. The forward values are bit-identical to the
    chain's; the gradient differs from it by the rounding to bf16 that
    autocast put on `exp(log_softmax) rowsum(q)`. A chain is rewritten
    only when every intermediate is used by the chain alone; with
    `report`, a remark says why a chain that reached the log_softmax stays
    as it is.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per fused chain, and per cross-entropy-like chain "
           "left unfused with the reason">
  ];
  let statistics = [
    Statistic<"numFused", "fused", "Cross-entropy chains rewritten">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPGpuGemmResults : Pass<"fsdp-gpu-gemm-results", "ModuleOp"> {
  let summary = "Start contractions from a zero fill of their own and write "
                "bf16 results directly where the f32 sum is only rounded "
                "(compute=gpu)";
  let description = [{
    Runs on tensors, after the elementwise chains are fused. For every
    contraction (a linalg op whose body is one multiply-accumulate, the
    ops `fsdp-linalg-to-cublas` turns into gemms):

    - **Zeros of its own.** An accumulator that is all zeros but not a
      zero `linalg.fill` that only this op uses -- a fill shared by
      several products, or one that reaches a segment as an argument or
      comes back from another segment's result (every call site and every
      return followed) -- is replaced by a zero fill of a `tensor.empty`
      right before the op. Bufferized, the fill and the op share one
      buffer and one kernel, which cuBLAS runs with beta = 0: no copy of
      the zeros into a fresh buffer, no read of C.
    - **Rounded once, by the gemm.** A contraction of bf16 operands
      widened to f32 with an f32 accumulator of zeros (fsdp-autocast's
      products) whose result is read only by `linalg.generic` ops that
      only round it to bf16 (`arith.truncf`, possibly fused with further
      elementwise work such as a bias add) becomes a bf16 contraction
      (`fsdp.f32_accumulation`: the sum is carried in f32 and rounded
      once at the end, which `fsdprt_gpu_gemm_bf16` does), and its readers
      read the bf16 result in place of the rounding. The values are the
      same bit for bit; the f32 result is never written.

    Segment arguments whose last use was such an accumulator are removed
    from the private function and its calls. With `report`, a remark per
    rewritten contraction.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per rewritten contraction">
  ];
  let statistics = [
    Statistic<"numLocalZeros", "local-zeros",
              "Contractions given a zero fill of their own">,
    Statistic<"numRounded", "rounded",
              "Contractions that write their bf16 rounding directly">,
    Statistic<"numArgsErased", "args-erased",
              "Function arguments left unused and removed">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPGpuAsyncCollectives : Pass<"fsdp-gpu-async-collectives", "ModuleOp"> {
  let summary = "Make every blocking tensor collective a start and a wait, so "
                "that no collective blocks the host (compute=gpu)";
  let description = [{
    On a GPU a blocking collective returns to the host once it has
    completed: the host waits for the device work before it and for the
    collective. `fsdp-schedule` makes the collectives the fsdp passes place
    asynchronous; the others (the loss all-reduce of `all-reduce-loss`, the
    optimizer's gradient-norm all-reduce) and every collective of a step
    built with `schedule=false` stay blocking. Here each blocking
    `fsdp.all_gather`, `fsdp.reduce_scatter` and `fsdp.all_reduce` on
    tensors becomes its `_start` form and an `fsdp.wait`, which the GPU
    runtime turns into a wait of the compute stream, not of the host. One
    the fsdp passes did not place (no `fsdp.origin`) starts right after its
    input is defined and is waited for right before the first use of its
    result: the loss all-reduce starts after the forward and is waited for
    at the return, during the backward. One they placed keeps its position
    (the start where it was, the wait right after it). Quantized gathers,
    which have no started form, stay blocking. `fsdp-pipeline` runs it for
    `compute=gpu`, before the segments are outlined.
  }];
  let statistics = [
    Statistic<"numMoved", "moved",
               "Collectives started early and waited for late">,
    Statistic<"numInPlace", "in-place",
               "Placed collectives made a start and a wait in place">
  ];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def FSDPGpuMergeModules : Pass<"fsdp-gpu-merge-modules", "ModuleOp"> {
  let summary = "Move every outlined kernel into one gpu.module";
  let description = [{
    Runs after `gpu-kernel-outlining`, which gives every kernel a
    `gpu.module` of its own: `gpu-module-to-binary` would compile each
    separately (one NVPTX code generation, ptxas and fatbinary run per
    kernel) and the runtime load each separately. The kernels move into one
    module, `__fsdp_kernels`, and every `gpu.launch_func` names it: one
    binary per step, one assembler run, one module load per device. A
    module with targets of its own or a symbol already merged stays apart.
  }];
  let statistics = [
    Statistic<"numMerged", "merged", "gpu.modules merged into one">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def FSDPGpuDeviceMemory : Pass<"fsdp-gpu-device-memory", "ModuleOp"> {
  let summary = "Allocate the step's buffers on the device";
  let description = [{
    Every `memref.alloc` / `memref.dealloc` in host code (outside
    `gpu.launch` and `gpu.func`) becomes `gpu.alloc` / `gpu.dealloc`:
    every buffer of a lowered step (activations, gathered parameters,
    gradients, results) lives in device memory, and `gpu-to-llvm` turns
    them into the runtime's `mgpuMemAlloc` / `mgpuMemFree`, ordered on the
    rank's compute stream by `fsdp-gpu-stream-order`. The buffers that
    `fsdp-assign-buffers` planned into one arena are views of the rank's
    device arena: its `fsdprt_jit_arena` call becomes `fsdprt_gpu_arena`
    (allocated on the first step, reused by every later one), as the
    quantization entry points become their device forms. A constant
    `memref.get_global` (the index tensors and splats of the frontend's
    scatter, index_put and guard decompositions) becomes a device buffer
    the global is copied into (`gpu.alloc` + `gpu.memcpy`, freed before
    its block's terminator). A `memref.alloca`, or a global that leaves
    its block (a buffer the device cannot read), is diagnosed.
  }];
  let statistics = [
    Statistic<"numAllocs", "allocs", "Allocations moved to the device">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def FSDPGpuStreamOrder : Pass<"fsdp-gpu-stream-order", "ModuleOp"> {
  let summary = "Order every device operation on the rank's compute stream, "
                "without host synchronization";
  let description = [{
    Upstream `gpu-async-region` makes GPU ops asynchronous but waits on the
    host before every call and at every return (`mgpuStreamSynchronize`):
    one host round trip per kernel function, segment and collective of a
    step. Here every block of a host function that holds GPU ops gets one
    chain: a `gpu.wait async` first (`mgpuStreamCreate`, which the runtime
    answers with the calling rank's compute stream), then every
    `gpu.launch_func`, `gpu.memcpy`, `gpu.memset`, `gpu.alloc` and
    `gpu.dealloc` made asynchronous, each depending on the one before. No
    wait is added: everything a step runs on the device -- kernels,
    copies, allocations, the runtime's cuBLAS calls and the collectives,
    which order themselves after the compute stream -- is enqueued on that
    one stream in program order, and the runner synchronizes it after the
    step. Host code in a step never reads device memory.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def FSDPGpuCostReport : Pass<"fsdp-gpu-cost-report", "ModuleOp"> {
  let summary = "Estimate a compute=gpu step's time on a named GPU, per "
                "device operation and in total";
  let description = [{
    An analysis of a step at the stage where every device operation is
    explicit (after `fsdp-gpu-stream-order`, before the kernels are lowered
    to NVVM or to the host emulation); the IR is not changed. From every
    function no other function calls (the step), it follows calls and
    host `scf.for` loops with constant bounds (which multiply what they
    hold) and costs each device operation on the GPU named by `gpu`
    (ceilings in one table, docs/GPU.md):

    - `gpu.launch_func`: the kernel body's loads and stores and float ops
      times its loops' trip counts, evaluated for the first thread with the
      launch's grid and block sizes (a grid-stride loop runs N / threads
      times on average); its device time is the largest of the bytes at
      the copy bandwidth, the FLOPs at the FP32 SIMT rate, and the latency
      chain: waves of resident blocks x the loop iterations of one thread
      that wait for a load x the memory latency (a reduction on one warp or a few blocks cannot reach the bandwidth);
    - `fsdprt_gpu_gemm_f32` / `_bf16` calls: 2 m n k batch FLOPs at
      cuBLAS's achieved rate for the dtype (SGEMM, TF32 with
      `fsdp.gpu_tf32`, bf16 tensor cores), scaled by the wave efficiency of
      128 x 128 output tiles on the multiprocessors, or the operands'
      bytes at the copy bandwidth if longer; a bf16 gemm that the runtime
      splits along K (`fsdprt_gpu_split_k_plan`, shared with the runtime)
      as its slices' cuBLAS calls and the reduction kernel;
    - `gpu.memcpy` (device copies read and write each byte, host copies go
      over PCIe), `gpu.memset`, `gpu.alloc`, `gpu.dealloc`, host
      synchronizations (a blocking `gpu.wait`, `mgpuStreamSynchronize`, a
      blocking collective) and the `fsdprt` collectives (ring traffic over
      NVLink over the collective's group in the module's `fsdp.mesh`, or
      `ranks`).

    The step's time comes from two timelines walked in stream order: the
    host advances by each call's issue cost, the device starts an
    operation once the previous one has ended and its gap has passed and
    not before the host has issued it, and a host synchronization makes
    the host wait for the device. `streamed (first steps)` is that;
    `graph replay` has no host issue, one graph launch and each node's gap
    in a CUDA graph. The estimate is the graph replay when the step can be
    captured (no device allocation, no host synchronization), else the
    streamed step.

    Prints one line per device operation (its count, bytes, FLOPs, time and
    why: blocks, waves, the bound and the bandwidth fraction), the largest
    sinks, the counts (launches, gemm calls, memcpys and bytes, device
    allocations and bytes, host synchronizations), the device's work, the
    host's issue time, the streamed step and the graph replay, and ends
    with `estimate: <ms> ms` and `ideal: <ms> ms`: every contraction at 70%
    of the GPU's dense peak for its dtype, every other byte moved once at 80%
    of the memory bandwidth (before them, the ideal with every contraction
    at the bf16 peak). With `json`, the same as one JSON object. An
    unknown GPU is an error; an operation it cannot cost gets a warning at
    the operation and is left out.
  }];
  let options = [
    Option<"gpuName", "gpu", "std::string", /*default=*/"\"h200\"",
           "The GPU whose ceilings are used (a100, h100, h200; several "
           "separated by commas: one report each)">,
    Option<"json", "json", "bool", /*default=*/"false",
           "Write the report as JSON">,
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
    Option<"top", "top", "int64_t", /*default=*/"10",
           "How many of the largest sinks to list">,
    Option<"listOps", "ops", "bool", /*default=*/"true",
           "List every device operation (false: the largest sinks and the "
           "totals only)">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"0",
           "Ranks every collective runs over (0: its group in the module's "
           "fsdp.mesh, else 1; on 1 rank a collective is a local copy)">
  ];
}

def FSDPGpuHostKernels : Pass<"fsdp-gpu-host-kernels", "ModuleOp"> {
  let summary = "Compile the kernels of a step for the host emulation of "
                "CUDA instead of NVVM (gpu-emulation=true)";
  let description = [{
    Replaces the NVVM lowering of `compute=gpu` when `gpu-emulation=true`:
    every kernel `gpu.func` of a `gpu.module` becomes a host function
    (`gpu.thread_id`, `gpu.block_id`, `gpu.block_dim` and `gpu.grid_dim`
    call `fsdprt_gpu_emu_*` runtime functions, `gpu.shuffle xor` on i32 and
    f32 exchanges the value among the lanes of the warp, `gpu.barrier`
    waits for the block) plus a wrapper with the C signature
    `void(void *const *params)`, where `params[i]` points at the i-th
    kernel argument as `mgpuLaunchKernel` receives it (bare pointers: one
    pointer per buffer). A global constructor registers the step's table of
    kernels (name, wrapper, argument sizes, whether the threads of a warp
    must run in lock step) under an id unique to the kernels
    (`fsdprt_gpu_register_host_kernels`); a destructor unregisters it. The
    `gpu.module` becomes a `gpu.binary` of the same name whose object holds
    that id, so the host code still calls `mgpuModuleLoad`,
    `mgpuModuleGetFunction` and `mgpuLaunchKernel`: only the emulated
    runtime can load it. The module gets `fsdp.gpu_emulation`. An op in a
    kernel that the emulation cannot run is diagnosed at the op.
  }];
  let statistics = [
    Statistic<"numKernels", "kernels", "Kernels compiled for the host">,
    Statistic<"numLockstep", "lockstep-kernels",
              "Kernels whose warps run in lock step (shuffles, barriers)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def FSDPGpuCheckToolkit : Pass<"fsdp-gpu-check-toolkit", "ModuleOp"> {
  let summary = "Check that the CUDA toolkit the kernels are compiled with "
                "is there";
  let description = [{
    Runs before `gpu-module-to-binary` when the module has kernels: the
    toolkit at `cuda-path` must hold `bin/ptxas` and `bin/fatbinary`
    (executable) and `nvvm/libdevice/libdevice.10.bc` (without it the
    kernels' `__nv_*` math calls stay unresolved and ptxas rejects them).
    A missing file is an error at the first GPU module, naming the path
    and the option that sets it, instead of a failure deep in the
    serializer.
  }];
  let options = [
    Option<"cudaPath", "cuda-path", "std::string", /*default=*/"",
           "CUDA toolkit root (default: $CUDA_HOME, else /usr/local/cuda)">,
    Option<"format", "format", "std::string", /*default=*/"\"fatbin\"",
           "What gpu-module-to-binary will produce (fatbin, bin, isa); isa "
           "needs no tool">
  ];
}

#endif // FSDP_GPU_PASSES_TD

//===- Passes.td - fsdp conversion passes ------------------*- tablegen -*-===//

#ifndef FSDP_CONVERSION_PASSES_TD
#define FSDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFSDPToRuntime : Pass<"convert-fsdp-to-runtime", "ModuleOp"> {
  let summary = "Lower buffer collectives to calls into the fsdprt C runtime";
  let description = [{
    Runs after bufferization. Every `fsdp.buffer.*` collective becomes a call
    to the runtime's JIT entry points (`fsdprt_jit_all_gather`, ...) with raw
    pointers, element count, dtype code, reduction code and the group's
    mesh-axis bit mask; the runtime resolves the calling rank's communicator
    and caches one sub-communicator per mask.

    Functions that carry fsdp argument/result attributes are the runner's
    entries: their signature (a `#fsdp.signature` of `#fsdp.port`s: names,
    slot and global types, layouts, the training fields) is recorded in the
    module attribute `fsdp.signatures`, their fsdp attributes are dropped,
    and they get `llvm.emit_c_interface`. An entry with results returns
    them through memory: it takes a pointer to the results area first and
    stores each result's memref descriptor there (3 + 2 x rank 64-bit
    words, one after the other in result order) instead of returning them,
    so its C interface is `_mlir_ciface_<entry>(results, arg0, ...)`, each
    argument a pointer to its descriptor, and the text of the lowered module
    grows linearly with the number of results. An entry must not be called,
    and its arguments and results must be statically shaped tensors or
    memrefs of a type the runner reads (f16, bf16, f32, f64, 8-bit, i32,
    i64); anything else is diagnosed at the function.

    Every `cf.assert` outside a kernel body (a run-time check of the step:
    the PyTorch frontend's guards on values the forward read from a tensor;
    the asserts inside linalg bodies, torch-mlir's bounds checks, stay)
    becomes a call to
    `fsdprt_jit_guard` with the condition and its message (an internal
    global string): a failed check records the message as the rank's error,
    aborts the world so that no peer waits for the rank, and the runner
    reports it, instead of cf.assert's own lowering, which aborts the
    process.

    The pass runs before any device code is generated, so `gpu` dialect
    operations in its input (device code written into the step by hand)
    are rejected at the operation.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FSDPEarlyDealloc : Pass<"fsdp-early-dealloc", "ModuleOp"> {
  let summary = "Free each buffer right after its last use (after the wait "
                "of a collective that uses it)";
  let description = [{
    Runs after upstream ownership-based buffer deallocation, before
    `bufferization-lower-deallocations`: ownership-based deallocation frees
    the buffers of a block in one `bufferization.dealloc` at its end, with
    run-time alias checks. For each memref of such an op the pass finds the
    allocation it belongs to: a `memref.alloc` or `bufferization.clone`, or
    the results of a call to a function that returns only buffers it
    allocates itself (`func.return` operands that are, through views,
    `memref.alloc` or `bufferization.clone` results: such results never
    alias the call's arguments, and results that share one buffer are one
    allocation). It then follows every alias of the allocation (views,
    `ViewLikeOpInterface`) to its uses, counting an operation whose
    non-buffer result (a collective's request) is used later as used until
    that later use (the `fsdp.buffer.wait`), and:

    - when an alias is a retained value of the op (a result of the
      function), drops the memref from the op, which never frees it;
    - when every use is followed and the op frees it unconditionally,
      removes it from the op and frees the allocation once with a
      `memref.dealloc` right after its last use;
    - otherwise (returned or yielded, passed to an operation that returns a
      buffer the pass does not know, address taken, freed elsewhere,
      conditional ownership) leaves it in the op, freed at the end.

    An op left without memrefs is erased. A plain `memref.dealloc` of a
    known allocation moves up to just after its last use the same way. The
    work is linear in the size of the function (each allocation's uses are
    walked once). Module pass: it reads the callees' bodies.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FSDPAssignBuffers : Pass<"fsdp-assign-buffers", "ModuleOp"> {
  let summary = "Give every step-local buffer of static size an offset in "
                "one per-rank arena";
  let description = [{
    Runs after `fsdp-early-dealloc` and the lowering of the deallocations:
    a buffer's lifetime is the span from its `memref.alloc` to its one
    `memref.dealloc` (early deallocation placed the free right after the
    last use, after the wait of a collective that uses it), in the program
    order of its group: a planned function with the segments it calls
    expanded at their calls. The pass packs the group's buffers into one
    arena four ways and keeps the smallest: a heap simulation in program
    order (best fit, split and coalesced on free, O(n log n)) and a global
    best fit over the live intervals, the buffers by decreasing size, by
    decreasing size times lifetime and by decreasing breadth (the most
    bytes live during the buffer's life), each at the smallest gap among
    the buffers live with it (n^2 / 2 comparisons); it stops at the most
    bytes ever live. Sizes and offsets are multiples of `alignment`. Each
    planned `memref.alloc` becomes a `memref.view` of the arena at its
    offset and its `memref.dealloc` is erased.

    Segments (private functions called only by `func.call`): one called
    once, from the top-level block of a planned function, is a member of
    its caller's group; one called several times, each call from an entry
    or a member of it, is planned in each call, which passes the offsets
    of that call's buffers (index arguments). Both take the caller's arena
    as a last argument and keep their results: a result's buffer lives
    from its allocation in the segment to its free in the caller. Any
    other callee has a plan of its own: results that are a statically
    shaped `memref.alloc` of its body (through views that take no other
    operand; no other result sharing it) become out-parameters its callers
    allocate before the call, and its temporaries a sub-arena, an
    argument `memref<N x i8>` of its peak that every caller allocates
    around the call. An entry (a function nobody calls) takes its arena
    from the runtime, `fsdprt_jit_arena(bytes)`: the calling rank's arena,
    allocated once and reused by every step. With `entry-results` (the
    default) an entry's statically shaped results are planned too, live
    to the return: they stay valid until the entry's next call on that
    rank (the runners copy them first and free only what malloc returned).

    What stays outside the arena: buffers of dynamic size, buffers
    allocated or freed inside nested regions or whose free is conditional,
    buffers of a function called other than by `func.call`, and results of
    callees with a plan of their own that are views or shared. The plan of
    each entry is recorded in the module attribute `fsdp.memory_plans` (a
    `#fsdp.memory_plan` per entry: arena bytes, peak bytes of the static
    buffers outside it, planned buffers, the largest ones), which the
    runner reads to reserve the arena before the first step and to report
    the static peak.

    With `poison` (the default), every planned buffer calls
    `fsdprt_jit_arena_unpoison` at its allocation and
    `fsdprt_jit_arena_poison` at its free: the runtime poisons the arena's
    gaps and dead ranges in AddressSanitizer builds (no-ops otherwise).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Alignment in bytes of every buffer in the arena (a power of two)">,
    Option<"poison", "poison", "bool", /*default=*/"true",
           "Mark each planned buffer live and dead for the runtime's "
           "sanitizer poisoning">,
    Option<"entryResults", "entry-results", "bool", /*default=*/"true",
           "Plan an entry's statically shaped results into the arena too: "
           "they stay valid until the entry's next call on that rank (the "
           "runners copy them first and free only what malloc returned)">,
  ];
  let statistics = [
    Statistic<"numPlanned", "planned-buffers",
              "Buffers given an offset in an arena">,
    Statistic<"numOutParams", "out-params",
              "Callee results turned into out-parameters">,
    Statistic<"numRepeatedCalls", "repeated-calls",
              "Calls of a function called several times whose buffers are "
              "planned in the caller's arena at offsets the call passes">,
    Statistic<"numOutside", "outside-buffers",
              "Static buffers left outside the arena">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::fsdp::FSDPDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

//===----------------------------------------------------------------------===//
// Compute lowering for CPU (the `compute=fast` path of fsdp-lower-to-llvm)
//===----------------------------------------------------------------------===//

def FSDPFoldTransposes : Pass<"fsdp-fold-transposes"> {
  let summary = "Fold linalg.transpose on tensors into the indexing maps of "
                "the linalg ops that read it";
  let description = [{
    A consumer that reads a transposed tensor is made a `linalg.generic`
    (named ops are generalized) whose indexing map for that input reads
    the transpose's source with permuted indices; transposes left without
    a use are erased. `x @ w.T` then needs no transposed copy of `w`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FSDPFuseElementwise : Pass<"fsdp-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg producers into their consumers";
  let description = [{
    Upstream elementwise fusion on tensors, restricted to producers with a
    single use and to consumers that are not contractions (so that
    multiply-accumulate bodies stay whole for `fsdp-linalg-to-blas`).
    Before it, a `linalg.fill` of a `tensor.empty` with several uses is
    duplicated (fill and empty tensor) for every use after the first: each
    matmul or reduction that accumulates into a shared zero (or -inf)
    tensor then fills its own buffer in place instead of copying a shared
    filled one.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPOneHotScatter : Pass<"fsdp-one-hot-scatter"> {
  let summary = "Turn matrix products with a one-hot operand into "
                "scatter-add loops";
  let description = [{
    Runs on tensors. A `linalg.matmul` `C += A @ B` whose `A` is a one-hot
    matrix with its class along the rows, `A[r, t] = (idx[t] == r) ? 1 : 0`
    (or whose `B` is one with its class along the columns), built by
    elementwise `linalg.generic`s and transposes from an integer tensor
    `idx` and a row index (`linalg.index`, or an arange generic read along
    the row), becomes an `scf.for` over the tokens `t` in order that adds
    row `t` of `B` to row `idx[t]` of `C` (column for column), in place:
    O(tokens x width) instead of O(tokens x rows x width). This is how the
    PyTorch frontend writes the embedding backward (and `index_add`,
    `index_put(accumulate=True)`): the sum of each output element then runs
    in aten's order, token by token. An index outside `C`'s rows adds
    nothing, as its all-zero one-hot column did; the product's `0 * x`
    terms are dropped, which differs only where `x` is inf or NaN. The
    one-hot matrix and the ops that built it are erased when nothing else
    uses them. Other matrix products are left as they are.

    With `device` (what the pipeline sets for compute=gpu, where host loops
    could not read device buffers) the product becomes one
    `fsdp.scatter_add_rows` instead of the loops: the same sum, in the same
    token order per output element, which `fsdp-gpu-scatter-add` turns into
    the runtime's deterministic device scatter-add.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark at each product rewritten">,
    Option<"device", "device", "bool", /*default=*/"false",
           "Emit fsdp.scatter_add_rows (a device kernel under compute=gpu) "
           "instead of scf.for loops">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::fsdp::FSDPDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FSDPOutlineSegments : Pass<"fsdp-outline-segments", "ModuleOp"> {
  let summary = "Move the compute between collectives into deduplicated "
                "private functions";
  let description = [{
    Runs on tensors, before bufferization. Every maximal run of
    side-effect-free, non-`fsdp` ops in a function's body (the forward or
    backward compute of an FSDP unit between its collectives, the loss, the
    packing of a bucket) becomes a call to a private `__fsdp_segment_<n>`
    function that takes the values the run reads and returns the values
    used after it; captured constants are cloned in. Structurally equal
    runs (the same code on other tensors: the identical blocks of a model)
    share one function. The step function is left with collectives and
    one call per run, so bufferization, lowering and LLVM's code
    generation see a step that grows by a few calls per unit and a number
    of functions that does not grow with the depth of the model.
  }];
  let options = [
    Option<"minOps", "min-ops", "unsigned", /*default=*/"8",
           "Outline a run only if it holds at least this many ops "
           "(constants not counted)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def FSDPOutlineKernels : Pass<"fsdp-outline-kernels", "ModuleOp"> {
  let summary = "Move every bufferized linalg op into a deduplicated "
                "private function";
  let description = [{
    Runs after bufferization. Each linalg op on buffers (and each
    `memref.copy`) becomes a call to a
    private `__fsdp_kernel_<n>` function (marked `no_inline`) that holds
    the op, with its operands and captured values as arguments and
    captured constants cloned in. Structurally equal ops share one kernel.
    A `linalg.fill` directly followed by a linalg op that accumulates into
    the filled buffer shares that op's kernel (`fsdp-linalg-to-blas` then
    turns a zero fill and a contraction into one gemm with beta = 0).
    The step function is left with calls, allocations and collectives, so
    the cost of loop lowering, `convert-scf-to-cf` and LLVM's optimizer
    grows with the number of distinct kernels, not with the size of one
    function.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def FSDPLinalgToBlas : Pass<"fsdp-linalg-to-blas", "ModuleOp"> {
  let summary = "Lower contractions on buffers to cblas_sgemm/cblas_dgemm "
                "calls";
  let description = [{
    A linalg op on buffers whose body is a single multiply-accumulate and
    whose iteration space has one M, one N and one K dimension (plus any
    batch dimensions) -- `linalg.matmul`, `linalg.batch_matmul`, their
    transposed variants, generic contractions -- becomes one `cblas_?gemm`
    call per batch index (an `scf.for` nest over the batch dimensions).
    Operands are passed in place: the unit-stride dimension decides
    CblasNoTrans/CblasTrans, the other stride is the leading dimension, a
    column-major result swaps the operands; a zero `linalg.fill` of the
    output right before the op is removed and the gemm gets beta = 0.
    f32 and f64, and 16-bit operands accumulated in f32 (bf16 x bf16 ->
    f32 or f16 x f16 -> f32, what fsdp-autocast produces): their A and B
    are widened exactly into f32 buffers, then one `cblas_sgemm` each, so
    results do not depend on whether the CPU has bf16 instructions (an
    OpenBLAS `cblas_sbgemm`, where the library has one, sums in another
    order). Other element
    types, dynamic shapes or strides, broadcast (zero-stride) matrix
    operands and several M/N/K dimensions stay linalg ops for the loop
    lowering. With `report`, every contraction gets a remark saying which
    way it went and why.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per contraction: lowered to BLAS, or why not">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def FSDPCopiesToLoops : Pass<"fsdp-copies-to-loops"> {
  let summary = "Turn strided memref.copy ops into linalg.copy (vectorized "
                "loops instead of the generic memrefCopy runtime function)";
  let description = [{
    A `memref.copy` of static shape between buffers that are not both
    contiguous (a row of a gathered bucket, a column block of a packed
    gradient) would lower to a call of MLIR's `memrefCopy`, which copies
    one element at a time. It becomes a `linalg.copy`, lowered to a loop
    nest whose innermost, unit-stride loop LLVM vectorizes. Contiguous
    copies (one `memcpy`), dynamic shapes and unranked or rank-0 buffers
    keep their `memref.copy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FSDPReductionLoops : Pass<"fsdp-reduction-loops"> {
  let summary = "Lower linalg reductions on buffers to loops that keep the "
                "accumulator in a register";
  let description = [{
    A linalg op on buffers with reduction loops whose float outputs are
    `acc <op> x` (add, mul, maximum, minimum; `x` anything the body
    computes) becomes `scf.for` loops that combine each output's elements
    in blocks: every accumulator takes at most 16 values (elements, or the
    results of the level below, or of a reduction loop inside) before it is
    combined into the next level, so a sum's rounding error grows like a
    pairwise sum's (log16 of its length) and not with the number of
    elements; an outer reduction loop combines the sums of the loops inside
    it, each started from the identity, and the output's value comes last.
    The order depends on the loop bounds alone and no fast-math flag is
    added: every host, vector width and fusion context gives the same bits.

    When the innermost loop is a reduction (row sums, norms, softmax, a
    mean over (0, 2, 3) whose channel loop moves outside), the parallel
    loops go outside and the accumulators are iteration arguments; f32/f64
    rows of at least 16 (f64: 8) elements keep a vector of 16 (8) partial
    results along the innermost loop, partial j taking element j of each
    block of 16 (the last size mod 16 of a row going to partial 0),
    combined by halves at the end. When the innermost loop is parallel
    (column sums: bias gradients, `x.sum(0)`), the columns go in tiles of
    256, each row of a tile combined into stack buffers of accumulators
    (one per level), in a column loop that vectorizes as it is.

    Other reductions (integer outputs, bodies that are not `acc <op> x`)
    whose reduction loops are innermost keep their sequential order, the
    accumulators in registers; the rest stay linalg ops for
    `convert-linalg-to-loops`. Both CPU paths run this pass (compute=fast
    and the reference, compute=loops), so their reductions sum in the same
    order. With `report`, every reduction gets a remark saying which way it
    went.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per reduction: lowered here, or why not">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def FSDPExpandPowers : Pass<"fsdp-expand-powers"> {
  let summary = "Write small constant integer powers as multiplications";
  let description = [{
    A `math.fpowi` whose exponent is a constant integer, or a `math.powf`
    whose exponent is a constant with an integral value, of magnitude at
    most `max-exponent`, on a float scalar, becomes multiplications: square
    and multiply over the exponent's bits with the result first (`x^3 = x *
    (x * x)`, `x^4 = (x * x) * (x * x)`), `1 / x^|n|` for a negative
    exponent, `1` for 0. That is the order LLVM expands `llvm.powi` with a
    constant exponent in, so a CPU step that lowered `math.fpowi` to
    `llvm.powi` computes the same bits as before, while a GPU kernel no
    longer calls libdevice's `__nv_powif` (GELU's `x ** 3`). `math.powf`
    with such an exponent was a libm `powf` call: its products are what
    aten computes for `pow(x, 2)` and `pow(x, 3)`. Every compute mode runs
    it, so the lowerings agree.
  }];
  let options = [
    Option<"maxExponent", "max-exponent", "int64_t", /*default=*/"16",
           "The largest exponent magnitude written as multiplications">
  ];
  let statistics = [
    Statistic<"numExpanded", "expanded", "Powers written as multiplications">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FSDPApproximateMath : Pass<"fsdp-approximate-math"> {
  let summary = "Replace f32 exp, erf, log and tanh by polynomial "
                "approximations that vectorize";
  let description = [{
    Upstream's polynomial approximations (Cephes/Eigen style, accurate to a
    few ulp of f32, infinities and NaN handled) for `math.exp`, `expm1`,
    `log`, `log1p`, `log2`, `erf`, `erfc` and `tanh` on f32 scalars and
    vectors: plain arithmetic that LLVM vectorizes with the loop around it,
    where a call to libm keeps the loop scalar. Other element types keep
    their math ops (and libm calls).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

//===----------------------------------------------------------------------===//
// Compute lowering for NVIDIA GPUs (the `compute=gpu` path, docs/GPU.md)
//===----------------------------------------------------------------------===//

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
      most `max-blocks` blocks), so consecutive threads touch consecutive
      elements of the output;
    - reduction loops innermost, every output `acc <op> x` (sum, product,
      max, min) and rows at least one warp long (softmax, norms, losses,
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
           "reduction, its blocks and partials)">
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
              "Fills folded into the kernel that accumulates into them">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
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
    chain's operands are bf16 and the `_bf16` kernels run (f32 arithmetic).
    A chain is fused only when every intermediate is used by the chain
    alone, the scale is a positive constant, the head dimension has a
    kernel (16, 32, 64, 96, 128) and Q, K, V share one element type (f32 or
    bf16); anything else stays as it is (with `report`, a remark says why).
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
    quantization entry points become their device forms. A `memref.alloca`
    or a `memref.get_global` that host code passes on (a buffer the device
    cannot read) is diagnosed.
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
      times on average); the time is a launch overhead plus the largest of
      the bytes at the copy bandwidth, the FLOPs at the FP32 SIMT rate,
      and the latency chain: waves of resident blocks x the loop
      iterations of one thread that wait for a load x the memory latency
      (a reduction on one warp or a few blocks cannot reach the bandwidth);
    - `fsdprt_gpu_gemm_f32` / `_bf16` calls: 2 m n k batch FLOPs at
      cuBLAS's achieved rate for the dtype (SGEMM, TF32 with
      `fsdp.gpu_tf32`, bf16 tensor cores), scaled by the wave efficiency of
      128 x 128 output tiles on the multiprocessors, or the operands'
      bytes at the copy bandwidth if longer, plus a call overhead;
    - `gpu.memcpy` (device copies read and write each byte, host copies go
      over PCIe), `gpu.memset`, `gpu.alloc`, `gpu.dealloc`, host
      synchronizations (a blocking `gpu.wait`, `mgpuStreamSynchronize`, a
      blocking collective) and the `fsdprt` collectives (ring traffic over
      NVLink over the collective's group in the module's `fsdp.mesh`, or
      `ranks`).

    Prints one line per device operation (its count, bytes, FLOPs, time and
    why: blocks, waves, the bound and the bandwidth fraction), the largest
    sinks, the counts (launches, gemm calls, memcpys and bytes, device
    allocations and bytes, host synchronizations) and ends with
    `estimate: <ms> ms` and `ideal: <ms> ms`: every contraction at 70% of
    the GPU's dense peak for its dtype, every other byte moved once at 80%
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

#endif // FSDP_CONVERSION_PASSES_TD

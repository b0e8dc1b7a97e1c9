//===- Passes.td - CPU compute lowering --------------------*- tablegen -*-===//

#ifndef FSDP_COMPUTE_PASSES_TD
#define FSDP_COMPUTE_PASSES_TD

include "mlir/Pass/PassBase.td"

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

    With `multi-use` (compute=gpu sets it), a producer with several uses is
    fused into a consumer without reduction loops too: the fused op
    computes both and also writes the producer's result for its other uses
    (which must all come after the consumer in its block), so a chain whose
    intermediates the backward keeps (GELU's, a norm's) is one kernel that
    reads its inputs once and writes what is used later, instead of one
    kernel per op that reads back what the one before wrote. No work is
    duplicated. A consumer with reduction loops still takes only
    single-use producers (the producer's result would be an output indexed
    by a reduction loop). With `multi-use`, a `tensor.expand_shape`
    between elementwise ops (a gemm's 2-d result plus a bias, read as the
    3-d activation) is first folded into them, the ops taking the expanded
    shape, and a consumer that reads several results of one producer
    through the same map fuses with it, the fused op computing those
    results instead of reading them.
  }];
  let options = [
    Option<"multiUse", "multi-use", "bool", /*default=*/"false",
           "Also fuse producers with several uses into elementwise "
           "consumers, writing the producer's result for its other uses">,
  ];
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

def FSDPRematElementwise : Pass<"fsdp-remat-elementwise", "func::FuncOp"> {
  let summary = "Recompute elementwise values in the later segments that "
                "read them, from values those segments read anyway";
  let description = [{
    Runs on tensors, before `fsdp-outline-segments`. First, an elementwise
    op (an arith or math op on tensors, or an elementwise `linalg.generic`
    whose outputs are empty tensors) equal to an earlier one in the body --
    the same op on the same values -- is replaced by it: autocast rounds a
    value to bf16 once per product that reads it (a gradient read by the
    input's and the weight's product), which would be two launches and two
    buffers. Ops that `fsdp-recompute` cloned carry `fsdp.recompute` and
    are not equal to their originals. Then: the ops of a function
    body between two ops that no segment takes (a collective, a wait, a
    call) become one segment; a value one segment computes and a later one
    reads is a buffer kept from the first to the second (an activation the
    backward reads). When such a value is the result of a chain of
    elementwise `linalg.generic` ops (all loops parallel, the outputs not
    read) whose inputs are constants, empty tensors or values that the
    later segment reads anyway, the chain is cloned right before the first
    reader in that segment and that segment's readers read the clone: GELU's
    `tanh(...)`, `1 + tanh(...)` and `0.5 x`, which the backward reads next
    to `x`, are recomputed from `x` there (and fused into the backward's
    kernel) instead of three f32 buffers written by the forward and read
    back. A bucket's member (an operand of a `tensor.concat`, through
    static reshapes) that an earlier segment computed by one elementwise op
    from the function's arguments alone -- a parameter rounded to bf16 for
    the forward's gather and packed again for the backward's -- is
    recomputed right before the packing: the arguments are live for the
    whole step, the rounded copy is no longer kept from the forward to the
    backward, and each rounding writes its own bucket's slot
    (`fsdp-pack-in-place`) instead of being copied in twice. The same ops
    on the same values: bit for bit the same results.
    No value is kept longer than before (the chain's inputs were live in
    the later segment already); at most `max-ops` ops are cloned per value.
  }];
  let options = [
    Option<"maxOps", "max-ops", "unsigned", /*default=*/"16",
           "The most elementwise ops cloned to recompute one value">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "recomputed",
              "Values recomputed in a later segment">,
    Statistic<"numDeduplicated", "deduplicated",
              "Elementwise ops equal to an earlier one">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
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
    used after it; captured constants, static empty tensors and fills of
    a constant into one are cloned in (right before their first use),
    never passed: a filled accumulator passed in is one the segment writes
    in place, which bufferization would copy before each call. A fill used
    as the destination of several ops first becomes one fill per such use.
    A static slice or reshape of a value no run computes (a gathered or
    reduce-scattered bucket, a function argument, a call's result) is not
    a segment result either: it stays in the body, and each segment that
    reads it takes the viewed value and makes the view itself (a segment's
    result is a buffer of its own, so a returned view of a bucket's
    parameter would be a copy per parameter and call). A parameter's slice
    of a 1-D bucket viewed as `[1, N]` (expand, slice, collapse) is made
    the 1-D slice it is. Structurally equal runs (the same code on other tensors: the identical blocks of a model)
    share one function. The step function is left with collectives and
    one call per run, so bufferization, lowering and LLVM's code
    generation see a step that grows by a few calls per unit and a number
    of functions that does not grow with the depth of the model.
  }];
  let options = [
    Option<"minOps", "min-ops", "unsigned", /*default=*/"8",
           "Outline a run only if it holds at least this many ops "
           "(constants, empty tensors and their fills not counted)">,
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

def FSDPExpandBf16Casts : Pass<"fsdp-expand-bf16-casts"> {
  let summary = "Convert integers and f64 to bf16 through f32";
  let description = [{
    An `arith.sitofp` / `arith.uitofp` with a bf16 result, and an
    `arith.truncf` from f64 to bf16, become a conversion to f32 followed by
    one `arith.truncf` f32 -> bf16 (which arith-expand writes as integer
    operations). LLVM would otherwise lower them, on a CPU without
    AVX512-BF16, to `__truncsfbf2` / `__truncdfbf2` calls that no library
    the step links defines. The values are torch's: `c10::BFloat16` rounds
    a float. `fsdp-lower-to-llvm` runs it before arith-expand.
  }];
  let statistics = [
    Statistic<"numExpanded", "expanded", "Conversions written through f32">
  ];
}

def FSDPPackInPlace : Pass<"fsdp-pack-in-place"> {
  let summary = "Make the producers of a concat's members write their slot";
  let description = [{
    Runs on tensors, right before bufferization. A `tensor.concat` of
    static shape (the packing of a collective's bucket: parameters cast to
    the gather dtype, a unit's gradients) becomes a `tensor.empty` of the
    packed shape and a chain of `tensor.insert_slice`s, and each member
    produced by a `linalg` op of the same block -- through single-use
    static reshapes, into a static `tensor.empty` or a fill of one used only
    there -- is written by that op into its slot: the op's output becomes a
    slice of the packed tensor (reshaped back to the op's shape), and the
    member is inserted into the slice it was written to, which one-shot
    bufferization leaves in place. Without it the packed buffer is a new
    allocation and every member is copied in (a device memcpy per member
    on a GPU). Members it cannot place (function arguments, values with
    other uses, a second member of the same op) are inserted where the
    concat was, i.e. copied as before.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
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

#endif // FSDP_COMPUTE_PASSES_TD

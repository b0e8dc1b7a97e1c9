//===- Passes.td - fsdp passes -----------------------------*- tablegen -*-===//

#ifndef FSDP_TRANSFORMS_PASSES_TD
#define FSDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPLayoutReport : Pass<"fsdp-layout-report", "ModuleOp"> {
  let summary = "Print every rank's shard of each value that carries a layout";
  let description = [{
    For every function argument and result with an `fsdp.layout`, prints for
    each rank of the mesh: its mesh coordinates, local (true) shape, global
    offsets, the owned ranges of every sharded dim, the padded slot shape and
    the padding bytes it sends. The IR is not changed.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
  ];
}

def FSDPRecompute : Pass<"fsdp-recompute", "ModuleOp"> {
  let summary = "Recompute the selected FSDP units' forward in the backward "
                "instead of keeping their activations";
  let description = [{
    Activation checkpointing (PyTorch's `checkpoint_wrapper`,
    TransformerEngine's `checkpoint`) on the step before partitioning. The
    forward is everything the `fsdp.loss` result depends on, the backward
    the rest. A forward op belongs to the unit of the parameters it reads
    directly (the latest of them in forward order); one reading none to the
    one unit of its forward users if they agree, otherwise to the latest
    unit of its operands (docs/SEMANTICS.md, §5.6).
    For each selected unit, its values that are used by the backward and by
    no forward op of another unit are recomputed: the unit's ops computing
    them (and the constants, empties and fills they use) are cloned, marked
    `fsdp.recompute = "<unit>"`, each right before its first user in the
    backward, and the backward reads the clones. The clones read the
    unit's inputs (values of other units, data) and its parameter arguments,
    which fsdp-partition then gathers in the backward. The values are
    bit-identical; only what is kept alive changes.
  }];
  let options = [
    ListOption<"units", "units", "std::string",
               "FSDP units (fsdp.unit names) to recompute; empty or `all`: "
               "every unit">,
  ];
  let statistics = [
    Statistic<"numUnits", "recomputed-units", "Units recomputed">,
    Statistic<"numValues", "recomputed-values",
              "Forward values the backward now recomputes">,
    Statistic<"numCloned", "cloned-ops", "Forward ops cloned into the backward">,
  ];
}

def FSDPTensorParallel : Pass<"fsdp-tensor-parallel", "func::FuncOp"> {
  let summary = "Partition the global step over its tensor-parallel mesh axis";
  let description = [{
    Input: a step whose parameter arguments have their global (full) types
    and layouts with one tensor-parallel placement, `tp_shard<d>` or
    `tp_replicate`, on one mesh axis (the tensor-parallel axis; every
    parameter names it). Output: the TP-local program of one rank of that
    axis, which `fsdp-partition` then shards over the data-parallel axes.

    The pass propagates shardings forward through the step, in program
    order, forward and backward alike. A value is replicated or sharded
    along one dim; a `tp_shard<d>` argument is sharded along `d`, every
    other argument replicated. For each structured (linalg) op, the
    operands sharded along a dim name the loop their dim is indexed by
    (one loop per op); replicated operands indexed by that loop are
    materialized as the rank's part where they are shape-only values
    (`tensor.empty`, a `linalg.fill` of one, a splat constant). A parallel
    sharded loop shards the results along the dim it indexes; a reduction
    along the sharded loop (a row-parallel product, its backward
    counterpart, a sum or max over a sharded dim) yields partial values,
    all-reduced over the tensor-parallel axis (`fsdp.all_reduce`, sum, max
    or min as the reduction's combiner; in `reduce-dtype` where given)
    right after the op, so that partial values never flow further.
    `tensor.expand_shape` carries a sharded dim to the outer dim of its
    group (heads split from `H * D`) and `tensor.collapse_shape` to the
    collapsed dim when the sharded dim is the outer non-unit dim of its
    group. Every other op must see only replicated operands. A gradient
    result (`fsdp.grad_of = i`) must come out sharded as its parameter
    (`tp_shard<d>`) or replicated (`tp_replicate`); every other result
    replicated.

    Arguments and results then have TP-local types and the function gets
    `fsdp.tp_local`. A located error says which op and why where a value's
    sharding is ambiguous (operands sharded along different loops), where a
    reshape cannot carry it, and where a replicated value would need
    slicing. A sum along the sharded loop into a value (a residual) sums
    from zero and adds the value after the all-reduce.

    Sequence parallelism (`sequence-parallel`, or `fsdp.sequence_parallel`
    on the function): the partial sum of an activation (a row-parallel
    product, the input gradient of a column-parallel one) is
    reduce-scattered along its outermost non-unit dim, the tokens, instead
    of all-reduced; such a *sequence-split* value flows through elementwise
    ops, norms and residuals on this rank's tokens. Where it meets a
    feature split (a column-parallel product, the backward of a
    row-parallel one) or an op that needs it whole, it is all-gathered
    (once per value). A replicated value it meets along the tokens is cut
    to this rank's part (a slice at the rank's offset) when it is no larger
    than what gathering the split operands would move. A sum over the split tokens
    (a norm's or replicated layer's weight gradient, the loss) is
    all-reduced.

    Vocabulary parallelism: a linalg op with parallel loops whose body reads
    a table split along its rows at positions computed from data and
    yields the element (an embedding lookup, a cross-entropy's target
    log-probability) reads this rank's rows and 0 elsewhere; its result is
    a partial sum, resolved as above. A body that reads the split loop's
    index as a number gets the global index. The rank's index on the axis
    (for these and for the slices above) comes from a reduce-scatter (max)
    of `[0, .., k-1]`, once per function.
    Replicated values read along a split loop are recomputed on the rank's
    part from their producers where those are linalg ops along a parallel
    loop (a one-hot against an iota), and a gradient that must come out
    split is computed split along the loop of its split dim (an embedding's
    gradient). docs/TENSOR_PARALLEL.md.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect"];
  let options = [
    Option<"reduceDtype", "reduce-dtype", "::mlir::fsdp::FloatDtype",
           /*default=*/"::mlir::fsdp::FloatDtype::none",
           "Element type the tensor-parallel all-reduces run in",
           [{FSDP_FLOAT_DTYPE_VALUES}]>,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Split activations over their tokens between tensor-parallel "
           "products (reduce-scatter after a row-parallel product, "
           "all-gather before a column-parallel one)">,
    Option<"sequenceGatherQuant", "sequence-gather-quant", "std::string",
           /*default=*/"\"\"",
           "With sequence parallelism: all-gather f32 and bf16 activations "
           "along the tokens quantized in this format "
           "(quantize, an asynchronous byte all-gather, dequantize: "
           "fp8_e4m3_tensor, mxfp8_rowwise, ...; empty: not quantized)">,
  ];
  let statistics = [
    Statistic<"numShardedOps", "sharded-ops",
              "Ops that compute on this rank's part only">,
    Statistic<"numAllReduces", "all-reduces",
              "Tensor-parallel all-reduces inserted">,
    Statistic<"numAllGathers", "all-gathers",
              "Sequence-parallel all-gathers inserted">,
    Statistic<"numReduceScatters", "reduce-scatters",
              "Sequence-parallel reduce-scatters inserted">,
    Statistic<"numQuantizedGathers", "quantized-gathers",
              "Sequence-parallel all-gathers quantized (of the all-gathers)">,
  ];
}

def FSDPPartition : Pass<"fsdp-partition", "ModuleOp"> {
  let summary = "Turn one rank's step with full-size parameters into the sharded SPMD program";
  let description = [{
    For every function with `fsdp.layout` arguments: each sharded parameter
    argument becomes this rank's padded slot (`fsdp.global_type` records the
    full type); its uses read an `fsdp.param_gather`. With
    reshard-after-forward (the default) uses that the loss depends on read a
    forward gather and the others (backward) read a second gather placed
    before the first of them, so the forward copy can be freed in between;
    the parameters of the root unit (`fsdp.unit` equal to `root-unit`, the
    PyTorch frontend's unit of the parameters outside every other unit) keep
    their forward gather for the backward, as FSDP2 does not reshard its
    root module after the forward (it would be gathered again at once).
    Every result marked `fsdp.grad_of = i` goes through `fsdp.grad_reduce`
    and becomes the reduced gradient's slot. `Replicate`-only parameters keep
    their type and get an all-reduced (DDP) gradient.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"reduceOp", "reduce-op", "::mlir::fsdp::ReduceKind",
           /*default=*/"::mlir::fsdp::ReduceKind::avg",
           "Gradient reduction", [{FSDP_GRADIENT_REDUCE_VALUES}]>,
    Option<"gradScale", "grad-scale", "double", /*default=*/"0.0",
           "Multiply summed gradients by this finite factor (needs "
           "reduce-op=sum; 0 = off)">,
    Option<"paramDtype", "param-dtype", "::mlir::fsdp::FloatDtype",
           /*default=*/"::mlir::fsdp::FloatDtype::none",
           "Cast float shards to this element type before gathering",
           [{FSDP_FLOAT_DTYPE_VALUES}]>,
    Option<"reduceDtype", "reduce-dtype", "::mlir::fsdp::FloatDtype",
           /*default=*/"::mlir::fsdp::FloatDtype::none",
           "Element type the gradient reduction runs in",
           [{FSDP_FLOAT_DTYPE_VALUES}]>,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Free gathered parameters after forward and gather again for backward">,
    Option<"rootUnit", "root-unit", "std::string", /*default=*/"\"root\"",
           "FSDP unit (fsdp.unit) kept unsharded from the forward to the "
           "backward, as FSDP2's root module; empty: reshard every unit">,
    Option<"allReduceLoss", "all-reduce-loss", "bool", /*default=*/"false",
           "All-reduce the loss to the mean over all data-parallel ranks">,
    Option<"unevenPolicy", "uneven-policy", "::mlir::fsdp::PolicyOverride",
           /*default=*/"::mlir::fsdp::PolicyOverride::layout",
           "Override every layout's uneven policy",
           [{FSDP_POLICY_OVERRIDE_VALUES}]>,
    Option<"accumulationSteps", "accumulation-steps", "int64_t",
           /*default=*/"1",
           "Gradient accumulation over this many micro-steps: also emit "
           "@<step>_accumulate, which adds its reduce-scattered gradients to "
           "running partial sums and skips the replicate all-reduce; @<step> "
           "then finishes the last micro-step and averages (1 to 2^20)">,
  ];
  let statistics = [
    Statistic<"numParameters", "parameters",
              "Parameter arguments that became shards">,
    Statistic<"numGathers", "param-gathers", "fsdp.param_gather ops created">,
    Statistic<"numGradients", "grad-reduces", "fsdp.grad_reduce ops created">,
  ];
}

def FSDPAutocast : Pass<"fsdp-autocast", "func::FuncOp"> {
  let summary = "Run contractions on 16-bit operands with f32 accumulation "
                "and store activations in 16 bits, keeping sums and "
                "exponentials in f32";
  let description = [{
    Mixed precision as FSDP2's `MixedPrecisionPolicy(param_dtype=bf16)`
    together with `torch.autocast` computes it, on linalg-on-tensors
    (`--fsdp-pipeline` runs it before fsdp-recompute and fsdp-partition, so
    recomputed ops are clones of decided ones; once partitioned, a
    contraction's rounding of a parameter folds into the 16-bit gather).
    Only f32 tensor ops change; `dtype` is the 16-bit type (bf16 or f16).
    The rule (docs/SEMANTICS.md, "Which ops run in which dtype"):

    * A contraction (`linalg.matmul`, `batch_matmul`, any op whose body is
      one multiply-accumulate over contraction dimensions) with f32 operands
      reads 16-bit operands (the gathered parameter's 16-bit value when it
      has one, else one rounding of the f32 operand), multiplies them
      exactly and accumulates in its f32 output; the result is rounded once
      to 16 bits (what cuBLAS does with a bf16 output and f32 compute).
    * A grouped product (`fsdp.grouped_matmul`,
      `fsdp.grouped_matmul_transpose_lhs`: sparse experts) with f32
      operands is a contraction too: it takes 16-bit operands and gives a
      16-bit result, which its lowering accumulates in f32 and rounds once.
    * A reduction (a `linalg.generic` with a reduction iterator that is not
      a contraction: norm statistics, softmax sums and maxima, the loss,
      bias and norm gradients) reads its operands widened to f32 and
      produces f32.
    * An elementwise `linalg.generic` (all iterators parallel) computes in
      f32 and stores its result in 16 bits, unless it must stay f32: its
      body calls `exp`/`log` (softmax, log-softmax, cross-entropy), a
      reduction or an f32 elementwise op reads it (directly or through
      reshapes, slices, transposes or broadcasts: what is summed or
      exponentiated is not rounded first), or every float tensor it reads
      is an f32 statistic (a reduction's result or such an op's, e.g. a
      LayerNorm's rsqrt(var + eps)).
    * Reshapes, slices, transposes, broadcasts and copies of a 16-bit value
      move 16-bit data. Every other op (collectives, tensor-level arith,
      fills, concatenations, results) reads f32 (a widening where the value
      is stored in 16 bits).

    The function signature does not change: parameter shards, gradients
    and the optimizer stay in their types (gradients are reduced in
    `reduce-dtype` by the collectives fsdp-expand-collectives built).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect"];
  let options = [
    Option<"dtype", "dtype", "::mlir::fsdp::AutocastDtype",
           /*default=*/"::mlir::fsdp::AutocastDtype::bf16",
           "16-bit float for contraction operands and stored activations",
           [{FSDP_AUTOCAST_DTYPE_VALUES}]>,
  ];
  let statistics = [
    Statistic<"numContractions", "contractions",
              "Contractions on 16-bit operands with f32 accumulation">,
    Statistic<"numGrouped", "grouped-products",
              "Grouped products on 16-bit operands with f32 accumulation">,
    Statistic<"numNarrowed", "narrowed-ops",
              "Elementwise ops whose result is stored in 16 bits">,
    Statistic<"numKeptF32", "f32-elementwise-ops",
              "Elementwise ops kept in f32 (exp/log, summed, statistics)">,
    Statistic<"numMoves", "narrowed-moves",
              "Reshapes, slices, transposes and broadcasts on 16-bit data">,
  ];
}

def FSDPExpandCollectives : Pass<"fsdp-expand-collectives", "func::FuncOp"> {
  let summary = "Rewrite parameter gathers and gradient reductions into flat collectives";
  let description = [{
    `fsdp.param_gather` becomes a flat 1-D `fsdp.all_gather` of the padded
    slot followed by its unpack: a view of the first `n` rows (Shard(0),
    `ceil` or even), per-slot narrowing (`balanced`, nested axes), chunk-cat
    along the dim (Shard(d > 0)) or the `[k, sf] -> [sf, k]` swap
    (StridedShard). `fsdp.grad_reduce` becomes the inverse pack, a flat
    `fsdp.reduce_scatter` and, for HSDP, an `fsdp.all_reduce` over the
    replicate axes (DDP: only the all-reduce). Every copy is an upstream
    tensor op, so all bytes moved are visible.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numGathers", "param-gathers", "fsdp.param_gather ops expanded">,
    Statistic<"numReductions", "grad-reduces", "fsdp.grad_reduce ops expanded">,
    Statistic<"numCollectives", "flat-collectives",
              "Flat collectives created">,
  ];
}

def FSDPBucketCollectives : Pass<"fsdp-bucket-collectives", "func::FuncOp"> {
  let summary = "Fuse flat collectives of one kind, group and dtype into buckets";
  let description = [{
    Runs on expanded IR. Flat collectives that `fsdp-expand-collectives`
    gave an origin (`fsdp.origin`: phase and unit) are grouped
    by kind, mesh group, element type, reduction and phase — never across
    any of them — and, in `unit` mode, by FSDP unit; groups are split
    greedily in program order at `bucket-bytes` and `max-count`. Each
    bucket becomes one collective over one flat buffer:

    * all-gather: per-rank input `concat_i(shard_i)` of length
      `L = sum L_i` (each `L_i` rounded up to `alignment`), the output
      viewed as `[k, L]`, parameter `i` the column block
      `[:, off_i : off_i + L_i]`;
    * reduce-scatter: input `[k, L]` whose row `j` is
      `concat_i(slot_j of pack_i)`, output `[L]` split per parameter;
    * with `member-layout`, all-gathers and reduce-scatters carry
      `members [L_0, ...]` instead: the gathered output holds member after
      member (parameter `i` the contiguous block of `k * L_i` elements at
      `k * off_i`), and the reduce-scatter input is `concat_i(pack_i)`, so
      producers write their gradients in place and consumers read the
      gathered parameters where they landed. A member padded by
      `alignment` is still a strided view (copied);
    * all-reduce: `concat_i(x_i)`, split after. An HSDP all-reduce bucket
      whose members are exactly a reduce-scatter bucket's outputs reads
      that bucket's output directly (no copy).

    A bucket of one collective is left as it is (no copies).
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"mode", "mode", "::mlir::fsdp::BucketMode",
           /*default=*/"::mlir::fsdp::BucketMode::unit",
           "How collectives are grouped", [{FSDP_BUCKET_MODE_VALUES}]>,
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"30 * 1024 * 1024",
           "Largest bucket, in bytes of one rank's input (XLA's combiner default)">,
    Option<"maxCount", "max-count", "int64_t", /*default=*/"256",
           "Most collectives in one bucket">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"1",
           "Round every member's length up to a multiple of this many "
           "elements (1 to 2^20)">,
    Option<"memberLayout", "member-layout", "bool", /*default=*/"false",
           "Order gather outputs and reduce-scatter inputs member after "
           "member (`members [...]`): every member contiguous, no unpack "
           "or pack copies">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Buckets created">,
    Statistic<"numBucketed", "bucketed-collectives",
              "Collectives fused into buckets">,
  ];
}

def FSDPSchedule : Pass<"fsdp-schedule", "func::FuncOp"> {
  let summary = "Split collectives into start/wait to overlap them with compute";
  let description = [{
    Every flat collective with an origin (`fsdp.origin`) becomes `*_start` +
    `fsdp.wait`. The wait
    stays where the result is first needed. Parameter all-gathers start
    `prefetch` gathers early (the next unit's gather is in flight while the
    current unit computes), unless that would keep more than
    `memory-limit` bytes of gathered parameters alive, in which case the
    start moves later until it fits. Gradient reduce-scatters and
    all-reduces start as soon as their inputs exist and are waited on just
    before the step returns.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "How many all-gathers ahead to start">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes of gathered parameters allowed alive at once (0 = no limit)">,
  ];
  let statistics = [
    Statistic<"numStarted", "started-collectives",
              "Collectives split into start and wait">,
    Statistic<"numPrefetched", "prefetched-gathers",
              "All-gathers started earlier than their program position">,
  ];
}

def FSDPCommReport : Pass<"fsdp-comm-report", "ModuleOp"> {
  let summary = "Report collectives, bytes on the wire, padding and peak "
                "gathered memory of every function, per rank";
  let description = [{
    An analysis: the IR is not changed. For every function with a body,
    prints per rank of its mesh the number of collectives by kind
    (`all_gather`, `reduce_scatter`, `all_reduce`, with their `*_start`
    forms and buffer forms; `fsdp.wait` is not a collective), the bytes each
    rank sends and receives (all_gather: `m` and `k*m` elements;
    reduce_scatter: `k*m` and `m`; all_reduce: `n` and `n`), the zero
    padding in the rank's parameter slots (from the arguments'
    `fsdp.layout` and `fsdp.global_type`: slot minus the rank's true
    shard), and the peak bytes of gathered parameters alive at once (a
    gathered buffer is alive from its all-gather or all-gather start to the
    last use of its result or of anything derived from it by waits,
    reshapes, slices, concatenations, transposes and float casts). Ranks
    differ only in padding.
  }];
  let options = [
    Option<"format", "format", "::mlir::fsdp::ReportFormat",
           /*default=*/"::mlir::fsdp::ReportFormat::text",
           "Report format", [{FSDP_REPORT_FORMAT_VALUES}]>,
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
  ];
}

def FSDPMemoryReport : Pass<"fsdp-memory-report", "ModuleOp"> {
  let summary = "Report every rank's static peak memory by kind: parameter "
                "shards, gathered parameters, activations, gradients, "
                "optimizer state";
  let description = [{
    An analysis of the partitioned (typically scheduled) tensor program: the
    IR is not changed. Every tensor value is a buffer of its type's bytes
    alive from its defining op to the last use of it or of a value sharing
    its buffer: views (reshapes, slices, casts, `fsdp.wait`) and
    destination-passing results written in place into an init that is not
    used afterwards share the buffer (an empty tensor holds no data, nor
    does a constant). Arguments are alive the whole step.
    Each buffer has one kind: parameter shards and optimizer state
    (arguments: `fsdp.layout`, `fsdp.state_of`/`fsdp.optim`, updated values
    `fsdp.update_of`), inputs (other arguments), gathered parameters
    (all-gather outputs, what unpacks them and their packed inputs),
    gradients (gradient collectives' outputs, what they were packed from,
    values computed from gradients only, accumulators, `fsdp.grad_of`
    results), activations (values the forward computes that the backward
    reads, and the recomputed ones, `fsdp.recompute`) and temporaries (the
    rest). Prints each kind's peak and the total peak with its breakdown;
    the buffers are the same on every rank (SPMD), the padding in the
    parameter slots differs per rank.
  }];
  let options = [
    Option<"format", "format", "::mlir::fsdp::ReportFormat",
           /*default=*/"::mlir::fsdp::ReportFormat::text",
           "Report format", [{FSDP_REPORT_FORMAT_VALUES}]>,
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
  ];
}

def FSDPQuantizeGathers : Pass<"fsdp-quantize-gathers", "func::FuncOp"> {
  let summary = "Quantize parameter all-gathers (FP8, MXFP8, NVFP4, FP8 blockwise)";
  let description = [{
    Runs on expanded IR, before bucketing. Every flat `fsdp.all_gather`
    with an origin (`fsdp.origin`) whose input is a parameter's shard (a
    function argument with `fsdp.layout`, possibly reshaped by
    `tensor.collapse_shape` or cast by `arith.truncf`/`arith.extf`) is
    quantized in `format`. With `split` (the default) it becomes
    `fsdp.quantize` (after `fsdp.quant_amax` and an all-reduce (max) of the
    amax for the per-tensor formats and NVFP4), a plain all-gather of the
    packets' bytes (i8, keeping the origin: `fsdp-bucket-collectives` and
    `fsdp-schedule` bucket and start it like any parameter gather) and
    `fsdp.dequantize`; without, one `fsdp.quantized_all_gather`. The
    shard's 2-D view is the argument's slot shape: `cols` = its last dim,
    `rows` = the product of the others. The gather records
    `fsdp.wire_bytes`, the bytes one rank sends (fsdprt_quant_wire_bytes of
    its shard).

    Left as they are: gathers of other phases or element types than the
    options select, parameters with fewer than `min-elements` elements
    (full size), and gathers whose input is not a parameter shard or whose
    shard does not block in the format (both with a remark).
  }];
  let options = [
    Option<"format", "format", "::mlir::fsdp::QuantFormat",
           /*default=*/"::mlir::fsdp::QuantFormat::fp8_e4m3_tensor",
           "Quantized format (every QuantFormat)">,
    Option<"minElements", "min-elements", "int64_t", /*default=*/"1024",
           "Leave parameters with fewer elements (full size) unquantized">,
    // Lists of strings, checked by the pass: MLIR's ListOption parses its
    // elements with a parser that never sees cl::values.
    ListOption<"dtypes", "dtypes", "std::string",
               "Element types to quantize: f32, bf16 (default both)">,
    ListOption<"phases", "phases", "std::string",
               "Gathers to quantize: forward, backward (default both)">,
    Option<"split", "split", "bool", /*default=*/"true",
           "Quantize, gather the bytes with a plain (bucketable, "
           "schedulable) all-gather, dequantize; false: one "
           "fsdp.quantized_all_gather">,
  ];
  let statistics = [
    Statistic<"numQuantized", "quantized-gathers",
              "All-gathers made quantized">,
  ];
}

def FSDPImportShard : Pass<"fsdp-import-shard", "ModuleOp"> {
  let summary = "Turn upstream shard dialect annotations on arguments into fsdp layouts";
  let description = [{
    Every argument annotated with `shard.shard %arg to %sharding` (the
    `shard.sharding` of a `shard.grid`, as upstream sharding propagation
    takes them) gets the `fsdp.layout` of that sharding: a dim split over
    grid axis `a` is `shard<dim>` on mesh axis `a`, an axis that splits no
    dim is `replicate`. The annotations are removed and every `shard.grid`
    becomes an `fsdp.mesh` of the same name and sizes. An annotated
    argument that no result is the gradient of is a frozen parameter when
    it is marked `fsdp.frozen` (it keeps the mark), else a data argument.
    Halo sizes, sharded dims offsets, dynamic grids, axes of one dim out of
    grid order, a second sharding of one argument, annotations of data
    arguments or of other values and shard collectives are diagnosed.
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
  let options = [
    ListOption<"axisNames", "axis-names", "std::string",
               "Names of the mesh axes, one per grid axis (default a0, a1, ...)">,
  ];
}

def FSDPOptimizer : Pass<"fsdp-optimizer", "ModuleOp"> {
  let summary = "Append the optimizer update of every parameter shard "
                "(SGD or AdamW, optional global-norm clipping)";
  let description = [{
    Runs on a partitioned step (after `fsdp-partition`, at any later stage
    before bufferization). For every function with `fsdp.grad_of` results,
    each reduced gradient slot updates its parameter's slot in place of
    returning it, with `torch.optim` single-tensor semantics:

    * `sgd`: weight decay `g += wd * p`, momentum `buf = m * buf +
      (1 - dampening) * g` (`buf = g` on the first step), nesterov
      `g += m * buf`, then `p -= lr * g`;
    * `adamw`: `p *= 1 - lr * wd`, `m = lerp(m, g, 1 - beta1)`,
      `v = beta2 * v + (1 - beta2) * g * g`, and
      `p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`
      with `t = step + 1` (bias corrections in f64).

    With `max-grad-norm > 0` the gradients are first clipped by their
    global norm (`torch.nn.utils.clip_grad_norm_`): sums of squares of the
    local slots (f64), all-reduced over the axes that shard each parameter
    (a parameter replicated on an axis is counted once), scaled by
    `min(1, max / (norm + 1e-6))`; the norm is returned as `grad_norm`.

    Appended arguments: `lr` and `step` (`tensor<f32>`, replicated), then
    per parameter its state (`momentum_buffer.<name>` for SGD with
    momentum; `exp_avg.<name>`, `exp_avg_sq.<name>` for AdamW) with the
    parameter's slot type and layout. Results: the loss and other results
    stay, the gradients are dropped (kept with `keep-grads`), then the
    updated parameters, the updated states, the incremented step and
    `grad_norm`; each fed-back result has `fsdp.update_of = <argument>`.
    The update runs in f32 (f64 for f64 parameters) and is rounded once to
    the parameter's type. docs/SEMANTICS.md §5.5.

    With `device-scalars` (what `fsdp-pipeline` sets for `compute=gpu`)
    the step's scalars never become host values: each parameter's sum of
    squares is a `tensor<1xf64>` of its own, a set of sharding axes adds
    its sums in parameter order before its all-reduce, the norm and the
    clipping coefficient, the incremented step and the terms that depend
    on `lr` and `step` are `linalg.generic` ops on 0-d tensors, and the
    updates read them as 0-d inputs. Lowered for a GPU, every one of them
    is a kernel and the step has no host synchronization; without the
    option they are host arithmetic on `tensor.extract`ed values (the CPU
    paths). The values are the same up to the summation order. The
    per-parameter sums of squares and updates are marked
    `fsdp.multi_tensor` ("sum_of_squares", "adamw", "sgd"): they are
    independent of each other, and `fsdp-gpu-multi-tensor` launches each
    kind together.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::fsdp::OptimizerKind",
           /*default=*/"::mlir::fsdp::OptimizerKind::sgd",
           "The update rule", [{FSDP_OPTIMIZER_VALUES}]>,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum factor (>= 0; 0 = no momentum buffer)">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening of the momentum (finite)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum (needs momentum > 0 and dampening = 0)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Weight decay (>= 0): L2 added to the gradient for SGD, "
           "decoupled for AdamW">,
    ListOption<"betas", "betas", "double",
               "AdamW coefficients beta1,beta2, each in [0, 1) "
               "(default 0.9,0.999)">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW term added to the denominator (>= 0)">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global 2-norm (> 0; 0 = no clipping)">,
    Option<"keepGrads", "keep-grads", "bool", /*default=*/"false",
           "Keep the reduced (unclipped) gradient results">,
    Option<"deviceScalars", "device-scalars", "bool", /*default=*/"false",
           "Compute the norm, the clipping coefficient, the step and the "
           "lr terms as ops on 0-d tensors instead of host scalars (no host "
           "read of a device value when lowered with compute=gpu)">,
  ];
  let statistics = [
    Statistic<"numUpdated", "updated-parameters",
              "Parameter shards given an update">,
  ];
}

def FSDPLowerIfs : Pass<"fsdp-lower-ifs", "func::FuncOp"> {
  let summary = "Lower the function-level scf.if ops to cf branches in linear time";
  let description = [{
    Every `scf.if` directly in a function body (and, once those are
    lowered, the ones that were nested in them) becomes a `cf.cond_br` to
    its then and else blocks, which branch to the block after it (its
    results become that block's arguments), as `convert-scf-to-cf` lowers
    it. `convert-scf-to-cf` splits the block through the dialect
    conversion's rewriter, which moves every operation after the `scf.if`
    one by one: quadratic in a block holding thousands of them (the run-time
    alias checks of the step's deallocations). Here a block's `scf.if` ops
    are lowered from its end, so each operation moves once. `scf.if` ops inside other regions (loop bodies) are left to
    `convert-scf-to-cf`, since those regions must stay single blocks.
  }];
  let dependentDialects = ["::mlir::cf::ControlFlowDialect"];
  let statistics = [
    Statistic<"numIfs", "ifs", "scf.if ops lowered">,
  ];
}

#endif // FSDP_TRANSFORMS_PASSES_TD

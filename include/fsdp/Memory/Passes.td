//===- Passes.td - buffer planning and deallocation ---*- tablegen -*-===//

#ifndef FSDP_MEMORY_PASSES_TD
#define FSDP_MEMORY_PASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPConstantGlobals : Pass<"fsdp-constant-globals", "ModuleOp"> {
  let summary = "Give every tensor constant its memref.global in program "
                "order, before bufferization";
  let description = [{
    One-shot bufferization with function boundaries bufferizes the
    functions that call no other in an order that depends on where they lie
    in memory (it iterates a map keyed by the functions' addresses), and it
    creates, names and places each tensor constant's `memref.global` when
    it meets the constant. The same step then lowered to the same globals
    in another order, under other names, from one run to the next.

    This pass runs right before `one-shot-bufferize` and creates the
    globals itself, walking the functions' `arith.constant`s of ranked
    tensor type in program order with upstream's own helper
    (`bufferization::getGlobalFor`: the same names, `__constant_<shape>`
    with a suffix for the second of a name, the same alignment and no
    memory space). Bufferization then finds each constant's global instead
    of creating one, so the globals' order and names follow the program.
    Constants of one value share one global, as before.
  }];
  let options = [
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "The globals' alignment (one-shot-bufferize's buffer-alignment, "
           "which must match for bufferization to find them)">
  ];
  let statistics = [
    Statistic<"numConstants", "constants",
              "Tensor constants whose global was created or found">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FSDPFoldSelfCopies : Pass<"fsdp-fold-self-copies"> {
  let summary = "Erase copies of a buffer's bytes onto themselves";
  let description = [{
    Runs after bufferization. A `memref.copy` whose source and target are
    views (through view-like ops) of the same buffer, both with a static,
    contiguous layout at the same offset and with as many elements of the
    same type, copies bytes onto themselves and is erased. Such copies are
    what a bucket member written in place through reshapes
    (`fsdp-pack-in-place`) bufferizes to: the slot seen through the
    producer's reshapes copied to the same slot seen as the bucket's slice,
    which canonicalization, comparing values, keeps.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
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

def FSDPMarkReadOnlyArgs : Pass<"fsdp-mark-read-only-args", "ModuleOp"> {
  let summary = "Mark the buffer arguments of each step that the step never "
                "writes (`fsdp.read_only`)";
  let description = [{
    Runs on bufferized steps, before `convert-fsdp-to-runtime` records
    their signatures. An entry is a function whose arguments or results
    have fsdp attributes. For each of its memref arguments the pass follows
    every alias (any result of type memref of an operation that takes an
    alias: views, casts, `extract_strided_metadata`'s base buffer) to its
    uses, and into the body of every function it is passed to by
    `func.call`. The argument is read-only, and gets the unit attribute
    `fsdp.read_only` (which `convert-fsdp-to-runtime` records in the
    module attribute `fsdp.read_only_args`, entry name -> argument indices,
    and the manifest as each port's `read_only`), when no use may write or
    free it:

    - an operation with memory effects reads it and neither writes nor
      frees it (`linalg` inputs, `memref.copy` sources, loads);
    - a buffer collective (`fsdp.buffer.*`) takes it as its input, not its
      output (an in-place all-reduce writes its input);
    - a `func.call` passes it to a function with a body in which the same
      holds for the argument; where that function may return it (traced
      back from its returned buffers), the call's result is an alias too.

    Anything else is a possible write: returning it from the entry,
    yielding it from a region, taking its address (`extract_aligned_pointer_as_index`, casts
    to LLVM types), an operation without memory effects that takes it, a
    call of a declaration. The runner slices a read-only argument's shard
    once per session instead of every step (docs/RUNTIME.md). An existing
    `fsdp.read_only` is recomputed.
  }];
  let statistics = [
    Statistic<"numReadOnly", "read-only-args",
              "Entry arguments marked fsdp.read_only">,
  ];
}

#endif // FSDP_MEMORY_PASSES_TD

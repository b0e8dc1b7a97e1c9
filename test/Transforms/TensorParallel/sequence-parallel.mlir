// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel=reduce-dtype=f64 | FileCheck %s --check-prefix=RDT
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-parallel=true" | FileCheck %s --check-prefix=OPT
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-gather-quant=fp8_e4m3_tensor" | FileCheck %s --check-prefix=QUANT
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-gather-quant=mxfp8_rowwise" | FileCheck %s --check-prefix=MX
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-gather-quant=fp8_e4m3_tensor" --fsdp-partition --fsdp-expand-collectives --fsdp-comm-report -o /dev/null | FileCheck %s --check-prefix=QREPORT
// RUN: not fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-gather-quant=fp7" 2>&1 | FileCheck %s --check-prefix=BADQ
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel --fsdp-partition --fsdp-expand-collectives --fsdp-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel --fsdp-partition --fsdp-expand-collectives --fsdp-comm-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON

// Sequence parallelism (fsdp.sequence_parallel on the step) on
// [dp = 2, tp = 2]: the row-parallel product's partial sum is
// reduce-scattered along the tokens (dim 0 of [4, 8]); the residual with
// the replicated input and the norm-like scale run on this rank's 2
// tokens (the input's part is a slice at the rank's offset, from the
// rank's index on the axis, an fsdp.axis_index at the function's start); the next
// column-parallel product gathers the tokens first; the scale's gradient,
// a sum over the split tokens, is all-reduced.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @block
// CHECK-SAME: %[[W1:[a-z0-9_]+]]: tensor<4x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}
// CHECK-SAME: %[[W2:[a-z0-9_]+]]: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>}
// CHECK-SAME: %[[W3:[a-z0-9_]+]]: tensor<4x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}
// CHECK-SAME: %[[G:[a-z0-9_]+]]: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>}
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x8xf32>
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<8xf32> {fsdp.grad_of = 3 : i64})
// CHECK-SAME: attributes {fsdp.sequence_parallel, fsdp.tp_local}
func.func @block(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                 %w3: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %g: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>},
                 %x: tensor<4x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<8xf32> {fsdp.grad_of = 3 : i64})
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  // The input's part for the residual: a slice at rank * 2, where the input
  // is (no collective for it, nor for the rank's index: fsdp.axis_index,
  // once, at the start).
  // CHECK-NEXT: %[[RANK:.*]] = fsdp.axis_index @mesh ["tp"]
  // CHECK: %[[OFF:.*]] = arith.muli %[[RANK]], %{{.*}} : index
  // CHECK: %[[XP:.*]] = tensor.extract_slice %[[X]][%[[OFF]], 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
  // CHECK-NOT: max :
  // Column-parallel on the replicated input: no gather.
  // CHECK: %[[H:.*]] = linalg.matmul{{.*}}ins(%[[X]], %[[W1]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x4xf32>)
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  // Row-parallel: its partial sum is reduce-scattered along the tokens.
  // CHECK: %[[YP:.*]] = linalg.matmul{{.*}}ins(%[[H]], %[[W2]] : tensor<4x4xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<4x8xf32>)
  // CHECK-NEXT: %[[Y:.*]] = fsdp.reduce_scatter %[[YP]] over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
  // RDT: arith.extf %{{.*}} : tensor<4x8xf32> to tensor<4x8xf64>
  // RDT-NEXT: fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<4x8xf64> -> tensor<2x8xf64>
  // RDT-NEXT: arith.truncf %{{.*}} : tensor<2x8xf64> to tensor<2x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  // The residual and the scale run on this rank's tokens.
  // CHECK: %[[R:.*]] = linalg.generic{{.*}}ins(%[[Y]], %[[XP]] : tensor<2x8xf32>, tensor<2x8xf32>) outs(%{{.*}} : tensor<2x8xf32>)
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%y, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e48 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  // CHECK: %[[S:.*]] = linalg.generic{{.*}}ins(%[[R]], %[[G]] : tensor<2x8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<2x8xf32>)
  %sc = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%r, %g : tensor<4x8xf32>, tensor<8xf32>) outs(%e48 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  // The next column-parallel product needs every token: one all-gather.
  // CHECK: %[[SW:.*]] = fsdp.all_gather %[[S]] over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
  // Quantized (TransformerEngine's gather_along_first_dim with FP8
  // inputs): each rank's [2, 8] block in FP8 with one scale over the axis.
  // QUANT-LABEL: func.func @block
  // QUANT: %[[QF:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<2x8xf32> into tensor<16xf32>
  // QUANT: %[[QA:.*]] = fsdp.quant_amax %[[QF]] : tensor<16xf32> -> tensor<1xf32>
  // QUANT: %[[QS:.*]] = fsdp.all_reduce %[[QA]] over @mesh ["tp"] max : tensor<1xf32> -> tensor<1xf32>
  // QUANT: %[[QP:.*]] = fsdp.quantize %[[QF]] amax %[[QS]] format fp8_e4m3_tensor shape [2, 8] : tensor<16xf32>, tensor<1xf32> -> tensor<20xi8>
  // QUANT: %[[QR:.*]], %[[QT:.*]] = fsdp.all_gather_start %[[QP]] over @mesh ["tp"] : tensor<20xi8> -> tensor<40xi8>
  // QUANT: %[[QB:.*]] = fsdp.wait %[[QR]], %[[QT]] : tensor<40xi8>
  // QUANT: %[[QG:.*]] = fsdp.dequantize %[[QB]] format fp8_e4m3_tensor shape [2, 8] : tensor<40xi8> -> tensor<32xf32>
  // QUANT: %[[QW:.*]] = tensor.expand_shape %[[QG]] {{\[}}[0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
  // QUANT: linalg.matmul{{.*}}ins(%[[QW]], %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>)
  // QUANT-NOT: fsdp.all_gather %
  // MXFP8 blocks 32 elements of a row: 8 features stay unquantized.
  // MX-LABEL: func.func @block
  // MX-NOT: fsdp.quantize
  // MX: fsdp.all_gather %{{.*}} over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
  // The report counts the quantized gather's 20 wire bytes (16 FP8 values
  // and the scale) and its 4-byte amax all-reduce as tensor-parallel.
  // QREPORT-LABEL: @block: mesh @mesh [dp = 2, tp = 2]
  // QREPORT: of which tensor-parallel: 5, sent 188 B, received 144 B
  // QREPORT-NEXT: all_gather: 1, sent 20 B, received 40 B
  // QREPORT-NEXT: reduce_scatter: 1, sent 128 B, received 64 B
  // QREPORT-NEXT: all_reduce: 3, sent 40 B, received 40 B
  // BADQ: error: fsdp-tensor-parallel: sequence-gather-quant: unknown format 'fp7'
  // CHECK: linalg.matmul{{.*}}ins(%[[SW]], %[[W3]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x4xf32>)
  %h3 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%sc, %w3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  // The loss sums over the sharded features: all-reduce.
  // CHECK: %[[LP:.*]] = linalg.reduce ins(%{{.*}} : tensor<4x4xf32>)
  // CHECK: fsdp.all_reduce %[[LP]] over @mesh ["tp"] sum : tensor<f32> -> tensor<f32>
  %loss = linalg.reduce ins(%h3 : tensor<4x8xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  // The scale's gradient (here: the sum of r over the tokens) sums over
  // the split tokens: all-reduced, as for a replicated_with_grad_allreduce
  // parameter.
  %e8 = tensor.empty() : tensor<8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  // CHECK: %[[DGP:.*]] = linalg.reduce ins(%[[R]] : tensor<2x8xf32>)
  // CHECK: fsdp.all_reduce %[[DGP]] over @mesh ["tp"] sum : tensor<8xf32> -> tensor<8xf32>
  %dg = linalg.reduce ins(%r : tensor<4x8xf32>) outs(%z8 : tensor<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  return %loss, %dg : tensor<f32>, tensor<8xf32>
}
// REPORT-LABEL: @block: mesh @mesh [dp = 2, tp = 2]
// REPORT: of which tensor-parallel: 4

// -----

// [1, S, H] activations: the row-parallel product into the [1, 4, 8]
// result, then a per-token op that reads the labels-like index tensor by
// linalg.index (sliced to this rank's part) and a log-probability table it
// captures, split along the same tokens.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @tokens_dim1
// A 1-D value has no [rows, features] view: its gather stays plain.
// QUANT-LABEL: func.func @tokens_dim1
// QUANT: fsdp.all_gather %{{.*}} over @mesh ["tp"] : tensor<2xf32> -> tensor<4xf32>
func.func @tokens_dim1(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                       %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                       %x: tensor<1x4x8xf32>, %labels: tensor<4xi64>)
    -> (tensor<4xf32>) attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%x, %w1 : tensor<1x4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<1x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x4x8xf32>
  // CHECK: %[[LAB:.*]] = tensor.extract_slice %{{.*}}[%{{.*}}] [2] [1] : tensor<4xi64> to tensor<2xi64>
  // The partial sum waits through the collapse to [4, 8] (a reshape of a
  // partial sum is the partial sum of the reshape), then is scattered
  // along dim 0, with no transposes.
  // CHECK: %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
  // CHECK-NEXT: fsdp.reduce_scatter %[[C]] over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%h, %w2 : tensor<1x4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<1x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x4x8xf32>
  %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  // CHECK: linalg.generic{{.*}}ins(%[[LAB]] : tensor<2xi64>) outs(%{{.*}} : tensor<2xf32>)
  // CHECK: tensor.extract %{{.*}} : tensor<2x8xf32>
  // CHECK: fsdp.all_gather %{{.*}} over @mesh ["tp"] : tensor<2xf32> -> tensor<4xf32>
  %picked = linalg.generic {indexing_maps = [affine_map<(t) -> (t)>, affine_map<(t) -> (t)>], iterator_types = ["parallel"]}
       ins(%labels : tensor<4xi64>) outs(%e4 : tensor<4xf32>) {
  ^bb0(%l: i64, %o: f32):
    %t = linalg.index 0 : index
    %c = arith.index_cast %l : i64 to index
    %v = tensor.extract %flat[%t, %c] : tensor<4x8xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %picked : tensor<4xf32>
}

// -----

// Without sequence parallelism: the input gradients of two column-parallel
// layers that read one input are partial sums; the backward adds them, and
// one all-reduce resolves the sum (Megatron's single `f` backward
// all-reduce instead of one per layer).
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @merged_partials
// With the pass option (no attribute needed) the merged sum is
// reduce-scattered along the tokens, and the result gathered.
// OPT-LABEL: func.func @merged_partials
// OPT: %[[S:.*]] = linalg.generic
// OPT: %[[RS:.*]] = fsdp.reduce_scatter %[[S]] over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
// OPT: fsdp.all_gather %[[RS]] over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
func.func @merged_partials(%wa: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                           %wb: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                           %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %ha = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %wa : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %hb = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %wb : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[PA:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<4x8xf32>)
  // CHECK-NOT: fsdp.all_reduce
  // CHECK: %[[PB:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<4x8xf32>)
  // CHECK-NOT: fsdp.all_reduce
  // CHECK: %[[S:.*]] = linalg.generic{{.*}}ins(%[[PA]], %[[PB]] : tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: fsdp.all_reduce %[[S]] over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NOT: fsdp.all_reduce
  %da = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%ha, %wa : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %db = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%hb, %wb : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%da, %db : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// The backward of a row-parallel product with sequence parallelism: dY
// (here the forward's reduce-scattered output) feeds dX = dY W and, through
// the transpose the exported backward makes, dW = dY^T H. Both need every
// token; one all-gather of dY serves both (dY^T is the transpose of the
// gathered dY).
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @row_backward
// QUANT-LABEL: func.func @row_backward
// QUANT: fsdp.all_gather_start %{{.*}} over @mesh ["tp"] : tensor<20xi8> -> tensor<40xi8>
// QUANT: fsdp.dequantize %{{.*}} format fp8_e4m3_tensor shape [2, 8] : tensor<40xi8> -> tensor<32xf32>
// CHECK: %[[Y:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[YW:.*]] = fsdp.all_gather %[[Y]] over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[YT:.*]] = linalg.transpose ins(%[[YW]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<8x4xf32>) permutation = [1, 0]
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[DW:.*]] = linalg.matmul{{.*}}ins(%[[YT]], %[[H:.*]] : tensor<8x4xf32>, tensor<4x4xf32>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK-NOT: fsdp.all_gather
// CHECK: linalg.matmul{{.*}}ins(%[[YW]], %{{.*}} : tensor<4x8xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK-NOT: fsdp.all_gather
// CHECK: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<8x4xf32>
// REPORT-LABEL: @row_backward: mesh @mesh [dp = 2, tp = 2]
// The tensor-parallel collectives by kind: the scatter of the product,
// the one gather of dY, the loss's all-reduce.
// REPORT: every rank: {{.*}}all_gather 3,
// REPORT: of which tensor-parallel: 3, sent 196 B, received 196 B
// REPORT-NEXT: all_gather: 1, sent 64 B, received 128 B
// REPORT-NEXT: reduce_scatter: 1, sent 128 B, received 64 B
// REPORT-NEXT: all_reduce: 1, sent 4 B, received 4 B
// JSON: "name": "row_backward"
// JSON: "tensor_parallel": {
// JSON-NEXT: "count": 3,
// JSON-NEXT: "bytes_sent": 196,
// JSON-NEXT: "bytes_received": 196,
// JSON-NEXT: "collectives": {
// JSON-NEXT: "all_gather": {
// JSON-NEXT: "count": 1,
// JSON-NEXT: "bytes_sent": 64,
// JSON-NEXT: "bytes_received": 128
// JSON: "reduce_scatter": {
// JSON-NEXT: "count": 1,
// JSON-NEXT: "bytes_sent": 128,
// JSON-NEXT: "bytes_received": 64
// JSON: "all_reduce": {
// JSON-NEXT: "count": 1,
// JSON-NEXT: "bytes_sent": 4,
// JSON-NEXT: "bytes_received": 4
func.func @row_backward(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                        %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                        %x: tensor<4x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x8xf32> {fsdp.grad_of = 1 : i64})
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e88 = tensor.empty() : tensor<8x8xf32>
  %z88 = linalg.fill ins(%zero : f32) outs(%e88 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e84 = tensor.empty() : tensor<8x4xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %yt = linalg.transpose ins(%y : tensor<4x8xf32>) outs(%e84 : tensor<8x4xf32>) permutation = [1, 0]
  %dw = linalg.matmul ins(%yt, %h : tensor<8x4xf32>, tensor<4x8xf32>) outs(%z88 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %dx = linalg.matmul ins(%y, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%dx : tensor<4x8xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  return %loss, %dw : tensor<f32>, tensor<8x8xf32>
}

// -----

// An LM head the plan leaves whole (a replicated parameter with a
// gradient, read through a transpose) after a row-parallel product: the
// head [16, 8] is larger than its gathered input [4, 8], so the input is
// all-gathered and every rank computes the logits, the loss and the
// head's gradient whole (as DTensor's recipe gathers the LM head's input):
// no all-reduce of the loss or of the head's gradient, whose backward
// product reads the same gathered input.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @lm_head
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<16x8xf32> {fsdp.grad_of = 2 : i64})
// CHECK-NOT: fsdp.axis_index
// CHECK: %[[Y:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[YW:.*]] = fsdp.all_gather %[[Y]] over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[LOGITS:.*]] = linalg.matmul ins(%[[YW]], %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NOT: fsdp.
// CHECK: %[[DW:.*]] = linalg.matmul ins(%{{.*}}, %[[YW]] : tensor<16x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<16x8xf32>)
// CHECK-NOT: fsdp.
// CHECK: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<16x8xf32>
// REPORT-LABEL: @lm_head: mesh @mesh [dp = 2, tp = 2]
// REPORT: of which tensor-parallel: 2,
// REPORT-NEXT: all_gather: 1,
// REPORT-NEXT: reduce_scatter: 1,
// REPORT-NEXT: all_reduce: 0,
func.func @lm_head(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                   %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                   %head: tensor<16x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>},
                   %x: tensor<4x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<16x8xf32> {fsdp.grad_of = 2 : i64})
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e816 = tensor.empty() : tensor<8x16xf32>
  %headT = linalg.transpose ins(%head : tensor<16x8xf32>) outs(%e816 : tensor<8x16xf32>) permutation = [1, 0]
  %e416 = tensor.empty() : tensor<4x16xf32>
  %z416 = linalg.fill ins(%zero : f32) outs(%e416 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %logits = linalg.matmul ins(%y, %headT : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z416 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%logits : tensor<4x16xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  // A data-dependent output gradient, transposed for dW = dL^T @ y.
  %dl = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%logits : tensor<4x16xf32>) outs(%e416 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %e164 = tensor.empty() : tensor<16x4xf32>
  %dlT = linalg.transpose ins(%dl : tensor<4x16xf32>) outs(%e164 : tensor<16x4xf32>) permutation = [1, 0]
  %e168 = tensor.empty() : tensor<16x8xf32>
  %z168 = linalg.fill ins(%zero : f32) outs(%e168 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %dw = linalg.matmul ins(%dlT, %y : tensor<16x4xf32>, tensor<4x8xf32>) outs(%z168 : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %loss, %dw : tensor<f32>, tensor<16x8xf32>
}

// -----

// The same with a replicated parameter smaller than its gathered input
// (a [2, 8] gate, 16 elements, against 32): the product runs on this
// rank's tokens, the loss over them and the gate's gradient (sums over
// the split tokens) are all-reduced.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @small_head
// CHECK: %[[Y:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[LOGITS:.*]] = linalg.matmul ins(%[[Y]], %{{.*}} : tensor<2x8xf32>, tensor<8x2xf32>) outs(%{{.*}} : tensor<2x2xf32>)
// CHECK: fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum : tensor<f32> -> tensor<f32>
// CHECK: %[[DWP:.*]] = linalg.matmul ins(%{{.*}}, %[[Y]] : tensor<2x2xf32>, tensor<2x8xf32>) outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[DW:.*]] = fsdp.all_reduce %[[DWP]] over @mesh ["tp"] sum : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<2x8xf32>
func.func @small_head(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                      %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                      %gate: tensor<2x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>},
                      %x: tensor<4x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<2x8xf32> {fsdp.grad_of = 2 : i64})
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e82 = tensor.empty() : tensor<8x2xf32>
  %gateT = linalg.transpose ins(%gate : tensor<2x8xf32>) outs(%e82 : tensor<8x2xf32>) permutation = [1, 0]
  %e42 = tensor.empty() : tensor<4x2xf32>
  %z42 = linalg.fill ins(%zero : f32) outs(%e42 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %logits = linalg.matmul ins(%y, %gateT : tensor<4x8xf32>, tensor<8x2xf32>) outs(%z42 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%logits : tensor<4x2xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  %e24 = tensor.empty() : tensor<2x4xf32>
  %lT = linalg.transpose ins(%logits : tensor<4x2xf32>) outs(%e24 : tensor<2x4xf32>) permutation = [1, 0]
  %e28 = tensor.empty() : tensor<2x8xf32>
  %z28 = linalg.fill ins(%zero : f32) outs(%e28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %dw = linalg.matmul ins(%lT, %y : tensor<2x4xf32>, tensor<4x8xf32>) outs(%z28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %loss, %dw : tensor<f32>, tensor<2x8xf32>
}

// -----

// A quantized sequence-parallel gather is asynchronous: the amax
// all-reduce, the quantize and the start of the byte all-gather where the
// split value is made; the wait and the dequantize where the gathered value
// is first read, so that the work between (here `%v`, which does not need
// it) overlaps with the communication.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @overlap
// CHECK: fsdp.reduce_scatter
// CHECK-NEXT: %[[YW:.*]] = fsdp.all_gather %{{.*}} over @mesh ["tp"] : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: linalg.generic
// CHECK: linalg.matmul{{.*}}ins(%[[YW]], %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>)
// QUANT-LABEL: func.func @overlap
// QUANT: %[[Y:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<4x8xf32> -> tensor<2x8xf32>
// QUANT-NEXT: %[[F:.*]] = tensor.collapse_shape %[[Y]] {{\[}}[0, 1]] : tensor<2x8xf32> into tensor<16xf32>
// QUANT-NEXT: %[[A:.*]] = fsdp.quant_amax %[[F]] : tensor<16xf32> -> tensor<1xf32>
// QUANT-NEXT: %[[GA:.*]] = fsdp.all_reduce %[[A]] over @mesh ["tp"] max : tensor<1xf32> -> tensor<1xf32>
// QUANT-NEXT: %[[P:.*]] = fsdp.quantize %[[F]] amax %[[GA]] format fp8_e4m3_tensor shape [2, 8] : tensor<16xf32>, tensor<1xf32> -> tensor<20xi8>
// QUANT-NEXT: %[[REQ:.*]], %[[PEND:.*]] = fsdp.all_gather_start %[[P]] over @mesh ["tp"] : tensor<20xi8> -> tensor<40xi8>
// QUANT-NEXT: %[[V:.*]] = linalg.generic
// QUANT: %[[B:.*]] = fsdp.wait %[[REQ]], %[[PEND]] : tensor<40xi8>
// QUANT-NEXT: %[[D:.*]] = fsdp.dequantize %[[B]] format fp8_e4m3_tensor shape [2, 8] : tensor<40xi8> -> tensor<32xf32>
// QUANT-NEXT: %[[YW:.*]] = tensor.expand_shape %[[D]] {{\[}}[0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
// QUANT-NEXT: linalg.matmul{{.*}}ins(%[[YW]], %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>)
// QUANT-NOT: fsdp.quantized_all_gather
// The report counts what the blocking form moves: 20 wire bytes gathered
// and a 4-byte amax all-reduce (with the loss's), tensor-parallel.
// QREPORT-LABEL: @overlap: mesh @mesh [dp = 2, tp = 2]
// QREPORT: of which tensor-parallel: 4, sent 156 B, received 112 B
// QREPORT-NEXT: all_gather: 1, sent 20 B, received 40 B
// QREPORT-NEXT: reduce_scatter: 1, sent 128 B, received 64 B
// QREPORT-NEXT: all_reduce: 2, sent 8 B, received 8 B
func.func @overlap(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                   %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                   %w3: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                   %x: tensor<4x8xf32>, %u: tensor<4x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4x8xf32>)
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%u : tensor<4x8xf32>) outs(%e48 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %h3 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%y, %w3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%h3 : tensor<4x8xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  return %loss, %v : tensor<f32>, tensor<4x8xf32>
}

// -----

// One value per token ([N, 1], a vocabulary-parallel cross-entropy's sum of
// exponentials over split logits) is all-reduced, not reduce-scattered
// along the tokens and gathered back: one collective, the same bytes.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @per_token_sum
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4x1xf32>)
// CHECK-NEXT: ^bb0
// CHECK: %[[S:.*]] = fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum : tensor<4x1xf32> -> tensor<4x1xf32>
// CHECK-NOT: fsdp.
// CHECK: return %[[S]]
func.func @per_token_sum(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                         %x: tensor<4x8xf32>) -> tensor<4x1xf32>
    attributes {fsdp.sequence_parallel} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>], iterator_types = ["parallel", "reduction"]}
       ins(%h : tensor<4x8xf32>) outs(%z1 : tensor<4x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %x2 = math.exp %a : f32
    %r = arith.addf %x2, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  return %s : tensor<4x1xf32>
}

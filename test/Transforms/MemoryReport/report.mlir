// RUN: fsdp-opt %s -split-input-file --fsdp-memory-report -o %t.mlir | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-memory-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// The IR is not changed.
// RUN: fsdp-opt %s -split-input-file | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --check-prefix=IR < %t.mlir

// One parameter of 4x4 f32 sharded over 2 ranks (slot 2x4: 32 B), a data
// input of 64 B. Op by op (index: buffer, bytes, live range, kind):
//   1 all_gather   G 64 [1, 3]  gathered (the expand is a view)
//   3 mulf         H 64 [3, 9]  activation (the backward reads it)
//   4 tanh         T 64 [4, 8]  temporary (forward only)
//   6 empty        (no data: the fill gets its own buffer)
//   7 fill         L  4 [7, 14] the reduce writes into it in place; the
//                               loss is returned, not kept
//   9 mulf         D 64 [9, 11] gradient (packed into the reduce-scatter)
//  11 reduce_scatter R 32 [11, 14] gradient
// Peaks: gradients 96 at op 11 (D and R), temporaries 68 (T and L). Total
// 32 + 64 + 64 + 64 + 4 = 228 B, first at op 7.

fsdp.mesh @mesh [shard = 2]

// CHECK-LABEL: @step: mesh @mesh [shard = 2], 2 ranks
// CHECK-NEXT:   every rank, peak of each kind:
// CHECK-NEXT:     parameter shards: 32 B
// CHECK-NEXT:     gathered parameters: 64 B
// CHECK-NEXT:     activations: 64 B
// CHECK-NEXT:     gradients: 96 B
// CHECK-NEXT:     optimizer state: 0 B
// CHECK-NEXT:     inputs: 64 B
// CHECK-NEXT:     temporaries: 68 B
// CHECK-NEXT:   peak total: 228 B (at op #7, linalg.fill)
// CHECK-NEXT:     parameter shards: 32 B
// CHECK-NEXT:     gathered parameters: 0 B
// CHECK-NEXT:     activations: 64 B
// CHECK-NEXT:     gradients: 0 B
// CHECK-NEXT:     optimizer state: 0 B
// CHECK-NEXT:     inputs: 64 B
// CHECK-NEXT:     temporaries: 68 B
// CHECK-NEXT:   rank 0: peak total 228 B, parameter shards 32 B (padding 0 B)
// CHECK-NEXT:   rank 1: peak total 228 B, parameter shards 32 B (padding 0 B)
// JSON:      "name": "step",
// JSON:      "ranks": 2,
// JSON-NEXT: "peak_bytes": {
// JSON-NEXT:   "parameter_shards": 32,
// JSON-NEXT:   "gathered_parameters": 64,
// JSON-NEXT:   "activations": 64,
// JSON-NEXT:   "gradients": 96,
// JSON-NEXT:   "optimizer_state": 0,
// JSON-NEXT:   "inputs": 64,
// JSON-NEXT:   "temporaries": 68
// JSON-NEXT: },
// JSON-NEXT: "peak_total_bytes": 228,
// JSON-NEXT: "peak_total_op": 7,
// IR-LABEL: func.func @step
// IR: fsdp.all_gather
func.func @step(%w: tensor<2x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4x4xf32>, fsdp.name = "w"},
                %x: tensor<4x4xf32> {fsdp.name = "x"})
    -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
        tensor<2x4xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.w", fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4x4xf32>}) {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %g = fsdp.all_gather %flat over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u">} : tensor<8xf32> -> tensor<16xf32>
  %gw = tensor.expand_shape %g [[0, 1]] output_shape [4, 4] : tensor<16xf32> into tensor<4x4xf32>
  %h = arith.mulf %x, %gw : tensor<4x4xf32>
  %t = math.tanh %h : tensor<4x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%t : tensor<4x4xf32>) outs(%init : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %d = arith.mulf %h, %x : tensor<4x4xf32>
  %df = tensor.collapse_shape %d [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %r = fsdp.reduce_scatter %df over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u">} : tensor<16xf32> -> tensor<8xf32>
  %re = tensor.expand_shape %r [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  return %loss, %re : tensor<f32>, tensor<2x4xf32>
}

// -----

// Uneven: 5 rows over 2 ranks (ceil): slots of 3 rows, rank 1 holds 2 true
// rows and 1 row of padding (16 B). A gradient accumulator is a gradient;
// a function without a mesh or loss has only inputs and temporaries.

fsdp.mesh @mesh [shard = 2]

// CHECK-LABEL: @uneven: mesh @mesh [shard = 2], 2 ranks
// CHECK:          parameter shards: 48 B
// CHECK-NEXT:     gathered parameters: 0 B
// CHECK-NEXT:     activations: 0 B
// CHECK-NEXT:     gradients: 48 B
// CHECK:        rank 0: peak total {{.*}}, parameter shards 48 B (padding 0 B)
// CHECK-NEXT:   rank 1: peak total {{.*}}, parameter shards 48 B (padding 16 B)
func.func @uneven(%w: tensor<3x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<5x4xf32>},
                  %acc: tensor<3x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<5x4xf32>, fsdp.accumulator})
    -> tensor<3x4xf32> {
  return %acc : tensor<3x4xf32>
}

// CHECK-LABEL: @plain: no mesh, 1 rank
// CHECK:          inputs: 16 B
// CHECK-NEXT:     temporaries: 16 B
// CHECK:        peak total: 32 B
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = math.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

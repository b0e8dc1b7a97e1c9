// RUN: fsdp-opt %s -split-input-file --fsdp-recompute | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-recompute=units=all | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-recompute=units=b | FileCheck %s --check-prefix=ONLY-B
// The recompute reads the parameter in the backward: fsdp-partition gives it
// the backward gather.
// RUN: fsdp-opt %s -split-input-file --fsdp-recompute --fsdp-partition | FileCheck %s --check-prefix=PART

// Two units in a chain. Unit a's h1 and t1 are internal (only a's forward
// reads them); the backward reads h1 (c1), so it is recomputed right before
// c1 from a's inputs (x and w0). a's output s1 is read by b's forward: it is
// kept (b's input), never recomputed. p reads no parameter and only b's
// forward reads it: it is b's. b's p and t2 are read by the backward: both
// are recomputed before their first backward use, from the kept s1.

fsdp.mesh @mesh [shard = 2]

// CHECK-LABEL: func.func @chain
// ONLY-B-LABEL: func.func @chain
// PART-LABEL: func.func @chain
// PART:      %[[F1:.*]] = fsdp.param_gather %arg1 {{.*}} phase  forward
// PART:      %[[B1:.*]] = fsdp.param_gather %arg1 {{.*}} phase  backward
// PART-NEXT: arith.mulf %{{.*}}, %[[B1]] {fsdp.recompute = "b"}
// PART:      %[[B0:.*]] = fsdp.param_gather %arg0 {{.*}} phase  backward
// PART-NEXT: arith.mulf %arg2, %[[B0]] {fsdp.recompute = "a"}
func.func @chain(%w0: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "a"},
                 %w1: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "b"},
                 %x: tensor<4x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4x4xf32> {fsdp.grad_of = 0 : i64},
        tensor<4x4xf32> {fsdp.grad_of = 1 : i64}) {
  // Forward, unchanged.
  // CHECK:      %[[H1:.*]] = arith.mulf %arg2, %arg0 : tensor<4x4xf32>
  // CHECK-NEXT: %[[T1:.*]] = math.tanh %[[H1]]
  // CHECK-NEXT: %[[S1:.*]] = arith.mulf %[[T1]], %arg0
  // CHECK-NEXT: %[[P:.*]] = math.exp %[[S1]]
  // CHECK-NEXT: %[[H2:.*]] = arith.mulf %[[P]], %arg1
  // CHECK-NEXT: %[[T2:.*]] = math.tanh %[[H2]]
  %h1 = arith.mulf %x, %w0 : tensor<4x4xf32>
  %t1 = math.tanh %h1 : tensor<4x4xf32>
  %s1 = arith.mulf %t1, %w0 : tensor<4x4xf32>
  %p = math.exp %s1 : tensor<4x4xf32>
  %h2 = arith.mulf %p, %w1 : tensor<4x4xf32>
  %t2 = math.tanh %h2 : tensor<4x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // CHECK: %[[LOSS:.*]] = linalg.reduce ins(%[[T2]]
  %loss = linalg.reduce ins(%t2 : tensor<4x4xf32>) outs(%init : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // Backward. b's recompute comes first: what p and t2 need.
  // CHECK:      %[[ONE:.*]] = arith.constant dense<1.0
  // CHECK-NEXT: %[[RP:.*]] = math.exp %[[S1]] {fsdp.recompute = "b"}
  // CHECK-NEXT: %[[RH2:.*]] = arith.mulf %[[RP]], %arg1 {fsdp.recompute = "b"}
  // CHECK-NEXT: %[[RT2:.*]] = math.tanh %[[RH2]] {fsdp.recompute = "b"}
  // CHECK-NEXT: %[[SQ2:.*]] = arith.mulf %[[RT2]], %[[RT2]] : tensor<4x4xf32>
  // CHECK-NEXT: %[[D2:.*]] = arith.subf %[[ONE]], %[[SQ2]]
  // The output s1 is read as it is.
  // CHECK-NEXT: %[[DP:.*]] = arith.mulf %[[D2]], %[[RP]] : tensor<4x4xf32>
  // CHECK-NEXT: arith.mulf %[[DP]], %[[S1]] : tensor<4x4xf32>
  // CHECK:      %[[RH1:.*]] = arith.mulf %arg2, %arg0 {fsdp.recompute = "a"}
  // CHECK-NEXT: math.tanh %[[RH1]] : tensor<4x4xf32>
  // CHECK-NOT:  fsdp.recompute
  // CHECK:      return %[[LOSS]]
  // ONLY-B:     %[[H1:.*]] = arith.mulf %arg2, %arg0 : tensor<4x4xf32>
  // ONLY-B:     math.tanh %{{.*}} {fsdp.recompute = "b"}
  // ONLY-B-NOT: fsdp.recompute = "a"
  // ONLY-B:     math.tanh %[[H1]] : tensor<4x4xf32>
  %one = arith.constant dense<1.0> : tensor<4x4xf32>
  %sq2 = arith.mulf %t2, %t2 : tensor<4x4xf32>
  %d2 = arith.subf %one, %sq2 : tensor<4x4xf32>
  %dp = arith.mulf %d2, %p : tensor<4x4xf32>
  %gw1 = arith.mulf %dp, %s1 : tensor<4x4xf32>
  %dt1 = arith.mulf %d2, %w1 : tensor<4x4xf32>
  %c1 = math.tanh %h1 : tensor<4x4xf32>
  %sq1 = arith.mulf %c1, %c1 : tensor<4x4xf32>
  %d1 = arith.subf %one, %sq1 : tensor<4x4xf32>
  %dh1 = arith.mulf %dt1, %d1 : tensor<4x4xf32>
  %gw0 = arith.mulf %dh1, %x : tensor<4x4xf32>
  return %loss, %gw0, %gw1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The constants, empties and fills a recomputed op uses are cloned with it
// (a shared fill would keep its buffer alive from the forward). The
// collapse of %x reads no parameter and only b's forward reads it: it is
// b's, and recomputed too (the backward reads it).

fsdp.mesh @mesh [shard = 2]

// CHECK-LABEL: func.func @fills
func.func @fills(%w: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "b"},
                 %x: tensor<2x2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4x4xf32> {fsdp.grad_of = 0 : i64}) {
  // CHECK:      %[[X:.*]] = tensor.collapse_shape %arg1
  // CHECK:      %[[Z:.*]] = linalg.matmul ins(%[[X]], %arg0
  %xf = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x2x4xf32> into tensor<4x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %z = linalg.matmul ins(%xf, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%z : tensor<4x4xf32>) outs(%init : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // Each clone sits right before its first user.
  // CHECK:      %[[E:.*]] = tensor.empty() {fsdp.recompute = "b"}
  // CHECK-NEXT: %[[C:.*]] = arith.constant {fsdp.recompute = "b"} 0.0
  // CHECK-NEXT: %[[F:.*]] = linalg.fill {fsdp.recompute = "b"} ins(%[[C]] : f32) outs(%[[E]]
  // CHECK-NEXT: %[[RX:.*]] = tensor.collapse_shape %arg1 {{.*}} {fsdp.recompute = "b"}
  // CHECK-NEXT: %[[RZ:.*]] = linalg.matmul {fsdp.recompute = "b"} ins(%[[RX]], %arg0 {{.*}} outs(%[[F]]
  // CHECK-NEXT: %[[G:.*]] = arith.mulf %[[RZ]], %[[RX]]
  // CHECK-NEXT: return %{{.*}}, %[[G]]
  %g = arith.mulf %z, %xf : tensor<4x4xf32>
  return %loss, %g : tensor<f32>, tensor<4x4xf32>
}

// -----

// A unit whose values the backward does not use is left as it is, and so
// is a function without units.

fsdp.mesh @mesh [shard = 2]

// CHECK-LABEL: func.func @nothing_kept
// CHECK-NOT: fsdp.recompute
func.func @nothing_kept(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "b"},
                        %x: tensor<4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.grad_of = 0 : i64}) {
  %h = arith.mulf %x, %w : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%h : tensor<4xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss, %x : tensor<f32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @no_units
// CHECK-NOT: fsdp.recompute
func.func @no_units(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = math.tanh %x : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// A tensor-parallel collective inside a unit's forward (the all-reduce after
// a row-parallel product) runs again in the recomputed forward, as
// Megatron's recompute does: every rank clones the same collective.

fsdp.mesh @mesh [shard = 2, tp = 2]

// CHECK-LABEL: func.func @tp_collective
// CHECK:      %[[H:.*]] = arith.mulf %arg1, %arg0
// CHECK-NEXT: %[[S:.*]] = fsdp.all_reduce %[[H]] over @mesh ["tp"] sum
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[S]]
// CHECK:      %[[RH:.*]] = arith.mulf %arg1, %arg0 {fsdp.recompute = "b"}
// CHECK-NEXT: %[[RS:.*]] = fsdp.all_reduce %[[RH]] over @mesh ["tp"] sum {{.*}}fsdp.recompute = "b"
// CHECK-NEXT: %[[RT:.*]] = math.tanh %[[RS]] {fsdp.recompute = "b"}
// CHECK-NEXT: arith.mulf %[[RT]], %arg1
func.func @tp_collective(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>, fsdp.unit = "b"},
                         %x: tensor<4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.grad_of = 0 : i64}) {
  %h = arith.mulf %x, %w : tensor<4xf32>
  %s = fsdp.all_reduce %h over @mesh ["tp"] sum : tensor<4xf32> -> tensor<4xf32>
  %t = math.tanh %s : tensor<4xf32>
  %c = arith.constant 0 : index
  %e = tensor.extract %t[%c] : tensor<4xf32>
  %l = tensor.from_elements %e : tensor<f32>
  %g = arith.mulf %t, %x : tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// RUN: fsdp-opt %s --fsdp-partition | FileCheck %s --check-prefixes=CHECK,RESHARD
// RUN: fsdp-opt %s --fsdp-partition=reshard-after-forward=false | FileCheck %s --check-prefixes=CHECK,KEEP

// A two-layer linear MLP step with a squared-error loss, written with
// upstream ops. Forward = what the loss depends on. l0.weight is needed by
// the forward only (its gradient needs x, not the weight); l1.weight is also
// needed by the backward (dh = dp @ W1).
//
// With reshard-after-forward (the default), l1.weight is gathered again for
// the backward, right before its first backward use, so the forward copy can
// be freed in between. With reshard-after-forward=false the one forward
// gather serves both.

#x_wT = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
#aT_b = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
#id2 = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

fsdp.mesh @mesh [shard = 4]
func.func @mlp(%w0: tensor<6x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "l0"},
               %w1: tensor<4x6xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "l1"},
               %x: tensor<2x8xf32>, %y: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x8xf32> {fsdp.grad_of = 0}, tensor<4x6xf32> {fsdp.grad_of = 1}) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  // Forward.
  %e0 = tensor.empty() : tensor<2x6xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %h = linalg.matmul indexing_maps = #x_wT ins(%x, %w0 : tensor<2x8xf32>, tensor<6x8xf32>) outs(%f0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %p = linalg.matmul indexing_maps = #x_wT ins(%h, %w1 : tensor<2x6xf32>, tensor<4x6xf32>) outs(%f1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %d = arith.subf %p, %y : tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<f32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id2, #all], iterator_types = ["reduction", "reduction"]}
      ins(%d : tensor<2x4xf32>) outs(%f2 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // Backward.
  %twos = linalg.fill ins(%two : f32) outs(%e1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %dp = arith.mulf %d, %twos : tensor<2x4xf32>
  %e3 = tensor.empty() : tensor<4x6xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %dw1 = linalg.matmul indexing_maps = #aT_b ins(%dp, %h : tensor<2x4xf32>, tensor<2x6xf32>) outs(%f3 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %dh = linalg.matmul ins(%dp, %w1 : tensor<2x4xf32>, tensor<4x6xf32>) outs(%f0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %e4 = tensor.empty() : tensor<6x8xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw0 = linalg.matmul indexing_maps = #aT_b ins(%dh, %x : tensor<2x6xf32>, tensor<2x8xf32>) outs(%f4 : tensor<6x8xf32>) -> tensor<6x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<6x8xf32>, tensor<4x6xf32>
}

// Slots: 6 rows over 4 -> 2 (ceil), 4 rows over 4 -> 1.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<2x8xf32> {fsdp.global_type = tensor<6x8xf32>
// CHECK-SAME: %[[W1:[^:]*]]: tensor<1x6xf32> {fsdp.global_type = tensor<4x6xf32>
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<2x8xf32> {{.*}}, tensor<1x6xf32>

// Each forward gather sits right before the matmul that reads it.
// CHECK:      %[[F0:.*]] = linalg.fill {{.*}} -> tensor<2x6xf32>
// CHECK-NEXT: %[[G0:.*]] = fsdp.param_gather %[[W0]] layout <@mesh, [shard<0>]> phase forward {unit = "l0"} : tensor<2x8xf32> -> tensor<6x8xf32>
// CHECK-NEXT: %[[H:.*]] = linalg.matmul {{.*}} ins(%{{.*}}, %[[G0]] :
// CHECK:      linalg.fill {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[G1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase forward {unit = "l1"} : tensor<1x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: linalg.matmul {{.*}} ins(%[[H]], %[[G1]] :

// The backward gather of l1.weight lands after dW1 (which does not read the
// weight) and right before dh, its first backward use.
// CHECK:           %[[DW1:.*]] = linalg.matmul {{.*}} -> tensor<4x6xf32>
// RESHARD-NEXT:    %[[B1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase backward {unit = "l1"} : tensor<1x6xf32> -> tensor<4x6xf32>
// RESHARD-NEXT:    %[[DH:.*]] = linalg.matmul ins(%{{.*}}, %[[B1]] : tensor<2x4xf32>, tensor<4x6xf32>)
// KEEP-NEXT:       %[[DH:.*]] = linalg.matmul ins(%{{.*}}, %[[G1]] : tensor<2x4xf32>, tensor<4x6xf32>)
// CHECK-NOT:       fsdp.param_gather
// CHECK:           %[[DW0:.*]] = linalg.matmul {{.*}} ins(%[[DH]], %{{.*}} :
// CHECK-NEXT:      %[[R0:.*]] = fsdp.grad_reduce %[[DW0]] layout <@mesh, [shard<0>]> avg {unit = "l0"} : tensor<6x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:      %[[R1:.*]] = fsdp.grad_reduce %[[DW1]] layout <@mesh, [shard<0>]> avg {unit = "l1"} : tensor<4x6xf32> -> tensor<1x6xf32>
// CHECK-NEXT:      return %{{.*}}, %[[R0]], %[[R1]] : tensor<f32>, tensor<2x8xf32>, tensor<1x6xf32>

// RUN: fsdp-opt %s -split-input-file --fsdp-partition | FileCheck %s --check-prefixes=CHECK,KEEP
// RUN: fsdp-opt %s -split-input-file --fsdp-partition=root-unit=head | FileCheck %s --check-prefixes=CHECK,KEEPHEAD
// RUN: fsdp-opt %s -split-input-file --fsdp-partition="root-unit=" | FileCheck %s --check-prefixes=CHECK,RESHARD

// The root unit (root-unit, "root" by default: the PyTorch frontend's unit
// of the parameters outside every other unit) is not resharded after the
// forward, as FSDP2 keeps its root module: the forward gather of
// head.weight also serves the backward. l0's forward-only weight has one
// gather either way. With root-unit= (empty) every unit is resharded: the
// backward gathers head.weight again before its first backward use.

#x_wT = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
#aT_b = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
#id2 = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @root_head(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<2x8xf32>
// CHECK-SAME: %[[W1:[^:]*]]: tensor<1x6xf32>
func.func @root_head(%w0: tensor<6x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "l0"},
                     %w1: tensor<4x6xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "root"},
                     %x: tensor<2x8xf32>, %y: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x8xf32> {fsdp.grad_of = 0}, tensor<4x6xf32> {fsdp.grad_of = 1}) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e0 = tensor.empty() : tensor<2x6xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  // CHECK: fsdp.param_gather %[[W0]] layout <@mesh, [shard<0>]> phase forward {unit = "l0"}
  %h = linalg.matmul indexing_maps = #x_wT ins(%x, %w0 : tensor<2x8xf32>, tensor<6x8xf32>) outs(%f0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK: %[[G1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase forward {unit = "root"}
  // CHECK-NEXT: linalg.matmul {{.*}} ins(%{{.*}}, %[[G1]] :
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
  %twos = linalg.fill ins(%two : f32) outs(%e1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %dp = arith.mulf %d, %twos : tensor<2x4xf32>
  %e3 = tensor.empty() : tensor<4x6xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x6xf32>) -> tensor<4x6xf32>
  // CHECK: linalg.matmul {{.*}} -> tensor<4x6xf32>
  %dw1 = linalg.matmul indexing_maps = #aT_b ins(%dp, %h : tensor<2x4xf32>, tensor<2x6xf32>) outs(%f3 : tensor<4x6xf32>) -> tensor<4x6xf32>
  // KEEP-NEXT: linalg.matmul ins(%{{.*}}, %[[G1]] : tensor<2x4xf32>, tensor<4x6xf32>)
  // KEEPHEAD-NEXT: %[[B1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase backward {unit = "root"}
  // KEEPHEAD-NEXT: linalg.matmul ins(%{{.*}}, %[[B1]] : tensor<2x4xf32>, tensor<4x6xf32>)
  // RESHARD-NEXT: %[[B1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase backward {unit = "root"}
  // RESHARD-NEXT: linalg.matmul ins(%{{.*}}, %[[B1]] : tensor<2x4xf32>, tensor<4x6xf32>)
  // CHECK-NOT: fsdp.param_gather
  // CHECK: return
  %dh = linalg.matmul ins(%dp, %w1 : tensor<2x4xf32>, tensor<4x6xf32>) outs(%f0 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %e4 = tensor.empty() : tensor<6x8xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw0 = linalg.matmul indexing_maps = #aT_b ins(%dh, %x : tensor<2x6xf32>, tensor<2x8xf32>) outs(%f4 : tensor<6x8xf32>) -> tensor<6x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<6x8xf32>, tensor<4x6xf32>
}

// -----

// root-unit names any unit: here "head", which keeps its forward gather
// under root-unit=head only.
#x_wT = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
#id2 = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @named_head(
func.func @named_head(%w: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "head"},
                      %x: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK: %[[G:.*]] = fsdp.param_gather %{{.*}} phase forward {unit = "head"}
  %p = linalg.matmul indexing_maps = #x_wT ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<f32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id2, #all], iterator_types = ["reduction", "reduction"]}
      ins(%p : tensor<2x4xf32>) outs(%f2 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // A use outside the forward (the loss does not depend on it).
  // KEEP: %[[B:.*]] = fsdp.param_gather %{{.*}} phase backward {unit = "head"}
  // KEEP-NEXT: linalg.matmul {{.*}} ins(%{{.*}}, %[[B]] :
  // RESHARD: %[[B:.*]] = fsdp.param_gather %{{.*}} phase backward {unit = "head"}
  // RESHARD-NEXT: linalg.matmul {{.*}} ins(%{{.*}}, %[[B]] :
  // KEEPHEAD-NOT: fsdp.param_gather
  // KEEPHEAD: linalg.matmul {{.*}} ins(%{{.*}}, %[[G]] :
  %q = linalg.matmul indexing_maps = #x_wT ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %loss, %q : tensor<f32>, tensor<2x4xf32>
}

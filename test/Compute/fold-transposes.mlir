// RUN: fsdp-opt %s -split-input-file --fsdp-fold-transposes | FileCheck %s

// x @ w.T as PyTorch exports it: the transpose is folded into the matmul,
// which reads w with a transposed map.
// CHECK-DAG: #[[X:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[W:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[Y:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK-NOT: linalg.transpose
  // CHECK: linalg.generic {indexing_maps = [#[[X]], #[[W]], #[[Y]]], iterator_types = ["parallel", "parallel", "reduction"]}
  // CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<16x8xf32>)
  %e = tensor.empty() : tensor<8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%x, %wt : tensor<4x8xf32>, tensor<8x16xf32>) outs(%y : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// A transpose with another use stays for that use; the folded consumer
// reads the source. A 3-D permutation composes with the consumer's map.
// CHECK-DAG: #[[P:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-LABEL: func.func @shared
func.func @shared(%a: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<4x2x3xf32>) {
  // CHECK: %[[T:.*]] = linalg.transpose
  // CHECK: linalg.generic {indexing_maps = [#[[P]], #{{.*}}]
  // CHECK-SAME: ins(%arg0 : tensor<2x3x4xf32>)
  %e = tensor.empty() : tensor<4x2x3xf32>
  %t = linalg.transpose ins(%a : tensor<2x3x4xf32>) outs(%e : tensor<4x2x3xf32>) permutation = [2, 0, 1]
  %n = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<4x2x3xf32>) outs(%e : tensor<4x2x3xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.negf %x : f32
    linalg.yield %y : f32
  } -> tensor<4x2x3xf32>
  return %t, %n : tensor<4x2x3xf32>, tensor<4x2x3xf32>
}

// RUN: fsdp-opt %s -split-input-file --fsdp-fuse-elementwise | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// An elementwise chain feeding a row reduction becomes one op.
// CHECK-LABEL: func.func @exp_sum
func.func @exp_sum(%x: tensor<4x8xf32>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: linalg.generic
  // CHECK-SAME: iterator_types = ["parallel", "reduction"]
  // CHECK: math.exp
  // CHECK: arith.addf
  // CHECK-NOT: linalg.generic
  %e = tensor.empty() : tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = math.exp %a : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (k, n)>
#y = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// A contraction keeps its multiply-accumulate body: the producer of its
// input is not fused into it.
// CHECK-LABEL: func.func @into_contraction
func.func @into_contraction(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK: math.tanh
  // CHECK: linalg.generic
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: arith.mulf
  // CHECK-NEXT: arith.addf
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.tanh %a : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%t, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%y : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// A zero fill shared by two matmuls is duplicated, one fill of its own
// empty tensor per matmul (each accumulates into its own buffer, no copy);
// a fill with one use and a fill of a function argument stay as they are.
// CHECK-LABEL: func.func @shared_fill
func.func @shared_fill(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK: %[[Z:.*]] = arith.constant 0.0
  // CHECK: %[[E1:.*]] = tensor.empty() : tensor<4x16xf32>
  // CHECK: %[[F1:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E1]] : tensor<4x16xf32>)
  // CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x16xf32>
  // CHECK: %[[F2:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E2]] : tensor<4x16xf32>)
  // CHECK: linalg.matmul ins({{.*}}) outs(%[[F2]] : tensor<4x16xf32>)
  // CHECK: linalg.matmul ins({{.*}}) outs(%[[F1]] : tensor<4x16xf32>)
  // CHECK: %[[F3:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%{{.*}} : tensor<4x16xf32>)
  // CHECK-NOT: linalg.fill
  // CHECK: return {{.*}}, %[[F3]], %[[F3]]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = linalg.fill ins(%zero : f32) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m1, %m2, %g, %g : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A fill nothing uses (the segments that read it fill their own) is not
// duplicated; it is dead.
// CHECK-LABEL: func.func @unused_fill
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32>)
func.func @unused_fill(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NOT: linalg.fill
  // CHECK: return %[[A]]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

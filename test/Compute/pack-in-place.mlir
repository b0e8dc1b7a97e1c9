// RUN: fsdp-opt %s -split-input-file --fsdp-pack-in-place | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-pack-in-place --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --fsdp-fold-self-copies --canonicalize | FileCheck %s --check-prefix=BUF
// RUN: fsdp-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=COPY

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0) -> (d0)>

// A bucket of two parameters rounded to bf16: each rounding writes its slot
// of the bucket (the 2-D one through the inverse of its reshape), and the
// bucket is the chain of insertions into the slices written.
// CHECK-LABEL: func.func @pack
// CHECK: %[[B:.*]] = tensor.empty() : tensor<9xbf16>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[B]][0] [6] [1]
// CHECK: %[[E0:.*]] = tensor.expand_shape %[[S0]] {{\[\[}}0, 1]] output_shape [2, 3]
// CHECK: %[[W:.*]] = linalg.generic {{.*}} outs(%[[E0]] : tensor<2x3xbf16>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[W]]
// CHECK: %[[B1:.*]] = tensor.insert_slice %[[C]] into %[[B]][0] [6] [1]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[B1]][6] [3] [1]
// CHECK: %[[V:.*]] = linalg.generic {{.*}} outs(%[[S1]] : tensor<3xbf16>)
// CHECK: %[[B2:.*]] = tensor.insert_slice %[[V]] into %[[B1]][6] [3] [1]
// CHECK-NOT: tensor.concat
// CHECK: return %[[B2]]
// Bufferized, the bucket is one allocation and nothing is copied.
// BUF-LABEL: func.func @pack
// BUF-COUNT-1: memref.alloc
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return
// Without the pass, each member is copied into the bucket.
// COPY-LABEL: func.func @pack
// COPY-COUNT-2: memref.copy
func.func @pack(%w: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<9xbf16> {
  %0 = tensor.empty() : tensor<2x3xbf16>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<2x3xf32>) outs(%0 : tensor<2x3xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3xbf16>
  %c = tensor.collapse_shape %1 [[0, 1]] : tensor<2x3xbf16> into tensor<6xbf16>
  %2 = tensor.empty() : tensor<3xbf16>
  %3 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%b : tensor<3xf32>) outs(%2 : tensor<3xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3xbf16>
  %r = tensor.concat dim(0) %c, %3 : (tensor<6xbf16>, tensor<3xbf16>) -> tensor<9xbf16>
  return %r : tensor<9xbf16>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0) -> (d0)>

// Gradients of a unit packed along dimension 1 ([1, N], a reduce-scatter
// bucket): a reduction from a fill writes its slot (the fill fills the
// slot); a function argument and a value with another use are copied in
// where the concat was.
// CHECK-LABEL: func.func @grads
// CHECK-SAME: (%[[X:.*]]: tensor<4x2xf32>, %[[G:.*]]: tensor<1x3xf32>, %[[H:.*]]: tensor<2xf32>)
// CHECK: %[[B:.*]] = tensor.empty() : tensor<1x7xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[B]][0, 3] [1, 2] [1, 1]
// CHECK: %[[SC:.*]] = tensor.collapse_shape %[[S]]
// CHECK: %[[F:.*]] = linalg.fill {{.*}} outs(%[[SC]] : tensor<2xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} outs(%[[F]] : tensor<2xf32>)
// CHECK: %[[SUME:.*]] = tensor.expand_shape %[[SUM]]
// CHECK: %[[B1:.*]] = tensor.insert_slice %[[SUME]] into %[[B]][0, 3] [1, 2] [1, 1]
// CHECK: %[[B2:.*]] = tensor.insert_slice %[[G]] into %[[B1]][0, 0] [1, 3] [1, 1]
// CHECK: %[[B3:.*]] = tensor.insert_slice %{{.*}} into %[[B2]][0, 5] [1, 2] [1, 1]
// CHECK: return %[[B3]], %{{.*}} :
// BUF-LABEL: func.func @grads
// BUF-COUNT-2: memref.copy
// BUF-NOT: memref.copy
// BUF: return
func.func @grads(%x: tensor<4x2xf32>, %g: tensor<1x3xf32>, %h: tensor<2xf32>) -> (tensor<1x7xf32>, tensor<2xf32>) {
  %zero = arith.constant 0.0 : f32
  %0 = tensor.empty() : tensor<2xf32>
  %1 = linalg.fill ins(%zero : f32) outs(%0 : tensor<2xf32>) -> tensor<2xf32>
  %2 = linalg.generic {indexing_maps = [#map, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<4x2xf32>) outs(%1 : tensor<2xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  %e = tensor.expand_shape %2 [[0, 1]] output_shape [1, 2] : tensor<2xf32> into tensor<1x2xf32>
  %3 = tensor.empty() : tensor<2xf32>
  %4 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%h : tensor<2xf32>) outs(%3 : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2xf32>
  %e2 = tensor.expand_shape %4 [[0, 1]] output_shape [1, 2] : tensor<2xf32> into tensor<1x2xf32>
  %r = tensor.concat dim(1) %g, %e, %e2 : (tensor<1x3xf32>, tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x7xf32>
  return %r, %4 : tensor<1x7xf32>, tensor<2xf32>
}

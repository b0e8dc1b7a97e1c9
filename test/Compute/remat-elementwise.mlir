// RUN: fsdp-opt %s -split-input-file --fsdp-remat-elementwise | FileCheck %s

// GELU's shape: the forward computes t = tanh(x) and u = 1 + t from x; a
// collective ends the forward's segment; the backward reads x, t and u.
// Both are recomputed from x in the backward, before their first reader
// there (u's clone reads t's clone), and the forward's ops stay for the
// forward's own reader.
fsdp.mesh @mesh [shard = 2]
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @gelu_like
func.func @gelu_like(%x: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %c1 = arith.constant 1.0 : f32
  // CHECK: %[[T:.*]] = linalg.generic
  // CHECK: math.tanh
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.tanh %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // CHECK: %[[U:.*]] = linalg.generic {{.*}} ins(%[[T]] :
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%t : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %c1 : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // CHECK: fsdp.all_reduce %[[U]]
  %s = fsdp.all_reduce %u over @mesh ["shard"] sum : tensor<8xf32> -> tensor<8xf32>
  // The backward: g * x + g * u * t.
  // CHECK: linalg.generic {{.*}} ins(%{{.*}}, %arg0 :
  %gx = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%g, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // CHECK: %[[T2:.*]] = linalg.generic {{.*}} ins(%arg0 :
  // CHECK: math.tanh
  // CHECK: %[[U2:.*]] = linalg.generic {{.*}} ins(%[[T2]] :
  // CHECK: arith.addf
  // CHECK: linalg.generic {{.*}} ins(%arg1, %[[U2]] :
  %gu = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%g, %u : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[T2]] :
  %gut = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%gu, %t : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.mulf %a, %b : f32
    %r2 = arith.addf %r, %a : f32
    linalg.yield %r2 : f32
  } -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%gx, %gut : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // CHECK-NOT: math.tanh
  // CHECK: return
  return %s, %sum : tensor<8xf32>, tensor<8xf32>
}

// -----

// The backward does not read the forward value's input (y) otherwise:
// recomputing t there would keep y alive instead of t, so t stays. A
// reduction (not elementwise) is not recomputed either.
fsdp.mesh @mesh [shard = 2]
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @input_not_read
func.func @input_not_read(%x: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  // CHECK: %[[T:.*]] = linalg.generic
  // CHECK: math.tanh
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.tanh %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %s = fsdp.all_reduce %t over @mesh ["shard"] sum : tensor<8xf32> -> tensor<8xf32>
  // CHECK: fsdp.all_reduce
  // CHECK-NOT: math.tanh
  // CHECK: linalg.generic {{.*}} ins(%arg1, %[[T]] :
  %gt = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%g, %t : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %s, %gt : tensor<8xf32>, tensor<8xf32>
}

// -----

// Equal elementwise ops (autocast's rounding of one value for two
// products, each into an empty tensor of its own) become one; an op with
// other attributes (a recompute clone) stays.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @equal_casts
func.func @equal_casts(%g: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %e0 = tensor.empty() : tensor<8xbf16>
  // CHECK: %[[A:.*]] = linalg.generic
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%g : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8xbf16>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%g : tensor<8xf32>) outs(%e1 : tensor<8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8xbf16>
  // CHECK: %[[C:.*]] = linalg.generic {{.*}} attrs = {fsdp.recompute}
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%g : tensor<8xf32>) outs(%e1 : tensor<8xbf16>) attrs = {fsdp.recompute} {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8xbf16>
  // CHECK: %[[D:.*]] = arith.truncf %arg0
  // CHECK-NOT: arith.truncf %arg0
  %d = arith.truncf %g : tensor<8xf32> to tensor<8xbf16>
  %d2 = arith.truncf %g : tensor<8xf32> to tensor<8xbf16>
  // CHECK: %[[S:.*]] = arith.addf %[[D]], %[[D]]
  // CHECK: return %[[A]], %[[A]], %[[C]], %[[S]]
  %ab = arith.addf %d, %d2 : tensor<8xbf16>
  return %a, %b, %c, %ab : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// A parameter rounded to bf16 once for the forward's bucket and packed
// again into the backward's: the backward's packing rounds it again from
// the parameter (an argument, live for the whole step), so no rounded copy
// is kept between the gathers and each rounding can write its own bucket.
fsdp.mesh @mesh [shard = 2]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @bucket_member
// CHECK-SAME: (%[[W:.*]]: tensor<2x3xf32>, %[[V:.*]]: tensor<3xf32>)
func.func @bucket_member(%w: tensor<2x3xf32>, %v: tensor<3xf32>) -> (tensor<9xbf16>, tensor<9xbf16>) {
  // CHECK: %[[B:.*]] = arith.truncf %[[V]]
  %b = arith.truncf %v : tensor<3xf32> to tensor<3xbf16>
  %e = tensor.empty() : tensor<2x3xbf16>
  // CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[W]] :
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<2x3xf32>) outs(%e : tensor<2x3xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3xbf16>
  // CHECK: %[[C:.*]] = tensor.collapse_shape %[[R]]
  %c = tensor.collapse_shape %r [[0, 1]] : tensor<2x3xbf16> into tensor<6xbf16>
  // CHECK: tensor.concat dim(0) %[[C]], %[[B]]
  %fwd = tensor.concat dim(0) %c, %b : (tensor<6xbf16>, tensor<3xbf16>) -> tensor<9xbf16>
  // CHECK: fsdp.all_gather
  %g = fsdp.all_gather %fwd over @mesh ["shard"] : tensor<9xbf16> -> tensor<18xbf16>
  // CHECK: %[[B2:.*]] = arith.truncf %[[V]]
  // CHECK: %[[R2:.*]] = linalg.generic {{.*}} ins(%[[W]] :
  // CHECK: arith.truncf
  // CHECK: %[[C2:.*]] = tensor.collapse_shape %[[R2]]
  // CHECK: tensor.concat dim(0) %[[B2]], %[[C2]]
  %bwd = tensor.concat dim(0) %b, %c : (tensor<3xbf16>, tensor<6xbf16>) -> tensor<9xbf16>
  return %fwd, %bwd : tensor<9xbf16>, tensor<9xbf16>
}

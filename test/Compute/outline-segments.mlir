// RUN: fsdp-opt %s -split-input-file --fsdp-outline-segments="min-ops=1" | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-outline-segments | FileCheck %s --check-prefix=DEFAULT
// RUN: fsdp-opt %s -split-input-file --fsdp-outline-segments="min-ops=1" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF

// The compute between collectives becomes one call per run; two runs that
// are the same code on other tensors share one function. Inputs come in
// first-use order, outputs are the values used after the run, constants
// are cloned in.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
func.func @step(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c2 = arith.constant 2.0 : f32
  // CHECK: %[[R0:.*]] = call @[[SEG:__fsdp_segment_[0-9]+]](%[[A]], %[[B]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<4xf32>
  %m0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %q = arith.mulf %p, %c2 : f32
    linalg.yield %q : f32
  } -> tensor<4xf32>
  // CHECK: %[[G0:.*]] = fsdp.all_reduce %[[R0]]
  %g0 = fsdp.all_reduce %m0 over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
  // The same code on other operands: the same function.
  // CHECK: %[[R1:.*]] = call @[[SEG]](%[[G0]], %[[A]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %m1 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%g0, %a : tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %q = arith.mulf %p, %c2 : f32
    linalg.yield %q : f32
  } -> tensor<4xf32>
  // CHECK: %[[G1:.*]] = fsdp.all_reduce %[[R1]]
  %g1 = fsdp.all_reduce %m1 over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
  // CHECK: return %[[G1]], %[[R1]]
  return %g1, %m1 : tensor<4xf32>, tensor<4xf32>
}
// CHECK: func.func private @[[SEG]](%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-SAME: fsdp.segment
// CHECK: arith.constant 2.000000e+00
// CHECK: tensor.empty
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]], %[[Y]] :
// CHECK: return
// CHECK-NOT: func.func private @__fsdp_segment

// The default threshold (8 ops) leaves these short runs in place.
// DEFAULT-LABEL: func.func @step
// DEFAULT-NOT: call
// DEFAULT-NOT: __fsdp_segment

// -----

// A run ends at an op with side effects; a run with several outputs
// returns each value used after it.
// CHECK-LABEL: func.func @effects
func.func @effects(%a: tensor<4xf32>, %m: memref<4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  // CHECK: %[[R:.*]]:2 = call @[[S:__fsdp_segment_[0-9]+]](%{{.*}}) : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %e = tensor.empty() : tensor<4xf32>
  %s = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %lo = tensor.extract_slice %s[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %hi = tensor.extract_slice %s[2] [2] [1] : tensor<4xf32> to tensor<2xf32>
  // CHECK: memref.store
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  memref.store %f, %m[%c0] : memref<4xf32>
  // CHECK: return %[[R]]#0, %[[R]]#1
  return %lo, %hi : tensor<2xf32>, tensor<2xf32>
}
// CHECK: func.func private @[[S]](
// CHECK: linalg.add
// CHECK-COUNT-2: tensor.extract_slice
// CHECK: return

// -----

// Views (slices, reshapes) of a value no run computes -- a gathered
// bucket, a block argument -- are not segment results: each segment that
// reads one takes the viewed value and makes the view itself (a result is
// a buffer of its own, so a returned view would be a copy). Views nothing
// outlined reads stay.
// CHECK-LABEL: func.func @bucket_views
// CHECK-SAME: (%[[B:.*]]: tensor<6xf32>,
func.func @bucket_views(%b: tensor<6xf32>, %m: memref<4xf32>) -> (tensor<2xf32>, tensor<2x2xf32>) {
  // CHECK-NOT: tensor.extract_slice %[[B]][0]
  // CHECK: %[[V:.*]] = tensor.extract_slice %[[B]][2] [4] [1]
  // CHECK: %[[V2:.*]] = tensor.expand_shape %[[V]]
  // CHECK: %[[R:.*]] = call @[[S:__fsdp_segment_[0-9]+]](%[[B]]) : (tensor<6xf32>) -> tensor<2xf32>
  %w = tensor.extract_slice %b[0] [2] [1] : tensor<6xf32> to tensor<2xf32>
  %v = tensor.extract_slice %b[2] [4] [1] : tensor<6xf32> to tensor<4xf32>
  %v2 = tensor.expand_shape %v [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
  %e = tensor.empty() : tensor<2xf32>
  %y = linalg.add ins(%w, %w : tensor<2xf32>, tensor<2xf32>) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  // CHECK: memref.store
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  memref.store %f, %m[%c0] : memref<4xf32>
  // CHECK: return %[[R]], %[[V2]]
  return %y, %v2 : tensor<2xf32>, tensor<2x2xf32>
}
// CHECK: func.func private @[[S]](%[[A:.*]]: tensor<6xf32>) -> tensor<2xf32>
// CHECK: %[[W:.*]] = tensor.extract_slice %[[A]][0] [2] [1]
// CHECK: %[[Y:.*]] = linalg.add ins(%[[W]], %[[W]] :
// CHECK: return %[[Y]]

// -----

// A parameter's slice of a bucket viewed as [1, N] is the 1-D slice it is,
// made in the segment that reads it: no result, no copy.
// CHECK-LABEL: func.func @unit_slice
// CHECK-SAME: (%[[B:.*]]: tensor<6xf32>,
// CHECK: call @[[S:__fsdp_segment_[0-9]+]](%[[B]]) : (tensor<6xf32>) -> tensor<2xf32>
// CHECK: func.func private @[[S]](%[[A:.*]]: tensor<6xf32>)
// CHECK-NOT: tensor.expand_shape
// CHECK: %[[W:.*]] = tensor.extract_slice %[[A]][2] [2] [1] : tensor<6xf32> to tensor<2xf32>
// CHECK-NOT: tensor.collapse_shape
// CHECK: linalg.add ins(%[[W]], %[[W]] :
// BUF-LABEL: func.func @unit_slice
// BUF-NOT: memref.copy
// BUF: func.func private @__fsdp_segment
// BUF-NOT: memref.copy
// BUF: return
func.func @unit_slice(%b: tensor<6xf32>, %m: memref<4xf32>) -> tensor<2xf32> {
  %x = tensor.expand_shape %b [[0, 1]] output_shape [1, 6] : tensor<6xf32> into tensor<1x6xf32>
  %s = tensor.extract_slice %x[0, 2] [1, 2] [1, 1] : tensor<1x6xf32> to tensor<1x2xf32>
  %w = tensor.collapse_shape %s [[0, 1]] : tensor<1x2xf32> into tensor<2xf32>
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  memref.store %f, %m[%c0] : memref<4xf32>
  %e = tensor.empty() : tensor<2xf32>
  %y = linalg.add ins(%w, %w : tensor<2xf32>, tensor<2xf32>) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Outlined functions are not outlined again; external functions are left
// alone.
// CHECK-LABEL: func.func private @ext
// CHECK-NOT: call
func.func private @ext(tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func private @done
// CHECK-NOT: call
func.func private @done(%a: tensor<4xf32>) -> tensor<4xf32> attributes {fsdp.segment} {
  %0 = tensor.empty() : tensor<4xf32>
  %1 = linalg.copy ins(%a : tensor<4xf32>) outs(%0 : tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A tensor.empty defined outside a run is cloned into it like a constant,
// never passed in: a shared empty tensor would be one buffer that several
// segments write in place and return.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @shared_empty
func.func @shared_empty(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %one = arith.constant 1.0 : f32
  // CHECK: %[[R0:.*]] = call @[[F:__fsdp_segment_[0-9]+]](%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
  %f0 = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.add ins(%a, %f0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %g = fsdp.all_reduce %s0 over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
  // CHECK: call @[[F]](%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
  %f1 = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.add ins(%g, %f1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %s1 : tensor<4xf32>
}
// CHECK: func.func private @[[F]](%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK: tensor.empty
// CHECK: linalg.fill
// CHECK: linalg.add

// -----

// Constants and empty tensors are cloned right before their first use in
// the segment, not at its top: each empty tensor becomes the buffer of the
// op that fills it, allocated there and not when the segment starts.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @first_use
func.func @first_use(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  // CHECK: call @[[F:__fsdp_segment_[0-9]+]]
  %f0 = linalg.fill ins(%one : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.add ins(%a, %f0 : tensor<4xf32>, tensor<4xf32>) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %f1 = linalg.fill ins(%two : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.mul ins(%s0, %f1 : tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %g = fsdp.all_reduce %s1 over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
  return %g : tensor<4xf32>
}
// CHECK: func.func private @[[F]](%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: arith.constant 1.000000e+00
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.add
// CHECK-NEXT: arith.constant 2.000000e+00
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.mul
// CHECK-NEXT: return

// -----

// A fill of a constant is rematerialized like a constant: each segment
// that uses it fills its own tensor, so no call passes the zero
// accumulator (which the segment writes in place, so bufferization would
// copy it before each call), and each destination use gets a fill of its
// own (one shared filled tensor written by two products would be copied
// for one of them).
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @shared_fill
// CHECK-SAME: (%[[A:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4x4xf32>)
// BUF-LABEL: func.func @shared_fill
// BUF-NOT: memref.copy
func.func @shared_fill(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK-NOT: linalg.fill
  // CHECK: %[[R0:.*]] = call @[[F:__fsdp_segment_[0-9]+]](%[[A]], %[[B]]) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%b, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %s0 = linalg.add ins(%m0, %m1 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: %[[G:.*]] = fsdp.all_reduce %[[R0]]
  %g = fsdp.all_reduce %s0 over @mesh ["shard"] sum : tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: %[[R1:.*]] = call @[[F]](%[[G]], %[[B]]) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%g, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = linalg.matmul ins(%b, %g : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %s1 = linalg.add ins(%m2, %m3 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: return %[[R1]]
  return %s1 : tensor<4x4xf32>
}
// Each product's fill right before it (its beta = 0 for the gemm call).
// CHECK: func.func private @[[F]](%[[X:.*]]: tensor<4x4xf32>, %[[Y:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: arith.constant 0.000000e+00
// CHECK-NEXT: %[[E0:.*]] = tensor.empty
// CHECK-NEXT: %[[Z0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] :
// CHECK-NEXT: linalg.matmul ins(%[[X]], %[[Y]] : {{.*}}) outs(%[[Z0]] :
// CHECK-NEXT: %[[E1:.*]] = tensor.empty
// CHECK-NEXT: %[[Z1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] :
// CHECK-NEXT: linalg.matmul ins(%[[Y]], %[[X]] : {{.*}}) outs(%[[Z1]] :
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.add
// CHECK-NEXT: return
// BUF: func.func private @__fsdp_segment
// BUF-NOT: memref.copy
// BUF: return

// -----

// A fill that is only read stays one fill per segment.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @read_fill
func.func @read_fill(%a: tensor<4xf32>) -> tensor<4xf32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NOT: linalg.fill
  // CHECK: call @[[F:__fsdp_segment_[0-9]+]](%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.add ins(%a, %f : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.mul ins(%s0, %f : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %s1 : tensor<4xf32>
}
// CHECK: func.func private @[[F]]
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
// CHECK: return

// -----

// A fill shared by two reductions of one segment (equal fills merged by
// cse): the second reduction's own fill is made right before it, after the
// op between them, so that its kernel folds the fill.
// CHECK-LABEL: func.func @fill_before_use
// CHECK: func.func private @__fsdp_segment
// CHECK: %[[Z0:.*]] = linalg.fill
// CHECK-NEXT: linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[Z0]] :
// CHECK: linalg.exp
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: %[[Z1:.*]] = linalg.fill
// CHECK-NEXT: linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[Z1]] :
func.func @fill_before_use(%a: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.reduce ins(%a : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%x: f32, %acc: f32) {
      %r = arith.addf %x, %acc : f32
      linalg.yield %r : f32
    }
  %e2 = tensor.empty() : tensor<4x8xf32>
  %x = linalg.exp ins(%a : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %s1 = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%y: f32, %acc: f32) {
      %r = arith.addf %y, %acc : f32
      linalg.yield %r : f32
    }
  return %s0, %s1 : tensor<4xf32>, tensor<4xf32>
}

// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-multi-tensor | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-multi-tensor="max-args=4" | FileCheck %s --check-prefix=ARGS
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-multi-tensor="max-args=1" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: option max-args must be at least 2, got 1

// Three updates of one kind, each reading a parameter and writing its own
// view of the arena: one kernel function with the three ops, called where
// the last call was. The shared scalar is one argument.
#id = affine_map<(i) -> (i)>
#s = affine_map<(i) -> ()>
func.func private @__fsdp_kernel_0(%p: memref<8xf32>, %lr: memref<f32>, %out: memref<8xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #s, #id], iterator_types = ["parallel"]}
      ins(%p, %lr : memref<8xf32>, memref<f32>) outs(%out : memref<8xf32>) attrs = {fsdp.multi_tensor = "sgd"} {
  ^bb0(%a: f32, %l: f32, %o: f32):
    %m = arith.mulf %a, %l : f32
    linalg.yield %m : f32
  }
  return
}
func.func private @__fsdp_kernel_1(%p: memref<16xf32>, %lr: memref<f32>, %out: memref<16xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #s, #id], iterator_types = ["parallel"]}
      ins(%p, %lr : memref<16xf32>, memref<f32>) outs(%out : memref<16xf32>) attrs = {fsdp.multi_tensor = "sgd"} {
  ^bb0(%a: f32, %l: f32, %o: f32):
    %m = arith.mulf %a, %l : f32
    linalg.yield %m : f32
  }
  return
}
// CHECK-LABEL: func.func @three_updates
// CHECK-SAME: (%[[P0:.*]]: memref<8xf32>, %[[P1:.*]]: memref<16xf32>, %[[P2:.*]]: memref<8xf32>, %[[LR:.*]]: memref<f32>, %[[A:.*]]: memref<256xi8>)
// CHECK: %[[V0:.*]] = memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<8xf32>
// CHECK: %[[V1:.*]] = memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<16xf32>
// CHECK: %[[V2:.*]] = memref.view %[[A]][%{{.*}}][] : memref<256xi8> to memref<8xf32>
// CHECK-NEXT: call @__fsdp_multi_tensor_0(%[[P0]], %[[LR]], %[[V0]], %[[P1]], %[[V1]], %[[P2]], %[[V2]])
// CHECK-NOT: call
// CHECK: return
// CHECK: func.func private @__fsdp_multi_tensor_0(%[[Q0:.*]]: memref<8xf32>, %[[L:.*]]: memref<f32>, %[[O0:.*]]: memref<8xf32>, %[[Q1:.*]]: memref<16xf32>, %[[O1:.*]]: memref<16xf32>, %[[Q2:.*]]: memref<8xf32>, %[[O2:.*]]: memref<8xf32>)
// CHECK-SAME: fsdp.kernel, fsdp.multi_tensor = "sgd"
// CHECK: linalg.generic {{.*}} ins(%[[Q0]], %[[L]] : {{.*}}) outs(%[[O0]] :
// CHECK: linalg.generic {{.*}} ins(%[[Q1]], %[[L]] : {{.*}}) outs(%[[O1]] :
// CHECK: linalg.generic {{.*}} ins(%[[Q2]], %[[L]] : {{.*}}) outs(%[[O2]] :
// CHECK: return
// With at most 4 buffer arguments a kernel takes one update (3 buffers):
// two would take 5.
// ARGS-LABEL: func.func @three_updates
// ARGS-NOT: __fsdp_multi_tensor
// ARGS-COUNT-3: call @__fsdp_kernel_
// ARGS-NOT: __fsdp_multi_tensor
// ARGS: return
func.func @three_updates(%p0: memref<8xf32>, %p1: memref<16xf32>, %p2: memref<8xf32>, %lr: memref<f32>, %arena: memref<256xi8>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c96 = arith.constant 96 : index
  %v0 = memref.view %arena[%c0][] : memref<256xi8> to memref<8xf32>
  call @__fsdp_kernel_0(%p0, %lr, %v0) : (memref<8xf32>, memref<f32>, memref<8xf32>) -> ()
  %v1 = memref.view %arena[%c32][] : memref<256xi8> to memref<16xf32>
  call @__fsdp_kernel_1(%p1, %lr, %v1) : (memref<16xf32>, memref<f32>, memref<16xf32>) -> ()
  %v2 = memref.view %arena[%c96][] : memref<256xi8> to memref<8xf32>
  call @__fsdp_kernel_0(%p2, %lr, %v2) : (memref<8xf32>, memref<f32>, memref<8xf32>) -> ()
  return
}

// -----

// The second update reads the first one's result (its view overlaps the
// bytes the first writes: [0, 32) and [16, 48)): they cannot run at once.
// The third one starts a new run with the second. A dealloc (a side effect)
// ends a run too, and a call of another kind.
#id = affine_map<(i) -> (i)>
func.func private @__fsdp_kernel_0(%p: memref<8xf32>, %out: memref<8xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%out : memref<8xf32>) attrs = {fsdp.multi_tensor = "adamw"} {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  }
  return
}
func.func private @__fsdp_kernel_1(%p: memref<8xf32>, %out: memref<8xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%out : memref<8xf32>) attrs = {fsdp.multi_tensor = "sgd"} {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  }
  return
}
// CHECK-LABEL: func.func @conflicts
// CHECK: call @__fsdp_kernel_0(
// CHECK: call @__fsdp_multi_tensor_{{[0-9]+}}(
// CHECK: memref.dealloc
// CHECK: call @__fsdp_kernel_0(
// CHECK: call @__fsdp_kernel_1(
// CHECK: call @__fsdp_kernel_0(
// CHECK-NOT: call
// CHECK: return
func.func @conflicts(%p0: memref<8xf32>, %p1: memref<8xf32>, %arena: memref<256xi8>, %d: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c192 = arith.constant 192 : index
  %v0 = memref.view %arena[%c0][] : memref<256xi8> to memref<8xf32>
  %v1 = memref.view %arena[%c16][] : memref<256xi8> to memref<8xf32>
  %v2 = memref.view %arena[%c64][] : memref<256xi8> to memref<8xf32>
  %v3 = memref.view %arena[%c128][] : memref<256xi8> to memref<8xf32>
  %v4 = memref.view %arena[%c192][] : memref<256xi8> to memref<8xf32>
  call @__fsdp_kernel_0(%p0, %v0) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_0(%v1, %v2) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_0(%p1, %v3) : (memref<8xf32>, memref<8xf32>) -> ()
  memref.dealloc %d : memref<4xf32>
  call @__fsdp_kernel_0(%p0, %v4) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_1(%p1, %v3) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_0(%p1, %v2) : (memref<8xf32>, memref<8xf32>) -> ()
  return
}

// -----

// A function argument that a part writes may be another argument: no
// group. Unmarked kernels are left alone.
#id = affine_map<(i) -> (i)>
func.func private @__fsdp_kernel_0(%p: memref<8xf32>, %out: memref<8xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%out : memref<8xf32>) attrs = {fsdp.multi_tensor = "adamw"} {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  }
  return
}
func.func private @__fsdp_kernel_1(%p: memref<8xf32>, %out: memref<8xf32>) attributes {fsdp.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  }
  return
}
// CHECK-LABEL: func.func @arguments
// CHECK-COUNT-4: call @__fsdp_kernel_
// CHECK-NOT: __fsdp_multi_tensor
func.func @arguments(%p0: memref<8xf32>, %p1: memref<8xf32>, %o0: memref<8xf32>, %o1: memref<8xf32>) {
  call @__fsdp_kernel_0(%p0, %o0) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_0(%p1, %o1) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_1(%p0, %o0) : (memref<8xf32>, memref<8xf32>) -> ()
  call @__fsdp_kernel_1(%p1, %o1) : (memref<8xf32>, memref<8xf32>) -> ()
  return
}

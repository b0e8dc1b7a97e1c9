// RUN: fsdp-opt %s -split-input-file --fsdp-outline-kernels | FileCheck %s

// Every linalg op on buffers becomes a call; equal ops share one kernel,
// captured constants are cloned in, other captured values become
// arguments. A fill followed by an op that accumulates into the filled
// buffer shares that op's kernel. The caller is marked noinline/optnone.
// CHECK-LABEL: func.func @step
// CHECK-SAME: passthrough = ["noinline", "optnone"]
func.func @step(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<8x3xf32>, %d: memref<4x3xf32>, %s: f32) {
  %zero = arith.constant 0.0 : f32
  // CHECK: call @[[FILLMM:__fsdp_kernel_[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}) : (memref<4x3xf32>, memref<4x8xf32>, memref<8x3xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%d : memref<4x3xf32>)
  linalg.matmul ins(%a, %c : memref<4x8xf32>, memref<8x3xf32>) outs(%d : memref<4x3xf32>)
  // CHECK: call @[[MM:__fsdp_kernel_[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}) : (memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>) -> ()
  linalg.matmul ins(%a, %c : memref<4x8xf32>, memref<8x3xf32>) outs(%d : memref<4x3xf32>)
  // The same matmul on other buffers reuses the kernel.
  // CHECK: call @[[MM]](%{{.*}}, %{{.*}}, %{{.*}})
  linalg.matmul ins(%b, %c : memref<4x8xf32>, memref<8x3xf32>) outs(%d : memref<4x3xf32>)
  // A fill whose next op does not write the filled buffer is a kernel of
  // its own.
  // CHECK: call @[[FILL:__fsdp_kernel_[0-9]+]](%{{.*}}) : (memref<4x3xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%d : memref<4x3xf32>)
  // A captured scalar is an argument.
  // CHECK: call @[[SCALE:__fsdp_kernel_[0-9]+]](%{{.*}}, %{{.*}}) : (memref<4x8xf32>, f32) -> ()
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%a : memref<4x8xf32>) {
  ^bb0(%x: f32):
    %y = arith.mulf %x, %s : f32
    linalg.yield %y : f32
  }
  // Copies are kernels too (a memcpy or a strided copy loop each).
  // CHECK: call @[[COPY:__fsdp_kernel_[0-9]+]](%{{.*}}, %{{.*}}) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  // CHECK-NOT: linalg.
  // CHECK-NOT: memref.copy
  return
}
// CHECK: func.func private @[[FILLMM]](%[[D:.*]]: memref<4x3xf32>, %[[A:.*]]: memref<4x8xf32>, %[[C:.*]]: memref<8x3xf32>)
// CHECK-SAME: fsdp.kernel
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[Z]] : f32) outs(%[[D]] : memref<4x3xf32>)
// CHECK-NEXT: linalg.matmul ins(%[[A]], %[[C]] : memref<4x8xf32>, memref<8x3xf32>) outs(%[[D]] : memref<4x3xf32>)
// CHECK: func.func private @[[MM]](
// CHECK-NOT: linalg.fill
// CHECK: linalg.matmul
// CHECK: func.func private @[[FILL]](%[[OUT:.*]]: memref<4x3xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<4x3xf32>)
// CHECK-NEXT: return
// CHECK: func.func private @[[SCALE]](
// CHECK: linalg.generic
// CHECK: func.func private @[[COPY]](
// CHECK: memref.copy
// CHECK-NOT: func.func private @__fsdp_kernel

// -----

// Ops on tensors are left alone (they run before bufferization).
// CHECK-LABEL: func.func @tensors
func.func @tensors(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: linalg.generic
  // CHECK-NOT: call
  %0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%a : tensor<4xf32>) {
  ^bb0(%x: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

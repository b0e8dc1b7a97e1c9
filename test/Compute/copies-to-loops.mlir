// RUN: fsdp-opt %s -split-input-file --fsdp-copies-to-loops | FileCheck %s

// A row block of a gathered bucket (strided source) and the packing into
// one (strided target) become linalg.copy: vectorized loops, not the
// element-by-element runtime copy.
// CHECK-LABEL: func.func @strided
// CHECK-SAME: (%[[B:.*]]: memref<8x64xf32, strided<[96, 1], offset: 32>>, %[[P:.*]]: memref<8x64xf32>)
func.func @strided(%bucket: memref<8x64xf32, strided<[96, 1], offset: 32>>, %param: memref<8x64xf32>) {
  // CHECK: linalg.copy ins(%[[B]] : memref<8x64xf32, strided<[96, 1], offset: 32>>) outs(%[[P]] : memref<8x64xf32>)
  // CHECK: linalg.copy ins(%[[P]] : memref<8x64xf32>) outs(%[[B]] : memref<8x64xf32, strided<[96, 1], offset: 32>>)
  // CHECK-NOT: memref.copy
  memref.copy %bucket, %param : memref<8x64xf32, strided<[96, 1], offset: 32>> to memref<8x64xf32>
  memref.copy %param, %bucket : memref<8x64xf32> to memref<8x64xf32, strided<[96, 1], offset: 32>>
  return
}

// -----

// What stays a memref.copy: contiguous buffers (one memcpy, an offset is
// fine), dynamic shapes, rank 0 and unranked buffers.
// CHECK-LABEL: func.func @stays
func.func @stays(%a: memref<4x8xf32>, %b: memref<4x8xf32, strided<[8, 1], offset: 16>>,
                 %c: memref<?x8xf32>, %d: memref<?x8xf32, strided<[16, 1]>>,
                 %e: memref<f32>, %f: memref<f32>, %u: memref<*xf32>, %v: memref<*xf32>) {
  // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 16>>
  // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<?x8xf32> to memref<?x8xf32, strided<[16, 1]>>
  // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<f32> to memref<f32>
  // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<*xf32> to memref<*xf32>
  // CHECK-NOT: linalg.copy
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %c, %d : memref<?x8xf32> to memref<?x8xf32, strided<[16, 1]>>
  memref.copy %e, %f : memref<f32> to memref<f32>
  memref.copy %u, %v : memref<*xf32> to memref<*xf32>
  return
}

// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -mlir-print-op-generic | fsdp-opt -split-input-file | FileCheck %s

// The tensor and buffer forms, rows and columns, i64 / i32 / index indices.
// CHECK-LABEL: func.func @tensors
// CHECK: fsdp.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} : tensor<6x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
// CHECK: fsdp.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} {columns} : tensor<4x6xbf16>, tensor<6xi32> -> tensor<4x10xbf16>
func.func @tensors(%g: tensor<6x4xf32>, %i: tensor<6xi64>, %z: tensor<10x4xf32>,
                   %h: tensor<4x6xbf16>, %j: tensor<6xi32>, %y: tensor<4x10xbf16>)
    -> (tensor<10x4xf32>, tensor<4x10xbf16>) {
  %r = fsdp.scatter_add_rows %g, %i into %z : tensor<6x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
  %c = fsdp.scatter_add_rows %h, %j into %y {columns} : tensor<4x6xbf16>, tensor<6xi32> -> tensor<4x10xbf16>
  return %r, %c : tensor<10x4xf32>, tensor<4x10xbf16>
}

// -----

// CHECK-LABEL: func.func @buffers
// CHECK: fsdp.buffer.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} : memref<6x4xf32, strided<[8, 1]>>, memref<6xindex>, memref<10x4xf32>
func.func @buffers(%g: memref<6x4xf32, strided<[8, 1]>>, %i: memref<6xindex>, %z: memref<10x4xf32>) {
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32, strided<[8, 1]>>, memref<6xindex>, memref<10x4xf32>
  return
}

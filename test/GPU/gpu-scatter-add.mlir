// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-scatter-add --cse -verify-diagnostics | FileCheck %s

// The embedding backward on device buffers: one call with the index width,
// the strides (in elements) and the sizes as constants; the op is gone.
// CHECK-LABEL: func.func @rows
// CHECK-DAG: %[[B64:.*]] = arith.constant 64 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[SIX:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[TEN:.*]] = arith.constant 10 : i64
// CHECK: call @fsdprt_gpu_scatter_add_rows_f32(%{{.*}}, %[[B64]], %[[ONE]], %[[SIX]], %{{.*}}, %[[FOUR]], %[[ONE]], %{{.*}}, %[[FOUR]], %[[ONE]], %[[TEN]], %[[FOUR]]) : (!llvm.ptr, i32, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, i64, i64) -> ()
// CHECK-NOT: fsdp.buffer.scatter_add_rows
func.func @rows(%g: memref<6x4xf32>, %i: memref<6xi64>, %z: memref<10x4xf32>) {
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32>, memref<6xi64>, memref<10x4xf32>
  return
}
// CHECK: func.func private @fsdprt_gpu_scatter_add_rows_f32(!llvm.ptr, i32, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, i64, i64)

// -----

// A columns scatter of bf16 with i32 indices read with a stride of 2 and a
// strided source: the token and slot strides are the second dim's, the row
// strides the first's; the pointers include the views' offsets.
// CHECK-LABEL: func.func @columns_strided
// CHECK-DAG: %[[B32:.*]] = arith.constant 32 : i32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[FIVE:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[SIXTEEN:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[SEVEN:.*]] = arith.constant 7 : i64
// CHECK-DAG: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK: call @fsdprt_gpu_scatter_add_rows_bf16(%{{.*}}, %[[B32]], %[[TWO]], %[[FIVE]], %{{.*}}, %[[ONE]], %[[SIXTEEN]], %{{.*}}, %[[ONE]], %[[SEVEN]], %[[SEVEN]], %[[THREE]])
func.func @columns_strided(%a: memref<3x5xbf16, strided<[16, 1], offset: 4>>, %i: memref<5xi32, strided<[2]>>, %c: memref<3x7xbf16>) {
  fsdp.buffer.scatter_add_rows %a, %i into %c {columns} : memref<3x5xbf16, strided<[16, 1], offset: 4>>, memref<5xi32, strided<[2]>>, memref<3x7xbf16>
  return
}

// -----

// Dynamic strides are read from the buffer's metadata.
// CHECK-LABEL: func.func @dynamic_strides
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %arg0
// CHECK: %[[S0:.*]] = arith.index_cast %[[STRIDES]]#0 : index to i64
// CHECK: call @fsdprt_gpu_scatter_add_rows_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S0]],
func.func @dynamic_strides(%g: memref<6x4xf32, strided<[?, 1], offset: ?>>, %i: memref<6xindex>, %z: memref<10x4xf32>) {
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32, strided<[?, 1], offset: ?>>, memref<6xindex>, memref<10x4xf32>
  return
}

// -----

func.func @f64(%g: memref<6x4xf64>, %i: memref<6xi64>, %z: memref<10x4xf64>) {
  // expected-error @+1 {{'fsdp.buffer.scatter_add_rows' op has no device scatter-add for element type 'f64' (f32 and bf16 have one)}}
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf64>, memref<6xi64>, memref<10x4xf64>
  return
}

// -----

func.func @i16_indices(%g: memref<6x4xf32>, %i: memref<6xi16>, %z: memref<10x4xf32>) {
  // expected-error @+1 {{'fsdp.buffer.scatter_add_rows' op has no device scatter-add for indices of type 'i16' (i32, i64 and index have one)}}
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32>, memref<6xi16>, memref<10x4xf32>
  return
}

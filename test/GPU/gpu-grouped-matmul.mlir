// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-grouped-matmul --cse -verify-diagnostics | FileCheck %s

// The rows form on device buffers: one call with the form (0), the offset
// width, the strides (in elements; the output's unused group stride 0) and
// the sizes (rows, k, n) as constants; the op is gone.
// CHECK-LABEL: func.func @rows
// CHECK-DAG: %[[FORM:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[B32:.*]] = arith.constant 32 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[FIVE:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[TWENTY:.*]] = arith.constant 20 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[SIX:.*]] = arith.constant 6 : i64
// CHECK: call @fsdprt_gpu_grouped_matmul_f32(%[[FORM]], %{{.*}}, %[[B32]], %[[ONE]], %[[THREE]], %{{.*}}, %[[FOUR]], %[[ONE]], %{{.*}}, %[[TWENTY]], %[[FIVE]], %[[ONE]], %{{.*}}, %[[ZERO]], %[[FIVE]], %[[ONE]], %[[SIX]], %[[FOUR]], %[[FIVE]]) : (i32, !llvm.ptr, i32, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-NOT: fsdp.buffer.grouped_matmul
func.func @rows(%x: memref<6x4xf32>, %w: memref<3x4x5xf32>, %o: memref<3xi32>, %y: memref<6x5xf32>) {
  fsdp.buffer.grouped_matmul %x, %w, %o into %y : memref<6x4xf32>, memref<3x4x5xf32>, memref<3xi32>, memref<6x5xf32>
  return
}
// CHECK: func.func private @fsdprt_gpu_grouped_matmul_f32(i32, !llvm.ptr, i32, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64)

// -----

// The weight gradient's form in bf16 with index offsets (64 bits) and a
// transposed lhs view: rhs's unused group stride is 0, the output's three
// strides follow; n is the output's last size.
// CHECK-LABEL: func.func @transpose_lhs_bf16
// CHECK-DAG: %[[FORM:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[B64:.*]] = arith.constant 64 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[SIX:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[FIVE:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[TWENTY:.*]] = arith.constant 20 : i64
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK: call @fsdprt_gpu_grouped_matmul_bf16(%[[FORM]], %{{.*}}, %[[B64]], %[[ONE]], %[[TWO]], %{{.*}}, %[[ONE]], %[[SIX]], %{{.*}}, %[[ZERO]], %[[FIVE]], %[[ONE]], %{{.*}}, %[[TWENTY]], %[[FIVE]], %[[ONE]], %[[SIX]], %[[FOUR]], %[[FIVE]])
func.func @transpose_lhs_bf16(%x: memref<6x4xbf16, strided<[1, 6]>>, %g: memref<6x5xbf16>, %o: memref<2xindex>, %dw: memref<2x4x5xbf16>) {
  fsdp.buffer.grouped_matmul %x, %g, %o into %dw {transpose_lhs} : memref<6x4xbf16, strided<[1, 6]>>, memref<6x5xbf16>, memref<2xindex>, memref<2x4x5xbf16>
  return
}

// -----

// Dynamic strides are read from the buffer's metadata.
// CHECK-LABEL: func.func @dynamic_strides
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %arg0
// CHECK: %[[S0:.*]] = arith.index_cast %[[STRIDES]]#0 : index to i64
// CHECK: call @fsdprt_gpu_grouped_matmul_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S0]],
func.func @dynamic_strides(%x: memref<6x4xf32, strided<[?, 1], offset: ?>>, %w: memref<3x4x5xf32>, %o: memref<3xi64>, %y: memref<6x5xf32>) {
  fsdp.buffer.grouped_matmul %x, %w, %o into %y : memref<6x4xf32, strided<[?, 1], offset: ?>>, memref<3x4x5xf32>, memref<3xi64>, memref<6x5xf32>
  return
}

// -----

func.func @f16(%x: memref<6x4xf16>, %w: memref<3x4x5xf16>, %o: memref<3xi32>, %y: memref<6x5xf16>) {
  // expected-error @+1 {{'fsdp.buffer.grouped_matmul' op has no device grouped gemm for element type 'f16' (f32 and bf16 have one)}}
  fsdp.buffer.grouped_matmul %x, %w, %o into %y : memref<6x4xf16>, memref<3x4x5xf16>, memref<3xi32>, memref<6x5xf16>
  return
}

// -----

func.func @i8_offsets(%x: memref<6x4xf32>, %w: memref<3x4x5xf32>, %o: memref<3xi8>, %y: memref<6x5xf32>) {
  // expected-error @+1 {{'fsdp.buffer.grouped_matmul' op has no device grouped gemm for offsets of type 'i8' (i32, i64 and index have one)}}
  fsdp.buffer.grouped_matmul %x, %w, %o into %y : memref<6x4xf32>, memref<3x4x5xf32>, memref<3xi8>, memref<6x5xf32>
  return
}

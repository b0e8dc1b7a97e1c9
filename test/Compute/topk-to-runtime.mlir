// RUN: fsdp-opt %s -split-input-file -fsdp-topk-to-runtime --cse -verify-diagnostics | FileCheck %s

// A contiguous input: one call on its rows (6 rows of 8, k = 2, largest,
// sorted; f32 is dtype 0).
// CHECK-LABEL: func.func @rows
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[F32:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: call @fsdprt_jit_topk_indices(%{{.*}}, %[[F32]], %[[ROWS]], %[[N]], %[[K]], %[[ONE]], %[[ONE]], %{{.*}}) : (!llvm.ptr, i32, i64, i64, i64, i32, i32, !llvm.ptr) -> ()
// CHECK-NOT: fsdp.buffer.topk_indices
func.func @rows(%x: memref<6x8xf32>, %ids: memref<6x2xi64>) {
  fsdp.buffer.topk_indices %x into %ids {largest, sorted} : memref<6x8xf32>, memref<6x2xi64>
  return
}
// CHECK: func.func private @fsdprt_jit_topk_indices(!llvm.ptr, i32, i64, i64, i64, i32, i32, !llvm.ptr)

// -----

// A strided view (a column slice) is copied into a row-major buffer first,
// freed after the call; smallest, unsorted: both flags 0. bf16 is dtype 3.
// CHECK-LABEL: func.func @strided
// CHECK: %[[COPY:.*]] = memref.alloc() : memref<3x4x5xbf16>
// CHECK: memref.copy %arg0, %[[COPY]]
// CHECK-DAG: %[[BF16:.*]] = arith.constant 3 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 12 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: call @fsdprt_jit_topk_indices(%{{.*}}, %[[BF16]], %[[ROWS]], %{{.*}}, %{{.*}}, %[[ZERO]], %[[ZERO]], %{{.*}})
// CHECK: memref.dealloc %[[COPY]]
func.func @strided(%x: memref<3x4x5xbf16, strided<[40, 10, 1], offset: ?>>, %ids: memref<3x4x3xi64>) {
  fsdp.buffer.topk_indices %x into %ids : memref<3x4x5xbf16, strided<[40, 10, 1], offset: ?>>, memref<3x4x3xi64>
  return
}

// -----

// `sort`: a call of aten's unstable sort on every row (12 rows of 40, i64 is
// dtype 5), ascending; no k.
// CHECK-LABEL: func.func @unstable_sort
// CHECK-DAG: %[[I64:.*]] = arith.constant 5 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 12 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 40 : i64
// CHECK-DAG: %[[ASC:.*]] = arith.constant 0 : i32
// CHECK: call @fsdprt_jit_sort_indices(%{{.*}}, %[[I64]], %[[ROWS]], %[[N]], %[[ASC]], %{{.*}}) : (!llvm.ptr, i32, i64, i64, i32, !llvm.ptr) -> ()
// CHECK-NOT: fsdprt_jit_topk_indices
func.func @unstable_sort(%x: memref<3x4x40xi64>, %ids: memref<3x4x40xi64>) {
  fsdp.buffer.topk_indices %x into %ids {sort} : memref<3x4x40xi64>, memref<3x4x40xi64>
  return
}
// CHECK: func.func private @fsdprt_jit_sort_indices(!llvm.ptr, i32, i64, i64, i32, !llvm.ptr)

// -----

func.func @dynamic(%x: memref<?x8xf32>, %ids: memref<?x2xi64>) {
  // expected-error @+1 {{'fsdp.buffer.topk_indices' op needs static shapes to become a runtime call}}
  fsdp.buffer.topk_indices %x into %ids {largest} : memref<?x8xf32>, memref<?x2xi64>
  return
}

// -----

func.func @f8(%x: memref<6x8xf8E4M3FN>, %ids: memref<6x2xi64>) {
  // expected-error @+1 {{'fsdp.buffer.topk_indices' op has no runtime kernel for element type 'f8E4M3FN'}}
  fsdp.buffer.topk_indices %x into %ids {largest} : memref<6x8xf8E4M3FN>, memref<6x2xi64>
  return
}

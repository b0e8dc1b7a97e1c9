// RUN: fsdp-opt %s -split-input-file --fsdp-grouped-matmul-to-blas="report=true" --cse -verify-diagnostics | FileCheck %s

// A group's rows (a view of dynamic size): M is read with memref.dim, the
// leading dimensions from the strided metadata, beta = 1 (the result was
// zero-filled before the groups).
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @rows
func.func @rows(%x: memref<?x4xf32, strided<[4, 1], offset: ?>>, %w: memref<4x5xf32, strided<[5, 1], offset: ?>>, %y: memref<?x5xf32, strided<[5, 1], offset: ?>>) {
  // CHECK: %[[M:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x5xf32
  // CHECK-DAG: %[[ROW:.*]] = arith.constant 101 : i32
  // CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
  // CHECK: %[[M32:.*]] = arith.index_cast %[[M]] : index to i32
  // CHECK: memref.extract_strided_metadata
  // CHECK: call @cblas_sgemm(%[[ROW]], %[[NT]], %[[NT]], %[[M32]], %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}})
  // CHECK-NOT: linalg.generic
  // expected-remark @+1 {{group contraction becomes cblas_sgemm}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x4xf32, strided<[4, 1], offset: ?>>, memref<4x5xf32, strided<[5, 1], offset: ?>>)
      outs(%y : memref<?x5xf32, strided<[5, 1], offset: ?>>) attrs = {fsdp.grouped_segment = "rows"} {
  ^bb0(%p: f32, %q: f32, %r: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %r, %m : f32
    linalg.yield %s : f32
  }
  return
}
// CHECK: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)

// -----

// The weight gradient's form: A transposed (CblasTrans), K is the group's
// row count.
#a = affine_map<(m, n, k) -> (k, m)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @transpose_lhs
func.func @transpose_lhs(%x: memref<?x4xf64, strided<[4, 1], offset: ?>>, %d: memref<?x5xf64, strided<[5, 1], offset: ?>>, %dw: memref<4x5xf64, strided<[5, 1], offset: ?>>) {
  // CHECK: %[[K:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x4xf64
  // CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK-DAG: %[[T:.*]] = arith.constant 112 : i32
  // CHECK: %[[K32:.*]] = arith.index_cast %[[K]] : index to i32
  // CHECK: call @cblas_dgemm(%{{.*}}, %[[T]], %[[NT]], %{{.*}}, %{{.*}}, %[[K32]],
  // expected-remark @+1 {{group contraction becomes cblas_dgemm}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %d : memref<?x4xf64, strided<[4, 1], offset: ?>>, memref<?x5xf64, strided<[5, 1], offset: ?>>)
      outs(%dw : memref<4x5xf64, strided<[5, 1], offset: ?>>) attrs = {fsdp.grouped_segment = "transpose_lhs"} {
  ^bb0(%p: f64, %q: f64, %r: f64):
    %m = arith.mulf %p, %q : f64
    %s = arith.addf %r, %m : f64
    linalg.yield %s : f64
  }
  return
}

// -----

// A bf16 group with the f32 accumulator of fsdp-grouped-matmul: sgemm on
// f32 copies of the group's operands (the rows' copy of dynamic size),
// freed after the call.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @bf16_widened
// CHECK: %[[M:.*]] = memref.dim %[[X:.*]], %{{.*}} : memref<?x4xbf16>
// CHECK: %[[XW:.*]] = memref.alloc(%[[M]]) : memref<?x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]] : memref<?x4xbf16>) outs(%[[XW]] : memref<?x4xf32>)
// CHECK: arith.extf
// CHECK: %[[WW:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK: arith.extf
// CHECK: call @cblas_sgemm(
// CHECK: memref.dealloc %[[XW]]
// CHECK: memref.dealloc %[[WW]]
func.func @bf16_widened(%x: memref<?x4xbf16>, %w: memref<4x5xbf16>, %y: memref<?x5xf32>) {
  // expected-remark @+1 {{group contraction becomes cblas_sgemm on f32 copies of its 16-bit operands}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x4xbf16>, memref<4x5xbf16>) outs(%y : memref<?x5xf32>) attrs = {fsdp.grouped_segment = "rows"} {
  ^bb0(%p: bf16, %q: bf16, %r: f32):
    %pw = arith.extf %p : bf16 to f32
    %qw = arith.extf %q : bf16 to f32
    %m = arith.mulf %pw, %qw : f32
    %s = arith.addf %r, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bf16 accumulator has no BLAS gemm: the group stays a loop, with a remark.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @bf16_stays
// CHECK: linalg.generic
// CHECK-NOT: call @cblas
func.func @bf16_stays(%x: memref<?x4xbf16>, %w: memref<4x5xbf16>, %y: memref<?x5xbf16>) {
  // expected-remark @+1 {{group contraction stays a loop: BLAS gemm takes only f32 and f64}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x4xbf16>, memref<4x5xbf16>) outs(%y : memref<?x5xbf16>) attrs = {fsdp.grouped_segment = "rows"} {
  ^bb0(%p: bf16, %q: bf16, %r: bf16):
    %m = arith.mulf %p, %q : bf16
    %s = arith.addf %r, %m : bf16
    linalg.yield %s : bf16
  }
  return
}

// RUN: fsdp-opt %s -split-input-file --fsdp-linalg-to-blas --cse | FileCheck %s

// A row-major matmul: NoTrans operands, leading dimensions are the row
// strides, alpha = beta = 1 (linalg accumulates into the output).
// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // CHECK-DAG: %[[ROW:.*]] = arith.constant 101 : i32
  // CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK-DAG: %[[M:.*]] = arith.constant 4 : i32
  // CHECK-DAG: %[[N:.*]] = arith.constant 16 : i32
  // CHECK-DAG: %[[K:.*]] = arith.constant 8 : i32
  // CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
  // CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<4x8xf32>
  // CHECK: call @cblas_sgemm(%[[ROW]], %[[NT]], %[[NT]], %[[M]], %[[N]], %[[K]], %[[ONE]], %{{.*}}, %[[K]], %{{.*}}, %[[N]], %[[ONE]], %{{.*}}, %[[N]])
  // CHECK-NOT: linalg.matmul
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}
// CHECK: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)

// -----

// x @ w.T as a generic contraction: w is read with a unit stride along K,
// so it is passed as CblasTrans with its own row stride.
#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @transposed_b
func.func @transposed_b(%x: memref<4x8xf32>, %w: memref<16x8xf32>, %y: memref<4x16xf32>) {
  // CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK-DAG: %[[T:.*]] = arith.constant 112 : i32
  // CHECK-DAG: %[[K:.*]] = arith.constant 8 : i32
  // CHECK: call @cblas_sgemm(%{{.*}}, %[[NT]], %[[T]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[K]], %{{.*}}, %[[K]],
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8xf32>, memref<16x8xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// batch_matmul on f64: one cblas_dgemm per batch index, offsets advanced by
// each operand's batch stride.
// CHECK-LABEL: func.func @batch
func.func @batch(%a: memref<3x4x8xf64>, %b: memref<3x8x5xf64>, %c: memref<3x4x5xf64>) {
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
  // CHECK-DAG: arith.constant 32 : index
  // CHECK-DAG: arith.constant 40 : index
  // CHECK-DAG: arith.constant 20 : index
  // CHECK: call @cblas_dgemm
  linalg.batch_matmul ins(%a, %b : memref<3x4x8xf64>, memref<3x8x5xf64>) outs(%c : memref<3x4x5xf64>)
  return
}

// -----

// A column-major result (a transposed view) swaps the operands: C^T = B^T A^T.
// CHECK-LABEL: func.func @column_major_result
func.func @column_major_result(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32, strided<[1, 4]>>) {
  // CHECK-DAG: %[[T:.*]] = arith.constant 112 : i32
  // CHECK-DAG: %[[M:.*]] = arith.constant 16 : i32
  // CHECK-DAG: %[[N:.*]] = arith.constant 4 : i32
  // CHECK: call @cblas_sgemm(%{{.*}}, %[[T]], %[[T]], %[[M]], %[[N]],
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32, strided<[1, 4]>>)
  return
}

// -----

// A linear layer on 3-D activations: the (batch, token) M dimensions are
// contiguous in x and y, so they form one M of 2 * 3 = 6 rows.
#x3 = affine_map<(b, t, n, k) -> (b, t, k)>
#w3 = affine_map<(b, t, n, k) -> (k, n)>
#y3 = affine_map<(b, t, n, k) -> (b, t, n)>
// CHECK-LABEL: func.func @linear_3d
func.func @linear_3d(%x: memref<2x3x8xf32>, %w: memref<8x16xf32>, %y: memref<2x3x16xf32>) {
  // CHECK-NOT: scf.for
  // CHECK-DAG: %[[M:.*]] = arith.constant 6 : i32
  // CHECK-DAG: %[[N:.*]] = arith.constant 16 : i32
  // CHECK-DAG: %[[K:.*]] = arith.constant 8 : i32
  // CHECK: call @cblas_sgemm(%{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[N]], %[[K]], %{{.*}}, %{{.*}}, %[[K]], %{{.*}}, %[[N]], %{{.*}}, %{{.*}}, %[[N]])
  linalg.generic {indexing_maps = [#x3, #w3, #y3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<2x3x8xf32>, memref<8x16xf32>) outs(%y : memref<2x3x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The weight gradient of that layer sums over (batch, token): two K
// dimensions, contiguous in x and dy, one K of 6.
#xk = affine_map<(m, n, b, t) -> (b, t, m)>
#dyk = affine_map<(m, n, b, t) -> (b, t, n)>
#dw = affine_map<(m, n, b, t) -> (m, n)>
// CHECK-LABEL: func.func @weight_grad
func.func @weight_grad(%x: memref<2x3x8xf32>, %dy: memref<2x3x16xf32>, %dw: memref<8x16xf32>) {
  // CHECK-DAG: %[[T:.*]] = arith.constant 112 : i32
  // CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK-DAG: %[[K:.*]] = arith.constant 6 : i32
  // CHECK: call @cblas_sgemm(%{{.*}}, %[[T]], %[[NT]], %{{.*}}, %{{.*}}, %[[K]],
  linalg.generic {indexing_maps = [#xk, #dyk, #dw], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %dy : memref<2x3x8xf32>, memref<2x3x16xf32>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A zero fill of C right before the contraction: beta = 0 and no fill (the
// gemm overwrites C). A fill of another value, or of another buffer, stays
// and the gemm accumulates (beta = 1).
// CHECK-LABEL: func.func @zero_fill
func.func @zero_fill(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %d: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  // CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
  // CHECK-NOT: linalg.fill
  // CHECK: call @cblas_sgemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]], %{{.*}}, %{{.*}})
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  // CHECK: linalg.fill ins(%[[ONE]] : f32) outs(%{{.*}} : memref<4x16xf32>)
  // CHECK-NEXT: call @cblas_sgemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}})
  linalg.fill ins(%one : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  // CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : memref<4x16xf32>)
  // CHECK-NEXT: call @cblas_sgemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}})
  linalg.fill ins(%zero : f32) outs(%d : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// bf16 x bf16 -> f32 (fsdp-autocast's contractions, the body widening each
// operand): A and B are widened into contiguous f32 copies, one
// cblas_sgemm runs on them (a transposed view of B becomes a plain copy,
// NoTrans), the zero fill is beta = 0, and the copies are freed after.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @widened
func.func @widened(%a: memref<4x8xbf16>, %bt: memref<16x8xbf16>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %b = memref.transpose %bt (i, j) -> (j, i) : memref<16x8xbf16> to memref<8x16xbf16, strided<[1, 8]>>
  // CHECK-NOT: linalg.fill
  // CHECK: %[[AW:.*]] = memref.alloc() : memref<4x8xf32>
  // CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<4x8xbf16>) outs(%[[AW]] : memref<4x8xf32>)
  // CHECK: arith.extf %{{.*}} : bf16 to f32
  // CHECK: %[[BW:.*]] = memref.alloc() : memref<8x16xf32>
  // CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<8x16xbf16, strided<[1, 8]>>) outs(%[[BW]] : memref<8x16xf32>)
  // CHECK: %[[NT:.*]] = arith.constant 111 : i32
  // CHECK: call @cblas_sgemm(%{{.*}}, %[[NT]], %[[NT]],
  // CHECK: memref.dealloc %[[AW]]
  // CHECK: memref.dealloc %[[BW]]
  // CHECK-NOT: linalg.generic {{.*}}"reduction"
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16, strided<[1, 8]>>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %p = arith.mulf %xw, %yw : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

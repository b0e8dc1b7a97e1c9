// RUN: fsdp-opt %s -split-input-file --fsdp-linalg-to-cublas=report --cse -verify-diagnostics | FileCheck %s

// A row-major matmul: no transposes, leading dimensions the row strides,
// one gemm (batch 1, strides 0), alpha = beta = 1.
// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
  // CHECK-DAG: %[[M:.*]] = arith.constant 4 : i64
  // CHECK-DAG: %[[N:.*]] = arith.constant 16 : i64
  // CHECK-DAG: %[[K:.*]] = arith.constant 8 : i64
  // CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
  // CHECK-DAG: %[[Z:.*]] = arith.constant 0 : i64
  // CHECK-DAG: %[[B1:.*]] = arith.constant 1 : i64
  // CHECK: call @fsdprt_gpu_gemm_f32(%[[F]], %[[F]], %[[M]], %[[N]], %[[K]], %[[ONE]], %{{.*}}, %[[K]], %[[Z]], %{{.*}}, %[[N]], %[[Z]], %[[ONE]], %{{.*}}, %[[N]], %[[Z]], %[[B1]])
  // CHECK-NOT: linalg.matmul
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_f32}}
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}
// CHECK: func.func private @fsdprt_gpu_gemm_f32(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)

// -----

// Attention's scores: (batch, head) are two batch dimensions whose strides
// nest in all three operands: one strided-batched call of 2 x 3 gemms, B
// transposed (read along K with a unit stride), after a zero fill: beta 0.
#q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#k = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
// CHECK-LABEL: func.func @attention_scores
func.func @attention_scores(%q: memref<2x3x8x4xf32>, %k: memref<2x3x8x4xf32>, %s: memref<2x3x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  // CHECK-NOT: linalg.fill
  // CHECK-NOT: scf.for
  // CHECK-DAG: %[[NT:.*]] = arith.constant 0 : i32
  // CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
  // CHECK-DAG: %[[SQK:.*]] = arith.constant 32 : i64
  // CHECK-DAG: %[[SS:.*]] = arith.constant 64 : i64
  // CHECK-DAG: %[[BATCH:.*]] = arith.constant 6 : i64
  // CHECK-DAG: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK: call @fsdprt_gpu_gemm_f32(%[[NT]], %[[T]], {{.*}}, %[[SQK]], {{.*}}, %[[SQK]], %[[BETA]], {{.*}}, %[[SS]], %[[BATCH]])
  linalg.fill ins(%zero : f32) outs(%s : memref<2x3x8x8xf32>)
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_f32 (strided-batched, batch 6) (beta = 0, the zero fill removed)}}
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x8x4xf32>, memref<2x3x8x4xf32>) outs(%s : memref<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %c, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A batch dimension whose strides do not nest (the outer one of a strided
// view) stays a host loop around a strided-batched call of the inner one.
#a = affine_map<(x, y, m, n, k) -> (x, y, m, k)>
#b = affine_map<(x, y, m, n, k) -> (x, y, k, n)>
#c = affine_map<(x, y, m, n, k) -> (x, y, m, n)>
// CHECK-LABEL: func.func @outer_loop
func.func @outer_loop(%a: memref<2x3x4x8xf32, strided<[200, 32, 8, 1]>>, %b: memref<2x3x8x4xf32>, %c: memref<2x3x4x4xf32>) {
  // CHECK: scf.for
  // CHECK-DAG: %[[BATCH:.*]] = arith.constant 3 : i64
  // CHECK: call @fsdprt_gpu_gemm_f32({{.*}}, %[[BATCH]])
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_f32 (strided-batched, batch 3) in 1 host loop(s)}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3x4x8xf32, strided<[200, 32, 8, 1]>>, memref<2x3x8x4xf32>) outs(%c : memref<2x3x4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %z, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// bf16 operands: the bf16 entry (f32 accumulation inside cuBLAS).
// CHECK-LABEL: func.func @bf16
func.func @bf16(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  // CHECK: call @fsdprt_gpu_gemm_bf16
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_bf16}}
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>)
  return
}
// CHECK: func.func private @fsdprt_gpu_gemm_bf16(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)

// -----

// bf16 operands into an f32 output (fsdp-autocast's contractions): the
// bf16 x bf16 -> f32 entry; the operand pointers advance by 2-byte
// elements, the output's by 4.
// CHECK-LABEL: func.func @bf16_f32
func.func @bf16_f32(%a: memref<2x4x8xbf16>, %b: memref<2x8x16xbf16>, %c: memref<2x4x16xf32>) {
  // CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<2x4x8xbf16>
  // CHECK: arith.muli %{{.*}}, %c2 : index
  // CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<2x8x16xbf16>
  // CHECK: arith.muli %{{.*}}, %c2 : index
  // CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<2x4x16xf32>
  // CHECK: arith.muli %{{.*}}, %c4 : index
  // CHECK: call @fsdprt_gpu_gemm_bf16_f32
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_bf16_f32 (strided-batched, batch 2)}}
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xbf16>, memref<2x8x16xbf16>) outs(%c : memref<2x4x16xf32>)
  return
}
// CHECK: func.func private @fsdprt_gpu_gemm_bf16_f32(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)

// -----

// A column-major result: C^T = B^T A^T, the operands swapped.
#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (k, n)>
#y = affine_map<(m, n, k) -> (n, m)>
// CHECK-LABEL: func.func @column_major_c
func.func @column_major_c(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<16x4xf32>) {
  // CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
  // CHECK-DAG: %[[M:.*]] = arith.constant 16 : i64
  // CHECK-DAG: %[[N:.*]] = arith.constant 4 : i64
  // CHECK: call @fsdprt_gpu_gemm_f32(%[[T]], %[[T]], %[[M]], %[[N]]
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_f32}}
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%y : memref<16x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// f64 has no cuBLAS entry here: the op stays for fsdp-gpu-kernels.
// CHECK-LABEL: func.func @f64
func.func @f64(%a: memref<4x8xf64>, %b: memref<8x16xf64>, %c: memref<4x16xf64>) {
  // CHECK: linalg.matmul
  // expected-remark @below {{contraction stays a kernel: element type f64 has no cuBLAS gemm (only f32 and bf16)}}
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x16xf64>) outs(%c : memref<4x16xf64>)
  return
}

// -----

// fsdp-gpu-gemm-results' rounded product (a bf16 body marked
// fsdp.f32_accumulation) from a zero fill: the bf16 entry, which sums in
// f32 and rounds once, with beta = 0.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @f32_accumulation
func.func @f32_accumulation(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  %zero = arith.constant 0.0 : bf16
  // CHECK-NOT: linalg.fill
  // CHECK: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK: call @fsdprt_gpu_gemm_bf16({{.*}}, %[[BETA]], {{.*}})
  // CHECK-NOT: linalg.generic
  linalg.fill ins(%zero : bf16) outs(%c : memref<4x16xbf16>)
  // expected-remark @below {{contraction becomes fsdprt_gpu_gemm_bf16 (beta = 0, the zero fill removed)}}
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>) attrs = {fsdp.f32_accumulation} {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// A marked product that no gemm can compute (its A has no unit stride): a
// kernel would round at every step, so it is an error.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @f32_accumulation_strided(%a: memref<4x8xbf16, strided<[16, 2]>>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  // expected-error @below {{a contraction with an f32 accumulator (fsdp.f32_accumulation) must become a cuBLAS gemm, but an operand has no unit stride in its matrix dimensions}}
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xbf16, strided<[16, 2]>>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>) attrs = {fsdp.f32_accumulation} {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

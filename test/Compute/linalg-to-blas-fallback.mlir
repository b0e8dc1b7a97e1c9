// RUN: fsdp-opt %s -split-input-file --fsdp-linalg-to-blas=report -verify-diagnostics | FileCheck %s

// What the BLAS lowering cannot take stays a linalg op (lowered to loops
// later); `report` says why.

// CHECK-LABEL: func.func @bf16
func.func @bf16(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  // CHECK: linalg.matmul
  // expected-remark @+1 {{contraction stays a loop: element type bf16 has no BLAS gemm (only f32 and f64)}}
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>)
  return
}

// -----

// bf16 operands into f32 are a gemm on widened copies (linalg-to-blas.mlir);
// into f64 they are not.
// CHECK-LABEL: func.func @mixed
func.func @mixed(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf64>) {
  // CHECK: linalg.matmul
  // expected-remark @+1 {{contraction stays a loop: mixed element types}}
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf64>)
  return
}

// -----

// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%a: memref<?x8xf32>, %b: memref<8x16xf32>, %c: memref<?x16xf32>) {
  // CHECK: linalg.matmul
  // expected-remark @+1 {{contraction stays a loop: dynamic loop bounds}}
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x16xf32>) outs(%c : memref<?x16xf32>)
  return
}

// -----

// Neither matrix dimension of A has a unit stride.
// CHECK-LABEL: func.func @no_unit_stride
func.func @no_unit_stride(%a: memref<4x8xf32, strided<[16, 2]>>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // CHECK: linalg.matmul
  // expected-remark @+1 {{contraction stays a loop: an operand has no unit stride in its matrix dimensions}}
  linalg.matmul ins(%a, %b : memref<4x8xf32, strided<[16, 2]>>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// Two K dimensions that A and B lay out in different orders cannot be
// one matrix dimension.
#a = affine_map<(m, n, k0, k1) -> (m, k0, k1)>
#b = affine_map<(m, n, k0, k1) -> (k1, k0, n)>
#c = affine_map<(m, n, k0, k1) -> (m, n)>
// CHECK-LABEL: func.func @two_k
func.func @two_k(%a: memref<4x2x3xf32>, %b: memref<3x2x5xf32>, %c: memref<4x5xf32>) {
  // CHECK: linalg.generic
  // expected-remark @+1 {{contraction stays a loop: M, N or K dimensions are dynamic, broadcast or not contiguous in every operand}}
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<4x2x3xf32>, memref<3x2x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %z, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Accepted contractions are reported too.
// CHECK-LABEL: func.func @accepted
func.func @accepted(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // CHECK: call @cblas_sgemm
  // expected-remark @+1 {{contraction becomes cblas_sgemm}}
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// RUN: fsdp-opt %s -split-input-file --fsdp-fold-self-copies | FileCheck %s

// A slot written through a reshape, copied onto the same slot of the
// bucket: the same bytes, erased. A copy to another slot stays.
// CHECK-LABEL: func.func @slots
// CHECK-COUNT-1: memref.copy
// CHECK-NOT: memref.copy
// CHECK: return
func.func @slots(%x: memref<2x3xbf16>) -> memref<12xbf16> {
  %b = memref.alloc() : memref<12xbf16>
  %s = memref.subview %b[6] [6] [1] : memref<12xbf16> to memref<6xbf16, strided<[1], offset: 6>>
  %e = memref.expand_shape %s [[0, 1]] output_shape [2, 3] : memref<6xbf16, strided<[1], offset: 6>> into memref<2x3xbf16, strided<[3, 1], offset: 6>>
  memref.copy %x, %e : memref<2x3xbf16> to memref<2x3xbf16, strided<[3, 1], offset: 6>>
  %c = memref.collapse_shape %e [[0, 1]] : memref<2x3xbf16, strided<[3, 1], offset: 6>> into memref<6xbf16, strided<[1], offset: 6>>
  %t = memref.subview %b[6] [6] [1] : memref<12xbf16> to memref<6xbf16, strided<[1], offset: 6>>
  memref.copy %c, %t : memref<6xbf16, strided<[1], offset: 6>> to memref<6xbf16, strided<[1], offset: 6>>
  return %b : memref<12xbf16>
}

// -----

// Another offset, a strided (not contiguous) view or another buffer: kept.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: memref.copy
func.func @kept(%a: memref<8xf32>, %b: memref<8xf32>) {
  %s0 = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %s1 = memref.subview %a[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  memref.copy %s0, %s1 : memref<4xf32, strided<[1]>> to memref<4xf32, strided<[1], offset: 4>>
  %e = memref.subview %a[0] [4] [2] : memref<8xf32> to memref<4xf32, strided<[2]>>
  memref.copy %s0, %e : memref<4xf32, strided<[1]>> to memref<4xf32, strided<[2]>>
  %t0 = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  memref.copy %s0, %t0 : memref<4xf32, strided<[1]>> to memref<4xf32, strided<[1]>>
  return
}

// RUN: fsdp-opt %s --split-input-file --fsdp-constant-globals | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --fsdp-constant-globals --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// Each tensor constant gets its global in program order (each new one at
// the top of the module: the last first); the second of a name gets a
// suffix; one value has one global; scalars and constants outside
// functions get none.
// CHECK-LABEL: module
// CHECK-NEXT: memref.global "private" constant @__constant_2xf32_0 : memref<2xf32> = dense<3.000000e+00> {alignment = 64 : i64}
// CHECK-NEXT: memref.global "private" constant @__constant_4xi64 : memref<4xi64> = dense<[0, 1, 2, 3]> {alignment = 64 : i64}
// CHECK-NEXT: memref.global "private" constant @__constant_2xf32 : memref<2xf32> = dense<1.000000e+00> {alignment = 64 : i64}
// CHECK-NOT: memref.global
// CHECK: func.func @first
// CHECK: func.func @second
func.func @first() -> (tensor<2xf32>, f32) {
  %a = arith.constant dense<1.0> : tensor<2xf32>
  %s = arith.constant 2.0 : f32
  return %a, %s : tensor<2xf32>, f32
}
func.func @second() -> (tensor<4xi64>, tensor<2xf32>, tensor<2xf32>) {
  %i = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %a = arith.constant dense<1.0> : tensor<2xf32>
  %b = arith.constant dense<3.0> : tensor<2xf32>
  return %i, %a, %b : tensor<4xi64>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Bufferization finds the globals: their names follow the program, not the
// order one-shot-bufferize visits the functions that call no other (which
// changes from one run to the next; four such functions here).
// BUF: // {{-+}}
// BUF-NEXT: module {
// BUF-NEXT: memref.global "private" constant @__constant_3xf32_2 : memref<3xf32> = dense<4.000000e+00>
// BUF-NEXT: memref.global "private" constant @__constant_3xf32_1 : memref<3xf32> = dense<3.000000e+00>
// BUF-NEXT: memref.global "private" constant @__constant_3xf32_0 : memref<3xf32> = dense<2.000000e+00>
// BUF-NEXT: memref.global "private" constant @__constant_3xf32 : memref<3xf32> = dense<1.000000e+00>
// BUF-NOT: memref.global
// BUF-LABEL: func.func @one
// BUF: memref.get_global @__constant_3xf32 :
// BUF-LABEL: func.func @two
// BUF: memref.get_global @__constant_3xf32_0 :
// BUF-LABEL: func.func @three
// BUF: memref.get_global @__constant_3xf32_1 :
// BUF-LABEL: func.func @four
// BUF: memref.get_global @__constant_3xf32_2 :
func.func @one() -> tensor<3xf32> {
  %c = arith.constant dense<1.0> : tensor<3xf32>
  return %c : tensor<3xf32>
}
func.func @two() -> tensor<3xf32> {
  %c = arith.constant dense<2.0> : tensor<3xf32>
  return %c : tensor<3xf32>
}
func.func @three() -> tensor<3xf32> {
  %c = arith.constant dense<3.0> : tensor<3xf32>
  return %c : tensor<3xf32>
}
func.func @four() -> tensor<3xf32> {
  %c = arith.constant dense<4.0> : tensor<3xf32>
  return %c : tensor<3xf32>
}

// RUN: fsdp-opt %s -split-input-file --fsdp-expand-powers | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-expand-powers="max-exponent=2" | FileCheck %s --check-prefix=LIMIT

// GELU's x ** 3 (torch.pow(x, 3.0)) as math.fpowi: x * (x * x), the order
// of LLVM's llvm.powi expansion.
// CHECK-LABEL: func.func @cube_fpowi
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[X]], %[[SQ]] : f32
// CHECK: return %[[R]]
// CHECK-NOT: math.fpowi
// LIMIT-LABEL: func.func @cube_fpowi
// LIMIT: math.fpowi
func.func @cube_fpowi(%x: f32) -> f32 {
  %c3 = arith.constant 3 : i64
  %r = math.fpowi %x, %c3 : f32, i64
  return %r : f32
}

// -----

// math.powf with an integral exponent inside a linalg body (as
// convert-elementwise-to-linalg leaves it): x^4 = (x * x) * (x * x); x^2.
// CHECK-LABEL: func.func @powf_in_body
// CHECK: ^bb0(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK:   %[[SQ:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK:   %[[Q:.*]] = arith.mulf %[[SQ]], %[[SQ]] : f32
// CHECK:   %[[S2:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK:   %[[SUM:.*]] = arith.addf %[[Q]], %[[S2]] : f32
// CHECK:   linalg.yield %[[SUM]]
// CHECK-NOT: math.powf
// LIMIT-LABEL: func.func @powf_in_body
// LIMIT: math.powf
// LIMIT-NOT: math.powf
#id = affine_map<(d0) -> (d0)>
func.func @powf_in_body(%t: tensor<8xf32>) -> tensor<8xf32> {
  %four = arith.constant 4.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%t : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %p = math.powf %a, %four : f32
    %q = math.powf %a, %two : f32
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Negative exponents: 1 / x^|n|; x^0 = 1; bf16 too.
// CHECK-LABEL: func.func @negative_and_zero
// LIMIT-LABEL: func.func @negative_and_zero
// CHECK-SAME: (%[[X:.*]]: bf16)
// CHECK: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : bf16
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : bf16
// CHECK: %[[INV:.*]] = arith.divf %[[ONE]], %[[SQ]] : bf16
// CHECK: return %[[INV]], %{{.*}} : bf16, bf16
// CHECK-NOT: math.
func.func @negative_and_zero(%x: bf16) -> (bf16, bf16) {
  %m2 = arith.constant -2 : i32
  %z = arith.constant 0.0 : bf16
  %r = math.fpowi %x, %m2 : bf16, i32
  %s = math.powf %x, %z : bf16
  return %r, %s : bf16, bf16
}

// -----

// Not small integer powers: a fractional exponent, one too large, and one
// that is not a constant stay.
// CHECK-LABEL: func.func @kept
// CHECK: math.powf
// CHECK: math.fpowi
// CHECK: math.fpowi
// CHECK-NOT: arith.mulf
func.func @kept(%x: f32, %n: i32) -> (f32, f32, f32) {
  %half = arith.constant 2.5 : f32
  %big = arith.constant 17 : i32
  %a = math.powf %x, %half : f32
  %b = math.fpowi %x, %big : f32, i32
  %c = math.fpowi %x, %n : f32, i32
  return %a, %b, %c : f32, f32, f32
}

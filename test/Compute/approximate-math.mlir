// RUN: fsdp-opt %s -split-input-file --fsdp-approximate-math | FileCheck %s

// f32 exp, erf, log and tanh become arithmetic (no libm call left).
// CHECK-LABEL: func.func @f32
func.func @f32(%x: f32) -> f32 {
  // CHECK-NOT: math.exp
  // CHECK-NOT: math.erf
  // CHECK-NOT: math.log
  // CHECK-NOT: math.tanh
  // CHECK: math.fma
  // CHECK: return
  %a = math.exp %x : f32
  %b = math.erf %a : f32
  %c = math.log %b : f32
  %d = math.tanh %c : f32
  return %d : f32
}

// -----

// Vectors of f32 too.
// CHECK-LABEL: func.func @vector
func.func @vector(%x: vector<8xf32>) -> vector<8xf32> {
  // CHECK-NOT: math.exp
  // CHECK: math.fma {{.*}} : vector<8xf32>
  %a = math.exp %x : vector<8xf32>
  return %a : vector<8xf32>
}

// -----

// f64 and bf16 keep their math ops (libm calls), as does a function
// without an approximation here (sqrt, rsqrt).
// CHECK-LABEL: func.func @kept
func.func @kept(%x: f64, %y: bf16, %z: f32) -> (f64, bf16, f32, f32) {
  // CHECK: math.exp %{{.*}} : f64
  // CHECK: math.erf %{{.*}} : bf16
  // CHECK: math.sqrt %{{.*}} : f32
  // CHECK: math.rsqrt %{{.*}} : f32
  %a = math.exp %x : f64
  %b = math.erf %y : bf16
  %c = math.sqrt %z : f32
  %d = math.rsqrt %z : f32
  return %a, %b, %c, %d : f64, bf16, f32, f32
}

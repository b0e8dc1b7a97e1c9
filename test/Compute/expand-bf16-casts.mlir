// RUN: fsdp-opt %s -split-input-file --fsdp-expand-bf16-casts | FileCheck %s

// A boolean mask stored in bf16: through f32, then one truncf.
// CHECK-LABEL: func.func @mask_to_bf16
// CHECK: %[[F:.*]] = arith.uitofp %{{.*}} : i1 to f32
// CHECK: %[[B:.*]] = arith.truncf %[[F]] : f32 to bf16
// CHECK: return %[[B]]
func.func @mask_to_bf16(%m: i1) -> bf16 {
  %0 = arith.uitofp %m : i1 to bf16
  return %0 : bf16
}

// -----

// Signed integers and f64, on vectors and tensors too; f32 -> bf16 and
// conversions to other types stay as they are.
// CHECK-LABEL: func.func @others
// CHECK: arith.sitofp %{{.*}} : vector<4xi32> to vector<4xf32>
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// CHECK: arith.truncf %{{.*}} : tensor<2xf64> to tensor<2xf32>
// CHECK: arith.truncf %{{.*}} : tensor<2xf32> to tensor<2xbf16>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT: arith.truncf
// CHECK: arith.sitofp %{{.*}} : i32 to f16
// CHECK-NOT: arith.truncf
func.func @others(%v: vector<4xi32>, %t: tensor<2xf64>, %f: f32, %i: i32)
    -> (vector<4xbf16>, tensor<2xbf16>, bf16, f16) {
  %0 = arith.sitofp %v : vector<4xi32> to vector<4xbf16>
  %1 = arith.truncf %t : tensor<2xf64> to tensor<2xbf16>
  %2 = arith.truncf %f : f32 to bf16
  %3 = arith.sitofp %i : i32 to f16
  return %0, %1, %2, %3 : vector<4xbf16>, tensor<2xbf16>, bf16, f16
}

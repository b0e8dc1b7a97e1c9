// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @rows
// CHECK: fsdp.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
func.func @rows(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_lhs
// CHECK: fsdp.grouped_matmul_transpose_lhs %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x4xf64>, tensor<6x5xf64>, tensor<3xi64> -> tensor<3x4x5xf64>
func.func @transpose_lhs(%x: tensor<6x4xf64>, %g: tensor<6x5xf64>, %o: tensor<3xi64>) -> tensor<3x4x5xf64> {
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf64>, tensor<6x5xf64>, tensor<3xi64> -> tensor<3x4x5xf64>
  return %dw : tensor<3x4x5xf64>
}

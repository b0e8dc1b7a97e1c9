// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul="device=true" -verify-diagnostics

// compute=gpu keeps the grouped products for the device grouped gemm, which
// takes f32 and bf16: another element type is refused at the op.
func.func @f64_on_gpu(%x: tensor<6x4xf64>, %w: tensor<3x4x5xf64>, %o: tensor<3xi32>) -> tensor<6x5xf64> {
  // expected-error @+1 {{'fsdp.grouped_matmul' op has no compute=gpu lowering for element type 'f64': the device grouped gemm takes f32 and bf16}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf64>, tensor<3x4x5xf64>, tensor<3xi32> -> tensor<6x5xf64>
  return %y : tensor<6x5xf64>
}

// -----

func.func @i16_offsets_on_gpu(%x: tensor<6x4xf32>, %g: tensor<6x5xf32>, %o: tensor<3xi16>) -> tensor<3x4x5xf32> {
  // expected-error @+1 {{'fsdp.grouped_matmul_transpose_lhs' op has no compute=gpu lowering for offsets of type 'i16': the device grouped gemm reads i32, i64 and index offsets}}
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<6x5xf32>, tensor<3xi16> -> tensor<3x4x5xf32>
  return %dw : tensor<3x4x5xf32>
}

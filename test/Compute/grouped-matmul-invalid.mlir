// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul="device=true" -verify-diagnostics

// compute=gpu has no grouped gemm: the op is refused, naming what is missing.
func.func @on_gpu(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{'fsdp.grouped_matmul' op has no compute=gpu lowering: it needs a grouped gemm on the device}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul -verify-diagnostics

// The lowering slices static operands only.
func.func @dynamic_rows(%x: tensor<?x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xi32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'fsdp.grouped_matmul' op needs static shapes to be lowered, got 'tensor<?x4xf32>', 'tensor<3x4x5xf32>', 'tensor<3xi32>'}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<?x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<?x5xf32>
  return %y : tensor<?x5xf32>
}

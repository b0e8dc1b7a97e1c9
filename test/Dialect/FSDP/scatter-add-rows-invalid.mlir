// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @indices_not_1d(%g: tensor<6x4xf32>, %i: tensor<1x6xi64>, %z: tensor<10x4xf32>) -> tensor<10x4xf32> {
  // expected-error @+1 {{indices must be a 1-D integer tensor or buffer, got 'tensor<1x6xi64>'}}
  %r = fsdp.scatter_add_rows %g, %i into %z : tensor<6x4xf32>, tensor<1x6xi64> -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

func.func @float_indices(%g: tensor<6x4xf32>, %i: tensor<6xf32>, %z: tensor<10x4xf32>) -> tensor<10x4xf32> {
  // expected-error @+1 {{indices must be a 1-D integer tensor or buffer, got 'tensor<6xf32>'}}
  %r = fsdp.scatter_add_rows %g, %i into %z : tensor<6x4xf32>, tensor<6xf32> -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

func.func @token_count(%g: tensor<5x4xf32>, %i: tensor<6xi64>, %z: tensor<10x4xf32>) -> tensor<10x4xf32> {
  // expected-error @+1 {{source has 5 tokens along dim 0 but there are 6 indices}}
  %r = fsdp.scatter_add_rows %g, %i into %z : tensor<5x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

func.func @width(%g: tensor<4x6xf32>, %i: tensor<6xi64>, %z: tensor<5x10xf32>) -> tensor<5x10xf32> {
  // expected-error @+1 {{source and output rows differ in width along dim 0: 4 and 5}}
  %r = fsdp.scatter_add_rows %g, %i into %z {columns} : tensor<4x6xf32>, tensor<6xi64> -> tensor<5x10xf32>
  return %r : tensor<5x10xf32>
}

// -----

func.func @element_types(%g: tensor<6x4xbf16>, %i: tensor<6xi64>, %z: tensor<10x4xf32>) -> tensor<10x4xf32> {
  // expected-error @+1 {{source and output must have one float element type, got 'bf16' and 'f32'}}
  %r = fsdp.scatter_add_rows %g, %i into %z : tensor<6x4xbf16>, tensor<6xi64> -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

func.func @rank(%g: memref<6x4x1xf32>, %i: memref<6xi64>, %z: memref<10x4xf32>) {
  // expected-error @+1 {{source and output must be 2-D}}
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4x1xf32>, memref<6xi64>, memref<10x4xf32>
  return
}

// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @rhs_not_3d(%x: tensor<6x4xf32>, %w: tensor<4x5xf32>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{expects a 2-D lhs, a 3-D rhs and a 2-D result, got 'tensor<6x4xf32>', 'tensor<4x5xf32>' and 'tensor<6x5xf32>'}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

func.func @contracted_size(%x: tensor<6x4xf32>, %w: tensor<3x8x5xf32>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{lhs columns and rhs rows (the contracted size) differ: 4 and 8}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x8x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

func.func @group_count(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<2xi32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{has 3 groups but 2 offsets}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<2xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

func.func @float_offsets(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xf32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{offsets must be a 1-D integer tensor, got 'tensor<3xf32>'}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xf32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

func.func @element_types(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf64>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{lhs, rhs and result must have one float element type, got 'f32', 'f64' and 'f32'}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf64>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

func.func @result_rows(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xi32>) -> tensor<7x5xf32> {
  // expected-error @+1 {{lhs and result rows differ: 6 and 7}}
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<7x5xf32>
  return %y : tensor<7x5xf32>
}

// -----

func.func @tl_rows(%x: tensor<6x4xf32>, %g: tensor<7x5xf32>, %o: tensor<3xi32>) -> tensor<3x4x5xf32> {
  // expected-error @+1 {{lhs and rhs rows (the contracted size) differ: 6 and 7}}
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<7x5xf32>, tensor<3xi32> -> tensor<3x4x5xf32>
  return %dw : tensor<3x4x5xf32>
}

// -----

func.func @tl_groups(%x: tensor<6x4xf32>, %g: tensor<6x5xf32>, %o: tensor<4xi32>) -> tensor<3x4x5xf32> {
  // expected-error @+1 {{has 3 groups but 4 offsets}}
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<6x5xf32>, tensor<4xi32> -> tensor<3x4x5xf32>
  return %dw : tensor<3x4x5xf32>
}

// -----

func.func @tl_result_rank(%x: tensor<6x4xf32>, %g: tensor<6x5xf32>, %o: tensor<3xi32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{expects a 2-D lhs, a 2-D rhs and a 3-D result, got 'tensor<6x4xf32>', 'tensor<6x5xf32>' and 'tensor<4x5xf32>'}}
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<6x5xf32>, tensor<3xi32> -> tensor<4x5xf32>
  return %dw : tensor<4x5xf32>
}

// -----

func.func @buffer_output_rows(%x: memref<6x4xf32>, %w: memref<3x4x5xf32>, %o: memref<3xi32>, %y: memref<7x5xf32>) {
  // expected-error @+1 {{lhs and output rows differ: 6 and 7}}
  fsdp.buffer.grouped_matmul %x, %w, %o into %y : memref<6x4xf32>, memref<3x4x5xf32>, memref<3xi32>, memref<7x5xf32>
  return
}

// -----

func.func @buffer_transposed_rank(%x: memref<6x4xf32>, %g: memref<6x5xf32>, %o: memref<3xi32>, %dw: memref<4x5xf32>) {
  // expected-error @+1 {{expects a 2-D lhs, a 2-D rhs and a 3-D result, got 'memref<6x4xf32>', 'memref<6x5xf32>' and 'memref<4x5xf32>'}}
  fsdp.buffer.grouped_matmul %x, %g, %o into %dw {transpose_lhs} : memref<6x4xf32>, memref<6x5xf32>, memref<3xi32>, memref<4x5xf32>
  return
}

// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @too_many(%x: tensor<4x3xf32>) -> tensor<4x5xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op picks 5 indices from rows of 3}}
  %ids = fsdp.topk_indices %x {largest} : tensor<4x3xf32> -> tensor<4x5xi64>
  return %ids : tensor<4x5xi64>
}

// -----

func.func @i32_result(%x: tensor<4x3xf32>) -> tensor<4x2xi32> {
  // expected-error @+1 {{'fsdp.topk_indices' op result must hold i64 indices, got 'i32'}}
  %ids = fsdp.topk_indices %x {largest} : tensor<4x3xf32> -> tensor<4x2xi32>
  return %ids : tensor<4x2xi32>
}

// -----

func.func @rows_differ(%x: tensor<4x3xf32>) -> tensor<5x2xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op input and result differ in dim 0: 4 and 5}}
  %ids = fsdp.topk_indices %x {largest} : tensor<4x3xf32> -> tensor<5x2xi64>
  return %ids : tensor<5x2xi64>
}

// -----

func.func @stable_type(%x: tensor<4x3xf32>, %s: tensor<4x1xi64>) -> tensor<4x2xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op stable must have the result's type 'tensor<4x2xi64>', got 'tensor<4x1xi64>'}}
  %ids = fsdp.topk_indices %x stable %s {largest} : tensor<4x3xf32>, tensor<4x1xi64> -> tensor<4x2xi64>
  return %ids : tensor<4x2xi64>
}

// -----

func.func @i8_input(%x: tensor<4x3xi8>) -> tensor<4x2xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op input must have a float, i32 or i64 element type, got 'i8'}}
  %ids = fsdp.topk_indices %x {largest} : tensor<4x3xi8> -> tensor<4x2xi64>
  return %ids : tensor<4x2xi64>
}

// -----

func.func @sort_part(%x: tensor<4x40xf32>) -> tensor<4x2xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op with `sort` orders every index of a row: 2 indices from rows of 40}}
  %ids = fsdp.topk_indices %x {sort} : tensor<4x40xf32> -> tensor<4x2xi64>
  return %ids : tensor<4x2xi64>
}

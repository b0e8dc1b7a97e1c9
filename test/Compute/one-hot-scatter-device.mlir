// RUN: fsdp-opt %s -split-input-file --fsdp-one-hot-scatter="device=true report=true" -verify-diagnostics | FileCheck %s

// fsdp-one-hot-scatter{device=true} (compute=gpu): the one-hot products of
// one-hot-scatter.mlir become one fsdp.scatter_add_rows each instead of
// host loops (which could not read device buffers); the one-hot matrix and
// what built it are gone all the same.

// The frontend's embedding backward: the 6 rows of %g added to the rows of
// the zero fill that %idx names.
// CHECK-LABEL: func.func @embedding_backward
// CHECK-SAME: (%[[IDX:.*]]: tensor<6xi64>, %[[G:.*]]: tensor<6x4xf32>)
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: %[[R:.*]] = fsdp.scatter_add_rows %[[G]], %[[IDX]] into %[[ZERO]] : tensor<6x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.transpose
// CHECK-NOT: arith.cmpi eq
// CHECK-NOT: scf.for
#col = affine_map<(d0, d1) -> (d0, 0)>
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @embedding_backward(%idx: tensor<6xi64>, %g: tensor<6x4xf32>) -> tensor<10x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %e10 = tensor.empty() : tensor<10xi64>
  %arange = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e10 : tensor<10xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<10xi64>
  %col = tensor.expand_shape %idx [[0, 1]] output_shape [6, 1] : tensor<6xi64> into tensor<6x1xi64>
  %eb = tensor.empty() : tensor<6x10xi1>
  %eq = linalg.generic {indexing_maps = [#col, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%col, %arange : tensor<6x1xi64>, tensor<10xi64>) outs(%eb : tensor<6x10xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %t = arith.cmpi eq, %a, %b : i64
    linalg.yield %t : i1
  } -> tensor<6x10xi1>
  %ef = tensor.empty() : tensor<6x10xf32>
  %hot = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<6x10xi1>) outs(%ef : tensor<6x10xf32>) {
  ^bb0(%a: i1, %out: f32):
    %f = arith.uitofp %a : i1 to f32
    linalg.yield %f : f32
  } -> tensor<6x10xf32>
  %et = tensor.empty() : tensor<10x6xf32>
  %hotT = linalg.transpose ins(%hot : tensor<6x10xf32>) outs(%et : tensor<10x6xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<10x4xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%e : tensor<10x4xf32>) -> tensor<10x4xf32>
  // expected-remark@+1 {{one-hot matrix product as a device scatter-add over 6 tokens}}
  %r = linalg.matmul ins(%hotT, %g : tensor<10x6xf32>, tensor<6x4xf32>) outs(%zero : tensor<10x4xf32>) -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

// Indices of shape 1x5 (i32) are collapsed to the 1-D tensor the op takes;
// the scatter accumulates into the given init. The one-hot matrix has
// another use and stays.
// CHECK-LABEL: func.func @fused_select_into_init
// CHECK-SAME: (%[[IDX:.*]]: tensor<1x5xi32>, %[[G:.*]]: tensor<5x3xf32>, %[[C:.*]]: tensor<7x3xf32>)
// CHECK: %[[HOT:.*]] = linalg.generic
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[IDX]] {{\[\[}}0, 1]] : tensor<1x5xi32> into tensor<5xi32>
// CHECK: %[[R:.*]] = fsdp.scatter_add_rows %[[G]], %[[FLAT]] into %[[C]] : tensor<5x3xf32>, tensor<5xi32> -> tensor<7x3xf32>
// CHECK: return %[[R]], %[[HOT]]
// CHECK-NOT: linalg.matmul
#b = affine_map<(d0, d1) -> (0, d1)>
#i2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @fused_select_into_init(%idx: tensor<1x5xi32>, %g: tensor<5x3xf32>, %c: tensor<7x3xf32>) -> (tensor<7x3xf32>, tensor<7x5xf32>) {
  %one = arith.constant 1.000000e+00 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<7x5xf32>
  %hot = linalg.generic {indexing_maps = [#b, #i2], iterator_types = ["parallel", "parallel"]} ins(%idx : tensor<1x5xi32>) outs(%e : tensor<7x5xf32>) {
  ^bb0(%a: i32, %out: f32):
    %r = linalg.index 0 : index
    %ri = arith.index_cast %r : index to i32
    %t = arith.cmpi eq, %ri, %a : i32
    %v = arith.select %t, %one, %zero : f32
    linalg.yield %v : f32
  } -> tensor<7x5xf32>
  // expected-remark@+1 {{one-hot matrix product as a device scatter-add over 5 tokens}}
  %r = linalg.matmul ins(%hot, %g : tensor<7x5xf32>, tensor<5x3xf32>) outs(%c : tensor<7x3xf32>) -> tensor<7x3xf32>
  return %r, %hot : tensor<7x3xf32>, tensor<7x5xf32>
}

// -----

// A one-hot right operand with its class along the columns: a `columns`
// scatter (columns of %a into the columns of %c).
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%[[IDX:.*]]: tensor<5xi64>, %[[A:.*]]: tensor<3x5xf32>, %[[C:.*]]: tensor<3x7xf32>)
// CHECK: fsdp.scatter_add_rows %[[A]], %[[IDX]] into %[[C]] {columns} : tensor<3x5xf32>, tensor<5xi64> -> tensor<3x7xf32>
// CHECK-NOT: linalg.matmul
#t = affine_map<(d0, d1) -> (d0)>
#i2c = affine_map<(d0, d1) -> (d0, d1)>
func.func @columns(%idx: tensor<5xi64>, %a: tensor<3x5xf32>, %c: tensor<3x7xf32>) -> tensor<3x7xf32> {
  %e = tensor.empty() : tensor<5x7xf32>
  %hot = linalg.generic {indexing_maps = [#t, #i2c], iterator_types = ["parallel", "parallel"]} ins(%idx : tensor<5xi64>) outs(%e : tensor<5x7xf32>) {
  ^bb0(%x: i64, %out: f32):
    %r = linalg.index 1 : index
    %ri = arith.index_cast %r : index to i64
    %t = arith.cmpi eq, %x, %ri : i64
    %v = arith.uitofp %t : i1 to f32
    linalg.yield %v : f32
  } -> tensor<5x7xf32>
  // expected-remark@+1 {{one-hot matrix product as a device scatter-add over 5 tokens}}
  %r = linalg.matmul ins(%a, %hot : tensor<3x5xf32>, tensor<5x7xf32>) outs(%c : tensor<3x7xf32>) -> tensor<3x7xf32>
  return %r : tensor<3x7xf32>
}

// -----

// bf16 has a device form too.
// CHECK-LABEL: func.func @embedding_backward_bf16
// CHECK: fsdp.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} : tensor<6x4xbf16>, tensor<6xi64> -> tensor<10x4xbf16>
// CHECK-NOT: linalg.matmul
#col = affine_map<(d0, d1) -> (d0, 0)>
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @embedding_backward_bf16(%idx: tensor<6xi64>, %g: tensor<6x4xbf16>) -> tensor<10x4xbf16> {
  %cst = arith.constant 0.000000e+00 : bf16
  %e10 = tensor.empty() : tensor<10xi64>
  %arange = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e10 : tensor<10xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<10xi64>
  %col = tensor.expand_shape %idx [[0, 1]] output_shape [6, 1] : tensor<6xi64> into tensor<6x1xi64>
  %eb = tensor.empty() : tensor<6x10xi1>
  %eq = linalg.generic {indexing_maps = [#col, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%col, %arange : tensor<6x1xi64>, tensor<10xi64>) outs(%eb : tensor<6x10xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %t = arith.cmpi eq, %a, %b : i64
    linalg.yield %t : i1
  } -> tensor<6x10xi1>
  %ef = tensor.empty() : tensor<6x10xbf16>
  %hot = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<6x10xi1>) outs(%ef : tensor<6x10xbf16>) {
  ^bb0(%a: i1, %out: bf16):
    %f = arith.uitofp %a : i1 to bf16
    linalg.yield %f : bf16
  } -> tensor<6x10xbf16>
  %et = tensor.empty() : tensor<10x6xbf16>
  %hotT = linalg.transpose ins(%hot : tensor<6x10xbf16>) outs(%et : tensor<10x6xbf16>) permutation = [1, 0]
  %e = tensor.empty() : tensor<10x4xbf16>
  %zero = linalg.fill ins(%cst : bf16) outs(%e : tensor<10x4xbf16>) -> tensor<10x4xbf16>
  // expected-remark@+1 {{one-hot matrix product as a device scatter-add over 6 tokens}}
  %r = linalg.matmul ins(%hotT, %g : tensor<10x6xbf16>, tensor<6x4xbf16>) outs(%zero : tensor<10x4xbf16>) -> tensor<10x4xbf16>
  return %r : tensor<10x4xbf16>
}

// -----

// f64 has no device kernel: the product stays (no remark).
// CHECK-LABEL: func.func @embedding_backward_f64
// CHECK: linalg.matmul
// CHECK-NOT: fsdp.scatter_add_rows
#col = affine_map<(d0, d1) -> (d0, 0)>
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @embedding_backward_f64(%idx: tensor<6xi64>, %g: tensor<6x4xf64>) -> tensor<10x4xf64> {
  %cst = arith.constant 0.000000e+00 : f64
  %e10 = tensor.empty() : tensor<10xi64>
  %arange = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e10 : tensor<10xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<10xi64>
  %col = tensor.expand_shape %idx [[0, 1]] output_shape [6, 1] : tensor<6xi64> into tensor<6x1xi64>
  %eb = tensor.empty() : tensor<6x10xi1>
  %eq = linalg.generic {indexing_maps = [#col, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%col, %arange : tensor<6x1xi64>, tensor<10xi64>) outs(%eb : tensor<6x10xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %t = arith.cmpi eq, %a, %b : i64
    linalg.yield %t : i1
  } -> tensor<6x10xi1>
  %ef = tensor.empty() : tensor<6x10xf64>
  %hot = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<6x10xi1>) outs(%ef : tensor<6x10xf64>) {
  ^bb0(%a: i1, %out: f64):
    %f = arith.uitofp %a : i1 to f64
    linalg.yield %f : f64
  } -> tensor<6x10xf64>
  %et = tensor.empty() : tensor<10x6xf64>
  %hotT = linalg.transpose ins(%hot : tensor<6x10xf64>) outs(%et : tensor<10x6xf64>) permutation = [1, 0]
  %e = tensor.empty() : tensor<10x4xf64>
  %zero = linalg.fill ins(%cst : f64) outs(%e : tensor<10x4xf64>) -> tensor<10x4xf64>
  %r = linalg.matmul ins(%hotT, %g : tensor<10x6xf64>, tensor<6x4xf64>) outs(%zero : tensor<10x4xf64>) -> tensor<10x4xf64>
  return %r : tensor<10x4xf64>
}

// -----

// Under fsdp-autocast (param-dtype=bf16) the product is a generic with bf16
// operands (the one-hot rounded to bf16, exactly) widened in its body and an
// f32 result: the bf16 rows are widened to f32 and scattered.
// CHECK-LABEL: func.func @embedding_backward_bf16
// CHECK-SAME: (%[[IDX:.*]]: tensor<6xi64>, %[[G:.*]]: tensor<6x4xbf16>)
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: %[[W:.*]] = arith.extf %[[G]] : tensor<6x4xbf16> to tensor<6x4xf32>
// CHECK: %[[R:.*]] = fsdp.scatter_add_rows %[[W]], %[[IDX]] into %[[ZERO]] : tensor<6x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
#col = affine_map<(d0, d1) -> (d0, 0)>
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @embedding_backward_bf16(%idx: tensor<6xi64>, %g: tensor<6x4xbf16>) -> tensor<10x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %e10 = tensor.empty() : tensor<10xi64>
  %arange = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e10 : tensor<10xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<10xi64>
  %col = tensor.expand_shape %idx [[0, 1]] output_shape [6, 1] : tensor<6xi64> into tensor<6x1xi64>
  %eb = tensor.empty() : tensor<6x10xi1>
  %eq = linalg.generic {indexing_maps = [#col, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%col, %arange : tensor<6x1xi64>, tensor<10xi64>) outs(%eb : tensor<6x10xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %t = arith.cmpi eq, %a, %b : i64
    linalg.yield %t : i1
  } -> tensor<6x10xi1>
  %ef = tensor.empty() : tensor<6x10xf32>
  %hot = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<6x10xi1>) outs(%ef : tensor<6x10xf32>) {
  ^bb0(%a: i1, %out: f32):
    %f = arith.uitofp %a : i1 to f32
    linalg.yield %f : f32
  } -> tensor<6x10xf32>
  %et = tensor.empty() : tensor<10x6xf32>
  %hotT = linalg.transpose ins(%hot : tensor<6x10xf32>) outs(%et : tensor<10x6xf32>) permutation = [1, 0]
  %hot16 = arith.truncf %hotT : tensor<10x6xf32> to tensor<10x6xbf16>
  %e = tensor.empty() : tensor<10x4xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%e : tensor<10x4xf32>) -> tensor<10x4xf32>
  // expected-remark@+1 {{one-hot matrix product as a device scatter-add over 6 tokens}}
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%hot16, %g : tensor<10x6xbf16>, tensor<6x4xbf16>) outs(%zero : tensor<10x4xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %aw = arith.extf %a : bf16 to f32
    %bw = arith.extf %b : bf16 to f32
    %m = arith.mulf %aw, %bw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

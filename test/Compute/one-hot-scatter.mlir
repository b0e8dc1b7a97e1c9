// RUN: fsdp-opt %s -split-input-file --fsdp-one-hot-scatter="report=true" -verify-diagnostics | FileCheck %s

// The PyTorch frontend's embedding backward, one_hot(idx)^T @ grad, as
// torch-mlir emits it: an arange, the comparison against the expanded
// indices, the conversion to f32, a transpose and the product into zeros.
// It becomes a loop over the 6 tokens adding grad's row t to row idx[t];
// the one-hot matrix and what built it are gone.
// CHECK-LABEL: func.func @embedding_backward
// CHECK-SAME: (%[[IDX:.*]]: tensor<6xi64>, %[[G:.*]]: tensor<6x4xf32>)
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 10 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[R:.*]] = scf.for %[[T:[a-z0-9_]+]] = %[[C0]] to %[[C6]] step %[[C1]] iter_args(%[[ACC:.*]] = %[[ZERO]])
// CHECK:   %[[RAW:.*]] = tensor.extract %[[IDX]][%[[T]]] : tensor<6xi64>
// CHECK:   %[[ROW:.*]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK:   %[[OK:.*]] = arith.cmpi ult, %[[ROW]], %[[C10]]
// CHECK:   %[[SAFE:.*]] = arith.select %[[OK]], %[[ROW]], %[[C0]]
// CHECK:   %[[N:.*]] = arith.select %[[OK]], %[[C4]], %[[C0]]
// CHECK:   scf.for %[[W:[a-z0-9_]+]] = %[[C0]] to %[[N]] step %[[C1]] iter_args(%[[A:.*]] = %[[ACC]])
// CHECK:     %[[CUR:.*]] = tensor.extract %[[A]][%[[SAFE]], %[[W]]]
// CHECK:     %[[ADD:.*]] = tensor.extract %[[G]][%[[T]], %[[W]]]
// CHECK:     %[[SUM:.*]] = arith.addf %[[CUR]], %[[ADD]] : f32
// CHECK:     tensor.insert %[[SUM]] into %[[A]][%[[SAFE]], %[[W]]]
// CHECK: return %[[R]]
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.transpose
// CHECK-NOT: arith.cmpi eq
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
  // expected-remark@+1 {{one-hot matrix product as a scatter-add over 6 tokens}}
  %r = linalg.matmul ins(%hotT, %g : tensor<10x6xf32>, tensor<6x4xf32>) outs(%zero : tensor<10x4xf32>) -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

// One fused generic (select form, the row index from linalg.index, class
// along the rows already), accumulating into a given tensor: the loop
// starts from it. The one-hot matrix has another use and stays.
// CHECK-LABEL: func.func @fused_select_into_init
// CHECK-SAME: (%[[IDX:.*]]: tensor<1x5xi32>, %[[G:.*]]: tensor<5x3xf32>, %[[C:.*]]: tensor<7x3xf32>)
// CHECK: %[[HOT:.*]] = linalg.generic
// CHECK: scf.for %[[T:[a-z0-9_]+]] = {{.*}} iter_args(%{{.*}} = %[[C]])
// CHECK:   tensor.extract %[[IDX]][%{{.*}}, %[[T]]] : tensor<1x5xi32>
// CHECK:   arith.index_cast %{{.*}} : i32 to index
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
  // expected-remark@+1 {{one-hot matrix product as a scatter-add over 5 tokens}}
  %r = linalg.matmul ins(%hot, %g : tensor<7x5xf32>, tensor<5x3xf32>) outs(%c : tensor<7x3xf32>) -> tensor<7x3xf32>
  return %r, %hot : tensor<7x3xf32>, tensor<7x5xf32>
}

// -----

// A one-hot right operand with its class along the columns: columns of the
// left operand are scattered into columns of the output.
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%[[IDX:.*]]: tensor<5xi64>, %[[A:.*]]: tensor<3x5xf32>, %[[C:.*]]: tensor<3x7xf32>)
// CHECK: scf.for %[[T:[a-z0-9_]+]] =
// CHECK:   %[[ROW:.*]] = arith.index_cast
// CHECK:   %[[SAFE:.*]] = arith.select %{{.*}}, %[[ROW]]
// CHECK:   scf.for %[[W:[a-z0-9_]+]] =
// CHECK:     tensor.extract %{{.*}}[%[[W]], %[[SAFE]]] : tensor<3x7xf32>
// CHECK:     tensor.extract %[[A]][%[[W]], %[[T]]] : tensor<3x5xf32>
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
  // expected-remark@+1 {{one-hot matrix product as a scatter-add over 5 tokens}}
  %r = linalg.matmul ins(%a, %hot : tensor<3x5xf32>, tensor<5x7xf32>) outs(%c : tensor<3x7xf32>) -> tensor<3x7xf32>
  return %r : tensor<3x7xf32>
}

// -----

// Not scatters: a one-hot left operand with its class along the reduction
// dim (that product is a gather), a comparison other than equality, and a
// plain product. All stay matrix products.
// CHECK-LABEL: func.func @not_scatters
// CHECK-COUNT-3: linalg.matmul
// CHECK-NOT: scf.for
#tk = affine_map<(d0, d1) -> (d0)>
#m2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @not_scatters(%idx: tensor<5xi64>, %g: tensor<7x3xf32>, %c: tensor<5x3xf32>, %x: tensor<5x7xf32>) -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>) {
  %e = tensor.empty() : tensor<5x7xf32>
  %gather = linalg.generic {indexing_maps = [#tk, #m2], iterator_types = ["parallel", "parallel"]} ins(%idx : tensor<5xi64>) outs(%e : tensor<5x7xf32>) {
  ^bb0(%a: i64, %out: f32):
    %r = linalg.index 1 : index
    %ri = arith.index_cast %r : index to i64
    %t = arith.cmpi eq, %a, %ri : i64
    %v = arith.uitofp %t : i1 to f32
    linalg.yield %v : f32
  } -> tensor<5x7xf32>
  %r0 = linalg.matmul ins(%gather, %g : tensor<5x7xf32>, tensor<7x3xf32>) outs(%c : tensor<5x3xf32>) -> tensor<5x3xf32>
  %below = linalg.generic {indexing_maps = [#tk, #m2], iterator_types = ["parallel", "parallel"]} ins(%idx : tensor<5xi64>) outs(%e : tensor<5x7xf32>) {
  ^bb0(%a: i64, %out: f32):
    %r = linalg.index 1 : index
    %ri = arith.index_cast %r : index to i64
    %t = arith.cmpi slt, %a, %ri : i64
    %v = arith.uitofp %t : i1 to f32
    linalg.yield %v : f32
  } -> tensor<5x7xf32>
  %r1 = linalg.matmul ins(%below, %g : tensor<5x7xf32>, tensor<7x3xf32>) outs(%c : tensor<5x3xf32>) -> tensor<5x3xf32>
  %r2 = linalg.matmul ins(%x, %g : tensor<5x7xf32>, tensor<7x3xf32>) outs(%c : tensor<5x3xf32>) -> tensor<5x3xf32>
  return %r0, %r1, %r2 : tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
}

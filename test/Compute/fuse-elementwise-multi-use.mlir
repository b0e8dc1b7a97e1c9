// RUN: fsdp-opt %s -split-input-file --fsdp-fuse-elementwise="multi-use=true" | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-fuse-elementwise | FileCheck %s --check-prefix=SINGLE

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// GELU's forward as exported: every intermediate the backward keeps is a
// result. With multi-use the chain is one op that reads x once and writes
// the kept intermediates and the bf16 output; without it, the ops whose
// results have other uses stay kernels of their own.
// CHECK-LABEL: func.func @gelu
// CHECK: %[[F:.*]]:3 = linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<4x8xf32>)
// CHECK: math.tanh
// CHECK: arith.truncf
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#{{[0-2]}}, %[[F]]#{{[0-2]}}, %[[F]]#2
// SINGLE-LABEL: func.func @gelu
// SINGLE-COUNT-3: linalg.generic
// SINGLE-NOT: linalg.generic
// SINGLE: return
func.func @gelu(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %half : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %one : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %eb = tensor.empty() : tensor<4x8xbf16>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %u : tensor<4x8xf32>, tensor<4x8xf32>) outs(%eb : tensor<4x8xbf16>) {
  ^bb0(%in: f32, %in2: f32, %out: bf16):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<4x8xbf16>
  return %a, %t, %y : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A norm's centring: the input widened to f64 feeds a row sum and, after
// it, the difference. The widening is recomputed in each (it reads 4 bytes
// where its result is 8), so both read x and nothing f64 of the input's
// size is written.
// CHECK-LABEL: func.func @centre
// CHECK: %[[S:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : tensor<4x8xf32>)
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %[[S]] : tensor<4x8xf32>, tensor<4xf64>)
// CHECK: arith.extf
// CHECK: arith.subf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @centre(%x: tensor<4x8xf32>, %acc: tensor<4xf64>) -> tensor<4x8xf64> {
  %e = tensor.empty() : tensor<4x8xf64>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.extf %in : f32 to f64
    linalg.yield %0 : f64
  } -> tensor<4x8xf64>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%w : tensor<4x8xf64>) outs(%acc : tensor<4xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  } -> tensor<4xf64>
  %d = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<4x8xf64>, tensor<4xf64>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%in: f64, %m: f64, %out: f64):
    %0 = arith.subf %in, %m : f64
    linalg.yield %0 : f64
  } -> tensor<4x8xf64>
  return %d : tensor<4x8xf64>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#bcast = affine_map<(i, j) -> (i, 0)>

// A producer read through a broadcast is not fused with its other uses
// kept (its result would be written once per column).
// CHECK-LABEL: func.func @broadcast
// CHECK-COUNT-2: linalg.generic
func.func @broadcast(%r: tensor<4x1xf32>, %x: tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<4x8xf32>) {
  %e1 = tensor.empty() : tensor<4x1xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x1xf32>
  %b = linalg.generic {indexing_maps = [#bcast, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n, %x : tensor<4x1xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %0 = arith.addf %in, %in2 : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %n, %b : tensor<4x1xf32>, tensor<4x8xf32>
}

// -----

#id2 = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#id3 = affine_map<(b, s, j) -> (b, s, j)>

// A gemm's 2-d result plus a bias, read as the 3-d activation by GELU's
// ops: the bias add takes the 3-d shape (the reshape moves to its input),
// and the chain is one op; the last op reads two results of the fused
// producer (0.5 x and 1 + tanh), which the fused op computes itself. With
// the single-use fusion only, the reshape stays between the two.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: tensor.expand_shape %arg0
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK-SAME: ins(%{{.*}}, %arg1 : tensor<2x2x8xbf16>, tensor<8xbf16>)
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0, %[[F]]#1
// SINGLE-LABEL: func.func @bias_gelu
// SINGLE: linalg.generic
// SINGLE: tensor.expand_shape
// SINGLE: linalg.generic
func.func @bias_gelu(%y: tensor<4x8xbf16>, %b: tensor<8xbf16>) -> (tensor<2x2x8xf32>, tensor<2x2x8xbf16>) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %e2 = tensor.empty() : tensor<4x8xf32>
  %h2 = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x8xbf16>, tensor<8xbf16>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: bf16, %c: bf16, %out: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %c : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<4x8xf32>
  %h = tensor.expand_shape %h2 [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  %e = tensor.empty() : tensor<2x2x8xf32>
  %a = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h : tensor<2x2x8xf32>) outs(%e : tensor<2x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %half : f32
    linalg.yield %0 : f32
  } -> tensor<2x2x8xf32>
  %t = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h : tensor<2x2x8xf32>) outs(%e : tensor<2x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    %1 = arith.addf %0, %one : f32
    linalg.yield %1 : f32
  } -> tensor<2x2x8xf32>
  %eb = tensor.empty() : tensor<2x2x8xbf16>
  %o = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %t : tensor<2x2x8xf32>, tensor<2x2x8xf32>) outs(%eb : tensor<2x2x8xbf16>) {
  ^bb0(%p: f32, %q: f32, %out: bf16):
    %0 = arith.mulf %p, %q : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<2x2x8xbf16>
  return %h, %o : tensor<2x2x8xf32>, tensor<2x2x8xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// The last op reads two results of one producer, both kept for later
// uses: the fused op computes them once, writes both and reads neither.
// CHECK-LABEL: func.func @two_results
// CHECK: %[[F:.*]]:3 = linalg.generic
// CHECK-SAME: ins(%arg0 : tensor<4x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @two_results(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>) {
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %p:2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e, %e : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%in: f32, %o0: f32, %o1: f32):
    %0 = arith.mulf %in, %half : f32
    %1 = math.tanh %in : f32
    linalg.yield %0, %1 : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %eb = tensor.empty() : tensor<4x8xbf16>
  %o = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p#0, %p#1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%eb : tensor<4x8xbf16>) {
  ^bb0(%a: f32, %b: f32, %out: bf16):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<4x8xbf16>
  return %p#0, %p#1, %o : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

#id3 = affine_map<(b, s, j) -> (b, s, j)>
#id2 = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (j)>

// GELU's backward (3-d) read 2-d by its bf16 rounding and by a column sum
// (the bias gradient), both through one collapse_shape that comes before
// the rounding: the collapse moves after the fused op, which writes the
// f32 gradient and its rounding.
// CHECK-LABEL: func.func @rounded_gradient
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: arith.mulf
// CHECK: arith.truncf
// CHECK: tensor.collapse_shape %[[F]]#0
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
func.func @rounded_gradient(%g: tensor<2x2x8xf32>, %x: tensor<2x2x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<2x2x8xf32>
  %d = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g, %x : tensor<2x2x8xf32>, tensor<2x2x8xf32>) outs(%e : tensor<2x2x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<2x2x8xf32>
  %c = tensor.collapse_shape %d [[0, 1], [2]] : tensor<2x2x8xf32> into tensor<4x8xf32>
  %eb = tensor.empty() : tensor<4x8xbf16>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%eb : tensor<4x8xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<4x8xbf16>
  %zero = arith.constant 0.0 : f32
  %ec = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ec : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#id2, #red], iterator_types = ["reduction", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %r, %s : tensor<4x8xbf16>, tensor<8xf32>
}

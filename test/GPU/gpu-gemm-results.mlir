// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-gemm-results=report -verify-diagnostics | FileCheck %s

// An autocast product (bf16 operands widened to f32, f32 zeros) whose only
// reader rounds it to bf16 and adds a bias: the product becomes a bf16
// contraction with an f32 accumulator, from a bf16 zero fill of its own, and
// the reader reads the bf16 result in place of its rounding.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
// CHECK-LABEL: func.func @rounded
// CHECK-DAG: %[[Z:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<4x16xbf16>
// CHECK: %[[F:.*]] = linalg.fill ins(%[[Z]] : bf16) outs(%[[E]] : tensor<4x16xbf16>)
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%[[F]] : tensor<4x16xbf16>) attrs = {fsdp.f32_accumulation}
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: bf16):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : bf16
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[P]] : bf16
// CHECK-NEXT: linalg.yield %[[S]] : bf16
// CHECK: linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<4x16xbf16>, tensor<16xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: bf16, %[[BIAS:.*]]: bf16, %{{.*}}: f32):
// CHECK-NOT: arith.truncf
// CHECK: arith.extf %[[X]] : bf16 to f32
func.func @rounded(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %bias: tensor<16xbf16>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @below {{contraction writes its bf16 rounding (f32 accumulation)}}
  %c = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%z : tensor<4x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : tensor<4x16xf32>, tensor<16xbf16>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%x: f32, %bb: bf16, %o: f32):
    %t = arith.truncf %x : f32 to bf16
    %tf = arith.extf %t : bf16 to f32
    %bf = arith.extf %bb : bf16 to f32
    %sum = arith.addf %tf, %bf : f32
    linalg.yield %sum : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// The same product read as a 3-d activation (a tensor.expand_shape between
// the product and its rounding reader): the reshape is made on the bf16
// result.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(b, s, n) -> (b, s, n)>
// CHECK-LABEL: func.func @rounded_reshaped
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xbf16>) attrs = {fsdp.f32_accumulation}
// CHECK: %[[V:.*]] = tensor.expand_shape %[[G]] {{.*}} : tensor<4x16xbf16> into tensor<2x2x16xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[V]] : tensor<2x2x16xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: bf16, %{{.*}}: f32):
// CHECK-NOT: arith.truncf
// CHECK: arith.extf %[[X]] : bf16 to f32
func.func @rounded_reshaped(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<2x2x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @below {{contraction writes its bf16 rounding (f32 accumulation)}}
  %c = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%z : tensor<4x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %v = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 16] : tensor<4x16xf32> into tensor<2x2x16xf32>
  %e3 = tensor.empty() : tensor<2x2x16xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v : tensor<2x2x16xf32>) outs(%e3 : tensor<2x2x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.truncf %x : f32 to bf16
    %tf = arith.extf %t : bf16 to f32
    %sq = arith.mulf %tf, %tf : f32
    linalg.yield %sq : f32
  } -> tensor<2x2x16xf32>
  return %r : tensor<2x2x16xf32>
}

// -----

// A reader that uses the f32 sum itself (not only its rounding): the
// product keeps its f32 result.
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
// CHECK-LABEL: func.func @f32_reader
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NOT: fsdp.f32_accumulation
func.func @f32_reader(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %eh = tensor.empty() : tensor<4x16xbf16>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %c = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%z : tensor<4x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<4x16xf32>) outs(%eh : tensor<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %sq = arith.mulf %x, %x : f32
    %t = arith.truncf %sq : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x16xbf16>
  return %r : tensor<4x16xbf16>
}

// -----

// One zero fill shared by two products: each gets a fill of its own (one
// buffer each after bufferization, beta = 0 for both, no copy).
// CHECK-LABEL: func.func @shared_fill
// CHECK: %[[F1:.*]] = linalg.fill
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[F1]] : tensor<4x16xf32>)
// CHECK: %[[F2:.*]] = linalg.fill
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[F2]] : tensor<4x16xf32>)
func.func @shared_fill(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @below {{contraction starts from a zero fill of its own}}
  %x = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @below {{contraction starts from a zero fill of its own}}
  %y = linalg.matmul ins(%a, %c : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %x, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Zeros that reach a segment as an argument, made by another segment that
// returns them: the product starts from a fill of its own and the argument
// is removed from the private function and its call.
// CHECK-LABEL: func.func private @zeros
// CHECK: linalg.fill
// CHECK: return
func.func private @zeros() -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}
// CHECK-LABEL: func.func private @segment
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[F:.*]] = linalg.fill
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[F]] : tensor<4x16xf32>)
func.func private @segment(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %z: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-remark @below {{contraction starts from a zero fill of its own}}
  %x = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %x : tensor<4x16xf32>
}
// CHECK-LABEL: func.func @step
// CHECK: %[[Z:.*]] = call @zeros()
// CHECK: call @segment(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: call @segment(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
func.func @step(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = call @zeros() : () -> tensor<4x16xf32>
  %x = call @segment(%a, %b, %z) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = call @segment(%a, %b, %z) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %x, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// An accumulator that one call site does not pass as zeros: the product
// accumulates into it, unchanged.
// CHECK-LABEL: func.func private @accumulates
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x16xf32>, %[[Z:.*]]: tensor<4x16xf32>)
// CHECK-NOT: linalg.fill
// CHECK: linalg.matmul {{.*}} outs(%[[Z]] : tensor<4x16xf32>)
func.func private @accumulates(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %z: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %x = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %x : tensor<4x16xf32>
}
func.func @caller(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %x = call @accumulates(%a, %b, %z) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = call @accumulates(%a, %b, %c) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %x, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A column of dot products (no M dimension: a LayerNorm weight gradient) is
// no gemm: it keeps its f32 result, rounded by its reader.
#rows = affine_map<(r, c) -> (r, c)>
#col = affine_map<(r, c) -> (c)>
// CHECK-LABEL: func.func @no_gemm
// CHECK-NOT: fsdp.f32_accumulation
// CHECK: arith.truncf
func.func @no_gemm(%a: tensor<16x8xbf16>, %b: tensor<16x8xbf16>) -> tensor<8xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %eh = tensor.empty() : tensor<8xbf16>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = linalg.generic {indexing_maps = [#rows, #rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%a, %b : tensor<16x8xbf16>, tensor<16x8xbf16>) outs(%z : tensor<8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(c) -> (c)>, affine_map<(c) -> (c)>], iterator_types = ["parallel"]}
      ins(%c : tensor<8xf32>) outs(%eh : tensor<8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8xbf16>
  return %r : tensor<8xbf16>
}

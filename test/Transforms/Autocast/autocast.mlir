// RUN: fsdp-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(fsdp-autocast))" | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(fsdp-autocast{dtype=f16}))" | FileCheck %s --check-prefix=F16

// A linear layer on a parameter gathered in bf16: the contraction reads the
// gathered bf16 value (no widening) and the activation rounded once,
// multiplies them widened to f32 and accumulates in its f32 output, which
// is rounded once to bf16; the bias add reads that bf16 value, computes in
// f32 and stores bf16.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn3 = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
// CHECK-LABEL: func.func @linear
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xbf16>, %[[B:.*]]: tensor<16xf32>)
// CHECK:         %[[XH:.*]] = arith.truncf %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK:         %[[ACC:.*]] = linalg.generic {{.*}} ins(%[[XH]], %[[W]] : tensor<4x8xbf16>, tensor<16x8xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT:    ^bb0(%[[A:.*]]: bf16, %[[BB:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT:      %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:      %[[BW:.*]] = arith.extf %[[BB]] : bf16 to f32
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[AW]], %[[BW]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         %[[Y:.*]] = arith.truncf %[[ACC]] : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK:         %[[OUT:.*]] = tensor.empty() : tensor<4x16xbf16>
// CHECK:         %[[Z:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[B]] : tensor<4x16xbf16>, tensor<16xf32>) outs(%[[OUT]] : tensor<4x16xbf16>)
// CHECK:           arith.extf %{{.*}} : bf16 to f32
// CHECK:           arith.addf
// CHECK:           %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[R]] : bf16
// CHECK:         %[[ZW:.*]] = arith.extf %[[Z]] : tensor<4x16xbf16> to tensor<4x16xf32>
// CHECK:         return %[[ZW]]
// F16-LABEL: func.func @linear
// F16:         arith.truncf %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
// F16:         arith.truncf %{{.*}} : tensor<16x8xf32> to tensor<16x8xf16>
// F16:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<16x8xf16>) outs(%{{.*}} : tensor<4x16xf32>)
func.func @linear(%x: tensor<4x8xf32>, %wh: tensor<16x8xbf16>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %w = arith.extf %wh : tensor<16x8xbf16> to tensor<16x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#mk, #nk, #mn3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<16x8xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%a: f32, %bb: f32, %c: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %z = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %s = arith.addf %v, %bias : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Named contractions become generics with the same maps; a batch_matmul
// whose operands are transposes of bf16 values transposes bf16 data.
// CHECK-LABEL: func.func @named
// CHECK:         %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x8x4xbf16>) outs(%{{.*}} : tensor<2x4x8xbf16>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%[[T]], %{{.*}} : tensor<2x4x8xbf16>, tensor<2x8x3xbf16>) outs(%{{.*}} : tensor<2x4x3xf32>)
// CHECK:         arith.truncf %{{.*}} : tensor<2x4x3xf32> to tensor<2x4x3xbf16>
// CHECK-NOT:     linalg.batch_matmul
func.func @named(%ah: tensor<2x8x4xbf16>, %b: tensor<2x8x3xf32>) -> tensor<2x4x3xf32> {
  %a = arith.extf %ah : tensor<2x8x4xbf16> to tensor<2x8x4xf32>
  %e = tensor.empty() : tensor<2x4x8xf32>
  %at = linalg.transpose ins(%a : tensor<2x8x4xf32>) outs(%e : tensor<2x4x8xf32>) permutation = [0, 2, 1]
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<2x4x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%o : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %r = linalg.batch_matmul ins(%at, %b : tensor<2x4x8xf32>, tensor<2x8x3xf32>) outs(%acc : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  return %r : tensor<2x4x3xf32>
}

// -----

// Softmax over the last dimension of a bf16 activation (a contraction's
// result): the maximum and the sum are f32 reductions that read the bf16
// input widened; x - max and exp stay f32 (exponentiated, then summed); the
// normalized probabilities are stored bf16.
#id3 = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @softmax
// CHECK:         %[[MAX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[XH:.*]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[D:.*]] = linalg.generic {{.*}} ins(%[[XH]], %[[MAX]] : tensor<4x8xbf16>, tensor<4xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:           arith.subf
// CHECK-NOT:       arith.truncf
// CHECK:           linalg.yield %{{.*}} : f32
// CHECK:         %[[EXP:.*]] = linalg.generic {{.*}} ins(%[[D]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:           math.exp
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[EXP]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         %[[P:.*]] = linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] : tensor<4x8xf32>, tensor<4xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK:           arith.divf
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @softmax(%s: tensor<4x16xf32>, %wh: tensor<16x8xbf16>) -> tensor<4x8xf32> {
  %w = arith.extf %wh : tensor<16x8xbf16> to tensor<16x8xf32>
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %x = linalg.matmul ins(%s, %w : tensor<4x16xf32>, tensor<16x8xf32>) outs(%acc : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%v: f32, %m: f32):
    %n = arith.maximumf %v, %m : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id3, #red, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %n = arith.subf %v, %m : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = math.exp %v : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %n = arith.addf %v, %a : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %p = linalg.generic {indexing_maps = [#id3, #red, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %t: f32, %o: f32):
    %n = arith.divf %v, %t : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// LayerNorm of a step input x with a bf16 weight: the mean and the
// variance are f32 reductions; x - mean is summed (squared), so it stays
// f32; rsqrt(var + eps) reads only a statistic and stays f32; the
// normalized, scaled output is stored bf16.
#id4 = affine_map<(i, j) -> (i, j)>
#red4 = affine_map<(i, j) -> (i)>
#col4 = affine_map<(i, j) -> (j)>
#r1 = affine_map<(i) -> (i)>
// CHECK-LABEL: func.func @layernorm
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<4xf32>)
// CHECK:         %[[XC:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:           arith.subf
// CHECK:         %[[VAR:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[XC]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[VAR]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:           math.rsqrt
// CHECK-NOT:       arith.truncf
// CHECK:         linalg.generic {{.*}} ins(%[[XC]], %[[RSTD]], %{{.*}} : tensor<4x8xf32>, tensor<4xf32>, tensor<8xbf16>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @layernorm(%x: tensor<4x8xf32>, %wh: tensor<8xbf16>) -> tensor<4x8xf32> {
  %w = arith.extf %wh : tensor<8xbf16> to tensor<8xf32>
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 0.125 : f32
  %eps = arith.constant 1.0e-5 : f32
  %r = tensor.empty() : tensor<4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #red4], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %xc = linalg.generic {indexing_maps = [#id4, #red4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %m = arith.mulf %s, %n : f32
    %d = arith.subf %v, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  %var = linalg.generic {indexing_maps = [#id4, #red4], iterator_types = ["parallel", "reduction"]}
      ins(%xc : tensor<4x8xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %q, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %rstd = linalg.generic {indexing_maps = [#r1, #r1], iterator_types = ["parallel"]}
      ins(%var : tensor<4xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %n : f32
    %a = arith.addf %m, %eps : f32
    %q = math.rsqrt %a : f32
    linalg.yield %q : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id4, #red4, #col4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%xc, %rstd, %w : tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %q: f32, %g: f32, %o: f32):
    %a = arith.mulf %v, %q : f32
    %b = arith.mulf %a, %g : f32
    linalg.yield %b : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Not f32 (an f64 contraction) or not a tensor op: unchanged.
// CHECK-LABEL: func.func @untouched
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf64>, tensor<8x2xf64>)
// CHECK-NOT:     bf16
func.func @untouched(%a: tensor<4x8xf64>, %b: tensor<8x2xf64>, %c: tensor<4x2xf64>) -> tensor<4x2xf64> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf64>, tensor<8x2xf64>) outs(%c : tensor<4x2xf64>) -> tensor<4x2xf64>
  return %r : tensor<4x2xf64>
}

// -----

// Sparse experts' grouped products are contractions too: the gathered bf16
// expert weights and the activations rounded (once per reader; CSE merges
// them) are their operands, the
// result is bf16 (fsdp-grouped-matmul accumulates it in f32 and rounds it
// once), and f32 readers widen it; the offsets are untouched.
// CHECK-LABEL: func.func @experts
// CHECK-SAME:    (%[[X:.*]]: tensor<6x4xf32>, %[[W:.*]]: tensor<3x4x5xbf16>, %[[O:.*]]: tensor<3xi32>, %[[G:.*]]: tensor<6x5xf32>)
// CHECK:         %[[XH:.*]] = arith.truncf %[[X]] : tensor<6x4xf32> to tensor<6x4xbf16>
// CHECK:         %[[Y:.*]] = fsdp.grouped_matmul %[[XH]], %[[W]], %[[O]] : tensor<6x4xbf16>, tensor<3x4x5xbf16>, tensor<3xi32> -> tensor<6x5xbf16>
// CHECK:         %[[YW:.*]] = arith.extf %[[Y]] : tensor<6x5xbf16> to tensor<6x5xf32>
// CHECK:         %[[XH2:.*]] = arith.truncf %[[X]] : tensor<6x4xf32> to tensor<6x4xbf16>
// CHECK:         %[[GH:.*]] = arith.truncf %[[G]] : tensor<6x5xf32> to tensor<6x5xbf16>
// CHECK:         %[[DW:.*]] = fsdp.grouped_matmul_transpose_lhs %[[XH2]], %[[GH]], %[[O]] : tensor<6x4xbf16>, tensor<6x5xbf16>, tensor<3xi32> -> tensor<3x4x5xbf16>
// CHECK:         %[[DWW:.*]] = arith.extf %[[DW]] : tensor<3x4x5xbf16> to tensor<3x4x5xf32>
// CHECK:         return %[[YW]], %[[DWW]]
// F16-LABEL: func.func @experts
// F16:         fsdp.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x4xf16>, tensor<3x4x5xf16>, tensor<3xi32> -> tensor<6x5xf16>
func.func @experts(%x: tensor<6x4xf32>, %wh: tensor<3x4x5xbf16>, %o: tensor<3xi32>, %g: tensor<6x5xf32>) -> (tensor<6x5xf32>, tensor<3x4x5xf32>) {
  %w = arith.extf %wh : tensor<3x4x5xbf16> to tensor<3x4x5xf32>
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<6x5xf32>, tensor<3xi32> -> tensor<3x4x5xf32>
  return %y, %dw : tensor<6x5xf32>, tensor<3x4x5xf32>
}

// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-fuse-cross-entropy | FileCheck %s

// torch's F.cross_entropy as exported (f32 logits [4, 6], targets [4], the
// NLL backward's per-row scale c): two row reductions of the logits, the
// gather reading the logits, and one gradient pass; no [4, 6] f32
// intermediate is left.
// CHECK-LABEL: func.func @ce_f32(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x6xf32>, %[[T:[^:]+]]: tensor<4xi64>, %[[C:[^:]+]]: tensor<4x1xf32>
// CHECK: %[[M:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x6xf32>)
// CHECK: arith.maximumf
// CHECK: %[[S:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[M]] : tensor<4x6xf32>, tensor<4x1xf32>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: %[[LS:.+]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4x1xf32>)
// CHECK: math.log
// CHECK: %[[PICKED:.+]] = linalg.generic
// CHECK: tensor.extract %[[X]]
// CHECK: tensor.extract %[[M]]
// CHECK: tensor.extract %[[LS]]
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%[[X]], %[[M]], %[[LS]], %{{.*}}, %[[C]] : tensor<4x6xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xi64>, tensor<4x1xf32>) outs(%{{.*}} : tensor<4x6xf32>)
// CHECK: linalg.index 1
// CHECK: arith.cmpi eq
// CHECK: arith.cmpi ult
// CHECK: math.exp
// CHECK: return %[[PICKED]], %[[DX]]
// CHECK-NOT: tensor<4x6xi1>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d0, 0)>
#row1 = affine_map<(d0, d1) -> (d0)>
#cls = affine_map<(d0, d1) -> (d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @ce_f32(%logits: tensor<4x6xf32>, %t: tensor<4xi64>, %c: tensor<4x1xf32>) -> (tensor<4x1xf32>, tensor<4x6xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %c6 = arith.constant 6 : index
  %e_i = tensor.empty() : tensor<4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<4xi64>) -> tensor<4xi64>
  %e_m = tensor.empty() : tensor<4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<4xf32>) -> tensor<4xf32>
  %max:2 = linalg.generic {indexing_maps = [#id, #row1, #row1], iterator_types = ["parallel", "reduction"]} ins(%logits : tensor<4x6xf32>) outs(%f_m, %f_i : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%x: f32, %acc: f32, %idx: i64):
    %i = linalg.index 1 : index
    %ic = arith.index_cast %i : index to i64
    %mx = arith.maximumf %x, %acc : f32
    %gt = arith.cmpf ogt, %x, %acc : f32
    %s = arith.select %gt, %ic, %idx : i64
    linalg.yield %mx, %s : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  %m = tensor.expand_shape %max#0 [[0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %sh = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%logits, %m : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %mm: f32, %out: f32):
    %d = arith.subf %x, %mm : f32
    linalg.yield %d : f32
  } -> tensor<4x6xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sh : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %out: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %e_r = tensor.empty() : tensor<4x1xf32>
  %f_r = linalg.fill ins(%zero : f32) outs(%e_r : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x6xf32>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %log = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<4x1xf32>) outs(%e_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %out: f32):
    %r = math.log %x : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %logp = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%sh, %log : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %l: f32, %out: f32):
    %r = arith.subf %x, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %t1 = tensor.expand_shape %t [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
  %picked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<4x1xi64>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %n = linalg.index 0 : index
    %k = arith.index_cast %in : i64 to index
    %x = tensor.extract %logp[%n, %k] : tensor<4x6xf32>
    linalg.yield %x : f32
  } -> tensor<4x1xf32>
  %e_ar = tensor.empty() : tensor<6xi64>
  %ar = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e_ar : tensor<6xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<6xi64>
  %e_b = tensor.empty() : tensor<4x6xi1>
  %eq = linalg.generic {indexing_maps = [#col, #cls, #id], iterator_types = ["parallel", "parallel"]} ins(%t1, %ar : tensor<4x1xi64>, tensor<6xi64>) outs(%e_b : tensor<4x6xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %r = arith.cmpi eq, %a, %b : i64
    linalg.yield %r : i1
  } -> tensor<4x6xi1>
  %hot = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<4x6xi1>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: i1, %out: f32):
    %r = arith.uitofp %a : i1 to f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%hot : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %out: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %q = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%neg, %c : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.mulf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%logp : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %out: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %rs = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]} ins(%q : tensor<4x6xf32>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %e_g = tensor.empty() : tensor<4x6xf32>
  %p = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%sm, %rs : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e_g : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.mulf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<4x6xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%q, %p : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e_g : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):

    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<4x6xf32>
  return %picked, %dx : tensor<4x1xf32>, tensor<4x6xf32>
}


// -----

// Under fsdp-autocast: bf16 logits widened in the bodies, the gradient
// written in bf16 (one rounding, at the end).
// CHECK-LABEL: func.func @ce_bf16(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x6xbf16>
// CHECK: ins(%[[X]] : tensor<4x6xbf16>)
// CHECK: arith.extf
// CHECK: arith.maximumf
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%[[X]], {{.*}}) outs(%{{.*}} : tensor<4x6xbf16>)
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: return %{{.*}}, %[[DX]]
// CHECK-NOT: tensor<4x6xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d0, 0)>
#row1 = affine_map<(d0, d1) -> (d0)>
#cls = affine_map<(d0, d1) -> (d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @ce_bf16(%logits: tensor<4x6xbf16>, %t: tensor<4xi64>, %c: tensor<4x1xf32>) -> (tensor<4x1xf32>, tensor<4x6xbf16>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %c6 = arith.constant 6 : index
  %e_i = tensor.empty() : tensor<4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<4xi64>) -> tensor<4xi64>
  %e_m = tensor.empty() : tensor<4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<4xf32>) -> tensor<4xf32>
  %max:2 = linalg.generic {indexing_maps = [#id, #row1, #row1], iterator_types = ["parallel", "reduction"]} ins(%logits : tensor<4x6xbf16>) outs(%f_m, %f_i : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%x: bf16, %acc: f32, %idx: i64):
    %xw = arith.extf %x : bf16 to f32
    %i = linalg.index 1 : index
    %ic = arith.index_cast %i : index to i64
    %mx = arith.maximumf %xw, %acc : f32
    %gt = arith.cmpf ogt, %xw, %acc : f32
    %s = arith.select %gt, %ic, %idx : i64
    linalg.yield %mx, %s : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  %m = tensor.expand_shape %max#0 [[0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %sh = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%logits, %m : tensor<4x6xbf16>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: bf16, %mm: f32, %out: f32):
    %xw = arith.extf %x : bf16 to f32
    %d = arith.subf %xw, %mm : f32
    linalg.yield %d : f32
  } -> tensor<4x6xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sh : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %out: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %e_r = tensor.empty() : tensor<4x1xf32>
  %f_r = linalg.fill ins(%zero : f32) outs(%e_r : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x6xf32>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %log = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<4x1xf32>) outs(%e_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %out: f32):
    %r = math.log %x : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %logp = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%sh, %log : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %l: f32, %out: f32):
    %r = arith.subf %x, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %t1 = tensor.expand_shape %t [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
  %picked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<4x1xi64>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %n = linalg.index 0 : index
    %k = arith.index_cast %in : i64 to index
    %x = tensor.extract %logp[%n, %k] : tensor<4x6xf32>
    linalg.yield %x : f32
  } -> tensor<4x1xf32>
  %e_ar = tensor.empty() : tensor<6xi64>
  %ar = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e_ar : tensor<6xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<6xi64>
  %e_b = tensor.empty() : tensor<4x6xi1>
  %eq = linalg.generic {indexing_maps = [#col, #cls, #id], iterator_types = ["parallel", "parallel"]} ins(%t1, %ar : tensor<4x1xi64>, tensor<6xi64>) outs(%e_b : tensor<4x6xi1>) {
  ^bb0(%a: i64, %b: i64, %out: i1):
    %r = arith.cmpi eq, %a, %b : i64
    linalg.yield %r : i1
  } -> tensor<4x6xi1>
  %hot = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%eq : tensor<4x6xi1>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: i1, %out: f32):
    %r = arith.uitofp %a : i1 to f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%hot : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %out: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %q = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%neg, %c : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.mulf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%logp : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %out: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %rs = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]} ins(%q : tensor<4x6xf32>) outs(%f_r : tensor<4x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %e_g = tensor.empty() : tensor<4x6xbf16>
  %p = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%sm, %rs : tensor<4x6xf32>, tensor<4x1xf32>) outs(%e_g : tensor<4x6xbf16>) {
  ^bb0(%a: f32, %b: f32, %out: bf16):
    %d = arith.mulf %a, %b : f32
    %dt = arith.truncf %d : f32 to bf16
    linalg.yield %dt : bf16
  } -> tensor<4x6xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%q, %p : tensor<4x6xf32>, tensor<4x6xbf16>) outs(%e_g : tensor<4x6xbf16>) {
  ^bb0(%a: f32, %b: bf16, %out: bf16):
    %bw = arith.extf %b : bf16 to f32
    %d = arith.subf %a, %bw : f32
    %dt = arith.truncf %d : f32 to bf16
    linalg.yield %dt : bf16
  } -> tensor<4x6xbf16>
  return %picked, %dx : tensor<4x1xf32>, tensor<4x6xbf16>
}


// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel="sequence-parallel=true" | FileCheck %s --check-prefix=SP

// Vocabulary parallelism (docs/TENSOR_PARALLEL.md): tables split along
// their rows over "tp" and read by index.

fsdp.mesh @mesh [dp = 2, tp = 2]
// A vocabulary-parallel embedding: the lookup reads this rank's rows and 0
// elsewhere (a partial sum, all-reduced); its gradient, one_hot(ids)^T @ dy,
// is computed on this rank's rows from an iota offset by the rank's range.
func.func @embedding(%table: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                     %ids: tensor<2xi64>, %dy: tensor<2x4xf32>)
    -> (tensor<2x4xf32>, tensor<8x4xf32> {fsdp.grad_of = 0 : i64}) {
  %e = tensor.empty() : tensor<2x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%ids : tensor<2xi64>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%id: i64, %out: f32):
    %r = arith.index_cast %id : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%r, %j] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<2x4xf32>
  %ie = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [affine_map<(v) -> (v)>], iterator_types = ["parallel"]}
       outs(%ie : tensor<8xi64>) {
  ^bb0(%o: i64):
    %k = linalg.index 0 : index
    %ki = arith.index_cast %k : index to i64
    linalg.yield %ki : i64
  } -> tensor<8xi64>
  %he = tensor.empty() : tensor<2x8xf32>
  %hot = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (v)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%ids, %iota : tensor<2xi64>, tensor<8xi64>) outs(%he : tensor<2x8xf32>) {
  ^bb0(%a: i64, %b: i64, %o: f32):
    %eq = arith.cmpi eq, %a, %b : i64
    %f = arith.uitofp %eq : i1 to f32
    linalg.yield %f : f32
  } -> tensor<2x8xf32>
  %te = tensor.empty() : tensor<8x2xf32>
  %hotT = linalg.transpose ins(%hot : tensor<2x8xf32>) outs(%te : tensor<8x2xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %ge = tensor.empty() : tensor<8x4xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<8x4xf32>) -> tensor<8x4xf32>
  %grad = linalg.matmul ins(%hotT, %dy : tensor<8x2xf32>, tensor<2x4xf32>) outs(%gz : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %g, %grad : tensor<2x4xf32>, tensor<8x4xf32>
}

// The rank's index: fsdp.axis_index, no collective.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: %[[TABLE:.*]]: tensor<4x4xf32> {{.*}}-> (tensor<2x4xf32>, tensor<4x4xf32> {fsdp.grad_of = 0 : i64})
// CHECK-NEXT: %[[RANK:.*]] = fsdp.axis_index @mesh ["tp"]
// The lookup: rows [4t, 4t + 4) are this rank's; others read 0.
// CHECK: %[[LOOKUP:.*]] = linalg.generic
// CHECK:   %[[ID:.*]] = arith.index_cast
// CHECK:   %[[OFF:.*]] = arith.muli %[[RANK]], %c4
// CHECK:   %[[LOCAL:.*]] = arith.subi %[[ID]], %[[OFF]]
// CHECK:   %[[IN:.*]] = arith.andi
// CHECK:   %[[SAFE:.*]] = arith.select %[[IN]], %[[LOCAL]]
// CHECK:   %[[ROW:.*]] = tensor.extract %[[TABLE]][%[[SAFE]]
// CHECK:   %[[PICK:.*]] = arith.select %[[IN]], %[[ROW]]
// CHECK:   linalg.yield %[[PICK]]
// CHECK: %[[EMB:.*]] = fsdp.all_reduce %[[LOOKUP]] over @mesh ["tp"] sum : tensor<2x4xf32>
// The gradient: an iota of this rank's rows, the one-hot against it, and
// the product on this rank's rows (nothing reduced over "tp").
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi64>)
// CHECK:   %[[K:.*]] = linalg.index 0
// CHECK:   %[[KOFF:.*]] = arith.muli %[[RANK]], %c4
// CHECK:   arith.addi %[[K]], %[[KOFF]]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: linalg.transpose {{.*}} outs(%{{.*}} : tensor<4x2xf32>)
// CHECK-NOT: fsdp.
// CHECK: %[[GRAD:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x2xf32>, tensor<2x4xf32>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK: return %[[EMB]], %[[GRAD]]

// With sequence parallelism the lookup is reduce-scattered along the tokens.
// SP-LABEL: func.func @embedding
// SP: fsdp.axis_index @mesh ["tp"]
// SP-NOT: max :
// SP: %[[PART:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<2x4xf32> -> tensor<1x4xf32>
// SP: fsdp.all_gather %[[PART]] over @mesh ["tp"] : tensor<1x4xf32> -> tensor<2x4xf32>
// SP: linalg.matmul {{.*}} outs(%{{.*}} : tensor<4x4xf32>)

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// An LM head split along the vocabulary and a vocabulary-parallel
// cross-entropy: the max and the sum of exponentials are all-reduced, the
// target log-probability is read by the rank that holds it and summed; in
// the backward the one-hot of the labels is recomputed on this rank's
// vocabulary range and the logits are never gathered. (This fused form is
// partitioned op by op; PyTorch's, below, with one all-gather.)
func.func @cross_entropy(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                         %x: tensor<2x4xf32>, %labels: tensor<2xi64>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x4xf32> {fsdp.grad_of = 0 : i64}, tensor<2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %le = tensor.empty() : tensor<2x8xf32>
  %lz = linalg.fill ins(%zero : f32) outs(%le : tensor<2x8xf32>) -> tensor<2x8xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x4xf32>, tensor<8x4xf32>) outs(%lz : tensor<2x8xf32>) -> tensor<2x8xf32>
  %me = tensor.empty() : tensor<2xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%me : tensor<2xf32>) -> tensor<2xf32>
  %ae = tensor.empty() : tensor<2xi64>
  %ai = linalg.fill ins(%c0 : i64) outs(%ae : tensor<2xi64>) -> tensor<2xi64>
  // The max and (unused) the index of the max, as torch exports them.
  %max:2 = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}
       ins(%logits : tensor<2x8xf32>) outs(%mi, %ai : tensor<2xf32>, tensor<2xi64>) {
  ^bb0(%in: f32, %m: f32, %a: i64):
    %v = linalg.index 1 : index
    %vi = arith.index_cast %v : index to i64
    %mx = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %am = arith.select %gt, %vi, %a : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2xf32>, tensor<2xi64>)
  %ex = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%logits, %max#0 : tensor<2x8xf32>, tensor<2xf32>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%me : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}
       ins(%ex : tensor<2x8xf32>) outs(%sz : tensor<2xf32>) {
  ^bb0(%in: f32, %s: f32):
    %a = arith.addf %in, %s : f32
    linalg.yield %a : f32
  } -> tensor<2xf32>
  %logp = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%logits, %max#0, %sum : tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%l: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %ls = math.log %s : f32
    %r = arith.subf %d, %ls : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %picked = linalg.generic {indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> (n)>], iterator_types = ["parallel"]}
       ins(%labels : tensor<2xi64>) outs(%me : tensor<2xf32>) {
  ^bb0(%lab: i64, %o: f32):
    %n = linalg.index 0 : index
    %li = arith.index_cast %lab : i64 to index
    %p = tensor.extract %logp[%n, %li] : tensor<2x8xf32>
    linalg.yield %p : f32
  } -> tensor<2xf32>
  %le0 = tensor.empty() : tensor<f32>
  %lz0 = linalg.fill ins(%zero : f32) outs(%le0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> ()>], iterator_types = ["reduction"]}
       ins(%picked : tensor<2xf32>) outs(%lz0 : tensor<f32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.subf %o, %in : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // d(logits) = softmax - one_hot(labels) against an iota of the vocabulary.
  %ie = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [affine_map<(v) -> (v)>], iterator_types = ["parallel"]}
       outs(%ie : tensor<8xi64>) {
  ^bb0(%o: i64):
    %k = linalg.index 0 : index
    %ki = arith.index_cast %k : index to i64
    linalg.yield %ki : i64
  } -> tensor<8xi64>
  %dl = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (v)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%logp, %labels, %iota : tensor<2x8xf32>, tensor<2xi64>, tensor<8xi64>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%lp: f32, %lab: i64, %io: i64, %o: f32):
    %p = math.exp %lp : f32
    %eq = arith.cmpi eq, %lab, %io : i64
    %h = arith.uitofp %eq : i1 to f32
    %d = arith.subf %p, %h : f32
    linalg.yield %d : f32
  } -> tensor<2x8xf32>
  %xe = tensor.empty() : tensor<2x4xf32>
  %xz = linalg.fill ins(%zero : f32) outs(%xe : tensor<2x4xf32>) -> tensor<2x4xf32>
  %dx = linalg.matmul ins(%dl, %w : tensor<2x8xf32>, tensor<8x4xf32>) outs(%xz : tensor<2x4xf32>) -> tensor<2x4xf32>
  %te = tensor.empty() : tensor<8x2xf32>
  %dlT = linalg.transpose ins(%dl : tensor<2x8xf32>) outs(%te : tensor<8x2xf32>) permutation = [1, 0]
  %ge = tensor.empty() : tensor<8x4xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<8x4xf32>) -> tensor<8x4xf32>
  %dw = linalg.matmul ins(%dlT, %x : tensor<8x2xf32>, tensor<2x4xf32>) outs(%gz : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dw, %dx : tensor<f32>, tensor<8x4xf32>, tensor<2x4xf32>
}
// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[RANK:.*]] = fsdp.axis_index @mesh ["tp"]
// The logits are this rank's vocabulary columns.
// CHECK: %[[LOGITS:.*]] = linalg.matmul {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// The max (its unused index reads the global column) is all-reduced with max.
// CHECK: %[[MAX:.*]]:2 = linalg.generic
// CHECK:   %[[V:.*]] = linalg.index 1
// CHECK:   %[[VOFF:.*]] = arith.muli %[[RANK]], %c4
// CHECK:   arith.addi %[[V]], %[[VOFF]]
// CHECK: %[[GMAX:.*]] = fsdp.all_reduce %[[MAX]]#0 over @mesh ["tp"] max : tensor<2xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: %[[GSUM:.*]] = fsdp.all_reduce %[[SUM]] over @mesh ["tp"] sum : tensor<2xf32>
// CHECK: %[[LOGP:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]], %[[GMAX]], %[[GSUM]] :
// The target's log-probability: read by the rank that holds it.
// CHECK: %[[PICKED:.*]] = linalg.generic
// CHECK:   arith.subi
// CHECK:   tensor.extract %[[LOGP]]
// CHECK: fsdp.all_reduce %[[PICKED]] over @mesh ["tp"] sum : tensor<2xf32>
// The one-hot of the labels on this rank's columns (iota offset by the
// rank's range); the input gradient is all-reduced, the weight gradient
// is this rank's rows.
// CHECK: %[[IOTA:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi64>)
// CHECK:   arith.addi
// CHECK: %[[DL:.*]] = linalg.generic {{.*}} ins(%[[LOGP]], %{{.*}}, %[[IOTA]] : tensor<2x4xf32>, tensor<2xi64>, tensor<4xi64>)
// CHECK: %[[DXP:.*]] = linalg.matmul ins(%[[DL]]
// CHECK: %[[DX:.*]] = fsdp.all_reduce %[[DXP]] over @mesh ["tp"] sum : tensor<2x4xf32>
// CHECK-NOT: fsdp.
// CHECK: %[[DW:.*]] = linalg.matmul {{.*}} outs(%{{.*}} : tensor<4x4xf32>)
// CHECK: return %{{.*}}, %[[DW]], %[[DX]]

// With sequence parallelism the input gradient is reduce-scattered along
// the tokens; the cross-entropy's reductions are unchanged.
// SP-LABEL: func.func @cross_entropy
// SP: fsdp.all_reduce %{{.*}} max : tensor<2xf32>
// SP: fsdp.all_reduce %{{.*}} sum : tensor<2xf32>
// SP: fsdp.all_reduce %{{.*}} sum : tensor<2xf32>
// SP: fsdp.reduce_scatter %{{.*}} over @mesh ["tp"] sum : tensor<2x4xf32> -> tensor<1x4xf32>

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// The cross-entropy as PyTorch exports log_softmax and the target's pick
// (max, x - max, exp, sum, log, shifted - log): each rank's row max, sum of
// exponentials and target logit are all-gathered once ([N, 3]) and combined
// on every rank; no all-reduce over the vocabulary.
func.func @torch_cross_entropy(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                               %x: tensor<2x4xf32>, %labels: tensor<2xi64>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x4xf32> {fsdp.grad_of = 0 : i64}) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %le = tensor.empty() : tensor<2x8xf32>
  %lz = linalg.fill ins(%zero : f32) outs(%le : tensor<2x8xf32>) -> tensor<2x8xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x4xf32>, tensor<8x4xf32>) outs(%lz : tensor<2x8xf32>) -> tensor<2x8xf32>
  %me = tensor.empty() : tensor<2xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%me : tensor<2xf32>) -> tensor<2xf32>
  %ae = tensor.empty() : tensor<2xi64>
  %ai = linalg.fill ins(%c0 : i64) outs(%ae : tensor<2xi64>) -> tensor<2xi64>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}
       ins(%logits : tensor<2x8xf32>) outs(%mi, %ai : tensor<2xf32>, tensor<2xi64>) {
  ^bb0(%in: f32, %m: f32, %a: i64):
    %v = linalg.index 1 : index
    %vi = arith.index_cast %v : index to i64
    %mx = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %am = arith.select %gt, %vi, %a : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2xf32>, tensor<2xi64>)
  %m1 = tensor.expand_shape %max#0 [[0, 1]] output_shape [2, 1] : tensor<2xf32> into tensor<2x1xf32>
  %shifted = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n, 0)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%logits, %m1 : tensor<2x8xf32>, tensor<2x1xf32>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    linalg.yield %d : f32
  } -> tensor<2x8xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%shifted : tensor<2x8xf32>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<2x8xf32>
  %se = tensor.empty() : tensor<2x1xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n, 0)>], iterator_types = ["parallel", "reduction"]}
       ins(%ex : tensor<2x8xf32>) outs(%sz : tensor<2x1xf32>) {
  ^bb0(%in: f32, %s: f32):
    %a = arith.addf %in, %s : f32
    linalg.yield %a : f32
  } -> tensor<2x1xf32>
  %log = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%sum : tensor<2x1xf32>) outs(%se : tensor<2x1xf32>) {
  ^bb0(%in: f32, %o: f32):
    %l = math.log %in : f32
    linalg.yield %l : f32
  } -> tensor<2x1xf32>
  %logp = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n, 0)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%shifted, %log : tensor<2x8xf32>, tensor<2x1xf32>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%s: f32, %l: f32, %o: f32):
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %lab1 = tensor.expand_shape %labels [[0, 1]] output_shape [2, 1] : tensor<2xi64> into tensor<2x1xi64>
  %picked = linalg.generic {indexing_maps = [affine_map<(n, j) -> (n, j)>, affine_map<(n, j) -> (n, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%lab1 : tensor<2x1xi64>) outs(%sz : tensor<2x1xf32>) {
  ^bb0(%lab: i64, %o: f32):
    %n = linalg.index 0 : index
    %li = arith.index_cast %lab : i64 to index
    %p = tensor.extract %logp[%n, %li] : tensor<2x8xf32>
    linalg.yield %p : f32
  } -> tensor<2x1xf32>
  %pc = tensor.collapse_shape %picked [[0, 1]] : tensor<2x1xf32> into tensor<2xf32>
  %le0 = tensor.empty() : tensor<f32>
  %lz0 = linalg.fill ins(%zero : f32) outs(%le0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> ()>], iterator_types = ["reduction"]}
       ins(%pc : tensor<2xf32>) outs(%lz0 : tensor<f32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.subf %o, %in : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // The backward's softmax reads logp.
  %ie = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [affine_map<(v) -> (v)>], iterator_types = ["parallel"]}
       outs(%ie : tensor<8xi64>) {
  ^bb0(%o: i64):
    %k = linalg.index 0 : index
    %ki = arith.index_cast %k : index to i64
    linalg.yield %ki : i64
  } -> tensor<8xi64>
  %dl = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (v)>, affine_map<(n, v) -> (n, v)>], iterator_types = ["parallel", "parallel"]}
       ins(%logp, %labels, %iota : tensor<2x8xf32>, tensor<2xi64>, tensor<8xi64>) outs(%le : tensor<2x8xf32>) {
  ^bb0(%lp: f32, %lab: i64, %io: i64, %o: f32):
    %p = math.exp %lp : f32
    %eq = arith.cmpi eq, %lab, %io : i64
    %h = arith.uitofp %eq : i1 to f32
    %d = arith.subf %p, %h : f32
    linalg.yield %d : f32
  } -> tensor<2x8xf32>
  %te = tensor.empty() : tensor<8x2xf32>
  %dlT = linalg.transpose ins(%dl : tensor<2x8xf32>) outs(%te : tensor<8x2xf32>) permutation = [1, 0]
  %ge = tensor.empty() : tensor<8x4xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<8x4xf32>) -> tensor<8x4xf32>
  %dw = linalg.matmul ins(%dlT, %x : tensor<8x2xf32>, tensor<2x4xf32>) outs(%gz : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dw : tensor<f32>, tensor<8x4xf32>
}
// CHECK-LABEL: func.func @torch_cross_entropy
// CHECK: %[[RANK:.*]] = fsdp.axis_index @mesh ["tp"]
// CHECK: %[[LOGITS:.*]] = linalg.matmul {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// CHECK-NOT: fsdp.all_reduce
// The target logit: read by the rank that holds it, 0 elsewhere.
// CHECK: %[[T:.*]] = linalg.generic
// CHECK:   arith.subi
// CHECK:   %[[TL:.*]] = tensor.extract %[[LOGITS]]
// CHECK:   arith.select %{{.*}}, %[[TL]]
// The rank's row max and its sum of exponentials.
// CHECK: %[[M:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[LOGITS]] : tensor<2x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]], %[[M]] : tensor<2x4xf32>, tensor<2xf32>)
// CHECK:   math.exp
// CHECK: %[[PACKED:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[S]], %{{.*}} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK-NOT: fsdp.
// CHECK: %[[G:.*]] = fsdp.all_gather %[[PACKED]] over @mesh ["tp"] : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK-NOT: fsdp.
// CHECK: %[[GM:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[C:.*]]:2 = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[GM]] : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>)
// CHECK:   math.exp
// The log probabilities on this rank's columns; the target's, whole.
// CHECK: %[[LOGP:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]], %[[GM]], %[[C]]#0 : tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[TLOGP:.*]] = linalg.generic {{.*}} ins(%[[C]]#1, %[[GM]], %[[C]]#0 :
// CHECK: linalg.generic
// CHECK:   tensor.extract %[[TLOGP]]
// CHECK-NOT: fsdp.
// CHECK: linalg.generic {{.*}} ins(%[[LOGP]], %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2xi64>, tensor<4xi64>)
// CHECK-NOT: fsdp.
// CHECK: return

// With sequence parallelism, the same single all-gather.
// SP-LABEL: func.func @torch_cross_entropy
// SP-NOT: fsdp.all_reduce
// SP: fsdp.all_gather %{{.*}} over @mesh ["tp"] : tensor<2x3xf32> -> tensor<4x3xf32>
// SP-NOT: fsdp.all_reduce
// SP: return

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// The body reads the index of the split features as a number: it reads
// the global index (this rank's offset plus the local one).
func.func @global_index(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                        %x: tensor<2x8xf32>) -> tensor<2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%h : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %jf = arith.sitofp %ji : i64 to f32
    %s = arith.addf %a, %jf : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %se = tensor.empty() : tensor<2xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
       ins(%r : tensor<2x8xf32>) outs(%sz : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %sum : tensor<2xf32>
}
// CHECK-LABEL: func.func @global_index
// CHECK: %[[RANK:.*]] = fsdp.axis_index @mesh ["tp"]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// CHECK:   %[[J:.*]] = linalg.index 1
// CHECK:   %[[JOFF:.*]] = arith.muli %[[RANK]], %c4
// CHECK:   %[[G:.*]] = arith.addi %[[J]], %[[JOFF]]
// CHECK:   arith.index_cast %[[G]] : index to i64
// CHECK: fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum : tensor<2xf32>

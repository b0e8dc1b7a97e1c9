// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel=reduce-dtype=f64 | FileCheck %s --check-prefix=RDT
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel --fsdp-partition --fsdp-expand-collectives | FileCheck %s --check-prefix=FSDP
// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel --fsdp-partition --fsdp-expand-collectives --fsdp-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// A column-parallel then row-parallel MLP (Megatron's f/g pair) on
// [dp = 2, tp = 2], forward and backward as the PyTorch frontend writes them:
// w1 (tp_shard<0>, its output features) makes the hidden activation
// sharded along its features, w2 (tp_shard<1>, its input features) sums
// over them: one all-reduce after the row-parallel product (forward) and
// one after dx = dh * w1 (backward). The gradients come out as their
// parameters lie; the replicated bias's gradient needs no reduction.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[W1:[a-z0-9_]+]]: tensor<4x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}
// CHECK-SAME: %[[W2:[a-z0-9_]+]]: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>}
// CHECK-SAME: %[[B2:[a-z0-9_]+]]: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>}
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x8xf32>
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<4x8xf32> {fsdp.grad_of = 0 : i64}, tensor<8x4xf32> {fsdp.grad_of = 1 : i64}, tensor<8xf32> {fsdp.grad_of = 2 : i64}, tensor<2x8xf32>)
// CHECK-SAME: attributes {fsdp.tp_local}
func.func @mlp(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
               %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
               %b2: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_replicate]>},
               %x: tensor<2x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x8xf32> {fsdp.grad_of = 0 : i64},
        tensor<8x8xf32> {fsdp.grad_of = 1 : i64}, tensor<8xf32> {fsdp.grad_of = 2 : i64},
        tensor<2x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e28 = tensor.empty() : tensor<2x8xf32>
  %z28 = linalg.fill ins(%zero : f32) outs(%e28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  // h = x w1^T: w1's rows are this rank's hidden features.
  // CHECK: %[[H:.*]] = linalg.matmul{{.*}}ins(%[[X]], %[[W1]] : tensor<2x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<2x4xf32>)
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w1 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: %[[A:.*]] = linalg.generic{{.*}}ins(%[[H]] : tensor<2x4xf32>) outs(%{{.*}} : tensor<2x4xf32>)
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%h : tensor<2x8xf32>) outs(%e28 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  // y = a w2^T sums over the sharded hidden features: all-reduce.
  // CHECK: %[[YP:.*]] = linalg.matmul{{.*}}ins(%[[A]], %[[W2]] : tensor<2x4xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<2x8xf32>)
  // CHECK-NEXT: %[[Y:.*]] = fsdp.all_reduce %[[YP]] over @mesh ["tp"] sum : tensor<2x8xf32> -> tensor<2x8xf32>
  // RDT: arith.extf %{{.*}} : tensor<2x8xf32> to tensor<2x8xf64>
  // RDT-NEXT: fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum : tensor<2x8xf64> -> tensor<2x8xf64>
  // RDT-NEXT: arith.truncf %{{.*}} : tensor<2x8xf64> to tensor<2x8xf32>
  %y0 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %w2 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: %[[YB:.*]] = linalg.generic{{.*}}ins(%[[Y]], %[[B2]] : tensor<2x8xf32>, tensor<8xf32>)
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%y0, %b2 : tensor<2x8xf32>, tensor<8xf32>) outs(%e28 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %b: f32, %out: f32):
    %r = arith.addf %in, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<2x8xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  // Backward of sum(y): dy = 1, replicated.
  %dy = arith.constant dense<1.0> : tensor<2x8xf32>
  // db2 = column sums of dy: replicated, no reduction over tp.
  %e8 = tensor.empty() : tensor<8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %db2 = linalg.reduce ins(%dy : tensor<2x8xf32>) outs(%z8 : tensor<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  // dw2 = dy^T a: sharded along its input features like w2.
  // CHECK: %[[DW2:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<8x4xf32>)
  %e88 = tensor.empty() : tensor<8x8xf32>
  %z88 = linalg.fill ins(%zero : f32) outs(%e88 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %dw2 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%dy, %a : tensor<2x8xf32>, tensor<2x8xf32>) outs(%z88 : tensor<8x8xf32>) -> tensor<8x8xf32>
  // da = dy w2: sharded along the hidden features, no collective.
  // CHECK: %[[DA:.*]] = linalg.matmul{{.*}}ins(%{{.*}}, %[[W2]] : tensor<2x8xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<2x4xf32>)
  // CHECK-NOT: fsdp.all_reduce
  %da = linalg.matmul ins(%dy, %w2 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %dh = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%da, %h : tensor<2x8xf32>, tensor<2x8xf32>) outs(%e28 : tensor<2x8xf32>) {
  ^bb0(%g: f32, %in: f32, %out: f32):
    %pos = arith.cmpf ogt, %in, %zero : f32
    %r = arith.select %pos, %g, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  // dw1 = dh^T x: sharded along its output features like w1.
  // CHECK: %[[DW1:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<4x8xf32>)
  %dw1 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%dh, %x : tensor<2x8xf32>, tensor<2x8xf32>) outs(%z88 : tensor<8x8xf32>) -> tensor<8x8xf32>
  // dx = dh w1 sums over the sharded hidden features: all-reduce.
  // CHECK: %[[DXP:.*]] = linalg.matmul{{.*}}ins(%{{.*}}, %[[W1]] : tensor<2x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<2x8xf32>)
  // CHECK-NEXT: %[[DX:.*]] = fsdp.all_reduce %[[DXP]] over @mesh ["tp"] sum
  %dx = linalg.matmul ins(%dh, %w1 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z28 : tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: return %{{.*}}, %[[DW1]], %[[DW2]], %{{.*}}, %[[DX]] : tensor<f32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<2x8xf32>
  return %loss, %dw1, %dw2, %db2, %dx : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x8xf32>
}

// After partitioning, FSDP shards the TP-local parameters over "dp" only:
// gathers and reduce-scatters over "dp", no data-parallel collective over
// "tp", and the avg divides by the data-parallel group.
// FSDP-LABEL: func.func @mlp
// FSDP-SAME: tensor<2x8xf32> {fsdp.global_type = tensor<4x8xf32>
// FSDP-SAME: tensor<4x4xf32> {fsdp.global_type = tensor<8x4xf32>
// FSDP-SAME: tensor<4xf32> {fsdp.global_type = tensor<8xf32>
// FSDP: fsdp.all_gather %{{.*}} over @mesh ["dp"]
// FSDP-NOT: fsdp.all_gather %{{.*}} over @mesh ["tp"]
// FSDP-NOT: over @mesh ["dp", "tp"] avg
// FSDP: fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum
// FSDP: fsdp.reduce_scatter %{{.*}} over @mesh ["dp"] avg
// FSDP-NOT: fsdp.all_reduce %{{.*}} over @mesh ["tp"] avg
// FSDP: return

// The communication report shows the tensor-parallel traffic apart: the two
// all-reduces of 2x8 f32 (64 B each).
// REPORT-LABEL: @mlp: mesh @mesh [dp = 2, tp = 2]
// REPORT: of which tensor-parallel: 2, sent 128 B, received 128 B

// -----

// Attention heads: q (tp_shard<0>) is [heads * head_dim, model]; the
// projection is sharded along its features, the reshape into heads carries
// the sharding to the heads dim (2 heads of 4 per rank), a per-head softmax
// and a max over keys stay local, and the merge back into features keeps it.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @heads
// CHECK: %[[Q:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[HEADS:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0], [1, 2]] output_shape [2, 2, 4] : tensor<2x8xf32> into tensor<2x2x4xf32>
// CHECK: %[[MAX:.*]] = linalg.reduce ins(%[[HEADS]] : tensor<2x2x4xf32>) outs(%{{.*}} : tensor<2x2xf32>)
// CHECK-NOT: fsdp.all_reduce
// CHECK: %[[MERGED:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x2x4xf32> into tensor<2x8xf32>
// CHECK: %[[SUM:.*]] = linalg.reduce ins(%[[MERGED]] : tensor<2x8xf32>)
// CHECK: %[[ALL:.*]] = fsdp.all_reduce %[[SUM]] over @mesh ["tp"] sum : tensor<f32> -> tensor<f32>
// CHECK: return %[[ALL]] : tensor<f32>
func.func @heads(%wq: tensor<16x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %x: tensor<2x8xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x16xf32>) -> tensor<2x16xf32>
  %q = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %wq : tensor<2x8xf32>, tensor<16x8xf32>) outs(%z : tensor<2x16xf32>) -> tensor<2x16xf32>
  %heads = tensor.expand_shape %q [[0], [1, 2]] output_shape [2, 4, 4] : tensor<2x16xf32> into tensor<2x4x4xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %em = tensor.empty() : tensor<2x4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%em : tensor<2x4xf32>) -> tensor<2x4xf32>
  %max = linalg.reduce ins(%heads : tensor<2x4x4xf32>) outs(%m0 : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) { %s = arith.maximumf %in, %acc : f32
                            linalg.yield %s : f32 }
  %e3 = tensor.empty() : tensor<2x4x4xf32>
  %shifted = linalg.generic {indexing_maps = [affine_map<(b, h, d) -> (b, h, d)>, affine_map<(b, h, d) -> (b, h)>, affine_map<(b, h, d) -> (b, h, d)>], iterator_types = ["parallel", "parallel", "parallel"]}
       ins(%heads, %max : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%e3 : tensor<2x4x4xf32>) {
  ^bb0(%v: f32, %m: f32, %out: f32):
    %d = arith.subf %v, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %merged = tensor.collapse_shape %shifted [[0], [1, 2]] : tensor<2x4x4xf32> into tensor<2x16xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%merged : tensor<2x16xf32>) outs(%s1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32
                            linalg.yield %s : f32 }
  return %sum : tensor<f32>
}

// -----

// A row-parallel product accumulated into the residual stream (the init is
// read): every rank sums from zero, the all-reduce follows, and the
// residual is added once after it.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @residual
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<8x4xf32> {{.*}}, %[[A:[a-z0-9_]+]]: tensor<2x8xf32>
// CHECK: %[[H:.*]] = linalg.matmul{{.*}}outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[P:.*]] = linalg.matmul{{.*}}ins(%[[H]], %[[W]] : tensor<2x4xf32>, tensor<8x4xf32>) outs(%[[ZERO]] : tensor<2x8xf32>)
// CHECK-NEXT: %[[R:.*]] = fsdp.all_reduce %[[P]] over @mesh ["tp"] sum
// CHECK: %[[OUT:.*]] = linalg.generic{{.*}}ins(%[[R]], %[[A]] : tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: arith.addf
// CHECK: return %[[OUT]]
func.func @residual(%w1: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                    %w2: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>},
                    %a: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %w1 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %out = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%h, %w2 : tensor<2x8xf32>, tensor<8x8xf32>) outs(%a : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %out : tensor<2x8xf32>
}

// -----

// Attention's [B, H, S, D] -> [B*H, S, D] with 2 samples and the heads
// split: the merged dim holds each sample's heads of this rank (2 strided
// blocks of 1 head), the batched product runs on them, and the expand back
// to [B, H, S, D] restores the split heads.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @heads_behind_samples
func.func @heads_behind_samples(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                                %x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // CHECK: linalg.generic{{.*}}outs(%{{.*}} : tensor<2x3x4xf32>)
  %q = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%x, %w : tensor<2x3x4xf32>, tensor<8x4xf32>) outs(%z : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<2x3x8xf32>
  // CHECK: tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [2, 3, 1, 4] : tensor<2x3x4xf32> into tensor<2x3x1x4xf32>
  %h = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 3, 2, 4] : tensor<2x3x8xf32> into tensor<2x3x2x4xf32>
  %et = tensor.empty() : tensor<2x2x3x4xf32>
  %t = linalg.transpose ins(%h : tensor<2x3x2x4xf32>) outs(%et : tensor<2x2x3x4xf32>) permutation = [0, 2, 1, 3]
  // CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<2x1x3x4xf32> into tensor<2x3x4xf32>
  %c = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x2x3x4xf32> into tensor<4x3x4xf32>
  %es = tensor.empty() : tensor<4x3x3xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  // CHECK: linalg.batch_matmul{{.*}}outs(%{{.*}} : tensor<2x3x3xf32>)
  // CHECK-NOT: fsdp.all_reduce
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, k) -> (b, i, k)>, affine_map<(b, i, j, k) -> (b, j, k)>, affine_map<(b, i, j, k) -> (b, i, j)>]
       ins(%c, %c : tensor<4x3x4xf32>, tensor<4x3x4xf32>) outs(%zs : tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %eo = tensor.empty() : tensor<4x3x4xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x3x4xf32>) -> tensor<4x3x4xf32>
  %o = linalg.batch_matmul ins(%s, %c : tensor<4x3x3xf32>, tensor<4x3x4xf32>) outs(%zo : tensor<4x3x4xf32>) -> tensor<4x3x4xf32>
  // CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [2, 1, 3, 4] : tensor<2x3x4xf32> into tensor<2x1x3x4xf32>
  %ob = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [2, 2, 3, 4] : tensor<4x3x4xf32> into tensor<2x2x3x4xf32>
  %eb = tensor.empty() : tensor<2x3x2x4xf32>
  %tb = linalg.transpose ins(%ob : tensor<2x2x3x4xf32>) outs(%eb : tensor<2x3x2x4xf32>) permutation = [0, 2, 1, 3]
  %f = tensor.collapse_shape %tb [[0], [1], [2, 3]] : tensor<2x3x2x4xf32> into tensor<2x3x8xf32>
  %ey = tensor.empty() : tensor<2x3x4xf32>
  %zy = linalg.fill ins(%zero : f32) outs(%ey : tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // The row-parallel product over the split heads: one all-reduce.
  // CHECK: fsdp.all_reduce %{{.*}} over @mesh ["tp"] sum : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (k, n)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%f, %w : tensor<2x3x8xf32>, tensor<8x4xf32>) outs(%zy : tensor<2x3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o2: f32):
    %m = arith.mulf %a, %b : f32
    %s2 = arith.addf %m, %o2 : f32
    linalg.yield %s2 : f32
  } -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// upstream-shard-mlp.mlir with an uneven first weight: W0 has 10 rows,
// sharded over 4 devices. Input of ../upstream-shard-compare.mlir, which
// records what upstream shard-partition does with it.
shard.grid @grid(shape = 4)

func.func @mlp(%w0: tensor<10x16xf32>, %w1: tensor<16x8xf32>, %x: tensor<4x10xf32>) -> tensor<4x8xf32> {
  %sharded = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %replicated = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %w0_shard = shard.shard %w0 to %sharded : tensor<10x16xf32>
  %w0_full = shard.shard %w0_shard to %replicated annotate_for_users : tensor<10x16xf32>
  %w1_shard = shard.shard %w1 to %sharded : tensor<16x8xf32>
  %w1_full = shard.shard %w1_shard to %replicated annotate_for_users : tensor<16x8xf32>
  %x_local = shard.shard %x to %replicated : tensor<4x10xf32>
  %x_use = shard.shard %x_local to %replicated annotate_for_users : tensor<4x10xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = linalg.matmul ins(%x_use, %w0_full : tensor<4x10xf32>, tensor<10x16xf32>) outs(%f0 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4x16xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%a, %w1_full : tensor<4x16xf32>, tensor<16x8xf32>) outs(%f1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// The forward of a two-layer MLP (y = relu(x W0) W1) in the upstream `shard`
// dialect: both weights are sharded on dim 0 over a 4-device grid and used
// replicated, x (this rank's micro-batch) is replicated. Input of
// ../upstream-shard-compare.mlir; it must match the `fsdp` form there.
shard.grid @grid(shape = 4)

func.func @mlp(%w0: tensor<8x16xf32>, %w1: tensor<16x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sharded = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %replicated = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %w0_shard = shard.shard %w0 to %sharded : tensor<8x16xf32>
  %w0_full = shard.shard %w0_shard to %replicated annotate_for_users : tensor<8x16xf32>
  %w1_shard = shard.shard %w1 to %sharded : tensor<16x8xf32>
  %w1_full = shard.shard %w1_shard to %replicated annotate_for_users : tensor<16x8xf32>
  %x_local = shard.shard %x to %replicated : tensor<4x8xf32>
  %x_use = shard.shard %x_local to %replicated annotate_for_users : tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = linalg.matmul ins(%x_use, %w0_full : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f0 : tensor<4x16xf32>) -> tensor<4x16xf32>
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

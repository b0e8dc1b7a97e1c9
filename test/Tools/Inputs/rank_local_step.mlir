// A training step whose only fed-back argument has no layout: state each
// rank keeps for itself (as batch-norm running statistics), updated from
// its own rows of the batch: stat <- (stat + x[rank]) / 2.
fsdp.mesh @mesh [shard = 2]
func.func @step(%s: tensor<2xf32> {fsdp.name = "stat"}, %x: tensor<1x2xf32> {fsdp.name = "x"})
    -> (tensor<2xf32> {fsdp.name = "stat.next", fsdp.update_of = 0 : i64}) {
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<1x2xf32> into tensor<2xf32>
  %e = tensor.empty() : tensor<2xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%s, %c : tensor<2xf32>, tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %sum = arith.addf %a, %b : f32
    %r = arith.mulf %sum, %half : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  return %h : tensor<2xf32>
}

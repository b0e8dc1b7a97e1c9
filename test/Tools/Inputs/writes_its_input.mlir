// A forward step that updates its batch argument in place: the
// bufferization writes x + x into x's buffer (a function argument is
// writable), so x is not read-only and the runner copies its shard again
// before every step.
fsdp.mesh @mesh [shard = 4]
func.func @step(%w: tensor<10x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"},
                %x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<2x10xf32> {fsdp.name = "y"}) {
  %zero = arith.constant 0.0 : f32
  %x2 = linalg.add ins(%x, %x : tensor<2x4xf32>, tensor<2x4xf32>) outs(%x : tensor<2x4xf32>) -> tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x10xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x2, %w : tensor<2x4xf32>, tensor<10x4xf32>) outs(%f : tensor<2x10xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

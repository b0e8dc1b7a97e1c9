// A step with a run-time check (a cf.assert, as the PyTorch frontend's
// guards on values read from tensors): x's first element must not be
// negative on any rank.
fsdp.mesh @mesh [shard = 2]
func.func @step(%w: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"},
                %x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<2x4xf32> {fsdp.name = "y"}) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %v = tensor.extract %x[%c0, %c0] : tensor<2x4xf32>
  %ok = arith.cmpf oge, %v, %zero : f32
  cf.assert %ok, "guard failed: x[0, 0] is negative"
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

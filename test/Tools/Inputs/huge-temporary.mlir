// A step whose temporary (4 GiB) goes into its arena: the arena cannot be
// allocated under a small address-space limit.
fsdp.mesh @mesh [shard = 2]
func.func @step(%x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<4xf32> {fsdp.name = "y"}) {
  %cst = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<1073741824xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1073741824xf32>) -> tensor<1073741824xf32>
  %s = tensor.extract_slice %f[0] [4] [1] : tensor<1073741824xf32> to tensor<4xf32>
  %o = tensor.empty() : tensor<4xf32>
  %y = linalg.add ins(%x, %s : tensor<4xf32>, tensor<4xf32>) outs(%o : tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

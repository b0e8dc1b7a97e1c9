// Results that share a buffer (y and z) and a result that is an argument
// (w): the runner frees each buffer the step returns once, never an
// argument.
fsdp.mesh @mesh [shard = 2]
func.func @step(%x: tensor<4xf32> {fsdp.name = "x"})
    -> (tensor<4xf32> {fsdp.name = "y"}, tensor<4xf32> {fsdp.name = "z"}, tensor<4xf32> {fsdp.name = "w"}) {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %y, %y, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

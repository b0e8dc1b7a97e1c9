// A mesh of 5,000 ranks: more threads than a small address space allows.
fsdp.mesh @mesh [shard = 5000]
func.func @step(%x: tensor<1xf32> {fsdp.name = "x"}) -> (tensor<1xf32> {fsdp.name = "y"}) {
  return %x : tensor<1xf32>
}

// A rank whose x is not positive skips the all_reduce that the others call.
fsdp.mesh @mesh [shard = 4]
func.func @step(%x: tensor<1xf32> {fsdp.name = "x"}, %v: tensor<4xf32> {fsdp.name = "v"}) -> (tensor<4xf32> {fsdp.name = "out"}) {
  %c0 = arith.constant 0 : index
  %e = tensor.extract %x[%c0] : tensor<1xf32>
  %zero = arith.constant 0.0 : f32
  %cond = arith.cmpf ogt, %e, %zero : f32
  %r = scf.if %cond -> tensor<4xf32> {
    %a = fsdp.all_reduce %v over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  } else {
    scf.yield %v : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

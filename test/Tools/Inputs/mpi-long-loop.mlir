// n all_reduces in a loop: a job that runs long enough to stop one rank.
fsdp.mesh @mesh [shard = 4]
func.func @step(%n: tensor<1xi64> {fsdp.name = "n"}, %v: tensor<1024xf32> {fsdp.name = "v"}) -> (tensor<1024xf32> {fsdp.name = "out"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ni = tensor.extract %n[%c0] : tensor<1xi64>
  %N = arith.index_cast %ni : i64 to index
  %r = scf.for %i = %c0 to %N step %c1 iter_args(%acc = %v) -> tensor<1024xf32> {
    %a = fsdp.all_reduce %acc over @mesh ["shard"] avg : tensor<1024xf32> -> tensor<1024xf32>
    %y = linalg.copy ins(%a : tensor<1024xf32>) outs(%acc : tensor<1024xf32>) -> tensor<1024xf32>
    scf.yield %y : tensor<1024xf32>
  }
  return %r : tensor<1024xf32>
}

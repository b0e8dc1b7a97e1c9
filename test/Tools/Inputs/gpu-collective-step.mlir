// A training step made of one collective (no kernel), for the runner's
// device path: each rank keeps its own w (no layout), w <- all_reduce(w),
// so after K steps on 2 ranks w is 2^K times its start; `sum` is the same
// buffer as `w.next` (a result that is also the fed-back update).
fsdp.mesh @mesh [shard = 2]
func.func @step(%w: tensor<4xf32> {fsdp.name = "w"})
    -> (tensor<4xf32> {fsdp.name = "w.next", fsdp.update_of = 0 : i64},
        tensor<4xf32> {fsdp.name = "sum"}) {
  %a = fsdp.all_reduce %w over @mesh ["shard"] sum : tensor<4xf32> -> tensor<4xf32>
  return %a, %a : tensor<4xf32>, tensor<4xf32>
}

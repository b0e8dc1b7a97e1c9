fsdp.mesh @mesh [shard = 4]
func.func @f(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>}) {
  return
}

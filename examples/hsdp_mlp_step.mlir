// One rank's forward step for a two-layer model as an FSDP user writes it:
// full-size parameters with layouts on a 2x4 HSDP mesh, this rank's batch.
fsdp.mesh @mesh [replicate = 2, shard = 4]

func.func @step(
    %w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "l0.weight"},
    %b: tensor<10xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>, fsdp.name = "l0.bias"},
    %v: tensor<10x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>, fsdp.name = "l1.weight"},
    %x: tensor<8x16xf32> {fsdp.name = "x"})
    -> (tensor<8x4xf32> {fsdp.name = "out"}) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16x10xf32>
  %wt = linalg.transpose ins(%w : tensor<10x16xf32>) outs(%e0 : tensor<16x10xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<8x10xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %h = linalg.matmul ins(%x, %wt : tensor<8x16xf32>, tensor<16x10xf32>) outs(%f1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %hb = linalg.broadcast ins(%b : tensor<10xf32>) outs(%e1 : tensor<8x10xf32>) dimensions = [0]
  %s = linalg.add ins(%h, %hb : tensor<8x10xf32>, tensor<8x10xf32>) outs(%e1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %e2 = tensor.empty() : tensor<8x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %o = linalg.matmul ins(%s, %v : tensor<8x10xf32>, tensor<10x4xf32>) outs(%f2 : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %o : tensor<8x4xf32>
}

// A step whose results are copies of its gathered parameters, for checking
// quantized all-gathers bit for bit: seven parameters on a 2x4 mesh with
// dim-0 and dim-1 shards, uneven and balanced slots, a bias and a 3-D tensor
// (used by `scripts/demo.sh --quantize FMT` and the quantized-*.test files).
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @gather(
    %w0: tensor<256x64xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w0", fsdp.unit = "a"},
    %w1: tensor<130x96xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w1", fsdp.unit = "a"},
    %w2: tensor<32x300xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>, fsdp.name = "w2", fsdp.unit = "b"},
    %w3: tensor<520x160xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w3", fsdp.unit = "b"},
    %w4: tensor<10x32xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>, fsdp.name = "w4", fsdp.unit = "c"},
    %b: tensor<512xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "b", fsdp.unit = "c"},
    %s: tensor<16x16x32xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "s", fsdp.unit = "c"})
    -> (tensor<256x64xf32> {fsdp.name = "copy.w0"}, tensor<130x96xf32> {fsdp.name = "copy.w1"},
        tensor<32x300xf32> {fsdp.name = "copy.w2"}, tensor<520x160xf32> {fsdp.name = "copy.w3"},
        tensor<10x32xf32> {fsdp.name = "copy.w4"}, tensor<512xf32> {fsdp.name = "copy.b"},
        tensor<16x16x32xf32> {fsdp.name = "copy.s"}) {
  %e0 = tensor.empty() : tensor<256x64xf32>
  %c0 = linalg.copy ins(%w0 : tensor<256x64xf32>) outs(%e0 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %e1 = tensor.empty() : tensor<130x96xf32>
  %c1 = linalg.copy ins(%w1 : tensor<130x96xf32>) outs(%e1 : tensor<130x96xf32>) -> tensor<130x96xf32>
  %e2 = tensor.empty() : tensor<32x300xf32>
  %c2 = linalg.copy ins(%w2 : tensor<32x300xf32>) outs(%e2 : tensor<32x300xf32>) -> tensor<32x300xf32>
  %e3 = tensor.empty() : tensor<520x160xf32>
  %c3 = linalg.copy ins(%w3 : tensor<520x160xf32>) outs(%e3 : tensor<520x160xf32>) -> tensor<520x160xf32>
  %e4 = tensor.empty() : tensor<10x32xf32>
  %c4 = linalg.copy ins(%w4 : tensor<10x32xf32>) outs(%e4 : tensor<10x32xf32>) -> tensor<10x32xf32>
  %e5 = tensor.empty() : tensor<512xf32>
  %c5 = linalg.copy ins(%b : tensor<512xf32>) outs(%e5 : tensor<512xf32>) -> tensor<512xf32>
  %e6 = tensor.empty() : tensor<16x16x32xf32>
  %c6 = linalg.copy ins(%s : tensor<16x16x32xf32>) outs(%e6 : tensor<16x16x32xf32>) -> tensor<16x16x32xf32>
  return %c0, %c1, %c2, %c3, %c4, %c5, %c6 : tensor<256x64xf32>, tensor<130x96xf32>, tensor<32x300xf32>, tensor<520x160xf32>, tensor<10x32xf32>, tensor<512xf32>, tensor<16x16x32xf32>
}

// Quantized parameter all-gathers end to end (threads backend, 2x4 mesh):
// every rank's gathered parameters equal, bit for bit, the numpy/ml_dtypes
// model of the format (test/quant/quant_ref.py) applied to each group rank's
// padded slot, and every rank sent exactly the bytes the format predicts.
// Slots that do not block in the format stay unquantized (bit-identical).
// This file is the model of the quantized-*.test files; it checks
// fp8_e4m3_tensor itself.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/check_quantized.py inputs %s %t/data
// RUN: fsdp-opt %s --fsdp-pipeline="lower=true quantize=fp8_e4m3_tensor quantize-min-elements=0" -o %t/l.mlir
// RUN: fsdp-run %t/l.mlir --inputs %t/data --outputs %t/out --all-ranks --print-comm-stats > %t/stats.txt
// RUN: %python %S/Inputs/check_quantized.py gathered %t/data %t/out 8 fp8_e4m3_tensor w0:0:4 w1:0:4 w2:1:4 w3:0:4 w4:0:4:balanced b:0:4 s:0:4 --stats %t/stats.txt | FileCheck %s
// CHECK: w0: quantized [64, 64]
// CHECK: w1: quantized [33, 96]
// CHECK: w2: quantized [32, 75]
// CHECK: w3: quantized [130, 160]
// CHECK: w4: quantized [3, 32]
// CHECK: b: quantized [1, 128]
// CHECK: s: quantized [64, 32]
// CHECK: PASS: fp8_e4m3_tensor: 7 parameters x 8 ranks

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

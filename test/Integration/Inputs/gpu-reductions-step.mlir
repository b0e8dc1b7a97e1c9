// Reductions that compute=gpu splits over blocks (fsdp-gpu-kernels): over
// x (2^20 + 7 elements, so the last segment is partial) a sum of squares
// in f64 (the optimizer's per-parameter norm), a sum and a max in f32; over
// m (16,411 rows of 64 columns) a column sum, as a bias gradient over many
// tokens is.
#all = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>
#rows = affine_map<(i, j) -> (i, j)>
#cols = affine_map<(i, j) -> (j)>
fsdp.mesh @mesh [shard = 1]
func.func @step(%x: tensor<1048583xf32> {fsdp.name = "x"},
                %m: tensor<16411x64xf32> {fsdp.name = "m"})
    -> (tensor<f64> {fsdp.name = "sumsq"}, tensor<f32> {fsdp.name = "sum"},
        tensor<f32> {fsdp.name = "max"}, tensor<64xf32> {fsdp.name = "colsum"}) {
  %zero64 = arith.constant 0.0 : f64
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e64 = tensor.empty() : tensor<f64>
  %z64 = linalg.fill ins(%zero64 : f64) outs(%e64 : tensor<f64>) -> tensor<f64>
  %sumsq = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%x : tensor<1048583xf32>) outs(%z64 : tensor<f64>) {
  ^bb0(%a: f32, %acc: f64):
    %w = arith.extf %a : f32 to f64
    %sq = arith.mulf %w, %w : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%x : tensor<1048583xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %em = tensor.empty() : tensor<f32>
  %n = linalg.fill ins(%ninf : f32) outs(%em : tensor<f32>) -> tensor<f32>
  %max = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%x : tensor<1048583xf32>) outs(%n : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %ec = tensor.empty() : tensor<64xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<64xf32>) -> tensor<64xf32>
  %colsum = linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["reduction", "parallel"]}
      ins(%m : tensor<16411x64xf32>) outs(%zc : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %sumsq, %sum, %max, %colsum : tensor<f64>, tensor<f32>, tensor<f32>, tensor<64xf32>
}

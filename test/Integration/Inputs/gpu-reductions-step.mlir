// Reductions that compute=gpu splits over blocks (fsdp-gpu-kernels): over
// x (2^20 + 7 elements, so the last segment is partial) a sum of squares
// in f64 (the optimizer's per-parameter norm), a sum and a max in f32; over
// m (16,411 rows of 64 columns) a column sum, as a bias gradient over many
// tokens is; integer ones: the count of the positive elements of x (an i1
// widened and added into an i64, as a loss counts the tokens it does not
// ignore), a sum and a signed max over k (2^20 + 7 i64).
#all = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>
#rows = affine_map<(i, j) -> (i, j)>
#cols = affine_map<(i, j) -> (j)>
fsdp.mesh @mesh [shard = 1]
func.func @step(%x: tensor<1048583xf32> {fsdp.name = "x"},
                %m: tensor<16411x64xf32> {fsdp.name = "m"},
                %k: tensor<1048583xi64> {fsdp.name = "k"})
    -> (tensor<f64> {fsdp.name = "sumsq"}, tensor<f32> {fsdp.name = "sum"},
        tensor<f32> {fsdp.name = "max"}, tensor<64xf32> {fsdp.name = "colsum"},
        tensor<i64> {fsdp.name = "count"}, tensor<i64> {fsdp.name = "isum"},
        tensor<i64> {fsdp.name = "imax"}) {
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
  %izero = arith.constant 0 : i64
  %imin = arith.constant -9223372036854775808 : i64
  %ei = tensor.empty() : tensor<i64>
  %zi = linalg.fill ins(%izero : i64) outs(%ei : tensor<i64>) -> tensor<i64>
  %count = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%x : tensor<1048583xf32>) outs(%zi : tensor<i64>) {
  ^bb0(%a: f32, %acc: i64):
    %p = arith.cmpf ogt, %a, %zero : f32
    %w = arith.extui %p : i1 to i64
    %r = arith.addi %w, %acc : i64
    linalg.yield %r : i64
  } -> tensor<i64>
  %es = tensor.empty() : tensor<i64>
  %zs = linalg.fill ins(%izero : i64) outs(%es : tensor<i64>) -> tensor<i64>
  %isum = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%k : tensor<1048583xi64>) outs(%zs : tensor<i64>) {
  ^bb0(%a: i64, %acc: i64):
    %r = arith.addi %acc, %a : i64
    linalg.yield %r : i64
  } -> tensor<i64>
  %ex = tensor.empty() : tensor<i64>
  %zx = linalg.fill ins(%imin : i64) outs(%ex : tensor<i64>) -> tensor<i64>
  %imax = linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction"]}
      ins(%k : tensor<1048583xi64>) outs(%zx : tensor<i64>) {
  ^bb0(%a: i64, %acc: i64):
    %r = arith.maxsi %acc, %a : i64
    linalg.yield %r : i64
  } -> tensor<i64>
  return %sumsq, %sum, %max, %colsum, %count, %isum, %imax : tensor<f64>, tensor<f32>, tensor<f32>, tensor<64xf32>, tensor<i64>, tensor<i64>, tensor<i64>
}

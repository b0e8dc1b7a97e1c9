// RUN: fsdp-opt %s -split-input-file --fsdp-partition --fsdp-expand-collectives | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-layout-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// FSDP over tensor parallelism (DTensor's layout): the "tp" axis shards dim 0
// of the global 16x16 weight, "dp" holds a StridedShard(0, 2) of it. The step
// sees the TP-local 8x16 tensor; its data-parallel gather is a plain gather
// over "dp" (no swap), and its gradient is reduce-scattered over "dp" only:
// the TP axis is not data-parallel.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:.*]]: tensor<4x16xf32> {fsdp.global_type = tensor<8x16xf32>
func.func @step(%w: tensor<8x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>, shard<0>]>},
                %x: tensor<2x16xf32>) -> (tensor<f32> {fsdp.loss}, tensor<8x16xf32> {fsdp.grad_of = 0 : i64}) {
  // CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[W]] {{\[\[}}0, 1]] : tensor<4x16xf32> into tensor<64xf32>
  // CHECK: %[[ALL:.*]] = fsdp.all_gather %[[FLAT]] over @mesh ["dp"] {{.*}}: tensor<64xf32> -> tensor<128xf32>
  // CHECK-NEXT: tensor.expand_shape %[[ALL]] {{\[\[}}0, 1]] output_shape [8, 16]
  // CHECK-NOT: linalg.transpose
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x16xf32>, tensor<8x16xf32>) outs(%f : tensor<2x8xf32>) -> tensor<2x8xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<2x8xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) { %s = arith.addf %a, %b : f32
                          linalg.yield %s : f32 }
  %g = tensor.empty() : tensor<8x16xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%g : tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: fsdp.reduce_scatter %{{.*}} over @mesh ["dp"] avg {{.*}}: tensor<128xf32> -> tensor<64xf32>
  // CHECK-NOT: fsdp.all_reduce
  // CHECK: return
  return %loss, %gz : tensor<f32>, tensor<8x16xf32>
}
// The report shows the global tensor: rank (dp 1, tp 0) holds rows 4..7.
// REPORT: @step argument #0: tensor<8x16xf32> #fsdp.layout<@mesh, [strided_shard<0, 2>, shard<0>]>
// REPORT-NEXT: mesh @mesh [dp = 2, tp = 2], slot 4x16
// REPORT-NEXT: rank 0 (0, 0): local 4x16 offsets [0, 0]
// REPORT-NEXT: rank 1 (0, 1): local 4x16 offsets [8, 0]
// REPORT-NEXT: rank 2 (1, 0): local 4x16 offsets [4, 0]
// REPORT-NEXT: rank 3 (1, 1): local 4x16 offsets [12, 0]

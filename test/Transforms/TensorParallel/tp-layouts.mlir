// RUN: fsdp-opt %s --fsdp-layout-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// The same ownership written with a tensor-parallel placement on the global
// tensor: [shard<0>, tp_shard<0>] owns what [strided_shard<0, 2>, shard<0>]
// owns; a row-parallel [shard<0>, tp_shard<1>] owns blocks.
fsdp.mesh @mesh [dp = 2, tp = 2]
func.func @global(%w: tensor<16x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                  %v: tensor<16x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>}) {
  return
}
// REPORT: @global argument #0: tensor<16x16xf32> #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>
// REPORT-NEXT: mesh @mesh [dp = 2, tp = 2], slot 4x16
// REPORT-NEXT: rank 0 (0, 0): local 4x16 offsets [0, 0]
// REPORT-NEXT: rank 1 (0, 1): local 4x16 offsets [8, 0]
// REPORT-NEXT: rank 2 (1, 0): local 4x16 offsets [4, 0]
// REPORT-NEXT: rank 3 (1, 1): local 4x16 offsets [12, 0]
// REPORT: @global argument #1: tensor<16x16xf32> #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>
// REPORT-NEXT: mesh @mesh [dp = 2, tp = 2], slot 8x8
// REPORT-NEXT: rank 0 (0, 0): local 8x8 offsets [0, 0]
// REPORT-NEXT: rank 1 (0, 1): local 8x8 offsets [0, 8]
// REPORT-NEXT: rank 2 (1, 0): local 8x8 offsets [8, 0]
// REPORT-NEXT: rank 3 (1, 1): local 8x8 offsets [8, 8]

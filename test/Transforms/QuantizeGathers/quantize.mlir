// fsdp-quantize-gathers on expanded IR: every format, the [rows, cols] view
// of each parameter's slot, fsdp.wire_bytes, and the parameters that do not
// block (remark, left as a plain all-gather). The amax all-reduce of the
// per-tensor formats and NVFP4 is part of fsdp.quantized_all_gather: the
// pass adds no collective.
//
// Slots (4 ranks): %w [64, 64] (4096 elements), %b [1, 8], %v [32, 48]
// (1536), %p [64, 32] bf16 (2048). Wire bytes per rank (docs/QUANTIZATION.md):
//   fp8 per-tensor  n + 4                 w 4100  b 12   v 1540  p 2052
//   mxfp8           n + n/32              w 4224  -      v 1584 (colwise)  p 2112
//   nvfp4           n/2 + n/16 + 4        w 2308  -      v 868   p 1156
//   1x128           n + 4*rows*ceil(c/128) w 4352 b 12   v 1664  p 2304
//   128x128         n + 4*tiles           w 4100  b 12   v 1540  p 2052

// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=fp8_e4m3_tensor min-elements=0" | FileCheck %s --check-prefixes=ALL,E4M3
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=fp8_e5m2_tensor min-elements=0" | FileCheck %s --check-prefixes=ALL,E5M2
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=mxfp8_rowwise min-elements=0" | FileCheck %s --check-prefixes=ALL,ROW
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=mxfp8_colwise min-elements=0" | FileCheck %s --check-prefixes=ALL,COL
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=nvfp4 min-elements=0" | FileCheck %s --check-prefixes=ALL,NVFP4
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=fp8_block_1x128 min-elements=0" | FileCheck %s --check-prefixes=ALL,B1
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=fp8_block_128x128 min-elements=0" | FileCheck %s --check-prefixes=ALL,B128
// The op carries the amax all-reduce: no collective is added.
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=fp8_e4m3_tensor min-elements=0" | FileCheck %s --check-prefix=NO-REDUCE
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=nvfp4 min-elements=0" | FileCheck %s --check-prefix=NO-REDUCE
// NO-REDUCE-NOT: all_reduce
// Remarks, once per parameter:
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=mxfp8_rowwise min-elements=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ROW-REMARK
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=mxfp8_colwise min-elements=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COL-REMARK
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false format=nvfp4 min-elements=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NVFP4-REMARK

fsdp.mesh @mesh [replicate = 2, shard = 4]

// ALL-LABEL: func.func @step
func.func @step(
    %w: tensor<64x64xf32> {fsdp.global_type = tensor<256x64xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w"},
    %b: tensor<8xf32> {fsdp.global_type = tensor<32xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "b"},
    %v: tensor<32x48xf32> {fsdp.global_type = tensor<128x48xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "v"},
    %p: tensor<64x32xf32> {fsdp.global_type = tensor<256x32xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "p"},
    %x: tensor<16xf32>)
    -> (tensor<256x64xf32>, tensor<32xf32>, tensor<128x48xf32>, tensor<256x32xbf16>, tensor<256x64xf32>, tensor<64xf32>, tensor<32xf32>) {
  // ALL: %[[WF:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  // E4M3: fsdp.quantized_all_gather %[[WF]] over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4100 : i64} : tensor<4096xf32> -> tensor<16384xf32>
  // E5M2: format fp8_e5m2_tensor shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4100 : i64}
  // ROW: format mxfp8_rowwise shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4224 : i64}
  // COL: format mxfp8_colwise shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4224 : i64}
  // NVFP4: format nvfp4 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 2308 : i64}
  // B1: format fp8_block_1x128 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4352 : i64}
  // B128: format fp8_block_128x128 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4100 : i64}
  %wf = tensor.collapse_shape %w [[0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  %wg = fsdp.all_gather %wf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4096xf32> -> tensor<16384xf32>
  %wfull = tensor.expand_shape %wg [[0, 1]] output_shape [256, 64] : tensor<16384xf32> into tensor<256x64xf32>

  // A bias: one row.
  // E4M3: fsdp.quantized_all_gather %{{.*}} over @mesh ["shard"] format fp8_e4m3_tensor shape [1, 8] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 12 : i64} : tensor<8xf32> -> tensor<32xf32>
  // E5M2: format fp8_e5m2_tensor shape [1, 8] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 12 : i64}
  // ROW: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  // COL: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  // NVFP4: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  // B1: format fp8_block_1x128 shape [1, 8] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 12 : i64}
  // B128: format fp8_block_128x128 shape [1, 8] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 12 : i64}
  %bg = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>

  // 48 columns: MXFP8 rowwise does not block, columnwise does.
  // E4M3: format fp8_e4m3_tensor shape [32, 48] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 1540 : i64}
  // ROW: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<1536xf32> -> tensor<6144xf32>
  // COL: format mxfp8_colwise shape [32, 48] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 1584 : i64}
  // NVFP4: format nvfp4 shape [32, 48] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 868 : i64}
  // B1: format fp8_block_1x128 shape [32, 48] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 1664 : i64}
  // B128: format fp8_block_128x128 shape [32, 48] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 1540 : i64}
  %vf = tensor.collapse_shape %v [[0, 1]] : tensor<32x48xf32> into tensor<1536xf32>
  %vg = fsdp.all_gather %vf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<1536xf32> -> tensor<6144xf32>
  %vfull = tensor.expand_shape %vg [[0, 1]] output_shape [128, 48] : tensor<6144xf32> into tensor<128x48xf32>

  // param-dtype=bf16: the slot is cast before the gather; the op is bf16.
  // ALL: %[[PT:.*]] = arith.truncf %{{.*}} : tensor<64x32xf32> to tensor<64x32xbf16>
  // E4M3: format fp8_e4m3_tensor shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2052 : i64} : tensor<2048xbf16> -> tensor<8192xbf16>
  // ROW: format mxfp8_rowwise shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2112 : i64} : tensor<2048xbf16> -> tensor<8192xbf16>
  // COL: format mxfp8_colwise shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2112 : i64}
  // NVFP4: format nvfp4 shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 1156 : i64}
  // B1: format fp8_block_1x128 shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2304 : i64}
  // B128: format fp8_block_128x128 shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2052 : i64}
  %pt = arith.truncf %p : tensor<64x32xf32> to tensor<64x32xbf16>
  %pf = tensor.collapse_shape %pt [[0, 1]] : tensor<64x32xbf16> into tensor<2048xbf16>
  %pg = fsdp.all_gather %pf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<2048xbf16> -> tensor<8192xbf16>
  %pfull = tensor.expand_shape %pg [[0, 1]] output_shape [256, 32] : tensor<8192xbf16> into tensor<256x32xbf16>

  // The backward re-gather of %w is quantized like the forward one.
  // E4M3: format fp8_e4m3_tensor shape [64, 64] {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">, fsdp.wire_bytes = 4100 : i64}
  // ROW: format mxfp8_rowwise shape [64, 64] {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">, fsdp.wire_bytes = 4224 : i64}
  %wf2 = tensor.collapse_shape %w [[0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  %wg2 = fsdp.all_gather %wf2 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<4096xf32> -> tensor<16384xf32>
  %wfull2 = tensor.expand_shape %wg2 [[0, 1]] output_shape [256, 64] : tensor<16384xf32> into tensor<256x64xf32>

  // Not a parameter: data, and a gather without a phase tag.
  // ALL: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<16xf32> -> tensor<64xf32>
  // ALL: fsdp.all_gather %{{.*}} over @mesh ["shard"] : tensor<8xf32> -> tensor<32xf32>
  %xg = fsdp.all_gather %x over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<16xf32> -> tensor<64xf32>
  %bu = fsdp.all_gather %b over @mesh ["shard"] : tensor<8xf32> -> tensor<32xf32>
  return %wfull, %bg, %vfull, %pfull, %wfull2, %xg, %bu : tensor<256x64xf32>, tensor<32xf32>, tensor<128x48xf32>, tensor<256x32xbf16>, tensor<256x64xf32>, tensor<64xf32>, tensor<32xf32>
}

// ROW-REMARK: remark: not quantized: parameter 'b' has shard shape [1, 8]: mxfp8_rowwise needs cols (8) to be a multiple of 32
// ROW-REMARK: remark: not quantized: parameter 'v' has shard shape [32, 48]: mxfp8_rowwise needs cols (48) to be a multiple of 32
// ROW-REMARK: remark: not quantized: the input is not a parameter shard
// ROW-REMARK-NOT: remark
// COL-REMARK: remark: not quantized: parameter 'b' has shard shape [1, 8]: mxfp8_colwise needs rows (1) to be a multiple of 32
// COL-REMARK: remark: not quantized: the input is not a parameter shard
// COL-REMARK-NOT: remark
// NVFP4-REMARK: remark: not quantized: parameter 'b' has shard shape [1, 8]: nvfp4 needs cols (8) to be a multiple of 16
// NVFP4-REMARK: remark: not quantized: the input is not a parameter shard
// NVFP4-REMARK-NOT: remark

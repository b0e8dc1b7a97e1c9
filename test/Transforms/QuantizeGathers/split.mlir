// fsdp-quantize-gathers with split=true (the default): quant_amax + an
// all-reduce (max, fsdp.movable, no origin) for the formats scaled by the
// group's amax, quantize to the packet (fsdp.wire_bytes bytes of i8), a plain
// all-gather of the packets that keeps the origin, dequantize.
// RUN: fsdp-opt %s --fsdp-quantize-gathers="format=fp8_e4m3_tensor min-elements=0" | FileCheck %s --check-prefix=E4M3
// RUN: fsdp-opt %s --fsdp-quantize-gathers="format=mxfp8_rowwise min-elements=0" 2>/dev/null | FileCheck %s --check-prefix=ROW
// RUN: fsdp-opt %s --fsdp-quantize-gathers="format=nvfp4 min-elements=0" 2>/dev/null | FileCheck %s --check-prefix=NVFP4
// The output verifies and round-trips.
// RUN: fsdp-opt %s --fsdp-quantize-gathers="format=nvfp4 min-elements=0" 2>/dev/null | fsdp-opt -o /dev/null

fsdp.mesh @mesh [replicate = 2, shard = 4]

// E4M3-LABEL: func.func @step
// ROW-LABEL: func.func @step
// NVFP4-LABEL: func.func @step
func.func @step(
    %w: tensor<64x64xf32> {fsdp.global_type = tensor<256x64xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w"},
    %b: tensor<8xf32> {fsdp.global_type = tensor<32xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "b"},
    %p: tensor<64x32xf32> {fsdp.global_type = tensor<256x32xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "p"})
    -> (tensor<16384xf32>, tensor<32xf32>, tensor<8192xbf16>) {
  // E4M3: %[[WF:.*]] = tensor.collapse_shape
  // E4M3: %[[A:.*]] = fsdp.quant_amax %[[WF]] : tensor<4096xf32> -> tensor<1xf32>
  // E4M3: %[[G:.*]] = fsdp.all_reduce %[[A]] over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  // E4M3: %[[Q:.*]] = fsdp.quantize %[[WF]] amax %[[G]] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<4100xi8>
  // E4M3: %[[P:.*]] = fsdp.all_gather %[[Q]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4100 : i64} : tensor<4100xi8> -> tensor<16400xi8>
  // E4M3: %[[R:.*]] = fsdp.dequantize %[[P]] format fp8_e4m3_tensor shape [64, 64] : tensor<16400xi8> -> tensor<16384xf32>
  // ROW-NOT: fsdp.quant_amax
  // ROW: %[[Q:.*]] = fsdp.quantize %{{.*}} format mxfp8_rowwise shape [64, 64] : tensor<4096xf32> -> tensor<4224xi8>
  // ROW: fsdp.all_gather %[[Q]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4224 : i64} : tensor<4224xi8> -> tensor<16896xi8>
  // NVFP4: fsdp.quantize %{{.*}} amax %{{.*}} format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  %wf = tensor.collapse_shape %w [[0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  %wg = fsdp.all_gather %wf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4096xf32> -> tensor<16384xf32>

  // A bias that does not block in 32s or 16s stays a plain f32 gather.
  // E4M3: fsdp.quantize %{{.*}} amax %{{.*}} format fp8_e4m3_tensor shape [1, 8] : tensor<8xf32>, tensor<1xf32> -> tensor<12xi8>
  // ROW: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  // NVFP4: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  %bg = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>

  // bf16 shards (param-dtype=bf16) quantize from bf16 and dequantize to it.
  // ROW: fsdp.quantize %{{.*}} format mxfp8_rowwise shape [64, 32] : tensor<2048xbf16> -> tensor<2112xi8>
  // ROW: fsdp.dequantize %{{.*}} format mxfp8_rowwise shape [64, 32] : tensor<8448xi8> -> tensor<8192xbf16>
  %pt = arith.truncf %p : tensor<64x32xf32> to tensor<64x32xbf16>
  %pf = tensor.collapse_shape %pt [[0, 1]] : tensor<64x32xbf16> into tensor<2048xbf16>
  %pg = fsdp.all_gather %pf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<2048xbf16> -> tensor<8192xbf16>
  // E4M3: return %[[R]],
  return %wg, %bg, %pg : tensor<16384xf32>, tensor<32xf32>, tensor<8192xbf16>
}

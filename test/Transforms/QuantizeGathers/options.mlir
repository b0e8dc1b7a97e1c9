// fsdp-quantize-gathers options: min-elements (full size of the parameter),
// dtypes, phases, and the defaults (fp8_e4m3_tensor, min-elements 1024, f32
// and bf16, forward and backward).

// RUN: fsdp-opt %s --fsdp-quantize-gathers=split=false | FileCheck %s --check-prefix=DEFAULT
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false min-elements=0" | FileCheck %s --check-prefix=MIN0
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false min-elements=16384" | FileCheck %s --check-prefix=MIN16K
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false min-elements=16385" | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false dtypes=bf16 min-elements=0" | FileCheck %s --check-prefix=BF16
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false dtypes=f32 min-elements=0" | FileCheck %s --check-prefix=F32
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false dtypes=f32,bf16 phases=forward min-elements=0" | FileCheck %s --check-prefix=FWD
// RUN: fsdp-opt %s --fsdp-quantize-gathers="split=false phases=backward format=nvfp4 min-elements=0" | FileCheck %s --check-prefix=BWD

fsdp.mesh @mesh [shard = 4]

// %w: 256x64 = 16384 elements, %b: 32, %p: 256x32 = 8192 (gathered in bf16).
func.func @step(
    %w: tensor<64x64xf32> {fsdp.global_type = tensor<256x64xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>},
    %b: tensor<8xf32> {fsdp.global_type = tensor<32xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>},
    %p: tensor<64x32xf32> {fsdp.global_type = tensor<256x32xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>})
    -> (tensor<16384xf32>, tensor<32xf32>, tensor<8192xbf16>, tensor<16384xf32>) {
  %wf = tensor.collapse_shape %w [[0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  %wg = fsdp.all_gather %wf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4096xf32> -> tensor<16384xf32>
  %bg = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<32xf32>
  %pt = arith.truncf %p : tensor<64x32xf32> to tensor<64x32xbf16>
  %pf = tensor.collapse_shape %pt [[0, 1]] : tensor<64x32xbf16> into tensor<2048xbf16>
  %pg = fsdp.all_gather %pf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<2048xbf16> -> tensor<8192xbf16>
  %wg2 = fsdp.all_gather %wf over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<4096xf32> -> tensor<16384xf32>
  return %wg, %bg, %pg, %wg2 : tensor<16384xf32>, tensor<32xf32>, tensor<8192xbf16>, tensor<16384xf32>
}

// DEFAULT: quantized_all_gather {{.*}} format fp8_e4m3_tensor shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward>
// DEFAULT: fsdp.all_gather {{.*}} : tensor<8xf32>
// DEFAULT: quantized_all_gather {{.*}} format fp8_e4m3_tensor shape [64, 32] {fsdp.origin = #fsdp.origin<phase = forward>
// DEFAULT: quantized_all_gather {{.*}} format fp8_e4m3_tensor shape [64, 64] {fsdp.origin = #fsdp.origin<phase = backward>

// MIN0: quantized_all_gather {{.*}} shape [64, 64]
// MIN0: quantized_all_gather {{.*}} shape [1, 8]
// MIN0: quantized_all_gather {{.*}} shape [64, 32]
// MIN0: quantized_all_gather {{.*}} shape [64, 64]

// MIN16K: quantized_all_gather {{.*}} shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward>
// MIN16K: fsdp.all_gather {{.*}} : tensor<8xf32>
// MIN16K: fsdp.all_gather {{.*}} : tensor<2048xbf16>
// MIN16K: quantized_all_gather {{.*}} shape [64, 64] {fsdp.origin = #fsdp.origin<phase = backward>

// NONE-NOT: quantized_all_gather

// BF16: fsdp.all_gather {{.*}} : tensor<4096xf32>
// BF16: fsdp.all_gather {{.*}} : tensor<8xf32>
// BF16: quantized_all_gather {{.*}} : tensor<2048xbf16>
// BF16: fsdp.all_gather {{.*}} : tensor<4096xf32>

// F32: quantized_all_gather {{.*}} : tensor<4096xf32>
// F32: quantized_all_gather {{.*}} : tensor<8xf32>
// F32: fsdp.all_gather {{.*}} : tensor<2048xbf16>
// F32: quantized_all_gather {{.*}} : tensor<4096xf32>

// FWD: quantized_all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>
// FWD: quantized_all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>
// FWD: quantized_all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>
// FWD: fsdp.all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = backward>}

// BWD: fsdp.all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>}
// BWD: fsdp.all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>}
// BWD: fsdp.all_gather {{.*}} {fsdp.origin = #fsdp.origin<phase = forward>}
// BWD: quantized_all_gather {{.*}} format nvfp4 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = backward>, fsdp.wire_bytes = 2308 : i64}

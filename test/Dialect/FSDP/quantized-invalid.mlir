// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

fsdp.mesh @mesh [shard = 4]
func.func @unknown_format(%x: tensor<4096xf32>) {
  // expected-error @+2 {{expected ::mlir::fsdp::QuantFormat to be one of: fp8_e4m3_tensor, fp8_e5m2_tensor, mxfp8_rowwise, mxfp8_colwise, nvfp4, fp8_block_1x128, fp8_block_128x128}}
  // expected-error @+1 {{failed to parse FSDP_QuantFormatAttr parameter 'value'}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e3m4_tensor shape [64, 64] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @mxfp8_rowwise_cols(%x: tensor<4096xf32>) {
  // expected-error @+1 {{cannot block shape [256, 16]: mxfp8_rowwise needs cols (16) to be a multiple of 32}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format mxfp8_rowwise shape [256, 16] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @mxfp8_colwise_rows(%x: tensor<4000xf32>) {
  // expected-error @+1 {{cannot block shape [40, 100]: mxfp8_colwise needs rows (40) to be a multiple of 32}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format mxfp8_colwise shape [40, 100] : tensor<4000xf32> -> tensor<16000xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @nvfp4_cols(%x: tensor<4000xf32>) {
  // expected-error @+1 {{cannot block shape [40, 100]: nvfp4 needs cols (100) to be a multiple of 16}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format nvfp4 shape [40, 100] : tensor<4000xf32> -> tensor<16000xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @nvfp4_odd_cols(%x: tensor<400xf32>) {
  // expected-error @+1 {{cannot block shape [16, 25]: nvfp4 needs cols (25) to be a multiple of 16}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format nvfp4 shape [16, 25] : tensor<400xf32> -> tensor<1600xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @shape_product(%x: tensor<4096xf32>) {
  // expected-error @+1 {{shape [64, 32] does not view the 4096 input elements}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_block_1x128 shape [64, 32] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @shape_rank(%x: tensor<4096xf32>) {
  // expected-error @+1 {{shape must be [rows, cols], got 3 entries}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [16, 16, 16] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @shape_positive(%x: tensor<4096xf32>) {
  // expected-error @+1 {{shape entries must be positive, got [-64, -64]}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [-64, -64] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @shape_overflow(%x: tensor<4096xf32>) {
  // expected-error @+1 {{shape [4294967296, 4294967296] does not view the 4096 input elements}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [4294967296, 4294967296] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @element_type(%x: tensor<4096xf16>) {
  // expected-error @+1 {{quantizes f32 or bf16 elements, got 'f16'}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf16> -> tensor<16384xf16>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @result_element_type(%x: tensor<4096xbf16>) {
  // expected-error @+1 {{result element type 'f32' must equal the input's 'bf16'}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xbf16> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @not_flat(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{input and result must be statically shaped and 1-D}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<64x64xf32> -> tensor<256x64xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @group_size(%x: tensor<4096xf32>) {
  // expected-error @+1 {{over a group of 4 ranks, result dim 0 must be 4 x 4096 = 16384, got 8192}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32> -> tensor<8192xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @unknown_axis(%x: tensor<4096xf32>) {
  // expected-error @+1 {{mesh @mesh has no axis 'replicate'}}
  %0 = fsdp.quantized_all_gather %x over @mesh ["replicate"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32> -> tensor<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @buffer_shape(%a: memref<4096xf32>, %b: memref<16384xf32>) {
  // expected-error @+1 {{cannot block shape [4096, 1]: nvfp4 needs cols (1) to be a multiple of 16}}
  fsdp.buffer.quantized_all_gather %a into %b over @mesh ["shard"] format nvfp4 shape [4096, 1] : memref<4096xf32>, memref<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @buffer_types(%a: memref<4096xbf16>, %b: memref<16384xf32>) {
  // expected-error @+1 {{output element type 'f32' must equal the input's 'bf16'}}
  fsdp.buffer.quantized_all_gather %a into %b over @mesh ["shard"] format nvfp4 shape [64, 64] : memref<4096xbf16>, memref<16384xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @buffer_group(%a: memref<4096xf32>, %b: memref<4096xf32>) {
  // expected-error @+1 {{over a group of 4 ranks, output dim 0 must be 4 x 4096 = 16384, got 4096}}
  fsdp.buffer.quantized_all_gather %a into %b over @mesh ["shard"] format nvfp4 shape [64, 64] : memref<4096xf32>, memref<4096xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @buffer_contiguous(%a: memref<4096xf32, strided<[2]>>, %b: memref<16384xf32>) {
  // expected-error @+1 {{buffers must be contiguous}}
  fsdp.buffer.quantized_all_gather %a into %b over @mesh ["shard"] format nvfp4 shape [64, 64] : memref<4096xf32, strided<[2]>>, memref<16384xf32>
  return
}

// -----

func.func @amax_type(%x: tensor<64xf32>) {
  // expected-error @+1 {{result must be 1xf32, got 'tensor<2xf32>'}}
  %a = fsdp.quant_amax %x : tensor<64xf32> -> tensor<2xf32>
  return
}

// -----

func.func @amax_dtype(%x: tensor<64xf16>) {
  // expected-error @+1 {{input must hold f32 or bf16 elements, got 'f16'}}
  %a = fsdp.quant_amax %x : tensor<64xf16> -> tensor<1xf32>
  return
}

// -----

func.func @quantize_needs_amax(%x: tensor<4096xf32>) {
  // expected-error @+1 {{fp8_e4m3_tensor scales with the group's amax: it needs an amax operand}}
  %q = fsdp.quantize %x format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32> -> tensor<4100xi8>
  return
}

// -----

func.func @quantize_no_amax(%x: tensor<4096xf32>, %a: tensor<1xf32>) {
  // expected-error @+1 {{mxfp8_rowwise has per-block scales only: it takes no amax}}
  %q = fsdp.quantize %x amax %a format mxfp8_rowwise shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<4224xi8>
  return
}

// -----

func.func @quantize_packet_size(%x: tensor<4096xf32>) {
  // expected-error @+1 {{result must hold the 4224-byte packet of shape [64, 64] in mxfp8_rowwise, got 4096}}
  %q = fsdp.quantize %x format mxfp8_rowwise shape [64, 64] : tensor<4096xf32> -> tensor<4096xi8>
  return
}

// -----

func.func @quantize_view(%x: tensor<4096xf32>) {
  // expected-error @+1 {{shape [64, 32] does not view the 4096 elements}}
  %q = fsdp.quantize %x format mxfp8_rowwise shape [64, 32] : tensor<4096xf32> -> tensor<2112xi8>
  return
}

// -----

func.func @quantize_blocking(%x: tensor<1200xf32>) {
  // expected-error @+1 {{cannot block shape [40, 30]: mxfp8_rowwise needs cols (30) to be a multiple of 32}}
  %q = fsdp.quantize %x format mxfp8_rowwise shape [40, 30] : tensor<1200xf32> -> tensor<1237xi8>
  return
}

// -----

func.func @quantize_result_type(%x: tensor<4096xf32>) {
  // expected-error @+1 {{result must be statically shaped 1-D i8 bytes, got 'tensor<4224xf32>'}}
  %q = fsdp.quantize %x format mxfp8_rowwise shape [64, 64] : tensor<4096xf32> -> tensor<4224xf32>
  return
}

// -----

func.func @dequantize_packets(%p: tensor<8000xi8>) {
  // expected-error @+1 {{input must be a whole number of 4224-byte packets, got 8000 bytes}}
  %y = fsdp.dequantize %p format mxfp8_rowwise shape [64, 64] : tensor<8000xi8> -> tensor<8192xf32>
  return
}

// -----

func.func @dequantize_result(%p: tensor<8448xi8>) {
  // expected-error @+1 {{result must hold the 2 x 4096 dequantized elements, got 4096}}
  %y = fsdp.dequantize %p format mxfp8_rowwise shape [64, 64] : tensor<8448xi8> -> tensor<4096xf32>
  return
}

// -----

func.func @dequantize_overflow(%p: tensor<8448xi8>) {
  // expected-error @+1 {{does not view the -1 elements}}
  %y = fsdp.dequantize %p format mxfp8_rowwise shape [4611686018427387904, 64] : tensor<8448xi8> -> tensor<4096xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @movable_with_origin(%a: tensor<1xf32>) {
  // expected-error @+1 {{'fsdp.movable' must be a unit attribute on a blocking collective without an origin}}
  %g = fsdp.all_reduce %a over @mesh ["shard"] max {fsdp.movable, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<1xf32> -> tensor<1xf32>
  return
}

// -----

func.func @movable_not_collective(%x: tensor<64xf32>) {
  // expected-error @+1 {{'fsdp.movable' must be a unit attribute on a blocking collective without an origin}}
  %a = fsdp.quant_amax %x {fsdp.movable} : tensor<64xf32> -> tensor<1xf32>
  return
}

// -----

func.func @buffer_quantize_contiguous(%x: memref<4096xf32, strided<[2]>>, %q: memref<4224xi8>) {
  // expected-error @+1 {{buffers must be contiguous}}
  fsdp.buffer.quantize %x into %q format mxfp8_rowwise shape [64, 64] : memref<4096xf32, strided<[2]>> -> memref<4224xi8>
  return
}

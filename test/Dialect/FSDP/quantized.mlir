// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -mlir-print-op-generic | fsdp-opt -split-input-file | FileCheck %s

// Every format, f32 and bf16, tensor and buffer forms.
fsdp.mesh @mesh [replicate = 2, shard = 4]
// CHECK-LABEL: func.func @formats
func.func @formats(%x: tensor<4096xf32>, %y: tensor<4096xbf16>) {
  // CHECK: fsdp.quantized_all_gather %{{.*}} over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32> -> tensor<16384xf32>
  %0 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32> -> tensor<16384xf32>
  // CHECK: format fp8_e5m2_tensor shape [1, 4096]
  %1 = fsdp.quantized_all_gather %x over @mesh ["shard"] format fp8_e5m2_tensor shape [1, 4096] : tensor<4096xf32> -> tensor<16384xf32>
  // CHECK: format mxfp8_rowwise shape [128, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 4224 : i64}
  %2 = fsdp.quantized_all_gather %x over @mesh ["shard"] format mxfp8_rowwise shape [128, 32] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 4224 : i64} : tensor<4096xf32> -> tensor<16384xf32>
  // CHECK: format mxfp8_colwise shape [32, 128]
  %3 = fsdp.quantized_all_gather %x over @mesh ["shard"] format mxfp8_colwise shape [32, 128] : tensor<4096xf32> -> tensor<16384xf32>
  // CHECK: format nvfp4 shape [256, 16] : tensor<4096xbf16> -> tensor<16384xbf16>
  %4 = fsdp.quantized_all_gather %y over @mesh ["shard"] format nvfp4 shape [256, 16] : tensor<4096xbf16> -> tensor<16384xbf16>
  // Blockwise formats take any shape (partial trailing blocks).
  // CHECK: format fp8_block_1x128 shape [4096, 1]
  %5 = fsdp.quantized_all_gather %y over @mesh ["shard"] format fp8_block_1x128 shape [4096, 1] : tensor<4096xbf16> -> tensor<16384xbf16>
  // CHECK: over @mesh ["replicate", "shard"] format fp8_block_128x128 shape [3, 1365]
  %z = tensor.empty() : tensor<4095xf32>
  %6 = fsdp.quantized_all_gather %z over @mesh ["replicate", "shard"] format fp8_block_128x128 shape [3, 1365] : tensor<4095xf32> -> tensor<32760xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @buffers
func.func @buffers(%a: memref<4096xf32>, %b: memref<16384xf32>, %c: memref<4096xbf16>, %d: memref<16384xbf16>) {
  // CHECK: fsdp.buffer.quantized_all_gather %{{.*}} into %{{.*}} over @mesh ["shard"] format nvfp4 shape [64, 64] : memref<4096xf32>, memref<16384xf32>
  fsdp.buffer.quantized_all_gather %a into %b over @mesh ["shard"] format nvfp4 shape [64, 64] : memref<4096xf32>, memref<16384xf32>
  // CHECK: fsdp.buffer.quantized_all_gather %{{.*}} into %{{.*}} over @mesh ["shard"] format mxfp8_colwise shape [64, 64] {fsdp.wire_bytes = 4224 : i64} : memref<4096xbf16>, memref<16384xbf16>
  fsdp.buffer.quantized_all_gather %c into %d over @mesh ["shard"] format mxfp8_colwise shape [64, 64] {fsdp.wire_bytes = 4224 : i64} : memref<4096xbf16>, memref<16384xbf16>
  return
}

// -----

// The format is an enum attribute of its own.
// CHECK-LABEL: func.func @attr
// CHECK-SAME: f = #fsdp<quant_format mxfp8_rowwise>
func.func @attr() attributes {f = #fsdp<quant_format mxfp8_rowwise>} {
  return
}

// -----

// The local steps of a split quantized gather, tensor and buffer forms.
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @steps
func.func @steps(%x: tensor<4096xf32>, %y: tensor<2048xbf16>) -> (tensor<16384xf32>, tensor<8192xbf16>) {
  // CHECK: %[[A:.*]] = fsdp.quant_amax %{{.*}} : tensor<4096xf32> -> tensor<1xf32>
  // CHECK: %[[G:.*]] = fsdp.all_reduce %[[A]] over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  // CHECK: %[[Q:.*]] = fsdp.quantize %{{.*}} amax %[[G]] format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  // CHECK: %[[P:.*]] = fsdp.all_gather %[[Q]]
  // CHECK: fsdp.dequantize %[[P]] format nvfp4 shape [64, 64] : tensor<9232xi8> -> tensor<16384xf32>
  %a = fsdp.quant_amax %x : tensor<4096xf32> -> tensor<1xf32>
  %g = fsdp.all_reduce %a over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %q = fsdp.quantize %x amax %g format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  %p = fsdp.all_gather %q over @mesh ["shard"] : tensor<2308xi8> -> tensor<9232xi8>
  %r = fsdp.dequantize %p format nvfp4 shape [64, 64] : tensor<9232xi8> -> tensor<16384xf32>
  // CHECK: fsdp.quantize %{{.*}} format mxfp8_rowwise shape [64, 32] : tensor<2048xbf16> -> tensor<2112xi8>
  // CHECK: fsdp.dequantize %{{.*}} format mxfp8_rowwise shape [64, 32] : tensor<8448xi8> -> tensor<8192xbf16>
  %qy = fsdp.quantize %y format mxfp8_rowwise shape [64, 32] : tensor<2048xbf16> -> tensor<2112xi8>
  %py = fsdp.all_gather %qy over @mesh ["shard"] : tensor<2112xi8> -> tensor<8448xi8>
  %ry = fsdp.dequantize %py format mxfp8_rowwise shape [64, 32] : tensor<8448xi8> -> tensor<8192xbf16>
  return %r, %ry : tensor<16384xf32>, tensor<8192xbf16>
}

// CHECK-LABEL: func.func @buffer_steps
func.func @buffer_steps(%x: memref<4096xf32>, %a: memref<1xf32>, %q: memref<2308xi8>, %p: memref<9232xi8>, %y: memref<16384xf32>) {
  // CHECK: fsdp.buffer.quant_amax %{{.*}} into %{{.*}} : memref<4096xf32>, memref<1xf32>
  // CHECK: fsdp.buffer.quantize %{{.*}} amax %{{.*}} into %{{.*}} format nvfp4 shape [64, 64] : memref<4096xf32>, memref<1xf32> -> memref<2308xi8>
  // CHECK: fsdp.buffer.dequantize %{{.*}} into %{{.*}} format nvfp4 shape [64, 64] : memref<9232xi8>, memref<16384xf32>
  fsdp.buffer.quant_amax %x into %a : memref<4096xf32>, memref<1xf32>
  fsdp.buffer.quantize %x amax %a into %q format nvfp4 shape [64, 64] : memref<4096xf32>, memref<1xf32> -> memref<2308xi8>
  fsdp.buffer.dequantize %p into %y format nvfp4 shape [64, 64] : memref<9232xi8>, memref<16384xf32>
  return
}

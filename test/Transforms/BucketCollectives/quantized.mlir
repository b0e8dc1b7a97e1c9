// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

// Split quantized gathers (fsdp-quantize-gathers): the packets of a unit
// share one i8 bucket. The second member's input chain (quant_amax, its
// fsdp.movable amax all-reduce, quantize) moves up to the bucket, issued
// where the first member was.
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @unit
func.func @unit(%w: tensor<4096xf32>, %v: tensor<1024xf32>, %x: tensor<4xf32>) -> (tensor<16384xf32>, tensor<4096xf32>, tensor<4xf32>) {
  // CHECK: %[[QW:.*]] = fsdp.quantize %{{.*}} amax %{{.*}} format fp8_e4m3_tensor shape [64, 64]
  // CHECK: %[[AV:.*]] = fsdp.quant_amax %{{.*}} : tensor<1024xf32> -> tensor<1xf32>
  // CHECK: %[[GV:.*]] = fsdp.all_reduce %[[AV]] over @mesh ["shard"] max {fsdp.movable}
  // CHECK: %[[QV:.*]] = fsdp.quantize %{{.*}} amax %[[GV]] format fp8_e4m3_tensor shape [32, 32]
  // CHECK: %[[CAT:.*]] = tensor.concat dim(0) %[[QW]], %[[QV]] : (tensor<4100xi8>, tensor<1028xi8>) -> tensor<5128xi8>
  // CHECK: fsdp.all_gather %[[CAT]] over @mesh ["shard"] {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<5128xi8> -> tensor<20512xi8>
  // CHECK: "model.layer"
  // CHECK: fsdp.dequantize %{{.*}} format fp8_e4m3_tensor shape [64, 64] : tensor<16400xi8> -> tensor<16384xf32>
  // CHECK: fsdp.dequantize %{{.*}} format fp8_e4m3_tensor shape [32, 32] : tensor<4112xi8> -> tensor<4096xf32>
  %aw = fsdp.quant_amax %w : tensor<4096xf32> -> tensor<1xf32>
  %gw = fsdp.all_reduce %aw over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %qw = fsdp.quantize %w amax %gw format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<4100xi8>
  %pw = fsdp.all_gather %qw over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 4100 : i64} : tensor<4100xi8> -> tensor<16400xi8>
  %y = "model.layer"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %rw = fsdp.dequantize %pw format fp8_e4m3_tensor shape [64, 64] : tensor<16400xi8> -> tensor<16384xf32>
  %av = fsdp.quant_amax %v : tensor<1024xf32> -> tensor<1xf32>
  %gv = fsdp.all_reduce %av over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %qv = fsdp.quantize %v amax %gv format fp8_e4m3_tensor shape [32, 32] : tensor<1024xf32>, tensor<1xf32> -> tensor<1028xi8>
  %pv = fsdp.all_gather %qv over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">, fsdp.wire_bytes = 1028 : i64} : tensor<1028xi8> -> tensor<4112xi8>
  %rv = fsdp.dequantize %pv format fp8_e4m3_tensor shape [32, 32] : tensor<4112xi8> -> tensor<4096xf32>
  return %rw, %rv, %y : tensor<16384xf32>, tensor<4096xf32>, tensor<4xf32>
}

// -----

// Without fsdp.movable an all-reduce is a collective the passes do not
// move: the second member's input cannot be computed before the bucket.
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @not_movable
func.func @not_movable(%w: tensor<4096xf32>, %v: tensor<1024xf32>) -> (tensor<16384xf32>, tensor<4096xf32>) {
  // REMARK: quantized.mlir:{{[0-9]+}}:9: remark: not bucketed: an input cannot be computed before the bucket
  // REMARK-NOT: remark
  // CHECK-NOT: fsdp.bucket_size
  %aw = fsdp.quant_amax %w : tensor<4096xf32> -> tensor<1xf32>
  %gw = fsdp.all_reduce %aw over @mesh ["shard"] max : tensor<1xf32> -> tensor<1xf32>
  %qw = fsdp.quantize %w amax %gw format fp8_e4m3_tensor shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<4100xi8>
  %pw = fsdp.all_gather %qw over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4100xi8> -> tensor<16400xi8>
  %rw = fsdp.dequantize %pw format fp8_e4m3_tensor shape [64, 64] : tensor<16400xi8> -> tensor<16384xf32>
  %av = fsdp.quant_amax %v : tensor<1024xf32> -> tensor<1xf32>
  %gv = fsdp.all_reduce %av over @mesh ["shard"] max : tensor<1xf32> -> tensor<1xf32>
  %qv = fsdp.quantize %v amax %gv format fp8_e4m3_tensor shape [32, 32] : tensor<1024xf32>, tensor<1xf32> -> tensor<1028xi8>
  %pv = fsdp.all_gather %qv over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<1028xi8> -> tensor<4112xi8>
  %rv = fsdp.dequantize %pv format fp8_e4m3_tensor shape [32, 32] : tensor<4112xi8> -> tensor<4096xf32>
  return %rw, %rv : tensor<16384xf32>, tensor<4096xf32>
}

// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-schedule=prefetch=1 | FileCheck %s
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-schedule=prefetch=0 | FileCheck %s --check-prefix=NOPREFETCH

// Split quantized gathers start ahead like plain ones: the byte gather of
// unit l1 starts before unit l0's wait, and its input chain (quant_amax,
// the fsdp.movable amax all-reduce, quantize) moves up with it. The amax
// all-reduce itself stays a blocking collective; dequantize stays after
// the wait.
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @step
func.func @step(%w0: tensor<4096xf32>, %w1: tensor<4096xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: fsdp.all_gather_start %{{.*}} {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<2308xi8> -> tensor<9232xi8>
  // CHECK: %[[A1:.*]] = fsdp.quant_amax %arg1
  // CHECK-NEXT: %[[G1:.*]] = fsdp.all_reduce %[[A1]] over @mesh ["shard"] max {fsdp.movable}
  // CHECK-NEXT: %[[Q1:.*]] = fsdp.quantize %arg1 amax %[[G1]]
  // CHECK-NEXT: %[[R1:.*]], %[[P1:.*]] = fsdp.all_gather_start %[[Q1]] {{.*}}unit = "l1"
  // CHECK: fsdp.wait %{{.*}} : tensor<9232xi8>
  // CHECK: fsdp.dequantize
  // CHECK: "model.layer"
  // CHECK: fsdp.wait %[[R1]], %[[P1]] : tensor<9232xi8>
  // CHECK: fsdp.dequantize
  // CHECK: "model.layer"
  // NOPREFETCH: "model.layer"
  // NOPREFETCH: fsdp.quant_amax %arg1
  // NOPREFETCH: fsdp.all_gather_start
  // NOPREFETCH-NEXT: fsdp.wait
  %a0 = fsdp.quant_amax %w0 : tensor<4096xf32> -> tensor<1xf32>
  %g0 = fsdp.all_reduce %a0 over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %q0 = fsdp.quantize %w0 amax %g0 format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  %p0 = fsdp.all_gather %q0 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<2308xi8> -> tensor<9232xi8>
  %r0 = fsdp.dequantize %p0 format nvfp4 shape [64, 64] : tensor<9232xi8> -> tensor<16384xf32>
  %y0 = "model.layer"(%x, %r0) : (tensor<4xf32>, tensor<16384xf32>) -> tensor<4xf32>
  %a1 = fsdp.quant_amax %w1 : tensor<4096xf32> -> tensor<1xf32>
  %g1 = fsdp.all_reduce %a1 over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %q1 = fsdp.quantize %w1 amax %g1 format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  %p1 = fsdp.all_gather %q1 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<2308xi8> -> tensor<9232xi8>
  %r1 = fsdp.dequantize %p1 format nvfp4 shape [64, 64] : tensor<9232xi8> -> tensor<16384xf32>
  %y1 = "model.layer"(%y0, %r1) : (tensor<4xf32>, tensor<16384xf32>) -> tensor<4xf32>
  return %y1 : tensor<4xf32>
}

// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=bf16 --fsdp-expand-collectives | FileCheck %s --check-prefix=BF16
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=f32 --fsdp-expand-collectives | FileCheck %s --check-prefix=RDT
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=0.125" --fsdp-expand-collectives | FileCheck %s --check-prefix=SUM
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="all-reduce-loss=true reshard-after-forward=false" --fsdp-expand-collectives | FileCheck %s --check-prefix=LOSS
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=bf16 --fsdp-expand-collectives | FileCheck %s --check-prefix=RBF16

// Every option combination expands to IR that upstream mlir-opt verifies.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="param-dtype=bf16 reduce-dtype=f32 reduce-op=sum grad-scale=0.125 all-reduce-loss=true" --fsdp-expand-collectives -mlir-print-op-generic \
// RUN:   | mlir-opt -split-input-file --allow-unregistered-dialect -o /dev/null
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="param-dtype=bf16 reduce-dtype=bf16" --fsdp-expand-collectives -mlir-print-op-generic \
// RUN:   | mlir-opt -split-input-file --allow-unregistered-dialect -o /dev/null

// An HSDP step (f32 master parameter) and the same step in bf16.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @step(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}

// param-dtype=bf16: the shard is cast before the gather, so the collective
// moves bf16 (48 x 2 bytes per rank); the unpacked parameter is cast back.
// Gradients are unaffected.
// BF16-LABEL: func.func @step(
// BF16-SAME: %[[W:[^:]*]]: tensor<3x16xf32>
// BF16-NEXT: %[[T:.*]] = arith.truncf %[[W]] : tensor<3x16xf32> to tensor<3x16xbf16>
// BF16-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[T]] {{\[\[}}0, 1]] : tensor<3x16xbf16> into tensor<48xbf16>
// BF16-NEXT: %[[ALL:.*]] = fsdp.all_gather %[[FLAT]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<48xbf16> -> tensor<192xbf16>
// BF16-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1]] output_shape [12, 16] : tensor<192xbf16> into tensor<12x16xbf16>
// BF16-NEXT: %[[FULL:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [10, 16] [1, 1] : tensor<12x16xbf16> to tensor<10x16xbf16>
// BF16-NEXT: %[[E:.*]] = arith.extf %[[FULL]] : tensor<10x16xbf16> to tensor<10x16xf32>
// BF16-NEXT: "model.forward"(%{{.*}}, %[[E]])
// BF16-NEXT: arith.truncf %[[W]] : tensor<3x16xf32> to tensor<3x16xbf16>
// BF16:      fsdp.all_gather %{{.*}} : tensor<48xbf16> -> tensor<192xbf16>
// BF16:      arith.extf %{{.*}} : tensor<10x16xbf16> to tensor<10x16xf32>
// BF16:      fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>
// BF16-NEXT: fsdp.all_reduce %{{.*}} over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<48xf32>

// reduce-dtype=f32 on f32 gradients changes nothing.
// RDT-LABEL: func.func @step(
// RDT-NOT: arith.extf
// RDT-NOT: arith.truncf
// RDT: return

// reduce-op=sum with a scale: sums over both axes, then one multiply.
// SUM-LABEL: func.func @step(
// SUM:      %[[RS:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>
// SUM-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] sum {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<48xf32>
// SUM-NEXT: %[[SLOT:.*]] = tensor.expand_shape %[[AR]] {{\[\[}}0, 1]] output_shape [3, 16] : tensor<48xf32> into tensor<3x16xf32>
// SUM-NEXT: %[[C:.*]] = arith.constant dense<1.250000e-01> : tensor<3x16xf32>
// SUM-NEXT: %[[G:.*]] = arith.mulf %[[SLOT]], %[[C]] : tensor<3x16xf32>
// SUM-NEXT: return %{{.*}}, %[[G]]

// all-reduce-loss with one gather (reshard-after-forward=false): the loss is
// all-reduced over the whole mesh as a rank-0 tensor, after the gradients.
// LOSS-LABEL: func.func @step(
// LOSS:      fsdp.all_gather
// LOSS:      %[[L:.*]] = "model.forward"
// LOSS-NOT:  fsdp.all_gather
// LOSS:      fsdp.reduce_scatter
// LOSS:      %[[R:.*]] = fsdp.all_reduce %[[L]] over @mesh ["replicate", "shard"] avg : tensor<f32> -> tensor<f32>
// LOSS-NEXT: return %[[R]],

// -----

fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @bf16_step(%w: tensor<10x16xbf16> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}, %x: tensor<2x16xbf16>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xbf16> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xbf16>, tensor<10x16xbf16>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xbf16>, tensor<10x16xbf16>) -> tensor<10x16xbf16>
  return %loss, %dw : tensor<f32>, tensor<10x16xbf16>
}

// param-dtype equal to the parameter's type: no cast.
// BF16-LABEL: func.func @bf16_step(
// BF16-NOT: arith.truncf
// BF16: fsdp.all_gather %{{.*}} : tensor<48xbf16> -> tensor<192xbf16>
// BF16-NOT: arith.extf
// BF16: return

// reduce-dtype=f32 on bf16 gradients: widen before the pad, reduce in f32,
// narrow the slot back to bf16.
// RDT-LABEL: func.func @bf16_step(
// RDT:      %[[DW:.*]] = "model.backward"
// RDT-NEXT: %[[WIDE:.*]] = arith.extf %[[DW]] : tensor<10x16xbf16> to tensor<10x16xf32>
// RDT-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// RDT-NEXT: tensor.pad %[[WIDE]] low[0, 0] high[2, 0]
// RDT:      fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>
// RDT-NEXT: fsdp.all_reduce %{{.*}} over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<48xf32>
// RDT-NEXT: %[[SLOT:.*]] = tensor.expand_shape %{{.*}} : tensor<48xf32> into tensor<3x16xf32>
// RDT-NEXT: %[[NARROW:.*]] = arith.truncf %[[SLOT]] : tensor<3x16xf32> to tensor<3x16xbf16>
// RDT-NEXT: return %{{.*}}, %[[NARROW]] : tensor<f32>, tensor<3x16xbf16>

// SUM-LABEL: func.func @bf16_step(
// SUM: arith.constant dense<1.250000e-01> : tensor<3x16xbf16>

// -----

// f16 <-> bf16 have the same width: the casts go through f32 (exact), then
// round once.
fsdp.mesh @mesh [shard = 4]
func.func @f16_step(%w: tensor<8x4xf16> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>})
    -> (tensor<f32> {fsdp.loss}, tensor<8x4xf16> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<8x4xf16>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<8x4xf16>) -> tensor<8x4xf16>
  return %loss, %dw : tensor<f32>, tensor<8x4xf16>
}
// BF16-LABEL: func.func @f16_step(
// BF16-SAME: %[[W:[^:]*]]: tensor<2x4xf16>
// BF16-NEXT: %[[W32:.*]] = arith.extf %[[W]] : tensor<2x4xf16> to tensor<2x4xf32>
// BF16-NEXT: %[[WB:.*]] = arith.truncf %[[W32]] : tensor<2x4xf32> to tensor<2x4xbf16>
// BF16-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[WB]]
// BF16-NEXT: fsdp.all_gather %[[FLAT]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xbf16> -> tensor<32xbf16>
// BF16-NEXT: %[[FULL:.*]] = tensor.expand_shape {{.*}} into tensor<8x4xbf16>
// BF16-NEXT: %[[F32:.*]] = arith.extf %[[FULL]] : tensor<8x4xbf16> to tensor<8x4xf32>
// BF16-NEXT: %[[F16:.*]] = arith.truncf %[[F32]] : tensor<8x4xf32> to tensor<8x4xf16>
// BF16-NEXT: "model.forward"(%[[F16]])

// RBF16-LABEL: func.func @f16_step(
// RBF16:      %[[DW:.*]] = "model.backward"
// RBF16-NEXT: %[[D32:.*]] = arith.extf %[[DW]] : tensor<8x4xf16> to tensor<8x4xf32>
// RBF16-NEXT: %[[DB:.*]] = arith.truncf %[[D32]] : tensor<8x4xf32> to tensor<8x4xbf16>
// RBF16-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[DB]]
// RBF16-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[FLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<32xbf16> -> tensor<8xbf16>
// RBF16-NEXT: %[[SLOT:.*]] = tensor.expand_shape %[[RS]] {{.*}} into tensor<2x4xbf16>
// RBF16-NEXT: %[[S32:.*]] = arith.extf %[[SLOT]] : tensor<2x4xbf16> to tensor<2x4xf32>
// RBF16-NEXT: %[[S16:.*]] = arith.truncf %[[S32]] : tensor<2x4xf32> to tensor<2x4xf16>
// RBF16-NEXT: return %{{.*}}, %[[S16]] : tensor<f32>, tensor<2x4xf16>

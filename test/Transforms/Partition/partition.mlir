// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition | FileCheck %s

// Each case is one rank's step: "model.forward" computes the loss (so its
// uses of a parameter are forward uses), "model.backward" computes the
// gradient (backward uses). Parameters become their padded slot, recorded
// with fsdp.global_type; every use reads an fsdp.param_gather; every marked
// gradient goes through fsdp.grad_reduce and becomes the gradient's slot.

// Shard(0), even: 16 rows over 4 ranks, slot 4x8, no padding.
fsdp.mesh @mesh [shard = 4]
func.func @even_shard0(%w: tensor<16x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<16x8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %loss, %dw : tensor<f32>, tensor<16x8xf32>
}
// CHECK-LABEL: func.func @even_shard0(
// CHECK-SAME: %[[W:.*]]: tensor<4x8xf32> {fsdp.global_type = tensor<16x8xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32>)
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<4x8xf32> {fsdp.global_type = tensor<16x8xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>})
// CHECK-NEXT: %[[FW:.*]] = fsdp.param_gather %[[W]] layout <@mesh, [shard<0>]> phase forward : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[LOSS:.*]] = "model.forward"(%[[X]], %[[FW]])
// CHECK-NEXT: %[[BW:.*]] = fsdp.param_gather %[[W]] layout <@mesh, [shard<0>]> phase backward : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[DW:.*]] = "model.backward"(%[[X]], %[[BW]])
// CHECK-NEXT: %[[G:.*]] = fsdp.grad_reduce %[[DW]] layout <@mesh, [shard<0>]> avg : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[G]] : tensor<f32>, tensor<4x8xf32>

// -----

// Shard(0), uneven, ceil (the default): 10 rows over 4 ranks hold 3, 3, 3, 1
// rows in slots of 3.
fsdp.mesh @mesh [shard = 4]
func.func @uneven_ceil(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @uneven_ceil(
// CHECK-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>})
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>]> phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>]> phase backward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<0>]> avg : tensor<10x16xf32> -> tensor<3x16xf32>

// -----

// Shard(0), uneven, balanced: ranks hold 3, 3, 2, 2 rows; the slot is still
// 3 rows and the policy travels with the layout.
fsdp.mesh @mesh [shard = 4]
func.func @uneven_balanced(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @uneven_balanced(
// CHECK-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}
// CHECK-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>], policy = balanced> phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>], policy = balanced> phase backward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<0>], policy = balanced> avg : tensor<10x16xf32> -> tensor<3x16xf32>

// -----

// Shard(1), even: 8 columns over 4 ranks.
fsdp.mesh @mesh [shard = 4]
func.func @even_shard1(%w: tensor<6x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}, %x: tensor<2x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %loss, %dw : tensor<f32>, tensor<6x8xf32>
}
// CHECK-LABEL: func.func @even_shard1(
// CHECK-SAME: tensor<6x2xf32> {fsdp.global_type = tensor<6x8xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}
// CHECK-SAME: tensor<6x2xf32> {fsdp.global_type = tensor<6x8xf32>, fsdp.grad_of = 0 : i64
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<1>]> phase forward : tensor<6x2xf32> -> tensor<6x8xf32>
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<1>]> phase backward : tensor<6x2xf32> -> tensor<6x8xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<1>]> avg : tensor<6x8xf32> -> tensor<6x2xf32>

// -----

// Shard(1), uneven: 10 columns over 4 ranks, slot 6x3.
fsdp.mesh @mesh [shard = 4]
func.func @uneven_shard1(%w: tensor<6x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}, %x: tensor<2x10xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x10xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
  return %loss, %dw : tensor<f32>, tensor<6x10xf32>
}
// CHECK-LABEL: func.func @uneven_shard1(
// CHECK-SAME: tensor<6x3xf32> {fsdp.global_type = tensor<6x10xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}
// CHECK-SAME: tensor<6x3xf32> {fsdp.global_type = tensor<6x10xf32>, fsdp.grad_of = 0 : i64
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<1>]> phase forward : tensor<6x3xf32> -> tensor<6x10xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<1>]> avg : tensor<6x10xf32> -> tensor<6x3xf32>

// -----

// StridedShard(0, 2) on a data-parallel-only mesh: 8 rows over 2 ranks, each
// holding 2 strided pieces of 2 rows.
fsdp.mesh @mesh [shard = 2]
func.func @strided(%w: tensor<8x3xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>]>}, %x: tensor<2x3xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x3xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x3xf32>, tensor<8x3xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  return %loss, %dw : tensor<f32>, tensor<8x3xf32>
}
// CHECK-LABEL: func.func @strided(
// CHECK-SAME: tensor<4x3xf32> {fsdp.global_type = tensor<8x3xf32>, fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>]>}
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [strided_shard<0, 2>]> phase forward : tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [strided_shard<0, 2>]> avg : tensor<8x3xf32> -> tensor<4x3xf32>

// -----

// HSDP: sharded over "shard", replicated over "replicate". The gather only
// involves the shard axis; the reduction carries the 2-D layout (the
// expansion reduce-scatters over "shard", then all-reduces over "replicate").
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @hsdp(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @hsdp(
// CHECK-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}
// CHECK-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [replicate, shard<0>]> phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [replicate, shard<0>]> phase backward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>]> avg : tensor<10x16xf32> -> tensor<3x16xf32>

// -----

// Replicate-only (DDP): the argument keeps its type and gets no
// fsdp.global_type, nothing is gathered, and the gradient is reduced at full
// size.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @replicate_only(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @replicate_only(
// CHECK-SAME: %[[W:.*]]: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>}
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>})
// CHECK-NOT: fsdp.param_gather
// CHECK: "model.forward"(%{{.*}}, %[[W]])
// CHECK: %[[DW:.*]] = "model.backward"(%{{.*}}, %[[W]])
// CHECK-NEXT: fsdp.grad_reduce %[[DW]] layout <@mesh, [replicate, replicate]> avg : tensor<10x16xf32> -> tensor<10x16xf32>

// -----

// Two mesh axes nest on dim 0 (outer first): 16 rows over 2 x 4 ranks.
fsdp.mesh @mesh [outer = 2, inner = 4]
func.func @nested_axes(%w: tensor<16x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<16x4xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x4xf32>, tensor<16x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return %loss, %dw : tensor<f32>, tensor<16x4xf32>
}
// CHECK-LABEL: func.func @nested_axes(
// CHECK-SAME: tensor<2x4xf32> {fsdp.global_type = tensor<16x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>, shard<0>]> phase forward : tensor<2x4xf32> -> tensor<16x4xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<0>, shard<0>]> avg : tensor<16x4xf32> -> tensor<2x4xf32>

// -----

// Two dims sharded by two axes: rows over "a" (2), columns over "b" (4,
// uneven: 10 columns).
fsdp.mesh @mesh [a = 2, b = 4]
func.func @two_dims(%w: tensor<6x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<1>]>}, %x: tensor<2x10xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x10xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
  return %loss, %dw : tensor<f32>, tensor<6x10xf32>
}
// CHECK-LABEL: func.func @two_dims(
// CHECK-SAME: tensor<3x3xf32> {fsdp.global_type = tensor<6x10xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<1>]>}
// CHECK: fsdp.param_gather %arg0 layout <@mesh, [shard<0>, shard<1>]> phase forward : tensor<3x3xf32> -> tensor<6x10xf32>
// CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<0>, shard<1>]> avg : tensor<6x10xf32> -> tensor<3x3xf32>

// -----

// A forward-only function (no fsdp.loss): every use is a forward use, so one
// gather, placed before the first use, and no gradient reduction.
fsdp.mesh @mesh [shard = 4]
func.func @forward_only(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x16xf32>) -> tensor<2x10xf32> {
  %h = "model.layer"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  %y = "model.layer"(%h, %w) : (tensor<2x10xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
// CHECK-LABEL: func.func @forward_only(
// CHECK-SAME: %[[W:.*]]: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}
// CHECK-SAME: -> tensor<2x10xf32> {
// CHECK-NEXT: %[[FULL:.*]] = fsdp.param_gather %[[W]] layout <@mesh, [shard<0>]> phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK-NEXT: %[[H:.*]] = "model.layer"(%{{.*}}, %[[FULL]])
// CHECK-NEXT: "model.layer"(%[[H]], %[[FULL]])
// CHECK-NOT: fsdp.
// CHECK: return

// -----

// Several parameters, each with its own unit and name; a data argument is
// untouched; a parameter with no use is re-typed but never gathered; a
// parameter used only by the backward gets a single "backward" gather.
fsdp.mesh @mesh [shard = 4]
func.func @units(%w0: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "l0.weight", fsdp.unit = "l0"},
                 %x: tensor<2x4xf32> {fsdp.name = "x"},
                 %w1: tensor<6xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "l1.bias", fsdp.unit = "l1"},
                 %unused: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>})
    -> (tensor<f32> {fsdp.loss}, tensor<8x4xf32> {fsdp.grad_of = 0}, tensor<6xf32> {fsdp.grad_of = 2, fsdp.name = "grad.l1.bias"}) {
  %loss = "model.forward"(%x, %w0) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  %dw0 = "model.backward"(%x) : (tensor<2x4xf32>) -> tensor<8x4xf32>
  %dw1 = "model.backward"(%x, %w1) : (tensor<2x4xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x4xf32>, tensor<6xf32>
}
// CHECK-LABEL: func.func @units(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<2x4xf32> {fsdp.global_type = tensor<8x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "l0.weight", fsdp.unit = "l0"}
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {fsdp.name = "x"}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<2xf32> {fsdp.global_type = tensor<6xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "l1.bias", fsdp.unit = "l1"}
// CHECK-SAME: %[[U:[^:]*]]: tensor<1x4xf32> {fsdp.global_type = tensor<4x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<2x4xf32> {fsdp.global_type = tensor<8x4xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, tensor<2xf32> {fsdp.global_type = tensor<6xf32>, fsdp.grad_of = 2 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "grad.l1.bias"})
// CHECK-NOT: fsdp.param_gather %[[U]]
// CHECK: %[[G0:.*]] = fsdp.param_gather %[[W0]] layout <@mesh, [shard<0>]> phase forward {unit = "l0"} : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: "model.forward"(%[[X]], %[[G0]])
// CHECK-NEXT: %[[DW0:.*]] = "model.backward"(%[[X]])
// CHECK-NEXT: %[[G1:.*]] = fsdp.param_gather %[[W1]] layout <@mesh, [shard<0>]> phase backward {unit = "l1"} : tensor<2xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[DW1:.*]] = "model.backward"(%[[X]], %[[G1]])
// CHECK-NEXT: fsdp.grad_reduce %[[DW0]] layout <@mesh, [shard<0>]> avg {unit = "l0"} : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: fsdp.grad_reduce %[[DW1]] layout <@mesh, [shard<0>]> avg {unit = "l1"} : tensor<6xf32> -> tensor<2xf32>
// CHECK-NOT: fsdp.param_gather

// -----

// Functions without layouts are left alone.
func.func @no_parameters(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// CHECK-LABEL: func.func @no_parameters(%arg0: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: return %arg0 : tensor<4xf32>

// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition | FileCheck %s --check-prefix=DEFAULT
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=0.125" | FileCheck %s --check-prefix=SUM
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-op=sum | FileCheck %s --check-prefix=SUMNOSCALE
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=f32 | FileCheck %s --check-prefix=RDT
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reshard-after-forward=false | FileCheck %s --check-prefix=KEEP
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=all-reduce-loss=true | FileCheck %s --check-prefix=LOSS
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=uneven-policy=balanced | FileCheck %s --check-prefix=BALANCED
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=uneven-policy=ceil | FileCheck %s --check-prefix=CEIL

// One HSDP step with a float32 parameter, run under every option.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @step(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}

// Defaults: avg, no casts, forward + backward gather, local loss.
// DEFAULT-LABEL: func.func @step(
// DEFAULT: fsdp.param_gather %arg0 {{.*}} phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// DEFAULT: fsdp.param_gather %arg0 {{.*}} phase backward : tensor<3x16xf32> -> tensor<10x16xf32>
// DEFAULT: %[[G:.*]] = fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>], policy = balanced> avg : tensor<10x16xf32> -> tensor<3x16xf32>
// DEFAULT-NEXT: return %{{[0-9]+}}, %[[G]] :

// reduce-op=sum with a user gradient scale (the scale replaces averaging).
// SUM-LABEL: func.func @step(
// SUM: fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>], policy = balanced> sum {scale = 1.250000e-01 : f64} : tensor<10x16xf32> -> tensor<3x16xf32>
// SUMNOSCALE-LABEL: func.func @step(
// SUMNOSCALE: fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>], policy = balanced> sum : tensor<10x16xf32> -> tensor<3x16xf32>

// param-dtype=bf16: the f32 slot is cast to bf16 before each gather (bf16
// traffic) and the gathered tensor back to f32 for the computation; the
// argument stays the f32 master shard.
// BF16-LABEL: func.func @step(
// BF16-SAME: %[[W:[^:]*]]: tensor<3x16xf32>
// BF16:      %[[T0:.*]] = arith.truncf %[[W]] : tensor<3x16xf32> to tensor<3x16xbf16>
// BF16-NEXT: %[[G0:.*]] = fsdp.param_gather %[[T0]] {{.*}} phase forward : tensor<3x16xbf16> -> tensor<10x16xbf16>
// BF16-NEXT: %[[E0:.*]] = arith.extf %[[G0]] : tensor<10x16xbf16> to tensor<10x16xf32>
// BF16-NEXT: "model.forward"(%{{.*}}, %[[E0]])
// BF16-NEXT: %[[T1:.*]] = arith.truncf %[[W]] : tensor<3x16xf32> to tensor<3x16xbf16>
// BF16-NEXT: %[[G1:.*]] = fsdp.param_gather %[[T1]] {{.*}} phase backward : tensor<3x16xbf16> -> tensor<10x16xbf16>
// BF16-NEXT: %[[E1:.*]] = arith.extf %[[G1]] : tensor<10x16xbf16> to tensor<10x16xf32>
// BF16-NEXT: "model.backward"(%{{.*}}, %[[E1]])
// BF16-NEXT: fsdp.grad_reduce %{{.*}} avg : tensor<10x16xf32> -> tensor<3x16xf32>

// reduce-dtype: recorded on the reduction, expanded later.
// RDT-LABEL: func.func @step(
// RDT: fsdp.grad_reduce %{{.*}} avg {reduce_dtype = f32} : tensor<10x16xf32> -> tensor<3x16xf32>

// reshard-after-forward=false: a single gather, before the first use.
// KEEP-LABEL: func.func @step(
// KEEP-NEXT: %[[G:.*]] = fsdp.param_gather %arg0 {{.*}} phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
// KEEP-NEXT: "model.forward"(%arg1, %[[G]])
// KEEP-NEXT: "model.backward"(%arg1, %[[G]])
// KEEP-NOT: fsdp.param_gather
// KEEP: return

// all-reduce-loss: the loss becomes the mean over every rank of the mesh.
// LOSS-LABEL: func.func @step(
// LOSS: %[[L:.*]] = "model.forward"
// LOSS: %[[R:.*]] = fsdp.all_reduce %[[L]] over @mesh ["replicate", "shard"] avg : tensor<f32> -> tensor<f32>
// LOSS-NEXT: return %[[R]], %{{.*}} : tensor<f32>, tensor<3x16xf32>

// uneven-policy overrides the layout's own policy everywhere it is recorded.
// BALANCED-LABEL: func.func @step(
// BALANCED-SAME: fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>
// CEIL-LABEL: func.func @step(
// CEIL-SAME: %arg0: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}
// CEIL-SAME: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}
// CEIL: fsdp.param_gather %arg0 layout <@mesh, [replicate, shard<0>]> phase forward
// CEIL: fsdp.param_gather %arg0 layout <@mesh, [replicate, shard<0>]> phase backward
// CEIL: fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>]> avg

// -----

// A ceil layout overridden to balanced.
fsdp.mesh @mesh [shard = 4]
func.func @ceil_layout(%w: tensor<10xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<f32> {fsdp.loss}, tensor<10xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<10xf32>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<10xf32>) -> tensor<10xf32>
  return %loss, %dw : tensor<f32>, tensor<10xf32>
}
// BALANCED-LABEL: func.func @ceil_layout(
// BALANCED-SAME: %arg0: tensor<3xf32> {fsdp.global_type = tensor<10xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}
// BALANCED-SAME: tensor<3xf32> {fsdp.global_type = tensor<10xf32>, fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}
// BALANCED: fsdp.param_gather %arg0 layout <@mesh, [shard<0>], policy = balanced> phase forward
// BALANCED: fsdp.param_gather %arg0 layout <@mesh, [shard<0>], policy = balanced> phase backward
// BALANCED: fsdp.grad_reduce %{{.*}} layout <@mesh, [shard<0>], policy = balanced> avg
// CEIL-LABEL: func.func @ceil_layout(
// CEIL-SAME: fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}

// -----

// param-dtype casts floating-point parameters only; an integer parameter is
// gathered as it is.
fsdp.mesh @mesh [shard = 4]
func.func @int_param(%w: tensor<8xi32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> tensor<8xi32> {
  %y = "model.forward"(%w) : (tensor<8xi32>) -> tensor<8xi32>
  return %y : tensor<8xi32>
}
// BF16-LABEL: func.func @int_param(
// BF16-NOT: arith.truncf
// BF16: fsdp.param_gather %arg0 layout <@mesh, [shard<0>]> phase forward : tensor<2xi32> -> tensor<8xi32>
// BF16-NOT: arith.extf
// BF16: return

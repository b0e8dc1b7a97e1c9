// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="optimizer=adamw max-grad-norm=1.0" | FileCheck %s
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="optimizer=sgd bucket=none schedule=false" | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline | FileCheck %s --check-prefix=NONE

// In the pipeline the update follows the schedule: every gradient
// reduction is waited on first, then the clipping all-reduce (not bucketed
// or scheduled: it has no fsdp.origin) and the updates run on the local
// slots before the step returns.
fsdp.mesh @mesh [replicate = 2, shard = 2]
func.func @step(%w0: tensor<6x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w0", fsdp.unit = "l0"},
                %w1: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>, fsdp.name = "w1", fsdp.unit = "l1"},
                %x: tensor<2x4xf32> {fsdp.name = "x"})
    -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
        tensor<6x4xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.w0"},
        tensor<4x4xf32> {fsdp.grad_of = 1 : i64, fsdp.name = "grad.w1"}) {
  %loss = "model.forward"(%x, %w0, %w1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  %d1 = "model.backward_w1"(%x, %w0, %w1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d0 = "model.backward_w0"(%x, %w0, %w1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  return %loss, %d0, %d1 : tensor<f32>, tensor<6x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @step(
// CHECK: fsdp.reduce_scatter_start
// CHECK: fsdp.reduce_scatter_start
// CHECK: fsdp.wait
// CHECK: fsdp.wait
// CHECK: fsdp.wait
// CHECK: fsdp.wait
// CHECK-NOT: fsdp.wait
// CHECK-NOT: _start
// CHECK: fsdp.all_reduce %{{.*}} over @mesh ["shard"] sum : tensor<1xf64> -> tensor<1xf64>
// CHECK-NOT: fsdp.all_reduce
// CHECK: linalg.generic {{.*}} ins(%arg0, %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%arg1, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK: return

// PLAIN-LABEL: func.func @step(
// PLAIN-NOT: fsdp.wait
// PLAIN: fsdp.reduce_scatter
// PLAIN: fsdp.all_reduce
// PLAIN: fsdp.reduce_scatter
// PLAIN: fsdp.all_reduce
// PLAIN: linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<3x4xf32>, tensor<3x4xf32>)
// PLAIN: linalg.generic {{.*}} ins(%arg1, %{{.*}} : tensor<4x2xf32>, tensor<4x2xf32>)
// PLAIN: return

// optimizer=none (the default): the program of before, gradients returned.
// NONE-LABEL: func.func @step(
// NONE-NOT: fsdp.optim
// NONE-SAME: fsdp.grad_of = 0
// NONE-NOT: linalg.generic
// NONE: return

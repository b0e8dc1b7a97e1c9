// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-import-shard | FileCheck %s
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-import-shard --fsdp-partition | FileCheck %s --check-prefix=PART
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="optimizer=adamw" | FileCheck %s --check-prefix=ADAM

// A frozen parameter written with upstream shard annotations (LoRA's base
// weight %w0 beside its trainable adapter %w1): fsdp.frozen says that the
// annotated %w0, which no result is the gradient of, is a parameter and not
// a sharded data argument. It gets its layout like %w1, is gathered in the
// unit's bucket, and has no gradient reduction, no optimizer state and no
// update.

// CHECK: fsdp.mesh @grid [a0 = 2]
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %arg0: tensor<6x4xf32> {fsdp.frozen, fsdp.layout = #fsdp.layout<@grid, [shard<0>]>, fsdp.name = "w0", fsdp.unit = "l0"}
// CHECK-SAME: %arg1: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@grid, [shard<0>]>, fsdp.name = "w1", fsdp.unit = "l0"}
// CHECK-SAME: %arg2: tensor<2x4xf32> {fsdp.name = "x"})
// CHECK-NOT: shard.

// PART-LABEL: func.func @step(
// PART-SAME: %[[W0:.*]]: tensor<3x4xf32> {fsdp.frozen, fsdp.global_type = tensor<6x4xf32>
// PART: fsdp.param_gather %[[W0]] {{.*}} phase forward
// PART: fsdp.grad_reduce {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// PART-NOT: fsdp.grad_reduce
// PART: return

// ADAM-LABEL: func.func @step(
// ADAM-NOT: fsdp.state_of = 0
// ADAM-SAME: fsdp.name = "exp_avg.w1", fsdp.state_of = 1 : i64
// ADAM-NOT: fsdp.state_of = 0
// ADAM-NOT: fsdp.update_of = 0
// ADAM-SAME: fsdp.name = "w1", fsdp.update_of = 1 : i64
// ADAM-NOT: fsdp.update_of = 0
// ADAM-SAME: {
shard.grid @grid(shape = 2)
func.func @step(%w0: tensor<6x4xf32> {fsdp.frozen, fsdp.name = "w0", fsdp.unit = "l0"},
                %w1: tensor<4x4xf32> {fsdp.name = "w1", fsdp.unit = "l0"},
                %x: tensor<2x4xf32> {fsdp.name = "x"})
    -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
        tensor<4x4xf32> {fsdp.grad_of = 1 : i64, fsdp.name = "grad.w1"}) {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a0 = shard.shard %w0 to %s annotate_for_users : tensor<6x4xf32>
  %a1 = shard.shard %w1 to %s annotate_for_users : tensor<4x4xf32>
  %loss = "model.forward"(%x, %a0, %a1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  %d1 = "model.backward_w1"(%x, %a0, %a1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %loss, %d1 : tensor<f32>, tensor<4x4xf32>
}

// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-partition | FileCheck %s --check-prefix=PART
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="optimizer=adamw" | FileCheck %s
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="optimizer=adamw" --fsdp-comm-report -o /dev/null | FileCheck %s --check-prefix=COMM

// A frozen parameter (FSDP2's requires_grad=False; LoRA's base weights):
// %w0 has a layout and a unit but no result is its gradient. It is sharded
// and gathered like %w1 (one gather bucket carries both, in the forward and
// again in the backward), but it has no fsdp.grad_reduce, so the gradient
// bucket (the reduce-scatter) carries %w1's 16 elements only, and the
// optimizer gives it no update and no state.
fsdp.mesh @mesh [shard = 2]
func.func @step(%w0: tensor<6x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w0", fsdp.unit = "l0"},
                %w1: tensor<4x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w1", fsdp.unit = "l0"},
                %x: tensor<2x4xf32> {fsdp.name = "x"})
    -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
        tensor<4x4xf32> {fsdp.grad_of = 1 : i64, fsdp.name = "grad.w1"}) {
  %loss = "model.forward"(%x, %w0, %w1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  %d1 = "model.backward_w1"(%x, %w0, %w1) : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %loss, %d1 : tensor<f32>, tensor<4x4xf32>
}

// PART-LABEL: func.func @step(
// PART-SAME: %[[W0:.*]]: tensor<3x4xf32> {fsdp.global_type = tensor<6x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w0", fsdp.unit = "l0"}
// PART-SAME: -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"}, tensor<2x4xf32> {{{.*}}fsdp.grad_of = 1 : i64{{.*}}})
// PART: fsdp.param_gather %[[W0]] {{.*}} phase forward
// PART: fsdp.param_gather %[[W0]] {{.*}} phase backward
// PART: fsdp.grad_reduce {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// PART-NOT: fsdp.grad_reduce
// PART: return

// CHECK-LABEL: func.func @step(
// Optimizer state for w1 (argument #1) only; w0 is not updated.
// CHECK-NOT: fsdp.state_of = 0
// CHECK-SAME: fsdp.name = "exp_avg.w1", fsdp.state_of = 1 : i64
// CHECK-SAME: fsdp.name = "exp_avg_sq.w1", fsdp.state_of = 1 : i64
// CHECK-NOT: fsdp.state_of = 0
// CHECK-NOT: fsdp.update_of = 0
// CHECK-SAME: fsdp.name = "w1", fsdp.update_of = 1 : i64
// CHECK-NOT: fsdp.update_of = 0
// CHECK-SAME: {
// CHECK: %[[FWD:.*]] = tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<12xf32>, tensor<8xf32>) -> tensor<20xf32>
// CHECK: fsdp.all_gather_start %[[FWD]] {{.*}}phase = forward, unit = "l0"{{.*}} : tensor<20xf32> -> tensor<40xf32>
// CHECK: %[[BWD:.*]] = tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<12xf32>, tensor<8xf32>) -> tensor<20xf32>
// CHECK: fsdp.all_gather_start %[[BWD]] {{.*}}phase = backward, unit = "l0"{{.*}} : tensor<20xf32> -> tensor<40xf32>
// CHECK: fsdp.reduce_scatter_start {{.*}} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NOT: fsdp.reduce_scatter
// CHECK: return

// COMM: every rank: 3 collectives (all_gather 2, reduce_scatter 1, all_reduce 0)
// COMM: all_gather: 2, sent 160 B, received 320 B
// COMM: reduce_scatter: 1, sent 64 B, received 32 B

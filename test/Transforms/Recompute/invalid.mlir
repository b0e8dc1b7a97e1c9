// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-recompute=units=a -verify-diagnostics

// Without a loss there is no forward to recompute.

fsdp.mesh @mesh [shard = 2]

// expected-error@+1 {{fsdp-recompute needs a result marked fsdp.loss to tell the forward (what the loss depends on) from the backward}}
func.func @no_loss(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "a"},
                   %x: tensor<4xf32>) -> tensor<4xf32> {
  %h = arith.mulf %x, %w : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// An op with memory effects (or unknown ones) is not recomputed.

fsdp.mesh @mesh [shard = 2]

func.func @effects(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "a"},
                   %x: tensor<4xf32>) -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.grad_of = 0 : i64}) {
  // expected-error@+1 {{fsdp-recompute cannot recompute this op of unit 'a': it has memory effects (or unknown ones)}}
  %h = "test.random"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = arith.constant 0 : index
  %e = tensor.extract %h[%c] : tensor<4xf32>
  %l = tensor.from_elements %e : tensor<f32>
  %g = arith.mulf %h, %x : tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// Two blocks: the body must be one block.

fsdp.mesh @mesh [shard = 2]

// expected-error@+1 {{fsdp-recompute needs a function body with a single block (use structured control flow); this one has 2 blocks}}
func.func @blocks(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "a"},
                  %x: tensor<f32>) -> (tensor<f32> {fsdp.loss}) {
  cf.br ^bb1
^bb1:
  return %x : tensor<f32>
}

// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition -verify-diagnostics

// Inputs that break the contract of fsdp-partition. Some are caught when the
// function is verified (before any pass runs), the rest by the pass; either
// way the message names the offending argument or result.

fsdp.mesh @mesh [shard = 4]
func.func @parameter_returned(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> tensor<8x4xf32> {
  // expected-error @+1 {{parameter argument #0 is returned directly; return a computed value}}
  return %w : tensor<8x4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #1 is marked as the gradient of argument #2, but the function has 2 argument(s)}}
func.func @grad_of_missing_argument(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<8x4xf32> {fsdp.grad_of = 2}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dw : tensor<f32>, tensor<8x4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #1 is the gradient of argument #0 and must have its type 'tensor<8x4xf32>', got 'tensor<4x8xf32>'}}
func.func @grad_wrong_shape(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<4x8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %loss, %dw : tensor<f32>, tensor<4x8xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 is marked as the gradient of argument #1, which has no fsdp.layout (not a parameter)}}
func.func @grad_of_data(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<2x4xf32> {fsdp.grad_of = 1}) {
  %dx = "model.backward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %dx : tensor<2x4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{the loss (result #0) must be a scalar, got 'tensor<2xf32>'}}
func.func @loss_not_scalar(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<2xf32> {fsdp.loss}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2xf32>
  return %loss : tensor<2xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{more than one result is marked fsdp.loss}}
func.func @two_losses(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x4xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.loss}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  %aux = "model.forward"(%x) : (tensor<2x4xf32>) -> tensor<f32>
  return %loss, %aux : tensor<f32>, tensor<f32>
}

// -----

// The mesh lives in a nested module: the function cannot see it.
module {
  module @devices {
    fsdp.mesh @hidden [shard = 4]
  }
  // expected-error @+1 {{argument #0 refers to unknown mesh @hidden (no fsdp.mesh with that name is visible)}}
  func.func @invisible_mesh(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@hidden, [shard<0>]>}) -> tensor<8x4xf32> {
    %y = "model.forward"(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

fsdp.mesh @dp [shard = 4]
fsdp.mesh @other [shard = 2]
// expected-error @+1 {{all parameters of a step must use one mesh; argument #1 uses @other but an earlier one uses @dp}}
func.func @two_meshes(%w0: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@dp, [shard<0>]>},
                      %w1: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@other, [shard<0>]>}) -> tensor<8x4xf32> {
  %y = "model.forward"(%w0, %w1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// The output of fsdp-partition is not a valid input: its parameters already
// hold shards.
fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 is already partitioned (it has fsdp.global_type)}}
func.func @already_partitioned(%w: tensor<2x4xf32> {fsdp.global_type = tensor<8x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> tensor<8x4xf32> {
  %full = fsdp.param_gather %w layout <@mesh, [shard<0>]> phase forward : tensor<2x4xf32> -> tensor<8x4xf32>
  return %full : tensor<8x4xf32>
}

// -----

// Gathers are placed in block order: unstructured control flow is refused.
fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-partition needs a function body with a single block (use structured control flow); this one has 2 blocks}}
func.func @multi_block(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> tensor<8x4xf32> {
  cf.br ^next
^next:
  %y = "model.forward"(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 has an invalid layout #fsdp.layout<@mesh, [shard<0>, shard<1>]>: layout has 2 placement(s) but its mesh has 1 axis/axes}}
func.func @layout_mesh_mismatch(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<1>]>}) -> tensor<8x4xf32> {
  %y = "model.forward"(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Partitioning changes the step's signature: it must be an entry point.
fsdp.mesh @mesh [shard = 4]
// expected-note @+1 {{the step is defined here}}
func.func @step(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> tensor<8x4xf32> {
  %y = "model.forward"(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
func.func @caller(%w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'func.call' op refers to @step, a step with fsdp.layout parameters; fsdp-partition changes its signature, so it must not be called or referenced}}
  %y = func.call @step(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A global tensor-parallel step goes through fsdp-tensor-parallel first.
fsdp.mesh @mesh [dp = 2, tp = 2]
// expected-error @+1 {{argument #0 has the tensor-parallel layout #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]> on its global type; run fsdp-tensor-parallel first}}
func.func @tp_global(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}) -> tensor<8x8xf32> {
  return %w : tensor<8x8xf32>
}

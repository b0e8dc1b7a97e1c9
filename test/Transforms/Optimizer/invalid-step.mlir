// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-optimizer -verify-diagnostics

// Inputs that are not a partitioned step (fsdp-optimizer runs after
// fsdp-partition), or that already have an optimizer step.

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: result #0 (the gradient of argument #0) is not a reduced gradient slot (no fsdp.layout); run fsdp-partition before fsdp-optimizer}}
func.func @unpartitioned(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<8xf32> {fsdp.grad_of = 0}) {
  %dw = "model.backward"(%w) : (tensor<8xf32>) -> tensor<8xf32>
  return %dw : tensor<8xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: @twice already has an optimizer step (argument #1 is an optimizer input)}}
func.func @twice(%w: tensor<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<8xf32>},
                 %lr: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.optim = "lr", fsdp.name = "lr"})
    -> (tensor<2xf32> {fsdp.grad_of = 0, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<8xf32>}) {
  %dw = "model.backward"(%w, %lr) : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  return %dw : tensor<2xf32>
}

// -----

// A gradient whose type differs from its parameter's is rejected by the
// verifier before the pass runs.
fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 is the gradient of argument #0 and must have its type 'tensor<2xf32>', got 'tensor<2xbf16>'}}
func.func @gradient_type(%w: tensor<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<8xf32>})
    -> (tensor<2xbf16> {fsdp.grad_of = 0, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<8xbf16>}) {
  %dw = "model.backward"(%w) : (tensor<2xf32>) -> tensor<2xbf16>
  return %dw : tensor<2xbf16>
}

// -----

// A gradient slot whose parameter has no layout (an upstream shard
// annotation not yet imported).
fsdp.mesh @mesh [shard = 4]
shard.grid @grid(shape = 4)
// expected-error @+1 {{fsdp-optimizer: parameter argument #0 has no fsdp.layout; run fsdp-import-shard and fsdp-partition before fsdp-optimizer}}
func.func @annotated(%w: tensor<2xf32>) -> (tensor<2xf32> {fsdp.grad_of = 0, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<8xf32>}) {
  %sharding = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %s = shard.shard %w to %sharding annotate_for_users : tensor<2xf32>
  %dw = "model.backward"(%s) : (tensor<2xf32>) -> tensor<2xf32>
  return %dw : tensor<2xf32>
}

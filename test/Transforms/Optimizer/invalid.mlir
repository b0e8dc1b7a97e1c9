// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer -verify-diagnostics
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="optimizer=adamw max-grad-norm=1.0" -verify-diagnostics

// Steps the optimizer cannot update: each is reported on the function (or
// the module) with what is missing, and the pass fails.

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: @forward_only has parameters (fsdp.layout arguments) but no fsdp.grad_of results; the optimizer updates parameters by their gradients}}
func.func @forward_only(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<f32> {fsdp.loss}) {
  %loss = "model.forward"(%w) : (tensor<8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{fsdp-optimizer: no function has fsdp.grad_of results; the optimizer needs a training step that returns its gradients}}
module {
  func.func @not_a_step(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: parameter argument #0 has type 'tensor<2xi32>'; the optimizer updates floating-point tensors}}
func.func @integer_parameter(%w: tensor<8xi32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<8xi32> {fsdp.grad_of = 0}) {
  %dw = "model.backward"(%w) : (tensor<8xi32>) -> tensor<8xi32>
  return %dw : tensor<8xi32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: @data_named_lr already has an argument named "lr"; the optimizer step adds one of that name}}
func.func @data_named_lr(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"}, %x: tensor<2xf32> {fsdp.name = "lr"}) -> (tensor<8xf32> {fsdp.grad_of = 0, fsdp.name = "grad.w"}) {
  %dw = "model.backward"(%w, %x) : (tensor<8xf32>, tensor<2xf32>) -> tensor<8xf32>
  return %dw : tensor<8xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: @result_named_step already has a result named "step"; the optimizer step adds one of that name}}
func.func @result_named_step(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"}) -> (tensor<8xf32> {fsdp.grad_of = 0, fsdp.name = "grad.w"}, tensor<f32> {fsdp.name = "step"}) {
  %dw = "model.backward"(%w) : (tensor<8xf32>) -> tensor<8xf32>
  %s = "model.count"() : () -> tensor<f32>
  return %dw, %s : tensor<8xf32>, tensor<f32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{fsdp-optimizer: results #0 and #1 are both the gradient of argument #0; a parameter takes one update}}
func.func @two_gradients(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"}) -> (tensor<8xf32> {fsdp.grad_of = 0, fsdp.name = "a"}, tensor<8xf32> {fsdp.grad_of = 0, fsdp.name = "b"}) {
  %dw = "model.backward"(%w) : (tensor<8xf32>) -> tensor<8xf32>
  return %dw, %dw : tensor<8xf32>, tensor<8xf32>
}

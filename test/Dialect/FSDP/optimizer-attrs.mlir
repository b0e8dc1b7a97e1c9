// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The attributes of an optimizer step (docs/SEMANTICS.md §5.5): fsdp.optim
// on lr and step, fsdp.state_of on state arguments, fsdp.update_of on the
// results a training loop feeds back.

fsdp.mesh @mesh [shard = 2]
func.func @valid(%w: tensor<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "w"},
                 %lr: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.name = "lr", fsdp.optim = "lr"},
                 %step: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.name = "step", fsdp.optim = "step"},
                 %m: tensor<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "momentum_buffer.w", fsdp.state_of = 0 : i64})
    -> (tensor<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "w", fsdp.update_of = 0 : i64},
        tensor<f32> {fsdp.name = "step", fsdp.update_of = 2 : i64}) {
  return %m, %step : tensor<2xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.optim' on argument #0 must be "lr" or "step"}}
func.func @bad_role(%lr: tensor<f32> {fsdp.optim = "momentum"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.state_of' on argument #0 must be an integer argument index}}
func.func @state_of_not_integer(%m: tensor<2xf32> {fsdp.state_of = "w"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.state_of' on argument #0 refers to argument #3, but the function has 1 argument(s)}}
func.func @state_of_out_of_range(%m: tensor<2xf32> {fsdp.state_of = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.state_of' on argument #1 refers to argument #0, which has no fsdp.layout (not a parameter)}}
func.func @state_of_data(%x: tensor<2xf32>, %m: tensor<2xf32> {fsdp.state_of = 0 : i64}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 2]
// expected-error @+1 {{'func.func' op 'fsdp.state_of' on argument #1 refers to argument #0 and must have its type 'tensor<4xf32>', got 'tensor<2xf32>'}}
func.func @state_of_wrong_type(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %m: tensor<2xf32> {fsdp.state_of = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.update_of' on result #0 refers to argument #1, but the function has 1 argument(s)}}
func.func @update_of_out_of_range(%x: tensor<2xf32>) -> (tensor<2xf32> {fsdp.update_of = 1 : i64}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'fsdp.update_of' on result #0 refers to argument #0 and must have its type 'tensor<2xf32>', got 'tensor<3xf32>'}}
func.func @update_of_wrong_type(%x: tensor<2xf32>, %y: tensor<3xf32>) -> (tensor<3xf32> {fsdp.update_of = 0 : i64}) {
  return %y : tensor<3xf32>
}

// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// Every rule of #fsdp.port, #fsdp.signature and the module attribute
// fsdp.signatures, each with its own message.

// expected-error @+1 {{port name "../x" is unsafe; a name must be a file stem: not empty, no '/', '\' or '..', no leading '.', no control characters}}
func.func @f() attributes {p = #fsdp.port<"../x" : tensor<2xf32>>} {
  return
}

// -----

// expected-error @+1 {{a port starts with its name, a string}}
func.func @f() attributes {p = #fsdp.port<5 : tensor<2xf32>>} {
  return
}

// -----

// expected-error @+1 {{port name "" is unsafe}}
func.func @f() attributes {p = #fsdp.port<"" : tensor<2xf32>>} {
  return
}

// -----

// expected-error @+1 {{port "x": its type must be a tensor of static shape, got 'tensor<?xf32>'}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<?xf32>>} {
  return
}

// -----

// expected-error @+1 {{port "x": its type must be a ranked tensor, got 'tensor<*xf32>'}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<*xf32>>} {
  return
}

// -----

// expected-error @+1 {{port "x": the element type of its type 'tensor<2xcomplex<f32>>' is not supported (f16, bf16, f32, f64, 8-bit, i32, i64)}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<2xcomplex<f32>>>} {
  return
}

// -----

// expected-error @+1 {{port "x": global_type 'tensor<4xf32>' differs from type 'tensor<2xf32>' without a layout}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<2xf32>, global_type = tensor<4xf32>>} {
  return
}

// -----

// expected-error @+1 {{port "x": global_type 'tensor<4x2xf32>' and type 'tensor<2xf32>' differ in element type or rank}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<2xf32>, global_type = tensor<4x2xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>} {
  return
}

// -----

// expected-error @+1 {{port "x": update_of must be a non-negative argument index, got -1}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<2xf32>, update_of = -1>} {
  return
}

// -----

// expected-error @+1 {{port "x": the loss must be a scalar, got 'tensor<2xf32>'}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<2xf32>, loss>} {
  return
}

// -----

// expected-error @+1 {{a port's role is 'lr' or 'step', got 'momentum'}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<f32>, role = momentum>} {
  return
}

// -----

// expected-error @+1 {{unknown port field 'grad_of' (expected global_type, layout, update_of, state_of, role or loss)}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<f32>, grad_of = 0>} {
  return
}

// -----

// expected-error @+1 {{port field 'loss' is given twice}}
func.func @f() attributes {p = #fsdp.port<"x" : tensor<f32>, loss, loss>} {
  return
}

// -----

// expected-error @+1 {{argument #1 is named "w" like argument #0; names must be unique}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>, <"w" : tensor<2xf32>>], results = []>} {
  return
}

// -----

// expected-error @+1 {{result #0 ("x"): state_of and role are for arguments}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>], results = [<"x" : tensor<2xf32>, state_of = 0>]>} {
  return
}

// -----

// expected-error @+1 {{argument #0 ("w"): update_of and loss are for results}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<f32>, loss>], results = []>} {
  return
}

// -----

// expected-error @+1 {{result #0 ("w") refers to argument #1, but there are 1 argument(s)}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>], results = [<"w" : tensor<2xf32>, update_of = 1>]>} {
  return
}

// -----

// expected-error @+1 {{result #0 ("w") refers to argument #0 and must have its type 'tensor<2xf32>', got 'tensor<3xf32>'}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>], results = [<"w" : tensor<3xf32>, update_of = 0>]>} {
  return
}

// -----

// expected-error @+1 {{argument #1 ("m") refers to argument #0 and must have its type 'tensor<2xf32>', got 'tensor<2xf16>'}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>, <"m" : tensor<2xf16>, state_of = 0>], results = []>} {
  return
}

// -----

// expected-error @+1 {{result #1 ("w2") updates argument #0, which result #0 already updates}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>>], results = [<"w" : tensor<2xf32>, update_of = 0>, <"w2" : tensor<2xf32>, update_of = 0>]>} {
  return
}

// -----

// expected-error @+1 {{result #0 ("w") updates argument #0 ("w") but differs from it in global type or layout}}
func.func @f() attributes {s = #fsdp.signature<args = [<"w" : tensor<2xf32>, layout = #fsdp.layout<@mesh, [replicate]>>], results = [<"w" : tensor<2xf32>, update_of = 0>]>} {
  return
}

// -----

// The module attribute: a dictionary of signatures whose layouts fit their
// meshes.

// expected-error @+1 {{'builtin.module' op 'fsdp.signatures' must be a dictionary of #fsdp.signature}}
module attributes {fsdp.signatures = [1]} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'fsdp.signatures': entry 'step' must be a #fsdp.signature<args = [...], results = [...]>}}
module attributes {fsdp.signatures = {step = {args = []}}} {
}

// -----

// expected-error @+1 {{'fsdp.signatures': entry 'step', argument #0 ("w"): its layout refers to unknown mesh @nope}}
module attributes {fsdp.signatures = {step = #fsdp.signature<args = [<"w" : tensor<3xf32>, global_type = tensor<10xf32>, layout = #fsdp.layout<@nope, [shard<0>]>>], results = []>}} {
  fsdp.mesh @mesh [shard = 4]
}

// -----

// expected-error @+1 {{'fsdp.signatures': entry 'step', result #0 ("g"): its type 'tensor<4xf32>' is not the slot of its global_type 'tensor<10xf32>' under #fsdp.layout<@mesh, [shard<0>]>}}
module attributes {fsdp.signatures = {step = #fsdp.signature<args = [], results = [<"g" : tensor<4xf32>, global_type = tensor<10xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>]>}} {
  fsdp.mesh @mesh [shard = 4]
}

// -----

// expected-error @+1 {{'fsdp.signatures': entry 'step', argument #0 ("w"): its layout #fsdp.layout<@mesh, [shard<1>]> is invalid for 'tensor<10xf32>'}}
module attributes {fsdp.signatures = {step = #fsdp.signature<args = [<"w" : tensor<3xf32>, global_type = tensor<10xf32>, layout = #fsdp.layout<@mesh, [shard<1>]>>], results = []>}} {
  fsdp.mesh @mesh [shard = 4]
}

// RUN: fsdp-opt %s -split-input-file --fsdp-expand-collectives -verify-diagnostics

// fsdp-expand-collectives takes fsdp.param_gather / fsdp.grad_reduce as
// fsdp-partition writes them, or as written by hand. Ill-formed ones are
// rejected when the module is verified; the rest are rejected by the pass
// with the op's location instead of producing invalid IR.

fsdp.mesh @mesh [shard = 4]
func.func @reduce_dtype_on_integer_gradient(%g: tensor<8x4xi32>) -> tensor<2x4xi32> {
  // expected-error @+1 {{'fsdp.grad_reduce' op reduce_dtype 'f32' needs a floating-point gradient and reduce type, got 'i32'}}
  %0 = fsdp.grad_reduce %g layout <@mesh, [shard<0>]> sum {reduce_dtype = f32} : tensor<8x4xi32> -> tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @integer_reduce_dtype(%g: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'fsdp.grad_reduce' op reduce_dtype 'i32' needs a floating-point gradient and reduce type, got 'f32'}}
  %0 = fsdp.grad_reduce %g layout <@mesh, [shard<0>]> avg {reduce_dtype = i32} : tensor<8x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @scale_on_integer_gradient(%g: tensor<8x4xi32>) -> tensor<2x4xi32> {
  // expected-error @+1 {{'fsdp.grad_reduce' op a gradient scale needs a floating-point gradient, got 'i32'}}
  %0 = fsdp.grad_reduce %g layout <@mesh, [shard<0>]> sum {scale = 0.5 : f64} : tensor<8x4xi32> -> tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @gather_wrong_slot(%s: tensor<2x16xf32>) -> tensor<10x16xf32> {
  // expected-error @+1 {{shard must have the padded slot type 'tensor<3x16xf32>' for a full tensor of type 'tensor<10x16xf32>', got 'tensor<2x16xf32>'}}
  %0 = fsdp.param_gather %s layout <@mesh, [shard<0>]> phase forward : tensor<2x16xf32> -> tensor<10x16xf32>
  return %0 : tensor<10x16xf32>
}

// -----

func.func @gather_unknown_mesh(%s: tensor<3x16xf32>) -> tensor<10x16xf32> {
  // expected-error @+1 {{refers to unknown mesh @nowhere}}
  %0 = fsdp.param_gather %s layout <@nowhere, [shard<0>]> phase forward : tensor<3x16xf32> -> tensor<10x16xf32>
  return %0 : tensor<10x16xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @reduce_wrong_slot(%g: tensor<10x16xf32>) -> tensor<10x16xf32> {
  // expected-error @+1 {{result must have the padded slot type 'tensor<3x16xf32>', got 'tensor<10x16xf32>'}}
  %0 = fsdp.grad_reduce %g layout <@mesh, [shard<0>]> avg : tensor<10x16xf32> -> tensor<10x16xf32>
  return %0 : tensor<10x16xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @strided_not_divisible(%s: tensor<3x4xf32>) -> tensor<12x4xf32> {
  // expected-error @+1 {{has an invalid layout: StridedShard(0, 2) on mesh axis 0 needs dim 0 (size 12) to be divisible by split_factor * axis size = 8}}
  %0 = fsdp.param_gather %s layout <@mesh, [strided_shard<0, 2>]> phase forward : tensor<3x4xf32> -> tensor<12x4xf32>
  return %0 : tensor<12x4xf32>
}

// Sizes, counts and element types the verifier refuses (docs/PASSES.md,
// "Limits"), and unsafe or duplicate names. Each was a crash, a hang or a
// file written outside the output directory before it was checked.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --allow-unregistered-dialect

// Split factor beyond the limit: its product with the axis size overflowed
// and divided by zero while parsing.
fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{strided_shard split factor must be between 1 and 1048576, got 4611686018427387904}}
func.func @split_factor_overflow(%w: tensor<16x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 4611686018427387904>]>}) {
  return
}

// -----

// 2^40 ranks: expansion, the reports and the runner would loop or allocate
// per rank.
// expected-error @+1 {{a mesh has at most 1048576 ranks}}
fsdp.mesh @mesh [shard = 1099511627776]

// -----

// expected-error @+1 {{a mesh has at most 1048576 ranks}}
fsdp.mesh @mesh [a = 4611686018427387904, b = 4]

// -----

// More axes than the runtime supports (and than a 64-bit axis mask holds).
// expected-error @+1 {{a mesh has at most 8 axes, got 9}}
fsdp.mesh @mesh [a0 = 1, a1 = 1, a2 = 1, a3 = 1, a4 = 1, a5 = 1, a6 = 1, a7 = 1, a8 = 1]

// -----

fsdp.mesh @mesh [a0 = 1, a1 = 1, a2 = 1, a3 = 1, a4 = 1, a5 = 1, a6 = 1, a7 = 2]
func.func @eight_axes_are_fine(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate, replicate, replicate, replicate, replicate, replicate, shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 with a layout must have integer or float elements, got 'complex<f32>'}}
func.func @complex_layout(%w: tensor<8xcomplex<f32>> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 with a layout must have integer or float elements, got 'index'}}
func.func @index_layout(%w: tensor<8xindex> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 with a layout must have integer or float elements, got 'vector<2xf32>'}}
func.func @vector_layout(%w: tensor<8xvector<2xf32>> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 with a layout must have integer or float elements, got 'index'}}
func.func @index_result_layout() -> (tensor<8xindex> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  %0 = "test.make"() : () -> tensor<8xindex>
  return %0 : tensor<8xindex>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @index_gather(%s: tensor<2xindex>) -> tensor<8xindex> {
  // expected-error @+1 {{needs integer or float elements, got 'index'}}
  %0 = fsdp.param_gather %s layout <@mesh, [shard<0>]> phase forward : tensor<2xindex> -> tensor<8xindex>
  return %0 : tensor<8xindex>
}

// -----

// expected-error @+1 {{'fsdp.name' on argument #0 is "../ESCAPED"; a name must be a file stem: not empty, no '/', '\' or '..', no leading '.'}}
func.func @name_traversal(%x: tensor<4xf32> {fsdp.name = "../ESCAPED"}) {
  return
}

// -----

// expected-error @+1 {{'fsdp.name' on result #0 is "out/loss"}}
func.func @name_with_slash(%x: tensor<4xf32>) -> (tensor<4xf32> {fsdp.name = "out/loss"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'fsdp.name' on argument #0 is ".hidden"}}
func.func @name_leading_dot(%x: tensor<4xf32> {fsdp.name = ".hidden"}) {
  return
}

// -----

// expected-error @+1 {{'fsdp.name' on argument #0 is ""}}
func.func @name_empty(%x: tensor<4xf32> {fsdp.name = ""}) {
  return
}

// -----

// expected-error @+1 {{'fsdp.name' "x" on argument #1 is also the name of argument #0; names must be unique}}
func.func @duplicate_argument_names(%a: tensor<4xf32> {fsdp.name = "x"}, %b: tensor<4xf32> {fsdp.name = "x"}) {
  return
}

// -----

// expected-error @+1 {{'fsdp.name' "loss" on result #1 is also the name of result #0; names must be unique}}
func.func @duplicate_result_names(%a: tensor<4xf32>) -> (tensor<4xf32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.name = "loss"}) {
  return %a, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// An argument and a result may share a name (inputs and outputs are
// separate directories), and dots inside a name are fine.
func.func @names_fine(%a: tensor<4xf32> {fsdp.name = "l0.weight"}) -> (tensor<4xf32> {fsdp.name = "l0.weight"}) {
  return %a : tensor<4xf32>
}

// -----

// The group size times dim 0 overflowed a signed 64-bit product.
fsdp.mesh @mesh [shard = 4]
func.func @gather_dim_overflow(%x: tensor<4611686018427387904xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{over a group of 4 ranks, result dim 0 (4 x 4611686018427387904) overflows 64 bits}}
  %0 = fsdp.all_gather %x over @mesh ["shard"] : tensor<4611686018427387904xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

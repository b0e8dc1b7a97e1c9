// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{axis 'shard' must have a positive size, got 0}}
fsdp.mesh @mesh [shard = 0]

// -----

// expected-error @+1 {{duplicate axis name 'shard'}}
fsdp.mesh @mesh [shard = 2, shard = 4]

// -----

// expected-error @+1 {{needs at least one axis}}
fsdp.mesh @mesh []

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 has an invalid layout #fsdp.layout<@mesh, [shard<0>]>: a scalar (rank-0) tensor cannot be sharded}}
func.func @scalar(%w: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{shard dim 2 on mesh axis 0 is out of range for a rank-2 tensor}}
func.func @dim_out_of_range(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<2>]>}) {
  return
}

// -----

fsdp.mesh @mesh [replicate = 2, shard = 4]
// expected-error @+1 {{layout has 1 placement(s) but its mesh has 2 axis/axes}}
func.func @count_mismatch(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

// expected-error @+1 {{argument #0 refers to unknown mesh @nowhere}}
func.func @unknown_mesh(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@nowhere, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{StridedShard(0, 2) on mesh axis 0 needs dim 0 (size 12) to be divisible by split_factor * axis size = 8}}
func.func @strided_not_divisible(%w: tensor<12x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{Partial placement on mesh axis 0 is not allowed on a parameter}}
func.func @partial_param(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [partial<sum>]>}) {
  return
}

// -----

fsdp.mesh @mesh [outer = 4, inner = 2]
// expected-error @+1 {{dim 0 (size 10) is sharded by nested mesh axes; the outer axis 0 (size 4) must divide it evenly}}
func.func @nested_not_divisible(%w: tensor<10x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}) {
  return
}

// -----

// expected-error @+1 {{strided_shard split factor must be between 1 and 1048576, got 0}}
func.func @bad_split_factor() attributes {a = #fsdp.strided_shard<0, 0>} {
  return
}

// -----

// expected-error @+1 {{unknown placement 'shrd'}}
func.func @unknown_placement() attributes {a = #fsdp.layout<@m, [shrd<0>]>} {
  return
}

// -----

// expected-error @+1 {{unknown uneven policy 'floor'}}
func.func @unknown_policy() attributes {a = #fsdp.layout<@m, [shard<0>], policy = floor>} {
  return
}

// -----

// expected-error @+1 {{layout placement must be replicate, shard<d>, strided_shard<d, sf>, partial<op>, tp_shard<d> or tp_replicate, got 3 : i64}}
func.func @not_a_placement() attributes {a = #fsdp.layout<@m, [3]>} {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{'fsdp.layout' on argument #0 must be a #fsdp.layout attribute}}
func.func @layout_not_layout(%w: tensor<8xf32> {fsdp.layout = 3}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{argument #0 with a layout must be a statically shaped ranked tensor, got 'tensor<?xf32>'}}
func.func @dynamic(%w: tensor<?xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{the loss (result #0) must be a scalar, got 'tensor<4xf32>'}}
func.func @loss_not_scalar(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<4xf32> {fsdp.loss}) {
  %c = arith.constant dense<0.0> : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 is marked as the gradient of argument #3, but the function has 1 argument(s)}}
func.func @grad_missing_arg(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<8xf32> {fsdp.grad_of = 3 : i64}) {
  return %w : tensor<8xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 is the gradient of argument #0 and must have its type 'tensor<8xf32>', got 'tensor<4xf32>'}}
func.func @grad_wrong_shape(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<4xf32>) -> (tensor<4xf32> {fsdp.grad_of = 0 : i64}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{result #0 is marked as the gradient of argument #0, which has no fsdp.layout (not a parameter)}}
func.func @grad_of_data(%x: tensor<4xf32>) -> (tensor<4xf32> {fsdp.grad_of = 0 : i64}) {
  return %x : tensor<4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{result #0 is marked as the gradient of argument #0, which is frozen (fsdp.frozen)}}
func.func @grad_of_frozen(%w: tensor<8xf32> {fsdp.frozen, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<8xf32> {fsdp.grad_of = 0 : i64}) {
  return %w : tensor<8xf32>
}

// -----

// expected-error @+1 {{'fsdp.frozen' on argument #0 marks a frozen parameter, but the argument has no fsdp.layout and no shard.shard annotation}}
func.func @frozen_data(%x: tensor<4xf32> {fsdp.frozen}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{'fsdp.frozen' is a unit attribute}}
func.func @frozen_not_unit(%w: tensor<8xf32> {fsdp.frozen = 1 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

// expected-error @+1 {{unknown fsdp argument attribute 'fsdp.layuot' on argument #0}}
func.func @typo(%x: tensor<4xf32> {fsdp.layuot = 1}) {
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @gather_wrong_slot(%s: tensor<2x16xf32>) {
  // expected-error @+1 {{shard must have the padded slot type 'tensor<3x16xf32>' for a full tensor of type 'tensor<10x16xf32>', got 'tensor<2x16xf32>'}}
  %0 = fsdp.param_gather %s layout <@mesh, [shard<0>]> phase forward : tensor<2x16xf32> -> tensor<10x16xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @gather_bad_phase(%s: tensor<3x16xf32>) {
  // expected-error @+1 {{phase must be forward or backward, got optimizer}}
  %0 = fsdp.param_gather %s layout <@mesh, [shard<0>]> phase optimizer : tensor<3x16xf32> -> tensor<10x16xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @gather_unknown_phase(%s: tensor<3x16xf32>) {
  // expected-error @+2 {{expected ::mlir::fsdp::Phase to be one of: forward, backward, optimizer}}
  // expected-error @+1 {{failed to parse FSDP_PhaseAttr parameter}}
  %0 = fsdp.param_gather %s layout <@mesh, [shard<0>]> phase sideways : tensor<3x16xf32> -> tensor<10x16xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @origin_not_an_origin(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'fsdp.origin' must be a #fsdp.origin attribute}}
  %g = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = "forward"} : tensor<4xf32> -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

func.func @origin_on_other_op(%a: f32) -> f32 {
  // expected-error @+1 {{'fsdp.origin' is only meaningful on fsdp collectives}}
  %b = arith.addf %a, %a {fsdp.origin = #fsdp.origin<phase = forward>} : f32
  return %b : f32
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @bucket_size_not_integer(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'fsdp.bucket_size' must be an integer}}
  %g = fsdp.all_gather %a over @mesh ["shard"] {fsdp.bucket_size = "two"} : tensor<4xf32> -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @accumulator_type(%g: tensor<10x16xf32>, %acc: tensor<2x16xf32>) {
  // expected-error @+1 {{accumulator must have the result type 'tensor<3x16xf32>', got 'tensor<2x16xf32>'}}
  %0 = fsdp.grad_reduce %g accumulate %acc layout <@mesh, [shard<0>]> avg : tensor<10x16xf32>, tensor<2x16xf32> -> tensor<3x16xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @gather_size(%x: tensor<48xf32>) {
  // expected-error @+1 {{over a group of 4 ranks, result dim 0 must be 4 x 48 = 192, got 190}}
  %0 = fsdp.all_gather %x over @mesh ["shard"] : tensor<48xf32> -> tensor<190xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @members_sum(%x: tensor<48xf32>) {
  // expected-error @+1 {{members' counts add up to 40 but the input has 48 elements per rank}}
  %0 = fsdp.all_gather %x over @mesh ["shard"] members [8, 32] : tensor<48xf32> -> tensor<192xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @members_negative(%x: tensor<192xf32>) {
  // expected-error @+1 {{member 1 has negative count -8}}
  %0 = fsdp.reduce_scatter %x over @mesh ["shard"] sum members [56, -8] : tensor<192xf32> -> tensor<48xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @members_rank(%x: tensor<3x16xf32>) {
  // expected-error @+1 {{with members needs a static 1-D input, got 'tensor<3x16xf32>'}}
  %0 = fsdp.all_gather %x over @mesh ["shard"] members [48] : tensor<3x16xf32> -> tensor<12x16xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @members_empty(%x: memref<48xf32>, %y: memref<192xf32>) {
  // expected-error @+1 {{members must list at least one count}}
  %r = fsdp.buffer.all_gather_start %x into %y over @mesh ["shard"] members [] : memref<48xf32>, memref<192xf32>
  fsdp.buffer.wait %r
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @unknown_axis(%x: tensor<48xf32>) {
  // expected-error @+1 {{mesh @mesh has no axis 'replicate'}}
  %0 = fsdp.all_reduce %x over @mesh ["replicate"] sum : tensor<48xf32> -> tensor<48xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @axis_twice(%x: tensor<48xf32>) {
  // expected-error @+1 {{lists a mesh axis twice}}
  %0 = fsdp.all_reduce %x over @mesh ["shard", "shard"] sum : tensor<48xf32> -> tensor<48xf32>
  return
}

// -----

func.func @no_mesh(%x: tensor<48xf32>) {
  // expected-error @+1 {{refers to unknown mesh @mesh}}
  %0 = fsdp.reduce_scatter %x over @mesh ["shard"] sum : tensor<48xf32> -> tensor<12xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @rs_types(%x: tensor<48xf32>) {
  // expected-error @+1 {{element types differ: 'f16' vs 'f32'}}
  %0 = fsdp.reduce_scatter %x over @mesh ["shard"] sum : tensor<48xf32> -> tensor<12xf16>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @start_size(%x: tensor<48xf32>) {
  // expected-error @+1 {{over a group of 4 ranks, result dim 0 must be 4 x 48 = 192, got 96}}
  %r, %p = fsdp.all_gather_start %x over @mesh ["shard"] : tensor<48xf32> -> tensor<96xf32>
  return
}

// -----

// expected-error @+1 {{'fsdp.read_only' on argument #0 marks a buffer argument of a bufferized step (fsdp-mark-read-only-args sets it), not a 'tensor<4xf32>'}}
func.func @read_only_tensor(%x: tensor<4xf32> {fsdp.read_only}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'fsdp.read_only' is a unit attribute}}
func.func @read_only_value(%x: memref<4xf32> {fsdp.read_only = 1 : i64}) {
  return
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
func.func @axis_index_unknown_axis() -> index {
  // expected-error @+1 {{mesh @mesh has no axis 'sp'}}
  %t = fsdp.axis_index @mesh ["sp"]
  return %t : index
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
func.func @axis_index_no_axis() -> index {
  // expected-error @+1 {{'fsdp.axis_index' op needs at least one mesh axis}}
  %t = fsdp.axis_index @mesh []
  return %t : index
}

// -----

func.func @axis_index_no_mesh() -> index {
  // expected-error @+1 {{refers to unknown mesh @nowhere}}
  %t = fsdp.axis_index @nowhere ["tp"]
  return %t : index
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
func.func @axis_index_twice() -> index {
  // expected-error @+1 {{lists a mesh axis twice}}
  %t = fsdp.axis_index @mesh ["tp", "tp"]
  return %t : index
}

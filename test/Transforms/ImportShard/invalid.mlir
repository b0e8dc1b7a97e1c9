// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-import-shard -verify-diagnostics

// What upstream sharding can say and fsdp cannot: each is an error at the op
// that says it.

shard.grid @grid(shape = 4)
func.func @halo(%w: tensor<8xf32>) {
  // expected-error @+1 {{'shard.sharding' op on argument #0: halo sizes have no fsdp meaning: the shards of a parameter do not overlap}}
  %s = shard.sharding @grid split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  "model.use"(%w1) : (tensor<8xf32>) -> ()
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @offsets(%w: tensor<14xf32>) {
  // expected-error @+1 {{'shard.sharding' op on argument #0: sharded_dims_offsets have no fsdp meaning: fsdp splits a dim by its uneven policy (ceil or balanced), not by given offsets}}
  %s = shard.sharding @grid split_axes = [[0]] sharded_dims_offsets = [0, 2, 5, 9, 14] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<14xf32>
  "model.use"(%w1) : (tensor<14xf32>) -> ()
  return
}

// -----

// expected-error @+1 {{'shard.grid' op has a dynamic size; an fsdp mesh has static axis sizes}}
shard.grid @grid(shape = 2x?)


// -----

shard.grid @grid(shape = 2x2)
func.func @axes_out_of_order(%w: tensor<8xf32>) {
  // expected-error @+1 {{'shard.sharding' op on argument #0: dim 0 is split over grid axes [1, 0]; fsdp nests the axes of one dim in grid order, so they must be increasing}}
  %s = shard.sharding @grid split_axes = [[1, 0]] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  "model.use"(%w1) : (tensor<8xf32>) -> ()
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @two_shardings(%w: tensor<8x8xf32>) {
  %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  // expected-note @+1 {{the first sharding is here}}
  %a = shard.shard %w to %s0 annotate_for_users : tensor<8x8xf32>
  %s1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op gives argument #0 a second sharding (#fsdp.layout<@grid, [shard<1>]> after #fsdp.layout<@grid, [shard<0>]>); an fsdp parameter has one layout}}
  %b = shard.shard %w to %s1 annotate_for_users : tensor<8x8xf32>
  "model.use"(%a, %b) : (tensor<8x8xf32>, tensor<8x8xf32>) -> ()
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @data_argument(%w: tensor<8xf32>, %x: tensor<8xf32>) -> (tensor<f32> {fsdp.loss}, tensor<8xf32> {fsdp.grad_of = 0}) {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  // expected-error @+1 {{'shard.shard' op annotates argument #1, but no result is its gradient (fsdp.grad_of); only parameters carry layouts in an fsdp step, data arguments are this rank's micro-batch at its local shape (mark a frozen parameter with fsdp.frozen)}}
  %x1 = shard.shard %x to %s annotate_for_users : tensor<8xf32>
  %l, %g = "model.step"(%w1, %x1) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>)
  return %l, %g : tensor<f32>, tensor<8xf32>
}

// -----

fsdp.mesh @mesh [shard = 4]
shard.grid @grid(shape = 4)
func.func @already_has_layout(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op annotates argument #0, which already has an fsdp.layout}}
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  "model.use"(%w1) : (tensor<8xf32>) -> ()
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @intermediate(%w: tensor<8xf32>) {
  %y = "model.f"(%w) : (tensor<8xf32>) -> tensor<8xf32>
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op annotates a value that is not a function argument; fsdp layouts describe parameters only (the partitioner decides how intermediate values are placed)}}
  %y1 = shard.shard %y to %s : tensor<8xf32>
  "model.use"(%y1) : (tensor<8xf32>) -> ()
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @collective(%w: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_reduce' op has no fsdp meaning in a step: fsdp-opt inserts the collectives itself}}
  %r = shard.all_reduce %w on @grid grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

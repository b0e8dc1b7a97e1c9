// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-import-shard | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-import-shard --fsdp-partition | FileCheck %s --check-prefix=PART

// HSDP as upstream writes it: a 2x4 grid, the weight split on dim 0 over
// axis 1, the bias on dim 0 over axis 1, replicated over axis 0.

// CHECK-LABEL: fsdp.mesh @grid [a0 = 2, a1 = 4]
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @hsdp(
// CHECK-SAME: %arg0: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@grid, [replicate, shard<0>]>, fsdp.name = "w", fsdp.unit = "l0"}
// CHECK-SAME: %arg1: tensor<10xf32> {fsdp.layout = #fsdp.layout<@grid, [replicate, shard<0>]>}
// CHECK-SAME: %arg2: tensor<2x16xf32>)
// CHECK-NEXT: %[[F:.*]] = "model.forward"(%arg0, %arg1, %arg2)
// CHECK-NEXT: %[[B:.*]]:2 = "model.backward"(%arg0, %arg1, %arg2)
// CHECK-NOT: shard.
// PART-LABEL: func.func @hsdp(
// PART-SAME: %arg0: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@grid, [replicate, shard<0>]>
// PART: fsdp.param_gather %arg0 layout <@grid, [replicate, shard<0>]>
// PART: fsdp.grad_reduce
shard.grid @grid(shape = 2x4)
func.func @hsdp(%w: tensor<10x16xf32> {fsdp.name = "w", fsdp.unit = "l0"}, %b: tensor<10xf32>, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}, tensor<10xf32> {fsdp.grad_of = 1}) {
  %s = shard.sharding @grid split_axes = [[1]] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<10x16xf32>
  %b1 = shard.shard %b to %s annotate_for_users : tensor<10xf32>
  %loss = "model.forward"(%w1, %b1, %x) : (tensor<10x16xf32>, tensor<10xf32>, tensor<2x16xf32>) -> tensor<f32>
  %dw, %db = "model.backward"(%w1, %b1, %x) : (tensor<10x16xf32>, tensor<10xf32>, tensor<2x16xf32>) -> (tensor<10x16xf32>, tensor<10xf32>)
  return %loss, %dw, %db : tensor<f32>, tensor<10x16xf32>, tensor<10xf32>
}

// -----

// Dim 1 split, a dim split over both axes (nested in grid order), an
// unsharded argument (replicate everywhere: DDP), and an annotation without
// annotate_for_users (it describes the argument itself all the same).

// CHECK-LABEL: fsdp.mesh @g [a0 = 2, a1 = 2]
// CHECK-LABEL: func.func @placements(
// CHECK-SAME: %arg0: tensor<8x6xf32> {fsdp.layout = #fsdp.layout<@g, [replicate, shard<1>]>}
// CHECK-SAME: %arg1: tensor<8x6xf32> {fsdp.layout = #fsdp.layout<@g, [shard<0>, shard<0>]>}
// CHECK-SAME: %arg2: tensor<8xf32> {fsdp.layout = #fsdp.layout<@g, [replicate, replicate]>}
// CHECK-SAME: %arg3: tensor<8x6xf32> {fsdp.layout = #fsdp.layout<@g, [shard<1>, shard<0>]>}
// CHECK-NEXT: "model.use"(%arg0, %arg1, %arg2, %arg3)
shard.grid @g(shape = 2x2)
func.func @placements(%a: tensor<8x6xf32>, %b: tensor<8x6xf32>, %c: tensor<8xf32>, %d: tensor<8x6xf32>) {
  %s1 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %a1 = shard.shard %a to %s1 annotate_for_users : tensor<8x6xf32>
  %s01 = shard.sharding @g split_axes = [[0, 1]] : !shard.sharding
  %b1 = shard.shard %b to %s01 annotate_for_users : tensor<8x6xf32>
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %c1 = shard.shard %c to %r : tensor<8xf32>
  %s2 = shard.sharding @g split_axes = [[1], [0]] : !shard.sharding
  %d1 = shard.shard %d to %s2 annotate_for_users : tensor<8x6xf32>
  "model.use"(%a1, %b1, %c1, %d1) : (tensor<8x6xf32>, tensor<8x6xf32>, tensor<8xf32>, tensor<8x6xf32>) -> ()
  return
}

// -----

// Two annotations with the same sharding are one layout; a function without
// annotations and an external declaration are left alone.

// CHECK-LABEL: fsdp.mesh @m [a0 = 4]
// CHECK-LABEL: func.func @twice(
// CHECK-SAME: {fsdp.layout = #fsdp.layout<@m, [shard<0>]>}
// CHECK-NEXT: "model.use"(%arg0, %arg0)
// CHECK-LABEL: func.func @plain(%arg0: tensor<4xf32>)
// CHECK-LABEL: func.func private @decl(tensor<4xf32>)
shard.grid @m(shape = 4)
func.func @twice(%w: tensor<8xf32>) {
  %s = shard.sharding @m split_axes = [[0]] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  %t = shard.sharding @m split_axes = [[0]] : !shard.sharding
  %w2 = shard.shard %w to %t annotate_for_users : tensor<8xf32>
  "model.use"(%w1, %w2) : (tensor<8xf32>, tensor<8xf32>) -> ()
  return
}
func.func @plain(%x: tensor<4xf32>) {
  "model.use"(%x) : (tensor<4xf32>) -> ()
  return
}
func.func private @decl(tensor<4xf32>)

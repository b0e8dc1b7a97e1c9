// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-import-shard | FileCheck %s --check-prefix=DEFAULT
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-import-shard="axis-names=replicate,shard" | FileCheck %s --check-prefix=NAMES

// axis-names names the mesh axes of every grid (default a0, a1, ...).
// DEFAULT: fsdp.mesh @grid [a0 = 2, a1 = 4]
// DEFAULT: fsdp.mesh @other [a0 = 1, a1 = 2]
// NAMES: fsdp.mesh @grid [replicate = 2, shard = 4]
// NAMES: fsdp.mesh @other [replicate = 1, shard = 2]
// NAMES-LABEL: func.func @step(
// NAMES-SAME: {fsdp.layout = #fsdp.layout<@grid, [replicate, shard<0>]>}
shard.grid @grid(shape = 2x4)
shard.grid @other(shape = 1x2)
func.func @step(%w: tensor<8xf32>) {
  %s = shard.sharding @grid split_axes = [[1]] : !shard.sharding
  %w1 = shard.shard %w to %s annotate_for_users : tensor<8xf32>
  "model.use"(%w1) : (tensor<8xf32>) -> ()
  return
}

// --fsdp-pipeline imports the annotations first.
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline | FileCheck %s --check-prefix=PIPE
// PIPE: fsdp.mesh @grid [a0 = 2, a1 = 4]
// PIPE-NOT: shard.
// PIPE: fsdp.all_gather

// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The TP-local argument is checked against the global tensor it is a part
// of: 5 local rows over tp = 2 are 10 global rows, which StridedShard(0, 2)
// over dp = 2 cannot split.
fsdp.mesh @mesh [dp = 2, tp = 2]
// expected-error @+1 {{StridedShard(0, 2) on mesh axis 0 needs dim 0 (size 10) to be divisible by split_factor * axis size = 4}}
func.func @uneven(%w: tensor<5x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>, shard<0>]>}) {
  return
}

// -----

// tp_shard<d> needs a dim the tensor-parallel axis divides (before the pass
// the argument has its global type).
fsdp.mesh @mesh [dp = 2, tp = 2]
// expected-error @+1 {{tp_shard<1> on mesh axis 1: dim 1 (size 5) must be divisible by the tensor-parallel axis size 2}}
func.func @tp_uneven(%w: tensor<8x5xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>}) {
  return
}

// -----

// Once the function is TP-local (fsdp.tp_local), the argument is its
// TP-local part: 5 rows are 10 global rows, and a data-parallel axis that
// shards the tensor-parallel dim must split each part evenly.
fsdp.mesh @mesh [dp = 2, tp = 2]
// expected-error @+1 {{StridedShard(0, 2) on mesh axis 0 needs dim 0 (size 10) to be divisible by split_factor * axis size = 4}}
func.func @tp_local(%w: tensor<5x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}) attributes {fsdp.tp_local} {
  return
}

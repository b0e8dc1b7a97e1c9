// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The TP-local argument is checked against the global tensor it is a part
// of: 5 local rows over tp = 2 are 10 global rows, which StridedShard(0, 2)
// over dp = 2 cannot split.
fsdp.mesh @mesh [dp = 2, tp = 2]
// expected-error @+1 {{StridedShard(0, 2) on mesh axis 0 needs dim 0 (size 10) to be divisible by split_factor * axis size = 4}}
func.func @uneven(%w: tensor<5x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>, shard<0>]>}) {
  return
}

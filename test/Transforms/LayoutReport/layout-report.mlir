// RUN: fsdp-opt %s -split-input-file --fsdp-layout-report -o /dev/null | FileCheck %s

// Shard(0), even: 16 rows over 4 ranks, no padding.
fsdp.mesh @mesh [shard = 4]
func.func @even(%w: tensor<16x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"}) {
  return
}
// CHECK-LABEL: @even argument #0 (w): tensor<16x8xf32> #fsdp.layout<@mesh, [shard<0>]>
// CHECK-NEXT: mesh @mesh [shard = 4], slot 4x8
// CHECK-NEXT: rank 0 (0): local 4x8 offsets [0, 0] slot 4x8 padding 0 bytes dim0 {[0, 4)}
// CHECK-NEXT: rank 1 (1): local 4x8 offsets [4, 0] slot 4x8 padding 0 bytes dim0 {[4, 8)}
// CHECK-NEXT: rank 2 (2): local 4x8 offsets [8, 0] slot 4x8 padding 0 bytes dim0 {[8, 12)}
// CHECK-NEXT: rank 3 (3): local 4x8 offsets [12, 0] slot 4x8 padding 0 bytes dim0 {[12, 16)}

// -----

// Shard(0), n = 10 over 4 ranks, ceil: 3, 3, 3, 1 with slot 3.
fsdp.mesh @mesh [shard = 4]
func.func @ceil(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}
// CHECK-LABEL: @ceil argument #0: tensor<10x16xf32>
// CHECK-NEXT: slot 3x16
// CHECK-NEXT: rank 0 (0): local 3x16 offsets [0, 0] slot 3x16 padding 0 bytes dim0 {[0, 3)}
// CHECK-NEXT: rank 1 (1): local 3x16 offsets [3, 0] slot 3x16 padding 0 bytes dim0 {[3, 6)}
// CHECK-NEXT: rank 2 (2): local 3x16 offsets [6, 0] slot 3x16 padding 0 bytes dim0 {[6, 9)}
// CHECK-NEXT: rank 3 (3): local 1x16 offsets [9, 0] slot 3x16 padding 128 bytes dim0 {[9, 10)}

// -----

// Shard(0), n = 10 over 4 ranks, balanced: 3, 3, 2, 2 with slot 3.
fsdp.mesh @mesh [shard = 4]
func.func @balanced(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}) {
  return
}
// CHECK-LABEL: @balanced argument #0: tensor<10x16xf32> #fsdp.layout<@mesh, [shard<0>], policy = balanced>
// CHECK-NEXT: slot 3x16
// CHECK-NEXT: rank 0 (0): local 3x16 offsets [0, 0] slot 3x16 padding 0 bytes dim0 {[0, 3)}
// CHECK-NEXT: rank 1 (1): local 3x16 offsets [3, 0] slot 3x16 padding 0 bytes dim0 {[3, 6)}
// CHECK-NEXT: rank 2 (2): local 2x16 offsets [6, 0] slot 3x16 padding 64 bytes dim0 {[6, 8)}
// CHECK-NEXT: rank 3 (3): local 2x16 offsets [8, 0] slot 3x16 padding 64 bytes dim0 {[8, 10)}

// -----

// Shard(1), uneven: 10 columns over 4 ranks; bf16 elements are 2 bytes.
fsdp.mesh @mesh [shard = 4]
func.func @dim1(%w: tensor<6x10xbf16> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}) {
  return
}
// CHECK-LABEL: @dim1 argument #0: tensor<6x10xbf16>
// CHECK-NEXT: slot 6x3
// CHECK-NEXT: rank 0 (0): local 6x3 offsets [0, 0] slot 6x3 padding 0 bytes dim1 {[0, 3)}
// CHECK:      rank 3 (3): local 6x1 offsets [0, 9] slot 6x3 padding 24 bytes dim1 {[9, 10)}

// -----

// StridedShard(0, 2) over 4: view [2, 4, 2]; rank i holds rows {2i, 2i+1, 8+2i, 9+2i}.
fsdp.mesh @mesh [shard = 4]
func.func @strided(%w: tensor<16x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>]>}) {
  return
}
// CHECK-LABEL: @strided argument #0
// CHECK-NEXT: slot 4x4
// CHECK-NEXT: rank 0 (0): local 4x4 offsets [0, 0] slot 4x4 padding 0 bytes dim0 {[0, 2), [8, 10)}
// CHECK-NEXT: rank 1 (1): local 4x4 offsets [2, 0] slot 4x4 padding 0 bytes dim0 {[2, 4), [10, 12)}
// CHECK-NEXT: rank 2 (2): local 4x4 offsets [4, 0] slot 4x4 padding 0 bytes dim0 {[4, 6), [12, 14)}
// CHECK-NEXT: rank 3 (3): local 4x4 offsets [6, 0] slot 4x4 padding 0 bytes dim0 {[6, 8), [14, 16)}

// -----

// 2x4 HSDP mesh: replicated over the first axis, sharded over the second.
fsdp.mesh @hsdp [replicate = 2, shard = 4]
func.func @hsdp_step(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@hsdp, [replicate, shard<0>]>}) -> (tensor<10x16xf32> {fsdp.grad_of = 0 : i64}) {
  return %w : tensor<10x16xf32>
}
// CHECK-LABEL: @hsdp_step argument #0
// CHECK-NEXT: mesh @hsdp [replicate = 2, shard = 4], slot 3x16
// CHECK-NEXT: rank 0 (0, 0): local 3x16 offsets [0, 0]
// CHECK:      rank 3 (0, 3): local 1x16 offsets [9, 0] slot 3x16 padding 128 bytes
// CHECK-NEXT: rank 4 (1, 0): local 3x16 offsets [0, 0]
// CHECK:      rank 7 (1, 3): local 1x16 offsets [9, 0] slot 3x16 padding 128 bytes

// -----

// Two mesh axes sharding dim 0: outer axis first, 16 rows over 2x4.
fsdp.mesh @mesh [outer = 2, inner = 4]
func.func @nested(%w: tensor<16x2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}) {
  return
}
// CHECK-LABEL: @nested argument #0
// CHECK-NEXT: slot 2x2
// CHECK-NEXT: rank 0 (0, 0): local 2x2 offsets [0, 0] slot 2x2 padding 0 bytes dim0 {[0, 2)}
// CHECK-NEXT: rank 1 (0, 1): local 2x2 offsets [2, 0]
// CHECK:      rank 4 (1, 0): local 2x2 offsets [8, 0]
// CHECK:      rank 7 (1, 3): local 2x2 offsets [14, 0] slot 2x2 padding 0 bytes dim0 {[14, 16)}

// -----

// Two mesh axes sharding dim 0 unevenly inside: 12 rows over 2 x 5 (ceil).
fsdp.mesh @mesh [outer = 2, inner = 5]
func.func @nested_uneven(%w: tensor<12xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}) {
  return
}
// CHECK-LABEL: @nested_uneven argument #0
// CHECK-NEXT: slot 2
// CHECK-NEXT: rank 0 (0, 0): local 2 offsets [0] slot 2 padding 0 bytes dim0 {[0, 2)}
// CHECK:      rank 3 (0, 3): local 0 offsets [6] slot 2 padding 8 bytes dim0 {}
// CHECK-NEXT: rank 4 (0, 4): local 0 offsets [6] slot 2 padding 8 bytes dim0 {}
// CHECK:      rank 5 (1, 0): local 2 offsets [6] slot 2 padding 0 bytes dim0 {[6, 8)}

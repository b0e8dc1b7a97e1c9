// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-comm-report -o /dev/null | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-comm-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// The report can go to a file (each split of this file rewrites it: the
// last one remains); the IR is not changed.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-comm-report="output=%t.txt" | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --check-prefix=FILE < %t.txt

// HSDP mesh, 8 ranks (rank = 4 * replicate + shard). Expected numbers, by
// hand from docs/SEMANTICS.md §4:
//  - all_gather of 48 f32 over shard (4): sends 192 B, receives 768 B;
//    all_gather_start of 3 f32: 12 B / 48 B (its fsdp.wait is no collective);
//    all_gather of 18 bf16: 36 B / 144 B. Together 3, 240 B / 960 B.
//  - reduce_scatter 192 -> 48 f32: sends 768 B, receives 192 B.
//  - all_reduce of 48 f32: 192 B / 192 B.
//  - padding: %w 10 rows over 4 (ceil 3, 3, 3, 1): shard 3 pads 2 rows of 16
//    f32 = 128 B; %b 10 over 4 balanced (3, 3, 2, 2 in slots of 3): shards 2
//    and 3 pad 4 B; %v 10 bf16 columns over 4 (3, 3, 3, 1): shard 3 pads 2
//    columns of 6 = 24 B; %r is replicated (no global type, no padding).
//    Ranks 3 and 7: 128 + 4 + 24 = 156 B, ranks 2 and 6: 4 B.
//  - peak: the 768 B weight buffer is alive (through its reshape and slice)
//    until the first "model.use", the 48 B bias buffer from its start to
//    "model.loss": 816 B in 2 buffers. The bf16 buffer (144 B, alive through
//    its extf until "model.last") only overlaps the bias buffer.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @step(%w: tensor<3x16xf32> {fsdp.global_type = tensor<10x16xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>},
                %b: tensor<3xf32> {fsdp.global_type = tensor<10xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>},
                %v: tensor<6x3xbf16> {fsdp.global_type = tensor<6x10xbf16>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>},
                %r: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>},
                %x: tensor<2x16xf32>) -> (tensor<f32>, tensor<48xf32>) {
  %fw = tensor.collapse_shape %w [[0, 1]] : tensor<3x16xf32> into tensor<48xf32>
  %gw = fsdp.all_gather %fw over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
  %rows = tensor.expand_shape %gw [[0, 1]] output_shape [12, 16] : tensor<192xf32> into tensor<12x16xf32>
  %full_w = tensor.extract_slice %rows[0, 0] [10, 16] [1, 1] : tensor<12x16xf32> to tensor<10x16xf32>
  %req, %pending = fsdp.all_gather_start %b over @mesh ["shard"] : tensor<3xf32> -> tensor<12xf32>
  %h = "model.use"(%x, %full_w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  %gb = fsdp.wait %req, %pending : tensor<12xf32>
  %h2 = "model.use"(%h, %gb) : (tensor<2x10xf32>, tensor<12xf32>) -> tensor<2x10xf32>
  %fv = tensor.collapse_shape %v [[0, 1]] : tensor<6x3xbf16> into tensor<18xbf16>
  %gv = fsdp.all_gather %fv over @mesh ["shard"] : tensor<18xbf16> -> tensor<72xbf16>
  %gv32 = arith.extf %gv : tensor<72xbf16> to tensor<72xf32>
  %loss = "model.loss"(%h2, %gb) : (tensor<2x10xf32>, tensor<12xf32>) -> tensor<f32>
  %dw = "model.grad"(%loss) : (tensor<f32>) -> tensor<192xf32>
  %rw = fsdp.reduce_scatter %dw over @mesh ["shard"] avg : tensor<192xf32> -> tensor<48xf32>
  %aw = fsdp.all_reduce %rw over @mesh ["replicate"] avg : tensor<48xf32> -> tensor<48xf32>
  %l = "model.last"(%loss, %gv32) : (tensor<f32>, tensor<72xf32>) -> tensor<f32>
  return %l, %aw : tensor<f32>, tensor<48xf32>
}
// CHECK-LABEL: @step: mesh @mesh [replicate = 2, shard = 4], 8 ranks
// CHECK-NEXT:   every rank: 5 collectives (all_gather 3, reduce_scatter 1, all_reduce 1), sent 1200 B, received 1344 B
// CHECK-NEXT:     all_gather: 3, sent 240 B, received 960 B
// CHECK-NEXT:     reduce_scatter: 1, sent 768 B, received 192 B
// CHECK-NEXT:     all_reduce: 1, sent 192 B, received 192 B
// CHECK-NEXT:   peak live gathered: 816 B (2 buffers)
// CHECK-NEXT:   rank 0: 5 collectives (all_gather 3, reduce_scatter 1, all_reduce 1), sent 1200 B, received 1344 B, padding 0 B
// CHECK-NEXT:   rank 1: {{.*}}, padding 0 B
// CHECK-NEXT:   rank 2: {{.*}}, padding 4 B
// CHECK-NEXT:   rank 3: {{.*}}, padding 156 B
// CHECK-NEXT:   rank 4: {{.*}}, padding 0 B
// CHECK-NEXT:   rank 5: {{.*}}, padding 0 B
// CHECK-NEXT:   rank 6: {{.*}}, padding 4 B
// CHECK-NEXT:   rank 7: 5 collectives (all_gather 3, reduce_scatter 1, all_reduce 1), sent 1200 B, received 1344 B, padding 156 B
// CHECK-NOT:    rank 8

// JSON:      "functions": [
// JSON:          "name": "step",
// JSON-NEXT:     "mesh": "mesh",
// JSON-NEXT:     "mesh_axes": [
// JSON-NEXT:       "replicate",
// JSON-NEXT:       "shard"
// JSON-NEXT:     ],
// JSON-NEXT:     "mesh_shape": [
// JSON-NEXT:       2,
// JSON-NEXT:       4
// JSON-NEXT:     ],
// JSON-NEXT:     "ranks": 8,
// JSON-NEXT:     "collectives": {
// JSON-NEXT:       "all_gather": {
// JSON-NEXT:         "count": 3,
// JSON-NEXT:         "bytes_sent": 240,
// JSON-NEXT:         "bytes_received": 960
// JSON-NEXT:       },
// JSON-NEXT:       "reduce_scatter": {
// JSON-NEXT:         "count": 1,
// JSON-NEXT:         "bytes_sent": 768,
// JSON-NEXT:         "bytes_received": 192
// JSON-NEXT:       },
// JSON-NEXT:       "all_reduce": {
// JSON-NEXT:         "count": 1,
// JSON-NEXT:         "bytes_sent": 192,
// JSON-NEXT:         "bytes_received": 192
// JSON-NEXT:       }
// JSON-NEXT:     },
// JSON-NEXT:     "total": {
// JSON-NEXT:       "count": 5,
// JSON-NEXT:       "bytes_sent": 1200,
// JSON-NEXT:       "bytes_received": 1344
// JSON-NEXT:     },
// JSON-NEXT:     "peak_live_gathered_bytes": 816,
// JSON-NEXT:     "peak_live_gathered_buffers": 2,
// JSON-NEXT:     "per_rank": [
// JSON-NEXT:       {
// JSON-NEXT:         "rank": 0,
// JSON-NEXT:         "collectives": 5,
// JSON-NEXT:         "bytes_sent": 1200,
// JSON-NEXT:         "bytes_received": 1344,
// JSON-NEXT:         "padding_bytes": 0
// JSON-NEXT:       },
// JSON:              "rank": 3,
// JSON:              "padding_bytes": 156
// JSON:              "rank": 7,
// JSON:              "padding_bytes": 156
// JSON-NEXT:       }
// JSON-NEXT:     ]

// The report leaves the IR alone.
// IR-LABEL: func.func @step(
// IR:       fsdp.all_gather %{{.*}} over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
// IR:       fsdp.all_gather_start
// IR:       fsdp.wait
// IR:       fsdp.reduce_scatter
// IR:       fsdp.all_reduce

// -----

// No mesh and no collectives: one rank, all zeros. Declarations are skipped.
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: @plain: no mesh, 1 rank
// CHECK-NEXT:   every rank: 0 collectives (all_gather 0, reduce_scatter 0, all_reduce 0), sent 0 B, received 0 B
// CHECK:        peak live gathered: 0 B (0 buffers)
// CHECK-NEXT:   rank 0: 0 collectives {{.*}}, padding 0 B
// CHECK-NOT:    @external
// JSON:     "name": "plain",
// JSON-NEXT: "ranks": 1,

// -----

// Without parameter layouts the mesh comes from the collectives; buffer
// forms (after bufferization) count like the tensor forms.
fsdp.mesh @dp [shard = 2]
func.func @buffers(%in: memref<8xf32>, %out: memref<16xf32>, %g: memref<16xf32>, %s: memref<8xf32>) {
  fsdp.buffer.all_gather %in into %out over @dp ["shard"] : memref<8xf32>, memref<16xf32>
  %req = fsdp.buffer.reduce_scatter_start %g into %s over @dp ["shard"] sum : memref<16xf32>, memref<8xf32>
  fsdp.buffer.wait %req
  return
}
// FILE:        @buffers: mesh @dp [shard = 2], 2 ranks
// CHECK-LABEL: @buffers: mesh @dp [shard = 2], 2 ranks
// CHECK-NEXT:   every rank: 2 collectives (all_gather 1, reduce_scatter 1, all_reduce 0), sent 96 B, received 96 B
// CHECK-NEXT:     all_gather: 1, sent 32 B, received 64 B
// CHECK-NEXT:     reduce_scatter: 1, sent 64 B, received 32 B

// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives | FileCheck %s

// The bucketed IR is plain upstream IR around flat fsdp collectives: upstream
// mlir-opt parses and verifies it.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives -mlir-print-op-generic \
// RUN:   | mlir-opt -split-input-file --allow-unregistered-dialect -o /dev/null

// Hand-written expanded IR: flat collectives tagged with their phase and
// unit, "model.*" ops standing for the computation.

// One unit, three parameters of 6, 10 and 3 elements per rank over 4 ranks.
// All-gather: one rank's input is the concatenation (L = 19), the gathered
// 76 elements are viewed as [4, 19] and parameter i is the column block
// [:, off_i : off_i + L_i] with offsets 0, 6, 16 (rank-major when flattened,
// as the gather of that parameter alone). The bucket is issued where the
// first gather was. Reduce-scatter: each gradient [4 * L_i] is viewed as
// [4, L_i] (row j = slot j), the rows are concatenated to [4, 19] and
// flattened, and this rank's 19 elements are split at the same offsets.
// The HSDP all-reduce bucket reads the reduce-scatter bucket's output as is
// (no concat). What read an earlier member's result (the all-reduces) now
// comes after the bucket.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @mixed_sizes(%a: tensor<6xf32>, %b: tensor<10xf32>, %c: tensor<3xf32>, %x: tensor<2xf32>)
    -> (tensor<f32>, tensor<6xf32>, tensor<10xf32>, tensor<3xf32>) {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
  %y0 = "model.use"(%ga, %x) : (tensor<24xf32>, tensor<2xf32>) -> tensor<2xf32>
  %gb = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<10xf32> -> tensor<40xf32>
  %y1 = "model.use"(%gb, %y0) : (tensor<40xf32>, tensor<2xf32>) -> tensor<2xf32>
  %gc = fsdp.all_gather %c over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<3xf32> -> tensor<12xf32>
  %loss = "model.loss"(%gc, %y1) : (tensor<12xf32>, tensor<2xf32>) -> tensor<f32>
  %da = "model.grad"(%loss) : (tensor<f32>) -> tensor<24xf32>
  %ra = fsdp.reduce_scatter %da over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<24xf32> -> tensor<6xf32>
  %aa = fsdp.all_reduce %ra over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<6xf32> -> tensor<6xf32>
  %db = "model.grad"(%loss) : (tensor<f32>) -> tensor<40xf32>
  %rb = fsdp.reduce_scatter %db over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<40xf32> -> tensor<10xf32>
  %ab = fsdp.all_reduce %rb over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<10xf32> -> tensor<10xf32>
  %dc = "model.grad"(%loss) : (tensor<f32>) -> tensor<12xf32>
  %rc = fsdp.reduce_scatter %dc over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<12xf32> -> tensor<3xf32>
  %ac = fsdp.all_reduce %rc over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<3xf32> -> tensor<3xf32>
  return %loss, %aa, %ab, %ac : tensor<f32>, tensor<6xf32>, tensor<10xf32>, tensor<3xf32>
}
// CHECK-LABEL: func.func @mixed_sizes(
// CHECK-SAME: %[[A:[^:]*]]: tensor<6xf32>, %[[B:[^:]*]]: tensor<10xf32>, %[[C:[^:]*]]: tensor<3xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[A]], %[[B]], %[[C]] : (tensor<6xf32>, tensor<10xf32>, tensor<3xf32>) -> tensor<19xf32>
// CHECK-NEXT: %[[AG:.*]] = fsdp.all_gather %[[IN]] over @mesh ["shard"] {fsdp.bucket_size = 3 : i64, fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<19xf32> -> tensor<76xf32>
// CHECK-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[AG]] {{\[\[}}0, 1]] output_shape [4, 19] : tensor<76xf32> into tensor<4x19xf32>
// CHECK-NEXT: %[[SA:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [4, 6] [1, 1] : tensor<4x19xf32> to tensor<4x6xf32>
// CHECK-NEXT: %[[FA:.*]] = tensor.collapse_shape %[[SA]] {{\[\[}}0, 1]] : tensor<4x6xf32> into tensor<24xf32>
// CHECK-NEXT: %[[SB:.*]] = tensor.extract_slice %[[ROWS]][0, 6] [4, 10] [1, 1] : tensor<4x19xf32> to tensor<4x10xf32>
// CHECK-NEXT: %[[FB:.*]] = tensor.collapse_shape %[[SB]] {{\[\[}}0, 1]] : tensor<4x10xf32> into tensor<40xf32>
// CHECK-NEXT: %[[SC:.*]] = tensor.extract_slice %[[ROWS]][0, 16] [4, 3] [1, 1] : tensor<4x19xf32> to tensor<4x3xf32>
// CHECK-NEXT: %[[FC:.*]] = tensor.collapse_shape %[[SC]] {{\[\[}}0, 1]] : tensor<4x3xf32> into tensor<12xf32>
// CHECK-NEXT: %[[Y0:.*]] = "model.use"(%[[FA]],
// CHECK-NEXT: %[[Y1:.*]] = "model.use"(%[[FB]], %[[Y0]])
// CHECK-NEXT: %[[LOSS:.*]] = "model.loss"(%[[FC]], %[[Y1]])
// CHECK-NEXT: %[[DA:.*]] = "model.grad"
// CHECK-NEXT: %[[DB:.*]] = "model.grad"
// CHECK-NEXT: %[[DC:.*]] = "model.grad"
// CHECK-NEXT: %[[RA:.*]] = tensor.expand_shape %[[DA]] {{\[\[}}0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
// CHECK-NEXT: %[[RB:.*]] = tensor.expand_shape %[[DB]] {{\[\[}}0, 1]] output_shape [4, 10] : tensor<40xf32> into tensor<4x10xf32>
// CHECK-NEXT: %[[RC:.*]] = tensor.expand_shape %[[DC]] {{\[\[}}0, 1]] output_shape [4, 3] : tensor<12xf32> into tensor<4x3xf32>
// CHECK-NEXT: %[[PACK:.*]] = tensor.concat dim(1) %[[RA]], %[[RB]], %[[RC]] : (tensor<4x6xf32>, tensor<4x10xf32>, tensor<4x3xf32>) -> tensor<4x19xf32>
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[PACK]] {{\[\[}}0, 1]] : tensor<4x19xf32> into tensor<76xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[FLAT]] over @mesh ["shard"] avg {fsdp.bucket_size = 3 : i64, fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<76xf32> -> tensor<19xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][0] [6] [1] : tensor<19xf32> to tensor<6xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][6] [10] [1] : tensor<19xf32> to tensor<10xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][16] [3] [1] : tensor<19xf32> to tensor<3xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {fsdp.bucket_size = 3 : i64, fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<19xf32> -> tensor<19xf32>
// CHECK-NEXT: %[[GA:.*]] = tensor.extract_slice %[[AR]][0] [6] [1] : tensor<19xf32> to tensor<6xf32>
// CHECK-NEXT: %[[GB:.*]] = tensor.extract_slice %[[AR]][6] [10] [1] : tensor<19xf32> to tensor<10xf32>
// CHECK-NEXT: %[[GC:.*]] = tensor.extract_slice %[[AR]][16] [3] [1] : tensor<19xf32> to tensor<3xf32>
// CHECK-NEXT: return %[[LOSS]], %[[GA]], %[[GB]], %[[GC]]

// -----

// alignment = 4: every member is zero-padded to a multiple of 4 elements
// (6 -> 8, 10 -> 12, 3 -> 4; offsets 0, 8, 20; L = 24). All-gather inputs
// are padded as 1-D tensors, reduce-scatter rows along dim 1. The padding
// columns are never read back. The all-reduce bucket still reads the
// reduce-scatter output directly: its members sit at the same aligned
// offsets, and what it reduces in the gaps is never read.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @aligned(%a: tensor<6xf32>, %b: tensor<10xf32>, %c: tensor<3xf32>)
    -> (tensor<f32>, tensor<6xf32>, tensor<10xf32>, tensor<3xf32>) {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
  %gb = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<10xf32> -> tensor<40xf32>
  %gc = fsdp.all_gather %c over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<3xf32> -> tensor<12xf32>
  %loss = "model.loss"(%ga, %gb, %gc) : (tensor<24xf32>, tensor<40xf32>, tensor<12xf32>) -> tensor<f32>
  %da, %db, %dc = "model.grads"(%loss) : (tensor<f32>) -> (tensor<24xf32>, tensor<40xf32>, tensor<12xf32>)
  %ra = fsdp.reduce_scatter %da over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<24xf32> -> tensor<6xf32>
  %rb = fsdp.reduce_scatter %db over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<40xf32> -> tensor<10xf32>
  %rc = fsdp.reduce_scatter %dc over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<12xf32> -> tensor<3xf32>
  %aa = fsdp.all_reduce %ra over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<6xf32> -> tensor<6xf32>
  %ab = fsdp.all_reduce %rb over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<10xf32> -> tensor<10xf32>
  %ac = fsdp.all_reduce %rc over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<3xf32> -> tensor<3xf32>
  return %loss, %aa, %ab, %ac : tensor<f32>, tensor<6xf32>, tensor<10xf32>, tensor<3xf32>
}
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives=alignment=4 \
// RUN:   | FileCheck %s --check-prefix=ALIGN
// ALIGN-LABEL: func.func @aligned(
// ALIGN-SAME: %[[A:[^:]*]]: tensor<6xf32>, %[[B:[^:]*]]: tensor<10xf32>, %[[C:[^:]*]]: tensor<3xf32>
// ALIGN:      %[[PA:.*]] = tensor.pad %[[A]] low[0] high[2]
// ALIGN:      } : tensor<6xf32> to tensor<8xf32>
// ALIGN:      %[[PB:.*]] = tensor.pad %[[B]] low[0] high[2]
// ALIGN:      } : tensor<10xf32> to tensor<12xf32>
// ALIGN:      %[[PC:.*]] = tensor.pad %[[C]] low[0] high[1]
// ALIGN:      } : tensor<3xf32> to tensor<4xf32>
// ALIGN-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[PA]], %[[PB]], %[[PC]] : (tensor<8xf32>, tensor<12xf32>, tensor<4xf32>) -> tensor<24xf32>
// ALIGN-NEXT: %[[AG:.*]] = fsdp.all_gather %[[IN]] {{.*}} : tensor<24xf32> -> tensor<96xf32>
// ALIGN-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[AG]] {{\[\[}}0, 1]] output_shape [4, 24]
// ALIGN-NEXT: tensor.extract_slice %[[ROWS]][0, 0] [4, 6] [1, 1] : tensor<4x24xf32> to tensor<4x6xf32>
// ALIGN-NEXT: tensor.collapse_shape
// ALIGN-NEXT: tensor.extract_slice %[[ROWS]][0, 8] [4, 10] [1, 1] : tensor<4x24xf32> to tensor<4x10xf32>
// ALIGN-NEXT: tensor.collapse_shape
// ALIGN-NEXT: tensor.extract_slice %[[ROWS]][0, 20] [4, 3] [1, 1] : tensor<4x24xf32> to tensor<4x3xf32>
// ALIGN-NEXT: tensor.collapse_shape
// ALIGN:      %[[G:.*]]:3 = "model.grads"
// ALIGN-NEXT: %[[EA:.*]] = tensor.expand_shape %[[G]]#0 {{\[\[}}0, 1]] output_shape [4, 6]
// ALIGN:      %[[QA:.*]] = tensor.pad %[[EA]] low[0, 0] high[0, 2]
// ALIGN:      } : tensor<4x6xf32> to tensor<4x8xf32>
// ALIGN:      } : tensor<4x10xf32> to tensor<4x12xf32>
// ALIGN:      } : tensor<4x3xf32> to tensor<4x4xf32>
// ALIGN-NEXT: %[[PACK:.*]] = tensor.concat dim(1) %[[QA]], {{.*}} : (tensor<4x8xf32>, tensor<4x12xf32>, tensor<4x4xf32>) -> tensor<4x24xf32>
// ALIGN-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[PACK]] {{\[\[}}0, 1]] : tensor<4x24xf32> into tensor<96xf32>
// ALIGN-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[FLAT]] {{.*}} : tensor<96xf32> -> tensor<24xf32>
// ALIGN-NEXT: tensor.extract_slice %[[RS]][0] [6] [1]
// ALIGN-NEXT: tensor.extract_slice %[[RS]][8] [10] [1]
// ALIGN-NEXT: tensor.extract_slice %[[RS]][20] [3] [1]
// ALIGN-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {{.*}} : tensor<24xf32> -> tensor<24xf32>
// ALIGN-NEXT: %[[GA:.*]] = tensor.extract_slice %[[AR]][0] [6] [1]
// ALIGN-NEXT: %[[GB:.*]] = tensor.extract_slice %[[AR]][8] [10] [1]
// ALIGN-NEXT: %[[GC:.*]] = tensor.extract_slice %[[AR]][20] [3] [1]
// ALIGN-NEXT: return %{{.*}}, %[[GA]], %[[GB]], %[[GC]]

// -----

// Chunk-cat members (Shard(1)) and an uneven Shard(0) member bucket like any
// other: the bucket hands each its own flat gathered buffer, which the
// unpack that expansion wrote reads unchanged.
fsdp.mesh @mesh [shard = 4]
func.func @chunk_cat_and_uneven(%w: tensor<18xf32>, %v: tensor<48xf32>) -> tensor<f32> {
  // Shard(1) of a 6x10 weight: slot 6x3, gathered [4, 6, 3], chunk-cat along dim 1.
  %gw = fsdp.all_gather %w over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<18xf32> -> tensor<72xf32>
  %slots = tensor.expand_shape %gw [[0, 1, 2]] output_shape [4, 6, 3] : tensor<72xf32> into tensor<4x6x3xf32>
  %s0 = tensor.extract_slice %slots[0, 0, 0] [1, 6, 3] [1, 1, 1] : tensor<4x6x3xf32> to tensor<6x3xf32>
  %s1 = tensor.extract_slice %slots[1, 0, 0] [1, 6, 3] [1, 1, 1] : tensor<4x6x3xf32> to tensor<6x3xf32>
  %s2 = tensor.extract_slice %slots[2, 0, 0] [1, 6, 3] [1, 1, 1] : tensor<4x6x3xf32> to tensor<6x3xf32>
  %s3 = tensor.extract_slice %slots[3, 0, 0] [1, 6, 1] [1, 1, 1] : tensor<4x6x3xf32> to tensor<6x1xf32>
  %full_w = tensor.concat dim(1) %s0, %s1, %s2, %s3 : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x1xf32>) -> tensor<6x10xf32>
  // Shard(0) of a 10x16 weight, ceil: slot 3x16, the first 10 of 12 rows.
  %gv = fsdp.all_gather %v over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<48xf32> -> tensor<192xf32>
  %rows = tensor.expand_shape %gv [[0, 1]] output_shape [12, 16] : tensor<192xf32> into tensor<12x16xf32>
  %full_v = tensor.extract_slice %rows[0, 0] [10, 16] [1, 1] : tensor<12x16xf32> to tensor<10x16xf32>
  %loss = "model.loss"(%full_w, %full_v) : (tensor<6x10xf32>, tensor<10x16xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @chunk_cat_and_uneven(
// CHECK-SAME: %[[W:[^:]*]]: tensor<18xf32>, %[[V:[^:]*]]: tensor<48xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[W]], %[[V]] : (tensor<18xf32>, tensor<48xf32>) -> tensor<66xf32>
// CHECK-NEXT: %[[AG:.*]] = fsdp.all_gather %[[IN]] over @mesh ["shard"] {fsdp.bucket_size = 2 : i64, {{.*}}} : tensor<66xf32> -> tensor<264xf32>
// CHECK-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[AG]] {{\[\[}}0, 1]] output_shape [4, 66]
// CHECK-NEXT: %[[BW:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [4, 18] [1, 1] : tensor<4x66xf32> to tensor<4x18xf32>
// CHECK-NEXT: %[[FW:.*]] = tensor.collapse_shape %[[BW]] {{\[\[}}0, 1]] : tensor<4x18xf32> into tensor<72xf32>
// CHECK-NEXT: %[[BV:.*]] = tensor.extract_slice %[[ROWS]][0, 18] [4, 48] [1, 1] : tensor<4x66xf32> to tensor<4x48xf32>
// CHECK-NEXT: %[[FV:.*]] = tensor.collapse_shape %[[BV]] {{\[\[}}0, 1]] : tensor<4x48xf32> into tensor<192xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[FW]] {{\[\[}}0, 1, 2]] output_shape [4, 6, 3]
// CHECK:      tensor.extract_slice %[[SLOTS]][3, 0, 0] [1, 6, 1] [1, 1, 1]
// CHECK-NEXT: %[[FULLW:.*]] = tensor.concat dim(1)
// CHECK-NEXT: %[[R:.*]] = tensor.expand_shape %[[FV]] {{\[\[}}0, 1]] output_shape [12, 16]
// CHECK-NEXT: %[[FULLV:.*]] = tensor.extract_slice %[[R]][0, 0] [10, 16] [1, 1]
// CHECK-NEXT: "model.loss"(%[[FULLW]], %[[FULLV]])

// -----

// What must not fuse: element types (f32 / bf16), groups (shard / replicate
// axes), phases (forward / backward), reductions (avg / sum) and, in unit
// mode, units. Each pair below shares everything but one of these, so only
// the two f32 forward gathers of u0 over "shard" form a bucket; every other
// collective is left as it was, with no copies.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @must_not_fuse(%a: tensor<4xf32>, %b: tensor<4xf32>, %h: tensor<4xbf16>, %r: tensor<4xf32>,
                         %u: tensor<4xf32>, %g0: tensor<16xf32>, %g1: tensor<16xf32>) -> tensor<f32> {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xf32> -> tensor<16xf32>
  %gb = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xf32> -> tensor<16xf32>
  %gh = fsdp.all_gather %h over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xbf16> -> tensor<16xbf16>
  %gr = fsdp.all_gather %r over @mesh ["replicate"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xf32> -> tensor<8xf32>
  %gu = fsdp.all_gather %u over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u1">} : tensor<4xf32> -> tensor<16xf32>
  %gk = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<4xf32> -> tensor<16xf32>
  %r0 = fsdp.reduce_scatter %g0 over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<16xf32> -> tensor<4xf32>
  %r1 = fsdp.reduce_scatter %g1 over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<16xf32> -> tensor<4xf32>
  %loss = "model.loss"(%ga, %gb, %gh, %gr, %gu, %gk, %r0, %r1) : (tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>, tensor<8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @must_not_fuse(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[H:[^:]*]]: tensor<4xbf16>, %[[R:[^:]*]]: tensor<4xf32>, %[[U:[^:]*]]: tensor<4xf32>, %[[G0:[^:]*]]: tensor<16xf32>, %[[G1:[^:]*]]: tensor<16xf32>
// CHECK-NEXT: tensor.concat dim(0) %[[A]], %[[B]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<8xf32> -> tensor<32xf32>
// CHECK-NOT:  tensor.concat
// CHECK:      fsdp.all_gather %[[H]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xbf16> -> tensor<16xbf16>
// CHECK-NEXT: fsdp.all_gather %[[R]] over @mesh ["replicate"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: fsdp.all_gather %[[U]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u1">} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: fsdp.all_gather %[[A]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: fsdp.reduce_scatter %[[G0]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">}
// CHECK-NEXT: fsdp.reduce_scatter %[[G1]] over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">}
// CHECK-NEXT: "model.loss"

// In greedy mode units do not matter: the u1 gather joins the f32 forward
// bucket over "shard" (the other collectives still differ in something that
// must match).
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives=mode=greedy \
// RUN:   | FileCheck %s --check-prefix=GREEDY
// GREEDY-LABEL: func.func @must_not_fuse(
// GREEDY-SAME: %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[H:[^:]*]]: tensor<4xbf16>, %[[R:[^:]*]]: tensor<4xf32>, %[[U:[^:]*]]: tensor<4xf32>
// GREEDY-NEXT: tensor.concat dim(0) %[[A]], %[[B]], %[[U]] : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<12xf32>
// The bucket carries no unit: its members come from two.
// GREEDY-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 3 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<12xf32> -> tensor<48xf32>
// GREEDY-NOT:  tensor.concat
// GREEDY:      "model.loss"

// -----

// Greedy mode splits a group in program order: a bucket is closed when the
// next member would take it past bucket-bytes (of one rank's input) or
// past max-count members; a bucket of one is left alone.
fsdp.mesh @mesh [shard = 2]
func.func @greedy_limits(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>, %d: tensor<8xf32>, %e: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32xf32>) {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<8xf32> -> tensor<16xf32>
  %gb = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<8xf32> -> tensor<16xf32>
  %gc = fsdp.all_gather %c over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l2">} : tensor<8xf32> -> tensor<16xf32>
  %gd = fsdp.all_gather %d over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l3">} : tensor<8xf32> -> tensor<16xf32>
  %ge = fsdp.all_gather %e over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l4">} : tensor<16xf32> -> tensor<32xf32>
  return %ga, %gb, %gc, %gd, %ge : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32xf32>
}
// Inputs are 32, 32, 32, 32 and 64 bytes.
// bucket-bytes = 64: [a, b], [c, d], [e] alone.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="mode=greedy bucket-bytes=64" \
// RUN:   | FileCheck %s --check-prefix=BYTES
// BYTES-LABEL: func.func @greedy_limits(
// BYTES-SAME: %[[A:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<8xf32>, %[[D:[^:]*]]: tensor<8xf32>, %[[E:[^:]*]]: tensor<16xf32>
// BYTES-NEXT: tensor.concat dim(0) %[[A]], %[[B]] : {{.*}} -> tensor<16xf32>
// BYTES-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<16xf32> -> tensor<32xf32>
// BYTES:      tensor.concat dim(0) %[[C]], %[[D]] : {{.*}} -> tensor<16xf32>
// BYTES-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<16xf32> -> tensor<32xf32>
// BYTES:      fsdp.all_gather %[[E]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l4">} : tensor<16xf32> -> tensor<32xf32>
// BYTES-NEXT: return
// bucket-bytes = 95: [a, b], [c, d] (96 would not fit), [e].
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="mode=greedy bucket-bytes=95" \
// RUN:   | FileCheck %s --check-prefix=BYTES
// bucket-bytes = 96: [a, b, c], [d, e].
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="mode=greedy bucket-bytes=96" \
// RUN:   | FileCheck %s --check-prefix=BYTES96
// BYTES96-LABEL: func.func @greedy_limits(
// BYTES96-SAME: %[[A:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<8xf32>, %[[D:[^:]*]]: tensor<8xf32>, %[[E:[^:]*]]: tensor<16xf32>
// BYTES96-NEXT: tensor.concat dim(0) %[[A]], %[[B]], %[[C]] : {{.*}} -> tensor<24xf32>
// BYTES96-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 3 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<24xf32> -> tensor<48xf32>
// BYTES96:      tensor.concat dim(0) %[[D]], %[[E]] : {{.*}} -> tensor<24xf32>
// BYTES96-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<24xf32> -> tensor<48xf32>
// max-count = 3: [a, b, c], [d, e].
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="mode=greedy max-count=3" \
// RUN:   | FileCheck %s --check-prefix=BYTES96
// max-count = 4 and bucket-bytes = 1000: [a, b, c, d], [e] alone.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="mode=greedy max-count=4 bucket-bytes=1000" \
// RUN:   | FileCheck %s --check-prefix=COUNT4
// COUNT4-LABEL: func.func @greedy_limits(
// COUNT4-SAME: %[[A:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<8xf32>, %[[D:[^:]*]]: tensor<8xf32>, %[[E:[^:]*]]: tensor<16xf32>
// COUNT4-NEXT: tensor.concat dim(0) %[[A]], %[[B]], %[[C]], %[[D]] : {{.*}} -> tensor<32xf32>
// COUNT4-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket_size = 4 : i64, fsdp.origin = #fsdp.origin<phase = forward>} : tensor<32xf32> -> tensor<64xf32>
// COUNT4:      fsdp.all_gather %[[E]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l4">}
// COUNT4-NEXT: return
// In unit mode (the default) every gather is alone in its unit: nothing changes.
// CHECK-LABEL: func.func @greedy_limits(
// CHECK-NOT:   tensor.concat
// CHECK-NOT:   fsdp.bucket_size
// CHECK:       return

// -----

// mode=none changes nothing.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives=mode=none \
// RUN:   | FileCheck %s --check-prefix=NONE
fsdp.mesh @mesh [shard = 4]
func.func @mode_none(%a: tensor<6xf32>, %b: tensor<10xf32>) -> (tensor<24xf32>, tensor<40xf32>) {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
  %gb = fsdp.all_gather %b over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<10xf32> -> tensor<40xf32>
  return %ga, %gb : tensor<24xf32>, tensor<40xf32>
}
// NONE-LABEL: func.func @mode_none(
// NONE-SAME: %[[A:[^:]*]]: tensor<6xf32>, %[[B:[^:]*]]: tensor<10xf32>
// NONE-NEXT: %[[GA:.*]] = fsdp.all_gather %[[A]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
// NONE-NEXT: %[[GB:.*]] = fsdp.all_gather %[[B]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<10xf32> -> tensor<40xf32>
// NONE-NEXT: return %[[GA]], %[[GB]]
// CHECK-LABEL: func.func @mode_none(
// CHECK: fsdp.bucket_size = 2

// -----

// A unit with one parameter: its collectives stay exactly as they were (no
// concat, no slices, no bucket marker). Untagged collectives (written by
// the user, e.g. an all-reduced loss) are never bucketed.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @single(%a: tensor<6xf32>, %l: tensor<f32>) -> (tensor<f32>, tensor<6xf32>, tensor<f32>) {
  %ga = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
  %loss = "model.loss"(%ga) : (tensor<24xf32>) -> tensor<f32>
  %da = "model.grad"(%loss) : (tensor<f32>) -> tensor<24xf32>
  %ra = fsdp.reduce_scatter %da over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<24xf32> -> tensor<6xf32>
  %aa = fsdp.all_reduce %ra over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<6xf32> -> tensor<6xf32>
  %l0 = fsdp.all_reduce %l over @mesh ["replicate", "shard"] avg : tensor<f32> -> tensor<f32>
  return %loss, %aa, %l0 : tensor<f32>, tensor<6xf32>, tensor<f32>
}
// CHECK-LABEL: func.func @single(
// CHECK-SAME: %[[A:[^:]*]]: tensor<6xf32>
// CHECK-NEXT: %[[GA:.*]] = fsdp.all_gather %[[A]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<6xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[LOSS:.*]] = "model.loss"(%[[GA]])
// CHECK-NEXT: %[[DA:.*]] = "model.grad"
// CHECK-NEXT: %[[RA:.*]] = fsdp.reduce_scatter %[[DA]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">}
// CHECK-NEXT: %[[AA:.*]] = fsdp.all_reduce %[[RA]] over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">}
// CHECK-NEXT: %[[L:.*]] = fsdp.all_reduce %{{.*}} over @mesh ["replicate", "shard"] avg : tensor<f32> -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]], %[[AA]], %[[L]]

// -----

// Gather inputs computed late (a cast to the gather type, as param-dtype
// writes) are moved up to the bucket, which is issued at the first gather.
fsdp.mesh @mesh [shard = 2]
func.func @hoist_inputs(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<f32> {
  %ha = arith.truncf %a : tensor<4xf32> to tensor<4xbf16>
  %ga = fsdp.all_gather %ha over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xbf16> -> tensor<8xbf16>
  %y = "model.use"(%ga) : (tensor<8xbf16>) -> tensor<f32>
  %hb = arith.truncf %b : tensor<4xf32> to tensor<4xbf16>
  %gb = fsdp.all_gather %hb over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "u0">} : tensor<4xbf16> -> tensor<8xbf16>
  %loss = "model.loss"(%gb, %y) : (tensor<8xbf16>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @hoist_inputs(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>
// CHECK-NEXT: %[[HA:.*]] = arith.truncf %[[A]]
// CHECK-NEXT: %[[HB:.*]] = arith.truncf %[[B]]
// CHECK-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[HA]], %[[HB]] : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<8xbf16>
// CHECK-NEXT: fsdp.all_gather %[[IN]] {{.*}} : tensor<8xbf16> -> tensor<16xbf16>
// CHECK:      "model.use"
// CHECK:      "model.loss"

// -----

// A reduction whose input depends on another member's result cannot join
// it in one bucket: the pass says why and leaves both alone.
fsdp.mesh @mesh [shard = 2]
func.func @dependent(%g: tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r0 = fsdp.reduce_scatter %g over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<8xf32> -> tensor<4xf32>
  %g1 = "model.grad"(%r0) : (tensor<4xf32>) -> tensor<8xf32>
  %r1 = fsdp.reduce_scatter %g1 over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<8xf32> -> tensor<4xf32>
  return %r0, %r1 : tensor<4xf32>, tensor<4xf32>
}
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REMARK
// REMARK: remark: not bucketed: a member's input depends on another member's result
// CHECK-LABEL: func.func @dependent(
// CHECK-NEXT: fsdp.reduce_scatter
// CHECK-NEXT: "model.grad"
// CHECK-NEXT: fsdp.reduce_scatter
// CHECK-NEXT: return

// -----

// An all-reduce bucket reads its members' common source as is only when
// each member is the slice at its own offset in the bucket. Here both
// members are slices of one tensor of the bucket's length (13), but at
// offsets 7 and 0 where the bucket puts them at 0 and 6: the bucket must
// pack them, not reduce the source in its own order.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @swapped_slices(%s: tensor<13xf32>) -> (tensor<6xf32>, tensor<7xf32>) {
  %a = tensor.extract_slice %s[7] [6] [1] : tensor<13xf32> to tensor<6xf32>
  %b = tensor.extract_slice %s[0] [7] [1] : tensor<13xf32> to tensor<7xf32>
  %ra = fsdp.all_reduce %a over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<6xf32> -> tensor<6xf32>
  %rb = fsdp.all_reduce %b over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<7xf32> -> tensor<7xf32>
  return %ra, %rb : tensor<6xf32>, tensor<7xf32>
}
// CHECK-LABEL: func.func @swapped_slices(
// CHECK-SAME: %[[S:[^:]*]]: tensor<13xf32>
// CHECK-NEXT: %[[A:.*]] = tensor.extract_slice %[[S]][7] [6] [1]
// CHECK-NEXT: %[[B:.*]] = tensor.extract_slice %[[S]][0] [7] [1]
// CHECK-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[A]], %[[B]] : (tensor<6xf32>, tensor<7xf32>) -> tensor<13xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[IN]] over @mesh ["replicate"] avg {fsdp.bucket_size = 2 : i64, {{.*}}} : tensor<13xf32> -> tensor<13xf32>
// CHECK-NEXT: %[[RA:.*]] = tensor.extract_slice %[[AR]][0] [6] [1]
// CHECK-NEXT: %[[RB:.*]] = tensor.extract_slice %[[AR]][6] [7] [1]
// CHECK-NEXT: return %[[RA]], %[[RB]]

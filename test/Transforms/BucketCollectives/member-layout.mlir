// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives=member-layout=true | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-bucket-collectives="member-layout=true alignment=4" \
// RUN:   | FileCheck %s --check-prefix=ALIGN

// member-layout: the bucketed all-gather and reduce-scatter carry
// `members [L_0, ...]`, so every member's gathered parameter and packed
// gradient is one contiguous block (k * L_i elements at k * off_i).
// One unit, three parameters of 6, 10 and 3 elements per rank over 4 ranks
// (L = 19, offsets 0, 6, 16): the gathered 76 elements hold parameter a's
// 24, then b's 40, then c's 12. The reduce-scatter input is the gradients
// one after the other, unreshaped; its output, and the HSDP all-reduce
// that reads it, keep the per-rank layout.
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
// CHECK-NEXT: %[[AG:.*]] = fsdp.all_gather %[[IN]] over @mesh ["shard"] members [6, 10, 3] {{.*}} : tensor<19xf32> -> tensor<76xf32>
// CHECK-NEXT: %[[FA:.*]] = tensor.extract_slice %[[AG]][0] [24] [1] : tensor<76xf32> to tensor<24xf32>
// CHECK-NEXT: %[[FB:.*]] = tensor.extract_slice %[[AG]][24] [40] [1] : tensor<76xf32> to tensor<40xf32>
// CHECK-NEXT: %[[FC:.*]] = tensor.extract_slice %[[AG]][64] [12] [1] : tensor<76xf32> to tensor<12xf32>
// CHECK-NEXT: %[[Y0:.*]] = "model.use"(%[[FA]],
// CHECK-NEXT: %[[Y1:.*]] = "model.use"(%[[FB]], %[[Y0]])
// CHECK-NEXT: %[[LOSS:.*]] = "model.loss"(%[[FC]], %[[Y1]])
// CHECK-NEXT: %[[DA:.*]] = "model.grad"
// CHECK-NEXT: %[[DB:.*]] = "model.grad"
// CHECK-NEXT: %[[DC:.*]] = "model.grad"
// CHECK-NEXT: %[[PACK:.*]] = tensor.concat dim(0) %[[DA]], %[[DB]], %[[DC]] : (tensor<24xf32>, tensor<40xf32>, tensor<12xf32>) -> tensor<76xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[PACK]] over @mesh ["shard"] avg members [6, 10, 3] {{.*}} : tensor<76xf32> -> tensor<19xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][0] [6] [1] : tensor<19xf32> to tensor<6xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][6] [10] [1] : tensor<19xf32> to tensor<10xf32>
// CHECK-NEXT: tensor.extract_slice %[[RS]][16] [3] [1] : tensor<19xf32> to tensor<3xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {{{.*}}} : tensor<19xf32> -> tensor<19xf32>
// CHECK-NEXT: %[[GA:.*]] = tensor.extract_slice %[[AR]][0] [6] [1]
// CHECK-NEXT: %[[GB:.*]] = tensor.extract_slice %[[AR]][6] [10] [1]
// CHECK-NEXT: %[[GC:.*]] = tensor.extract_slice %[[AR]][16] [3] [1]
// CHECK-NEXT: return %[[LOSS]], %[[GA]], %[[GB]], %[[GC]]

// With alignment = 4 the members are padded to 8, 12 and 4 (offsets 0, 8,
// 20; L = 24): the counts the runtime sees are the padded ones, a member's
// block is [4, 8] etc. and its unpadded columns are sliced out (a strided
// view, as in the rank-major layout); each gradient is viewed as rows,
// padded and flattened into its block.
// ALIGN-LABEL: func.func @mixed_sizes(
// ALIGN:      %[[AG:.*]] = fsdp.all_gather %{{.*}} members [8, 12, 4] {{.*}} : tensor<24xf32> -> tensor<96xf32>
// ALIGN-NEXT: %[[BA:.*]] = tensor.extract_slice %[[AG]][0] [32] [1] : tensor<96xf32> to tensor<32xf32>
// ALIGN-NEXT: %[[RA:.*]] = tensor.expand_shape %[[BA]] {{\[\[}}0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
// ALIGN-NEXT: %[[SA:.*]] = tensor.extract_slice %[[RA]][0, 0] [4, 6] [1, 1] : tensor<4x8xf32> to tensor<4x6xf32>
// ALIGN-NEXT: tensor.collapse_shape %[[SA]] {{\[\[}}0, 1]] : tensor<4x6xf32> into tensor<24xf32>
// ALIGN-NEXT: tensor.extract_slice %[[AG]][32] [48] [1] : tensor<96xf32> to tensor<48xf32>
// ALIGN:      tensor.extract_slice %[[AG]][80] [16] [1] : tensor<96xf32> to tensor<16xf32>
// ALIGN:      %[[DA:.*]] = "model.grad"
// ALIGN:      %[[EA:.*]] = tensor.expand_shape %[[DA]] {{\[\[}}0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
// ALIGN:      %[[PA:.*]] = tensor.pad %[[EA]] low[0, 0] high[0, 2]
// ALIGN:      } : tensor<4x6xf32> to tensor<4x8xf32>
// ALIGN-NEXT: %[[QA:.*]] = tensor.collapse_shape %[[PA]] {{\[\[}}0, 1]] : tensor<4x8xf32> into tensor<32xf32>
// ALIGN:      %[[PACK:.*]] = tensor.concat dim(0) %[[QA]], %{{.*}}, %{{.*}} : (tensor<32xf32>, tensor<48xf32>, tensor<16xf32>) -> tensor<96xf32>
// ALIGN-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[PACK]] {{.*}} members [8, 12, 4] {{.*}} : tensor<96xf32> -> tensor<24xf32>
// ALIGN-NEXT: tensor.extract_slice %[[RS]][0] [6] [1]
// ALIGN-NEXT: tensor.extract_slice %[[RS]][8] [10] [1]
// ALIGN-NEXT: tensor.extract_slice %[[RS]][20] [3] [1]

// -----

// All-reduce buckets have one layout: no members (DDP parameters).
fsdp.mesh @mesh [replicate = 4]
func.func @all_reduce_only(%a: tensor<6xf32>, %b: tensor<10xf32>) -> (tensor<6xf32>, tensor<10xf32>) {
  %ra = fsdp.all_reduce %a over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<6xf32> -> tensor<6xf32>
  %rb = fsdp.all_reduce %b over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "u0">} : tensor<10xf32> -> tensor<10xf32>
  return %ra, %rb : tensor<6xf32>, tensor<10xf32>
}
// CHECK-LABEL: func.func @all_reduce_only(
// CHECK: %[[AR:.*]] = fsdp.all_reduce %{{.*}} over @mesh ["replicate"] avg {fsdp.bucket_size = 2 : i64, {{.*}}} : tensor<16xf32> -> tensor<16xf32>
// CHECK-NOT: members
// CHECK: return

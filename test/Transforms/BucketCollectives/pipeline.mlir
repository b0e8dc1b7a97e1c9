// Through the pipeline (partition, expand, canonicalize, bucket,
// canonicalize; no scheduling): unit "l0" holds an uneven ceil weight
// (10x16 over 4: slot 3x16, 48 elements) and a balanced bias (10 over 4:
// 3, 3, 2, 2 in slots of 3); unit "l1" holds one Shard(1) weight (6x10:
// slot 6x3). l0 gets one all-gather per phase (48 + 3 = 51 elements per
// rank), one reduce-scatter and one all-reduce that reads the
// reduce-scatter's output directly; l1's collectives stay single.
// The rank-major layout (CHECK) spells out every view; the default member
// layout (MEMBER) gathers each parameter contiguously.
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="schedule=false bucket-member-layout=false" | FileCheck %s
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline=schedule=false | FileCheck %s --check-prefix=MEMBER
// RUN: fsdp-opt %s --allow-unregistered-dialect --fsdp-pipeline="schedule=false bucket=none" | FileCheck %s --check-prefix=NONE

fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @step(%w0: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.unit = "l0"},
                %b0: tensor<10xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>, fsdp.unit = "l0"},
                %w1: tensor<6x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>, fsdp.unit = "l1"},
                %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}, tensor<10xf32> {fsdp.grad_of = 1}, tensor<6x10xf32> {fsdp.grad_of = 2}) {
  %h = "model.layer"(%x, %w0, %b0) : (tensor<2x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<2x10xf32>
  %loss = "model.loss"(%h, %w1) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<f32>
  %dw1 = "model.backward"(%loss, %w1) : (tensor<f32>, tensor<6x10xf32>) -> tensor<6x10xf32>
  %dw0, %db0 = "model.backward2"(%loss, %w0, %b0) : (tensor<f32>, tensor<10x16xf32>, tensor<10xf32>) -> (tensor<10x16xf32>, tensor<10xf32>)
  return %loss, %dw0, %db0, %dw1 : tensor<f32>, tensor<10x16xf32>, tensor<10xf32>, tensor<6x10xf32>
}
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<3x16xf32> {{.*}}, %[[B0:[^:]*]]: tensor<3xf32> {{.*}}, %[[W1:[^:]*]]: tensor<6x3xf32>
// Forward, l0: the weight's flat slot and the bias slot, one gather.
// CHECK:      %[[FW0:.*]] = tensor.collapse_shape %[[W0]] {{\[\[}}0, 1]] : tensor<3x16xf32> into tensor<48xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.concat dim(0) %[[FW0]], %[[B0]] : (tensor<48xf32>, tensor<3xf32>) -> tensor<51xf32>
// CHECK-NEXT: %[[AG:.*]] = fsdp.all_gather %[[IN]] over @mesh ["shard"] {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<51xf32> -> tensor<204xf32>
// CHECK-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[AG]] {{\[\[}}0, 1]] output_shape [4, 51]
// Weight: columns [0, 48) of every rank's row, viewed as 12x16, first 10 rows.
// CHECK-NEXT: %[[BW:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [4, 48] [1, 1] : tensor<4x51xf32> to tensor<4x48xf32>
// CHECK-NEXT: %[[FLATW:.*]] = tensor.collapse_shape %[[BW]] {{\[\[}}0, 1]] : tensor<4x48xf32> into tensor<192xf32>
// Bias: columns [48, 51) = one slot per rank, narrowed to 3, 3, 2, 2.
// CHECK-NEXT: %[[BB:.*]] = tensor.extract_slice %[[ROWS]][0, 48] [4, 3] [1, 1] : tensor<4x51xf32> to tensor<4x3xf32>
// CHECK-NEXT: %[[W12:.*]] = tensor.expand_shape %[[FLATW]] {{\[\[}}0, 1]] output_shape [12, 16]
// CHECK-NEXT: %[[FULLW:.*]] = tensor.extract_slice %[[W12]][0, 0] [10, 16] [1, 1]
// CHECK-NEXT: %[[S0:.*]] = tensor.extract_slice %[[BB]][0, 0] [1, 3] [1, 1]
// CHECK-NEXT: %[[S1:.*]] = tensor.extract_slice %[[BB]][1, 0] [1, 3] [1, 1]
// CHECK-NEXT: %[[S2:.*]] = tensor.extract_slice %[[BB]][2, 0] [1, 2] [1, 1]
// CHECK-NEXT: %[[S3:.*]] = tensor.extract_slice %[[BB]][3, 0] [1, 2] [1, 1]
// CHECK-NEXT: %[[FULLB:.*]] = tensor.concat dim(0) %[[S0]], %[[S1]], %[[S2]], %[[S3]] : {{.*}} -> tensor<10xf32>
// CHECK-NEXT: "model.layer"(%{{.*}}, %[[FULLW]], %[[FULLB]])
// l1 alone: its own gathers, no bucket.
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<18xf32> -> tensor<72xf32>
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">} : tensor<18xf32> -> tensor<72xf32>
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<51xf32> -> tensor<204xf32>
// Gradients of l0: the weight's padded rows (12x16 -> [4, 48]) and the
// bias slots ([4, 3]) side by side in a [4, 51] buffer.
// CHECK:      %[[GW:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [4, 48] : tensor<192xf32> into tensor<4x48xf32>
// CHECK-NEXT: %[[PACK:.*]] = tensor.concat dim(1) %[[GW]], %{{.*}} : (tensor<4x48xf32>, tensor<4x3xf32>) -> tensor<4x51xf32>
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[PACK]] {{\[\[}}0, 1]] : tensor<4x51xf32> into tensor<204xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[FLAT]] over @mesh ["shard"] avg {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<204xf32> -> tensor<51xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {fsdp.bucket_size = 2 : i64, fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<51xf32> -> tensor<51xf32>
// CHECK-NEXT: %[[GW0:.*]] = tensor.extract_slice %[[AR]][0] [48] [1]
// CHECK-NEXT: %[[GB0:.*]] = tensor.extract_slice %[[AR]][48] [3] [1]
// CHECK-NEXT: %[[GW0S:.*]] = tensor.expand_shape %[[GW0]] {{\[\[}}0, 1]] output_shape [3, 16]
// CHECK:      %[[RS1:.*]] = fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">} : tensor<72xf32> -> tensor<18xf32>
// CHECK-NEXT: %[[AR1:.*]] = fsdp.all_reduce %[[RS1]] over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">}
// CHECK-NEXT: %[[GW1:.*]] = tensor.expand_shape %[[AR1]]
// CHECK-NEXT: return %{{.*}}, %[[GW0S]], %[[GB0]], %[[GW1]]

// Without bucketing: one all-gather per parameter and phase.
// NONE-LABEL: func.func @step(
// NONE-COUNT-6: fsdp.all_gather
// NONE-NOT:     fsdp.bucket_size
// NONE-NOT:     tensor.concat dim(1) %{{.*}} : (tensor<4x48xf32>, tensor<4x3xf32>)

// MEMBER-LABEL: func.func @step(
// MEMBER:      %[[AG:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] members [48, 3] {{.*}} : tensor<51xf32> -> tensor<204xf32>
// The weight: the first 192 gathered elements, viewed as 12x16; its first
// 10 rows are a contiguous prefix (no copy). The bias: the next 12, [4, 3].
// MEMBER-NEXT: %[[W:.*]] = tensor.extract_slice %[[AG]][0] [192] [1] : tensor<204xf32> to tensor<192xf32>
// MEMBER-NEXT: %[[B:.*]] = tensor.extract_slice %[[AG]][192] [12] [1] : tensor<204xf32> to tensor<12xf32>
// MEMBER-NEXT: %[[W12:.*]] = tensor.expand_shape %[[W]] {{\[\[}}0, 1]] output_shape [12, 16]
// MEMBER-NEXT: tensor.extract_slice %[[W12]][0, 0] [10, 16] [1, 1]
// MEMBER-NEXT: tensor.expand_shape %[[B]] {{\[\[}}0, 1]] output_shape [4, 3]
// l1's single gathers are unchanged: no members.
// MEMBER:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<18xf32> -> tensor<72xf32>
// The gradients one after the other: the weight's 192, the bias's 12.
// MEMBER:      %[[PACK:.*]] = tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<192xf32>, tensor<12xf32>) -> tensor<204xf32>
// MEMBER-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[PACK]] over @mesh ["shard"] avg members [48, 3] {{.*}} : tensor<204xf32> -> tensor<51xf32>
// MEMBER-NEXT: fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {{{.*}}} : tensor<51xf32> -> tensor<51xf32>

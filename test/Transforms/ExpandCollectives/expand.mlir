// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-expand-collectives | FileCheck %s

// The expanded IR is plain upstream IR around flat fsdp collectives: upstream
// mlir-opt parses and verifies every case (the fsdp ops are opaque to it).
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-expand-collectives -mlir-print-op-generic \
// RUN:   | mlir-opt -split-input-file --allow-unregistered-dialect -o /dev/null

// The only fsdp ops left are the mesh and the three flat collectives.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-expand-collectives -mlir-print-op-generic \
// RUN:   | grep -o '"fsdp\.[a-z_.]*"' | sort -u | FileCheck %s --check-prefix=OPS
// OPS:      "fsdp.all_gather"
// OPS-NEXT: "fsdp.all_reduce"
// OPS-NEXT: "fsdp.mesh"
// OPS-NEXT: "fsdp.reduce_scatter"
// OPS-NOT:  fsdp

// As in the fsdp-partition tests, "model.forward" computes the loss and
// "model.backward" the gradient.

// Shard(0), even: the slot is flattened (a view), gathered, and viewed as the
// full tensor: no copy besides the collective. The gradient is flattened,
// reduce-scattered and viewed as the slot.
fsdp.mesh @mesh [shard = 4]
func.func @even_shard0(%w: tensor<16x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<16x8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %loss, %dw : tensor<f32>, tensor<16x8xf32>
}
// CHECK-LABEL: func.func @even_shard0(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x8xf32>
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[W]] {{\[\[}}0, 1]] : tensor<4x8xf32> into tensor<32xf32>
// CHECK-NEXT: %[[ALL:.*]] = fsdp.all_gather %[[FLAT]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<32xf32> -> tensor<128xf32>
// CHECK-NEXT: %[[FULL:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1]] output_shape [16, 8] : tensor<128xf32> into tensor<16x8xf32>
// CHECK-NEXT: %[[LOSS:.*]] = "model.forward"(%{{.*}}, %[[FULL]])
// CHECK-NEXT: tensor.collapse_shape %[[W]]
// CHECK-NEXT: fsdp.all_gather {{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<32xf32> -> tensor<128xf32>
// CHECK-NEXT: %[[FULL2:.*]] = tensor.expand_shape
// CHECK-NEXT: %[[DW:.*]] = "model.backward"(%{{.*}}, %[[FULL2]])
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[DW]] {{\[\[}}0, 1]] : tensor<16x8xf32> into tensor<128xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<128xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[G:.*]] = tensor.expand_shape %[[RS]] {{\[\[}}0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[G]] : tensor<f32>, tensor<4x8xf32>

// -----

// A 1-D parameter, even: no reshape at all.
fsdp.mesh @mesh [shard = 4]
func.func @even_1d(%b: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<f32> {fsdp.loss}, tensor<8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%b) : (tensor<8xf32>) -> tensor<f32>
  %db = "model.backward"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  return %loss, %db : tensor<f32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @even_1d(
// CHECK-SAME: %[[B:[^:]*]]: tensor<2xf32>
// CHECK-NEXT: %[[ALL:.*]] = fsdp.all_gather %[[B]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: "model.forward"(%[[ALL]])
// CHECK-NEXT: %[[ALL2:.*]] = fsdp.all_gather %[[B]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[DB:.*]] = "model.backward"(%[[ALL2]])
// CHECK-NEXT: %[[G:.*]] = fsdp.reduce_scatter %[[DB]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<8xf32> -> tensor<2xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]]

// -----

// Shard(0), uneven, ceil: 10 rows over 4, slot 3. Rank 3 sends 1 true row
// and 2 zero rows; the gathered 12x16 holds the tensor followed by the
// padding, so the parameter is a view of its first 10 rows. The gradient is
// zero-padded by 2 rows (12 = 4 x 3) before the reduce-scatter.
fsdp.mesh @mesh [shard = 4]
func.func @uneven_ceil(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @uneven_ceil(
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x16xf32>
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[W]] {{\[\[}}0, 1]] : tensor<3x16xf32> into tensor<48xf32>
// CHECK-NEXT: %[[ALL:.*]] = fsdp.all_gather %[[FLAT]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<48xf32> -> tensor<192xf32>
// CHECK-NEXT: %[[ROWS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1]] output_shape [12, 16] : tensor<192xf32> into tensor<12x16xf32>
// CHECK-NEXT: %[[FULL:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [10, 16] [1, 1] : tensor<12x16xf32> to tensor<10x16xf32>
// CHECK-NEXT: "model.forward"(%{{.*}}, %[[FULL]])
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[PAD:.*]] = tensor.pad %[[DW]] low[0, 0] high[2, 0] {
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   tensor.yield %[[ZERO]] : f32
// CHECK-NEXT: } : tensor<10x16xf32> to tensor<12x16xf32>
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[PAD]] {{\[\[}}0, 1]] : tensor<12x16xf32> into tensor<192xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[G:.*]] = tensor.expand_shape %[[RS]] {{\[\[}}0, 1]] output_shape [3, 16] : tensor<48xf32> into tensor<3x16xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]]

// -----

// Shard(0), uneven, balanced: ranks hold 3, 3, 2, 2 rows in slots of 3, so
// the slots are not a prefix of the gathered rows; each slot is narrowed to
// its true size and the pieces concatenated. The gradient is packed the
// other way: rows [0,3), [3,6), [6,8), [8,10) into slots 0..3 of a zeroed
// 4x3x16 buffer.
fsdp.mesh @mesh [shard = 4]
func.func @uneven_balanced(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>], policy = balanced>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @uneven_balanced(
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<48xf32> -> tensor<192xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2]] output_shape [4, 3, 16] : tensor<192xf32> into tensor<4x3x16xf32>
// CHECK-NEXT: %[[S0:.*]] = tensor.extract_slice %[[SLOTS]][0, 0, 0] [1, 3, 16] [1, 1, 1] : tensor<4x3x16xf32> to tensor<3x16xf32>
// CHECK-NEXT: %[[S1:.*]] = tensor.extract_slice %[[SLOTS]][1, 0, 0] [1, 3, 16] [1, 1, 1] : tensor<4x3x16xf32> to tensor<3x16xf32>
// CHECK-NEXT: %[[S2:.*]] = tensor.extract_slice %[[SLOTS]][2, 0, 0] [1, 2, 16] [1, 1, 1] : tensor<4x3x16xf32> to tensor<2x16xf32>
// CHECK-NEXT: %[[S3:.*]] = tensor.extract_slice %[[SLOTS]][3, 0, 0] [1, 2, 16] [1, 1, 1] : tensor<4x3x16xf32> to tensor<2x16xf32>
// CHECK-NEXT: %[[FULL:.*]] = tensor.concat dim(0) %[[S0]], %[[S1]], %[[S2]], %[[S3]] : {{.*}} -> tensor<10x16xf32>
// CHECK-NEXT: "model.forward"(%{{.*}}, %[[FULL]])
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK-NEXT: %[[EMPTY:.*]] = tensor.empty() : tensor<4x3x16xf32>
// CHECK-NEXT: arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[EMPTY]] : tensor<4x3x16xf32>)
// CHECK-NEXT: %[[P0:.*]] = tensor.extract_slice %[[DW]][0, 0] [3, 16] [1, 1]
// CHECK-NEXT: %[[I0:.*]] = tensor.insert_slice %[[P0]] into %[[Z]][0, 0, 0] [1, 3, 16] [1, 1, 1]
// CHECK-NEXT: %[[P1:.*]] = tensor.extract_slice %[[DW]][3, 0] [3, 16] [1, 1]
// CHECK-NEXT: %[[I1:.*]] = tensor.insert_slice %[[P1]] into %[[I0]][1, 0, 0] [1, 3, 16] [1, 1, 1]
// CHECK-NEXT: %[[P2:.*]] = tensor.extract_slice %[[DW]][6, 0] [2, 16] [1, 1]
// CHECK-NEXT: %[[I2:.*]] = tensor.insert_slice %[[P2]] into %[[I1]][2, 0, 0] [1, 2, 16] [1, 1, 1]
// CHECK-NEXT: %[[P3:.*]] = tensor.extract_slice %[[DW]][8, 0] [2, 16] [1, 1]
// CHECK-NEXT: %[[I3:.*]] = tensor.insert_slice %[[P3]] into %[[I2]][3, 0, 0] [1, 2, 16] [1, 1, 1]
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[I3]] {{\[\[}}0, 1, 2]] : tensor<4x3x16xf32> into tensor<192xf32>
// CHECK-NEXT: fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>

// -----

// Shard(1), even: the gathered buffer is [k, 6, 2]; chunk-cat concatenates
// the 4 slots along dim 1.
fsdp.mesh @mesh [shard = 4]
func.func @even_shard1(%w: tensor<6x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}, %x: tensor<2x8xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x8xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %loss, %dw : tensor<f32>, tensor<6x8xf32>
}
// CHECK-LABEL: func.func @even_shard1(
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<12xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2]] output_shape [4, 6, 2] : tensor<48xf32> into tensor<4x6x2xf32>
// CHECK-NEXT: %[[S0:.*]] = tensor.extract_slice %[[SLOTS]][0, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[S1:.*]] = tensor.extract_slice %[[SLOTS]][1, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[S2:.*]] = tensor.extract_slice %[[SLOTS]][2, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[S3:.*]] = tensor.extract_slice %[[SLOTS]][3, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[FULL:.*]] = tensor.concat dim(1) %[[S0]], %[[S1]], %[[S2]], %[[S3]] : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: "model.forward"(%{{.*}}, %[[FULL]])
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK:      %[[Z:.*]] = linalg.fill {{.*}} -> tensor<4x6x2xf32>
// CHECK-NEXT: %[[P0:.*]] = tensor.extract_slice %[[DW]][0, 0] [6, 2] [1, 1]
// CHECK-NEXT: %[[I0:.*]] = tensor.insert_slice %[[P0]] into %[[Z]][0, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[P1:.*]] = tensor.extract_slice %[[DW]][0, 2] [6, 2] [1, 1]
// CHECK-NEXT: %[[I1:.*]] = tensor.insert_slice %[[P1]] into %[[I0]][1, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[P2:.*]] = tensor.extract_slice %[[DW]][0, 4] [6, 2] [1, 1]
// CHECK-NEXT: %[[I2:.*]] = tensor.insert_slice %[[P2]] into %[[I1]][2, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[P3:.*]] = tensor.extract_slice %[[DW]][0, 6] [6, 2] [1, 1]
// CHECK-NEXT: %[[I3:.*]] = tensor.insert_slice %[[P3]] into %[[I2]][3, 0, 0] [1, 6, 2] [1, 1, 1]
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[I3]] {{\[\[}}0, 1, 2]] : tensor<4x6x2xf32> into tensor<48xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<12xf32>
// CHECK-NEXT: tensor.expand_shape %[[RS]] {{\[\[}}0, 1]] output_shape [6, 2] : tensor<12xf32> into tensor<6x2xf32>

// -----

// Shard(1), uneven: 10 columns over 4, slots of 3; the last slot holds one
// true column. Chunk-cat narrows it; the pack puts column 9 alone in slot 3
// (its other two columns stay zero).
fsdp.mesh @mesh [shard = 4]
func.func @uneven_shard1(%w: tensor<6x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>]>}, %x: tensor<2x10xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<6x10xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
  return %loss, %dw : tensor<f32>, tensor<6x10xf32>
}
// CHECK-LABEL: func.func @uneven_shard1(
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<18xf32> -> tensor<72xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2]] output_shape [4, 6, 3] : tensor<72xf32> into tensor<4x6x3xf32>
// CHECK-NEXT: %[[S0:.*]] = tensor.extract_slice %[[SLOTS]][0, 0, 0] [1, 6, 3] [1, 1, 1]
// CHECK-NEXT: %[[S1:.*]] = tensor.extract_slice %[[SLOTS]][1, 0, 0] [1, 6, 3] [1, 1, 1]
// CHECK-NEXT: %[[S2:.*]] = tensor.extract_slice %[[SLOTS]][2, 0, 0] [1, 6, 3] [1, 1, 1]
// CHECK-NEXT: %[[S3:.*]] = tensor.extract_slice %[[SLOTS]][3, 0, 0] [1, 6, 1] [1, 1, 1] : tensor<4x6x3xf32> to tensor<6x1xf32>
// CHECK-NEXT: %[[FULL:.*]] = tensor.concat dim(1) %[[S0]], %[[S1]], %[[S2]], %[[S3]] : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x1xf32>) -> tensor<6x10xf32>
// CHECK-NEXT: "model.forward"(%{{.*}}, %[[FULL]])
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK:      linalg.fill {{.*}} -> tensor<4x6x3xf32>
// CHECK:      %[[P3:.*]] = tensor.extract_slice %[[DW]][0, 9] [6, 1] [1, 1] : tensor<6x10xf32> to tensor<6x1xf32>
// CHECK-NEXT: %[[I3:.*]] = tensor.insert_slice %[[P3]] into %{{.*}}[3, 0, 0] [1, 6, 1] [1, 1, 1] : tensor<6x1xf32> into tensor<4x6x3xf32>
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[I3]] {{\[\[}}0, 1, 2]] : tensor<4x6x3xf32> into tensor<72xf32>
// CHECK-NEXT: fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<72xf32> -> tensor<18xf32>

// -----

// StridedShard(0, 2) over 4 ranks, data-parallel only: dim 0 (16 rows) is
// viewed as [sf = 2, k = 4, 2]; rank i holds [:, i, :]. The gathered
// [k, sf, 2, 3] buffer is swapped to [sf, k, 2, 3] (a linalg.transpose) and
// collapsed; the gradient takes the inverse path.
fsdp.mesh @mesh [shard = 4]
func.func @strided(%w: tensor<16x3xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<0, 2>]>}, %x: tensor<2x3xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<16x3xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x3xf32>, tensor<16x3xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x3xf32>, tensor<16x3xf32>) -> tensor<16x3xf32>
  return %loss, %dw : tensor<f32>, tensor<16x3xf32>
}
// CHECK-LABEL: func.func @strided(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3xf32>
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<12xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[KS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2, 3]] output_shape [4, 2, 2, 3] : tensor<48xf32> into tensor<4x2x2x3xf32>
// CHECK-NEXT: %[[INIT:.*]] = tensor.empty() : tensor<2x4x2x3xf32>
// CHECK-NEXT: %[[SK:.*]] = linalg.transpose ins(%[[KS]] : tensor<4x2x2x3xf32>) outs(%[[INIT]] : tensor<2x4x2x3xf32>) permutation = [1, 0, 2, 3]
// CHECK-NEXT: %[[FULL:.*]] = tensor.collapse_shape %[[SK]] {{\[\[}}0, 1, 2], [3]] : tensor<2x4x2x3xf32> into tensor<16x3xf32>
// CHECK-NEXT: "model.forward"(%{{.*}}, %[[FULL]])
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK-NEXT: %[[GSK:.*]] = tensor.expand_shape %[[DW]] {{\[\[}}0, 1, 2], [3]] output_shape [2, 4, 2, 3] : tensor<16x3xf32> into tensor<2x4x2x3xf32>
// CHECK-NEXT: %[[GINIT:.*]] = tensor.empty() : tensor<4x2x2x3xf32>
// CHECK-NEXT: %[[GKS:.*]] = linalg.transpose ins(%[[GSK]] : tensor<2x4x2x3xf32>) outs(%[[GINIT]] : tensor<4x2x2x3xf32>) permutation = [1, 0, 2, 3]
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[GKS]] {{\[\[}}0, 1, 2, 3]] : tensor<4x2x2x3xf32> into tensor<48xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<12xf32>
// CHECK-NEXT: tensor.expand_shape %[[RS]] {{\[\[}}0, 1]] output_shape [4, 3] : tensor<12xf32> into tensor<4x3xf32>

// -----

// StridedShard on dim 1: the swap moves k next to the split columns.
fsdp.mesh @mesh [shard = 2]
func.func @strided_dim1(%w: tensor<3x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [strided_shard<1, 2>]>}) -> tensor<3x8xf32> {
  %y = "model.forward"(%w) : (tensor<3x8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
// CHECK-LABEL: func.func @strided_dim1(
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<12xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[KS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2, 3]] output_shape [2, 3, 2, 2] : tensor<24xf32> into tensor<2x3x2x2xf32>
// CHECK-NEXT: %[[INIT:.*]] = tensor.empty() : tensor<3x2x2x2xf32>
// CHECK-NEXT: %[[SK:.*]] = linalg.transpose ins(%[[KS]] : tensor<2x3x2x2xf32>) outs(%[[INIT]] : tensor<3x2x2x2xf32>) permutation = [1, 2, 0, 3]
// CHECK-NEXT: tensor.collapse_shape %[[SK]] {{\[\[}}0], [1, 2, 3]] : tensor<3x2x2x2xf32> into tensor<3x8xf32>

// -----

// HSDP: reduce-scatter over "shard", then all-reduce of the scattered slot
// over "replicate" (on the flat buffer, no reshape in between). The gather
// only involves the shard axis.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @hsdp(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @hsdp(
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<48xf32> -> tensor<192xf32>
// CHECK:      tensor.extract_slice %{{.*}}[0, 0] [10, 16] [1, 1] : tensor<12x16xf32> to tensor<10x16xf32>
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<192xf32>
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK:      %[[PAD:.*]] = tensor.pad %[[DW]] low[0, 0] high[2, 0]
// CHECK:      %[[GFLAT:.*]] = tensor.collapse_shape %[[PAD]] {{\[\[}}0, 1]] : tensor<12x16xf32> into tensor<192xf32>
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<192xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[RS]] over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<48xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[G:.*]] = tensor.expand_shape %[[AR]] {{\[\[}}0, 1]] output_shape [3, 16] : tensor<48xf32> into tensor<3x16xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]] : tensor<f32>, tensor<3x16xf32>

// -----

// Replicate-only (DDP): no gather; the gradient is all-reduced over every
// data-parallel axis at full size.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @replicate_only(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>}, %x: tensor<2x16xf32>)
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<f32>
  %dw = "model.backward"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<10x16xf32>
  return %loss, %dw : tensor<f32>, tensor<10x16xf32>
}
// CHECK-LABEL: func.func @replicate_only(
// CHECK-SAME: %[[W:[^:]*]]: tensor<10x16xf32>
// CHECK-NOT:  fsdp.all_gather
// CHECK:      %[[DW:.*]] = "model.backward"(%{{.*}}, %[[W]])
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[DW]] {{\[\[}}0, 1]] : tensor<10x16xf32> into tensor<160xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[GFLAT]] over @mesh ["replicate", "shard"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<160xf32> -> tensor<160xf32>
// CHECK-NEXT: %[[G:.*]] = tensor.expand_shape %[[AR]] {{\[\[}}0, 1]] output_shape [10, 16] : tensor<160xf32> into tensor<10x16xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]]

// -----

// Nested axes, even: 16 rows over outer (2) x inner (4), one gather over both
// axes (group order = row-major over them) and a view.
fsdp.mesh @mesh [outer = 2, inner = 4]
func.func @nested_even(%w: tensor<16x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}) -> (tensor<f32> {fsdp.loss}, tensor<16x4xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<16x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<16x4xf32>) -> tensor<16x4xf32>
  return %loss, %dw : tensor<f32>, tensor<16x4xf32>
}
// CHECK-LABEL: func.func @nested_even(
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["outer", "inner"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[FULL:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1]] output_shape [16, 4] : tensor<64xf32> into tensor<16x4xf32>
// CHECK-NEXT: "model.forward"(%[[FULL]])
// CHECK:      fsdp.reduce_scatter %{{.*}} over @mesh ["outer", "inner"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<64xf32> -> tensor<8xf32>

// -----

// Nested axes, uneven: 12 rows; outer halves of 6 rows, each split over 4
// inner ranks as 2, 2, 2, 0. Slots 3 and 7 are empty, so slot j does not
// start at j * 2: the unpack narrows and concatenates slots 0, 1, 2, 4, 5, 6
// and the pack leaves slots 3 and 7 zero.
fsdp.mesh @mesh [outer = 2, inner = 4]
func.func @nested_uneven(%w: tensor<12x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>}) -> (tensor<f32> {fsdp.loss}, tensor<12x4xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<12x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<12x4xf32>) -> tensor<12x4xf32>
  return %loss, %dw : tensor<f32>, tensor<12x4xf32>
}
// CHECK-LABEL: func.func @nested_uneven(
// CHECK-SAME: tensor<2x4xf32>
// CHECK:      %[[ALL:.*]] = fsdp.all_gather %{{.*}} over @mesh ["outer", "inner"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<8xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[ALL]] {{\[\[}}0, 1, 2]] output_shape [8, 2, 4] : tensor<64xf32> into tensor<8x2x4xf32>
// CHECK-NEXT: %[[S0:.*]] = tensor.extract_slice %[[SLOTS]][0, 0, 0] [1, 2, 4]
// CHECK-NEXT: %[[S1:.*]] = tensor.extract_slice %[[SLOTS]][1, 0, 0] [1, 2, 4]
// CHECK-NEXT: %[[S2:.*]] = tensor.extract_slice %[[SLOTS]][2, 0, 0] [1, 2, 4]
// CHECK-NEXT: %[[S4:.*]] = tensor.extract_slice %[[SLOTS]][4, 0, 0] [1, 2, 4]
// CHECK-NEXT: %[[S5:.*]] = tensor.extract_slice %[[SLOTS]][5, 0, 0] [1, 2, 4]
// CHECK-NEXT: %[[S6:.*]] = tensor.extract_slice %[[SLOTS]][6, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.concat dim(0) %[[S0]], %[[S1]], %[[S2]], %[[S4]], %[[S5]], %[[S6]] : {{.*}} -> tensor<12x4xf32>
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK:      linalg.fill {{.*}} -> tensor<8x2x4xf32>
// CHECK-NEXT: tensor.extract_slice %[[DW]][0, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[0, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.extract_slice %[[DW]][2, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[1, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.extract_slice %[[DW]][4, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[2, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.extract_slice %[[DW]][6, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[4, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.extract_slice %[[DW]][8, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[5, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.extract_slice %[[DW]][10, 0] [2, 4]
// CHECK-NEXT: tensor.insert_slice {{.*}}[6, 0, 0] [1, 2, 4]
// CHECK-NEXT: tensor.collapse_shape
// CHECK-NEXT: fsdp.reduce_scatter %{{.*}} over @mesh ["outer", "inner"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<64xf32> -> tensor<8xf32>

// -----

// Two dims sharded by two axes: rows over "a" (2), columns over "b" (4,
// uneven). Dim 0 is gathered over "a" first (a view), then its flat result is
// gathered over "b" and chunk-catted along dim 1. The gradient is
// reduce-scattered over "a" (rows), then packed along dim 1 and
// reduce-scattered over "b".
fsdp.mesh @mesh [a = 2, b = 4]
func.func @two_dims(%w: tensor<6x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<1>]>}) -> (tensor<f32> {fsdp.loss}, tensor<6x10xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<6x10xf32>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<6x10xf32>) -> tensor<6x10xf32>
  return %loss, %dw : tensor<f32>, tensor<6x10xf32>
}
// CHECK-LABEL: func.func @two_dims(
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x3xf32>
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[W]] {{\[\[}}0, 1]] : tensor<3x3xf32> into tensor<9xf32>
// CHECK-NEXT: %[[ROWS:.*]] = fsdp.all_gather %[[FLAT]] over @mesh ["a"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<9xf32> -> tensor<18xf32>
// CHECK-NEXT: %[[COLS:.*]] = fsdp.all_gather %[[ROWS]] over @mesh ["b"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<18xf32> -> tensor<72xf32>
// CHECK-NEXT: %[[SLOTS:.*]] = tensor.expand_shape %[[COLS]] {{\[\[}}0, 1, 2]] output_shape [4, 6, 3] : tensor<72xf32> into tensor<4x6x3xf32>
// CHECK-COUNT-4: tensor.extract_slice %[[SLOTS]]
// CHECK-NEXT: tensor.concat dim(1) {{.*}} : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x1xf32>) -> tensor<6x10xf32>
// CHECK:      %[[DW:.*]] = "model.backward"
// CHECK-NEXT: %[[GFLAT:.*]] = tensor.collapse_shape %[[DW]] {{\[\[}}0, 1]] : tensor<6x10xf32> into tensor<60xf32>
// CHECK-NEXT: %[[RSA:.*]] = fsdp.reduce_scatter %[[GFLAT]] over @mesh ["a"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<60xf32> -> tensor<30xf32>
// CHECK-NEXT: %[[HALF:.*]] = tensor.expand_shape %[[RSA]] {{\[\[}}0, 1]] output_shape [3, 10] : tensor<30xf32> into tensor<3x10xf32>
// CHECK:      linalg.fill {{.*}} -> tensor<4x3x3xf32>
// CHECK-NEXT: tensor.extract_slice %[[HALF]][0, 0] [3, 3] [1, 1]
// CHECK:      tensor.extract_slice %[[HALF]][0, 9] [3, 1] [1, 1]
// CHECK-NEXT: %[[PACKED:.*]] = tensor.insert_slice {{.*}}[3, 0, 0] [1, 3, 1] [1, 1, 1] : tensor<3x1xf32> into tensor<4x3x3xf32>
// CHECK-NEXT: %[[PFLAT:.*]] = tensor.collapse_shape %[[PACKED]] {{\[\[}}0, 1, 2]] : tensor<4x3x3xf32> into tensor<36xf32>
// CHECK-NEXT: %[[RSB:.*]] = fsdp.reduce_scatter %[[PFLAT]] over @mesh ["b"] avg {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<36xf32> -> tensor<9xf32>
// CHECK-NEXT: tensor.expand_shape %[[RSB]] {{\[\[}}0, 1]] output_shape [3, 3] : tensor<9xf32> into tensor<3x3xf32>

// -----

// Forward only: one gather, no reduction.
fsdp.mesh @mesh [shard = 4]
func.func @forward_only(%w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}, %x: tensor<2x16xf32>) -> tensor<2x10xf32> {
  %h = "model.layer"(%x, %w) : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  %y = "model.layer"(%h, %w) : (tensor<2x10xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
// CHECK-LABEL: func.func @forward_only(
// CHECK:      fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<48xf32> -> tensor<192xf32>
// CHECK-NOT:  = fsdp.
// CHECK:      return

// -----

// Phase and unit of the semantic op are copied onto every flat collective
// (bucketing and scheduling read them).
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @tags(%w: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.unit = "layers.0"}) -> (tensor<f32> {fsdp.loss}, tensor<8x4xf32> {fsdp.grad_of = 0}) {
  %loss = "model.forward"(%w) : (tensor<8x4xf32>) -> tensor<f32>
  %dw = "model.backward"(%w) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dw : tensor<f32>, tensor<8x4xf32>
}
// CHECK-LABEL: func.func @tags(
// CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "layers.0">} : tensor<8xf32> -> tensor<32xf32>
// CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "layers.0">} : tensor<8xf32> -> tensor<32xf32>
// CHECK: fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "layers.0">} : tensor<32xf32> -> tensor<8xf32>
// CHECK: fsdp.all_reduce %{{.*}} over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "layers.0">} : tensor<8xf32> -> tensor<8xf32>

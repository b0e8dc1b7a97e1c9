// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-schedule=prefetch=0 | FileCheck %s --check-prefix=P0
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-schedule | FileCheck %s --check-prefix=P1
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-schedule=prefetch=2 | FileCheck %s --check-prefix=P2
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-schedule=memory-limit=64 | FileCheck %s --check-prefix=M64
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-schedule="prefetch=2 memory-limit=128" | FileCheck %s --check-prefix=P2M128

// Three units, one parameter each (8 elements per rank, gathered: 16 f32 =
// 64 bytes), HSDP on a 2x2 mesh: forward gathers l0, l1, l2, backward
// gathers l2, l1, l0; gradients packed (collapse_shape), reduce-scattered
// and all-reduced at the end of the step, as expansion writes them.
fsdp.mesh @mesh [replicate = 2, shard = 2]
func.func @step(%w0: tensor<8xf32>, %w1: tensor<8xf32>, %w2: tensor<8xf32>, %x: tensor<4xf32>)
    -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g0 = fsdp.all_gather %w0 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<8xf32> -> tensor<16xf32>
  %h0 = "model.layer"(%x, %g0) : (tensor<4xf32>, tensor<16xf32>) -> tensor<4xf32>
  %g1 = fsdp.all_gather %w1 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<8xf32> -> tensor<16xf32>
  %h1 = "model.layer"(%h0, %g1) : (tensor<4xf32>, tensor<16xf32>) -> tensor<4xf32>
  %g2 = fsdp.all_gather %w2 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l2">} : tensor<8xf32> -> tensor<16xf32>
  %loss = "model.loss"(%h1, %g2) : (tensor<4xf32>, tensor<16xf32>) -> tensor<f32>
  %b2 = fsdp.all_gather %w2 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l2">} : tensor<8xf32> -> tensor<16xf32>
  %d2, %e2 = "model.back"(%loss, %b2) : (tensor<f32>, tensor<16xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  %b1 = fsdp.all_gather %w1 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">} : tensor<8xf32> -> tensor<16xf32>
  %d1, %e1 = "model.back"(%e2, %b1) : (tensor<4xf32>, tensor<16xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  %b0 = fsdp.all_gather %w0 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<8xf32> -> tensor<16xf32>
  %d0, %e0 = "model.back"(%e1, %b0) : (tensor<4xf32>, tensor<16xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  %f0 = tensor.collapse_shape %d0 [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %r0 = fsdp.reduce_scatter %f0 over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<16xf32> -> tensor<8xf32>
  %a0 = fsdp.all_reduce %r0 over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<8xf32> -> tensor<8xf32>
  %f1 = tensor.collapse_shape %d1 [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %r1 = fsdp.reduce_scatter %f1 over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">} : tensor<16xf32> -> tensor<8xf32>
  %a1 = fsdp.all_reduce %r1 over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l1">} : tensor<8xf32> -> tensor<8xf32>
  %f2 = tensor.collapse_shape %d2 [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %r2 = fsdp.reduce_scatter %f2 over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l2">} : tensor<16xf32> -> tensor<8xf32>
  %a2 = fsdp.all_reduce %r2 over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l2">} : tensor<8xf32> -> tensor<8xf32>
  return %loss, %a0, %a1, %a2 : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// prefetch = 0: every gather waits right where it starts (no overlap), at
// its original place. Each reduce-scatter starts as soon as its packed
// gradient exists (moved up from the end), and every wait is at the end:
// reduce-scatters in the order they started (l2, l1, l0), each followed by
// the start of its HSDP all-reduce, then the all-reduce waits.
// P0-LABEL: func.func @step(
// P0-SAME: %[[W0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8xf32>
// P0-NEXT: %[[RQ0:.*]], %[[PD0:.*]] = fsdp.all_gather_start %[[W0]] over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<8xf32> -> tensor<16xf32>
// P0-NEXT: %[[G0:.*]] = fsdp.wait %[[RQ0]], %[[PD0]] : tensor<16xf32>
// P0-NEXT: %[[H0:.*]] = "model.layer"(%{{.*}}, %[[G0]])
// P0-NEXT: %[[RQ1:.*]], %[[PD1:.*]] = fsdp.all_gather_start %[[W1]] {{.*}}"l1"
// P0-NEXT: %[[G1:.*]] = fsdp.wait %[[RQ1]], %[[PD1]]
// P0-NEXT: "model.layer"(%[[H0]], %[[G1]])
// P0-NEXT: fsdp.all_gather_start %[[W2]] {{.*}}phase = forward, unit = "l2">
// P0-NEXT: fsdp.wait
// P0-NEXT: %[[LOSS:.*]] = "model.loss"
// P0-NEXT: fsdp.all_gather_start %[[W2]] {{.*}}phase = backward, unit = "l2">
// P0-NEXT: fsdp.wait
// P0-NEXT: %[[D2:.*]]:2 = "model.back"
// P0-NEXT: %[[F2:.*]] = tensor.collapse_shape %[[D2]]#0
// P0-NEXT: %[[RQR2:.*]], %[[PDR2:.*]] = fsdp.reduce_scatter_start %[[F2]] over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l2">} : tensor<16xf32> -> tensor<8xf32>
// P0-NEXT: fsdp.all_gather_start %[[W1]] {{.*}}phase = backward, unit = "l1">
// P0-NEXT: fsdp.wait
// P0-NEXT: %[[D1:.*]]:2 = "model.back"
// P0-NEXT: %[[F1:.*]] = tensor.collapse_shape %[[D1]]#0
// P0-NEXT: %[[RQR1:.*]], %[[PDR1:.*]] = fsdp.reduce_scatter_start %[[F1]] {{.*}}"l1"
// P0-NEXT: fsdp.all_gather_start %[[W0]] {{.*}}phase = backward, unit = "l0">
// P0-NEXT: fsdp.wait
// P0-NEXT: %[[D0:.*]]:2 = "model.back"
// P0-NEXT: %[[F0:.*]] = tensor.collapse_shape %[[D0]]#0
// P0-NEXT: %[[RQR0:.*]], %[[PDR0:.*]] = fsdp.reduce_scatter_start %[[F0]] {{.*}}"l0"
// P0-NEXT: %[[R2:.*]] = fsdp.wait %[[RQR2]], %[[PDR2]] : tensor<8xf32>
// P0-NEXT: %[[RQA2:.*]], %[[PDA2:.*]] = fsdp.all_reduce_start %[[R2]] over @mesh ["replicate"] avg {fsdp.origin = #fsdp.origin<phase = backward, unit = "l2">} : tensor<8xf32> -> tensor<8xf32>
// P0-NEXT: %[[R1:.*]] = fsdp.wait %[[RQR1]], %[[PDR1]]
// P0-NEXT: %[[RQA1:.*]], %[[PDA1:.*]] = fsdp.all_reduce_start %[[R1]]
// P0-NEXT: %[[R0:.*]] = fsdp.wait %[[RQR0]], %[[PDR0]]
// P0-NEXT: %[[RQA0:.*]], %[[PDA0:.*]] = fsdp.all_reduce_start %[[R0]]
// P0-NEXT: %[[A2:.*]] = fsdp.wait %[[RQA2]], %[[PDA2]]
// P0-NEXT: %[[A1:.*]] = fsdp.wait %[[RQA1]], %[[PDA1]]
// P0-NEXT: %[[A0:.*]] = fsdp.wait %[[RQA0]], %[[PDA0]]
// P0-NEXT: return %[[LOSS]], %[[A0]], %[[A1]], %[[A2]]

// prefetch = 1 (default): the first gather starts at the top of the step and
// gather i + 1 starts right before the wait of gather i, so it is in flight
// while unit i computes; in program order across forward and backward.
// P1-LABEL: func.func @step(
// P1-SAME: %[[W0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8xf32>
// P1-NEXT: %[[RQ0:.*]], %[[PD0:.*]] = fsdp.all_gather_start %[[W0]] {{.*}}phase = forward, unit = "l0">
// P1-NEXT: %[[RQ1:.*]], %[[PD1:.*]] = fsdp.all_gather_start %[[W1]] {{.*}}phase = forward, unit = "l1">
// P1-NEXT: fsdp.wait %[[RQ0]], %[[PD0]]
// P1-NEXT: "model.layer"
// P1-NEXT: %[[RQ2:.*]], %[[PD2:.*]] = fsdp.all_gather_start %[[W2]] {{.*}}phase = forward, unit = "l2">
// P1-NEXT: fsdp.wait %[[RQ1]], %[[PD1]]
// P1-NEXT: "model.layer"
// P1-NEXT: %[[RQ3:.*]], %[[PD3:.*]] = fsdp.all_gather_start %[[W2]] {{.*}}phase = backward, unit = "l2">
// P1-NEXT: fsdp.wait %[[RQ2]], %[[PD2]]
// P1-NEXT: "model.loss"
// P1-NEXT: %[[RQ4:.*]], %[[PD4:.*]] = fsdp.all_gather_start %[[W1]] {{.*}}phase = backward, unit = "l1">
// P1-NEXT: fsdp.wait %[[RQ3]], %[[PD3]]
// P1-NEXT: "model.back"
// P1-NEXT: tensor.collapse_shape
// P1-NEXT: fsdp.reduce_scatter_start
// P1-NEXT: %[[RQ5:.*]], %[[PD5:.*]] = fsdp.all_gather_start %[[W0]] {{.*}}phase = backward, unit = "l0">
// P1-NEXT: fsdp.wait %[[RQ4]], %[[PD4]]
// P1-NEXT: "model.back"
// P1-NEXT: tensor.collapse_shape
// P1-NEXT: fsdp.reduce_scatter_start
// P1-NEXT: fsdp.wait %[[RQ5]], %[[PD5]]
// P1-NEXT: "model.back"

// prefetch = 2: two gathers ahead; the first two start at the top.
// P2-LABEL: func.func @step(
// P2-SAME: %[[W0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8xf32>
// P2-NEXT: %[[RQ0:.*]], %[[PD0:.*]] = fsdp.all_gather_start %[[W0]] {{.*}}phase = forward, unit = "l0">
// P2-NEXT: %[[RQ1:.*]], %[[PD1:.*]] = fsdp.all_gather_start %[[W1]] {{.*}}phase = forward, unit = "l1">
// P2-NEXT: %[[RQ2:.*]], %[[PD2:.*]] = fsdp.all_gather_start %[[W2]] {{.*}}phase = forward, unit = "l2">
// P2-NEXT: fsdp.wait %[[RQ0]], %[[PD0]]
// P2-NEXT: "model.layer"
// P2-NEXT: %[[RQ3:.*]], %[[PD3:.*]] = fsdp.all_gather_start %[[W2]] {{.*}}phase = backward, unit = "l2">
// P2-NEXT: fsdp.wait %[[RQ1]], %[[PD1]]
// P2-NEXT: "model.layer"
// P2-NEXT: %[[RQ4:.*]], %[[PD4:.*]] = fsdp.all_gather_start %[[W1]] {{.*}}phase = backward, unit = "l1">
// P2-NEXT: fsdp.wait %[[RQ2]], %[[PD2]]
// P2-NEXT: "model.loss"
// P2-NEXT: %[[RQ5:.*]], %[[PD5:.*]] = fsdp.all_gather_start %[[W0]] {{.*}}phase = backward, unit = "l0">
// P2-NEXT: fsdp.wait %[[RQ3]], %[[PD3]]
// P2-NEXT: "model.back"

// memory-limit = 64 bytes (one gathered parameter) with prefetch = 1: a
// gather may only start once the previous one is no longer used, so the
// forward gathers cannot be prefetched at all, and the backward gathers of
// l1 and l0 start right after the last use of the one before (ahead of the
// gradient packing and reduce-scatter that followed it).
// M64-LABEL: func.func @step(
// M64-SAME: %[[W0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8xf32>
// M64-NEXT: fsdp.all_gather_start %[[W0]]
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.layer"
// M64-NEXT: fsdp.all_gather_start %[[W1]]
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.layer"
// M64-NEXT: fsdp.all_gather_start %[[W2]]
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.loss"
// M64-NEXT: fsdp.all_gather_start %[[W2]]
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.back"
// M64-NEXT: fsdp.all_gather_start %[[W1]] {{.*}}phase = backward
// M64-NEXT: tensor.collapse_shape
// M64-NEXT: fsdp.reduce_scatter_start
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.back"
// M64-NEXT: fsdp.all_gather_start %[[W0]] {{.*}}phase = backward
// M64-NEXT: tensor.collapse_shape
// M64-NEXT: fsdp.reduce_scatter_start
// M64-NEXT: fsdp.wait
// M64-NEXT: "model.back"

// prefetch = 2 under 128 bytes (two gathered parameters): the l2 gather
// would start at the top with l0 and l1 still alive, so it moves later, to
// just after l0's last use; the others fit.
// P2M128-LABEL: func.func @step(
// P2M128-SAME: %[[W0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8xf32>
// P2M128-NEXT: fsdp.all_gather_start %[[W0]]
// P2M128-NEXT: fsdp.all_gather_start %[[W1]]
// P2M128-NEXT: fsdp.wait
// P2M128-NEXT: "model.layer"
// P2M128-NEXT: fsdp.all_gather_start %[[W2]] {{.*}}phase = forward
// P2M128-NEXT: fsdp.wait
// P2M128-NEXT: "model.layer"
// P2M128-NEXT: fsdp.all_gather_start %[[W2]] {{.*}}phase = backward
// P2M128-NEXT: fsdp.wait
// P2M128-NEXT: "model.loss"

// -----

// Gather inputs: a pure computation from the arguments (here the flatten
// that expansion writes) moves up with the start; an input that only an
// opaque op produces keeps the start right after that op. The first op of
// the body being the first gather's input is fine too.
fsdp.mesh @mesh [shard = 2]
func.func @inputs(%w0: tensor<2x4xf32>, %w1: tensor<2x4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %f0 = tensor.collapse_shape %w0 [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %g0 = fsdp.all_gather %f0 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l0">} : tensor<8xf32> -> tensor<16xf32>
  %h0 = "model.layer"(%x, %g0) : (tensor<4xf32>, tensor<16xf32>) -> tensor<4xf32>
  %f1 = tensor.collapse_shape %w1 [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %g1 = fsdp.all_gather %f1 over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l1">} : tensor<8xf32> -> tensor<16xf32>
  %h1 = "model.layer"(%h0, %g1) : (tensor<4xf32>, tensor<16xf32>) -> tensor<4xf32>
  %o = "model.opaque"(%h1) : (tensor<4xf32>) -> tensor<8xf32>
  %g2 = fsdp.all_gather %o over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward, unit = "l2">} : tensor<8xf32> -> tensor<16xf32>
  %loss = "model.loss"(%h1, %g2) : (tensor<4xf32>, tensor<16xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// P1-LABEL: func.func @inputs(
// P1-SAME: %[[W0:[^:]*]]: tensor<2x4xf32>, %[[W1:[^:]*]]: tensor<2x4xf32>
// P1-NEXT: %[[F0:.*]] = tensor.collapse_shape %[[W0]]
// P1-NEXT: fsdp.all_gather_start %[[F0]]
// P1-NEXT: %[[F1:.*]] = tensor.collapse_shape %[[W1]]
// P1-NEXT: fsdp.all_gather_start %[[F1]]
// P1-NEXT: fsdp.wait
// P1-NEXT: "model.layer"
// P1-NEXT: fsdp.wait
// P1-NEXT: "model.layer"
// P1-NEXT: %[[O:.*]] = "model.opaque"
// P1-NEXT: fsdp.all_gather_start %[[O]]
// P1-NEXT: fsdp.wait
// P1-NEXT: "model.loss"

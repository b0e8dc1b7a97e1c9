// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-async-collectives | FileCheck %s

// The loss all-reduce of all-reduce-loss (no origin: the fsdp passes did
// not place it) starts right after the loss exists and is waited for at
// the return, so the backward in between runs while it is in flight. A
// started collective stays as it is; a placed blocking one (the gather)
// becomes a start and a wait in place.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @loss
func.func @loss(%x: tensor<8xf32>, %w: tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>) {
  // CHECK: %[[LOSS:.*]] = linalg.reduce
  // CHECK: linalg.yield
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[REQ:.*]], %[[PENDING:.*]] = fsdp.all_reduce_start %[[LOSS]] over @mesh ["shard"] avg : tensor<f32> -> tensor<f32>
  // CHECK-NEXT: tensor.empty
  // CHECK-NEXT: linalg.mul
  // CHECK: fsdp.reduce_scatter_start
  // CHECK: fsdp.all_gather_start
  // CHECK-NEXT: fsdp.wait
  // CHECK-NEXT: %[[ALL:.*]] = fsdp.wait %[[REQ]], %[[PENDING]] : tensor<f32>
  // CHECK-NEXT: return %[[ALL]]
  // CHECK-NOT: fsdp.all_reduce over
  %e = tensor.empty() : tensor<f32>
  %l = linalg.reduce ins(%x : tensor<8xf32>) outs(%e : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  %e8 = tensor.empty() : tensor<8xf32>
  %g = linalg.mul ins(%x, %w : tensor<8xf32>, tensor<8xf32>) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %r, %p = fsdp.reduce_scatter_start %g over @mesh ["shard"] sum {fsdp.origin = #fsdp.origin<phase = backward>} : tensor<8xf32> -> tensor<4xf32>
  %s = fsdp.wait %r, %p : tensor<4xf32>
  %gathered = fsdp.all_gather %s over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  %m = fsdp.all_reduce %l over @mesh ["shard"] avg : tensor<f32> -> tensor<f32>
  return %m, %gathered : tensor<f32>, tensor<8xf32>
}

// -----

// A collective the fsdp passes placed (an origin) and left blocking
// (schedule=false) keeps its position: the start where it was, the wait
// right after it.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @placed
func.func @placed(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  // CHECK: %[[E:.*]] = linalg.add
  // CHECK-NEXT: %[[REQ:.*]], %[[PENDING:.*]] = fsdp.all_gather_start %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  // CHECK-NEXT: %[[G:.*]] = fsdp.wait %[[REQ]], %[[PENDING]] : tensor<8xf32>
  // CHECK-NEXT: tensor.empty
  // CHECK-NEXT: linalg.add
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.add ins(%x, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %g = fsdp.all_gather %x over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %b = linalg.add ins(%a, %y : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %g, %b : tensor<8xf32>, tensor<4xf32>
}

// -----

// A quantized gather's amax all-reduce (`fsdp.movable`, which only a
// blocking collective may carry) starts without it.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @amax
func.func @amax(%a: tensor<1xf32>) -> tensor<1xf32> {
  // CHECK: %[[REQ:.*]], %[[PENDING:.*]] = fsdp.all_reduce_start %{{.*}} over @mesh ["shard"] max : tensor<1xf32> -> tensor<1xf32>
  // CHECK-NOT: fsdp.movable
  // CHECK: fsdp.wait %[[REQ]], %[[PENDING]]
  %m = fsdp.all_reduce %a over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  return %m : tensor<1xf32>
}

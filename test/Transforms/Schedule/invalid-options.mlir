// Negative option values fail the pass with one message at the module.
// RUN: not fsdp-opt %s --fsdp-schedule=prefetch=-1 2>&1 | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-schedule=memory-limit=-5 2>&1 | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-pipeline=prefetch=-1 2>&1 | FileCheck %s
// CHECK: error: options prefetch and memory-limit must not be negative

fsdp.mesh @mesh [shard = 2]
func.func @f(%a: tensor<4xf32>) -> tensor<8xf32> {
  %g = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  return %g : tensor<8xf32>
}

// RUN: fsdp-opt %s --convert-fsdp-to-runtime="device=true" | FileCheck %s

// For the GPU lowering the device scatter-add stays for
// fsdp-gpu-scatter-add, after the collectives around it became calls.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @scatter_then_reduce
func.func @scatter_then_reduce(%g: memref<6x4xf32>, %i: memref<6xi64>, %z: memref<10x4xf32>, %s: memref<5x4xf32>) {
  // CHECK: fsdp.buffer.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} : memref<6x4xf32>, memref<6xi64>, memref<10x4xf32>
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32>, memref<6xi64>, memref<10x4xf32>
  // CHECK: call @fsdprt_jit_reduce_scatter
  fsdp.buffer.reduce_scatter %z into %s over @mesh ["shard"] sum : memref<10x4xf32>, memref<5x4xf32>
  return
}

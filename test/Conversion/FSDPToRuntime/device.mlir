// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime="device=true" | FileCheck %s

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

// -----

// Member layouts lower for the GPU step as for the CPU one: the nccl
// backend runs them natively (one NCCL group of per-member collectives).
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @members_on_the_gpu
func.func @members_on_the_gpu(%a: memref<48xf32>, %b: memref<192xf32>) {
  // CHECK: %[[COUNTS:.*]] = llvm.mlir.addressof @__fsdp_bucket_members : !llvm.ptr
  // CHECK: call @fsdprt_jit_all_gather_members(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[COUNTS]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i64, i64, !llvm.ptr) -> ()
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] members [16, 32] : memref<48xf32>, memref<192xf32>
  // CHECK: %[[H:.*]] = call @fsdprt_jit_reduce_scatter_members_start(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, !llvm.ptr) -> i64
  %r = fsdp.buffer.reduce_scatter_start %b into %a over @mesh ["shard"] sum members [16, 32] : memref<192xf32>, memref<48xf32>
  // CHECK: call @fsdprt_jit_wait(%[[H]])
  fsdp.buffer.wait %r
  return
}

// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-stream-order | FileCheck %s

// One chain per block: a gpu.wait async first (the compute stream), every
// GPU op async on the previous token, no host wait before the call or at
// the return (upstream gpu-async-region puts a blocking gpu.wait there).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: memref<16xf32>) kernel {
      gpu.return
    }
  }
  func.func private @fsdprt_jit_all_reduce(!llvm.ptr)
  // CHECK-LABEL: func.func @step
  func.func @step(%x: memref<16xf32>, %p: !llvm.ptr) {
    %c1 = arith.constant 1 : index
    // CHECK: %[[T0:.*]] = gpu.wait async
    // CHECK: %[[A:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<16xf32>
    %a = gpu.alloc () : memref<16xf32>
    // CHECK: %[[T2:.*]] = gpu.launch_func async [%[[T1]]] @kernels::@k
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<16xf32>)
    // CHECK-NEXT: call @fsdprt_jit_all_reduce
    call @fsdprt_jit_all_reduce(%p) : (!llvm.ptr) -> ()
    // CHECK-NEXT: %[[T3:.*]] = gpu.memcpy async [%[[T2]]] %{{.*}}, %[[A]]
    gpu.memcpy %x, %a : memref<16xf32>, memref<16xf32>
    // CHECK-NEXT: %{{.*}} = gpu.dealloc async [%[[T3]]] %[[A]]
    gpu.dealloc %a : memref<16xf32>
    // CHECK-NOT: gpu.wait
    // CHECK: return
    return
  }
}

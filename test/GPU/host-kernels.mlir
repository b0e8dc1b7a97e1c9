// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-gpu-host-kernels | FileCheck %s

// Each kernel becomes a host function of its signature (indices from the
// emulation, shuffles and barriers as calls) and a wrapper that reads its
// arguments from `params` (one pointer per buffer, bare-pointer
// convention); a constructor registers the table, a destructor unregisters
// it; the gpu.module becomes a gpu.binary whose object names the table.

// CHECK-LABEL: module attributes {fsdp.gpu_emulation, gpu.container_module}
module attributes {gpu.container_module} {
  // CHECK: func.func @step
  // CHECK: gpu.launch_func @__fsdp_kernels::@scale
  // CHECK: gpu.launch_func @__fsdp_kernels::@warp_sum
  func.func @step(%x: memref<64xf32>, %y: memref<16xf32, strided<[1], offset: 8>>, %s: f32) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %n = arith.constant 16 : index
    gpu.launch_func @__fsdp_kernels::@scale blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%s : f32, %n : index, %x : memref<64xf32>, %y : memref<16xf32, strided<[1], offset: 8>>)
    gpu.launch_func @__fsdp_kernels::@warp_sum blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  // The body: thread x (0), block y (3 + 1), block size x (6), grid size z
  // (9 + 2); an index nobody reads calls nothing.
  // CHECK: func.func private @__fsdp_kernels_host_scale_body(%[[S:.*]]: f32, %[[N:.*]]: index, %[[X:.*]]: memref<64xf32>, %[[Y:.*]]: memref<16xf32, strided<[1], offset: 8>>) attributes {llvm.linkage = #llvm.linkage<internal>}
  // CHECK: %[[C0:.*]] = arith.constant 0 : i32
  // CHECK: %[[T:.*]] = call @fsdprt_gpu_emu_index(%[[C0]]) : (i32) -> i32
  // CHECK: arith.index_castui %[[T]] : i32 to index
  // CHECK: %[[C4:.*]] = arith.constant 4 : i32
  // CHECK: call @fsdprt_gpu_emu_index(%[[C4]])
  // CHECK: %[[C6:.*]] = arith.constant 6 : i32
  // CHECK: call @fsdprt_gpu_emu_index(%[[C6]])
  // CHECK: %[[C11:.*]] = arith.constant 11 : i32
  // CHECK: call @fsdprt_gpu_emu_index(%[[C11]])
  // CHECK-NOT: fsdprt_gpu_emu_index
  // CHECK: memref.store %{{.*}}, %[[Y]]
  // CHECK-NEXT: return
  // The wrapper: params[i] -> argument i; a buffer's pointer becomes a
  // descriptor of its static shape, strides and offset.
  // CHECK: func.func private @__fsdp_kernels_host_scale(%[[P:.*]]: !llvm.ptr) attributes {llvm.linkage = #llvm.linkage<internal>}
  // CHECK: %[[P0:.*]] = llvm.getelementptr %[[P]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
  // CHECK: %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
  // CHECK: %[[SV:.*]] = llvm.load %[[A0]] : !llvm.ptr -> f32
  // CHECK: llvm.getelementptr %[[P]][1]
  // CHECK: %[[NV:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
  // CHECK: %[[NI:.*]] = arith.index_cast %[[NV]] : i64 to index
  // CHECK: llvm.getelementptr %[[P]][2]
  // CHECK: %[[XM:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<64xf32>
  // CHECK: llvm.getelementptr %[[P]][3]
  // CHECK: %[[OFF:.*]] = llvm.mlir.constant(8 : i64) : i64
  // CHECK: llvm.insertvalue %[[OFF]], %{{.*}}[2]
  // CHECK: %[[YM:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<16xf32, strided<[1], offset: 8>>
  // CHECK: call @__fsdp_kernels_host_scale_body(%[[SV]], %[[NI]], %[[XM]], %[[YM]])
  // Shuffles exchange 32-bit words (an f32 as its bits); the barrier waits
  // for the block.
  // CHECK: func.func private @__fsdp_kernels_host_warp_sum_body
  // CHECK: %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
  // CHECK: %[[SH:.*]] = call @fsdprt_gpu_emu_shuffle_xor(%[[BITS]], %{{.*}}, %{{.*}}) : (i32, i32, i32) -> i32
  // CHECK: arith.bitcast %[[SH]] : i32 to f32
  // CHECK: call @fsdprt_gpu_emu_shuffle_xor
  // CHECK: call @fsdprt_gpu_emu_barrier() : () -> ()
  // CHECK-NOT: gpu.
  // CHECK: func.func private @__fsdp_kernels_host_warp_sum(
  // The table: names, argument sizes (f32 4, index 8, a buffer's pointer 8).
  // CHECK: llvm.mlir.global internal constant @__fsdp_kernels_host_id("__fsdp_kernels.[[ID:[0-9a-f]{16}]]\00")
  // CHECK: llvm.mlir.global internal constant @__fsdp_kernels_host_scale_name("scale\00")
  // CHECK: llvm.mlir.global internal constant @__fsdp_kernels_host_scale_sizes(dense<[4, 8, 8, 8]> : tensor<4xi64>)
  // CHECK: llvm.mlir.global internal constant @__fsdp_kernels_host_warp_sum_name("warp_sum\00")
  // CHECK: llvm.mlir.global internal constant @__fsdp_kernels_host_warp_sum_sizes(dense<8> : tensor<1xi64>)
  // Entries {name, wrapper, sizes, count, flags}: warp_sum needs lock step.
  // CHECK: llvm.func internal @__fsdp_kernels_host_register()
  // CHECK: %[[COUNT:.*]] = llvm.mlir.constant(2 : i32) : i32
  // CHECK: %[[TABLE:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, ptr, ptr, i32, i32)>
  // CHECK: func.constant @__fsdp_kernels_host_scale : (!llvm.ptr) -> ()
  // CHECK: llvm.mlir.constant(4 : i32)
  // CHECK-NEXT: llvm.insertvalue %{{.*}}[3]
  // CHECK-NEXT: %[[NOLOCK:.*]] = llvm.mlir.constant(0 : i32) : i32
  // CHECK-NEXT: llvm.insertvalue %[[NOLOCK]], %{{.*}}[4]
  // CHECK: func.constant @__fsdp_kernels_host_warp_sum : (!llvm.ptr) -> ()
  // CHECK: llvm.mlir.constant(1 : i32)
  // CHECK-NEXT: llvm.insertvalue %{{.*}}[3]
  // CHECK-NEXT: %[[LOCK:.*]] = llvm.mlir.constant(1 : i32) : i32
  // CHECK-NEXT: llvm.insertvalue %[[LOCK]], %{{.*}}[4]
  // CHECK: %[[IDP:.*]] = llvm.mlir.addressof @__fsdp_kernels_host_id
  // CHECK: llvm.call @fsdprt_gpu_register_host_kernels(%[[IDP]], %[[TABLE]], %[[COUNT]])
  // CHECK: llvm.func internal @__fsdp_kernels_host_unregister()
  // CHECK: llvm.call @fsdprt_gpu_unregister_host_kernels
  // The image: "FSHK", version 1, the id.
  // CHECK: gpu.binary @__fsdp_kernels [#gpu.object<#nvvm.target, properties = {fsdp.host_kernels = "__fsdp_kernels.[[ID]]"}, bin = "FSHK\01\00\00\00__fsdp_kernels.[[ID]]\00">]
  // CHECK-NOT: gpu.module
  // CHECK: llvm.mlir.global_ctors ctors = [@__fsdp_kernels_host_register]
  // CHECK: llvm.mlir.global_dtors dtors = [@__fsdp_kernels_host_unregister]
  gpu.module @__fsdp_kernels {
    gpu.func @scale(%s: f32, %n: index, %x: memref<64xf32>, %y: memref<16xf32, strided<[1], offset: 8>>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id y
      %bd = gpu.block_dim x
      %gd = gpu.grid_dim z
      %unused = gpu.thread_id z
      %i = arith.addi %t, %b : index
      %j = arith.muli %bd, %gd : index
      %k = arith.remui %i, %n : index
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.mulf %v, %s : f32
      memref.store %w, %y[%k] : memref<16xf32, strided<[1], offset: 8>>
      gpu.return
    }
    gpu.func @warp_sum(%x: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %c16 = arith.constant 16 : i32
      %c32 = arith.constant 32 : i32
      %v = memref.load %x[%t] : memref<64xf32>
      %r, %valid = gpu.shuffle xor %v, %c16, %c32 : f32
      %bits = arith.bitcast %r : f32 to i32
      %r2, %valid2 = gpu.shuffle xor %bits, %c16, %c32 : i32
      gpu.barrier
      %f = arith.bitcast %r2 : i32 to f32
      memref.store %f, %x[%t] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// Two kernel modules of different contents have different table ids.
// CHECK-LABEL: module attributes {fsdp.gpu_emulation, gpu.container_module}
// CHECK: llvm.mlir.global internal constant @a_host_id("a.[[A:[0-9a-f]{16}]]\00")
// CHECK: llvm.mlir.global internal constant @b_host_id("b.[[B:[0-9a-f]{16}]]\00")
// CHECK-NOT: "b.[[A]]\00"
// CHECK: llvm.mlir.global_ctors ctors = [@a_host_register, @b_host_register], priorities = [65535 : i32, 65535 : i32]
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @kernel_0(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @kernel_0(%x: memref<8xf32>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    gpu.func @up(%x: memref<32xf32>) kernel {
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %v = arith.constant 1.0 : f32
      // expected-error @below {{'gpu.shuffle' op in kernel @up: only xor shuffles are emulated (gpu-emulation=true)}}
      %r, %valid = gpu.shuffle up %v, %c1, %c32 : f32
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    gpu.func @wide(%x: memref<32xf64>) kernel {
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %v = arith.constant 1.0 : f64
      // expected-error @below {{'gpu.shuffle' op in kernel @wide: only 32-bit shuffles (i32, f32) are emulated (gpu-emulation=true)}}
      %r, %valid = gpu.shuffle xor %v, %c1, %c32 : f64
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    gpu.func @validity(%x: memref<32xi1>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %v = arith.constant 1.0 : f32
      // expected-error @below {{'gpu.shuffle' op in kernel @validity: the shuffle's validity result is not emulated (gpu-emulation=true)}}
      %r, %valid = gpu.shuffle xor %v, %c1, %c32 : f32
      memref.store %valid, %x[%c0] : memref<32xi1>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    gpu.func @lane(%x: memref<32xindex>) kernel {
      %c0 = arith.constant 0 : index
      // expected-error @below {{'gpu.lane_id' op in kernel @lane: the host emulation of CUDA cannot run it (gpu-emulation=true)}}
      %l = gpu.lane_id
      memref.store %l, %x[%c0] : memref<32xindex>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    // expected-error @below {{'gpu.func' op argument 0 of type 'memref<?xf32>' cannot be passed to the host emulation: buffers need static shapes, strides and offsets in the default memory space}}
    gpu.func @dynamic(%x: memref<?xf32>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @__fsdp_kernels {
    // expected-error @below {{'gpu.func' op has workgroup or private memory, which the host emulation of CUDA does not model}}
    gpu.func @shared(%x: memref<32xf32>) workgroup(%tile: memref<32xf32, #gpu.address_space<workgroup>>) kernel {
      gpu.return
    }
  }
}

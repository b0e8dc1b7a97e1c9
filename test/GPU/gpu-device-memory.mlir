// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-device-memory -verify-diagnostics | FileCheck %s

// Host allocations become device allocations; the kernels' own memory
// accesses (inside gpu.launch) stay. The module says that its buffers are
// device buffers (fsdp.gpu, read by the runners).
// CHECK: module attributes {fsdp.gpu}
// CHECK-LABEL: func.func @step
func.func @step(%x: memref<16xf32>) -> memref<16xf32> {
  // CHECK: %[[A:.*]] = gpu.alloc () : memref<16xf32>
  // CHECK: %[[T:.*]] = gpu.alloc () : memref<16xf32>
  // CHECK-NOT: memref.alloc
  %a = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %t = memref.alloc() : memref<16xf32>
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // CHECK: memref.load
    %v = memref.load %x[%tx] : memref<16xf32>
    memref.store %v, %a[%tx] : memref<16xf32>
    memref.store %v, %t[%tx] : memref<16xf32>
    gpu.terminator
  }
  // CHECK: gpu.dealloc %[[T]] : memref<16xf32>
  memref.dealloc %t : memref<16xf32>
  // CHECK: return %[[A]]
  return %a : memref<16xf32>
}

// -----

// A one-element buffer the host reads as a value (a learning rate): copied
// to a host buffer, read after a wait; one the host writes (a step count):
// written on the host, copied to the device.
// CHECK-LABEL: func.func @scalar_read
func.func @scalar_read(%lr: memref<f32>) -> f32 {
  // CHECK: %[[H:.*]] = memref.alloca() : memref<f32>
  // CHECK: gpu.memcpy %[[H]], %{{.*}} : memref<f32>, memref<f32>
  // CHECK: gpu.wait
  // CHECK: memref.load %[[H]][] : memref<f32>
  %v = memref.load %lr[] : memref<f32>
  // CHECK: %[[S:.*]] = memref.alloca() : memref<1xf64>
  // CHECK: memref.store %{{.*}}, %[[S]][%{{.*}}] : memref<1xf64>
  // CHECK: gpu.memcpy %{{.*}}, %[[S]] : memref<1xf64>, memref<1xf64>
  %step = gpu.alloc () : memref<1xf64>
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f64
  memref.store %one, %step[%c0] : memref<1xf64>
  return %v : f32
}

// -----

func.func @host_load(%x: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{cannot run with compute=gpu: host code would access a device buffer}}
  %v = memref.load %x[%c0] : memref<16xf32>
  return %v : f32
}

// -----

memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @host_global() -> memref<4xf32> {
  // expected-error @below {{cannot run with compute=gpu: a global buffer that leaves its block (or has a dynamic shape or a layout) is host memory the device cannot read}}
  %g = memref.get_global @table : memref<4xf32>
  return %g : memref<4xf32>
}

// -----

// A constant global a kernel reads (the index tensors and splats of the
// frontend's scatter and guard decompositions): copied into a device buffer
// where it is read, freed at the end of its block; the kernel reads the copy.
// CHECK-LABEL: func.func @device_global
memref.global "private" constant @rows : memref<4xi64> = dense<[0, 2, 1, 0]>
func.func @device_global(%x: memref<4xf32>) {
  // CHECK: %[[G:.*]] = memref.get_global @rows : memref<4xi64>
  // CHECK-NEXT: %[[D:.*]] = gpu.alloc () : memref<4xi64>
  // CHECK-NEXT: gpu.memcpy %[[D]], %[[G]] : memref<4xi64>, memref<4xi64>
  // CHECK: %[[V:.*]] = memref.subview %[[D]]
  // CHECK: gpu.launch
  // CHECK: memref.load %[[V]]
  // CHECK: gpu.terminator
  // CHECK: gpu.dealloc %[[D]] : memref<4xi64>
  // CHECK-NEXT: return
  %g = memref.get_global @rows : memref<4xi64>
  %v = memref.subview %g[0] [2] [1] : memref<4xi64> to memref<2xi64, strided<[1]>>
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %i = memref.load %v[%tx] : memref<2xi64, strided<[1]>>
    %f = arith.sitofp %i : i64 to f32
    memref.store %f, %x[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// The host quantization entry points become their device forms (same
// arguments, kernels on the compute stream); the host declarations go.
// CHECK-NOT: func.func private @fsdprt_jit_quant_amax
// CHECK-DAG: func.func private @fsdprt_gpu_quant_amax(!llvm.ptr, !llvm.ptr, i64, i32)
// CHECK-DAG: func.func private @fsdprt_gpu_quantize(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64)
// CHECK-DAG: func.func private @fsdprt_gpu_dequantize(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64)
// CHECK-LABEL: func.func @quantized_gather
func.func private @fsdprt_jit_quant_amax(!llvm.ptr, !llvm.ptr, i64, i32)
func.func private @fsdprt_jit_quantize(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64)
func.func private @fsdprt_jit_dequantize(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64)
func.func @quantized_gather(%x: !llvm.ptr, %amax: !llvm.ptr, %packet: !llvm.ptr, %y: !llvm.ptr) {
  %n = arith.constant 24 : i64
  %k = arith.constant 2 : i64
  %f = arith.constant 0 : i32
  %one = arith.constant 1 : i64
  // CHECK: call @fsdprt_gpu_quant_amax(
  // CHECK: call @fsdprt_gpu_quantize(
  // CHECK: call @fsdprt_gpu_dequantize(
  // CHECK-NOT: fsdprt_jit_
  call @fsdprt_jit_quant_amax(%x, %amax, %n, %f) : (!llvm.ptr, !llvm.ptr, i64, i32) -> ()
  call @fsdprt_jit_quantize(%x, %amax, %packet, %n, %f, %f, %one, %n) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64) -> ()
  call @fsdprt_jit_dequantize(%packet, %y, %k, %f, %f, %one, %n) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64) -> ()
  return
}

// -----

// The arena fsdp-assign-buffers planned the step's buffers into is the
// rank's device arena: its views are device buffers the kernels use, and
// nothing is allocated in the step.
// CHECK-NOT: func.func private @fsdprt_jit_arena
// CHECK: func.func private @fsdprt_gpu_arena(i64) -> !llvm.ptr
// CHECK-LABEL: func.func @planned
func.func private @fsdprt_jit_arena(i64) -> !llvm.ptr
func.func @planned(%x: memref<16xf32>) {
  // CHECK: %[[BASE:.*]] = call @fsdprt_gpu_arena(%{{.*}}) : (i64) -> !llvm.ptr
  // CHECK-NOT: gpu.alloc
  // CHECK: memref.view
  %bytes = llvm.mlir.constant(128 : i64) : i64
  %base = call @fsdprt_jit_arena(%bytes) : (i64) -> !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %d0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d1 = llvm.insertvalue %base, %d0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d2 = llvm.insertvalue %base, %d1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d3 = llvm.insertvalue %zero, %d2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d4 = llvm.insertvalue %bytes, %d3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d5 = llvm.insertvalue %one, %d4[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %arena = builtin.unrealized_conversion_cast %d5 : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<128xi8>
  %c64 = arith.constant 64 : index
  %t = memref.view %arena[%c64][] : memref<128xi8> to memref<16xf32>
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<16xf32>
    memref.store %v, %t[%tx] : memref<16xf32>
    gpu.terminator
  }
  return
}

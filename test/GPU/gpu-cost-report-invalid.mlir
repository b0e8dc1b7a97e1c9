// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-cost-report=gpu=h200 -verify-diagnostics -o /dev/null
// RUN: not fsdp-opt %s --fsdp-gpu-cost-report=gpu=b300 -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fsdp-opt %s --fsdp-gpu-cost-report=gpu=, -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE
// UNKNOWN: error: fsdp-gpu-cost-report: unknown GPU 'b300' (known: h200, h100, a100)
// NONE: error: fsdp-gpu-cost-report: no GPU named (gpu=h200, or several: gpu=h100,h200)

// Whatever the report cannot cost gets a warning at the operation and is
// left out; the report still ends with its estimate.

// A gemm whose sizes are not constants.
module {
  func.func private @fsdprt_gpu_gemm_f32(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)
  func.func @gemm(%a: !llvm.ptr, %m: i64) {
    %f = arith.constant 0 : i32
    %one = arith.constant 1.0 : f32
    %z = arith.constant 0 : i64
    // expected-warning @below {{gpu cost report: cannot cost a gemm whose m, n, k and batch are not constants}}
    call @fsdprt_gpu_gemm_f32(%f, %f, %m, %m, %m, %one, %a, %m, %z, %a, %m, %z, %one, %a, %m, %z, %m) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
}

// -----

// A launch whose grid is not a constant, a kernel loop whose trip count
// depends on a kernel argument, a gpu.launch that is not outlined.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: memref<64xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      // expected-warning @below {{gpu cost report: trip count or branch not known for the first thread of a launch; costed as run once}}
      scf.for %i = %c0 to %n step %c1 {
        %v = memref.load %x[%i] : memref<64xf32>
      }
      gpu.return
    }
  }
  func.func @launches(%x: memref<64xf32>, %g: index) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    // expected-warning @below {{gpu cost report: cannot cost a launch whose grid and block sizes are not positive constants}}
    gpu.launch_func @kernels::@k blocks in (%g, %c1, %c1) threads in (%c32, %c1, %c1) args(%x : memref<64xf32>, %g : index)
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%x : memref<64xf32>, %g : index)
    // expected-warning @below {{gpu cost report: cannot cost a gpu.launch that is not outlined; run the report after gpu-kernel-outlining}}
    gpu.launch blocks(%bx, %by, %bz) in (%sx = %c1, %sy = %c1, %sz = %c1) threads(%tx, %ty, %tz) in (%tsx = %c32, %tsy = %c1, %tsz = %c1) {
      gpu.terminator
    }
    return
  }
}

// -----

// A host loop without constant bounds around device work, a dynamically
// shaped copy, a runtime call the model does not know.
module attributes {gpu.container_module} {
  func.func private @fsdprt_gpu_quant_amax(!llvm.ptr, !llvm.ptr, i64, i32)
  func.func @host(%a: memref<?xf32>, %b: memref<?xf32>, %n: index, %p: !llvm.ptr) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    // expected-warning @below {{gpu cost report: host loop without constant bounds around device operations; costed as run once}}
    scf.for %i = %c0 to %n step %c1 {
      // expected-warning @below {{gpu cost report: cannot cost a memcpy of a dynamically shaped buffer}}
      gpu.memcpy %a, %b : memref<?xf32>, memref<?xf32>
    }
    %k = arith.constant 4 : i64
    %t = arith.constant 0 : i32
    // expected-warning @below {{gpu cost report: cannot cost a call of @fsdprt_gpu_quant_amax}}
    call @fsdprt_gpu_quant_amax(%p, %p, %k, %t) : (!llvm.ptr, !llvm.ptr, i64, i32) -> ()
    return
  }
}

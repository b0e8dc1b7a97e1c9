// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-cost-report=gpu=h200 -o /dev/null | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-cost-report="gpu=h100 ops=false top=1" -o /dev/null | FileCheck %s --check-prefix=H100
// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-cost-report="gpu=h200 json=true" -o /dev/null | FileCheck %s --check-prefix=JSON

// The IR is the stage the report reads (after fsdp-gpu-stream-order). The
// figures below follow from the h200 row of the ceilings (docs/GPU.md):
// copy bandwidth 4.3 TB/s, 132 SMs, SGEMM 52 TFLOP/s, bf16 cuBLAS 790
// TFLOP/s; the host issues a kernel in 2.5 us, a cuBLAS call or a memcpy
// in 4 us, wakes up 10 us after a synchronization; the device's gap before
// a kernel is 1 us streamed, 0.6 us in a graph, whose launch takes 5 us.

// One f32 gemm, m 64 n 128 k 256, beta 0: 2 m n k = 4194304 FLOP, the
// operands and the result once: (64 x 256 + 256 x 128 + 64 x 128) x 4 B =
// 229376 B. One 128 x 128 tile fills 1 of 132 SMs: 4194304 / (52e12 / 132)
// = 10.65 us on the device. Streamed: issued at 4 us, the device (ready at
// 1 us) waits 3 us for it: 14.65 us. Replayed: 5 + 0.6 + 10.65 = 16.25 us,
// the estimate (no allocation, no host wait). Ideal: 4194304 / (0.7 x
// 67e12) = 0.09 us.
module {
  func.func private @fsdprt_gpu_gemm_f32(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)
  // CHECK-LABEL: gpu cost report: @gemm on h200 (NVIDIA H200 SXM 141GB)
  // CHECK: gemm fsdprt_gpu_gemm_f32 x1: 229376 B, 4194304 FLOP, 10.65 us each, 10.65 us total, host issue 4.00 us each (m 64 n 128 k 256 batch 1, SGEMM at 52 TFLOP/s x 1 tiles on 1 wave (1% filled), compute-bound)
  // CHECK: gemm calls: 1 (f32 1, bf16 0)
  // CHECK: flops: 4194304
  // CHECK: device work: 10.65 us
  // CHECK-NEXT: host issue: 4.00 us
  // CHECK-NEXT: streamed (first steps): 14.65 us (device gaps 1.00 us, the device waiting for the host 3.00 us)
  // CHECK-NEXT: graph replay: 16.25 us (device gaps 0.60 us, the graph launch 5.00 us)
  // CHECK: estimate: 0.016 ms (graph replay)
  // CHECK-NEXT: ideal: 0.000 ms
  func.func @gemm(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
    %f = arith.constant 0 : i32
    %m = arith.constant 64 : i64
    %n = arith.constant 128 : i64
    %k = arith.constant 256 : i64
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %z = arith.constant 0 : i64
    %b1 = arith.constant 1 : i64
    call @fsdprt_gpu_gemm_f32(%f, %f, %m, %n, %k, %one, %a, %k, %z, %b, %n, %z, %zero, %c, %n, %z, %b1) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
}
// H100-LABEL: gpu cost report: @gemm on h100 (NVIDIA H100 SXM 80GB)
// H100-NOT: operations
// H100: largest:
// H100-NEXT: 100.0% gemm fsdprt_gpu_gemm_f32 x1
// JSON: "gpu": "h200"
// JSON: "function": "gemm"
// JSON: "kind": "gemm"
// JSON: "flops": 4194304
// JSON: "gemm_calls": 1
// JSON: "streamed_ms": 0.014647
// JSON: "capturable": true,
// JSON: "graph_ms": 0.016247
// JSON: "estimate_ms": 0.016247

// -----

// A strided-batched bf16 gemm, 1024 cubed, 2 in the batch, beta 1 (the
// result is read too): 4294967296 FLOP, (1 + 1 + 2) x 2^20 x 2 x 2 B =
// 16777216 B; 8 x 8 x 2 = 128 tiles on 132 SMs (97%): 4294967296 /
// (790e12 x 128 / 132) = 5.61 us on the device.
module {
  func.func private @fsdprt_gpu_gemm_bf16(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)
  // CHECK-LABEL: gpu cost report: @gemm_bf16
  // CHECK: gemm fsdprt_gpu_gemm_bf16 x1: 16777216 B, 4294967296 FLOP, 5.61 us each, 5.61 us total, host issue 4.00 us each (m 1024 n 1024 k 1024 batch 2, bf16 tensor cores at 790 TFLOP/s x 128 tiles on 1 wave (97% filled), compute-bound)
  // CHECK: gemm calls: 1 (f32 0, bf16 1)
  func.func @gemm_bf16(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
    %f = arith.constant 0 : i32
    %d = arith.constant 1024 : i64
    %s = arith.constant 1048576 : i64
    %one = arith.constant 1.0 : f32
    %b2 = arith.constant 2 : i64
    call @fsdprt_gpu_gemm_bf16(%f, %f, %d, %d, %d, %one, %a, %d, %s, %b, %d, %s, %one, %c, %d, %s, %b2) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
}

// -----

// An elementwise launch as fsdp-gpu-kernels maps it: one thread per
// element in a grid-stride loop, 4096 blocks x 256 threads over 2^20
// elements: one iteration each, one 4 B load and one 4 B store: 8388608 B,
// 1048576 FLOP. 8 blocks of 256 threads fit an SM: 4 waves of 1056 blocks,
// one dependent load each (8 MB fit in L2: 0.2 us): 0.8 us; the bytes at
// 4.3 TB/s take 1.95 us: bandwidth-bound. Streamed: 2.5 + 1.95 = 4.45 us;
// the graph: 5 + 0.6 + 1.95 = 7.55 us.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @square(%x: memref<1048576xf32>, %y: memref<1048576xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      %n = arith.constant 1048576 : index
      scf.for %i = %start to %n step %step {
        %v = memref.load %x[%i] : memref<1048576xf32>
        %w = arith.mulf %v, %v : f32
        memref.store %w, %y[%i] : memref<1048576xf32>
      }
      gpu.return
    }
  }
  // CHECK-LABEL: gpu cost report: @elementwise
  // CHECK: launch kernels::square x1: 8388608 B, 1048576 FLOP, 1.95 us each, 1.95 us total, host issue 2.50 us each (4096 blocks x 256 threads, 4 waves, 1 dependent loads per thread (L2), bandwidth-bound at 100.0% of 4.30 TB/s)
  // CHECK: launches: 1
  // CHECK: streamed (first steps): 4.45 us
  // CHECK-NEXT: graph replay: 7.55 us
  // CHECK: estimate: 0.008 ms (graph replay)
  // CHECK-NEXT: ideal: 0.002 ms
  func.func @elementwise(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c4096 = arith.constant 4096 : index
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @kernels::@square blocks in (%c4096, %c1, %c1) threads in (%c256, %c1, %c1) args(%x : memref<1048576xf32>, %y : memref<1048576xf32>)
    return
  }
}

// -----

// A row-wise elementwise launch as fsdp-gpu-kernels maps it, x[r, c] - m[r]
// * s over 1024 x 1024: the 32 lanes of a warp read 32 elements of x but
// one element of the per-row m and of the scalar s, so those loads count
// once per warp (4 / 32 B a thread each): (4 + 0.125 + 0.125 + 4) B x 2^20
// = 8650752 B, 2.01 us at 4.3 TB/s. A load whose index is loaded
// (the gather through `t`, 8 + 4 + 4 B a thread) counts every lane.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @row_terms(%x: memref<1024x1024xf32>, %m: memref<1024xf32>, %s: memref<f32>, %y: memref<1024x1024xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %gdim = gpu.grid_dim x
      %c1024 = arith.constant 1024 : index
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      %n = arith.constant 1048576 : index
      scf.for %i = %start to %n step %step {
        %r = arith.divui %i, %c1024 : index
        %c = arith.remui %i, %c1024 : index
        %v = memref.load %x[%r, %c] : memref<1024x1024xf32>
        %mr = memref.load %m[%r] : memref<1024xf32>
        %sv = memref.load %s[] : memref<f32>
        %d = arith.subf %v, %mr : f32
        %w = arith.mulf %d, %sv : f32
        memref.store %w, %y[%r, %c] : memref<1024x1024xf32>
      }
      gpu.return
    }
    gpu.func @gather(%t: memref<1024xindex>, %x: memref<1024xf32>, %y: memref<1024xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %j = memref.load %t[%i] : memref<1024xindex>
      %v = memref.load %x[%j] : memref<1024xf32>
      memref.store %v, %y[%i] : memref<1024xf32>
      gpu.return
    }
  }
  // CHECK-LABEL: gpu cost report: @row_terms
  // CHECK: launch kernels::row_terms x1: 8650752 B, 2097152 FLOP, 2.01 us each, 2.01 us total, host issue 2.50 us each (4096 blocks x 256 threads, 4 waves, 1 dependent loads per thread (L2), bandwidth-bound at 100.0% of 4.30 TB/s)
  // CHECK: launch kernels::gather x1: 16384 B,
  func.func @row_terms(%x: memref<1024x1024xf32>, %m: memref<1024xf32>, %s: memref<f32>, %y: memref<1024x1024xf32>, %t: memref<1024xindex>, %g: memref<1024xf32>, %h: memref<1024xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c256 = arith.constant 256 : index
    %c4096 = arith.constant 4096 : index
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @kernels::@row_terms blocks in (%c4096, %c1, %c1) threads in (%c256, %c1, %c1) args(%x : memref<1024x1024xf32>, %m : memref<1024xf32>, %s : memref<f32>, %y : memref<1024x1024xf32>)
    %t2 = gpu.launch_func async [%t1] @kernels::@gather blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1) args(%t : memref<1024xindex>, %g : memref<1024xf32>, %h : memref<1024xf32>)
    return
  }
}

// -----

// A multi-tensor launch (fsdp-gpu-kernels): part 0 is the elementwise
// kernel above (4096 blocks of 256 threads over 2^20 elements, 8388608 B,
// 1048576 FLOP, one dependent load per thread), part 1 one block of 32
// threads (the others idle) over 32 elements (256 B, 32 FLOP). Each part
// is costed for its own blocks and threads, not the launch's: 8388864 B,
// 1048608 FLOP. The latency chain is the parts' block-rounds (4096 x 1 +
// 1 x 1) over 132 x 8 resident blocks, 3.88 rounds (at least the longest
// part's 1): 0.78 us from L2; the bytes take 1.95 us: bandwidth-bound; one
// launch's overheads.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @multi(%x: memref<1048576xf32>, %y: memref<1048576xf32>, %z: memref<32xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4096 = arith.constant 4096 : index
      %past = arith.cmpi uge, %bid, %c4096 : index
      %part = arith.select %past, %c1, %c0 : index
      scf.index_switch %part {fsdp.multi_tensor_parts = array<i64: 4096, 256, 1, 32>}
      case 0 {
        %c256 = arith.constant 256 : index
        %base = arith.muli %bid, %c256 : index
        %start = arith.addi %base, %tid : index
        %step = arith.muli %c4096, %c256 : index
        %n = arith.constant 1048576 : index
        scf.for %i = %start to %n step %step {
          %v = memref.load %x[%i] : memref<1048576xf32>
          %w = arith.mulf %v, %v : f32
          memref.store %w, %y[%i] : memref<1048576xf32>
        }
        scf.yield
      }
      case 1 {
        %c32 = arith.constant 32 : index
        %in = arith.cmpi ult, %tid, %c32 : index
        scf.if %in {
          %v = memref.load %z[%tid] : memref<32xf32>
          %w = arith.mulf %v, %v : f32
          memref.store %w, %z[%tid] : memref<32xf32>
        }
        scf.yield
      }
      default {
        scf.yield
      }
      gpu.return
    }
  }
  // CHECK-LABEL: gpu cost report: @multi_tensor
  // CHECK: launch kernels::multi x1: 8388864 B, 1048608 FLOP, 1.95 us each, 1.95 us total, host issue 2.50 us each (4097 blocks x 256 threads, 4 waves, 4 dependent loads per thread (L2), bandwidth-bound at 100.0% of 4.30 TB/s)
  // CHECK: launches: 1
  func.func @multi_tensor(%x: memref<1048576xf32>, %y: memref<1048576xf32>, %z: memref<32xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c4097 = arith.constant 4097 : index
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @kernels::@multi blocks in (%c4097, %c1, %c1) threads in (%c256, %c1, %c1) args(%x : memref<1048576xf32>, %y : memref<1048576xf32>, %z : memref<32xf32>)
    return
  }
}

// -----

// A sum of 2^24 f32 (64 MB) on one warp (grid 1 x 32), as a norm is today:
// each lane waits for 2^24 / 32 = 524288 loads in a row from HBM (64 MB do
// not fit in L2: 0.5 us each): 262 ms, where the bytes at the bandwidth
// take 15.6 us. Lane 0 alone stores the result (1 lane in 32). Replayed:
// + 5 + 0.6 us.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @sum(%x: memref<16777216xf32>, %out: memref<1xf32>) kernel {
      %lane = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c32 = arith.constant 32 : index
      %n = arith.constant 16777216 : index
      %zero = arith.constant 0.0 : f32
      %p = scf.for %e = %lane to %n step %c32 iter_args(%acc = %zero) -> f32 {
        %v = memref.load %x[%e] : memref<16777216xf32>
        %s = arith.addf %acc, %v : f32
        scf.yield %s : f32
      }
      %w = arith.constant 32 : i32
      %o = arith.constant 16 : i32
      %r, %valid = gpu.shuffle xor %p, %o, %w : f32
      %t = arith.addf %p, %r : f32
      %first = arith.cmpi eq, %lane, %c0 : index
      scf.if %first {
        memref.store %t, %out[%c0] : memref<1xf32>
      }
      gpu.return
    }
  }
  // CHECK-LABEL: gpu cost report: @one_warp_sum
  // CHECK: launch kernels::sum x1: 67108868 B, 16777248 FLOP, 262.144 ms each, 262.144 ms total, host issue 2.50 us each (1 blocks x 32 threads, 1 wave, 524288 dependent loads per thread (HBM), latency-bound at 0.0% of 4.30 TB/s)
  // CHECK: estimate: 262.150 ms (graph replay)
  // CHECK-NEXT: ideal: 0.017 ms
  func.func @one_warp_sum(%x: memref<16777216xf32>, %out: memref<1xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @kernels::@sum blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%x : memref<16777216xf32>, %out : memref<1xf32>)
    return
  }
}

// -----

// A host loop of 12 around a segment that allocates 4 KB, launches, copies
// 4 KB on the device and frees; the segment is called twice: every
// operation runs 24 times. A 4 KB device copy reads and writes 8192 B. The
// device work is next to nothing: the host's issue, 2 + 2.5 + 4 + 1 us a
// segment, is the streamed step (24 x 9.5 = 228 us; the device waits for
// the host after each gap, 1 + 1.5 us a segment). The allocations keep it
// out of a graph.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%y: memref<1024xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %zero = arith.constant 0.0 : f32
      memref.store %zero, %y[%i] : memref<1024xf32>
      gpu.return
    }
  }
  func.func private @segment(%x: memref<1024xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c256 = arith.constant 256 : index
    %t0 = gpu.wait async
    %a, %t1 = gpu.alloc async [%t0] () : memref<1024xf32>
    %t2 = gpu.launch_func async [%t1] @kernels::@fill blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<1024xf32>)
    %t3 = gpu.memcpy async [%t2] %x, %a : memref<1024xf32>, memref<1024xf32>
    %t4 = gpu.dealloc async [%t3] %a : memref<1024xf32>
    return
  }
  // CHECK-LABEL: gpu cost report: @host_loop
  // CHECK: operations (in the order the step first runs them):
  // CHECK-NEXT: alloc gpu.alloc x24: 0 B, 0 FLOP, 0.00 us each, 0.00 us total, host issue 2.00 us each
  // CHECK-NEXT: launch kernels::fill x24: 4096 B, 0 FLOP, 0.00 us each, 0.02 us total, host issue 2.50 us each (4 blocks x 256 threads, 1 wave, 0 dependent loads per thread (L2), bandwidth-bound at 100.0% of 4.30 TB/s)
  // CHECK-NEXT: memcpy gpu.memcpy x24: 8192 B, 0 FLOP, 0.00 us each, 0.05 us total, host issue 4.00 us each (device copy: read and write at the copy bandwidth)
  // CHECK-NEXT: free gpu.dealloc x24: 0 B, 0 FLOP, 0.00 us each, 0.00 us total, host issue 1.00 us each
  // CHECK: launches: 24
  // CHECK: memcpys: 24 (98304 B, 98.30 kB; 0 host copies)
  // CHECK: device allocations: 24 (98304 B, 98.30 kB), frees: 24
  // CHECK: host synchronizations: 0
  // CHECK: host issue: 228.00 us
  // CHECK-NEXT: streamed (first steps): 228.00 us (device gaps 60.00 us, the device waiting for the host 166.93 us)
  // CHECK-NEXT: graph replay: none
  // CHECK: estimate: 0.228 ms (streamed)
  func.func @host_loop(%x: memref<1024xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c12 = arith.constant 12 : index
    scf.for %i = %c0 to %c12 step %c1 {
      func.call @segment(%x) : (memref<1024xf32>) -> ()
      func.call @segment(%x) : (memref<1024xf32>) -> ()
    }
    return
  }
}

// -----

// The host reads a device scalar (a learning rate): a copy to a host buffer
// over PCIe, then a blocking wait; the blocking loss all-reduce makes the
// host wait too. Two host synchronizations, one host copy. Streamed: the
// copy issued at 4 us (its 4 B take no time), 10 us to wake up after the
// wait, the all-reduce issued 10 us later and 10 us to wake up: 34 us.
module attributes {gpu.container_module} {
  func.func private @fsdprt_jit_all_reduce(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64)
  // CHECK-LABEL: gpu cost report: @host_sync
  // CHECK: memcpy gpu.memcpy x1: 4 B, 0 FLOP, 0.00 us each, 0.00 us total, host issue 4.00 us each (host copy over PCIe)
  // CHECK: sync gpu.wait x1: 0 B, 0 FLOP, 0.00 us each, 0.00 us total (the host waits for the stream to drain)
  // CHECK: collective fsdprt_jit_all_reduce x1: 8 B, 0 FLOP, 0.00 us each, 0.00 us total, host issue 10.00 us each (one rank: a local copy; blocking: the host waits)
  // CHECK: memcpys: 1 (4 B, 4 B; 1 host copies)
  // CHECK: host synchronizations: 2
  // CHECK: collectives: 1 (8 B)
  // CHECK: streamed (first steps): 34.00 us
  // CHECK-NEXT: graph replay: none
  // CHECK: estimate: 0.034 ms (streamed)
  func.func @host_sync(%lr: memref<f32>, %loss: !llvm.ptr) -> f32 {
    %host = memref.alloca() : memref<f32>
    %t0 = gpu.wait async
    %t1 = gpu.memcpy async [%t0] %host, %lr : memref<f32>, memref<f32>
    gpu.wait [%t1]
    %v = memref.load %host[] : memref<f32>
    %n = arith.constant 1 : i64
    %f32 = arith.constant 0 : i32
    %sum = arith.constant 0 : i32
    %all = arith.constant 1 : i64
    call @fsdprt_jit_all_reduce(%loss, %loss, %n, %f32, %sum, %all) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64) -> ()
    return %v : f32
  }
}

// -----

// The host runs ahead of the device: the same bf16 gemm (5.61 us on the
// device, 4 us to issue) and three launches of 1.95 us (2.5 us each to
// issue), once without and once with a host synchronization after the
// gemm. Without: the host has issued everything by 11.5 us; the device
// runs the gemm from 4 us (it waits 3 us for it) to 9.61 us, then each
// launch after a 1 us gap: 9.61 + 3 x (1 + 1.95) = 18.46 us streamed (the
// ops' overheads summed would be 9.61 + 3 x 4.45 = 22.96 us); replayed
// from a graph, 5 + (0.6 + 5.61) + 3 x (0.6 + 1.95) = 18.86 us, the
// estimate. With the wait, the host wakes up at 19.61 us and issues the
// first launch at 22.11 us: the device waits 11.5 us more for it; the
// next two are issued while the one before runs: 22.11 + 1.95 + 2 x
// (1 + 1.95) = 29.96 us, the estimate (no graph: the host waits).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @square(%x: memref<1048576xf32>, %y: memref<1048576xf32>) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      %n = arith.constant 1048576 : index
      scf.for %i = %start to %n step %step {
        %v = memref.load %x[%i] : memref<1048576xf32>
        %w = arith.mulf %v, %v : f32
        memref.store %w, %y[%i] : memref<1048576xf32>
      }
      gpu.return
    }
  }
  func.func private @fsdprt_gpu_gemm_bf16(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)
  func.func private @gemm(%a: !llvm.ptr) {
    %f = arith.constant 0 : i32
    %d = arith.constant 1024 : i64
    %s = arith.constant 1048576 : i64
    %one = arith.constant 1.0 : f32
    %b2 = arith.constant 2 : i64
    call @fsdprt_gpu_gemm_bf16(%f, %f, %d, %d, %d, %one, %a, %d, %s, %a, %d, %s, %one, %a, %d, %s, %b2) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
  func.func private @squares(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c4096 = arith.constant 4096 : index
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @kernels::@square blocks in (%c4096, %c1, %c1) threads in (%c256, %c1, %c1) args(%x : memref<1048576xf32>, %y : memref<1048576xf32>)
    %t2 = gpu.launch_func async [%t1] @kernels::@square blocks in (%c4096, %c1, %c1) threads in (%c256, %c1, %c1) args(%y : memref<1048576xf32>, %x : memref<1048576xf32>)
    %t3 = gpu.launch_func async [%t2] @kernels::@square blocks in (%c4096, %c1, %c1) threads in (%c256, %c1, %c1) args(%x : memref<1048576xf32>, %y : memref<1048576xf32>)
    return
  }
  // CHECK-LABEL: gpu cost report: @overlapped
  // CHECK: host synchronizations: 0
  // CHECK: device work: 11.46 us
  // CHECK-NEXT: host issue: 11.50 us
  // CHECK-NEXT: streamed (first steps): 18.46 us (device gaps 4.00 us, the device waiting for the host 3.00 us)
  // CHECK-NEXT: graph replay: 18.86 us (device gaps 2.40 us, the graph launch 5.00 us)
  // CHECK: estimate: 0.019 ms (graph replay)
  func.func @overlapped(%a: !llvm.ptr, %x: memref<1048576xf32>, %y: memref<1048576xf32>) {
    func.call @gemm(%a) : (!llvm.ptr) -> ()
    func.call @squares(%x, %y) : (memref<1048576xf32>, memref<1048576xf32>) -> ()
    return
  }
  // CHECK-LABEL: gpu cost report: @waits_after_gemm
  // CHECK: host synchronizations: 1
  // CHECK: device work: 11.46 us
  // CHECK-NEXT: host issue: 11.50 us
  // CHECK-NEXT: streamed (first steps): 29.96 us (device gaps 4.00 us, the device waiting for the host 14.50 us)
  // CHECK-NEXT: graph replay: none
  // CHECK: estimate: 0.030 ms (streamed)
  func.func @waits_after_gemm(%a: !llvm.ptr, %x: memref<1048576xf32>, %y: memref<1048576xf32>) {
    func.call @gemm(%a) : (!llvm.ptr) -> ()
    %t = gpu.wait async
    gpu.wait [%t]
    func.call @squares(%x, %y) : (memref<1048576xf32>, memref<1048576xf32>) -> ()
    return
  }
}

// -----

// Split-K bf16 gemms (runtime/include/fsdprt_gpu_split_k.h, the policy the
// runtime follows). m 768 n 3072 k 8192: 6 x 24 = 144 tiles fill 2 waves
// of 132 SMs to 55%; split into 4 slices of 2048, one strided-batched
// cuBLAS call over 576 tiles fills 5 waves to 87%: 2 x 768 x 3072 x 8192 =
// 38654705664 FLOP / (790e12 x 576 / 660) = 56.07 us; its 4 f32 partials
// (768 x 3072 x 4 B = 9437184 B each) are read back by one reduction
// kernel that writes the bf16 result: (4 x 9437184 + 4718592) B / 4.3e12 =
// 9.88 us; 65.94 us on the device. Bytes: the bf16 operands (62914560 B),
// the partials written and read, the result: 143130624 B. Host issue: the
// cuBLAS call and the kernel, 4 + 2.5 us. Replayed: 5 + 0.6 + 0.6 + 65.94
// = 72.14 us.
// m 768 n 768 k 8192: 36 tiles (27%); 3 slices of 2728 (108 tiles, 82%)
// and a rest of 8 (a second cuBLAS call): 4 partials, 2 calls and the
// kernel, 4 + 4 + 2.5 us of host issue. The same gemm in a batch of 2
// (72 tiles, 55%) is not split: its slices would run one call after
// another, no better filled.
module {
  func.func private @fsdprt_gpu_gemm_bf16(i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64)
  // CHECK-LABEL: gpu cost report: @split_k
  // CHECK: gemm fsdprt_gpu_gemm_bf16 x1: 143130624 B, 38654705664 FLOP, 65.94 us each, 65.94 us total, host issue 6.50 us each (m 768 n 3072 k 8192 batch 1, bf16 tensor cores at 790 TFLOP/s x 144 tiles on 2 waves (55% filled), split K: 4 slices of 2048 (1 cuBLAS call, 576 tiles on 5 waves (87% filled)) 56.07 us, the reduction of 4 f32 partials (37.75 MB in the scratch buffer) 9.88 us)
  // CHECK: launches: 1
  // CHECK-NEXT: gemm calls: 1 (f32 0, bf16 1)
  // CHECK: graph replay: 72.14 us (device gaps 1.20 us, the graph launch 5.00 us)
  func.func @split_k(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
    %f = arith.constant 0 : i32
    %m = arith.constant 768 : i64
    %n = arith.constant 3072 : i64
    %k = arith.constant 8192 : i64
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %z = arith.constant 0 : i64
    %b1 = arith.constant 1 : i64
    call @fsdprt_gpu_gemm_bf16(%f, %f, %m, %n, %k, %one, %a, %k, %z, %b, %n, %z, %zero, %c, %n, %z, %b1) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
  // CHECK-LABEL: gpu cost report: @split_k_rest
  // CHECK: host issue 10.50 us each (m 768 n 768 k 8192 batch 1, bf16 tensor cores at 790 TFLOP/s x 36 tiles on 1 wave (27% filled), split K: 3 slices of 2728 and a rest of 8 (2 cuBLAS calls, 108 tiles on 1 wave (82% filled))
  // CHECK: host issue 4.00 us each (m 768 n 768 k 8192 batch 2, bf16 tensor cores at 790 TFLOP/s x 72 tiles on 1 wave (55% filled), compute-bound)
  // CHECK: launches: 1
  // CHECK-NEXT: gemm calls: 2 (f32 0, bf16 2)
  func.func @split_k_rest(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
    %f = arith.constant 0 : i32
    %d = arith.constant 768 : i64
    %k = arith.constant 8192 : i64
    %s = arith.constant 6291456 : i64
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %z = arith.constant 0 : i64
    %b1 = arith.constant 1 : i64
    %b2 = arith.constant 2 : i64
    call @fsdprt_gpu_gemm_bf16(%f, %f, %d, %d, %k, %one, %a, %k, %z, %b, %d, %z, %zero, %c, %d, %z, %b1) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    call @fsdprt_gpu_gemm_bf16(%f, %f, %d, %d, %k, %one, %a, %k, %s, %b, %d, %s, %zero, %c, %d, %s, %b2) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
}

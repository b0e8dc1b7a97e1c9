// The two formats the compiler does not emit yet, through the runtime's
// quantized all-gather called directly: nvfp4_2d (7, 16x16 blocks) and
// fp8_block_1x128_t (8, TE's [ceil(cols/128), rows] scale layout, swapped
// into the full tensor's layout after the gather). Every rank's result must
// equal the numpy/ml_dtypes model of each rank's slot, bit for bit.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(3); x = r.standard_normal(1024).astype(np.float32) * np.repeat(np.exp2(np.arange(8) * 3.0 - 10), 128).astype(np.float32); np.save('%t/x.npy', x)"
// RUN: fsdp-opt %s --fsdp-lower-to-llvm -o %t/l.mlir
// RUN: fsdp-run %t/l.mlir --entry nvfp4_2d --inputs %t --outputs %t/a --all-ranks
// RUN: %python %S/Inputs/check_te_formats.py %t/x.npy %t/a nvfp4_2d 8 64 | FileCheck %s --check-prefix=NV
// RUN: fsdp-run %t/l.mlir --entry block_t --inputs %t --outputs %t/b --all-ranks
// RUN: %python %S/Inputs/check_te_formats.py %t/x.npy %t/b fp8_block_1x128_t 2 256 | FileCheck %s --check-prefix=BT

// NV: PASS: nvfp4_2d [8, 64] x 2 ranks
// BT: PASS: fp8_block_1x128_t [2, 256] x 2 ranks

fsdp.mesh @mesh [shard = 2]
func.func private @fsdprt_jit_quantized_all_gather(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64)

func.func @ptr(%m: memref<512xf32>) -> !llvm.ptr {
  %i = memref.extract_aligned_pointer_as_index %m : memref<512xf32> -> index
  %w = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %w : i64 to !llvm.ptr
  return %p : !llvm.ptr
}
func.func @ptr1024(%m: memref<1024xf32>) -> !llvm.ptr {
  %i = memref.extract_aligned_pointer_as_index %m : memref<1024xf32> -> index
  %w = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %w : i64 to !llvm.ptr
  return %p : !llvm.ptr
}

// Gathers x (512 f32 per rank) in `format`, viewed as [rows, cols].
func.func @gather(%x: memref<512xf32>, %format: i32, %rows: i64, %cols: i64) -> memref<1024xf32> {
  %out = memref.alloc() : memref<1024xf32>
  %send = call @ptr(%x) : (memref<512xf32>) -> !llvm.ptr
  %recv = call @ptr1024(%out) : (memref<1024xf32>) -> !llvm.ptr
  %count = arith.constant 512 : i64
  %f32 = arith.constant 0 : i32
  %mask = arith.constant 1 : i64
  call @fsdprt_jit_quantized_all_gather(%send, %recv, %count, %f32, %format, %rows, %cols, %mask) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64) -> ()
  return %out : memref<1024xf32>
}

func.func @nvfp4_2d(%x: memref<512xf32> {fsdp.name = "x"}) -> (memref<1024xf32> {fsdp.name = "y"}) {
  %format = arith.constant 7 : i32
  %rows = arith.constant 8 : i64
  %cols = arith.constant 64 : i64
  %y = call @gather(%x, %format, %rows, %cols) : (memref<512xf32>, i32, i64, i64) -> memref<1024xf32>
  return %y : memref<1024xf32>
}

func.func @block_t(%x: memref<512xf32> {fsdp.name = "x"}) -> (memref<1024xf32> {fsdp.name = "y"}) {
  %format = arith.constant 8 : i32
  %rows = arith.constant 2 : i64
  %cols = arith.constant 256 : i64
  %y = call @gather(%x, %format, %rows, %cols) : (memref<512xf32>, i32, i64, i64) -> memref<1024xf32>
  return %y : memref<1024xf32>
}

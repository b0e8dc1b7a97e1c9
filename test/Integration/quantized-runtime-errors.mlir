// fsdprt_jit_quantized_all_gather called directly with arguments the
// compiler never emits: every rank records the error on its communicator,
// the world is aborted (no rank waits for the others) and fsdp-run reports
// it. @good is the same call with valid arguments.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/x.npy', np.linspace(-3, 3, 128, dtype=np.float32))"
// RUN: fsdp-opt %s --fsdp-lower-to-llvm -o %t/l.mlir
// RUN: fsdp-run %t/l.mlir --entry good --inputs %t --outputs %t/good
// RUN: not fsdp-run %t/l.mlir --entry bad_format --inputs %t --outputs %t/out 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not fsdp-run %t/l.mlir --entry bad_shape --inputs %t --outputs %t/out 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not fsdp-run %t/l.mlir --entry bad_block --inputs %t --outputs %t/out 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not fsdp-run %t/l.mlir --entry bad_mask --inputs %t --outputs %t/out 2>&1 | FileCheck %s --check-prefix=MASK
// RUN: not fsdp-run %t/l.mlir --entry bad_dtype --inputs %t --outputs %t/out 2>&1 | FileCheck %s --check-prefix=DTYPE

// FORMAT-DAG: rank 0: invalid argument: quantized_all_gather: unknown format 9
// FORMAT-DAG: rank 1: invalid argument: quantized_all_gather: unknown format 9
// SHAPE: invalid argument: quantized_all_gather: shape [3, 8] does not view 64 elements
// BLOCK: invalid argument: quantized_all_gather: mxfp8_rowwise: {{.*}}
// MASK: invalid argument: quantized_all_gather: group mask 2 selects axes outside the 1-axis mesh
// DTYPE: invalid argument: quantized_all_gather: dtype i32: only f32 and bf16 quantize

fsdp.mesh @mesh [shard = 2]
func.func private @fsdprt_jit_quantized_all_gather(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64)

func.func @ptr(%m: memref<64xf32>) -> !llvm.ptr {
  %i = memref.extract_aligned_pointer_as_index %m : memref<64xf32> -> index
  %w = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %w : i64 to !llvm.ptr
  return %p : !llvm.ptr
}
func.func @ptr128(%m: memref<128xf32>) -> !llvm.ptr {
  %i = memref.extract_aligned_pointer_as_index %m : memref<128xf32> -> index
  %w = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %w : i64 to !llvm.ptr
  return %p : !llvm.ptr
}

// Gathers x (64 f32 per rank) in `format`, viewed as [rows, cols].
func.func @gather(%x: memref<64xf32>, %dtype: i32, %format: i32, %rows: i64, %cols: i64, %mask: i64) -> memref<128xf32> {
  %out = memref.alloc() : memref<128xf32>
  %send = call @ptr(%x) : (memref<64xf32>) -> !llvm.ptr
  %recv = call @ptr128(%out) : (memref<128xf32>) -> !llvm.ptr
  %count = arith.constant 64 : i64
  call @fsdprt_jit_quantized_all_gather(%send, %recv, %count, %dtype, %format, %rows, %cols, %mask) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64) -> ()
  return %out : memref<128xf32>
}

func.func @good(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %f32 = arith.constant 0 : i32
  %nvfp4 = arith.constant 4 : i32
  %c4 = arith.constant 4 : i64
  %c16 = arith.constant 16 : i64
  %mask = arith.constant 1 : i64
  %y = call @gather(%x, %f32, %nvfp4, %c4, %c16, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

func.func @bad_format(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %f32 = arith.constant 0 : i32
  %format = arith.constant 9 : i32
  %c8 = arith.constant 8 : i64
  %mask = arith.constant 1 : i64
  %y = call @gather(%x, %f32, %format, %c8, %c8, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

func.func @bad_shape(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %f32 = arith.constant 0 : i32
  %e4m3 = arith.constant 0 : i32
  %c3 = arith.constant 3 : i64
  %c8 = arith.constant 8 : i64
  %mask = arith.constant 1 : i64
  %y = call @gather(%x, %f32, %e4m3, %c3, %c8, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

func.func @bad_block(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %f32 = arith.constant 0 : i32
  %rowwise = arith.constant 2 : i32
  %c8 = arith.constant 8 : i64
  %mask = arith.constant 1 : i64
  %y = call @gather(%x, %f32, %rowwise, %c8, %c8, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

func.func @bad_mask(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %f32 = arith.constant 0 : i32
  %e4m3 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i64
  %mask = arith.constant 2 : i64
  %y = call @gather(%x, %f32, %e4m3, %c8, %c8, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

func.func @bad_dtype(%x: memref<64xf32> {fsdp.name = "x"}) -> (memref<128xf32> {fsdp.name = "y"}) {
  %i32 = arith.constant 4 : i32
  %e4m3 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i64
  %mask = arith.constant 1 : i64
  %y = call @gather(%x, %i32, %e4m3, %c8, %c8, %mask) : (memref<64xf32>, i32, i32, i64, i64, i64) -> memref<128xf32>
  return %y : memref<128xf32>
}

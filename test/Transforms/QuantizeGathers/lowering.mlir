// fsdp.quantized_all_gather bufferizes to fsdp.buffer.quantized_all_gather
// (a fresh result buffer, the input read in place), which
// convert-fsdp-to-runtime lowers to
// fsdprt_jit_quantized_all_gather(send, recv, count, dtype, format, rows,
// cols, group_mask): dtype as fsdprt_dtype_t (f32 0, bf16 3), format as
// fsdprt_quant_format (nvfp4 4, mxfp8_colwise 3), mask bit i = mesh axis i.

// RUN: fsdp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF
// RUN: fsdp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --convert-fsdp-to-runtime | FileCheck %s --check-prefix=CALL
// RUN: not fsdp-opt %s --convert-fsdp-to-runtime 2>&1 | FileCheck %s --check-prefix=UNBUFFERIZED

fsdp.mesh @mesh [replicate = 2, shard = 4]

// BUF-LABEL: func.func @gather(
// BUF-SAME: %[[W:.*]]: memref<64x64xf32>, %[[P:.*]]: memref<2048xbf16>
// BUF: %[[FLAT:.*]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<64x64xf32> into memref<4096xf32>
// BUF: %[[OUT:.*]] = memref.alloc() {{.*}}: memref<16384xf32>
// BUF: fsdp.buffer.quantized_all_gather %[[FLAT]] into %[[OUT]] over @mesh ["shard"] format nvfp4 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2308 : i64} : memref<4096xf32>, memref<16384xf32>
// BUF: %[[OUT2:.*]] = memref.alloc() {{.*}}: memref<16384xbf16>
// BUF: fsdp.buffer.quantized_all_gather %[[P]] into %[[OUT2]] over @mesh ["replicate", "shard"] format mxfp8_colwise shape [64, 32] : memref<2048xbf16>, memref<16384xbf16>

// CALL-LABEL: func.func @gather(
// CALL-DAG: %[[C4096:.*]] = arith.constant 4096 : i64
// CALL-DAG: %[[F32:.*]] = arith.constant 0 : i32
// CALL-DAG: %[[NVFP4:.*]] = arith.constant 4 : i32
// CALL-DAG: %[[ROWS:.*]] = arith.constant 64 : i64
// CALL-DAG: %[[COLS:.*]] = arith.constant 64 : i64
// CALL-DAG: %[[SHARD:.*]] = arith.constant 2 : i64
// CALL: call @fsdprt_jit_quantized_all_gather(%{{.*}}, %{{.*}}, %[[C4096]], %[[F32]], %[[NVFP4]], %[[ROWS]], %[[COLS]], %[[SHARD]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64) -> ()
// CALL-DAG: %[[C2048:.*]] = arith.constant 2048 : i64
// CALL-DAG: %[[BF16:.*]] = arith.constant 3 : i32
// CALL-DAG: %[[COL:.*]] = arith.constant 3 : i32
// CALL-DAG: %[[C32:.*]] = arith.constant 32 : i64
// CALL-DAG: %[[BOTH:.*]] = arith.constant 3 : i64
// CALL-DAG: %[[ROWS2:.*]] = arith.constant 64 : i64
// CALL: call @fsdprt_jit_quantized_all_gather(%{{.*}}, %{{.*}}, %[[C2048]], %[[BF16]], %[[COL]], %[[ROWS2]], %[[C32]], %[[BOTH]])
// CALL-NOT: fsdp.buffer
// CALL: func.func private @fsdprt_jit_quantized_all_gather(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, i64)
// CALL-NOT: all_reduce

// UNBUFFERIZED: error: 'fsdp.quantized_all_gather' op must be expanded and bufferized before convert-fsdp-to-runtime
func.func @gather(%w: tensor<64x64xf32>, %p: tensor<2048xbf16>) -> (tensor<16384xf32>, tensor<16384xbf16>) {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<64x64xf32> into tensor<4096xf32>
  %g = fsdp.quantized_all_gather %flat over @mesh ["shard"] format nvfp4 shape [64, 64] {fsdp.origin = #fsdp.origin<phase = forward>, fsdp.wire_bytes = 2308 : i64} : tensor<4096xf32> -> tensor<16384xf32>
  %h = fsdp.quantized_all_gather %p over @mesh ["replicate", "shard"] format mxfp8_colwise shape [64, 32] : tensor<2048xbf16> -> tensor<16384xbf16>
  return %g, %h : tensor<16384xf32>, tensor<16384xbf16>
}


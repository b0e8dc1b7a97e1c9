// RUN: fsdp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=STEPS-BUF
// RUN: fsdp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --convert-fsdp-to-runtime | FileCheck %s --check-prefix=STEPS-CALL
// RUN: not fsdp-opt %s --convert-fsdp-to-runtime 2>&1 | FileCheck %s --check-prefix=STEPS-UNBUFFERIZED

// The local steps of a split quantized gather bufferize to their buffer
// forms and lower to fsdprt_jit_quant_amax(x, amax, count, dtype),
// fsdprt_jit_quantize(x, amax or null, packet, count, dtype, format, rows,
// cols) and fsdprt_jit_dequantize(packets, y, k, dtype, format, rows, cols).
// STEPS-BUF-LABEL: func.func @steps
// STEPS-BUF: fsdp.buffer.quant_amax %{{.*}} into %{{.*}} : memref<4096xf32>, memref<1xf32>
// STEPS-BUF: fsdp.buffer.all_reduce %{{.*}} into %{{.*}} over @mesh ["shard"] max {fsdp.movable}
// STEPS-BUF: fsdp.buffer.quantize %{{.*}} amax %{{.*}} into %{{.*}} format nvfp4 shape [64, 64] : memref<4096xf32>, memref<1xf32> -> memref<2308xi8>
// STEPS-BUF: fsdp.buffer.dequantize %{{.*}} into %{{.*}} format nvfp4 shape [64, 64] : memref<9232xi8>, memref<16384xf32>
// STEPS-BUF: fsdp.buffer.quantize %{{.*}} into %{{.*}} format mxfp8_colwise shape [64, 32] : memref<2048xbf16> -> memref<2112xi8>
// STEPS-CALL-LABEL: func.func @steps
// STEPS-CALL: call @fsdprt_jit_quant_amax(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i32) -> ()
// STEPS-CALL: call @fsdprt_jit_all_reduce(
// STEPS-CALL: %[[C4:.*]] = arith.constant 4 : i32
// STEPS-CALL: call @fsdprt_jit_quantize(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64) -> ()
// STEPS-CALL: call @fsdprt_jit_all_gather(
// STEPS-CALL: call @fsdprt_jit_dequantize(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64) -> ()
// Without an amax the pointer is null.
// STEPS-CALL: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// STEPS-CALL: call @fsdprt_jit_quantize(%{{.*}}, %[[NULL]],
// STEPS-UNBUFFERIZED: error: 'fsdp.quant_amax' op must be expanded and bufferized before convert-fsdp-to-runtime
fsdp.mesh @mesh [shard = 4]
func.func @steps(%x: tensor<4096xf32>, %y: tensor<2048xbf16>) -> (tensor<16384xf32>, tensor<2112xi8>) {
  %a = fsdp.quant_amax %x : tensor<4096xf32> -> tensor<1xf32>
  %g = fsdp.all_reduce %a over @mesh ["shard"] max {fsdp.movable} : tensor<1xf32> -> tensor<1xf32>
  %q = fsdp.quantize %x amax %g format nvfp4 shape [64, 64] : tensor<4096xf32>, tensor<1xf32> -> tensor<2308xi8>
  %p = fsdp.all_gather %q over @mesh ["shard"] : tensor<2308xi8> -> tensor<9232xi8>
  %r = fsdp.dequantize %p format nvfp4 shape [64, 64] : tensor<9232xi8> -> tensor<16384xf32>
  %qy = fsdp.quantize %y format mxfp8_colwise shape [64, 32] : tensor<2048xbf16> -> tensor<2112xi8>
  return %r, %qy : tensor<16384xf32>, tensor<2112xi8>
}

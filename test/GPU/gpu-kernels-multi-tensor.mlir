// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-kernels=report -verify-diagnostics | FileCheck %s

// A multi-tensor function (fsdp-gpu-multi-tensor) of three sums of squares:
// two split over blocks (2^20 elements: 203 blocks of 256 threads, 1,619
// partials each, 13,056 bytes of scratch with the alignment) and one a
// warp (768 elements: 1 block of 32 threads). Each split takes its own
// range of one scratch request (0 and 13,056: 26,112 bytes), made before
// any launch. Launch 1: the three first passes on 203 + 1 + 203 blocks of
// 256 threads, the part of a block chosen by its index; the warp's part
// runs on its block's first 32 threads and sees block 0 of a grid of 1.
// Launch 2: the two second passes, one block of 32 threads each.
#in = affine_map<(i) -> (i)>
#out = affine_map<(i) -> (0)>
// CHECK-LABEL: func.func private @__fsdp_multi_tensor
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(26112 : i64) : i64
// CHECK-NEXT: %[[PTR:.*]] = call @fsdprt_gpu_scratch(%[[BYTES]])
// CHECK-NOT: call @fsdprt_gpu_scratch
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<13056xi8> to memref<1619xf64>
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<26112xi8> to memref<1619xf64>
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c407, %{{.*}}, %{{.*}}) threads(%[[TX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{(_[0-9]+)?}},
// CHECK: %[[PAST1:.*]] = arith.cmpi uge, %[[BX]], %{{.*}} : index
// CHECK: %[[W1:.*]] = arith.select %[[PAST1]]
// CHECK: %[[PAST2:.*]] = arith.cmpi uge, %[[BX]], %{{.*}} : index
// CHECK: %[[W2:.*]] = arith.select %[[PAST2]], %{{.*}}, %[[W1]]
// CHECK: scf.index_switch %[[W2]] {fsdp.multi_tensor_parts = array<i64: 203, 256, 1, 32, 203, 256>}
// CHECK: case 0 {
// CHECK: memref.store %{{.*}} : memref<1619xf64>
// CHECK: case 1 {
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[TX]], %{{.*}} : index
// CHECK: scf.if %[[IN]] {
// CHECK: memref.store %{{.*}} : memref<1xf64>
// CHECK: case 2 {
// CHECK: memref.store %{{.*}} : memref<1619xf64>
// CHECK: default {
// CHECK: gpu.terminator
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c2, {{.*}}) threads({{.*}}) in (%{{.*}} = %c32{{(_[0-9]+)?}},
// CHECK: scf.index_switch %{{.*}} {fsdp.multi_tensor_parts = array<i64: 1, 32, 1, 32>}
// CHECK-NOT: gpu.launch
// CHECK: return
func.func private @__fsdp_multi_tensor(%x: memref<1048576xf32>, %s: memref<1xf64>, %y: memref<768xf32>, %t: memref<1xf64>, %z: memref<1048576xf32>, %u: memref<1xf64>) attributes {fsdp.kernel, fsdp.multi_tensor = "sum_of_squares"} {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%s : memref<1xf64>)
  // expected-remark @+3 {{GPU kernel: row reduction split over 203 blocks (1619 warp partials of 648 elements per output element), then one warp per output element (the fill before folded in)}}
  // expected-remark @+2 {{GPU kernel: multi-tensor launch 1 of 3 parts on 407 blocks}}
  // expected-remark @+1 {{GPU kernel: multi-tensor launch 2 of 2 parts on 2 blocks}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<1048576xf32>) outs(%s : memref<1xf64>) attrs = {fsdp.multi_tensor = "sum_of_squares"} {
  ^bb0(%a: f32, %acc: f64):
    %w = arith.extf %a : f32 to f64
    %sq = arith.mulf %w, %w : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  }
  linalg.fill ins(%zero : f64) outs(%t : memref<1xf64>)
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%y : memref<768xf32>) outs(%t : memref<1xf64>) attrs = {fsdp.multi_tensor = "sum_of_squares"} {
  ^bb0(%a: f32, %acc: f64):
    %w = arith.extf %a : f32 to f64
    %sq = arith.mulf %w, %w : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  }
  linalg.fill ins(%zero : f64) outs(%u : memref<1xf64>)
  // expected-remark @below {{GPU kernel: row reduction split over 203 blocks (1619 warp partials of 648 elements per output element), then one warp per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%z : memref<1048576xf32>) outs(%u : memref<1xf64>) attrs = {fsdp.multi_tensor = "sum_of_squares"} {
  ^bb0(%a: f32, %acc: f64):
    %w = arith.extf %a : f32 to f64
    %sq = arith.mulf %w, %w : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  }
  return
}

// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime | FileCheck %s

// Blocking collectives become calls with raw pointers, counts, the dtype and
// reduction codes of fsdprt.h, and the group's mesh-axis mask.
fsdp.mesh @mesh [replicate = 2, shard = 4]
// CHECK-LABEL: func.func @blocking
func.func @blocking(%a: memref<48xf32>, %b: memref<192xf32>, %c: memref<12xbf16>) {
  // CHECK: %[[IN:.*]] = memref.extract_aligned_pointer_as_index %{{.*}} : memref<48xf32> -> index
  // CHECK: llvm.inttoptr
  // CHECK: %[[N:.*]] = arith.constant 48 : i64
  // CHECK: %[[F32:.*]] = arith.constant 0 : i32
  // CHECK: %[[MASK:.*]] = arith.constant 2 : i64
  // CHECK: call @fsdprt_jit_all_gather(%{{.*}}, %{{.*}}, %[[N]], %[[F32]], %[[MASK]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i64) -> ()
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] : memref<48xf32>, memref<192xf32>
  // Reduce-scatter counts what each rank receives; avg is code 1; both axes: mask 3.
  // CHECK: %[[RN:.*]] = arith.constant 24 : i64
  // CHECK: %[[AVG:.*]] = arith.constant 1 : i32
  // CHECK: %[[BOTH:.*]] = arith.constant 3 : i64
  // CHECK: call @fsdprt_jit_reduce_scatter(%{{.*}}, %{{.*}}, %[[RN]], %{{.*}}, %[[AVG]], %[[BOTH]])
  %s = memref.subview %a[0] [24] [1] : memref<48xf32> to memref<24xf32, strided<[1]>>
  fsdp.buffer.reduce_scatter %b into %s over @mesh ["replicate", "shard"] avg : memref<192xf32>, memref<24xf32, strided<[1]>>
  // bf16 is dtype code 3; max is reduction code 2; the replicate axis is bit 0.
  // CHECK: %[[BF16:.*]] = arith.constant 3 : i32
  // CHECK: %[[MAX:.*]] = arith.constant 2 : i32
  // CHECK: %[[REP:.*]] = arith.constant 1 : i64
  // CHECK: call @fsdprt_jit_all_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[BF16]], %[[MAX]], %[[REP]])
  fsdp.buffer.all_reduce %c into %c over @mesh ["replicate"] max : memref<12xbf16>, memref<12xbf16>
  return
}
// CHECK-DAG: func.func private @fsdprt_jit_all_gather(!llvm.ptr, !llvm.ptr, i64, i32, i64)
// CHECK-DAG: func.func private @fsdprt_jit_reduce_scatter(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64)
// CHECK-DAG: func.func private @fsdprt_jit_all_reduce(!llvm.ptr, !llvm.ptr, i64, i32, i32, i64)

// -----

// A subview's offset is added to its base pointer (in bytes).
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @offset
func.func @offset(%a: memref<8xf32>, %b: memref<8xf32>) {
  // CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[V:.*]] : memref<4xf32, strided<[1], offset: 4>> -> index
  // CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[V]]
  // CHECK: %[[FOUR:.*]] = arith.constant 4 : index
  // CHECK: %[[BYTES:.*]] = arith.muli %[[OFF]], %[[FOUR]] : index
  // CHECK: arith.addi %[[BASE]], %[[BYTES]] : index
  %v = memref.subview %a[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  fsdp.buffer.all_gather %v into %b over @mesh ["shard"] : memref<4xf32, strided<[1], offset: 4>>, memref<8xf32>
  return
}

// -----

// Started collectives return the runtime's handle; each wait passes it back.
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @async
func.func @async(%a: memref<4xf32>, %b: memref<16xf32>) {
  // CHECK: %[[H:.*]] = call @fsdprt_jit_all_gather_start(%{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i32, i64) -> i64
  %r = fsdp.buffer.all_gather_start %a into %b over @mesh ["shard"] : memref<4xf32>, memref<16xf32>
  // CHECK: memref.store
  %c = arith.constant 1.0 : f32
  %i = arith.constant 0 : index
  memref.store %c, %a[%i] : memref<4xf32>
  // CHECK: call @fsdprt_jit_wait(%[[H]]) : (i64) -> ()
  fsdp.buffer.wait %r
  return
}

// -----

// The signature of every annotated function is recorded for the runner and
// the fsdp attributes leave the (soon lowered) arguments.
fsdp.mesh @mesh [shard = 4]
// CHECK: module attributes {fsdp.signatures = {step = {args = [{global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, name = "w", type = tensor<3x16xf32>}, {name = "x", type = tensor<8x16xf32>}], results = [{global_type = tensor<10x16xf32>, grad_of = 0 : i64, layout = #fsdp.layout<@mesh, [shard<0>]>, name = "grad.w", type = tensor<3x16xf32>}]}}}
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{.*}}: memref<3x16xf32>, %{{.*}}: memref<8x16xf32>) -> memref<3x16xf32>
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func @step(%w: memref<3x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<10x16xf32>, fsdp.name = "w"},
                %x: memref<8x16xf32> {fsdp.name = "x"}) -> (memref<3x16xf32> {fsdp.name = "grad.w", fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<10x16xf32>}) {
  return %w : memref<3x16xf32>
}

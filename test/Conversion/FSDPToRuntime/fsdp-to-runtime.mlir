// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime | FileCheck %s
// The output parses back (signatures included) and prints the same.
// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime | fsdp-opt -split-input-file | FileCheck %s

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

// Member-major buckets call the members entries with the member count and
// the address of a private constant array of the counts, one per distinct
// list (two collectives with the same counts share it).
fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: llvm.mlir.global private constant @__fsdp_bucket_members_{{[0-9]+}}(dense<[8, 0, 40]> : tensor<3xi64>) {addr_space = 0 : i32} : !llvm.array<3 x i64>
// CHECK-LABEL: llvm.mlir.global private constant @__fsdp_bucket_members(dense<[16, 32]> : tensor<2xi64>) {addr_space = 0 : i32} : !llvm.array<2 x i64>
// CHECK-LABEL: func.func @members
func.func @members(%a: memref<48xf32>, %b: memref<192xf32>) {
  // CHECK: %[[COUNTS:.*]] = llvm.mlir.addressof @__fsdp_bucket_members : !llvm.ptr
  // CHECK: %[[N:.*]] = arith.constant 48 : i64
  // CHECK: %[[F32:.*]] = arith.constant 0 : i32
  // CHECK: %[[MASK:.*]] = arith.constant 1 : i64
  // CHECK: %[[TWO:.*]] = arith.constant 2 : i64
  // CHECK: %[[H:.*]] = call @fsdprt_jit_all_gather_members_start(%{{.*}}, %{{.*}}, %[[N]], %[[F32]], %[[MASK]], %[[TWO]], %[[COUNTS]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i64, i64, !llvm.ptr) -> i64
  %r = fsdp.buffer.all_gather_start %a into %b over @mesh ["shard"] members [16, 32] : memref<48xf32>, memref<192xf32>
  // CHECK: call @fsdprt_jit_wait(%[[H]])
  fsdp.buffer.wait %r
  // CHECK: %[[AGAIN:.*]] = llvm.mlir.addressof @__fsdp_bucket_members : !llvm.ptr
  // CHECK: call @fsdprt_jit_reduce_scatter_members(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[AGAIN]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i64, i64, !llvm.ptr) -> ()
  fsdp.buffer.reduce_scatter %b into %a over @mesh ["shard"] sum members [16, 32] : memref<192xf32>, memref<48xf32>
  // CHECK: %[[OTHER:.*]] = llvm.mlir.addressof @__fsdp_bucket_members_{{[0-9]+}} : !llvm.ptr
  // CHECK: call @fsdprt_jit_all_gather_members(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OTHER]])
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] members [8, 0, 40] : memref<48xf32>, memref<192xf32>
  return
}

// -----

// The signature of every annotated function is recorded for the runner and
// the fsdp attributes leave the (soon lowered) arguments. The step stores
// each result's descriptor (3 + 2 x rank words) through a pointer it takes
// first and returns nothing.
fsdp.mesh @mesh [shard = 4]
// CHECK: module attributes {fsdp.signatures = {step = #fsdp.signature<args = [<"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>, <"x" : tensor<8x16xf32>>], results = [<"grad.w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>, <"result1" : tensor<f32>, loss>, <"x" : tensor<8x16xf32>>]>}}
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[OUT:.*]]: !llvm.ptr, %[[W:.*]]: memref<3x16xf32>, %[[X:.*]]: memref<8x16xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: %[[L:.*]] = memref.alloc() : memref<f32>
// CHECK: %[[D0:.*]] = builtin.unrealized_conversion_cast %[[W]] : memref<3x16xf32> to !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.store %[[D0]], %[[OUT]] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>, !llvm.ptr
// CHECK: %[[D1:.*]] = builtin.unrealized_conversion_cast %[[L]] : memref<f32> to !llvm.struct<(ptr, ptr, i64)>
// CHECK: %[[P1:.*]] = llvm.getelementptr %[[OUT]][7] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK: llvm.store %[[D1]], %[[P1]] : !llvm.struct<(ptr, ptr, i64)>, !llvm.ptr
// CHECK: %[[P2:.*]] = llvm.getelementptr %[[OUT]][10] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK: llvm.store %{{.*}}, %[[P2]]
// CHECK: return{{$}}
func.func @step(%w: memref<3x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<10x16xf32>, fsdp.name = "w"},
                %x: memref<8x16xf32> {fsdp.name = "x"})
    -> (memref<3x16xf32> {fsdp.name = "grad.w", fsdp.grad_of = 0 : i64, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<10x16xf32>},
        memref<f32> {fsdp.loss}, memref<8x16xf32> {fsdp.name = "x"}) {
  %l = memref.alloc() : memref<f32>
  return %w, %l, %x : memref<3x16xf32>, memref<f32>, memref<8x16xf32>
}

// -----

// A function without fsdp attributes is no entry: unchanged.
// CHECK-NOT: fsdp.signatures
// CHECK-LABEL: func.func @helper
// CHECK-SAME: (%{{.*}}: memref<4xf32>) -> memref<4xf32> {
func.func @helper(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}

// -----

// The training fields: update_of, state_of and the optimizer role.
fsdp.mesh @mesh [shard = 2]
// CHECK: fsdp.signatures = {train = #fsdp.signature<args = [<"w" : tensor<2xf32>, global_type = tensor<4xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>, <"w.m" : tensor<2xf32>, global_type = tensor<4xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, state_of = 0>, <"lr" : tensor<f32>, role = lr>], results = [<"w" : tensor<2xf32>, global_type = tensor<4xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, update_of = 0>]>}
// CHECK-LABEL: func.func @train
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: memref<2xf32>, %{{.*}}: memref<2xf32>, %{{.*}}: memref<f32>)
func.func @train(%w: memref<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "w", fsdp.unit = "l0"},
                 %m: memref<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "w.m", fsdp.state_of = 0 : i64},
                 %lr: memref<f32> {fsdp.name = "lr", fsdp.optim = "lr"})
    -> (memref<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp.name = "w", fsdp.update_of = 0 : i64}) {
  return %w : memref<2xf32>
}

// -----

// A run-time check (the PyTorch frontend's guard on a value read from a
// tensor) becomes a call to fsdprt_jit_guard with the condition widened to
// i32 and its message as a NUL-terminated internal global, one per check.
// CHECK-DAG: llvm.mlir.global internal constant @fsdp_guard_message_0("guard failed: first\00")
// CHECK-DAG: llvm.mlir.global internal constant @fsdp_guard_message_1("second \22quoted\22\00")
// CHECK-LABEL: func.func @guards
func.func @guards(%a: memref<i1>, %b: i1) {
  // CHECK: %[[V:.*]] = memref.load
  // CHECK: %[[OK:.*]] = arith.extui %[[V]] : i1 to i32
  // CHECK: %[[MSG:.*]] = llvm.mlir.addressof @fsdp_guard_message_0
  // CHECK: call @fsdprt_jit_guard(%[[OK]], %{{.*}}) : (i32, !llvm.ptr) -> ()
  %v = memref.load %a[] : memref<i1>
  cf.assert %v, "guard failed: first"
  // CHECK: arith.extui %{{.*}} : i1 to i32
  // CHECK: call @fsdprt_jit_guard
  // CHECK-NOT: cf.assert
  cf.assert %b, "second \"quoted\""
  return
}

// -----

// An assert inside a kernel's body (torch-mlir's bounds check of an
// embedding index) stays a cf.assert: it is per element, and device code
// under compute=gpu.
// CHECK-LABEL: func.func @bounds_check_in_kernel
// CHECK-NOT: fsdprt_jit_guard
// CHECK: cf.assert %{{.*}}, "index must be smaller than dim size"
func.func @bounds_check_in_kernel(%idx: memref<4xi64>, %out: memref<4xi64>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]}
      ins(%idx : memref<4xi64>) outs(%out : memref<4xi64>) {
  ^bb0(%i: i64, %o: i64):
    %c8 = arith.constant 8 : i64
    %lt = arith.cmpi slt, %i, %c8 : i64
    cf.assert %lt, "index must be smaller than dim size"
    linalg.yield %i : i64
  }
  return
}


// -----

// The rank's index on an axis: a call with the axis mask, no collective.
fsdp.mesh @mesh [dp = 2, tp = 2]
// CHECK-LABEL: func.func @axis_index
func.func @axis_index() -> (index, index) {
  // CHECK: %[[TP:.*]] = arith.constant 2 : i64
  // CHECK: %[[T:.*]] = call @fsdprt_jit_axis_index(%[[TP]]) : (i64) -> i64
  // CHECK: %[[TI:.*]] = arith.index_cast %[[T]] : i64 to index
  %t = fsdp.axis_index @mesh ["tp"]
  // CHECK: %[[BOTH:.*]] = arith.constant 3 : i64
  // CHECK: %[[R:.*]] = call @fsdprt_jit_axis_index(%[[BOTH]]) : (i64) -> i64
  // CHECK: %[[RI:.*]] = arith.index_cast %[[R]] : i64 to index
  %r = fsdp.axis_index @mesh ["dp", "tp"]
  // CHECK: return %[[TI]], %[[RI]]
  return %t, %r : index, index
}
// CHECK: func.func private @fsdprt_jit_axis_index(i64) -> i64

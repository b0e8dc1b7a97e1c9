// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-assign-buffers{poison=false})" | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-assign-buffers{poison=false alignment=128})" | FileCheck %s --check-prefix=ALIGN
// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-assign-buffers)" | FileCheck %s --check-prefix=POISON
// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-assign-buffers{poison=false entry-results=false})" | FileCheck %s --check-prefix=NORES
// RUN: not fsdp-opt %s --pass-pipeline="builtin.module(fsdp-assign-buffers{alignment=48})" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: option alignment must be a power of two between 1 and 4096 bytes, got 48

// An entry takes its arena from the runtime. Sizes round up to the
// alignment (32 B and 16 B take 64 B), a dead buffer's range is reused (%c
// at %a's offset 0 once %a is freed), and the plan is recorded.
// CHECK: module attributes {fsdp.memory_plans = {reuse = #fsdp.memory_plan<arena = 512, outside = 0, buffers = 3, largest = [400, 32, 16]>}}
// CHECK-LABEL: func.func @reuse
// CHECK: %[[BASE:.*]] = call @fsdprt_jit_arena(%{{.*}}) : (i64) -> !llvm.ptr
// CHECK: %[[ARENA:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<512xi8>
// CHECK: %[[O0:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[O0]]][] : memref<512xi8> to memref<8xf32>
// CHECK: linalg.copy ins(%{{.*}} : memref<8xf32>) outs(%[[A]] : memref<8xf32>)
// CHECK: %[[O64:.*]] = arith.constant 64 : index
// CHECK: memref.view %[[ARENA]][%[[O64]]][] : memref<512xi8> to memref<100xf32>
// CHECK: %[[O0B:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[O0B]]][] : memref<512xi8> to memref<4xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return
// With 128 B alignment every offset is a multiple of 128.
// ALIGN: #fsdp.memory_plan<arena = 640, outside = 0, buffers = 3
// ALIGN-LABEL: func.func @reuse
// ALIGN: arith.constant 128 : index
// ALIGN: memref.view %{{.*}} : memref<640xi8> to memref<100xf32>
// Poisoning: live at the allocation, dead at the free.
// POISON-LABEL: func.func @reuse
// POISON: %[[BASE:.*]] = call @fsdprt_jit_arena
// POISON: memref.view
// POISON: %[[P:.*]] = llvm.getelementptr %[[BASE]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// POISON: call @fsdprt_jit_arena_unpoison(%[[P]], %{{.*}}) : (!llvm.ptr, i64) -> ()
// POISON: linalg.copy
// POISON: call @fsdprt_jit_arena_poison
func.func @reuse(%x: memref<8xf32>, %y: memref<8xf32>) {
  %a = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%a : memref<8xf32>)
  %b = memref.alloc() : memref<100xf32>
  memref.dealloc %a : memref<8xf32>
  %c = memref.alloc() : memref<4xf32>
  %v = memref.subview %b[0] [8] [1] : memref<100xf32> to memref<8xf32, strided<[1]>>
  linalg.copy ins(%v : memref<8xf32, strided<[1]>>) outs(%y : memref<8xf32>)
  memref.dealloc %b : memref<100xf32>
  memref.dealloc %c : memref<4xf32>
  return
}

// -----

// What stays outside: a dynamic size, a conditional free, a buffer of a
// loop body. %t and the result %r are planned (the result live to the
// return: the runners copy an entry's results before its next call); the
// outside peak counts the conditionally freed buffer and the loop's (64 +
// 32 B). With entry-results=false the result stays outside too (16 B).
// NORES: reuse = #fsdp.memory_plan<arena = 512,
// NORES: #fsdp.memory_plan<arena = 64, outside = 112, buffers = 1, largest = [16]>
// CHECK: #fsdp.memory_plan<arena = 128, outside = 96, buffers = 2, largest = [16, 16]>
// CHECK-LABEL: func.func @outside
// CHECK: %[[R:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<128xi8> to memref<4xf32>
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: memref.alloc() : memref<16xf32>
// CHECK: scf.if
// CHECK-NEXT: memref.dealloc
// CHECK: scf.for
// CHECK-NEXT: memref.alloc() : memref<8xf32>
// CHECK-NEXT: memref.dealloc
// CHECK: memref.view %{{.*}} : memref<128xi8> to memref<2xf64>
// CHECK-NEXT: return %[[R]]
func.func @outside(%n: index, %p: i1) -> memref<4xf32> {
  %r = memref.alloc() : memref<4xf32>
  %d = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %d : memref<?xf32>
  %c = memref.alloc() : memref<16xf32>
  scf.if %p {
    memref.dealloc %c : memref<16xf32>
  }
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %l = memref.alloc() : memref<8xf32>
    memref.dealloc %l : memref<8xf32>
  }
  %t = memref.alloc() : memref<2xf64>
  memref.dealloc %t : memref<2xf64>
  return %r : memref<4xf32>
}

// -----

// Decreasing-size packing beats program order: in program order %c
// (128 B) does not fit the hole %a (64 B) leaves below %b and goes on top
// (256 B); placed first, %c takes offset 0, %b 128 and %a, live only with
// %b, 0 again (192 B, the most bytes ever live).
// CHECK: #fsdp.memory_plan<arena = 192, outside = 0, buffers = 3, largest = [128, 64, 64]>
// CHECK-LABEL: func.func @by_size
// CHECK: %[[A0:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = memref.view %{{.*}}[%[[A0]]][] : memref<192xi8> to memref<16xf32>
// CHECK: %[[B128:.*]] = arith.constant 128 : index
// CHECK: memref.view %{{.*}}[%[[B128]]][] : memref<192xi8> to memref<16xf32>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %{{.*}}[%[[C0]]][] : memref<192xi8> to memref<32xf32>
func.func @by_size(%x: memref<16xf32>, %y: memref<32xf32>) {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  linalg.copy ins(%a : memref<16xf32>) outs(%b : memref<16xf32>)
  memref.dealloc %a : memref<16xf32>
  %c = memref.alloc() : memref<32xf32>
  linalg.copy ins(%y : memref<32xf32>) outs(%c : memref<32xf32>)
  linalg.copy ins(%b : memref<16xf32>) outs(%x : memref<16xf32>)
  memref.dealloc %b : memref<16xf32>
  linalg.copy ins(%c : memref<32xf32>) outs(%y : memref<32xf32>)
  memref.dealloc %c : memref<32xf32>
  return
}

// -----

// A segment called once is planned with its caller: it takes the caller's
// arena, its temporary %t is live only during its part of the call and its
// result %r from its allocation in the segment to the caller's free, so %r
// reuses %t's range (256 B; an out-parameter allocated before the call
// next to a sub-arena held for the whole call took 64 + 256 B).
// CHECK: #fsdp.memory_plan<arena = 256, outside = 0, buffers = 2, largest = [256, 64]>
// CHECK-LABEL: func.func private @once
// CHECK-SAME: (%[[X:.*]]: memref<16xf32>, %[[ARENA:.*]]: memref<256xi8>) -> memref<16xf32>
// CHECK: %[[T0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[T0]]][] : memref<256xi8> to memref<64xf32>
// CHECK: %[[R0:.*]] = arith.constant 0 : index
// CHECK: %[[R:.*]] = memref.view %[[ARENA]][%[[R0]]][] : memref<256xi8> to memref<16xf32>
// CHECK: return %[[R]]
// CHECK-LABEL: func.func @calls_once
// CHECK: %[[A:.*]] = builtin.unrealized_conversion_cast {{.*}} to memref<256xi8>
// CHECK: call @once(%{{.*}}, %[[A]]) : (memref<16xf32>, memref<256xi8>) -> memref<16xf32>
// CHECK-NOT: memref.dealloc
// POISON-LABEL: func.func private @once
// POISON: memref.extract_aligned_pointer_as_index
// POISON: call @fsdprt_jit_arena_unpoison
// POISON: call @fsdprt_jit_arena_poison
// POISON: call @fsdprt_jit_arena_unpoison
// POISON-LABEL: func.func @calls_once
// POISON: %[[BASE:.*]] = call @fsdprt_jit_arena
// POISON: call @fsdprt_jit_arena_poison(%[[BASE]], %{{.*}})
// POISON: call @once
// POISON: call @fsdprt_jit_arena_poison
func.func private @once(%x: memref<16xf32>) -> memref<16xf32> {
  %t = memref.alloc() : memref<64xf32>
  %v = memref.subview %t[0] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1]>>
  linalg.copy ins(%x : memref<16xf32>) outs(%v : memref<16xf32, strided<[1]>>)
  linalg.copy ins(%v : memref<16xf32, strided<[1]>>) outs(%x : memref<16xf32>)
  memref.dealloc %t : memref<64xf32>
  %r = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%r : memref<16xf32>)
  return %r : memref<16xf32>
}
func.func @calls_once(%x: memref<16xf32>, %y: memref<16xf32>) {
  %0 = call @once(%x) : (memref<16xf32>) -> memref<16xf32>
  linalg.copy ins(%0 : memref<16xf32>) outs(%y : memref<16xf32>)
  memref.dealloc %0 : memref<16xf32>
  return
}

// -----

// A segment called twice by an entry: each call's buffers are planned in
// the entry's arena at the times of that call, and the call passes their
// offsets (%t at 0 in both calls; the result at 128, then at 192 while
// the first one is still live). Its results stay results.
// CHECK: #fsdp.memory_plan<arena = 256, outside = 0, buffers = 4, largest = [128, 128, 64]>
// CHECK-LABEL: func.func private @segment
// CHECK-SAME: (%[[X:.*]]: memref<16xf32>, %[[ARENA:.*]]: memref<256xi8>, %[[OT:.*]]: index, %[[OR:.*]]: index) -> memref<16xf32>
// CHECK: memref.view %[[ARENA]][%[[OT]]][] : memref<256xi8> to memref<32xf32>
// CHECK: %[[R:.*]] = memref.view %[[ARENA]][%[[OR]]][] : memref<256xi8> to memref<4x4xf32>
// CHECK: %[[F:.*]] = memref.collapse_shape %[[R]]
// CHECK: return %[[F]] : memref<16xf32>
// CHECK-LABEL: func.func @caller
// CHECK: %[[A:.*]] = builtin.unrealized_conversion_cast {{.*}} to memref<256xi8>
// CHECK: %[[T1:.*]] = arith.constant 0 : index
// CHECK: %[[R1:.*]] = arith.constant 128 : index
// CHECK: %[[F1:.*]] = call @segment(%{{.*}}, %[[A]], %[[T1]], %[[R1]])
// CHECK: %[[T2:.*]] = arith.constant 0 : index
// CHECK: %[[R2:.*]] = arith.constant 192 : index
// CHECK: call @segment(%[[F1]], %[[A]], %[[T2]], %[[R2]])
// CHECK-NOT: memref.dealloc
// The free of a result in the caller poisons it at that call's offset.
// POISON-LABEL: func.func private @segment
// POISON: %[[P:.*]] = llvm.inttoptr
// POISON: %[[O:.*]] = arith.index_cast %{{.*}} : index to i64
// POISON: llvm.getelementptr %[[P]][%[[O]]]
// POISON: call @fsdprt_jit_arena_unpoison
// POISON-LABEL: func.func @caller
// POISON: call @segment
// POISON: call @segment
// POISON: %[[C:.*]] = arith.constant 128 : index
// POISON: %[[CI:.*]] = arith.index_cast %[[C]] : index to i64
// POISON: llvm.getelementptr %{{.*}}[%[[CI]]]
// POISON: call @fsdprt_jit_arena_poison
func.func private @segment(%x: memref<16xf32>) -> memref<16xf32> {
  %t = memref.alloc() : memref<32xf32>
  %v = memref.subview %t[0] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1]>>
  linalg.copy ins(%x : memref<16xf32>) outs(%v : memref<16xf32, strided<[1]>>)
  %r = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
  %e = memref.expand_shape %x [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  linalg.copy ins(%e : memref<4x4xf32>) outs(%r : memref<4x4xf32>)
  memref.dealloc %t : memref<32xf32>
  %f = memref.collapse_shape %r [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  return %f : memref<16xf32>
}
func.func @caller(%x: memref<16xf32>, %y: memref<16xf32>) {
  %0 = call @segment(%x) : (memref<16xf32>) -> memref<16xf32>
  %1 = call @segment(%0) : (memref<16xf32>) -> memref<16xf32>
  memref.dealloc %0 : memref<16xf32>
  linalg.copy ins(%1 : memref<16xf32>) outs(%y : memref<16xf32>)
  memref.dealloc %1 : memref<16xf32>
  return
}

// -----

// A segment called by a function that is itself called twice has a plan
// of its own: its result (a reshaped allocation) becomes an out-parameter
// that its caller allocates and plans, the caller repeating the reshape;
// its temporary goes into a sub-arena of its own peak (128 B), an argument
// the caller allocates around each call. @mid, called twice, plans those
// per call; the second call's out-parameter reuses the first call's
// sub-arena once that is dead.
// CHECK: #fsdp.memory_plan<arena = 256, outside = 0, buffers = 8, largest = [128, 128, 128]>
// CHECK-LABEL: func.func private @inner
// CHECK-SAME: (%[[X:.*]]: memref<16xf32>, %[[OUT:.*]]: memref<4x4xf32>, %[[SUB:.*]]: memref<128xi8>) {
// CHECK: memref.view %[[SUB]][%{{.*}}][] : memref<128xi8> to memref<32xf32>
// CHECK: outs(%[[OUT]] : memref<4x4xf32>)
// CHECK: return{{$}}
// CHECK-LABEL: func.func private @mid
// CHECK-SAME: %[[ARENA:[^:]*]]: memref<256xi8>, %[[O0:.*]]: index, %[[O1:.*]]: index, %[[O2:.*]]: index, %[[O3:.*]]: index)
// CHECK: %[[R0:.*]] = memref.view %[[ARENA]][%[[O0]]][] : memref<256xi8> to memref<4x4xf32>
// CHECK: %[[F0:.*]] = memref.collapse_shape %[[R0]]
// CHECK: %[[S0:.*]] = memref.view %[[ARENA]][%[[O1]]][] : memref<256xi8> to memref<128xi8>
// CHECK: call @inner(%{{.*}}, %[[R0]], %[[S0]])
// CHECK: %[[R1:.*]] = memref.view %[[ARENA]][%[[O2]]][] : memref<256xi8> to memref<4x4xf32>
// CHECK: %[[S1:.*]] = memref.view %[[ARENA]][%[[O3]]][] : memref<256xi8> to memref<128xi8>
// CHECK: call @inner(%[[F0]], %[[R1]], %[[S1]])
// CHECK-NOT: memref.dealloc
// CHECK-LABEL: func.func @nested
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: %[[C64B:.*]] = arith.constant 64 : index
// CHECK: %[[C128:.*]] = arith.constant 128 : index
// CHECK: call @mid(%{{.*}}, %{{.*}}, %{{.*}}, %[[C0]], %[[C64]], %[[C64B]], %[[C128]])
// CHECK: call @mid
func.func private @inner(%x: memref<16xf32>) -> memref<16xf32> {
  %t = memref.alloc() : memref<32xf32>
  %v = memref.subview %t[0] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1]>>
  linalg.copy ins(%x : memref<16xf32>) outs(%v : memref<16xf32, strided<[1]>>)
  %r = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
  %e = memref.expand_shape %x [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  linalg.copy ins(%e : memref<4x4xf32>) outs(%r : memref<4x4xf32>)
  memref.dealloc %t : memref<32xf32>
  %f = memref.collapse_shape %r [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  return %f : memref<16xf32>
}
func.func private @mid(%x: memref<16xf32>, %y: memref<16xf32>) {
  %0 = call @inner(%x) : (memref<16xf32>) -> memref<16xf32>
  %1 = call @inner(%0) : (memref<16xf32>) -> memref<16xf32>
  memref.dealloc %0 : memref<16xf32>
  linalg.copy ins(%1 : memref<16xf32>) outs(%y : memref<16xf32>)
  memref.dealloc %1 : memref<16xf32>
  return
}
func.func @nested(%x: memref<16xf32>, %y: memref<16xf32>) {
  call @mid(%x, %y) : (memref<16xf32>, memref<16xf32>) -> ()
  call @mid(%y, %x) : (memref<16xf32>, memref<16xf32>) -> ()
  return
}

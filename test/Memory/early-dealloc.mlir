// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-early-dealloc)" | FileCheck %s

// A temporary is freed after its last use (through a view), not at the end.
// CHECK-LABEL: func.func @after_last_use
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.subview %[[A]]
// CHECK-NEXT: linalg.copy
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: return
func.func @after_last_use(%x: memref<8xf32>, %y: memref<4xf32>) {
  %cst = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%a : memref<8xf32>)
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  linalg.copy ins(%v : memref<4xf32, strided<[1]>>) outs(%y : memref<4xf32>)
  linalg.fill ins(%cst : f32) outs(%x : memref<8xf32>)
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

// A buffer a started collective writes lives until the collective's wait.
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func @until_wait
// CHECK: %[[G:.*]] = memref.alloc
// CHECK: %[[R:.*]] = fsdp.buffer.all_gather_start %{{.*}} into %[[G]]
// CHECK: linalg.fill
// CHECK-NEXT: fsdp.buffer.wait %[[R]]
// CHECK-NEXT: memref.dealloc %[[G]]
// CHECK-NEXT: linalg.fill
func.func @until_wait(%x: memref<4xf32>, %y: memref<4xf32>) {
  %cst = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<8xf32>
  %r = fsdp.buffer.all_gather_start %x into %g over @mesh ["shard"] : memref<4xf32>, memref<8xf32>
  linalg.fill ins(%cst : f32) outs(%y : memref<4xf32>)
  fsdp.buffer.wait %r
  linalg.fill ins(%cst : f32) outs(%x : memref<4xf32>)
  memref.dealloc %g : memref<8xf32>
  return
}

// -----

// A use inside a loop keeps the buffer until after the loop.
// CHECK-LABEL: func.func @nested_use
// CHECK: scf.for
// CHECK: }
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: linalg.fill
func.func @nested_use(%x: memref<4xf32>) {
  %cst = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<4xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    linalg.copy ins(%x : memref<4xf32>) outs(%a : memref<4xf32>)
  }
  linalg.fill ins(%cst : f32) outs(%x : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  return
}

// -----

// A buffer whose address is taken, or that flows through an operation the
// pass cannot follow, keeps its deallocation where it was.
// CHECK-LABEL: func.func @escapes
// CHECK: linalg.fill
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
func.func @escapes(%x: memref<4xf32>, %c: i1) {
  %cst = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %b = memref.alloc() : memref<4xf32>
  %s = arith.select %c, %b, %x : memref<4xf32>
  linalg.fill ins(%cst : f32) outs(%x : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return
}

// -----

// Ownership-based deallocation frees the step's buffers in one op at the
// end. A buffer a segment returns (segments return only buffers they
// allocate) leaves that op: freed right after its last use, here the wait
// of the gather that reads it. A step result is retained and never freed;
// the gathered buffer is freed after its last use. The segment's own op
// loses its results (retained) and its temporary (freed after its use).
fsdp.mesh @mesh [shard = 2]
// CHECK-LABEL: func.func private @segment
// CHECK: %[[T:.*]] = memref.alloc
// CHECK: %[[R0:.*]] = memref.alloc
// CHECK: %[[R1:.*]] = memref.alloc
// CHECK: linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%[[T]]
// CHECK-NEXT: linalg.copy ins(%[[T]] : memref<4xf32>) outs(%[[R0]]
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: linalg.copy
// CHECK-NOT: dealloc
// CHECK: return %[[R0]], %[[R1]]
func.func private @segment(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %true = arith.constant true
  %t = memref.alloc() : memref<4xf32>
  %r0 = memref.alloc() : memref<4xf32>
  %r1 = memref.alloc() : memref<4xf32>
  linalg.copy ins(%a : memref<4xf32>) outs(%t : memref<4xf32>)
  linalg.copy ins(%t : memref<4xf32>) outs(%r0 : memref<4xf32>)
  linalg.copy ins(%a : memref<4xf32>) outs(%r1 : memref<4xf32>)
  %u:2 = bufferization.dealloc (%t, %r0, %r1 : memref<4xf32>, memref<4xf32>, memref<4xf32>) if (%true, %true, %true) retain (%r0, %r1 : memref<4xf32>, memref<4xf32>)
  return %r0, %r1 : memref<4xf32>, memref<4xf32>
}
// CHECK-LABEL: func.func @step
// CHECK: %[[S:.*]]:2 = call @segment
// CHECK-NEXT: %[[G:.*]] = memref.alloc
// CHECK-NEXT: %[[Q:.*]] = fsdp.buffer.all_gather_start %[[S]]#0 into %[[G]]
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: fsdp.buffer.wait %[[Q]]
// CHECK-NEXT: memref.dealloc %[[S]]#0
// CHECK-NEXT: linalg.copy ins(%[[G]]
// CHECK-NEXT: memref.dealloc %[[G]]
// CHECK-NEXT: linalg.fill
// CHECK-NOT: dealloc
// CHECK: return %[[S]]#1
func.func @step(%x: memref<4xf32>, %y: memref<8xf32>) -> memref<4xf32> {
  %true = arith.constant true
  %cst = arith.constant 0.0 : f32
  %s:2 = call @segment(%x) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  %g = memref.alloc() : memref<8xf32>
  %q = fsdp.buffer.all_gather_start %s#0 into %g over @mesh ["shard"] : memref<4xf32>, memref<8xf32>
  linalg.fill ins(%cst : f32) outs(%x : memref<4xf32>)
  fsdp.buffer.wait %q
  linalg.copy ins(%g : memref<8xf32>) outs(%y : memref<8xf32>)
  linalg.fill ins(%cst : f32) outs(%y : memref<8xf32>)
  %b0, %o0, %n0, %t0 = memref.extract_strided_metadata %s#0 : memref<4xf32> -> memref<f32>, index, index, index
  %b1, %o1, %n1, %t1 = memref.extract_strided_metadata %s#1 : memref<4xf32> -> memref<f32>, index, index, index
  %u = bufferization.dealloc (%b0, %b1, %g : memref<f32>, memref<f32>, memref<8xf32>) if (%true, %true, %true) retain (%s#1 : memref<4xf32>)
  return %s#1 : memref<4xf32>
}

// -----

// A segment that returns one buffer twice (once as a view): its two results
// are one buffer, freed once after the last use of either.
// CHECK-LABEL: func.func @twice
// CHECK: %[[S:.*]]:2 = call @segment_twice
// CHECK-NEXT: linalg.copy ins(%[[S]]#1
// CHECK-NEXT: linalg.copy ins(%[[S]]#0
// CHECK-NEXT: memref.dealloc %[[S]]#0
// CHECK-NEXT: linalg.fill
// CHECK-NOT: dealloc
// CHECK: return
func.func private @segment_twice(%a: memref<8xf32>) -> (memref<8xf32>, memref<2x4xf32>) {
  %r = memref.alloc() : memref<8xf32>
  linalg.copy ins(%a : memref<8xf32>) outs(%r : memref<8xf32>)
  %v = memref.expand_shape %r [[0, 1]] output_shape [2, 4] : memref<8xf32> into memref<2x4xf32>
  return %r, %v : memref<8xf32>, memref<2x4xf32>
}
func.func @twice(%x: memref<8xf32>, %y: memref<2x4xf32>) {
  %true = arith.constant true
  %cst = arith.constant 0.0 : f32
  %s:2 = call @segment_twice(%x) : (memref<8xf32>) -> (memref<8xf32>, memref<2x4xf32>)
  linalg.copy ins(%s#1 : memref<2x4xf32>) outs(%y : memref<2x4xf32>)
  linalg.copy ins(%s#0 : memref<8xf32>) outs(%x : memref<8xf32>)
  linalg.fill ins(%cst : f32) outs(%x : memref<8xf32>)
  %b0, %o0, %n0, %t0 = memref.extract_strided_metadata %s#0 : memref<8xf32> -> memref<f32>, index, index, index
  %b1, %o1, %n1:2, %t1:2 = memref.extract_strided_metadata %s#1 : memref<2x4xf32> -> memref<f32>, index, index, index, index, index
  bufferization.dealloc (%b0, %b1 : memref<f32>, memref<f32>) if (%true, %true)
  return
}

// -----

// What the pass cannot follow keeps its free in the op at the end: the
// results of a function that returns a view of its argument (they may
// alias the buffer passed in, which therefore stays too), a buffer that
// flows through an unknown operation (arith.select), and a conditional
// free.
// CHECK-LABEL: func.func @unfollowable
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: %[[V:.*]] = call @returns_view(%[[A]])
// CHECK: %[[B:.*]] = memref.alloc
// CHECK: %[[C:.*]] = memref.alloc
// CHECK: arith.select
// CHECK: %[[D:.*]] = memref.alloc
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: memref.dealloc %[[D]]
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: memref.extract_strided_metadata %[[V]]
// CHECK-NEXT: bufferization.dealloc (%[[A]], %{{.*}}, %[[B]], %[[C]] : {{.*}}) if (%true, %true, %true, %{{.*}})
// CHECK-NEXT: return
func.func private @returns_view(%a: memref<8xf32>) -> memref<4xf32> {
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32>
  return %v : memref<4xf32>
}
func.func @unfollowable(%x: memref<4xf32>, %c: i1) {
  %true = arith.constant true
  %cst = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  %v = call @returns_view(%a) : (memref<8xf32>) -> memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %c2 = memref.alloc() : memref<4xf32>
  %s = arith.select %c, %b, %x : memref<4xf32>
  %d = memref.alloc() : memref<4xf32>
  linalg.fill ins(%cst : f32) outs(%d : memref<4xf32>)
  linalg.fill ins(%cst : f32) outs(%s : memref<4xf32>)
  %bv, %o, %n, %t = memref.extract_strided_metadata %v : memref<4xf32> -> memref<f32>, index, index, index
  bufferization.dealloc (%a, %bv, %b, %c2, %d : memref<8xf32>, memref<f32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) if (%true, %true, %true, %c, %true)
  return
}

// -----

// A plain free of a segment's result moves up after its last use too.
// CHECK-LABEL: func.func @plain_free_of_result
// CHECK: %[[S:.*]] = call @fresh
// CHECK-NEXT: linalg.copy ins(%[[S]]
// CHECK-NEXT: memref.dealloc %[[S]]
// CHECK-NEXT: linalg.fill
func.func private @fresh(%a: memref<4xf32>) -> memref<4xf32> {
  %r = memref.alloc() : memref<4xf32>
  linalg.copy ins(%a : memref<4xf32>) outs(%r : memref<4xf32>)
  return %r : memref<4xf32>
}
func.func @plain_free_of_result(%x: memref<4xf32>) {
  %cst = arith.constant 0.0 : f32
  %s = call @fresh(%x) : (memref<4xf32>) -> memref<4xf32>
  linalg.copy ins(%s : memref<4xf32>) outs(%x : memref<4xf32>)
  linalg.fill ins(%cst : f32) outs(%x : memref<4xf32>)
  memref.dealloc %s : memref<4xf32>
  return
}

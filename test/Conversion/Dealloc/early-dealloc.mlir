// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fsdp-early-dealloc))" | FileCheck %s

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

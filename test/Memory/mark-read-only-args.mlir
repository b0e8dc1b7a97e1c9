// RUN: fsdp-opt %s --split-input-file --pass-pipeline="builtin.module(fsdp-mark-read-only-args)" | FileCheck %s

// Read through views, by a linalg op and as a gather's input: read-only.
// Written by linalg.fill: not.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %{{.*}}: memref<3x4xf32> {fsdp.layout = {{.*}}, fsdp.name = "w", fsdp.read_only}
// CHECK-SAME: %{{.*}}: memref<2x4xf32> {fsdp.name = "x", fsdp.read_only}
// CHECK-SAME: %{{.*}}: memref<2x4xf32> {fsdp.name = "scratch"})
fsdp.mesh @mesh [shard = 4]
func.func @step(%w: memref<3x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"},
                %x: memref<2x4xf32> {fsdp.name = "x"},
                %s: memref<2x4xf32> {fsdp.name = "scratch"}) -> (memref<2x12xf32> {fsdp.name = "y"}) {
  %cst = arith.constant 0.0 : f32
  %flat = memref.collapse_shape %w [[0, 1]] : memref<3x4xf32> into memref<12xf32>
  %full = memref.alloc() : memref<48xf32>
  %r = fsdp.buffer.all_gather_start %flat into %full over @mesh ["shard"] : memref<12xf32>, memref<48xf32>
  fsdp.buffer.wait %r
  %w2 = memref.expand_shape %full [[0, 1]] output_shape [12, 4] : memref<48xf32> into memref<12x4xf32>
  %y = memref.alloc() : memref<2x12xf32>
  linalg.fill ins(%cst : f32) outs(%y : memref<2x12xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w2 : memref<2x4xf32>, memref<12x4xf32>) outs(%y : memref<2x12xf32>)
  linalg.fill ins(%cst : f32) outs(%s : memref<2x4xf32>)
  memref.dealloc %full : memref<48xf32>
  return %y : memref<2x12xf32>
}

// -----

// Into the functions it is passed to: a callee that reads its argument
// (read-only), one that writes a view of it (not); returned (not); the
// output of an in-place all-reduce (not); an existing mark is recomputed.
// CHECK-LABEL: func.func @calls
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "a", fsdp.read_only}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "b"}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "c"}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "d"})
// CHECK-LABEL: func.func private @reads
// CHECK-NOT: fsdp.read_only
fsdp.mesh @mesh [shard = 4]
func.func @calls(%a: memref<8xf32> {fsdp.name = "a"}, %b: memref<8xf32> {fsdp.name = "b"},
                 %c: memref<8xf32> {fsdp.name = "c", fsdp.read_only},
                 %d: memref<8xf32> {fsdp.name = "d"}) -> (memref<8xf32> {fsdp.name = "r"}) {
  %t = call @reads(%a) : (memref<8xf32>) -> f32
  call @writes_a_view(%b) : (memref<8xf32>) -> ()
  fsdp.buffer.all_reduce %d into %d over @mesh ["shard"] sum : memref<8xf32>, memref<8xf32>
  %cast = memref.cast %c : memref<8xf32> to memref<?xf32>
  %back = memref.cast %cast : memref<?xf32> to memref<8xf32>
  return %back : memref<8xf32>
}
func.func private @reads(%v: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %e = memref.load %v[%c0] : memref<8xf32>
  return %e : f32
}
func.func private @writes_a_view(%v: memref<8xf32>) {
  %half = memref.subview %v[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %src = memref.alloc() : memref<4xf32>
  memref.copy %src, %half : memref<4xf32> to memref<4xf32, strided<[1]>>
  memref.dealloc %src : memref<4xf32>
  return
}

// -----

// What the pass cannot follow is a possible write: a loop's iter_args, an
// address taken, a call of a declaration. A function that is no entry is
// left alone.
// CHECK-LABEL: func.func @opaque
// CHECK-NOT: fsdp.read_only
// CHECK-LABEL: func.func @not_an_entry
// CHECK-NOT: fsdp.read_only
func.func private @external(memref<8xf32>)
func.func @opaque(%a: memref<8xf32> {fsdp.name = "a"}, %b: memref<8xf32> {fsdp.name = "b"},
                  %c: memref<8xf32> {fsdp.name = "c"}) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%m = %a) -> (memref<8xf32>) {
    scf.yield %m : memref<8xf32>
  }
  %p = memref.extract_aligned_pointer_as_index %b : memref<8xf32> -> index
  call @external(%c) : (memref<8xf32>) -> ()
  return %p : index
}
func.func @not_an_entry(%a: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %e = memref.load %a[%c0] : memref<8xf32>
  return %e : f32
}

// -----

// A call's results alias an argument only where its callee may return it:
// `a` goes into a callee whose results are a fresh buffer and a view of its
// other argument, and the caller writes both (a read-only, s not); `b`
// comes back as a view, through a second call, and is written (not); `c`
// may come back from an scf.if (not: a value from a region may be any
// argument).
// CHECK-LABEL: func.func @results
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "a", fsdp.read_only}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "s"}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "b"}
// CHECK-SAME: %{{.*}}: memref<8xf32> {fsdp.name = "c"}
// CHECK-SAME: %{{.*}}: i1 {fsdp.name = "p"})
func.func @results(%a: memref<8xf32> {fsdp.name = "a"}, %s: memref<8xf32> {fsdp.name = "s"},
                   %b: memref<8xf32> {fsdp.name = "b"}, %c: memref<8xf32> {fsdp.name = "c"},
                   %p: i1 {fsdp.name = "p"}) {
  %cst = arith.constant 0.0 : f32
  %fresh, %view = call @fresh_and_view(%a, %s) : (memref<8xf32>, memref<8xf32>) -> (memref<8xf32>, memref<4xf32, strided<[1]>>)
  linalg.fill ins(%cst : f32) outs(%fresh : memref<8xf32>)
  linalg.fill ins(%cst : f32) outs(%view : memref<4xf32, strided<[1]>>)
  %back = call @passes_on(%b) : (memref<8xf32>) -> memref<4xf32, strided<[1], offset: 4>>
  linalg.fill ins(%cst : f32) outs(%back : memref<4xf32, strided<[1], offset: 4>>)
  %either = call @either(%c, %p) : (memref<8xf32>, i1) -> memref<8xf32>
  linalg.fill ins(%cst : f32) outs(%either : memref<8xf32>)
  return
}
func.func private @fresh_and_view(%x: memref<8xf32>, %y: memref<8xf32>) -> (memref<8xf32>, memref<4xf32, strided<[1]>>) {
  %t = memref.alloc() : memref<8xf32>
  memref.copy %x, %t : memref<8xf32> to memref<8xf32>
  %v = memref.subview %y[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  return %t, %v : memref<8xf32>, memref<4xf32, strided<[1]>>
}
func.func private @passes_on(%x: memref<8xf32>) -> memref<4xf32, strided<[1], offset: 4>> {
  %v = call @upper_half(%x) : (memref<8xf32>) -> memref<4xf32, strided<[1], offset: 4>>
  return %v : memref<4xf32, strided<[1], offset: 4>>
}
func.func private @upper_half(%x: memref<8xf32>) -> memref<4xf32, strided<[1], offset: 4>> {
  %v = memref.subview %x[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  return %v : memref<4xf32, strided<[1], offset: 4>>
}
func.func private @either(%x: memref<8xf32>, %p: i1) -> memref<8xf32> {
  %r = scf.if %p -> memref<8xf32> {
    scf.yield %x : memref<8xf32>
  } else {
    %t = memref.alloc() : memref<8xf32>
    scf.yield %t : memref<8xf32>
  }
  return %r : memref<8xf32>
}

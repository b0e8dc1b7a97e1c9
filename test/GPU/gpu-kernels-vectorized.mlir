// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-kernels=report -verify-diagnostics | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-kernels=vectorize=false | FileCheck %s --check-prefix=SCALAR
// vectorize=false: the scalar mapping everywhere.
// SCALAR-NOT: vector.
// SCALAR: gpu.launch
// SCALAR-NOT: vector.

// A bf16 elementwise op on the step's arguments (16-byte aligned): each
// thread takes chunks of 8 consecutive elements (16 bytes), one aligned
// vector load per input and one vector store, the body once per element on
// scalars. 64 x 128 = 8192 elements: 1024 chunks, 256 threads, 4 blocks;
// 4 chunks a grid apart per iteration, then the rest one at a time, no
// tail.
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func @bf16_add
func.func @bf16_add(%x: memref<64x128xbf16>, %y: memref<64x128xbf16>, %z: memref<64x128xbf16>) {
  // CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
  // CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
  // CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C4]], %{{.*}}, %{{.*}}) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]]
  // CHECK: scf.for
  // CHECK-COUNT-8: vector.load %{{.*}} {alignment = 16 : i64} : memref<64x128xbf16>, vector<8xbf16>
  // CHECK-NOT: memref.load
  // CHECK-COUNT-4: vector.store %{{.*}} {alignment = 16 : i64} : memref<64x128xbf16>, vector<8xbf16>
  // CHECK: scf.for
  // CHECK: vector.load %{{.*}}[%[[R:.*]], %[[C:.*]]] {alignment = 16 : i64} : memref<64x128xbf16>, vector<8xbf16>
  // CHECK: vector.load %{{.*}}[%[[R]], %[[C]]] {alignment = 16 : i64}
  // CHECK-COUNT-8: arith.addf %{{.*}} : bf16
  // CHECK: %[[V:.*]] = vector.from_elements
  // CHECK: vector.store %[[V]], %{{.*}}[%[[R]], %[[C]]] {alignment = 16 : i64}
  // CHECK-NOT: scf.for
  // CHECK: gpu.terminator
  // expected-remark @below {{GPU kernel: elementwise, 8 consecutive elements per thread access (16-byte vector loads and stores)}}
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : memref<64x128xbf16>, memref<64x128xbf16>) outs(%z : memref<64x128xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %out: bf16):
    %s = arith.addf %a, %b : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// Mixed widths: chunks of 16 bytes of the widest type (4 f32), so the bf16
// input is read 8 bytes at a time. The bias (independent of the last loop
// but for its column) is a vector too; the row scale is loaded once per
// chunk.
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @mixed
func.func @mixed(%x: memref<64x128xbf16>, %bias: memref<128xf32>, %s: memref<64xf32>, %y: memref<64x128xf32>) {
  // CHECK: gpu.launch
  // CHECK: vector.load %{{.*}} {alignment = 8 : i64} : memref<64x128xbf16>, vector<4xbf16>
  // CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<128xf32>, vector<4xf32>
  // CHECK: memref.load %{{.*}} : memref<64xf32>
  // CHECK-COUNT-4: arith.extf
  // CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<64x128xf32>, vector<4xf32>
  // expected-remark @below {{GPU kernel: elementwise, 4 consecutive elements per thread access (16-byte vector loads and stores)}}
  linalg.generic {indexing_maps = [#id, #col, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %bias, %s : memref<64x128xbf16>, memref<128xf32>, memref<64xf32>) outs(%y : memref<64x128xf32>) {
  ^bb0(%a: bf16, %b: f32, %c: f32, %out: f32):
    %e = arith.extf %a : bf16 to f32
    %m = arith.mulf %e, %c : f32
    %r = arith.addf %m, %b : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Rows whose length (50) is not a multiple of the chunk (4 f32): the
// chunks are flat ranges of the contiguous operands (1-D views), a value
// per row is loaded per element, and the 2 elements past the last whole
// chunk are done one at a time.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @flat
func.func @flat(%x: memref<63x50xf32>, %m: memref<63xf32>, %y: memref<63x50xf32>) {
  // CHECK: gpu.launch
  // CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<63x50xf32> into memref<3150xf32>
  // CHECK: scf.for
  // CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<3150xf32>, vector<4xf32>
  // CHECK: memref.load %{{.*}} : memref<63xf32>
  // CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<3150xf32>, vector<4xf32>
  // CHECK: scf.for
  // CHECK: scf.for
  // CHECK: memref.load %{{.*}} : memref<63x50xf32>
  // CHECK: memref.store %{{.*}} : memref<63x50xf32>
  // CHECK: gpu.terminator
  // expected-remark @below {{GPU kernel: elementwise, 4 consecutive elements per thread access}}
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<63x50xf32>, memref<63xf32>) outs(%y : memref<63x50xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not vectorized: an operand at an element offset that breaks the 16-byte
// alignment of the chunks (a subview one bf16 in), a transposed input, an
// output the body accumulates into through a fill of a column (all
// elementwise kernels otherwise).
#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
// CHECK-LABEL: func.func @unaligned
func.func @unaligned(%x: memref<8200xbf16>, %y: memref<64x128xbf16>) {
  // CHECK-NOT: vector.load
  // CHECK: memref.load %{{.*}} : memref<64x128xbf16, strided<[128, 1], offset: 1>>
  // CHECK-NOT: vector.
  %v = memref.subview %x[1] [8192] [1] : memref<8200xbf16> to memref<8192xbf16, strided<[1], offset: 1>>
  %e = memref.expand_shape %v [[0, 1]] output_shape [64, 128] : memref<8192xbf16, strided<[1], offset: 1>> into memref<64x128xbf16, strided<[128, 1], offset: 1>>
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<64x128xbf16, strided<[128, 1], offset: 1>>) outs(%y : memref<64x128xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    linalg.yield %a : bf16
  }
  return
}

// CHECK-LABEL: func.func @transposed
func.func @transposed(%x: memref<128x64xbf16>, %y: memref<64x128xbf16>) {
  // CHECK-NOT: vector.
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<128x64xbf16>) outs(%y : memref<64x128xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    linalg.yield %a : bf16
  }
  return
}

// -----

// A kernel function's arguments are aligned to what its calls pass: views
// of an allocation at byte offsets 64 and 128 are 16-byte aligned (the
// copy of @aligned is vectorized), at 8 they are not (@misaligned, whose
// other call passes an aligned view), and a function no call reaches has
// arguments of unknown alignment (@uncalled).
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func.func private @aligned
func.func private @aligned(%x: memref<1024xbf16>, %y: memref<1024xbf16>) {
  // CHECK: vector.load
  // expected-remark @below {{GPU kernel: elementwise, 8 consecutive elements per thread access}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<1024xbf16>) outs(%y : memref<1024xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %n = arith.negf %a : bf16
    linalg.yield %n : bf16
  }
  return
}
// CHECK-LABEL: func.func private @misaligned
func.func private @misaligned(%x: memref<1024xbf16>, %y: memref<1024xbf16>) {
  // CHECK-NOT: vector.load
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<1024xbf16>) outs(%y : memref<1024xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %n = arith.negf %a : bf16
    linalg.yield %n : bf16
  }
  return
}
// CHECK-LABEL: func.func private @uncalled
func.func private @uncalled(%x: memref<1024xbf16>, %y: memref<1024xbf16>) {
  // CHECK-NOT: vector.load
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<1024xbf16>) outs(%y : memref<1024xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %n = arith.negf %a : bf16
    linalg.yield %n : bf16
  }
  return
}
func.func @caller() {
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c4096 = arith.constant 4096 : index
  %arena = memref.alloc() : memref<8192xi8>
  %a = memref.view %arena[%c64][] : memref<8192xi8> to memref<1024xbf16>
  %b = memref.view %arena[%c4096][] : memref<8192xi8> to memref<1024xbf16>
  %c = memref.view %arena[%c8][] : memref<8192xi8> to memref<1024xbf16>
  call @aligned(%a, %b) : (memref<1024xbf16>, memref<1024xbf16>) -> ()
  call @misaligned(%a, %b) : (memref<1024xbf16>, memref<1024xbf16>) -> ()
  call @misaligned(%c, %b) : (memref<1024xbf16>, memref<1024xbf16>) -> ()
  return
}

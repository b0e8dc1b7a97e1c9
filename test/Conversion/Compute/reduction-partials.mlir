// RUN: fsdp-opt %s -split-input-file --fsdp-reduction-loops=report -verify-diagnostics | FileCheck %s

// The order in which a reduction combines its elements is fixed by its loop
// bounds alone: f32 keeps 16 partial results per output in one vector,
// partial j taking the elements whose innermost reduction index is j modulo
// 16, the last (size mod 16) elements of a row going to partial 0, which
// starts from the output's value; the partials are combined by halves
// (j with j + 8, then j + 4, ...). No fast-math flag is added, so LLVM
// cannot reorder anything: the results do not depend on what else the
// kernel computes (fusion) nor on the vector width of the host.

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<4x40xf32>, %[[ACC:.*]]: memref<4xf32>)
func.func @row_sum(%x: memref<4x40xf32>, %acc: memref<4xf32>) {
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
  // CHECK: %[[INIT:.*]] = memref.load %[[ACC]][%[[I]]]
  // CHECK: %[[NEG0:.*]] = arith.constant -0.000000e+00 : f32
  // CHECK: %[[IDS:.*]] = vector.broadcast %[[NEG0]] : f32 to vector<16xf32>
  // CHECK: %[[P0:.*]] = vector.insert %[[INIT]], %[[IDS]] [0] : f32 into vector<16xf32>
  // CHECK: %[[C16:.*]] = arith.constant 16 : index
  // CHECK: %[[C32:.*]] = arith.constant 32 : index
  // CHECK: %[[BLOCKS:.*]] = scf.for %[[J:.*]] = %{{.*}} to %[[C32]] step %[[C16]] iter_args(%[[P:.*]] = %[[P0]]) -> (vector<16xf32>)
  // CHECK: %[[E0:.*]] = memref.load %[[X]][%[[I]], %{{.*}}]
  // CHECK-COUNT-15: memref.load %[[X]][%[[I]], %{{.*}}]
  // CHECK: %[[E:.*]] = vector.from_elements %[[E0]], {{.*}} : vector<16xf32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[E]], %[[P]] : vector<16xf32>
  // CHECK-NEXT: scf.yield %[[S]] : vector<16xf32>
  // CHECK: %[[FIRST:.*]] = vector.extract %[[BLOCKS]][0] : f32 from vector<16xf32>
  // CHECK: %[[TAIL:.*]] = scf.for %[[T:.*]] = %[[C32]] to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[FIRST]]) -> (f32)
  // CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[T]]]
  // CHECK-NEXT: %[[AV:.*]] = arith.addf %[[V]], %[[A]] : f32
  // CHECK-NEXT: scf.yield %[[AV]] : f32
  // CHECK: %[[ALL:.*]] = vector.insert %[[TAIL]], %[[BLOCKS]] [0] : f32 into vector<16xf32>
  // CHECK: %[[LO8:.*]] = vector.shuffle %[[ALL]], %[[ALL]] [0, 1, 2, 3, 4, 5, 6, 7]
  // CHECK: %[[HI8:.*]] = vector.shuffle %[[ALL]], %[[ALL]] [8, 9, 10, 11, 12, 13, 14, 15]
  // CHECK: %[[S8:.*]] = arith.addf %[[LO8]], %[[HI8]] : vector<8xf32>
  // CHECK: vector.shuffle %[[S8]], %[[S8]] [0, 1, 2, 3]
  // CHECK: vector.shuffle %[[S8]], %[[S8]] [4, 5, 6, 7]
  // CHECK: %[[S4:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
  // CHECK: %[[S2:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<2xf32>
  // CHECK: %[[S1:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<1xf32>
  // CHECK: %[[SUM:.*]] = vector.extract %[[S1]][0] : f32 from vector<1xf32>
  // CHECK: memref.store %[[SUM]], %[[ACC]][%[[I]]]
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, combined in a fixed order)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x40xf32>) outs(%acc : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

// A squared error summed over both dimensions, its difference fused into
// the reduction. The elements (d * d) are computed one by one, as they
// would be in a kernel of their own; only the combiner becomes a vector op.
// The outer reduction loop carries the partials, combined once at the end.
// CHECK-LABEL: func.func @squared_error
func.func @squared_error(%x: memref<4x48xf32>, %y: memref<4x48xf32>, %acc: memref<f32>) {
  // CHECK: %[[INIT:.*]] = memref.load %{{.*}}[] : memref<f32>
  // CHECK: %[[P0:.*]] = vector.insert %[[INIT]], %{{.*}} [0] : f32 into vector<16xf32>
  // CHECK: %[[ROWS:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[R:.*]] = %[[P0]]) -> (vector<16xf32>)
  // CHECK: scf.for %{{.*}} iter_args(%[[P:.*]] = %[[R]]) -> (vector<16xf32>)
  // CHECK: %[[D:.*]] = arith.subf %{{.*}}, %{{.*}} : f32
  // CHECK-NEXT: %[[DD:.*]] = arith.mulf %[[D]], %[[D]] : f32
  // CHECK-COUNT-15: arith.mulf
  // CHECK: %[[E:.*]] = vector.from_elements %[[DD]], {{.*}} : vector<16xf32>
  // CHECK-NEXT: arith.addf %[[P]], %[[E]] : vector<16xf32>
  // CHECK: vector.shuffle %[[ROWS]], %[[ROWS]] [0, 1, 2, 3, 4, 5, 6, 7]
  // CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, combined in a fixed order)}}
  linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%x, %y : memref<4x48xf32>, memref<4x48xf32>) outs(%acc : memref<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %dd = arith.mulf %d, %d : f32
    %s = arith.addf %o, %dd : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A max starts its partials from -inf (a product from 1.0, a min from +inf).
// CHECK-LABEL: func.func @row_max
func.func @row_max(%x: memref<2x64xf32>, %acc: memref<2xf32>) {
  // CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
  // CHECK: vector.broadcast %[[NINF]] : f32 to vector<16xf32>
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<16xf32>
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, combined in a fixed order)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2x64xf32>) outs(%acc : memref<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.maximumf %a, %o : f32
    linalg.yield %y : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A body that is not `acc <op> element` (here the accumulator is scaled
// before the add) cannot be split: it keeps the sequential order.
// CHECK-LABEL: func.func @in_order
func.func @in_order(%x: memref<2x64xf32>, %acc: memref<2xf32>) {
  // CHECK: scf.for {{.*}} iter_args(%[[A:.*]] = %{{.*}}) -> (f32)
  // CHECK: %[[H:.*]] = arith.mulf %[[A]], %{{.*}} : f32
  // CHECK: arith.addf %{{.*}}, %[[H]] : f32
  // CHECK-NOT: vector
  // expected-remark @+1 {{reduction accumulates in registers (in order)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2x64xf32>) outs(%acc : memref<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %h = arith.mulf %o, %half : f32
    %y = arith.addf %a, %h : f32
    linalg.yield %y : f32
  }
  return
}

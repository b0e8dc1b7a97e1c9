// RUN: fsdp-opt %s -split-input-file --fsdp-reduction-loops=report -verify-diagnostics | FileCheck %s

// The order in which a reduction combines its elements is fixed by its loop
// bounds alone, in blocks: every accumulator takes at most 16 values before
// it is combined into the level above, each level starting from the
// identity (-0.0 for a sum). An f32 row keeps 16 partial results in one
// vector, partial j taking element j of each block of 16 elements; the
// blocks are a blocked loop (here 62 blocks: level 1 steps over 16 blocks,
// 256 elements, level 0 over the blocks of one of those); the last
// (size mod 16) elements of a row go to partial 0; the partials are
// combined by halves (j with j + 8, then j + 4, ...) and the output's value
// comes last. No fast-math flag is added, so LLVM cannot reorder anything:
// the results do not depend on what else the kernel computes (fusion) nor
// on the vector width of the host.

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<2x1000xf32>, %[[ACC:.*]]: memref<2xf32>)
func.func @row_sum(%x: memref<2x1000xf32>, %acc: memref<2xf32>) {
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
  // CHECK: %[[INIT:.*]] = memref.load %[[ACC]][%[[I]]]
  // CHECK-DAG: %[[C992:.*]] = arith.constant 992 : index
  // CHECK-DAG: %[[NEG0:.*]] = arith.constant -0.000000e+00 : f32
  // CHECK: %[[IDS:.*]] = vector.broadcast %[[NEG0]] : f32 to vector<16xf32>
  // CHECK: %[[C256:.*]] = arith.constant 256 : index
  // CHECK: %[[TOP:.*]] = scf.for %[[B:.*]] = %{{.*}} to %[[C992]] step %[[C256]] iter_args(%[[P1:.*]] = %[[IDS]]) -> (vector<16xf32>)
  // CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %[[C992]] : index
  // CHECK: %[[IDS0:.*]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
  // CHECK: %[[BLOCKS:.*]] = scf.for %[[J:.*]] = %[[B]] to %[[END]] step %{{.*}} iter_args(%[[P:.*]] = %[[IDS0]]) -> (vector<16xf32>)
  // CHECK: %[[E0:.*]] = memref.load %[[X]][%[[I]], %{{.*}}]
  // CHECK-COUNT-15: memref.load %[[X]][%[[I]], %{{.*}}]
  // CHECK: %[[E:.*]] = vector.from_elements %[[E0]], {{.*}} : vector<16xf32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[E]], %[[P]] : vector<16xf32>
  // CHECK-NEXT: scf.yield %[[S]] : vector<16xf32>
  // CHECK: %[[S1:.*]] = arith.addf %[[BLOCKS]], %[[P1]] : vector<16xf32>
  // CHECK-NEXT: scf.yield %[[S1]] : vector<16xf32>
  // CHECK: %[[FIRST:.*]] = vector.extract %[[TOP]][0] : f32 from vector<16xf32>
  // CHECK: %[[TAIL:.*]] = scf.for %[[T:.*]] = %[[C992]] to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[FIRST]]) -> (f32)
  // CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[T]]]
  // CHECK-NEXT: %[[AV:.*]] = arith.addf %[[V]], %[[A]] : f32
  // CHECK-NEXT: scf.yield %[[AV]] : f32
  // CHECK: %[[ALL:.*]] = vector.insert %[[TAIL]], %[[TOP]] [0] : f32 into vector<16xf32>
  // CHECK: %[[LO8:.*]] = vector.shuffle %[[ALL]], %[[ALL]] [0, 1, 2, 3, 4, 5, 6, 7]
  // CHECK: %[[HI8:.*]] = vector.shuffle %[[ALL]], %[[ALL]] [8, 9, 10, 11, 12, 13, 14, 15]
  // CHECK: %[[S8:.*]] = arith.addf %[[LO8]], %[[HI8]] : vector<8xf32>
  // CHECK: vector.shuffle %[[S8]], %[[S8]] [0, 1, 2, 3]
  // CHECK: vector.shuffle %[[S8]], %[[S8]] [4, 5, 6, 7]
  // CHECK: %[[S4:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
  // CHECK: %[[S2:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<2xf32>
  // CHECK: %[[SS1:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<1xf32>
  // CHECK: %[[SUM:.*]] = vector.extract %[[SS1]][0] : f32 from vector<1xf32>
  // CHECK: %[[OUT:.*]] = arith.addf %[[SUM]], %[[INIT]] : f32
  // CHECK: memref.store %[[OUT]], %[[ACC]][%[[I]]]
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, in blocks of 16)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2x1000xf32>) outs(%acc : memref<2xf32>) {
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
// Each row's partials start from the identity and are merged, lane by
// lane, into the outer loop's, combined by halves once at the end; the
// output's value comes last.
// CHECK-LABEL: func.func @squared_error
func.func @squared_error(%x: memref<4x48xf32>, %y: memref<4x48xf32>, %acc: memref<f32>) {
  // CHECK: %[[INIT:.*]] = memref.load %{{.*}}[] : memref<f32>
  // CHECK: %[[ROWS:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[R:.*]] = %{{.*}}) -> (vector<16xf32>)
  // CHECK: %[[ROW:.*]] = scf.for %{{.*}} iter_args(%[[P:.*]] = %{{.*}}) -> (vector<16xf32>)
  // CHECK: %[[D:.*]] = arith.subf %{{.*}}, %{{.*}} : f32
  // CHECK-NEXT: %[[DD:.*]] = arith.mulf %[[D]], %[[D]] : f32
  // CHECK-COUNT-15: arith.mulf
  // CHECK: %[[E:.*]] = vector.from_elements %[[DD]], {{.*}} : vector<16xf32>
  // CHECK-NEXT: arith.addf %[[P]], %[[E]] : vector<16xf32>
  // CHECK: %[[WHOLE:.*]] = vector.insert %{{.*}}, %[[ROW]] [0] : f32 into vector<16xf32>
  // CHECK-NEXT: arith.addf %[[R]], %[[WHOLE]] : vector<16xf32>
  // CHECK: vector.shuffle %[[ROWS]], %[[ROWS]] [0, 1, 2, 3, 4, 5, 6, 7]
  // CHECK: %[[TOTAL:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
  // CHECK: %[[OUT:.*]] = arith.addf %[[INIT]], %[[TOTAL]] : f32
  // CHECK: memref.store %[[OUT]], %{{.*}}[] : memref<f32>
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, in blocks of 16)}}
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
  // expected-remark @+1 {{reduction accumulates in registers (16 partial results per output, in blocks of 16)}}
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

// -----

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>

// A column sum over 4,096 rows (a bias gradient): the columns in one tile
// (64 <= 256), the rows a blocked loop of three levels (steps of 256, 16
// and 1 rows), each level's 64 accumulators a stack buffer allocated at the
// function's entry: filled with the identity, each row of the tile combined
// into the level-0 buffer in a column loop (it vectorizes as it is), each
// level merged into the one above; the output's value comes last.
// CHECK-LABEL: func.func @column_sum
// CHECK-SAME: (%[[X:.*]]: memref<4096x64xf32>, %[[ACC:.*]]: memref<64xf32>)
func.func @column_sum(%x: memref<4096x64xf32>, %acc: memref<64xf32>) {
  // CHECK-DAG: %[[L0:.*]] = memref.alloca() : memref<64xf32>
  // CHECK-DAG: %[[L1:.*]] = memref.alloca() : memref<64xf32>
  // CHECK-DAG: %[[L2:.*]] = memref.alloca() : memref<64xf32>
  // CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %c64 step %c64
  // CHECK: scf.for %[[C:.*]] =
  // CHECK: memref.store %{{.*}}, %[[L2]][%[[C]]]
  // CHECK: scf.for %[[R2:.*]] = %{{.*}} to %c4096 step %c256
  // CHECK: memref.store %{{.*}}, %[[L1]]
  // CHECK: scf.for %[[R1:.*]] = %[[R2]] to %{{.*}} step %c16
  // CHECK: memref.store %{{.*}}, %[[L0]]
  // CHECK: scf.for %[[R:.*]] = %[[R1]] to %{{.*}} step %c1
  // CHECK: scf.for %[[C0:.*]] =
  // CHECK: %[[COL:.*]] = arith.addi %[[TILE]], %[[C0]] : index
  // CHECK: %[[V:.*]] = memref.load %[[X]][%[[R]], %[[COL]]]
  // CHECK: %[[A:.*]] = memref.load %[[L0]][%[[C0]]]
  // CHECK: %[[S:.*]] = arith.addf %[[V]], %[[A]] : f32
  // CHECK: memref.store %[[S]], %[[L0]][%[[C0]]]
  // CHECK: memref.load %[[L1]]
  // CHECK: memref.load %[[L0]]
  // CHECK: memref.store %{{.*}}, %[[L1]]
  // CHECK: memref.load %[[L2]]
  // CHECK: memref.load %[[L1]]
  // CHECK: memref.store %{{.*}}, %[[L2]]
  // CHECK: %[[INIT:.*]] = memref.load %[[ACC]]
  // CHECK: %[[TOTAL:.*]] = memref.load %[[L2]]
  // CHECK: %[[OUT:.*]] = arith.addf %[[TOTAL]], %[[INIT]] : f32
  // CHECK: memref.store %[[OUT]], %[[ACC]]
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates along its innermost parallel loop (tiles of 256 columns, in blocks of 16)}}
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4096x64xf32>) outs(%acc : memref<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  }
  return
}

// -----

#x = affine_map<(c, kh, kw) -> (c, kh, kw)>
#o = affine_map<(c, kh, kw) -> ()>

// Short inner reduction loops (a 3x3 window, 9 <= 16 elements) go in order
// straight into the accumulator of one iteration of the loop outside them:
// no fresh accumulator per row of 3. The outer loop's level 0 then takes
// one iteration (16 / 9 elements), level 1 sixteen, the top level 4 of
// those.
// CHECK-LABEL: func.func @window
func.func @window(%x: memref<64x3x3xf32>, %acc: memref<f32>) {
  // CHECK: scf.for %{{.*}} = %{{.*}} to %c64 step %c16
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1
  // CHECK: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %c1
  // CHECK: scf.for %[[KH:.*]] = %{{.*}} to %c3
  // CHECK-NEXT: scf.for %[[KW:.*]] = %{{.*}} to %c3
  // CHECK-NEXT: memref.load %{{.*}}[%[[C]], %[[KH]], %[[KW]]]
  // CHECK-NEXT: arith.addf
  // CHECK-NEXT: scf.yield
  // expected-remark @+1 {{reduction accumulates in registers (in blocks of 16)}}
  linalg.generic {indexing_maps = [#x, #o], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%x : memref<64x3x3xf32>) outs(%acc : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  }
  return
}

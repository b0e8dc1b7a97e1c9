// RUN: fsdp-opt %s -split-input-file --fsdp-reduction-loops=report -verify-diagnostics | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A row sum: the parallel loop outside, the reduction loop inside carrying
// the sum from the identity (-0.0), the output's value loaded once and
// added last, stored once. A row of at most 16 is one block (level 0 of
// the blocked loop); shorter than the 16 partial results of f32 it has one
// accumulator. No fast-math flag lets LLVM reorder it
// (reduction-partials.mlir has the longer rows and the columns).
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[ACC:.*]]: memref<4xf32>)
func.func @row_sum(%x: memref<4x8xf32>, %acc: memref<4xf32>) {
  // CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
  // CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[C4]]
  // CHECK: %[[INIT:.*]] = memref.load %[[ACC]][%[[I]]]
  // CHECK: %[[NEG0:.*]] = arith.constant -0.000000e+00 : f32
  // CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %[[C8]] {{.*}} iter_args(%[[A:.*]] = %[[NEG0]]) -> (f32)
  // CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[V]], %[[A]] : f32
  // CHECK-NEXT: scf.yield %[[S]] : f32
  // CHECK: %[[OUT:.*]] = arith.addf %[[SUM]], %[[INIT]] : f32
  // CHECK-NEXT: memref.store %[[OUT]], %[[ACC]][%[[I]]]
  // CHECK-NOT: linalg.generic
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (in blocks of 16)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%acc : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  }
  return
}

// -----

#id = affine_map<(b, i, j) -> (b, i, j)>
#bcast = affine_map<(b, i, j) -> (b, i, 0)>
#out = affine_map<(b, i, j) -> (b, i, 0)>

// A softmax denominator with a broadcast input, two outputs (a sum and a
// max), an index op and a size-1 output dimension; no flag is added,
// existing flags are kept.
// CHECK-LABEL: func.func @exp_sum_max
func.func @exp_sum_max(%x: memref<2x4x8xf32>, %m: memref<2x4x1xf32>, %s: memref<2x4x1xf32>, %mx: memref<2x4x1xf32>) {
  // CHECK: scf.for %[[B:[^ ]*]] =
  // CHECK: scf.for %[[I:[^ ]*]] =
  // CHECK-DAG: %[[S0:.*]] = memref.load %{{.*}}[%[[B]], %[[I]], %{{.*}}] : memref<2x4x1xf32>
  // CHECK-DAG: %[[M0:.*]] = memref.load %{{.*}}[%[[B]], %[[I]], %{{.*}}] : memref<2x4x1xf32>
  // CHECK-DAG: %[[ID0:.*]] = arith.constant -0.000000e+00 : f32
  // CHECK-DAG: %[[ID1:.*]] = arith.constant 0xFF800000 : f32
  // CHECK: %[[R:.*]]:2 = scf.for %[[J:.*]] = {{.*}} iter_args(%{{.*}} = %[[ID0]], %{{.*}} = %[[ID1]]) -> (f32, f32)
  // CHECK: arith.index_cast %[[J]]
  // CHECK: arith.subf {{.*}} fastmath<nnan> : f32
  // CHECK: math.exp
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f32
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
  // CHECK: scf.yield
  // CHECK: %[[T0:.*]] = arith.addf %[[R]]#0, %[[S0]] : f32
  // CHECK: %[[T1:.*]] = arith.maximumf %[[R]]#1, %[[M0]] : f32
  // CHECK: memref.store %[[T0]]
  // CHECK: memref.store %[[T1]]
  // expected-remark @+1 {{reduction accumulates in registers}}
  linalg.generic {indexing_maps = [#id, #bcast, #out, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %m : memref<2x4x8xf32>, memref<2x4x1xf32>) outs(%s, %mx : memref<2x4x1xf32>, memref<2x4x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32, %p: f32):
    %j = linalg.index 2 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    %d = arith.subf %a, %b fastmath<nnan> : f32
    %dj = arith.addf %d, %jf : f32
    %e = math.exp %dj : f32
    %y = arith.addf %e, %o : f32
    %z = arith.maximumf %a, %p : f32
    linalg.yield %y, %z : f32, f32
  }
  return
}

// -----

// A bf16 matmul (no BLAS gemm) also accumulates in a register; bf16
// arithmetic keeps its order (no fast-math flags).
// CHECK-LABEL: func.func @bf16_matmul
func.func @bf16_matmul(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  // CHECK: scf.for
  // CHECK: scf.for
  // CHECK: scf.for {{.*}} iter_args
  // CHECK: arith.mulf %{{.*}}, %{{.*}} : bf16
  // CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} : bf16
  // CHECK-NOT: linalg.matmul
  // expected-remark @+1 {{reduction accumulates in registers}}
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>)
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Dynamic sizes: the loop bounds are read from the buffers; an f64 sum
// keeps 8 partial results, the blocks of 8 elements in a blocked loop of
// four levels (16 blocks per level: steps of 8 x 16^3, 8 x 16^2, 8 x 16
// elements), the last (size mod 8) elements of a row go to partial 0.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%x: memref<?x?xf64>, %acc: memref<?xf64>) {
  // CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1
  // CHECK: scf.for
  // CHECK: %[[C8:.*]] = arith.constant 8 : index
  // CHECK: %[[REST:.*]] = arith.remui %[[N]], %[[C8]] : index
  // CHECK: %[[MAIN:.*]] = arith.subi %[[N]], %[[REST]] : index
  // CHECK: %[[C32768:.*]] = arith.constant 32768 : index
  // CHECK: %[[P:.*]] = scf.for %{{.*}} to %[[MAIN]] step %[[C32768]] iter_args(%{{.*}}) -> (vector<8xf64>)
  // CHECK: scf.for {{.*}} step %c2048 iter_args(%{{.*}}) -> (vector<8xf64>)
  // CHECK: scf.for {{.*}} step %c128 iter_args(%{{.*}}) -> (vector<8xf64>)
  // CHECK: scf.for {{.*}} step %c8{{.*}} iter_args(%{{.*}}) -> (vector<8xf64>)
  // CHECK: arith.addf %{{.*}}, %{{.*}} : vector<8xf64>
  // CHECK: %[[P0:.*]] = vector.extract %[[P]][0] : f64 from vector<8xf64>
  // CHECK: scf.for %{{.*}} = %[[MAIN]] to %[[N]] {{.*}} iter_args(%{{.*}} = %[[P0]]) -> (f64)
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f64
  // CHECK: vector.insert %{{.*}}, %[[P]] [0] : f64 into vector<8xf64>
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (8 partial results per output, in blocks of 16)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf64>) outs(%acc : memref<?xf64>) {
  ^bb0(%a: f64, %o: f64):
    %y = arith.addf %a, %o : f64
    linalg.yield %y : f64
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>

#icol = affine_map<(i, j) -> (j)>

// What stays a linalg op: an integer column sum (its inner loop is parallel
// and vectorizes as it is; integer sums are exact in any order), an
// elementwise op (no reduction: no remark) and an op on tensors.
// CHECK-LABEL: func.func @stays
func.func @stays(%x: memref<4x8xf32>, %acc: memref<8xf32>, %y: memref<4x8xf32>, %t: tensor<4x8xf32>, %tacc: tensor<4xf32>, %xi: memref<4x8xi32>, %acci: memref<8xi32>) -> tensor<4xf32> {
  // CHECK: linalg.generic
  // CHECK-SAME: ["reduction", "parallel"]
  // expected-remark @+1 {{reduction stays a loop nest: the innermost loop is not a reduction (it vectorizes as it is)}}
  linalg.generic {indexing_maps = [#id, #icol], iterator_types = ["reduction", "parallel"]}
      ins(%xi : memref<4x8xi32>) outs(%acci : memref<8xi32>) {
  ^bb0(%a: i32, %o: i32):
    %s = arith.addi %a, %o : i32
    linalg.yield %s : i32
  }
  // CHECK: linalg.generic
  // CHECK-SAME: ["parallel", "parallel"]
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  }
  // CHECK: linalg.generic
  // CHECK-SAME: ["parallel", "reduction"]
  // expected-remark @+1 {{reduction stays a loop nest: operands are not buffers}}
  %r = linalg.generic {indexing_maps = [#id, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<4x8xf32>) outs(%tacc : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

#a = affine_map<(i, j, k) -> (i, j, k)>
#o = affine_map<(i, j, k) -> (i, k)>

// A float sum with a parallel loop inside a reduction loop: the columns
// (the innermost, parallel loop) in one tile, the reduction loop outside
// the column loop, the accumulators in a stack buffer.
// CHECK-LABEL: func.func @interleaved
func.func @interleaved(%x: memref<2x3x4xf32>, %acc: memref<2x4xf32>) {
  // CHECK: %[[BUF:.*]] = memref.alloca() : memref<4xf32>
  // CHECK: scf.for %[[I:.*]] =
  // CHECK: scf.for %[[T:.*]] =
  // CHECK: scf.for %[[J:.*]] =
  // CHECK: scf.for %[[C:.*]] =
  // CHECK: memref.load %{{.*}}[%[[I]], %[[J]], %{{.*}}] : memref<2x3x4xf32>
  // CHECK: memref.load %[[BUF]][%[[C]]]
  // CHECK-NOT: linalg.generic
  // expected-remark @+1 {{reduction accumulates along its innermost parallel loop (tiles of 256 columns, in blocks of 16)}}
  linalg.generic {indexing_maps = [#a, #o], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<2x3x4xf32>) outs(%acc : memref<2x4xf32>) {
  ^bb0(%v: f32, %s: f32):
    %y = arith.addf %v, %s : f32
    linalg.yield %y : f32
  }
  return
}

// -----

#a = affine_map<(i, j, k) -> (i, j, k)>
#o = affine_map<(i, j, k) -> (j)>

// A float sum with its parallel loop between reduction loops (a mean over
// (0, 2)): the parallel loop moves outside; the reduction loops of 2 x 4
// elements go in order into one block. An integer one stays a loop nest.
// CHECK-LABEL: func.func @reduction_outside
func.func @reduction_outside(%x: memref<2x3x4xf32>, %acc: memref<3xf32>, %xi: memref<2x3x4xi32>, %acci: memref<3xi32>) {
  // CHECK: scf.for %[[J:.*]] = %{{.*}} to %c3
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %c2
  // CHECK: scf.for %[[K:.*]] = %{{.*}} to %c4
  // CHECK: memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]] : memref<2x3x4xf32>
  // expected-remark @+1 {{reduction accumulates in registers (in blocks of 16)}}
  linalg.generic {indexing_maps = [#a, #o], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x : memref<2x3x4xf32>) outs(%acc : memref<3xf32>) {
  ^bb0(%v: f32, %s: f32):
    %y = arith.addf %v, %s : f32
    linalg.yield %y : f32
  }
  // CHECK: linalg.generic
  // expected-remark @+1 {{reduction stays a loop nest: a parallel loop lies inside a reduction loop}}
  linalg.generic {indexing_maps = [#a, #o], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%xi : memref<2x3x4xi32>) outs(%acci : memref<3xi32>) {
  ^bb0(%v: i32, %s: i32):
    %y = arith.addi %v, %s : i32
    linalg.yield %y : i32
  }
  return
}

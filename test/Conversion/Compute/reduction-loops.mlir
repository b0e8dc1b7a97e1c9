// RUN: fsdp-opt %s -split-input-file --fsdp-reduction-loops=report -verify-diagnostics | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A row sum: the parallel loop outside, the reduction loop inside carrying
// the output element (one load before, one store after). A row shorter
// than the 16 partial results of f32 is summed in order; no fast-math flag
// lets LLVM reorder it (reduction-partials.mlir has the longer rows).
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[ACC:.*]]: memref<4xf32>)
func.func @row_sum(%x: memref<4x8xf32>, %acc: memref<4xf32>) {
  // CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
  // CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[C4]]
  // CHECK-NEXT: %[[INIT:.*]] = memref.load %[[ACC]][%[[I]]]
  // CHECK-NEXT: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %[[C8]] {{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f32)
  // CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[V]], %[[A]] : f32
  // CHECK-NEXT: scf.yield %[[S]] : f32
  // CHECK: memref.store %[[SUM]], %[[ACC]][%[[I]]]
  // CHECK-NOT: linalg.generic
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (in order)}}
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
  // CHECK: %[[R:.*]]:2 = scf.for %[[J:.*]] = {{.*}} iter_args(%{{.*}} = %[[S0]], %{{.*}} = %[[M0]]) -> (f32, f32)
  // CHECK: arith.index_cast %[[J]]
  // CHECK: arith.subf {{.*}} fastmath<nnan> : f32
  // CHECK: math.exp
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f32
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
  // CHECK: scf.yield
  // CHECK: memref.store %[[R]]#0
  // CHECK: memref.store %[[R]]#1
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
// keeps 8 partial results, the last (size mod 8) elements of a row go to
// partial 0.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%x: memref<?x?xf64>, %acc: memref<?xf64>) {
  // CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1
  // CHECK: scf.for
  // CHECK: %[[C8:.*]] = arith.constant 8 : index
  // CHECK: %[[REST:.*]] = arith.remui %[[N]], %[[C8]] : index
  // CHECK: %[[MAIN:.*]] = arith.subi %[[N]], %[[REST]] : index
  // CHECK: %[[P:.*]] = scf.for %{{.*}} to %[[MAIN]] step %[[C8]] iter_args(%{{.*}}) -> (vector<8xf64>)
  // CHECK: arith.addf %{{.*}}, %{{.*}} : vector<8xf64>
  // CHECK: %[[P0:.*]] = vector.extract %[[P]][0] : f64 from vector<8xf64>
  // CHECK: scf.for %{{.*}} = %[[MAIN]] to %[[N]] {{.*}} iter_args(%{{.*}} = %[[P0]]) -> (f64)
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f64
  // CHECK: vector.insert %{{.*}}, %[[P]] [0] : f64 into vector<8xf64>
  // CHECK-NOT: fastmath
  // expected-remark @+1 {{reduction accumulates in registers (8 partial results per output, combined in a fixed order)}}
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

// What stays a linalg op: a column sum (its inner loop is parallel and
// vectorizes as it is), an elementwise op (no reduction: no remark) and
// an op on tensors.
// CHECK-LABEL: func.func @stays
func.func @stays(%x: memref<4x8xf32>, %acc: memref<8xf32>, %y: memref<4x8xf32>, %t: tensor<4x8xf32>, %tacc: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: linalg.generic
  // CHECK-SAME: ["reduction", "parallel"]
  // expected-remark @+1 {{reduction stays a loop nest: the innermost loop is not a reduction (it vectorizes as it is)}}
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%acc : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
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

// A parallel loop inside a reduction loop stays a loop nest.
// CHECK-LABEL: func.func @interleaved
func.func @interleaved(%x: memref<2x3x4xf32>, %acc: memref<2x4xf32>) {
  // CHECK: linalg.generic
  // expected-remark @+1 {{reduction stays a loop nest: the innermost loop is not a reduction (it vectorizes as it is)}}
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

// A reduction loop outside a parallel loop that is not innermost either.
// CHECK-LABEL: func.func @reduction_outside
func.func @reduction_outside(%x: memref<2x3x4xf32>, %acc: memref<3xf32>) {
  // CHECK: linalg.generic
  // expected-remark @+1 {{reduction stays a loop nest: a parallel loop lies inside a reduction loop}}
  linalg.generic {indexing_maps = [#a, #o], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x : memref<2x3x4xf32>) outs(%acc : memref<3xf32>) {
  ^bb0(%v: f32, %s: f32):
    %y = arith.addf %v, %s : f32
    linalg.yield %y : f32
  }
  return
}

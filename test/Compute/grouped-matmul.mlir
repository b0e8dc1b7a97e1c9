// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul | FileCheck %s

// One contraction per group on the group's rows: the loop carries the
// result and the group's start; the end is offsets[g] clamped to
// [start, rows].
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf32>, %[[W:.*]]: tensor<3x4x5xf32>, %[[O:.*]]: tensor<3xi32>)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C6:.*]] = arith.constant 6 : index
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[G:.*]] = %[[C0]] to %[[C3]] step %{{.*}} iter_args(%[[OUT:.*]] = %[[ZERO]], %[[START:.*]] = %[[C0]])
// CHECK: %[[RAW:.*]] = tensor.extract %[[O]][%[[G]]] : tensor<3xi32>
// CHECK: %[[IDX:.*]] = arith.index_cast %[[RAW]] : i32 to index
// CHECK: %[[LO:.*]] = arith.maxsi %[[IDX]], %[[START]]
// CHECK: %[[END:.*]] = arith.minsi %[[LO]], %[[C6]]
// CHECK: %[[LEN:.*]] = arith.subi %[[END]], %[[START]]
// CHECK: %[[A:.*]] = tensor.extract_slice %[[X]][%[[START]], 0] [%[[LEN]], 4] [1, 1] : tensor<6x4xf32> to tensor<?x4xf32>
// CHECK: %[[B:.*]] = tensor.extract_slice %[[W]][%[[G]], 0, 0] [1, 4, 5] [1, 1, 1] : tensor<3x4x5xf32> to tensor<4x5xf32>
// CHECK: %[[C:.*]] = tensor.extract_slice %[[OUT]][%[[START]], 0] [%[[LEN]], 5] [1, 1] : tensor<6x5xf32> to tensor<?x5xf32>
// CHECK: %[[P:[^ ]*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x4xf32>, tensor<4x5xf32>) outs(%[[C]] : tensor<?x5xf32>)
// CHECK-SAME: fsdp.grouped_segment = "rows"
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[NEXT:.*]] = tensor.insert_slice %[[P]] into %[[OUT]][%[[START]], 0] [%[[LEN]], 5] [1, 1]
// CHECK: scf.yield %[[NEXT]], %[[END]]
// CHECK: return %[[LOOP]]#0
// CHECK-NOT: fsdp.grouped_matmul
func.func @rows(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %o: tensor<3xi32>) -> tensor<6x5xf32> {
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32> -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// The weight gradient: group g's rows of both operands, lhs transposed
// into result[g]. Index offsets need no cast.
// CHECK-LABEL: func.func @transpose_lhs
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf64>, %[[D:.*]]: tensor<6x5xf64>, %[[O:.*]]: tensor<3xindex>)
// CHECK: scf.for %[[G:.*]] = {{.*}} iter_args(%[[OUT:.*]] = %{{.*}}, %[[START:.*]] = %{{.*}})
// CHECK: %[[END0:.*]] = tensor.extract %[[O]][%[[G]]] : tensor<3xindex>
// CHECK-NOT: arith.index_cast
// CHECK: %[[A:.*]] = tensor.extract_slice %[[X]][%[[START]], 0] [%[[LEN:.*]], 4] [1, 1] : tensor<6x4xf64> to tensor<?x4xf64>
// CHECK: %[[B:.*]] = tensor.extract_slice %[[D]][%[[START]], 0] [%[[LEN]], 5] [1, 1] : tensor<6x5xf64> to tensor<?x5xf64>
// CHECK: %[[C:.*]] = tensor.extract_slice %[[OUT]][%[[G]], 0, 0] [1, 4, 5] [1, 1, 1] : tensor<3x4x5xf64> to tensor<4x5xf64>
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x4xf64>, tensor<?x5xf64>) outs(%[[C]] : tensor<4x5xf64>)
// CHECK-SAME: fsdp.grouped_segment = "transpose_lhs"
// CHECK: tensor.insert_slice %{{.*}} into %[[OUT]][%[[G]], 0, 0] [1, 4, 5] [1, 1, 1]
func.func @transpose_lhs(%x: tensor<6x4xf64>, %g: tensor<6x5xf64>, %o: tensor<3xindex>) -> tensor<3x4x5xf64> {
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf64>, tensor<6x5xf64>, tensor<3xindex> -> tensor<3x4x5xf64>
  return %dw : tensor<3x4x5xf64>
}

// -----

// bf16 products accumulate in f32: an f32 zero fill, the operands widened
// in the body, and one rounding to bf16 after the groups.
// CHECK-LABEL: func.func @bf16_accumulates_in_f32
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<6x5xf32>)
// CHECK: %[[LOOP:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]], %{{.*}} = %{{.*}}) -> (tensor<6x5xf32>, index)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x4xbf16>, tensor<4x5xbf16>) outs(%{{.*}} : tensor<?x5xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[LOOP]]#0 : tensor<6x5xf32>) outs(%{{.*}} : tensor<6x5xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[OUT]]
func.func @bf16_accumulates_in_f32(%x: tensor<6x4xbf16>, %w: tensor<3x4x5xbf16>, %o: tensor<3xi32>) -> tensor<6x5xbf16> {
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xbf16>, tensor<3x4x5xbf16>, tensor<3xi32> -> tensor<6x5xbf16>
  return %y : tensor<6x5xbf16>
}

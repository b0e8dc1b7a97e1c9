// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul="device=true" | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdp-grouped-matmul="device=true" -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// Under compute=gpu the grouped products stay (no host loop over the
// groups: the offsets live on the device); bufferized, each writes a fresh
// buffer through fsdp.buffer.grouped_matmul.
// CHECK-LABEL: func.func @rows
// CHECK-NOT: scf.for
// CHECK: fsdp.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x4xbf16>, tensor<3x4x5xbf16>, tensor<3xi32> -> tensor<6x5xbf16>
// BUF-LABEL: func.func @rows
// BUF: %[[OUT:.*]] = memref.alloc() {{.*}}: memref<6x5xbf16>
// BUF: fsdp.buffer.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} into %[[OUT]] : memref<6x4xbf16{{.*}}>, memref<3x4x5xbf16{{.*}}>, memref<3xi32{{.*}}>, memref<6x5xbf16>
// BUF-NOT: transpose_lhs
// BUF: return %[[OUT]]
func.func @rows(%x: tensor<6x4xbf16>, %w: tensor<3x4x5xbf16>, %o: tensor<3xi32>) -> tensor<6x5xbf16> {
  %y = fsdp.grouped_matmul %x, %w, %o : tensor<6x4xbf16>, tensor<3x4x5xbf16>, tensor<3xi32> -> tensor<6x5xbf16>
  return %y : tensor<6x5xbf16>
}

// -----

// CHECK-LABEL: func.func @transpose_lhs
// CHECK: fsdp.grouped_matmul_transpose_lhs
// BUF-LABEL: func.func @transpose_lhs
// BUF: %[[OUT:.*]] = memref.alloc() {{.*}}: memref<3x4x5xf32>
// BUF: fsdp.buffer.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} into %[[OUT]] {transpose_lhs}
func.func @transpose_lhs(%x: tensor<6x4xf32>, %g: tensor<6x5xf32>, %o: tensor<3xindex>) -> tensor<3x4x5xf32> {
  %dw = fsdp.grouped_matmul_transpose_lhs %x, %g, %o : tensor<6x4xf32>, tensor<6x5xf32>, tensor<3xindex> -> tensor<3x4x5xf32>
  return %dw : tensor<3x4x5xf32>
}

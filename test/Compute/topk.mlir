// RUN: fsdp-opt %s -split-input-file -fsdp-topk | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdp-topk="device=true" | FileCheck %s --check-prefix=GPU
// RUN: fsdp-opt %s -split-input-file -fsdp-topk -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// On the CPU paths the op keeps only its input (the stable form's
// computation is left dead) and bufferizes to fsdp.buffer.topk_indices into
// a fresh buffer; under compute=gpu it is replaced by its stable form.
// CHECK-LABEL: func.func @router
// CHECK: %[[IDS:.*]] = fsdp.topk_indices %arg0 {largest, sorted} : tensor<6x8xf32> -> tensor<6x2xi64>
// CHECK: return %[[IDS]]
// GPU-LABEL: func.func @router
// GPU-NOT: fsdp.topk_indices
// GPU: return %arg1
// BUF-LABEL: func.func @router
// BUF: %[[OUT:.*]] = memref.alloc() {{.*}}: memref<6x2xi64>
// BUF: fsdp.buffer.topk_indices %{{.*}} into %[[OUT]] {largest, sorted} : memref<6x8xf32{{.*}}>, memref<6x2xi64>
// BUF: return %[[OUT]]
func.func @router(%probs: tensor<6x8xf32>, %stable: tensor<6x2xi64>) -> tensor<6x2xi64> {
  %ids = fsdp.topk_indices %probs stable %stable {largest, sorted} : tensor<6x8xf32>, tensor<6x2xi64> -> tensor<6x2xi64>
  return %ids : tensor<6x2xi64>
}

// -----

// Smallest first, unsorted, on a 3-D input: the same on the CPU; under
// compute=gpu the stable form again.
// CHECK-LABEL: func.func @smallest
// CHECK: fsdp.topk_indices %arg0 : tensor<3x4x9xbf16> -> tensor<3x4x3xi64>
// GPU-LABEL: func.func @smallest
// GPU: return %arg1
// BUF-LABEL: func.func @smallest
// BUF: fsdp.buffer.topk_indices %{{.*}} into %{{.*}} : memref<3x4x9xbf16{{.*}}>, memref<3x4x3xi64>
func.func @smallest(%x: tensor<3x4x9xbf16>, %s: tensor<3x4x3xi64>) -> tensor<3x4x3xi64> {
  %ids = fsdp.topk_indices %x stable %s : tensor<3x4x9xbf16>, tensor<3x4x3xi64> -> tensor<3x4x3xi64>
  return %ids : tensor<3x4x3xi64>
}

// -----

// torch.sort with stable=False (`sort`, descending with `largest`): the same
// choice; the stable form is the stable sort's indices.
// CHECK-LABEL: func.func @unstable_sort
// CHECK: fsdp.topk_indices %arg0 {largest, sort} : tensor<4x40xf32> -> tensor<4x40xi64>
// GPU-LABEL: func.func @unstable_sort
// GPU-NOT: fsdp.topk_indices
// GPU: return %arg1
// BUF-LABEL: func.func @unstable_sort
// BUF: fsdp.buffer.topk_indices %{{.*}} into %{{.*}} {largest, sort} : memref<4x40xf32{{.*}}>, memref<4x40xi64>
func.func @unstable_sort(%x: tensor<4x40xf32>, %s: tensor<4x40xi64>) -> tensor<4x40xi64> {
  %ids = fsdp.topk_indices %x stable %s {largest, sort} : tensor<4x40xf32>, tensor<4x40xi64> -> tensor<4x40xi64>
  return %ids : tensor<4x40xi64>
}

// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-merge-modules | FileCheck %s

// Two outlined kernels in one module; the launches name it.
// CHECK-LABEL: module attributes {gpu.container_module}
module attributes {gpu.container_module} {
  // CHECK: gpu.module @__fsdp_kernels {
  // CHECK-NEXT: gpu.func @a_kernel
  // CHECK: gpu.func @b_kernel
  // CHECK-NOT: gpu.module
  gpu.module @a_kernel {
    gpu.func @a_kernel() kernel {
      gpu.return
    }
  }
  gpu.module @b_kernel {
    gpu.func @b_kernel() kernel {
      gpu.return
    }
  }
  // CHECK: func.func @step
  func.func @step() {
    %c1 = arith.constant 1 : index
    // CHECK: gpu.launch_func @__fsdp_kernels::@a_kernel
    gpu.launch_func @a_kernel::@a_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    // CHECK: gpu.launch_func @__fsdp_kernels::@b_kernel
    gpu.launch_func @b_kernel::@b_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// A symbol that is already merged keeps its module.
// CHECK-LABEL: module attributes {gpu.container_module}
module attributes {gpu.container_module} {
  // CHECK: gpu.module @__fsdp_kernels {
  // CHECK: gpu.module @second {
  gpu.module @first {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  gpu.module @second {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func @step() {
    %c1 = arith.constant 1 : index
    // CHECK: gpu.launch_func @__fsdp_kernels::@k
    gpu.launch_func @first::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    // CHECK: gpu.launch_func @second::@k
    gpu.launch_func @second::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

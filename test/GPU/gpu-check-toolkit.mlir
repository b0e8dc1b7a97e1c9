// RUN: fsdp-opt %s --fsdp-gpu-check-toolkit="cuda-path=%t/no-toolkit" -verify-diagnostics
// RUN: fsdp-opt %s --fsdp-gpu-check-toolkit="cuda-path=%t/no-toolkit format=isa" -verify-diagnostics
// RUN: not fsdp-opt %s --fsdp-gpu-check-toolkit="format=ptx" 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: option format must be fatbin, bin or isa, got 'ptx'

// A missing toolkit is an error at the first GPU module that names the
// file and the option, not a failure inside the serializer.
module attributes {gpu.container_module} {
  // expected-error @below {{compute=gpu needs the CUDA toolkit's libdevice (the kernels' math functions), but there is no}}
  gpu.module @kernels {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}

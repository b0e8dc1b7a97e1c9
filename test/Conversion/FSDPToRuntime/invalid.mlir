// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime -verify-diagnostics

fsdp.mesh @mesh [shard = 4]
func.func @tensor_collective(%x: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{must be expanded and bufferized before convert-fsdp-to-runtime}}
  %0 = fsdp.all_gather %x over @mesh ["shard"] : tensor<4xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

fsdp.mesh @mesh [shard = 2]
func.func @complex(%a: memref<4xcomplex<f32>>, %b: memref<8xcomplex<f32>>) {
  // expected-error @+1 {{element type 'complex<f32>' has no runtime dtype}}
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] : memref<4xcomplex<f32>>, memref<8xcomplex<f32>>
  return
}

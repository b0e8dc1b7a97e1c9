// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime -verify-diagnostics

// The reproducer of an attribute named `fsdp.`: rejected where it is written,
// with its location, so `--convert-fsdp-to-runtime | fsdp-opt` never sees an
// output that does not parse back.
// RUN: not fsdp-opt %S/Inputs/signature-empty-name.mlir --convert-fsdp-to-runtime 2>&1 | FileCheck %s --check-prefix=BARE
// BARE: signature-empty-name.mlir:8:1: error: 'func.func' op 'fsdp.' on argument #0 names no fsdp attribute (nothing follows the prefix)
// RUN: not fsdp-opt %S/Inputs/signature-empty-name.mlir --convert-fsdp-to-runtime | fsdp-opt | FileCheck %s --check-prefix=EMPTY
// EMPTY: module {
// EMPTY-NEXT: }

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

// -----

// An attribute named `fsdp.` is no fsdp attribute.
fsdp.mesh @mesh [shard = 2]
// expected-error @+1 {{'fsdp.' on argument #0 names no fsdp attribute (nothing follows the prefix)}}
func.func @bare_prefix(%w: memref<2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.global_type = tensor<4xf32>, fsdp. = "a"}) {
  return
}

// -----

// expected-error @+1 {{'fsdp.' on result #0 names no fsdp attribute (nothing follows the prefix)}}
func.func @bare_prefix_result(%a: memref<f32>) -> (memref<f32> {fsdp.loss, fsdp. = 1}) {
  return %a : memref<f32>
}

// -----

// Alone on an argument it reaches no dialect verifier; the signature's
// writer rejects it.
// expected-error @+1 {{argument #0 cannot be recorded for the runner: 'fsdp.' names no fsdp attribute (nothing follows the prefix)}}
func.func @bare_prefix_alone(%a: memref<2xf32> {fsdp. = "a"}) {
  return
}

// -----

// An entry's arguments and results become ports: static tensors or memrefs.
// expected-error @+1 {{argument #0 cannot be recorded for the runner: a step's arguments and results must be tensors or memrefs of static shape, got 'f32'}}
func.func @scalar(%a: f32 {fsdp.name = "a"}) {
  return
}

// -----

// expected-error @+1 {{result #0 cannot be recorded for the runner: port "r": the element type of its type 'tensor<2xi1>' is not supported (f16, bf16, f32, f64, 8-bit, i32, i64)}}
func.func @bool_result(%a: memref<2xf32>) -> (memref<2xi1> {fsdp.name = "r"}) {
  %r = memref.alloc() : memref<2xi1>
  return %r : memref<2xi1>
}

// -----

// The runner calls an entry through its C interface; nothing else may.
// expected-error @+1 {{'func.func' op is an entry of the runner (its arguments or results have fsdp attributes) and must not be called or referenced}}
func.func @entry(%a: memref<2xf32> {fsdp.name = "a"}) {
  return
}
func.func @caller(%a: memref<2xf32>) {
  call @entry(%a) : (memref<2xf32>) -> ()
  return
}

// -----

// Device code is the lowering's to write: a gpu op in its input would stay
// unlowered on the CPU paths.
module attributes {gpu.container_module} {
  func.func @copy(%a: memref<?xf32>, %b: memref<?xf32>) {
    // expected-error @+1 {{'gpu.memcpy' op is device code in the step: the lowering generates all device code itself (compute=gpu), so its input must not contain gpu dialect operations}}
    gpu.memcpy %a, %b : memref<?xf32>, memref<?xf32>
    return
  }
}

// -----

// The device scatter-add is lowered only by the GPU lowering
// (fsdp-gpu-scatter-add); left to the CPU lowering it would reach the LLVM
// conversion unlowered.
func.func @scatter_add_rows_on_the_cpu(%g: memref<6x4xf32>, %i: memref<6xi64>, %z: memref<10x4xf32>) {
  // expected-error @+1 {{'fsdp.buffer.scatter_add_rows' op is the device scatter-add, which only the GPU lowering (compute=gpu) lowers; the CPU lowering (compute=fast or loops) cannot lower it}}
  fsdp.buffer.scatter_add_rows %g, %i into %z : memref<6x4xf32>, memref<6xi64>, memref<10x4xf32>
  return
}


// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -mlir-print-op-generic | fsdp-opt -split-input-file | FileCheck %s

// A signature as convert-fsdp-to-runtime writes it: ports without the
// #fsdp.port prefix, the global type only where it differs from the slot,
// each training field only where it is set. Ports may also be written in
// full.
// CHECK: module attributes {fsdp.signatures = {empty = #fsdp.signature<args = [], results = []>, step = #fsdp.signature<args = [
// CHECK-SAME: <"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>,
// CHECK-SAME: <"w.exp_avg" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, state_of = 0>,
// CHECK-SAME: <"lr" : tensor<f32>, role = lr>, <"step" : tensor<f32>, role = step>,
// CHECK-SAME: <"x" : tensor<8x16xbf16>>, <"r" : tensor<4xi64>, layout = #fsdp.layout<@mesh, [replicate]>>],
// CHECK-SAME: results = [<"loss" : tensor<f32>, loss>,
// CHECK-SAME: <"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, update_of = 0>,
// CHECK-SAME: <"grad.w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>]>}}
module attributes {fsdp.signatures = {
    step = #fsdp.signature<
      args = [<"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>,
              <"w.exp_avg" : tensor<3x16xf32>, state_of = 0, layout = #fsdp.layout<@mesh, [shard<0>]>, global_type = tensor<10x16xf32>>,
              <"lr" : tensor<f32>, role = lr>,
              <"step" : tensor<f32>, role = step>,
              #fsdp.port<"x" : tensor<8x16xbf16>>,
              <"r" : tensor<4xi64>, global_type = tensor<4xi64>, layout = #fsdp.layout<@mesh, [replicate]>>],
      results = [<"loss" : tensor<f32>, loss>,
                 <"w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>, update_of = 0>,
                 <"grad.w" : tensor<3x16xf32>, global_type = tensor<10x16xf32>, layout = #fsdp.layout<@mesh, [shard<0>]>>]>,
    empty = #fsdp.signature<args = [], results = []>}} {
  fsdp.mesh @mesh [shard = 4]
}

// -----

// A port on its own.
// CHECK-LABEL: func.func @port
// CHECK-SAME: p = #fsdp.port<"a b" : tensor<2x3xi32>>
func.func @port() attributes {p = #fsdp.port<"a b" : tensor<2x3xi32>>} {
  return
}

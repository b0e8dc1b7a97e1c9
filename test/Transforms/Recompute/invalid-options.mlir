// RUN: fsdp-opt %s -split-input-file --fsdp-recompute=units=a,nope -verify-diagnostics
// RUN: not fsdp-opt %s -split-input-file --fsdp-recompute=units=all,a 2>&1 | FileCheck %s --check-prefix=MIXED
// RUN: not fsdp-opt %s -split-input-file --fsdp-pipeline=recompute=blocks.0 2>&1 | FileCheck %s --check-prefix=PIPELINE
// MIXED: error: option units: 'all' cannot be combined with unit names
// PIPELINE: error: fsdp-recompute: unknown FSDP unit 'blocks.0' in option units; the units are: a, b

// A unit name no argument has is refused, with the units there are.

fsdp.mesh @mesh [shard = 2]

// expected-error@+1 {{fsdp-recompute: unknown FSDP unit 'nope' in option units; the units are: a, b}}
func.func @step(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "a"},
                %v: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.unit = "b"},
                %x: tensor<4xf32>) -> (tensor<f32> {fsdp.loss}) {
  %h = arith.mulf %x, %w : tensor<4xf32>
  %g = arith.mulf %h, %v : tensor<4xf32>
  %c = arith.constant 0 : index
  %e = tensor.extract %g[%c] : tensor<4xf32>
  %l = tensor.from_elements %e : tensor<f32>
  return %l : tensor<f32>
}

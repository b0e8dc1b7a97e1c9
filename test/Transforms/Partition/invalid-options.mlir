// Bad option values are reported once, at the module, and the pass fails.
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-op=max 2>&1 | FileCheck %s --check-prefix=REDUCE-OP
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=grad-scale=0.5 2>&1 | FileCheck %s --check-prefix=SCALE-AVG
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=i32 2>&1 | FileCheck %s --check-prefix=PARAM-INT
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=float16 2>&1 | FileCheck %s --check-prefix=PARAM-BAD
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=index 2>&1 | FileCheck %s --check-prefix=REDUCE-DTYPE
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=uneven-policy=floor 2>&1 | FileCheck %s --check-prefix=POLICY
// A value the option parser itself rejects.
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reshard-after-forward=maybe 2>&1 | FileCheck %s --check-prefix=BOOL

// Options that are fine in general but do not fit this input: the message
// points at the function.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-dtype=f32 all-reduce-loss=true" -verify-diagnostics
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=2.0 all-reduce-loss=true" -verify-diagnostics
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=f32 2>&1 | FileCheck %s --check-prefix=INT-REDUCE-DTYPE
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=2.0" 2>&1 | FileCheck %s --check-prefix=INT-SCALE

// REDUCE-OP: invalid-options.mlir:{{[0-9]+}}:{{[0-9]+}}: error: option reduce-op must be avg or sum, got 'max'
// SCALE-AVG: error: option grad-scale needs reduce-op=sum
// PARAM-INT: error: option param-dtype must name a float type (f32, bf16, f16, f64), got 'i32'
// The type parser's own message is not passed on.
// PARAM-BAD-NOT: {{^}}float16:1:1
// PARAM-BAD: error: option param-dtype must name a float type (f32, bf16, f16, f64), got 'float16'
// PARAM-BAD-NOT: {{^}}float16:1:1
// REDUCE-DTYPE: error: option reduce-dtype must name a float type (f32, bf16, f16, f64), got 'index'
// POLICY: error: option uneven-policy must be ceil or balanced, got 'floor'
// INT-REDUCE-DTYPE: invalid-options.mlir:[[@LINE+6]]:1: error: gradient result #0 has type 'tensor<8xi32>'; reduce-dtype needs a floating-point gradient
// INT-SCALE: invalid-options.mlir:[[@LINE+5]]:1: error: gradient result #0 has type 'tensor<8xi32>'; grad-scale needs a floating-point gradient
// BOOL: for the --reshard-after-forward option: 'maybe' is invalid value for boolean argument

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{gradient result #0 has type 'tensor<8xi32>'}}
func.func @integer_gradient(%w: tensor<8xi32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (tensor<8xi32> {fsdp.grad_of = 0}) {
  %dw = "model.backward"(%w) : (tensor<8xi32>) -> tensor<8xi32>
  return %dw : tensor<8xi32>
}

// -----

fsdp.mesh @mesh [shard = 4]
// expected-error @+1 {{all-reduce-loss needs a tensor loss; result #0 has type 'f32'}}
func.func @scalar_loss(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) -> (f32 {fsdp.loss}) {
  %loss = "model.forward"(%w) : (tensor<8xf32>) -> f32
  return %loss : f32
}

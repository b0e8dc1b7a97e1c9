// Bad option values are reported once, with the accepted values, and the
// pass fails.
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-op=max 2>&1 | FileCheck %s --check-prefix=REDUCE-OP
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=grad-scale=0.5 2>&1 | FileCheck %s --check-prefix=SCALE-AVG
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=i32 2>&1 | FileCheck %s --check-prefix=PARAM-INT
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=param-dtype=float16 2>&1 | FileCheck %s --check-prefix=PARAM-BAD
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=index 2>&1 | FileCheck %s --check-prefix=REDUCE-DTYPE
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=uneven-policy=floor 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-pipeline="lower=true param-dtype=f8E4M3FN" 2>&1 | FileCheck %s --check-prefix=PARAM-F8
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-pipeline="lower=true reduce-dtype=f8E5M2" 2>&1 | FileCheck %s --check-prefix=REDUCE-F8
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=nan" 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-pipeline="reduce-op=sum grad-scale=inf" 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=accumulation-steps=0 2>&1 | FileCheck %s --check-prefix=STEPS
// A value the option parser itself rejects.
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reshard-after-forward=maybe 2>&1 | FileCheck %s --check-prefix=BOOL

// Options that are fine in general but do not fit this input: the message
// points at the function.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-dtype=f32 all-reduce-loss=true" -verify-diagnostics
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=2.0 all-reduce-loss=true" -verify-diagnostics
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=reduce-dtype=f32 2>&1 | FileCheck %s --check-prefix=INT-REDUCE-DTYPE
// RUN: not fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition="reduce-op=sum grad-scale=2.0" 2>&1 | FileCheck %s --check-prefix=INT-SCALE

// REDUCE-OP: for the --reduce-op option: 'max' is not one of avg, sum
// SCALE-AVG: error: option grad-scale needs reduce-op=sum
// PARAM-INT: for the --param-dtype option: 'i32' is not one of none, f32, f64, f16, bf16
// PARAM-BAD: for the --param-dtype option: 'float16' is not one of none, f32, f64, f16, bf16
// Only the types the runtime moves: no FP8 (it would not lower).
// PARAM-F8: for the --param-dtype option: 'f8E4M3FN' is not one of none, f32, f64, f16, bf16
// REDUCE-F8: for the --reduce-dtype option: 'f8E5M2' is not one of none, f32, f64, f16, bf16
// REDUCE-DTYPE: for the --reduce-dtype option: 'index' is not one of none, f32, f64, f16, bf16
// POLICY: for the --uneven-policy option: 'floor' is not one of layout, ceil, balanced
// NAN: error: option grad-scale must be a finite number, got {{nan|NAN}}
// INF: error: option grad-scale must be a finite number, got {{inf|INF}}
// STEPS: error: option accumulation-steps must be between 1 and 1048576, got 0
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

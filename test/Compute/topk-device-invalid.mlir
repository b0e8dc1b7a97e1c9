// RUN: fsdp-opt %s -fsdp-topk="device=true" -verify-diagnostics

// compute=gpu replaces the op by its stable form; without one it is refused.
func.func @no_stable(%x: tensor<4x3xf32>) -> tensor<4x2xi64> {
  // expected-error @+1 {{'fsdp.topk_indices' op has no compute=gpu lowering without its stable form: the runtime's topk kernel runs on the host}}
  %ids = fsdp.topk_indices %x {largest} : tensor<4x3xf32> -> tensor<4x2xi64>
  return %ids : tensor<4x2xi64>
}

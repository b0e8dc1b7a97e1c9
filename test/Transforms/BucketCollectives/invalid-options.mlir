// Bad option values fail the pass with one message at the module.
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=mode=bogus 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: error: option mode must be unit, greedy or none, got 'bogus'
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=alignment=0 2>&1 | FileCheck %s --check-prefix=POSITIVE
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=max-count=0 2>&1 | FileCheck %s --check-prefix=POSITIVE
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=bucket-bytes=-1 2>&1 | FileCheck %s --check-prefix=POSITIVE
// POSITIVE: error: options alignment, max-count and bucket-bytes must be positive
// The pipeline passes its bucket option through.
// RUN: not fsdp-opt %s --fsdp-pipeline=bucket=bogus 2>&1 | FileCheck %s --check-prefix=MODE

fsdp.mesh @mesh [shard = 2]
func.func @f(%a: tensor<4xf32>) -> tensor<8xf32> {
  %g = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  return %g : tensor<8xf32>
}

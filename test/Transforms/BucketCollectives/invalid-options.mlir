// Bad option values fail the pass with one message at the module.
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=mode=bogus 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: --{{mode|bucket}} option: 'bogus' is not one of unit, greedy, none
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=alignment=0 2>&1 | FileCheck %s --check-prefix=ALIGN0
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=max-count=0 2>&1 | FileCheck %s --check-prefix=POSITIVE
// RUN: not fsdp-opt %s --fsdp-bucket-collectives=bucket-bytes=-1 2>&1 | FileCheck %s --check-prefix=POSITIVE
// POSITIVE: error: options max-count and bucket-bytes must be positive
// ALIGN0: error: option alignment must be between 1 and 1048576 elements, got 0
// Alignments whose padding would overflow 64-bit sizes are refused up front.
// RUN: not fsdp-opt %s --fsdp-pipeline=bucket-alignment=4611686018427387904 2>&1 | FileCheck %s --check-prefix=ALIGN62
// RUN: not fsdp-opt %s --fsdp-pipeline=bucket-alignment=9223372036854775807 2>&1 | FileCheck %s --check-prefix=ALIGNMAX
// ALIGN62: error: option alignment must be between 1 and 1048576 elements, got 4611686018427387904
// ALIGNMAX: error: option alignment must be between 1 and 1048576 elements, got 9223372036854775807
// The pipeline passes its bucket option through.
// RUN: not fsdp-opt %s --fsdp-pipeline=bucket=bogus 2>&1 | FileCheck %s --check-prefix=MODE

fsdp.mesh @mesh [shard = 2]
func.func @f(%a: tensor<4xf32>) -> tensor<8xf32> {
  %g = fsdp.all_gather %a over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = forward>} : tensor<4xf32> -> tensor<8xf32>
  return %g : tensor<8xf32>
}

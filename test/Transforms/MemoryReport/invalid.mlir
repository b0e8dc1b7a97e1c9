// RUN: fsdp-opt %s -split-input-file --fsdp-memory-report -o /dev/null -verify-diagnostics
// RUN: not fsdp-opt %s --fsdp-memory-report=output=/nonexistent/dir/r.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: error: cannot open report file

// Liveness is over one block.

// expected-error@+1 {{fsdp-memory-report needs a function body with a single block; this one has 2 blocks}}
func.func @blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  cf.br ^bb1
^bb1:
  return %x : tensor<4xf32>
}

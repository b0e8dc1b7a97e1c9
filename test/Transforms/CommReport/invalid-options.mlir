// RUN: not fsdp-opt %s --fsdp-comm-report=format=xml 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: for the --format option: 'xml' is not one of text, json
// RUN: not fsdp-opt %s --fsdp-comm-report=output=%t.missing/dir/report.txt 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: error: cannot open report file:

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

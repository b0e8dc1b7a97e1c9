// Every rank's gathered parameters are bit-identical to the global tensors,
// for every layout on a 2x4 mesh (threads backend).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_inputs.py %s %t/data --world 8
// RUN: fsdp-opt %s --fsdp-pipeline="lower=true" -o %t/l.mlir
// RUN: fsdp-run %t/l.mlir --inputs %t/data --outputs %t/out --all-ranks
// RUN: %python %S/Inputs/check_gathered.py %t/data %t/out 8 even ceil balanced dim1 strided nested twodims replicated | FileCheck %s
// CHECK: PASS: 8 parameters x 8 ranks bit-identical

fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @gather(
    %even: tensor<16x3xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "even", fsdp.unit = "a"},
    %ceil: tensor<10x3xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "ceil", fsdp.unit = "a"},
    %balanced: tensor<10x3xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = balanced>, fsdp.name = "balanced", fsdp.unit = "a"},
    %dim1: tensor<3x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>]>, fsdp.name = "dim1", fsdp.unit = "b"},
    %strided: tensor<16x2xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, strided_shard<0, 2>]>, fsdp.name = "strided", fsdp.unit = "b"},
    %nested: tensor<10x2xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<0>]>, fsdp.name = "nested", fsdp.unit = "b"},
    %twodims: tensor<6x9xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, shard<1>], policy = balanced>, fsdp.name = "twodims", fsdp.unit = "c"},
    %replicated: tensor<5xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "replicated", fsdp.unit = "c"})
    -> (tensor<16x3xf32> {fsdp.name = "copy.even"}, tensor<10x3xf32> {fsdp.name = "copy.ceil"},
        tensor<10x3xf32> {fsdp.name = "copy.balanced"}, tensor<3x10xf32> {fsdp.name = "copy.dim1"},
        tensor<16x2xf32> {fsdp.name = "copy.strided"}, tensor<10x2xf32> {fsdp.name = "copy.nested"},
        tensor<6x9xf32> {fsdp.name = "copy.twodims"}, tensor<5xf32> {fsdp.name = "copy.replicated"}) {
  %e0 = tensor.empty() : tensor<16x3xf32>
  %c0 = linalg.copy ins(%even : tensor<16x3xf32>) outs(%e0 : tensor<16x3xf32>) -> tensor<16x3xf32>
  %e1 = tensor.empty() : tensor<10x3xf32>
  %c1 = linalg.copy ins(%ceil : tensor<10x3xf32>) outs(%e1 : tensor<10x3xf32>) -> tensor<10x3xf32>
  %e2 = tensor.empty() : tensor<10x3xf32>
  %c2 = linalg.copy ins(%balanced : tensor<10x3xf32>) outs(%e2 : tensor<10x3xf32>) -> tensor<10x3xf32>
  %e3 = tensor.empty() : tensor<3x10xf32>
  %c3 = linalg.copy ins(%dim1 : tensor<3x10xf32>) outs(%e3 : tensor<3x10xf32>) -> tensor<3x10xf32>
  %e4 = tensor.empty() : tensor<16x2xf32>
  %c4 = linalg.copy ins(%strided : tensor<16x2xf32>) outs(%e4 : tensor<16x2xf32>) -> tensor<16x2xf32>
  %e5 = tensor.empty() : tensor<10x2xf32>
  %c5 = linalg.copy ins(%nested : tensor<10x2xf32>) outs(%e5 : tensor<10x2xf32>) -> tensor<10x2xf32>
  %e6 = tensor.empty() : tensor<6x9xf32>
  %c6 = linalg.copy ins(%twodims : tensor<6x9xf32>) outs(%e6 : tensor<6x9xf32>) -> tensor<6x9xf32>
  %e7 = tensor.empty() : tensor<5xf32>
  %c7 = linalg.copy ins(%replicated : tensor<5xf32>) outs(%e7 : tensor<5xf32>) -> tensor<5xf32>
  return %c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7 : tensor<16x3xf32>, tensor<10x3xf32>, tensor<10x3xf32>, tensor<3x10xf32>, tensor<16x2xf32>, tensor<10x2xf32>, tensor<6x9xf32>, tensor<5xf32>
}

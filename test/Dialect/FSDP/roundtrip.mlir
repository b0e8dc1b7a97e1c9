// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -mlir-print-op-generic | fsdp-opt -split-input-file | FileCheck %s

// CHECK: fsdp.mesh @mesh [replicate = 2, shard = 4]
fsdp.mesh @mesh [replicate = 2, shard = 4]
// CHECK-LABEL: func.func @params
// CHECK-SAME: fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>
// CHECK-SAME: fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>], policy = balanced>
// CHECK-SAME: fsdp.layout = #fsdp.layout<@mesh, [replicate, strided_shard<0, 2>]>
// CHECK-SAME: fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>
// CHECK-SAME: fsdp.name = "w", fsdp.unit = "block0"
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0 : i64})
func.func @params(
    %w: tensor<10x16xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>},
    %v: tensor<16x10xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<1>], policy = balanced>},
    %s: tensor<16x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, strided_shard<0, 2>]>},
    %r: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>},
    %n: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>], policy = ceil>, fsdp.name = "w", fsdp.unit = "block0"})
    -> (tensor<f32> {fsdp.loss}, tensor<10x16xf32> {fsdp.grad_of = 0 : i64}) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c, %w : tensor<f32>, tensor<10x16xf32>
}

// -----

// Standalone placement and enum attributes.
// CHECK-LABEL: func.func @attrs
// CHECK-SAME: a = #fsdp.replicate
// CHECK-SAME: b = #fsdp.shard<1>
// CHECK-SAME: c = #fsdp.strided_shard<0, 4>
// CHECK-SAME: d = #fsdp.partial<avg>
// CHECK-SAME: e = #fsdp<reduce max>
// CHECK-SAME: f = #fsdp<policy balanced>
// CHECK-SAME: g = #fsdp.layout<@m, [partial<sum>]>
func.func @attrs() attributes {a = #fsdp.replicate, b = #fsdp.shard<1>,
    c = #fsdp.strided_shard<0, 4>, d = #fsdp.partial<avg>,
    e = #fsdp<reduce max>, f = #fsdp<policy balanced>,
    g = #fsdp.layout<@m, [partial<sum>]>} {
  return
}

// -----

// Placements may also be written in full inside a layout.
// CHECK: fsdp.mesh @"dp axis" ["data parallel" = 8]
fsdp.mesh @"dp axis" ["data parallel" = 8]
// CHECK-LABEL: func.func @full_placements
// CHECK-SAME: #fsdp.layout<@"dp axis", [shard<0>]>
func.func @full_placements(%w: tensor<9xf32> {fsdp.layout = #fsdp.layout<@"dp axis", [#fsdp.shard<0>]>}) {
  return
}

// -----

fsdp.mesh @mesh [replicate = 2, shard = 4]
// CHECK-LABEL: func.func @collectives
func.func @collectives(%shard: tensor<3x16xf32>, %g: tensor<10x16xf32>,
                       %flat: tensor<48xf32>, %big: tensor<192xf32>) {
  // CHECK: fsdp.param_gather %{{.*}} layout <@mesh, [replicate, shard<0>]> phase forward {unit = "l0"} : tensor<3x16xf32> -> tensor<10x16xf32>
  %full = fsdp.param_gather %shard layout <@mesh, [replicate, shard<0>]> phase forward {unit = "l0"} : tensor<3x16xf32> -> tensor<10x16xf32>
  // CHECK: fsdp.grad_reduce %{{.*}} layout <@mesh, [replicate, shard<0>]> avg : tensor<10x16xf32> -> tensor<3x16xf32>
  %r = fsdp.grad_reduce %g layout #fsdp.layout<@mesh, [replicate, shard<0>]> avg : tensor<10x16xf32> -> tensor<3x16xf32>
  // CHECK: fsdp.grad_reduce %{{.*}} sum {reduce_dtype = f64, scale = 1.250000e-01 : f64}
  %s = fsdp.grad_reduce %g layout #fsdp.layout<@mesh, [replicate, shard<0>]> sum {scale = 0.125 : f64, reduce_dtype = f64} : tensor<10x16xf32> -> tensor<3x16xf32>
  // CHECK: fsdp.grad_reduce %{{.*}} accumulate %{{.*}} layout <@mesh, [replicate, shard<0>]> avg {partial} : tensor<10x16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
  %acc = fsdp.grad_reduce %g accumulate %r layout <@mesh, [replicate, shard<0>]> avg {partial} : tensor<10x16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
  // CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
  %ag = fsdp.all_gather %flat over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
  // CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] : tensor<3x16xf32> -> tensor<12x16xf32>
  %ag2 = fsdp.all_gather %shard over @mesh ["shard"] : tensor<3x16xf32> -> tensor<12x16xf32>
  // CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<48xf32> -> tensor<192xf32>
  %og = fsdp.all_gather %flat over @mesh ["shard"] {fsdp.origin = #fsdp.origin<phase = backward, unit = "l0">} : tensor<48xf32> -> tensor<192xf32>
  // CHECK: fsdp.all_reduce %{{.*}} over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = optimizer>} : tensor<48xf32> -> tensor<48xf32>
  %oa = fsdp.all_reduce %flat over @mesh ["shard"] avg {fsdp.origin = #fsdp.origin<phase = optimizer>} : tensor<48xf32> -> tensor<48xf32>
  // CHECK: fsdp.reduce_scatter %{{.*}} over @mesh ["replicate", "shard"] sum : tensor<192xf32> -> tensor<24xf32>
  %rs = fsdp.reduce_scatter %big over @mesh ["replicate", "shard"] sum : tensor<192xf32> -> tensor<24xf32>
  // CHECK: fsdp.all_reduce %{{.*}} over @mesh ["replicate"] avg : tensor<48xf32> -> tensor<48xf32>
  %ar = fsdp.all_reduce %flat over @mesh ["replicate"] avg : tensor<48xf32> -> tensor<48xf32>
  // CHECK: fsdp.all_reduce %{{.*}} over @mesh [] max : tensor<48xf32> -> tensor<48xf32>
  %ar0 = fsdp.all_reduce %flat over @mesh [] max : tensor<48xf32> -> tensor<48xf32>
  // CHECK: fsdp.all_gather %{{.*}} over @mesh ["shard"] members [16, 0, 32] : tensor<48xf32> -> tensor<192xf32>
  %mg = fsdp.all_gather %flat over @mesh ["shard"] members [16, 0, 32] : tensor<48xf32> -> tensor<192xf32>
  // CHECK: fsdp.reduce_scatter %{{.*}} over @mesh ["shard"] avg members [40, 8] : tensor<192xf32> -> tensor<48xf32>
  %mr = fsdp.reduce_scatter %mg over @mesh ["shard"] avg members [40, 8] : tensor<192xf32> -> tensor<48xf32>
  // CHECK: fsdp.all_gather_start %{{.*}} over @mesh ["shard"] members [48] : tensor<48xf32> -> tensor<192xf32>
  %req, %pend = fsdp.all_gather_start %flat over @mesh ["shard"] members [48] : tensor<48xf32> -> tensor<192xf32>
  %done = fsdp.wait %req, %pend : tensor<192xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
// CHECK-LABEL: func.func @buffers
func.func @buffers(%a: memref<48xf32>, %b: memref<192xf32>) {
  // CHECK: fsdp.buffer.all_gather %{{.*}} into %{{.*}} over @mesh ["shard"] : memref<48xf32>, memref<192xf32>
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] : memref<48xf32>, memref<192xf32>
  // CHECK: fsdp.buffer.reduce_scatter %{{.*}} into %{{.*}} over @mesh ["shard"] sum : memref<192xf32>, memref<48xf32>
  fsdp.buffer.reduce_scatter %b into %a over @mesh ["shard"] sum : memref<192xf32>, memref<48xf32>
  // CHECK: fsdp.buffer.all_reduce %{{.*}} into %{{.*}} over @mesh ["shard"] avg : memref<48xf32>, memref<48xf32>
  fsdp.buffer.all_reduce %a into %a over @mesh ["shard"] avg : memref<48xf32>, memref<48xf32>
  // CHECK: fsdp.buffer.all_gather %{{.*}} into %{{.*}} over @mesh ["shard"] members [8, 40] : memref<48xf32>, memref<192xf32>
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] members [8, 40] : memref<48xf32>, memref<192xf32>
  // CHECK: %{{.*}} = fsdp.buffer.reduce_scatter_start %{{.*}} into %{{.*}} over @mesh ["shard"] sum members [8, 40] : memref<192xf32>, memref<48xf32>
  %r = fsdp.buffer.reduce_scatter_start %b into %a over @mesh ["shard"] sum members [8, 40] : memref<192xf32>, memref<48xf32>
  fsdp.buffer.wait %r
  return
}

// -----

fsdp.mesh @mesh [replicate = 2, shard = 4]
// CHECK-LABEL: func.func @async
func.func @async(%x: tensor<48xf32>, %big: tensor<192xf32>, %a: memref<48xf32>, %b: memref<192xf32>) -> (tensor<192xf32>, tensor<48xf32>, tensor<48xf32>) {
  // CHECK: %[[R:.*]], %[[P:.*]] = fsdp.all_gather_start %{{.*}} over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
  %r, %p = fsdp.all_gather_start %x over @mesh ["shard"] : tensor<48xf32> -> tensor<192xf32>
  // CHECK: fsdp.wait %[[R]], %[[P]] : tensor<192xf32>
  %g = fsdp.wait %r, %p : tensor<192xf32>
  // CHECK: fsdp.reduce_scatter_start %{{.*}} over @mesh ["shard"] sum : tensor<192xf32> -> tensor<48xf32>
  %r2, %p2 = fsdp.reduce_scatter_start %big over @mesh ["shard"] sum : tensor<192xf32> -> tensor<48xf32>
  %s = fsdp.wait %r2, %p2 : tensor<48xf32>
  // CHECK: fsdp.all_reduce_start %{{.*}} over @mesh ["replicate"] avg : tensor<48xf32> -> tensor<48xf32>
  %r3, %p3 = fsdp.all_reduce_start %x over @mesh ["replicate"] avg : tensor<48xf32> -> tensor<48xf32>
  %t = fsdp.wait %r3, %p3 : tensor<48xf32>
  // CHECK: %[[B:.*]] = fsdp.buffer.all_gather_start %{{.*}} into %{{.*}} over @mesh ["shard"] : memref<48xf32>, memref<192xf32>
  %rb = fsdp.buffer.all_gather_start %a into %b over @mesh ["shard"] : memref<48xf32>, memref<192xf32>
  // CHECK: fsdp.buffer.wait %[[B]]
  fsdp.buffer.wait %rb
  // CHECK: fsdp.buffer.reduce_scatter_start %{{.*}} into %{{.*}} over @mesh ["shard"] sum
  %rc = fsdp.buffer.reduce_scatter_start %b into %a over @mesh ["shard"] sum : memref<192xf32>, memref<48xf32>
  fsdp.buffer.wait %rc
  // CHECK: fsdp.buffer.all_reduce_start %{{.*}} into %{{.*}} over @mesh ["replicate"] max
  %rd = fsdp.buffer.all_reduce_start %a into %a over @mesh ["replicate"] max : memref<48xf32>, memref<48xf32>
  fsdp.buffer.wait %rd
  return %g, %s, %t : tensor<192xf32>, tensor<48xf32>, tensor<48xf32>
}

// -----

// CHECK-LABEL: func.func private @request_type
// CHECK-SAME: !fsdp.request
func.func private @request_type(%r: !fsdp.request)

// -----

// This rank's index on one axis, or row-major over several.
fsdp.mesh @mesh [dp = 2, tp = 4]
// CHECK-LABEL: func.func @axis_index
// CHECK: fsdp.axis_index @mesh ["tp"]
// CHECK: fsdp.axis_index @mesh ["dp", "tp"]
func.func @axis_index() -> (index, index) {
  %t = fsdp.axis_index @mesh ["tp"]
  %r = fsdp.axis_index @mesh ["dp", "tp"]
  return %t, %r : index, index
}

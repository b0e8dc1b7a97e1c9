// RUN: fsdp-opt %s -split-input-file --fsdp-tensor-parallel -verify-diagnostics

// Inputs fsdp-tensor-parallel cannot partition; each error names the op
// and why.

fsdp.mesh @mesh [dp = 2, tp = 2]
// Operands split along different loops: the op's sharding is ambiguous.
func.func @ambiguous(%a: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                     %b: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<1>]>})
    -> (tensor<8x8xf32> {fsdp.grad_of = 0 : i64}) {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-error @+1 {{ambiguous tensor-parallel sharding: operand #0 is split along loop d0 and operand #1 along loop d1}}
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// Features split 3 x 4: the outer 3 heads do not split over tp = 2.
func.func @heads(%w: tensor<12x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %x: tensor<2x8xf32>) -> tensor<2x3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x12xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x12xf32>) -> tensor<2x12xf32>
  %q = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x8xf32>, tensor<12x8xf32>) outs(%z : tensor<2x12xf32>) -> tensor<2x12xf32>
  // expected-error @+1 {{this reshape cannot carry the tensor-parallel sharding of dim 1: it splits into dims [1, 2], whose outer size 3 is not divisible by the tensor-parallel axis size 2}}
  %h = tensor.expand_shape %q [[0], [1, 2]] output_shape [2, 3, 4] : tensor<2x12xf32> into tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// Heads merged behind the samples (strided blocks, partitioned), then
// expanded in another factorization: no dim starts where the split part
// does.
func.func @merge(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %x: tensor<2x8xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = tensor.expand_shape %q [[0], [1, 2]] output_shape [2, 2, 4] : tensor<2x8xf32> into tensor<2x2x4xf32>
  %m = tensor.collapse_shape %h [[0, 1], [2]] : tensor<2x2x4xf32> into tensor<4x4xf32>
  %m2 = tensor.collapse_shape %m [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  // expected-error @+1 {{this reshape cannot carry the tensor-parallel sharding of dim 0: its split part starts after 2 rows, where no dim of [0, 1] starts}}
  %r = tensor.expand_shape %m2 [[0, 1]] output_shape [4, 4] : tensor<16xf32> into tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// A replicated batch read along the sharded features would need slicing.
func.func @slice(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                 %x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  // expected-error @+1 {{operand #1 is replicated but read along the tensor-parallel loop d1 (its dim 1): this rank would need its part of it}}
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%q, %x : tensor<2x8xf32>, tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// Every parameter names its place on the tensor-parallel axis.
// (`replicate` is accepted for a buffer, an argument without a gradient.)
// expected-error @+1 {{parameter argument #1 has no tensor-parallel placement on mesh axis "tp" (layout #fsdp.layout<@mesh, [shard<0>, replicate]>); give it tp_shard<d> or tp_replicate (replicate is accepted for arguments without a gradient only)}}
func.func @missing(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                   %b: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, replicate]>},
                   %buffer: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>})
    -> (tensor<8xf32> {fsdp.grad_of = 1 : i64}) {
  return %buffer : tensor<8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// A gradient computed replicated for a sharded parameter.
func.func @grad(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>},
                %x: tensor<8x8xf32>) -> (tensor<8x8xf32> {fsdp.grad_of = 0 : i64}) {
  // expected-error @+1 {{result #0 is replicated over the tensor-parallel axis "tp" but must be sharded along dim 0 (as its parameter)}}
  return %x : tensor<8x8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// A slice that cuts the sharded dim.
func.func @slice_cut(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}) -> tensor<2x8xf32> {
  // expected-error @+1 {{this slice cuts dim 0, which is sharded over the tensor-parallel axis; only slices that keep it whole are partitioned}}
  %s = tensor.extract_slice %w[0, 0] [2, 8] [1, 1] : tensor<8x8xf32> to tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// An op the pass does not partition, on a sharded value.
func.func @other(%w: tensor<8x8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>, tp_shard<0>]>}) -> tensor<8x8xf32> {
  // expected-error @+1 {{'arith.addf' reads a value sharded along dim 0 over the tensor-parallel axis "tp"; fsdp-tensor-parallel partitions linalg ops, reshapes, slices and concatenations only}}
  %s = arith.addf %w, %w : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// A table split along its rows (the vocabulary), read by index, where the
// op does more with the element than yield it: the rank that does not
// hold the row cannot tell what its share of the result is.
func.func @gather_scaled(%table: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                         %ids: tensor<2xindex>) -> tensor<2x4xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  // expected-error @+1 {{its body reads a value split along dim 0 over the tensor-parallel axis "tp" at positions computed from data; a vocabulary-parallel read (an embedding lookup, the target logit of a cross-entropy) is partitioned where each rank reads its rows, but here the element read must be what the op yields}}
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%ids : tensor<2xindex>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%id: index, %out: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%id, %j] : tensor<8x4xf32>
    %two = arith.addf %v, %v : f32
    linalg.yield %two : f32
  } -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// Rows read by index and summed in the same op.
func.func @gather_reduction(%table: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                            %ids: tensor<2xindex>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{at positions computed from data; a vocabulary-parallel read (an embedding lookup, the target logit of a cross-entropy) is partitioned where each rank reads its rows, but here the op must have parallel loops and one result}}
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]}
       ins(%ids : tensor<2xindex>) outs(%z : tensor<4xf32>) {
  ^bb0(%id: index, %out: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%id, %j] : tensor<8x4xf32>
    %s = arith.addf %v, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

fsdp.mesh @mesh [dp = 2, tp = 2]
// Two tables split along their rows read by index in one op.
func.func @gather_two(%a: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                      %b: tensor<8x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<1>, tp_shard<0>]>},
                      %ids: tensor<2xindex>) -> tensor<2x4xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  // expected-error @+1 {{but here the element read must be what the op yields}}
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%ids : tensor<2xindex>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%id: index, %out: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %a[%id, %j] : tensor<8x4xf32>
    %w = tensor.extract %b[%id, %j] : tensor<8x4xf32>
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

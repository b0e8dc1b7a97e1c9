// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-kernels=report -verify-diagnostics | FileCheck %s
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=block-size=100 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=max-blocks=0 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=sm-count=0 2>&1 | FileCheck %s --check-prefix=SMS
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=split-min-elements=0 2>&1 | FileCheck %s --check-prefix=MIN
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels="report sm-count=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=SM1
// BLOCK: option block-size must be a multiple of 32 between 32 and 1024, got 100
// GRID: option max-blocks must be between 1 and 2^31 - 1, got 0
// SMS: option sm-count must be between 1 and 65536, got 0
// MIN: option split-min-elements must be at least 1, got 0

// Elementwise: one thread per element, flattened over the loops in
// row-major order (the last loop fastest), in a grid-stride loop: 8 x 64 =
// 512 elements, 256 threads per block, 2 blocks. The loop takes 4 elements
// a grid apart (all loaded and computed before the first store) over the
// whole groups of 4 x 512 (none here), then the rest one at a time. (The
// arguments of a function no call reaches have no known alignment: the
// vectorized mapping of gpu-kernels-vectorized.mlir does not apply.)
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func private @elementwise
func.func private @elementwise(%x: memref<8x64xf32>, %b: memref<8xf32>, %y: memref<8x64xf32>) {
  // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
  // CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[GX:[a-z0-9_]+]] = %[[C2]], %{{.*}}, %{{.*}}) threads(%[[TX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]]
  // CHECK: %[[START:.*]] = arith.addi %{{.*}}, %[[TX]]
  // CHECK: %[[STEP:.*]] = arith.muli %[[GX]], %{{.*}}
  // CHECK: %[[GROUP:.*]] = arith.muli %[[STEP]], %{{.*}}
  // CHECK: %[[WHOLE:.*]] = arith.muli %{{.*}}, %[[GROUP]]
  // CHECK: scf.for %{{.*}} = %[[START]] to %[[WHOLE]] step %[[GROUP]]
  // CHECK-COUNT-4: math.exp
  // CHECK-NOT: memref.load
  // CHECK-COUNT-4: memref.store
  // CHECK: %[[REST:.*]] = arith.addi %[[WHOLE]], %[[START]]
  // CHECK: scf.for %[[I:[a-z0-9_]+]] = %[[REST]] to %{{.*}} step %[[STEP]]
  // CHECK: %[[J:.*]] = arith.remui %[[I]], %{{.*}}
  // CHECK: %[[R:.*]] = arith.divui %[[I]], %{{.*}}
  // CHECK: memref.load %{{.*}}[%[[R]], %[[J]]]
  // CHECK: memref.load %{{.*}}[%[[R]]]
  // CHECK: math.exp
  // CHECK: memref.store %{{.*}}, %{{.*}}[%[[R]], %[[J]]]
  // CHECK: gpu.terminator
  // CHECK-NOT: linalg.generic
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<8x64xf32>, memref<8xf32>) outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.subf %a, %c : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row max after a -inf fill (a softmax's first reduction): one warp per
// row, the fill folded in as the initial value (no load of the output, no
// second launch). Lanes stride the row by 32 from the identity, then a
// butterfly of shuffles, and lane 0 stores. 16 rows: 8 warps per block.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @row_max
func.func @row_max(%x: memref<16x128xf32>, %m: memref<16xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  // CHECK-NOT: linalg.fill
  // CHECK: gpu.launch
  // CHECK: %[[WARP:.*]] = arith.divui %{{.*}}, %{{.*}} : index
  // CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %{{.*}} : index
  // CHECK: scf.for %[[ROW:[a-z0-9_]+]] =
  // CHECK: %[[ID:.*]] = arith.constant 0xFF800000 : f32
  // CHECK: scf.for %[[E:[a-z0-9_]+]] = %[[LANE]] to %{{.*}} step %{{.*}} iter_args(%[[P:.*]] = %[[ID]])
  // CHECK: memref.load %{{.*}}[%[[ROW]], %[[E]]]
  // CHECK: arith.maximumf
  // CHECK: gpu.shuffle xor %{{.*}}, %{{.*}}, %{{.*}} : f32
  // CHECK-COUNT-4: gpu.shuffle xor
  // CHECK: scf.if
  // CHECK-NOT: memref.load
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
  // CHECK: memref.store %{{.*}}, %{{.*}}[%[[ROW]]]
  linalg.fill ins(%ninf : f32) outs(%m : memref<16xf32>)
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x128xf32>) outs(%m : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bf16 row sum: the shuffles carry the 16 bits widened to a 32-bit word.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @row_sum_bf16
func.func @row_sum_bf16(%x: memref<4x64xbf16>, %s: memref<4xbf16>) {
  // CHECK: arith.bitcast %{{.*}} : bf16 to i16
  // CHECK: arith.extui %{{.*}} : i16 to i32
  // CHECK: gpu.shuffle xor %{{.*}} : i32
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xbf16>) outs(%s : memref<4xbf16>) {
  ^bb0(%a: bf16, %acc: bf16):
    %r = arith.addf %acc, %a : bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// A column sum (a bias gradient): the reduction loop is outermost, so one
// thread per column (consecutive threads read consecutive columns), the
// accumulator in a register over the rows: loaded once, stored once.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @column_sum
func.func @column_sum(%x: memref<64x32xf32>, %s: memref<32xf32>) {
  // CHECK: gpu.launch
  // CHECK: scf.for %[[J:[a-z0-9_]+]] =
  // CHECK: %[[INIT:.*]] = memref.load %{{.*}}[%[[J]]]
  // CHECK: %[[SUM:.*]] = scf.for %[[I:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]])
  // CHECK: memref.load %{{.*}}[%[[I]], %[[J]]]
  // CHECK: arith.addf
  // CHECK: memref.store %[[SUM]], %{{.*}}[%[[J]]]
  // CHECK-NOT: gpu.shuffle
  // expected-remark @below {{GPU kernel: reduction, one thread per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%s : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A reduction whose body is not `acc <op> x` (a masked max, as a causal
// softmax has): one thread per output element, in order.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @masked_max
func.func @masked_max(%x: memref<8x64xf32>, %m: memref<8xf32>) {
  // CHECK: gpu.launch
  // CHECK: scf.for %[[I:[a-z0-9_]+]] =
  // CHECK: scf.for %[[J:[a-z0-9_]+]] =
  // CHECK: arith.cmpi ugt, %[[J]], %[[I]] : index
  // CHECK-NOT: gpu.shuffle
  // expected-remark @below {{GPU kernel: reduction, one thread per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c = arith.cmpi ugt, %j, %i : index
    %s = arith.select %c, %acc, %r : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Contiguous copies are device memcpys (a buffer with an offset as an
// identity-layout view at its address: gpu-to-llvm lowers only those); a
// strided one is an elementwise kernel.
// CHECK-LABEL: func.func @copies
func.func @copies(%a: memref<128xf32>, %b: memref<128xf32, strided<[1], offset: 8>>,
                  %c: memref<2x8xf32, strided<[1296, 1]>>, %d: memref<2x8xf32>) {
  // CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %{{.*}} : memref<128xf32, strided<[1], offset: 8>>
  // CHECK: %[[ADDR:.*]] = arith.addi %[[BASE]]
  // CHECK: %[[I64:.*]] = arith.index_cast %[[ADDR]] : index to i64
  // CHECK: llvm.inttoptr %[[I64]]
  // CHECK: %[[VIEW:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<128xf32>
  // CHECK: gpu.memcpy %[[VIEW]], %{{.*}} : memref<128xf32>, memref<128xf32>
  memref.copy %a, %b : memref<128xf32> to memref<128xf32, strided<[1], offset: 8>>
  // CHECK: gpu.launch
  // CHECK: memref.load %{{.*}} : memref<2x8xf32, strided<[1296, 1]>>
  // CHECK: memref.store %{{.*}} : memref<2x8xf32>
  // CHECK-NOT: memref.copy
  // expected-remark @below {{GPU kernel: elementwise, one thread per element}}
  memref.copy %c, %d : memref<2x8xf32, strided<[1296, 1]>> to memref<2x8xf32>
  return
}

// -----

// An input at an offset known only at run time (a rank's part of a
// tensor-parallel value, sliced at its index on the axis): kernel arguments
// are bare pointers, so the kernel reads an identity-layout view at the
// slice's address, made before the fill the kernel folds in.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @dynamic_offset_input
func.func @dynamic_offset_input(%x: memref<8x32xf32>, %rank: index, %s: memref<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %c4 = arith.constant 4 : index
  %off = arith.muli %rank, %c4 : index
  %part = memref.subview %x[%off, 0] [4, 32] [1, 1] : memref<8x32xf32> to memref<4x32xf32, strided<[32, 1], offset: ?>>
  // CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<4x32xf32, strided<[32, 1], offset: ?>>
  // CHECK: %[[VIEW:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<4x32xf32>
  // CHECK-NOT: linalg.fill
  // CHECK: gpu.launch
  // CHECK: memref.load %[[VIEW]]
  // CHECK-NOT: offset: ?
  // CHECK: gpu.terminator
  linalg.fill ins(%zero : f32) outs(%s : memref<32xf32>)
  // expected-remark @below {{GPU kernel: reduction, one thread per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%part : memref<4x32xf32, strided<[32, 1], offset: ?>>) outs(%s : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// An output indexed by a reduction loop: one thread runs the op.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @serial
func.func @serial(%x: memref<4x4xf32>, %y: memref<4xf32>) {
  // CHECK: gpu.launch
  // CHECK-NOT: arith.muli
  // CHECK: scf.for %{{.*}} = %{{.*}} to %c4{{.*}} step
  // CHECK: scf.for %{{.*}} = %{{.*}} to %c4{{.*}} step
  // expected-remark @below {{GPU kernel: one thread (an output is indexed by a reduction loop)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A sum of squares over 2^20 elements into one f64 (the optimizer's
// per-parameter norm): one warp would run it alone, so it is split. Pass 1:
// one full wave (132 SMs x 8 blocks of 256 threads) capped at a warp per
// 256 elements: 4,096 warps, each reducing its contiguous segment (lanes by
// 32, 4 elements loaded per iteration and combined in order, then the
// rest; then shuffles: an f64 travels as two 32-bit words) into partials[w],
// 8 warps (8 consecutive segments) per block, 203 blocks: 1,619 segments of
// 648 elements, sqrt(2.5 x 2^20) partials, which balance pass 1's rounds of
// loads against pass 2's. Pass 2: one warp combines the 1,619 partials in
// order, then lane 0 adds the output's initial value (the folded fill) and
// stores. The partials are a view of the rank's device scratch buffer
// (fsdprt_gpu_scratch, 1,619 x 8 bytes, 13,056 with the alignment): no
// allocation, no free.
#in = affine_map<(i) -> (i)>
#out = affine_map<(i) -> ()>
// CHECK-LABEL: func.func @split_sum_of_squares
func.func @split_sum_of_squares(%x: memref<1048576xf32>, %s: memref<f64>) {
  %zero = arith.constant 0.0 : f64
  // CHECK-NOT: linalg.fill
  // CHECK: %[[BYTES:.*]] = llvm.mlir.constant(13056 : i64) : i64
  // CHECK: %[[PTR:.*]] = {{(func.)?}}call @fsdprt_gpu_scratch(%[[BYTES]]) : (i64) -> !llvm.ptr
  // CHECK: llvm.insertvalue %[[PTR]], %{{.*}}[0]
  // CHECK: llvm.insertvalue %[[PTR]], %{{.*}}[1]
  // CHECK: %[[SCRATCH:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<{{.*}}> to memref<13056xi8>
  // CHECK: %[[PARTIALS:.*]] = memref.view %[[SCRATCH]][%{{.*}}][] : memref<13056xi8> to memref<1619xf64>
  // CHECK-DAG: %[[C512:.*]] = arith.constant 203 : index
  // CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
  // CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C512]], %{{.*}}, %{{.*}}) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]]
  // CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %{{.*}} : index
  // CHECK: scf.for %[[ITEM:[a-z0-9_]+]] =
  // CHECK: %[[SEG:.*]] = arith.remui %[[ITEM]], %{{.*}} : index
  // CHECK: %[[BEGIN:.*]] = arith.muli %[[SEG]], %{{.*}} : index
  // CHECK: %[[END:.*]] = arith.minui
  // CHECK: %[[FIRST:.*]] = arith.addi %[[BEGIN]], %[[LANE]] : index
  // CHECK: %[[GROUPS:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
  // CHECK: %[[MAIN:.*]] = scf.for %[[E:[a-z0-9_]+]] = %[[FIRST]] to %[[GROUPS]] step %[[C128:.*]] iter_args
  // CHECK: memref.load %{{.*}}[%[[E]]] : memref<1048576xf32>
  // CHECK-COUNT-3: memref.load %{{.*}} : memref<1048576xf32>
  // CHECK-COUNT-4: arith.addf %{{.*}}, %{{.*}} : f64
  // CHECK: scf.for %[[E2:[a-z0-9_]+]] = %[[GROUPS]] to %[[END]] step %{{.*}} iter_args(%{{.*}} = %[[MAIN]])
  // CHECK: memref.load %{{.*}}[%[[E2]]] : memref<1048576xf32>
  // CHECK: arith.addf
  // CHECK-COUNT-10: gpu.shuffle xor %{{.*}} : i32
  // CHECK: scf.if
  // CHECK: memref.store %{{.*}}, %[[PARTIALS]][%[[ITEM]]] : memref<1619xf64>
  // CHECK: gpu.terminator
  // CHECK: gpu.launch
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args
  // CHECK: memref.load %[[PARTIALS]]
  // CHECK-COUNT-10: gpu.shuffle xor %{{.*}} : i32
  // CHECK: scf.if
  // CHECK-NOT: memref.load
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f64
  // CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f64>
  // CHECK: gpu.terminator
  // CHECK-NOT: memref.dealloc
  // CHECK: return
  linalg.fill ins(%zero : f64) outs(%s : memref<f64>)
  // With sm-count=1 one warp is enough:
  // SM1: gpu-kernels.mlir:[[@LINE+2]]:3: remark: GPU kernel: row reduction, one warp per output element (the fill before folded in)
  // expected-remark @below {{GPU kernel: row reduction split over 203 blocks (1619 warp partials of 648 elements per output element), then one warp per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<1048576xf32>) outs(%s : memref<f64>) {
  ^bb0(%a: f32, %acc: f64):
    %w = arith.extf %a : f32 to f64
    %sq = arith.mulf %w, %w : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  }
  return
}

// -----

// A few long rows (4 x 2^18): 807 segments of 325 per row (sqrt(2.5 x
// 2^18)), 404 blocks; the partials are [row][segment].
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @split_rows
func.func @split_rows(%x: memref<4x262144xf32>, %s: memref<4xf32>) {
  // CHECK: call @fsdprt_gpu_scratch
  // CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<13056xi8> to memref<3228xf32>
  // CHECK: gpu.launch
  // CHECK: gpu.launch
  // CHECK: memref.load %{{.*}} : memref<4xf32>
  // CHECK-NOT: memref.dealloc
  // expected-remark @below {{GPU kernel: row reduction split over 404 blocks (807 warp partials of 325 elements per output element), then one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x262144xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bias gradient over 8,192 rows (8 x 1024 tokens) of 768 columns: one
// thread per column would be 3 blocks. Split: 342 chunks of 24 rows (the
// last one 8 rows), one thread per (chunk, column), consecutive threads on
// consecutive columns: 1,026 blocks; each stores its partial at
// [column][chunk]. Pass 2: one warp per column combines its 342 partials
// (contiguous), then lane 0 adds the output's initial value.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @split_column_sum
func.func @split_column_sum(%x: memref<8192x768xf32>, %s: memref<768xf32>) {
  // CHECK: %[[PARTIALS:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<1050624xi8> to memref<262656xf32>
  // CHECK: %[[C1026:.*]] = arith.constant 1026 : index
  // CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1026]]
  // CHECK: scf.for %[[ITEM:[a-z0-9_]+]] =
  // CHECK: %[[C768:.*]] = arith.constant 768 : index
  // CHECK: %[[CHUNK:.*]] = arith.divui %[[ITEM]], %[[C768]]
  // CHECK: %[[COL:.*]] = arith.remui %[[ITEM]], %[[C768]]
  // CHECK: %[[BEGIN:.*]] = arith.muli %[[CHUNK]], %{{.*}} : index
  // CHECK: %[[END:.*]] = arith.minui
  // CHECK: scf.for %[[R:[a-z0-9_]+]] = %[[BEGIN]] to %{{.*}} step %{{.*}} iter_args
  // CHECK: memref.load %{{.*}}[%[[R]], %[[COL]]] : memref<8192x768xf32>
  // CHECK: scf.for %{{.*}} to %[[END]] step %{{.*}} iter_args
  // CHECK: %[[C342:.*]] = arith.constant 342 : index
  // CHECK: %[[ROWBASE:.*]] = arith.muli %[[COL]], %[[C342]]
  // CHECK: %[[AT:.*]] = arith.addi %[[ROWBASE]], %[[CHUNK]]
  // CHECK: memref.store %{{.*}}, %[[PARTIALS]][%[[AT]]]
  // CHECK-NOT: gpu.shuffle
  // CHECK: gpu.terminator
  // CHECK: gpu.launch
  // CHECK: scf.for %[[J:[a-z0-9_]+]] =
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args
  // CHECK: memref.load %[[PARTIALS]]
  // CHECK-COUNT-5: gpu.shuffle xor
  // CHECK: scf.if
  // CHECK: %[[INIT:.*]] = memref.load %{{.*}}[%[[J]]] : memref<768xf32>
  // CHECK: arith.addf %{{.*}}, %[[INIT]] : f32
  // CHECK: memref.store %{{.*}}, %{{.*}}[%[[J]]] : memref<768xf32>
  // CHECK-NOT: memref.dealloc
  // SM1: gpu-kernels.mlir:[[@LINE+2]]:3: remark: GPU kernel: reduction, one thread per output element
  // expected-remark @below {{GPU kernel: column reduction split over 1026 blocks (342 chunks of 24 rows), then one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8192x768xf32>) outs(%s : memref<768xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// LayerNorm's weight gradient over (batch, token) = 8 x 1024 rows: two
// reduction loops outside the column, flattened into 8,192 rows.
#in = affine_map<(b, t, c) -> (b, t, c)>
#out = affine_map<(b, t, c) -> (c)>
// CHECK-LABEL: func.func @split_norm_weight_grad
func.func @split_norm_weight_grad(%x: memref<8x1024x768xf32>, %y: memref<8x1024x768xf32>, %s: memref<768xf32>) {
  // CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<1050624xi8> to memref<262656xf32>
  // CHECK: arith.mulf
  // CHECK: arith.addf
  // expected-remark @below {{GPU kernel: column reduction split over 1026 blocks (342 chunks of 24 rows), then one warp per output element}}
  linalg.generic {indexing_maps = [#in, #in, #out], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x, %y : memref<8x1024x768xf32>, memref<8x1024x768xf32>) outs(%s : memref<768xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Reductions that fill the device, or are small, are not split: 1,024
// rows of 1,024 are 128 blocks of 8 warps (fewer than 132, so split into 4
// segments per row); 2,048 rows are 256 blocks; 64 x 512 elements are
// fewer than split-min-elements.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @split_or_not
func.func @split_or_not(%a: memref<1024x1024xf32>, %sa: memref<1024xf32>,
                        %b: memref<2048x1024xf32>, %sb: memref<2048xf32>,
                        %c: memref<64x512xf32>, %sc: memref<64xf32>) {
  // expected-remark @below {{GPU kernel: row reduction split over 512 blocks (4 warp partials of 256 elements per output element), then one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<1024x1024xf32>) outs(%sa : memref<1024xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  }
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%b : memref<2048x1024xf32>) outs(%sb : memref<2048xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  }
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%c : memref<64x512xf32>) outs(%sc : memref<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Integer reductions have combiners too: the count of the tokens a loss
// does not ignore (an i1 mask widened and added into an i64) is one warp
// (the i64 shuffled as two 32-bit words), not one thread; a max of i32
// rows starts from the smallest i32; a long i64 sum is split over blocks
// like a float one (integer sums are exact in any order).
#in = affine_map<(i) -> (i)>
#out = affine_map<(i) -> ()>
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @integer_reductions
func.func @integer_reductions(%mask: memref<8192xi1>, %count: memref<i64>,
                              %x: memref<16x128xi32>, %m: memref<16xi32>,
                              %big: memref<1048576xi64>, %s: memref<i64>) {
  %zero = arith.constant 0 : i64
  // CHECK-NOT: linalg.fill
  // CHECK: gpu.launch
  // CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[ZERO]])
  // CHECK: memref.load %{{.*}} : memref<8192xi1>
  // CHECK: arith.extui %{{.*}} : i1 to i64
  // CHECK: arith.addi
  // CHECK: arith.trunci %{{.*}} : i64 to i32
  // CHECK: gpu.shuffle xor %{{.*}} : i32
  // CHECK: scf.if
  // CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<i64>
  linalg.fill ins(%zero : i64) outs(%count : memref<i64>)
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element (the fill before folded in)}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%mask : memref<8192xi1>) outs(%count : memref<i64>) {
  ^bb0(%a: i1, %acc: i64):
    %w = arith.extui %a : i1 to i64
    %r = arith.addi %w, %acc : i64
    linalg.yield %r : i64
  }
  // CHECK: gpu.launch
  // CHECK: %[[SMALLEST:.*]] = arith.constant -2147483648 : i32
  // CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %[[SMALLEST]])
  // CHECK: arith.maxsi
  // CHECK: gpu.shuffle xor %{{.*}} : i32
  // expected-remark @below {{GPU kernel: row reduction, one warp per output element}}
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x128xi32>) outs(%m : memref<16xi32>) {
  ^bb0(%a: i32, %acc: i32):
    %r = arith.maxsi %acc, %a : i32
    linalg.yield %r : i32
  }
  // CHECK: call @fsdprt_gpu_scratch
  // CHECK: gpu.launch
  // CHECK: arith.addi
  // CHECK: gpu.launch
  // CHECK: arith.addi
  // expected-remark @below {{GPU kernel: row reduction split over 203 blocks (1619 warp partials of 648 elements per output element), then one warp per output element}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%big : memref<1048576xi64>) outs(%s : memref<i64>) {
  ^bb0(%a: i64, %acc: i64):
    %r = arith.addi %acc, %a : i64
    linalg.yield %r : i64
  }
  return
}

// -----

func.func @dynamic(%x: memref<?xf32>, %y: memref<?xf32>) {
  // expected-error @below {{cannot become a GPU kernel: dynamic loop bounds (compute=gpu needs static shapes)}}
  linalg.copy ins(%x : memref<?xf32>) outs(%y : memref<?xf32>)
  return
}

// -----

func.func @dynamic_copy(%x: memref<?xf32>, %y: memref<?xf32>) {
  // expected-error @below {{cannot become a GPU copy: compute=gpu needs ranked buffers of static shape}}
  memref.copy %x, %y : memref<?xf32> to memref<?xf32>
  return
}

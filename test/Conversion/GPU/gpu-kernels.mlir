// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-kernels=report -verify-diagnostics | FileCheck %s
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=block-size=100 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not fsdp-opt %s -split-input-file --fsdp-gpu-kernels=max-blocks=0 2>&1 | FileCheck %s --check-prefix=GRID
// BLOCK: option block-size must be a multiple of 32 between 32 and 1024, got 100
// GRID: option max-blocks must be between 1 and 2^31 - 1, got 0

// Elementwise: one thread per element, flattened over the loops in
// row-major order (the last loop fastest), in a grid-stride loop: 8 x 64 =
// 512 elements, 256 threads per block, 2 blocks.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: memref<8x64xf32>, %b: memref<8xf32>, %y: memref<8x64xf32>) {
  // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
  // CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[GX:[a-z0-9_]+]] = %[[C2]], %{{.*}}, %{{.*}}) threads(%[[TX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]]
  // CHECK: %[[START:.*]] = arith.addi %{{.*}}, %[[TX]]
  // CHECK: %[[STEP:.*]] = arith.muli %[[GX]], %{{.*}}
  // CHECK: scf.for %[[I:[a-z0-9_]+]] = %[[START]] to %{{.*}} step %[[STEP]]
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

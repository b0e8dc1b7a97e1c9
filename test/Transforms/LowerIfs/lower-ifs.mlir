// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(fsdp-lower-ifs))" | FileCheck %s
// The same output as convert-scf-to-cf:
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(fsdp-lower-ifs),convert-scf-to-cf)" > %t.ours
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --convert-scf-to-cf > %t.upstream
// RUN: diff %t.ours %t.upstream

// Run-time dealloc checks: ifs without results, one after another, each
// continuing in the next block.
// CHECK-LABEL: func.func @frees
// CHECK:         cf.cond_br %{{.*}}, ^bb1, ^bb2
// CHECK:       ^bb1:
// CHECK-NEXT:    memref.dealloc %{{.*}} : memref<4xf32>
// CHECK-NEXT:    cf.br ^bb2
// CHECK:       ^bb2:
// CHECK:         cf.cond_br %{{.*}}, ^bb3, ^bb4
// CHECK:       ^bb3:
// CHECK-NEXT:    memref.dealloc %{{.*}} : memref<8xf32>
// CHECK-NEXT:    cf.br ^bb4
// CHECK:       ^bb4:
// CHECK-NEXT:    return
// CHECK-NOT:   scf.if
func.func @frees(%a: memref<4xf32>, %b: memref<8xf32>, %p: memref<2xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %0 = memref.load %p[%c0] : memref<2xi1>
  scf.if %0 {
    memref.dealloc %a : memref<4xf32>
  }
  %1 = memref.load %p[%c1] : memref<2xi1>
  scf.if %1 {
    memref.dealloc %b : memref<8xf32>
  }
  return
}

// -----

// Results become arguments of the continuation block; a nested scf.if is
// lowered too.
// CHECK-LABEL: func.func @select
// CHECK:         cf.cond_br %arg0, ^bb1, ^bb4
// CHECK:       ^bb1:
// CHECK-NEXT:    cf.cond_br %arg1, ^bb2, ^bb3
// CHECK:       ^bb2:
// CHECK-NEXT:    "test.effect"
// CHECK-NEXT:    cf.br ^bb3
// CHECK:       ^bb3:
// CHECK-NEXT:    cf.br ^bb5(%arg2 : f32)
// CHECK:       ^bb4:
// CHECK-NEXT:    cf.br ^bb5(%arg3 : f32)
// CHECK:       ^bb5(%[[R:.*]]: f32):
// CHECK-NEXT:    cf.br ^bb6
// CHECK:       ^bb6:
// CHECK-NEXT:    return %[[R]] : f32
func.func @select(%c: i1, %d: i1, %x: f32, %y: f32) -> f32 {
  %r = scf.if %c -> f32 {
    scf.if %d {
      "test.effect"() : () -> ()
    }
    scf.yield %x : f32
  } else {
    scf.yield %y : f32
  }
  return %r : f32
}

// -----

// An scf.if in a loop body stays: the body must remain one block.
// CHECK-LABEL: func.func @in_loop
// CHECK:         scf.for
// CHECK:           scf.if
func.func @in_loop(%m: memref<4xf32>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    scf.if %c {
      memref.store %f, %m[%i] : memref<4xf32>
    }
  }
  return
}

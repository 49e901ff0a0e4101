// RUN: tessc-opt %s -p tess-hoist-constants | filecheck %s
// RUN: tessc-opt %s -p tess-hoist-constants,canonicalize | filecheck %s --check-prefix=CANON

// Constants leave a loop nest in one walk, ordered as canonicalize's sweeps order them:
// the outer loop's own first, then the inner loop's, each in program order.
func.func @nest(%m: memref<8x8xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %a = arith.constant 1.000000e+00 : f32
    scf.for %j = %c0 to %c8 step %c1 {
      %b = arith.constant 2.000000e+00 : f32
      %s = arith.mulf %x, %b : f32
      %c = arith.constant 3.000000e+00 : f32
      %t = arith.addf %s, %c : f32
      %u = arith.addf %t, %a : f32
      memref.store %u, %m[%i, %j] : memref<8x8xf32>
    }
    %d = arith.constant 4.000000e+00 : f32
    memref.store %d, %m[%i, %c0] : memref<8x8xf32>
  }
  func.return
}

// CHECK-LABEL: func.func @nest(
// CHECK:         %c8 = arith.constant 8 : index
// CHECK-NEXT:    %a = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %d = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:    %b = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %c = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:    scf.for %i = %c0 to %c8 step %c1 {
// CHECK-NEXT:      scf.for %j = %c0 to %c8 step %c1 {
// CHECK-NEXT:        %s = arith.mulf %x, %b : f32

// Canonicalize finds nothing left to hoist: the same order.
// CANON-LABEL: func.func @nest(
// CANON:         %a = arith.constant 1.000000e+00 : f32
// CANON-NEXT:    %d = arith.constant 4.000000e+00 : f32
// CANON-NEXT:    %b = arith.constant 2.000000e+00 : f32
// CANON-NEXT:    %c = arith.constant 3.000000e+00 : f32
// CANON-NEXT:    scf.for %i = %c0 to %c8 step %c1 {

// A one-iteration loop is canonicalize's to inline with its constant in place, and an
// scf.if it may inline: both nests are left alone.
func.func @left_alone(%m: memref<8xf32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c1 step %c1 {
    %v = memref.load %m[%i] : memref<8xf32>
    %k = arith.constant 4.000000e+00 : f32
    %q = arith.divf %v, %k : f32
    memref.store %q, %m[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %y = arith.constant 1.000000e+00 : f32
    scf.if %flag {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %m[%i] : memref<8xf32>
    }
  }
  func.return
}

// CHECK-LABEL: func.func @left_alone(
// CHECK:         scf.for %i = %c0 to %c1 step %c1 {
// CHECK-NEXT:      %v = memref.load %m[%i] : memref<8xf32>
// CHECK-NEXT:      %k = arith.constant 4.000000e+00 : f32
// CHECK:         scf.for %i_1 = %c0 to %c8 step %c1 {
// CHECK-NEXT:      %y = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      scf.if %flag {
// CHECK-NEXT:        %z = arith.constant 0.000000e+00 : f32

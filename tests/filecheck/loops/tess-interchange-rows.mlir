// RUN: tessc-opt %s -p 'tess-interchange-rows' | filecheck %s
// RUN: tessc-opt %s -p 'tess-interchange-rows{max-trip=8}' | filecheck %s --check-prefix=LONG

// tess-interchange-rows: a row loop (a packed block's rows) is split around its short
// inner loops (fewer than max-trip = 16 steps), each turned inside out: the class loop
// outside, the rows inside, where they vectorise. What runs between them stays in row
// loops of its own, in order; the pure ops a loop needs (the row index) are recomputed.
func.func private @softmax_rows(%z: memref<64x10xf32>, %h: memref<64x128xf32>, %m: memref<64x1xf32>, %e: memref<64x10xf32>, %s: memref<64x1xf32>, %l: memref<64x1xf32>, %i0: index, %n: index) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %rows = arith.minsi %c32, %n : index
  scf.for %ii = %c0 to %rows step %c1 {
    %i = arith.addi %i0, %ii : index
    scf.for %j = %c0 to %c128 step %c1 {
      %v = memref.load %h[%i, %j] : memref<64x128xf32>
      %zero = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %v, %zero : f32
      memref.store %r, %h[%i, %j] : memref<64x128xf32>
    }
    %ninf = arith.constant 0xFF800000 : f32
    memref.store %ninf, %m[%i, %c0] : memref<64x1xf32>
    scf.for %j = %c0 to %c10 step %c1 {
      %a = memref.load %m[%i, %c0] : memref<64x1xf32>
      %x = memref.load %z[%i, %j] : memref<64x10xf32>
      %b = arith.maximumf %a, %x : f32
      memref.store %b, %m[%i, %c0] : memref<64x1xf32>
    }
    scf.for %j = %c0 to %c10 step %c1 {
      %x = memref.load %z[%i, %j] : memref<64x10xf32>
      %a = memref.load %m[%i, %c0] : memref<64x1xf32>
      %d = arith.subf %x, %a : f32
      %x2 = math.exp %d : f32
      memref.store %x2, %e[%i, %j] : memref<64x10xf32>
    }
    %t = memref.load %m[%i, %c0] : memref<64x1xf32>
    %lt = math.log %t : f32
    memref.store %lt, %l[%i, %c0] : memref<64x1xf32>
    scf.yield
  }
  func.return
}
// CHECK-LABEL: func.func private @softmax_rows(
// CHECK:         scf.for %ii = %c0 to %rows step %c1 {
// CHECK-NEXT:      %i = arith.addi %i0, %ii : index
// CHECK-NEXT:      %ninf = arith.constant 0xff800000 : f32
// CHECK-NEXT:      scf.for %j = %c0 to %c128 step %c1 {
// CHECK:           }
// CHECK-NEXT:      memref.store %ninf, %m[%i, %c0] : memref<64x1xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for %[[J:.+]] = %c0 to %c10 step %c1 {
// CHECK-NEXT:      scf.for %[[II:.+]] = %c0 to %rows step %c1 {
// CHECK-NEXT:        %[[I:.+]] = arith.addi %i0, %[[II]] : index
// CHECK-NEXT:        %a = memref.load %m[%[[I]], %c0] : memref<64x1xf32>
// CHECK-NEXT:        %x = memref.load %z[%[[I]], %[[J]]] : memref<64x10xf32>
// CHECK-NEXT:        %b = arith.maximumf %a, %x : f32
// CHECK-NEXT:        memref.store %b, %m[%[[I]], %c0] : memref<64x1xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for %[[J2:.+]] = %c0 to %c10 step %c1 {
// CHECK-NEXT:      scf.for %[[II2:.+]] = %c0 to %rows step %c1 {
// CHECK-NEXT:        %[[I2:.+]] = arith.addi %i0, %[[II2]] : index
// CHECK:             math.exp
// CHECK-NEXT:        memref.store %{{.*}}, %e[%[[I2]], %[[J2]]] : memref<64x10xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for %[[II3:.+]] = %c0 to %rows step %c1 {
// CHECK-NEXT:      %[[I3:.+]] = arith.addi %i0, %[[II3]] : index
// CHECK-NEXT:      %t = memref.load %m[%[[I3]], %c0] : memref<64x1xf32>
// CHECK-NEXT:      %lt = math.log %t : f32
// CHECK-NEXT:      memref.store %lt, %l[%[[I3]], %c0] : memref<64x1xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// With max-trip = 8 a 10-class loop is not short: nothing changes.
// LONG-LABEL: func.func private @softmax_rows(
// LONG:         scf.for %ii
// LONG-NOT:     scf.for %ii
// LONG:         func.return

// Rows that are not independent are left alone: a column sum writes `out[j]` from every
// row (the rewrite would be legal here, but nothing shows it: no row index).
func.func private @column_sum(%x: memref<64x10xf32>, %out: memref<10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %a = memref.load %out[%j] : memref<10xf32>
      %v = memref.load %x[%i, %j] : memref<64x10xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %out[%j] : memref<10xf32>
    }
    scf.yield
  }
  func.return
}
// CHECK-LABEL: func.func private @column_sum(
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK:         scf.for %i = %c0 to %c64 step %c1 {
// CHECK-NEXT:      scf.for %j = %c0 to %c10 step %c1 {

// Row i reading row i + 1 of what the loop writes: not independent, left alone.
func.func private @shifted(%x: memref<65x10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    %next = arith.addi %i, %c1 : index
    scf.for %j = %c0 to %c10 step %c1 {
      %v = memref.load %x[%next, %j] : memref<65x10xf32>
      memref.store %v, %x[%i, %j] : memref<65x10xf32>
    }
    scf.yield
  }
  func.return
}
// CHECK-LABEL: func.func private @shifted(
// CHECK:         scf.for %i = %c0 to %c64 step %c1 {
// CHECK-NEXT:      %next = arith.addi %i, %c1 : index
// CHECK-NEXT:      scf.for %j = %c0 to %c10 step %c1 {

// A loaded value used by a later short loop would cross the split: left alone. So are
// rows too few to fill a vector (4 < min-rows = 8), and a short loop without loads (a
// fill: nothing to vectorise), which leaves no short loop to turn.
func.func private @crossing(%x: memref<64x10xf32>, %y: memref<64x10xf32>, %s: memref<64xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c10 = arith.constant 10 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    %scale = memref.load %s[%i] : memref<64xf32>
    scf.for %j = %c0 to %c10 step %c1 {
      %v = memref.load %x[%i, %j] : memref<64x10xf32>
      %w = arith.mulf %v, %scale : f32
      memref.store %w, %y[%i, %j] : memref<64x10xf32>
    }
    scf.yield
  }
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %v = memref.load %x[%i, %j] : memref<64x10xf32>
      memref.store %v, %y[%i, %j] : memref<64x10xf32>
    }
    scf.yield
  }
  scf.for %i = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %y[%i, %j] : memref<64x10xf32>
    }
    scf.yield
  }
  func.return
}
// CHECK-LABEL: func.func private @crossing(
// CHECK:         scf.for %i = %c0 to %c64 step %c1 {
// CHECK-NEXT:      %scale = memref.load %s[%i] : memref<64xf32>
// CHECK-NEXT:      scf.for %j = %c0 to %c10 step %c1 {
// CHECK:         scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK-NEXT:      scf.for %{{.*}} = %c0 to %c10 step %c1 {
// CHECK:         scf.for %{{.*}} = %c0 to %c64 step %c1 {
// CHECK-NEXT:      scf.for %{{.*}} = %c0 to %c10 step %c1 {
// CHECK-NEXT:        %zero = arith.constant

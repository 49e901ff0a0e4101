// tess-row-dots: the dot nest of a packed kernel's row loop becomes micro.mma tiles over
// 16 rows: b packed once before the packed nest ([k, j], then 6 zeros the 16-wide tile's
// last k step reads), per tile the segments before the dot on its rows, one micro.mma
// reading a's rows where they lie into the thread's rows of `dt`, then per row the tile's
// columns added to c and the segments after; the rows left over (35 = 2 x 16 + 3) keep
// their dots. Left alone: a row loop that writes across rows, a b the nest writes, a dot
// reading another row of a, a loop outside a packed nest, (by the gate) 4 columns of
// f32, and a loaded value the segments after the dot use.
// RUN: tessc-opt %s -p 'tess-row-dots{vector-bits=512}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-row-dots{vector-bits=512},canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA

func.func private @dots(%a: memref<70x32xf32>, %bt: memref<10x32xf32>, %c: memref<70x10xf32>, %m: memref<70x1xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c10 = arith.constant 10 : index
  %c35 = arith.constant 35 : index
  %c32 = arith.constant 32 : index
  "scf.parallel"(%c0, %c2, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    %i0 = arith.muli %g, %c35 : index
    scf.for %ii = %c0 to %c35 step %c1 {
      %i = arith.addi %i0, %ii : index
      scf.for %j = %c0 to %c10 step %c1 {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %c[%i, %j] : memref<70x10xf32>
      }
      scf.for %j = %c0 to %c10 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%i, %k] : memref<70x32xf32>
          %y = memref.load %bt[%j, %k] : memref<10x32xf32>
          %old = memref.load %c[%i, %j] : memref<70x10xf32>
          %p = arith.mulf %x, %y : f32
          %s = arith.addf %old, %p : f32
          memref.store %s, %c[%i, %j] : memref<70x10xf32>
        }
      }
      scf.for %j = %c0 to %c10 step %c1 {
        %v = memref.load %c[%i, %j] : memref<70x10xf32>
        %w = memref.load %m[%i, %c0] : memref<70x1xf32>
        %top = arith.maximumf %v, %w : f32
        memref.store %top, %m[%i, %c0] : memref<70x1xf32>
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func private @dots(
// CHECK:         %bq = memref.alloc() {alignment = 64 : i64} : memref<326xf32>
// CHECK-NEXT:    %dt = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
// CHECK-NEXT:    scf.for %j = %c0 to %c10 step %c1 {
// CHECK-NEXT:      scf.for %kk = %c0 to %c32 step %c1 {
// CHECK-NEXT:        %[[B:.*]] = memref.load %bt[%j, %kk] : memref<10x32xf32>
// CHECK-NEXT:        %[[ROW:.*]] = arith.muli %kk, %c10 : index
// CHECK-NEXT:        %[[AT:.*]] = arith.addi %[[ROW]], %j : index
// CHECK-NEXT:        memref.store %[[B]], %bq[%[[AT]]] : memref<326xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    scf.for %[[C:.*]] = %c0 to %[[SIX:.*]] step %c1 {
// CHECK-NEXT:      %[[PAD:.*]] = arith.addi %[[C]], %{{.*}} : index
// CHECK-NEXT:      memref.store %[[ZERO]], %bq[%[[PAD]]] : memref<326xf32>
// CHECK:         "scf.parallel"
// CHECK:           %dslot = arith.muli %g, %{{.*}} : index
// CHECK-NEXT:      scf.for %rt = %{{.*}} to %[[TILES:.*]] step %{{.*}} {
// CHECK-NEXT:        %t0 = arith.muli %rt, %[[R:.*]] : index
// CHECK-NEXT:        scf.for %r = %{{.*}} to %[[R]] step %{{.*}} {
// CHECK-NEXT:          %ii = arith.addi %t0, %r : index
// CHECK-NEXT:          %i = arith.addi %i0, %ii : index
// CHECK:               memref.store %{{.*}}, %c[%i, %{{.*}}] : memref<70x10xf32>
// CHECK:             %[[ROW:.*]] = arith.addi %i0, %t0 : index
// CHECK-NEXT:        %[[OFF:.*]] = arith.muli %[[ROW]], %{{.*}} : index
// CHECK-NEXT:        %[[NO:.*]] = arith.constant false
// CHECK-NEXT:        micro.mma %a[%[[OFF]]], %bq[%{{.*}}], %{{.*}}, %dt[%dslot, %{{.*}}], %[[NO]] {rows = 16 : i64, cols = 16 : i64, lanes = 16 : i64, strides = array<i64: 32, 1, 10>} : memref<70x32xf32>, memref<326xf32>, memref<32x16xf32>
// CHECK-NEXT:        scf.for %r_1 = %{{.*}} to %[[R]] step %{{.*}} {
// CHECK:               scf.for %jj = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:            %[[OLD:.*]] = memref.load %c[%[[I:.*]], %jj] : memref<70x10xf32>
// CHECK-NEXT:            %[[AT:.*]] = arith.addi %dslot, %r_1 : index
// CHECK-NEXT:            %[[PART:.*]] = memref.load %dt[%[[AT]], %jj] : memref<32x16xf32>
// CHECK-NEXT:            %[[SUM:.*]] = arith.addf %[[OLD]], %[[PART]] : f32
// CHECK-NEXT:            memref.store %[[SUM]], %c[%[[I]], %jj] : memref<70x10xf32>
// CHECK:               arith.maximumf
// CHECK:           } {tess.register_tile = array<i64: 16, 16>}
// CHECK-NEXT:      scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             memref.load %a[%{{.*}}, %k] : memref<70x32xf32>
// CHECK:           } {tess.register_tile = array<i64: 1, 1>}

// NUMBA:      micro_mma_16x16x16_s32_1_10 = micro_mma(16, 16, 16, 32, 1, 10)
// NUMBA:      def dots(
// NUMBA:        micro_mma_16x16x16_s32_1_10(a, {{.*}}, bq, 0, 32, dt, (dslot, 0,), False)

func.func private @across_rows(%a: memref<40x32xf32>, %bt: memref<10x32xf32>, %c: memref<40x10xf32>, %s: memref<10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  "scf.parallel"(%c0, %c1, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    scf.for %i = %c0 to %c40 step %c1 {
      scf.for %j = %c0 to %c10 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%i, %k] : memref<40x32xf32>
          %y = memref.load %bt[%j, %k] : memref<10x32xf32>
          %old = memref.load %c[%i, %j] : memref<40x10xf32>
          %p = arith.mulf %x, %y : f32
          %q = arith.addf %old, %p : f32
          memref.store %q, %c[%i, %j] : memref<40x10xf32>
        }
      }
      scf.for %j = %c0 to %c10 step %c1 {
        %v = memref.load %c[%i, %j] : memref<40x10xf32>
        %t = memref.load %s[%j] : memref<10xf32>
        %u = arith.addf %t, %v : f32
        memref.store %u, %s[%j] : memref<10xf32>
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func private @across_rows(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

func.func private @rhs_written(%a: memref<40x32xf32>, %bt: memref<10x32xf32>, %c: memref<40x10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  "scf.parallel"(%c0, %c1, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    %one = arith.constant 1.000000e+00 : f32
    memref.store %one, %bt[%c0, %c0] : memref<10x32xf32>
    scf.for %i = %c0 to %c40 step %c1 {
      scf.for %j = %c0 to %c10 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%i, %k] : memref<40x32xf32>
          %y = memref.load %bt[%j, %k] : memref<10x32xf32>
          %old = memref.load %c[%i, %j] : memref<40x10xf32>
          %p = arith.mulf %x, %y : f32
          %q = arith.addf %old, %p : f32
          memref.store %q, %c[%i, %j] : memref<40x10xf32>
        }
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func private @rhs_written(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

func.func private @other_row(%a: memref<41x32xf32>, %bt: memref<10x32xf32>, %c: memref<40x10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  "scf.parallel"(%c0, %c1, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    scf.for %i = %c0 to %c40 step %c1 {
      %next = arith.addi %i, %c1 : index
      scf.for %j = %c0 to %c10 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%next, %k] : memref<41x32xf32>
          %y = memref.load %bt[%j, %k] : memref<10x32xf32>
          %old = memref.load %c[%i, %j] : memref<40x10xf32>
          %p = arith.mulf %x, %y : f32
          %q = arith.addf %old, %p : f32
          memref.store %q, %c[%i, %j] : memref<40x10xf32>
        }
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func private @other_row(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

func.func private @not_packed(%a: memref<40x32xf32>, %bt: memref<10x32xf32>, %c: memref<40x10xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  scf.for %i = %c0 to %c40 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      scf.for %k = %c0 to %c32 step %c1 {
        %x = memref.load %a[%i, %k] : memref<40x32xf32>
        %y = memref.load %bt[%j, %k] : memref<10x32xf32>
        %old = memref.load %c[%i, %j] : memref<40x10xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %old, %p : f32
        memref.store %q, %c[%i, %j] : memref<40x10xf32>
      }
    }
  }
  func.return
}

// CHECK-LABEL: func.func private @not_packed(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

func.func private @four_cols(%a: memref<40x32xf32>, %bt: memref<4x32xf32>, %c: memref<40x4xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  "scf.parallel"(%c0, %c1, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    scf.for %i = %c0 to %c40 step %c1 {
      scf.for %j = %c0 to %c4 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%i, %k] : memref<40x32xf32>
          %y = memref.load %bt[%j, %k] : memref<4x32xf32>
          %old = memref.load %c[%i, %j] : memref<40x4xf32>
          %p = arith.mulf %x, %y : f32
          %q = arith.addf %old, %p : f32
          memref.store %q, %c[%i, %j] : memref<40x4xf32>
        }
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func private @four_cols(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

func.func private @loaded_value_crosses(%a: memref<40x32xf32>, %bt: memref<10x32xf32>, %c: memref<40x10xf32>, %s: memref<40xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  "scf.parallel"(%c0, %c1, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%g: index):
    scf.for %i = %c0 to %c40 step %c1 {
      %scale = memref.load %s[%i] : memref<40xf32>
      %twice = arith.addf %scale, %scale : f32
      scf.for %j = %c0 to %c10 step %c1 {
        scf.for %k = %c0 to %c32 step %c1 {
          %x = memref.load %a[%i, %k] : memref<40x32xf32>
          %y = memref.load %bt[%j, %k] : memref<10x32xf32>
          %old = memref.load %c[%i, %j] : memref<40x10xf32>
          %p = arith.mulf %x, %y : f32
          %q = arith.addf %old, %p : f32
          memref.store %q, %c[%i, %j] : memref<40x10xf32>
        }
      }
      scf.for %j = %c0 to %c10 step %c1 {
        %v = memref.load %c[%i, %j] : memref<40x10xf32>
        %w = arith.mulf %v, %twice : f32
        memref.store %w, %c[%i, %j] : memref<40x10xf32>
      }
    }
    scf.reduce
  }) {tess.register_tile = array<i64: 8, 32>} : (index, index, index) -> ()
  func.return
}

// A value loaded before the dot and used after it (through a pure op) would cross the
// phases: left alone.
// CHECK-LABEL: func.func private @loaded_value_crosses(
// CHECK-NOT:     micro.mma
// CHECK:         func.return

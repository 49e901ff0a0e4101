// tess-tile: a row kernel holding an i-k-j contraction becomes one scf.parallel over row blocks, scf.for
// loops over k and j blocks, point loops counting from 0 (R rows x U k steps jammed into
// the unit-stride jj loop: the output loaded once and stored once per U steps, the
// left-hand side loaded above jj), min() extents for partial blocks and remainder loops
// only where sizes do not divide. Other nests are left alone.
// The structure checks take the size gate off (min-macs=0 short-depth=0: @grouped is tiny);
// GATE checks the default gate (tile.py: where it pays) at the end.
// RUN: tessc-opt %s -p 'tess-tile{tile-sizes=16,8,16 register-tile=2,2 min-parallel-blocks=1 min-macs=0 short-depth=0}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-tile{tile-sizes=16,8,16 register-tile=2,2 min-macs=0 short-depth=0}' | filecheck %s --check-prefix=BLOCKS
// RUN: tessc-opt %s -p tess-tile | filecheck %s --check-prefix=GATE

// 37x29x41: no tile divides; every block extent is a min(), with remainder loops.
func.func private @matmul(%a: memref<37x29xf32>, %b: memref<29x41xf32>, %out: memref<37x41xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c37 = arith.constant 37 : index
  %c29 = arith.constant 29 : index
  %c41 = arith.constant 41 : index
  "scf.parallel"(%c0, %c37, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c29 step %c1 {
      scf.for %j = %c0 to %c41 step %c1 {
        %l = memref.load %a[%i, %k] : memref<37x29xf32>
        %r = memref.load %b[%k, %j] : memref<29x41xf32>
        %acc = memref.load %out[%i, %j] : memref<37x41xf32>
        %p = arith.mulf %l, %r : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%i, %j] : memref<37x41xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @matmul(
// CHECK-DAG:     %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[C2:.+]] = arith.constant 2 : index
// CHECK-DAG:     %[[C3:.+]] = arith.constant 3 : index
// CHECK-DAG:     %[[C4:.+]] = arith.constant 4 : index
// CHECK-DAG:     %[[C8:.+]] = arith.constant 8 : index
// CHECK-DAG:     %[[C16:.+]] = arith.constant 16 : index
// CHECK:         "scf.parallel"(%[[C0]], %[[C3]], %[[C1]]) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%blk: index):
// CHECK-NEXT:      %i0 = arith.muli %blk, %[[C16]] : index
// CHECK-NEXT:      %[[RI:.+]] = arith.subi %c37, %i0 : index
// CHECK-NEXT:      %ni = arith.minsi %[[C16]], %[[RI]] : index
// CHECK-NEXT:      scf.for %kb = %[[C0]] to %[[C4]] step %[[C1]] {
// CHECK-NEXT:        %k0 = arith.muli %kb, %[[C8]] : index
// CHECK-NEXT:        %[[RK:.+]] = arith.subi %c29, %k0 : index
// CHECK-NEXT:        %nk = arith.minsi %[[C8]], %[[RK]] : index
// CHECK-NEXT:        scf.for %jb = %[[C0]] to %[[C3]] step %[[C1]] {
// CHECK-NEXT:          %j0 = arith.muli %jb, %[[C16]] : index
// CHECK-NEXT:          %[[RJ:.+]] = arith.subi %c41, %j0 : index
// CHECK-NEXT:          %nj = arith.minsi %[[C16]], %[[RJ]] : index
// CHECK-NEXT:          %nir = arith.divui %ni, %[[C2]] : index
// CHECK-NEXT:          scf.for %ir = %[[C0]] to %nir step %[[C1]] {
// CHECK-NEXT:            %[[IR2:.+]] = arith.muli %ir, %[[C2]] : index
// CHECK-NEXT:            %i = arith.addi %i0, %[[IR2]] : index
// CHECK-NEXT:            %[[I1:.+]] = arith.addi %i, %[[C1]] : index
// CHECK-NEXT:            %nku = arith.divui %nk, %[[C2]] : index
// CHECK-NEXT:            scf.for %ku = %[[C0]] to %nku step %[[C1]] {
// CHECK-NEXT:              %[[KU2:.+]] = arith.muli %ku, %[[C2]] : index
// CHECK-NEXT:              %k = arith.addi %k0, %[[KU2]] : index
// CHECK-NEXT:              %[[K1:.+]] = arith.addi %k, %[[C1]] : index
// CHECK-NEXT:              %[[A00:.+]] = memref.load %a[%i, %k] : memref<37x29xf32>
// CHECK-NEXT:              %[[A01:.+]] = memref.load %a[%i, %[[K1]]] : memref<37x29xf32>
// CHECK-NEXT:              %[[A10:.+]] = memref.load %a[%[[I1]], %k] : memref<37x29xf32>
// CHECK-NEXT:              %[[A11:.+]] = memref.load %a[%[[I1]], %[[K1]]] : memref<37x29xf32>
// CHECK-NEXT:              scf.for %jj = %[[C0]] to %nj step %[[C1]] {
// CHECK-NEXT:                %j = arith.addi %j0, %jj : index
// CHECK-NEXT:                %[[B0:.+]] = memref.load %b[%k, %j] : memref<29x41xf32>
// CHECK-NEXT:                %[[ACC0:.+]] = memref.load %out[%i, %j] : memref<37x41xf32>
// CHECK-NEXT:                %[[P00:.+]] = arith.mulf %[[A00]], %[[B0]] : f32
// CHECK-NEXT:                %[[S00:.+]] = arith.addf %[[ACC0]], %[[P00]] : f32
// CHECK-NEXT:                %[[B1:.+]] = memref.load %b[%[[K1]], %j] : memref<29x41xf32>
// CHECK-NEXT:                %[[P01:.+]] = arith.mulf %[[A01]], %[[B1]] : f32
// CHECK-NEXT:                %[[S01:.+]] = arith.addf %[[S00]], %[[P01]] : f32
// CHECK-NEXT:                memref.store %[[S01]], %out[%i, %j] : memref<37x41xf32>
// CHECK-NEXT:                %[[ACC1:.+]] = memref.load %out[%[[I1]], %j] : memref<37x41xf32>
// CHECK-NEXT:                %[[P10:.+]] = arith.mulf %[[A10]], %[[B0]] : f32
// CHECK-NEXT:                %[[S10:.+]] = arith.addf %[[ACC1]], %[[P10]] : f32
// CHECK-NEXT:                %[[P11:.+]] = arith.mulf %[[A11]], %[[B1]] : f32
// CHECK-NEXT:                %[[S11:.+]] = arith.addf %[[S10]], %[[P11]] : f32
// CHECK-NEXT:                memref.store %[[S11]], %out[%[[I1]], %j] : memref<37x41xf32>
// CHECK-NEXT:              }
// CHECK-NEXT:            }
// The k steps left over (nk mod 2), still two rows at a time.
// CHECK-NEXT:            %[[KDONE:.+]] = arith.muli %nku, %[[C2]] : index
// CHECK-NEXT:            %nkt = arith.subi %nk, %[[KDONE]] : index
// CHECK-NEXT:            %[[KSTART:.+]] = arith.addi %k0, %[[KDONE]] : index
// CHECK-NEXT:            scf.for %kt = %[[C0]] to %nkt step %[[C1]] {
// CHECK-NEXT:              %[[KT:.+]] = arith.addi %[[KSTART]], %kt : index
// CHECK:                   scf.for %{{.*}} = %[[C0]] to %nj step %[[C1]] {
// CHECK-COUNT-2:             memref.store
// CHECK-NEXT:              }
// CHECK-NEXT:            }
// CHECK-NEXT:          }
// The rows left over (ni mod 2), one at a time.
// CHECK-NEXT:          %[[IDONE:.+]] = arith.muli %nir, %[[C2]] : index
// CHECK-NEXT:          %nit = arith.subi %ni, %[[IDONE]] : index
// CHECK-NEXT:          %[[ISTART:.+]] = arith.addi %i0, %[[IDONE]] : index
// CHECK-NEXT:          scf.for %it = %[[C0]] to %nit step %[[C1]] {
// CHECK-NEXT:            %[[ROW:.+]] = arith.addi %[[ISTART]], %it : index
// CHECK:                 memref.load %a[%[[ROW]], %{{.*}}] : memref<37x29xf32>
// CHECK:                 memref.store %{{.*}}, %out[%[[ROW]], %{{.*}}] : memref<37x41xf32>
// CHECK:         scf.reduce
// CHECK-NEXT:    }) {tess.tile_sizes = array<i64: 16, 8, 16>, tess.register_tile = array<i64: 2, 2>} : (index, index, index) -> ()
// CHECK-NEXT:    func.return

// With 4 parallel blocks wanted (the default), the 37 rows get tiles of 10.
// BLOCKS-LABEL: func.func private @matmul(
// BLOCKS:         {tess.tile_sizes = array<i64: 10, 8, 16>, tess.register_tile = array<i64: 2, 2>}

// 64x32x64 with tiles that divide: constant extents, no min(), no remainder loops.
func.func private @even(%a: memref<64x32xf32>, %b: memref<32x64xf32>, %out: memref<64x64xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c32 = arith.constant 32 : index
  "scf.parallel"(%c0, %c64, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c32 step %c1 {
      scf.for %j = %c0 to %c64 step %c1 {
        %l = memref.load %a[%i, %k] : memref<64x32xf32>
        %r = memref.load %b[%k, %j] : memref<32x64xf32>
        %acc = memref.load %out[%i, %j] : memref<64x64xf32>
        %p = arith.mulf %l, %r : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%i, %j] : memref<64x64xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @even(
// CHECK-NOT:     arith.minsi
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%blk: index):
// CHECK-NEXT:      %i0 = arith.muli %blk, %{{.*}} : index
// CHECK-NEXT:      scf.for %kb =
// CHECK-NEXT:        %k0 = arith.muli %kb
// CHECK-NEXT:        scf.for %jb =
// CHECK-NEXT:          %j0 = arith.muli %jb
// CHECK-NEXT:          scf.for %ir =
// CHECK-NOT:     arith.minsi
// CHECK-NOT:     scf.for %it
// CHECK-NOT:     scf.for %kt
// CHECK:         {tess.tile_sizes = array<i64: 16, 8, 16>, tess.register_tile = array<i64: 2, 2>}
// CHECK-NEXT:    func.return

// A batched seed ((3,5,4,1) * (1,4,6) summed over the 4): the batch dim and the row
// blocks are one flat parallel dim; tiles bigger than a dim clamp to it (no kb, jb loops).
func.func private @batched_seed(%a: memref<3x5x4x1xf32>, %b: memref<1x4x6xf32>, %out: memref<3x5x6xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  "scf.parallel"(%c0, %c0, %c3, %c5, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%n: index, %i: index):
    scf.for %k = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c6 step %c1 {
        %l = memref.load %a[%n, %i, %k, %c0] : memref<3x5x4x1xf32>
        %r = memref.load %b[%c0, %k, %j] : memref<1x4x6xf32>
        %acc = memref.load %out[%n, %i, %j] : memref<3x5x6xf32>
        %p = arith.mulf %l, %r : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%n, %i, %j] : memref<3x5x6xf32>
      }
    }
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @batched_seed(
// CHECK:         "scf.parallel"(%c0, %c3, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%blk: index):
// CHECK-NEXT:      scf.for %ir =
// CHECK-NOT:       scf.for %kb
// CHECK-NOT:       scf.for %jb
// CHECK:           memref.load %a[%blk, %{{.*}}, %{{.*}}, %c0] : memref<3x5x4x1xf32>
// CHECK:           scf.for %jj = %c0 to %c6 step %c1 {
// CHECK-NEXT:        %{{.*}} = memref.load %b[%c0, %{{.*}}, %jj] : memref<1x4x6xf32>
// CHECK-NEXT:        %{{.*}} = memref.load %out[%blk, %{{.*}}, %jj] : memref<3x5x6xf32>
// CHECK:         {tess.tile_sizes = array<i64: 5, 4, 6>, tess.register_tile = array<i64: 2, 2>}
// BLOCKS-LABEL: func.func private @batched_seed(
// BLOCKS:          %n = arith.divui %blk, %c3 : index
// BLOCKS-NEXT:     %ib = arith.remui %blk, %c3 : index
// BLOCKS-NEXT:     %i0 = arith.muli %ib, %{{.*}} : index
// BLOCKS:        {tess.tile_sizes = array<i64: 2, 4, 6>, tess.register_tile = array<i64: 2, 2>}

// A row kernel from tess-fuse-epilogue: per row, the zero fill, the contraction, the bias
// + relu epilogue. Tiled, each block of rows runs the fill, then the blocked contraction,
// then the epilogue; a row-invariant constant moves to the block's start.
func.func private @grouped(%m: memref<6x8xf32>, %x: memref<6x5xf32>, %w: memref<5x8xf32>, %b: memref<8xf32>, %out: memref<6x8xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c5 = arith.constant 5 : index
  "scf.parallel"(%c0, %c6, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    %zero = arith.constant 0.000000e+00 : f32
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %zero, %m[%i, %j] : memref<6x8xf32>
    }
    scf.for %k = %c0 to %c5 step %c1 {
      scf.for %j = %c0 to %c8 step %c1 {
        %l = memref.load %x[%i, %k] : memref<6x5xf32>
        %r = memref.load %w[%k, %j] : memref<5x8xf32>
        %acc = memref.load %m[%i, %j] : memref<6x8xf32>
        %p = arith.mulf %l, %r : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %m[%i, %j] : memref<6x8xf32>
      }
    }
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %m[%i, %j] : memref<6x8xf32>
      %bj = memref.load %b[%j] : memref<8xf32>
      %y = arith.addf %v, %bj : f32
      %relu = arith.maximumf %y, %zero : f32
      memref.store %relu, %out[%i, %j] : memref<6x8xf32>
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// BLOCKS-LABEL: func.func private @grouped(
// BLOCKS:         "scf.parallel"(%c0, %[[NB:.+]], %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// BLOCKS-NEXT:    ^{{.*}}(%blk: index):
// BLOCKS-NEXT:      %i0 = arith.muli %blk, %[[TI:.+]] : index
// BLOCKS-NEXT:      %zero = arith.constant 0.000000e+00 : f32
// BLOCKS-NEXT:      scf.for %ii = %c0 to %[[TI]] step %c1 {
// BLOCKS-NEXT:        %[[I:.+]] = arith.addi %i0, %ii : index
// BLOCKS-NEXT:        scf.for %[[J:.+]] = %c0 to %c8 step %c1 {
// BLOCKS-NEXT:          memref.store %zero, %m[%[[I]], %[[J]]] : memref<6x8xf32>
// BLOCKS-NEXT:        }
// BLOCKS-NEXT:      }
// BLOCKS-NEXT:      %[[I1:.+]] = arith.addi %i0, %c1 : index
// BLOCKS-NEXT:      scf.for %ku =
// BLOCKS:               scf.for %jj = %c0 to %c8 step %c1 {
// BLOCKS:                 memref.store %{{.*}}, %m[%{{.*}}, %jj] : memref<6x8xf32>
// BLOCKS:           scf.for %ii{{.*}} = %c0 to %[[TI]] step %c1 {
// BLOCKS-NEXT:        %[[I2:.+]] = arith.addi %i0, %ii{{.*}} : index
// BLOCKS-NEXT:        scf.for %[[J2:.+]] = %c0 to %c8 step %c1 {
// BLOCKS-NEXT:          %{{.*}} = memref.load %m[%[[I2]], %[[J2]]] : memref<6x8xf32>
// BLOCKS:               %{{.*}} = arith.maximumf %{{.*}}, %zero : f32
// BLOCKS-NEXT:          memref.store %{{.*}}, %out[%[[I2]], %[[J2]]] : memref<6x8xf32>
// BLOCKS-NEXT:        }
// BLOCKS-NEXT:      }
// BLOCKS-NEXT:      scf.reduce
// BLOCKS-NEXT:    }) {tess.tile_sizes = array<i64: 2, 5, 8>, tess.register_tile = array<i64: 2, 2>}

// With one block of all 6 rows, the row loops have constant bounds.
// CHECK-LABEL: func.func private @grouped(
// CHECK:         ^{{.*}}(%blk: index):
// CHECK-NEXT:      %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      scf.for %ii = %c0 to %c6 step %c1 {
// CHECK:         {tess.tile_sizes = array<i64: 6, 5, 8>, tess.register_tile = array<i64: 2, 2>}

// A row sum (the reduction innermost) is not a contraction with a unit-stride loop: unchanged.
func.func private @row_sum(%x: memref<8x16xf32>, %out: memref<8xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  "scf.parallel"(%c0, %c8, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c16 step %c1 {
      %v = memref.load %x[%i, %k] : memref<8x16xf32>
      %acc = memref.load %out[%i] : memref<8xf32>
      %s = arith.addf %acc, %v : f32
      memref.store %s, %out[%i] : memref<8xf32>
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @row_sum(
// CHECK:         "scf.parallel"(%c0, %c8, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%i: index):
// CHECK-NEXT:      scf.for %k = %c0 to %c16 step %c1 {
// CHECK-NOT:     tess.tile_sizes
// CHECK:         func.return

// 64 x 16 x 64: 65,536 multiply-adds, but 16 k steps (< short-depth 20) over 64 columns
// (>= wide-cols 48): the plain i-k-j loop vectorises over j and is faster (6.9 us plain,
// 12.2 tiled): unchanged by default.
func.func private @short_wide(%a: memref<64x16xf32>, %b: memref<16x64xf32>, %out: memref<64x64xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  "scf.parallel"(%c0, %c64, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c16 step %c1 {
      scf.for %j = %c0 to %c64 step %c1 {
        %l = memref.load %a[%i, %k] : memref<64x16xf32>
        %r = memref.load %b[%k, %j] : memref<16x64xf32>
        %acc = memref.load %out[%i, %j] : memref<64x64xf32>
        %p = arith.mulf %l, %r : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%i, %j] : memref<64x64xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @short_wide(
// CHECK:         tess.tile_sizes

// By default: @matmul (43,993 multiply-adds, 29 k steps) and @even (32 k steps) are
// tiled; @batched_seed (360) and @grouped (240) are under min-macs (2^12); @short_wide is
// short and wide.
// GATE-LABEL: func.func private @matmul(
// GATE:         tess.tile_sizes
// GATE-LABEL: func.func private @even(
// GATE:         tess.tile_sizes
// GATE-LABEL: func.func private @batched_seed(
// GATE-NOT:     tess.tile_sizes
// GATE-LABEL: func.func private @grouped(
// GATE-NOT:     tess.tile_sizes
// GATE-LABEL: func.func private @row_sum(
// GATE-NOT:     tess.tile_sizes
// GATE-LABEL: func.func private @short_wide(
// GATE-NOT:     tess.tile_sizes
// GATE:         func.return

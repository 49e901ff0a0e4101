// tess-pack-matmul: a row kernel holding a large contraction becomes packed panels and a
// register-tile micro-kernel. One scf.parallel with an iteration per thread
// (micro.num_threads, at most `threads`); each, per k block, packs its own copy of B into
// NR-wide micro-panels (columns past the matrix clamped), then for each of its share of
// the row blocks packs A into MR-tall micro-panels (rows clamped), calls micro.mma per MR x
// NR tile (through its `ct` rows where the tile is partial), storing in the first k block
// (the zero fill is dropped) and adding after, and runs the bias + relu epilogue on the
// block's rows after the last k block. Scratch is allocated once, before the loops, one
// slot per thread. Small or non-matmul nests are left alone.
// RUN: tessc-opt %s -p 'tess-pack-matmul{min-work=1 min-rows=1 blocks=16,8,64 register-tile=4,16 vector-bits=512 threads=2 in-place-bytes=0}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-pack-matmul{min-work=1 min-rows=1 blocks=16,8,64 register-tile=4,16 vector-bits=512 threads=2 in-place-bytes=0}' | tessc-opt | filecheck %s
// RUN: tessc-opt %s -p 'tess-pack-matmul{vector-bits=256}' | filecheck %s --check-prefix=SMALL
// RUN: tessc-opt %s -p 'tess-pack-matmul{min-work=1 vector-bits=512}' | filecheck %s --check-prefix=INPLACE
// RUN: tessc-opt %s -p 'tess-pack-matmul{min-work=1 vector-bits=512},canonicalize,cse' -t numba | filecheck %s --check-prefix=INPLACE-NUMBA
// RUN: tessc-opt %s -p 'tess-pack-matmul{min-work=1 min-rows=1 vector-bits=256 threads=2 in-place-bytes=0},canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA

func.func private @dense(%out: memref<37x41xf32>, %a: memref<37x29xf32>, %b: memref<29x41xf32>, %c: memref<41xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c37 = arith.constant 37 : index
  %c41 = arith.constant 41 : index
  %c29 = arith.constant 29 : index
  "scf.parallel"(%c0, %c37, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %j = %c0 to %c41 step %c1 {
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %out[%i, %j] : memref<37x41xf32>
    }
    scf.for %k = %c0 to %c29 step %c1 {
      scf.for %jj = %c0 to %c41 step %c1 {
        %x = memref.load %a[%i, %k] : memref<37x29xf32>
        %y = memref.load %b[%k, %jj] : memref<29x41xf32>
        %acc = memref.load %out[%i, %jj] : memref<37x41xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%i, %jj] : memref<37x41xf32>
      }
    }
    scf.for %j2 = %c0 to %c41 step %c1 {
      %bias = memref.load %c[%j2] : memref<41xf32>
      %v = memref.load %out[%i, %j2] : memref<37x41xf32>
      %sum = arith.addf %v, %bias : f32
      %zero2 = arith.constant 0.000000e+00 : f32
      %relu = arith.maximumf %sum, %zero2 : f32
      memref.store %relu, %out[%i, %j2] : memref<37x41xf32>
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// MC = 8 (a multiple of MR = 4; 5 row blocks, shares of 16 and 21 rows for threads=2,
// where 4 blocks of 12 would give 24 and 13), KC = 8 (4 k blocks of 29), NC = 48 (41
// columns rounded up to NR = 16). Scratch per thread: an A block, a B panel, an edge tile.
// CHECK-LABEL: func.func private @dense(
// CHECK:         %ap = memref.alloc() {alignment = 64 : i64} : memref<128xf32>
// CHECK-NEXT:    %bp = memref.alloc() {alignment = 64 : i64} : memref<768xf32>
// CHECK-NEXT:    %ct = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
// CHECK-NEXT:    %threads = micro.num_threads
// CHECK-NEXT:    %groups = arith.minsi %threads, %{{.*}} : index
// One parallel loop, an iteration per thread: no thread waits for another in the call.
// CHECK-NEXT:    "scf.parallel"(%{{.*}}, %groups, %{{.*}})
// CHECK-NEXT:    ^{{.*}}(%g: index):
// CHECK-NEXT:      %bslot = arith.muli %g, %{{.*}} : index
// CHECK:           %lo = arith.divui %{{.*}}, %groups : index
// CHECK:           %hi = arith.divui %{{.*}}, %groups : index
// CHECK-NEXT:      scf.for %pc = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        %k0 = arith.muli %pc, %{{.*}} : index
// CHECK:             %kc = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:             %[[LAST:.+]] = arith.cmpi eq, %pc, %{{.*}} : index
// CHECK-NEXT:        %[[FIRST:.+]] = arith.cmpi eq, %pc, %c0 : index
// CHECK-NEXT:        %[[TRUE:.+]] = arith.constant true
// CHECK-NEXT:        %[[ACC:.+]] = arith.xori %[[FIRST]], %[[TRUE]] : i1
// The thread's own B panel, packed a row (k) at a time: contiguous reads of b.
// CHECK-NEXT:        scf.for %kk = %{{.*}} to %kc step %{{.*}} {
// CHECK-NEXT:          scf.for %jr = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:            %k = arith.addi %k0, %kk : index
// CHECK:                 %[[ROW:.+]] = arith.addi %bslot, %{{.*}} : index
// CHECK-NEXT:            scf.for %c{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                   %j = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:              %[[Y:.+]] = memref.load %b[%k, %j] : memref<29x41xf32>
// CHECK-NEXT:              %[[AT:.+]] = arith.addi %[[ROW]], %{{.*}} : index
// CHECK-NEXT:              memref.store %[[Y]], %bp[%[[AT]]] : memref<768xf32>
// Its share of the row blocks (at most all 5: the bound codegen counts as the work).
// CHECK:             %[[SHARE:.+]] = arith.subi %hi, %lo : index
// CHECK-NEXT:        %blocks = arith.minsi %[[SHARE]], %{{.*}} : index
// CHECK-NEXT:        scf.for %t = %{{.*}} to %blocks step %{{.*}} {
// CHECK-NEXT:          %ib = arith.addi %lo, %t : index
// CHECK-NEXT:          %i0 = arith.muli %ib, %{{.*}} : index
// CHECK:               %mi = arith.minsi %{{.*}}, %{{.*}} : index
// The zero fill is gone: the first k block stores instead of adding (%[[ACC]] false).
// CHECK-NOT:           memref.store %{{.*}}, %out
// CHECK:               %slot = arith.muli %g, %{{.*}} : index
// CHECK:               scf.for %ir = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                     %i = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:                %[[X:.+]] = memref.load %a[%i, %k_1] : memref<37x29xf32>
// CHECK:                     memref.store %[[X]], %ap[%{{.*}}] : memref<128xf32>
// CHECK:               scf.for %jr_1 = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                 %boff = arith.addi %bslot, %{{.*}} : index
// CHECK-NEXT:            scf.for %ir_1 = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                   %aoff = arith.addi %slot, %{{.*}} : index
// CHECK:                   scf.if %{{.*}} {
// CHECK-NEXT:                micro.mma %ap[%aoff], %bp[%boff], %kc, %out[%it, %{{.*}}], %[[ACC]] {rows = 4 : i64, cols = 16 : i64, lanes = 16 : i64} : memref<128xf32>, memref<768xf32>, memref<37x41xf32>
// CHECK-NEXT:              } else {
// CHECK-NEXT:                %[[EDGE:.+]] = arith.muli %g, %{{.*}} : index
// CHECK-NEXT:                %[[STORE:.+]] = arith.constant false
// CHECK-NEXT:                micro.mma %ap[%aoff], %bp[%boff], %kc, %ct[%[[EDGE]], %{{.*}}], %[[STORE]] {rows = 4 : i64, cols = 16 : i64, lanes = 16 : i64}
// CHECK:                     %[[PART:.+]] = memref.load %ct[%{{.*}}, %{{.*}}] : memref<8x16xf32>
// CHECK-NEXT:                %[[OLD:.+]] = memref.load %out[%{{.*}}, %{{.*}}] : memref<37x41xf32>
// CHECK-NEXT:                %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:                %[[KEPT:.+]] = arith.select %[[ACC]], %[[OLD]], %[[ZERO]] : f32
// CHECK-NEXT:                %[[NEW:.+]] = arith.addf %[[KEPT]], %[[PART]] : f32
// CHECK-NEXT:                memref.store %[[NEW]], %out[%{{.*}}, %{{.*}}] : memref<37x41xf32>
// CHECK:               scf.if %[[LAST]] {
// CHECK:                   arith.maximumf
// CHECK:           scf.reduce
// CHECK-NEXT:    }) {tess.tile_sizes = array<i64: 8, 8, 48>, tess.register_tile = array<i64: 4, 16>}
// CHECK-NOT:     "scf.parallel"
// CHECK:         func.return

// Below the default min-work (N * K * M = 43,993 <= 128^3): unchanged.
// SMALL-LABEL: func.func private @dense(
// SMALL-NOT:     micro.mma
// SMALL:         "scf.parallel"(%c0, %c37, %c1)

// The micro-kernel is one call of an intrinsic the module defines: on AVX2, 6 x 16 f32.
// A kernel this small is serial (the thread loop counts its body's work once), so its
// thread count is 1 (a parallel one reads Numba's: test_pack_matmul.py).
// NUMBA:       from numba import njit, types
// NUMBA:       from llvmlite import ir
// NUMBA:       def micro_mma(rows, cols, lanes, sr=1, sk=None, skb=None):
// NUMBA:       micro_mma_6x16x8 = micro_mma(6, 16, 8)
// NUMBA:       def dense(
// NUMBA:         ap = np.empty((
// NUMBA:         threads = 1
// NUMBA-NEXT:    groups = min(threads, 2)
// NUMBA-NEXT:    for g in range(groups):
// NUMBA:         micro_mma_6x16x8(ap, {{[a-z0-9_]+}}, bp, boff, 29, out, ({{.*}}), False)

// `a @ w.T` as tess-fuse leaves it above the threshold: a dot nest (k innermost) whose
// fill and bias + relu run per element. Packing B reads w[j, k]; the fill is dropped (one
// k block: micro.mma stores), the epilogue runs per element of the block's rows after it.
func.func private @dot(%out: memref<9x20xf32>, %a: memref<9x7xf32>, %w: memref<20x7xf32>, %c: memref<20xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c9 = arith.constant 9 : index
  %c20 = arith.constant 20 : index
  %c7 = arith.constant 7 : index
  "scf.parallel"(%c0, %c0, %c9, %c20, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %zero = arith.constant 0.000000e+00 : f32
    memref.store %zero, %out[%i, %j] : memref<9x20xf32>
    scf.for %k = %c0 to %c7 step %c1 {
      %x = memref.load %a[%i, %k] : memref<9x7xf32>
      %y = memref.load %w[%j, %k] : memref<20x7xf32>
      %acc = memref.load %out[%i, %j] : memref<9x20xf32>
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      memref.store %s, %out[%i, %j] : memref<9x20xf32>
    }
    %bias = memref.load %c[%j] : memref<20xf32>
    %v = memref.load %out[%i, %j] : memref<9x20xf32>
    %sum = arith.addf %v, %bias : f32
    %relu = arith.maximumf %sum, %zero : f32
    memref.store %relu, %out[%i, %j] : memref<9x20xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
// CHECK-LABEL: func.func private @dot(
// CHECK:         %bp = memref.alloc() {alignment = 64 : i64} : memref<448xf32>
// CHECK:         "scf.parallel"
// w's rows are contiguous along k: packed panel by panel (k inner), NR rows of w at a time.
// CHECK:           scf.for %jr = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        scf.for %kk = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:               %[[Y:.+]] = memref.load %w[%j, %kk] : memref<20x7xf32>
// CHECK-NEXT:          %{{.*}} = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:          memref.store %[[Y]], %bp[%{{.*}}] : memref<448xf32>
// CHECK:           scf.for %t = %{{.*}} to %blocks step %{{.*}} {
// CHECK-NOT:         memref.store %{{.*}}, %out
// CHECK:           %[[STORE:.+]] = arith.constant false
// CHECK-NOT:       scf.for %ii
// CHECK:           micro.mma %ap[%slot], %bp[%boff], %{{.*}}, %out[%i0, %{{.*}}], %[[STORE]] {rows = 4 : i64, cols = 16 : i64, lanes = 16 : i64}
// CHECK:           scf.for %ii = %{{.*}} to %mi step %{{.*}} {
// CHECK:             scf.for %jj = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          %bias = memref.load %c[%jj] : memref<20xf32>
// CHECK:               arith.maximumf %{{.*}}, %zero : f32
// SMALL-LABEL: func.func private @dot(
// SMALL-NOT:     micro.mma

// The dense kernel's 37 rows and 41 columns leave partial tiles, which would read past A's
// rows and B's row ends in place: both stay packed (the edge tile `ct` is there).
// INPLACE-LABEL: func.func private @dense(
// INPLACE:         %ap = memref.alloc()
// INPLACE-NEXT:    %bp = memref.alloc()
// INPLACE-NEXT:    %ct = memref.alloc()
// INPLACE:         micro.mma %ap[%{{.*}}], %bp[%{{.*}}], {{.*}} {rows = 8 : i64, cols = 32 : i64, lanes = 16 : i64} :
// `a @ w.T` of 9 rows: B's columns are w's rows (not unit-stride), so B cannot be read in
// place, and packing all of B for 9 rows does not pay: left to `tess-tile`.
// INPLACE-LABEL: func.func private @dot(
// INPLACE-NOT:     micro.mma


// Operands read where they lie (`in-place-bytes`, 768 KiB by default): `a.T @ b` of 10
// rows, the MLP step's `dz.T @ h` in small. A product of fewer than `min-rows` rows is one
// tile as tall as it (10 x 32: 20 zmm accumulators) when B can be read in place; A(i, k) =
// a[k, i] is read through strides (a row: 1 element, a k step: 10), B(k, j) = b[k, j] one
// row (64 elements) per k step. Nothing is copied, nothing allocated, no edge tile.
func.func private @transposed_lhs(%out: memref<10x64xf32>, %a: memref<12x10xf32>, %b: memref<12x64xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c12 = arith.constant 12 : index
  %c64 = arith.constant 64 : index
  "scf.parallel"(%c0, %c10, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %j = %c0 to %c64 step %c1 {
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %out[%i, %j] : memref<10x64xf32>
    }
    scf.for %k = %c0 to %c12 step %c1 {
      scf.for %jj = %c0 to %c64 step %c1 {
        %x = memref.load %a[%k, %i] : memref<12x10xf32>
        %y = memref.load %b[%k, %jj] : memref<12x64xf32>
        %acc = memref.load %out[%i, %jj] : memref<10x64xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        memref.store %s, %out[%i, %jj] : memref<10x64xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
// INPLACE-LABEL: func.func private @transposed_lhs(
// INPLACE-NOT:     memref.alloc
// INPLACE-NOT:     memref.store
// INPLACE:         micro.mma %a[%{{.*}}], %b[%{{.*}}], %{{.*}}, %out[%{{.*}}, %{{.*}}], %{{.*}} {rows = 10 : i64, cols = 32 : i64, lanes = 16 : i64, strides = array<i64: 1, 10, 64>} : memref<12x10xf32>, memref<12x64xf32>, memref<10x64xf32>
// INPLACE-NOT:     micro.mma
// INPLACE-NOT:     memref.store
// INPLACE:         func.return
// The same over 4-row tiles of 16 columns and A too large (`in-place-bytes=0`): packed.
// SMALL-LABEL: func.func private @transposed_lhs(
// SMALL-NOT:     micro.mma


// One intrinsic per tile and layout: its strides are compile-time constants.
// INPLACE-NUMBA:   micro_mma_10x32x16_s1_10_64 = micro_mma(10, 32, 16, 1, 10, 64)
// INPLACE-NUMBA:   def transposed_lhs(
// INPLACE-NUMBA-NOT: np.empty
// INPLACE-NUMBA:     micro_mma_10x32x16_s1_10_64(a, {{[a-z0-9_]+}}, b, {{[a-z0-9_]+}}, 12, out, ({{.*}}), False)

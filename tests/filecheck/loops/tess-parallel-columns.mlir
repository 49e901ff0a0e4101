// RUN: tessc-opt %s -p 'tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-parallel-columns' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-parallel-columns,canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA

// x.sum(dim=0) of (4096, 512): linalg-to-loops leaves `for i { for j }` (no parallel
// loop); the pass makes 8 blocks of 64 columns the parallel loop, rows inside.
func.func @colsum(%x: tensor<4096x512xf32>) -> tensor<512xf32> {
  %0 = tess.sum %x dims = [0] : tensor<4096x512xf32> -> tensor<512xf32>
  func.return %0 : tensor<512xf32>
}

// CHECK-LABEL: func.func private @colsum_kernel_1(
// CHECK:         "scf.parallel"(%{{.*}}, %[[BLOCKS:.*]], %{{.*}})
// CHECK-NEXT:    ^bb0(%jb: index):
// CHECK:           %j0 = arith.muli %jb, %[[B:.*]] : index
// CHECK-NEXT:      scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        scf.for %jj = %{{.*}} to %[[B]] step %{{.*}} {
// CHECK-NEXT:          %[[J:.*]] = arith.addi %j0, %jj : index
// CHECK-NEXT:          memref.load %x[%{{.*}}, %[[J]]] : memref<4096x512xf32>
// CHECK:               memref.store %{{.*}}, %{{.*}}[%[[J]]] : memref<512xf32>
// CHECK:             scf.reduce

// Threaded: each thread runs a share (lo, hi) of the 8 column blocks.
// NUMBA:       parallel_for(colsum_kernel_1, 8, x, out0)
// NUMBA-LABEL: def colsum_kernel_1(lo, hi, x, out0):
// NUMBA-NEXT:      for jb in range(lo, hi):
// NUMBA-NEXT:          j0 = jb * 64
// NUMBA-NEXT:          for i0 in range(4096):
// NUMBA-NEXT:              for jj in range(64):

// Two leading reduction dims, and a width (100) that 64 does not divide: two blocks, the
// last one min(64, 100 - j0) wide (at most 64 iterations: 48x64x100 is enough work for
// a parallel kernel).
func.func @sum01(%x: tensor<48x64x100xf64>) -> tensor<100xf64> {
  %0 = tess.sum %x dims = [0, 1] : tensor<48x64x100xf64> -> tensor<100xf64>
  func.return %0 : tensor<100xf64>
}

// CHECK-LABEL: func.func private @sum01_kernel_1(
// CHECK:         "scf.parallel"
// CHECK:           %j0 = arith.muli %jb
// CHECK:           %nb = arith.minsi
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        scf.for
// CHECK-NEXT:          scf.for %jj = %{{.*}} to %nb

// NUMBA:       parallel_for(sum01_kernel_1, 2, x, out0)
// NUMBA-LABEL: def sum01_kernel_1(lo, hi, x, out0):
// NUMBA:           nb = min(

// A row sum is parallel already, and a column sum 16 wide is too narrow to split.
func.func @rows(%x: tensor<64x512xf32>, %y: tensor<4096x16xf32>) -> (tensor<64xf32>, tensor<16xf32>) {
  %0 = tess.sum %x dims = [1] : tensor<64x512xf32> -> tensor<64xf32>
  %1 = tess.sum %y dims = [0] : tensor<4096x16xf32> -> tensor<16xf32>
  func.return %0, %1 : tensor<64xf32>, tensor<16xf32>
}

// CHECK-LABEL: func.func private @rows_kernel_1(
// CHECK-NEXT:    arith.constant
// CHECK:         "scf.parallel"
// CHECK-NOT:       %jb
// CHECK:       func.func private @rows_kernel_3(
// CHECK-NOT:     scf.parallel
// CHECK:         func.return
